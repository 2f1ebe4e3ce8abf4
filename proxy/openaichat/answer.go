package openaichat

import (
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// turnRef is the codec's handle on one choice of an answer, for replay.
type turnRef struct {
	body   []byte
	choice int
}

// DecodeAnswer implements api.Codec, for the client's answer and for
// re-query answers alike.
func (*codec) DecodeAnswer(body []byte) (*neutral.Answer, error) {
	// The answer is split with jsonx, which checks the JSON grammar in the
	// same pass; only the tool calls are decoded into structs. The rest of
	// an answer (usage details, logprobs, annotations) is not needed, and
	// reflection over it was the largest cost of the plain path. Values
	// inside the checked top level are split without a second check.
	top, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	rawChoices := top.Get("choices")
	if jsonx.IsNull(rawChoices) {
		return nil, ErrShape
	}
	choices, err := jsonx.SplitArray(rawChoices)
	if err != nil {
		return nil, ErrShape
	}
	id, _ := jsonx.Unquote(top.Get("id"))
	a := &neutral.Answer{Body: body, Choices: make([]*neutral.Turn, len(choices))}
	if u := top.Get("usage"); !jsonx.IsNull(u) {
		var ok bool
		if a.Usage, ok = readUsage(u); !ok {
			return nil, ErrShape
		}
	}
	for i, raw := range choices {
		t := &neutral.Turn{ResponseID: id, Raw: turnRef{body: body, choice: i}}
		if err := readChoice(t, raw); err != nil {
			return nil, err
		}
		if i == 0 {
			t.Usage = a.Usage
		}
		a.Choices[i] = t
	}
	return a, nil
}

// readChoice reads one choice's text, calls and finish reason into t.
func readChoice(t *neutral.Turn, raw []byte) error {
	c, err := jsonx.SplitObject(raw)
	if err != nil {
		return ErrShape
	}
	if m := c.Get("message"); !jsonx.IsNull(m) {
		msg, err := jsonx.SplitObject(m)
		if err != nil {
			return ErrShape
		}
		t.Text, _ = jsonx.Unquote(msg.Get("content"))
		if tcs := msg.Get("tool_calls"); !jsonx.IsNull(tcs) {
			elems, err := jsonx.SplitArray(tcs)
			if err != nil {
				return ErrShape
			}
			for _, e := range elems {
				tc, err := readCall(e)
				if err != nil {
					return err
				}
				t.Calls = append(t.Calls, neutralCall(tc))
			}
		}
	}
	finish := ""
	if fr := c.Get("finish_reason"); !jsonx.IsNull(fr) {
		var ok bool
		if finish, ok = jsonx.Unquote(fr); !ok {
			return ErrShape
		}
	}
	t.Stop = stopOf(finish)
	return nil
}

// readUsage reads the token counts of a usage object taken from a checked
// answer or chunk.
func readUsage(raw []byte) (neutral.Usage, bool) {
	obj, err := jsonx.SplitObject(raw)
	if err != nil {
		return neutral.Usage{}, false
	}
	in, ok1 := jsonx.Int(obj.Get("prompt_tokens"))
	out, ok2 := jsonx.Int(obj.Get("completion_tokens"))
	return neutral.Usage{Input: in, Output: out}, ok1 && ok2
}

// readCall reads one tool call of a checked answer into its wire form. A
// field of the wrong type makes the answer unreadable, as a struct decoder
// would.
func readCall(raw []byte) (wireCall, error) {
	var tc wireCall
	obj, err := jsonx.SplitObject(raw)
	if err != nil {
		if jsonx.IsNull(raw) {
			return tc, nil
		}
		return tc, ErrShape
	}
	if tc.ID, err = optString(obj.Get("id")); err != nil {
		return tc, ErrShape
	}
	if tc.Type, err = optString(obj.Get("type")); err != nil {
		return tc, ErrShape
	}
	if fn := obj.Get("function"); !jsonx.IsNull(fn) {
		fo, err := jsonx.SplitObject(fn)
		if err != nil {
			return tc, ErrShape
		}
		tc.Function = &wireFunction{}
		if tc.Function.Name, err = optString(fo.Get("name")); err != nil {
			return tc, ErrShape
		}
		tc.Function.Arguments = fo.Get("arguments")
	}
	if cu := obj.Get("custom"); !jsonx.IsNull(cu) {
		co, err := jsonx.SplitObject(cu)
		if err != nil {
			return tc, ErrShape
		}
		tc.Custom = &wireCustom{}
		if tc.Custom.Name, err = optString(co.Get("name")); err != nil {
			return tc, ErrShape
		}
	}
	return tc, nil
}

// neutralCall is a wire call in neutral form.
func neutralCall(tc wireCall) neutral.ToolCall {
	c := neutral.ToolCall{ID: tc.ID}
	switch {
	case tc.Type == "custom" && tc.Custom != nil:
		c.Kind, c.Name = neutral.Custom, tc.Custom.Name
	case (tc.Type == "function" || tc.Type == "") && tc.Function != nil:
		c.Kind, c.Name = neutral.Function, tc.Function.Name
		if s, ok := jsonx.Unquote(tc.Function.Arguments); ok {
			c.Args = []byte(s)
		} else {
			// Arguments must be a JSON string; anything else is the wrong
			// shape, reported as such and never coerced.
			c.Args = tc.Function.Arguments
			c.BadShape = true
		}
	default:
		// Chat Completions defines only function and custom calls; anything
		// else is a call the agent could not dispatch, so it is judged as a
		// badly shaped function call instead of being waved through.
		c.Kind, c.BadShape = neutral.Function, true
		if tc.Function != nil {
			c.Name = tc.Function.Name
		} else if tc.Custom != nil {
			c.Name = tc.Custom.Name
		}
	}
	return c
}
