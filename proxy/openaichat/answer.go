package openaichat

import (
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
)

// turnRef is the codec's handle on one choice of an answer, for replay.
type turnRef struct {
	body   []byte
	choice int
}

// legacyRef is a turnRef whose call is a function_call. It is a type of
// its own so that every other turn's handle stays as small as it was.
type legacyRef struct{ turnRef }

// DecodeAnswer implements api.Codec, for the client's answer and for
// re-query answers alike. A call answering a request that offered tools in
// both forms is refused: what was offered is not known.
func (cd *codec) DecodeAnswer(body []byte) (*neutral.Answer, error) {
	a, err := cd.decodeAnswer(body)
	if err == nil && cd.mixed {
		for _, t := range a.Choices {
			if len(t.Calls) > 0 {
				return nil, ErrTwoForms
			}
		}
	}
	return a, err
}

// decodeAnswer reads an answer's choices.
func (*codec) decodeAnswer(body []byte) (*neutral.Answer, error) {
	// One pass reads the answer into a tape: its grammar, its UTF-8 and
	// the place of every value, and the keys are checked against the
	// protocol keys on the tape. Only the calls are then decoded; the
	// rest of an answer (usage details, logprobs, annotations) is not
	// needed, and no value is read twice.
	tx := jsonx.GetText()
	defer tx.Release()
	if err := tx.Readable(body, api.ProtocolKeys); err != nil {
		return nil, err
	}
	if tx.Kind(0) != '{' {
		return nil, jsonx.ErrSyntax
	}
	choices := tx.Get(0, "choices")
	if tx.Kind(choices) != '[' {
		return nil, ErrShape
	}
	id, _ := tx.Str(tx.Get(0, "id"))
	a := &neutral.Answer{Body: body, Choices: make([]*neutral.Turn, tx.Len(choices))}
	if u := tx.Get(0, "usage"); !tx.Null(u) {
		var ok bool
		if a.Usage, ok = tapeUsage(tx, u); !ok {
			return nil, ErrShape
		}
	}
	for i, j := 0, choices+1; i < len(a.Choices); i, j = i+1, tx.Next(j) {
		t := &neutral.Turn{ResponseID: id}
		legacy, err := readChoice(t, tx, j)
		if err != nil {
			return nil, err
		}
		t.Raw = turnRef{body: body, choice: i}
		if legacy {
			t.Raw = legacyRef{turnRef{body: body, choice: i}}
		}
		if i == 0 {
			t.Usage = a.Usage
		}
		a.Choices[i] = t
	}
	return a, nil
}

// readChoice reads the text, calls and finish reason of the choice at
// node c into t. legacy reports a call in the legacy form, function_call.
func readChoice(t *neutral.Turn, tx *jsonx.Text, c int) (legacy bool, err error) {
	if tx.Kind(c) != '{' {
		return false, ErrShape
	}
	if m := tx.Get(c, "message"); !tx.Null(m) {
		if tx.Kind(m) != '{' {
			return false, ErrShape
		}
		t.Text, _ = tx.Str(tx.Get(m, "content"))
		if err := readToolCalls(t, tx, tx.Get(m, "tool_calls")); err != nil {
			return false, err
		}
		if fc := tx.Get(m, "function_call"); !tx.Null(fc) {
			// One message with calls in both forms: which of them the agent
			// runs is its SDK's choice, so neither can be judged alone.
			if len(t.Calls) > 0 {
				return false, ErrTwoForms
			}
			wc, err := tapeFunctionCall(tx, fc)
			if err != nil {
				return false, err
			}
			t.Calls, legacy = []neutral.ToolCall{neutralCall(wc)}, true
		}
	}
	finish := ""
	if fr := tx.Get(c, "finish_reason"); !tx.Null(fr) {
		var ok bool
		if finish, ok = tx.Str(fr); !ok {
			return false, ErrShape
		}
	}
	t.Stop = stopOf(finish)
	return legacy, nil
}

// readToolCalls reads the tool_calls array at node tcs (absent or null:
// none) into t.
func readToolCalls(t *neutral.Turn, tx *jsonx.Text, tcs int) error {
	if tx.Null(tcs) {
		return nil
	}
	if tx.Kind(tcs) != '[' {
		return ErrShape
	}
	if tx.Len(tcs) > 0 {
		t.Calls = make([]neutral.ToolCall, 0, tx.Len(tcs))
	}
	for k, e := 0, tcs+1; k < tx.Len(tcs); k, e = k+1, tx.Next(e) {
		tc, err := tapeCall(tx, e)
		if err != nil {
			return err
		}
		t.Calls = append(t.Calls, neutralCall(tc))
	}
	return nil
}

// tapeFunctionCall reads the legacy function_call at node fc as the call
// it is: a function call with the synthetic id.
func tapeFunctionCall(tx *jsonx.Text, fc int) (wireCall, error) {
	tc := wireCall{ID: legacyCallID, Type: "function", Function: &wireFunction{}}
	if tx.Kind(fc) != '{' {
		return tc, ErrShape
	}
	var err error
	if tc.Function.Name, err = tapeOptString(tx, tx.Get(fc, "name")); err != nil {
		return tc, ErrShape
	}
	args := tx.Get(fc, "arguments")
	tc.Function.Arguments = tx.Raw(args)
	tc.Function.decoded, tc.Function.decodedOK = tx.Bytes(args)
	return tc, nil
}

// readFunctionCall is tapeFunctionCall for a message of a request.
func readFunctionCall(raw []byte) (wireCall, error) {
	tc := wireCall{ID: legacyCallID, Type: "function", Function: &wireFunction{}}
	fo, err := jsonx.SplitObject(raw)
	if err != nil {
		return tc, ErrShape
	}
	if tc.Function.Name, err = optString(fo.Get("name")); err != nil {
		return tc, ErrShape
	}
	tc.Function.Arguments = fo.Get("arguments")
	return tc, nil
}

// tapeUsage reads the token counts of the usage object at node u.
func tapeUsage(tx *jsonx.Text, u int) (neutral.Usage, bool) {
	if tx.Kind(u) != '{' {
		return neutral.Usage{}, false
	}
	in, ok1 := jsonx.Int(tx.Raw(tx.Get(u, "prompt_tokens")))
	out, ok2 := jsonx.Int(tx.Raw(tx.Get(u, "completion_tokens")))
	return neutral.Usage{Input: in, Output: out}, ok1 && ok2
}

// tapeCall is readCall for the call at node i of an answer's tape.
func tapeCall(tx *jsonx.Text, i int) (wireCall, error) {
	var tc wireCall
	switch tx.Kind(i) {
	case 'n':
		return tc, nil
	case '{':
	default:
		return tc, ErrShape
	}
	var err error
	if tc.ID, err = tapeOptString(tx, tx.Get(i, "id")); err != nil {
		return tc, ErrShape
	}
	if tc.Type, err = tapeOptString(tx, tx.Get(i, "type")); err != nil {
		return tc, ErrShape
	}
	if fn := tx.Get(i, "function"); !tx.Null(fn) {
		if tx.Kind(fn) != '{' {
			return tc, ErrShape
		}
		tc.Function = &wireFunction{}
		if tc.Function.Name, err = tapeOptString(tx, tx.Get(fn, "name")); err != nil {
			return tc, ErrShape
		}
		args := tx.Get(fn, "arguments")
		tc.Function.Arguments = tx.Raw(args)
		tc.Function.decoded, tc.Function.decodedOK = tx.Bytes(args)
	}
	if cu := tx.Get(i, "custom"); !tx.Null(cu) {
		if tx.Kind(cu) != '{' {
			return tc, ErrShape
		}
		tc.Custom = &wireCustom{}
		if tc.Custom.Name, err = tapeOptString(tx, tx.Get(cu, "name")); err != nil {
			return tc, ErrShape
		}
	}
	return tc, nil
}

// tapeOptString is optString for node i.
func tapeOptString(tx *jsonx.Text, i int) (string, error) {
	if tx.Null(i) {
		return "", nil
	}
	s, ok := tx.Str(i)
	if !ok {
		return "", errField("of a string")
	}
	return s, nil
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
		args, ok := tc.Function.decoded, tc.Function.decodedOK
		if !ok {
			args, ok = jsonx.Unquoted(tc.Function.Arguments)
		}
		if ok {
			c.Args = args
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
