package openaichat

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaiwire"
	"github.com/toolgate/toolgate/proxy/sse"
)

// ErrorEvent implements api.Stream. The openai SDKs raise an APIError for a
// data event carrying an "error" object; [DONE] closes the stream cleanly.
func (s *stream) ErrorEvent(f neutral.Failure, esc *neutral.Escalated, _ api.Sent) []byte {
	var body []byte
	if esc != nil {
		body = openaiwire.EscalationError(esc)
	} else {
		body = openaiwire.Error(f)
	}
	out := sse.AppendEvent(nil, "", body)
	return sse.AppendEvent(out, "", doneData)
}

// UpstreamError implements api.Stream: the upstream's error chunk as it
// came, then [DONE], which OpenAI-compatible servers send after one and
// clients that do not raise on the error wait for. A [DONE] of the
// upstream's own after it is not passed on.
func (s *stream) UpstreamError(ev neutral.HeldEvent, _ api.Sent) []byte {
	out := append([]byte(nil), ev.Raw...)
	return sse.AppendEvent(out, "", doneData)
}

// streamEncoder rewrites the held chunks of one stream. A replaced call
// is sent whole in its first chunk, and a choice that responds with text
// gets the text in its first chunk; what follows them is dropped.
type streamEncoder struct {
	actions  []neutral.Action
	sentCall map[[2]int]bool
	sentText map[int]bool
}

// Encode implements api.Stream. Held chunks that carry nothing that changed
// go out as the upstream sent them; the others are rewritten: a replaced
// call is sent whole in its first chunk (same index and id) and its other
// fragments are dropped; a choice that responds becomes text.
func (s *stream) Encode(held []neutral.HeldEvent, actions []neutral.Action, _ api.Sent) ([]byte, error) {
	e := streamEncoder{actions: actions, sentCall: map[[2]int]bool{}, sentText: map[int]bool{}}
	var out []byte
	for _, ev := range held {
		if len(ev.Data) == 0 || bytes.Equal(ev.Data, doneData) || !touches(ev.Data, actions) {
			out = append(out, ev.Raw...)
			continue
		}
		var err error
		if out, err = e.event(out, ev); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// event appends the rewritten chunk of ev to out, or nothing when only
// fragments of a replaced call were in it.
func (e *streamEncoder) event(out []byte, ev neutral.HeldEvent) ([]byte, error) {
	obj, choices, err := splitChoices(ev.Data)
	if err != nil {
		return nil, err
	}
	var escBody []byte
	for k, raw := range choices {
		c, err := jsonx.ParseObject(raw)
		if err != nil {
			return nil, err
		}
		var idx int
		if err := json.Unmarshal(c.Get("index"), &idx); err != nil || idx < 0 || idx >= len(e.actions) {
			continue
		}
		act := &e.actions[idx]
		switch {
		case act.Kind == neutral.Respond:
			choices[k] = e.respond(c, idx, act).Bytes()
			if act.Escalation != nil {
				escBody = act.Escalation.Body
			}
		case rewrites(act):
			if c, err = e.replace(c, idx, act); err != nil {
				return nil, err
			}
			if c != nil {
				choices[k] = c.Bytes()
			}
		}
	}
	if emptied(choices) && jsonx.IsNull(obj.Get("usage")) {
		// Only fragments of a replaced call were here; the whole call
		// went out with its first chunk.
		return out, nil
	}
	obj = obj.Set("choices", jsonx.AppendArray(nil, choices))
	if escBody != nil {
		obj = obj.Set("toolgate_escalation", escBody)
	}
	return sse.AppendEvent(out, ev.Event, obj.Bytes()), nil
}

// respond turns a choice's delta into the action's text, once per choice.
func (e *streamEncoder) respond(c jsonx.Object, idx int, act *neutral.Action) jsonx.Object {
	delta := jsonx.Object{}
	// The role opens the message; only what the model said after it is
	// replaced.
	if old, err := jsonx.ParseObject(c.Get("delta")); err == nil && old.Has("role") {
		delta = delta.Set("role", old.Get("role"))
	}
	if !e.sentText[idx] {
		e.sentText[idx] = true
		delta = delta.Set("content", jsonx.String(act.Text))
	}
	c = c.Set("delta", delta.Bytes())
	if !jsonx.IsNull(c.Get("finish_reason")) {
		c = c.Set("finish_reason", []byte(`"stop"`))
	}
	return c
}

// replace sends each replaced call of the choice whole in place of its
// first fragment and drops the others. A nil object with no error leaves
// the choice as it was (its delta carries no calls).
func (e *streamEncoder) replace(c jsonx.Object, idx int, act *neutral.Action) (jsonx.Object, error) {
	delta, err := jsonx.ParseObject(c.Get("delta"))
	if err != nil {
		return nil, nil
	}
	if fc := delta.Get("function_call"); !jsonx.IsNull(fc) {
		return e.replaceLegacy(c, delta, idx, act), nil
	}
	if delta.Get("tool_calls") == nil {
		return nil, nil
	}
	calls, err := jsonx.ParseArray(delta.Get("tool_calls"))
	if err != nil {
		return nil, err
	}
	var kept [][]byte
	for _, rc := range calls {
		var dc deltaCall
		if err := json.Unmarshal(rc, &dc); err != nil {
			return nil, err
		}
		if !act.ChangedAt(dc.Index) {
			kept = append(kept, rc)
			continue
		}
		key := [2]int{idx, dc.Index}
		if e.sentCall[key] {
			continue
		}
		e.sentCall[key] = true
		kept = append(kept, wholeCall(dc.Index, act.Calls[dc.Index]))
	}
	if len(kept) == 0 {
		delta = delta.Delete("tool_calls")
	} else {
		delta = delta.Set("tool_calls", jsonx.AppendArray(nil, kept))
	}
	return c.Set("delta", delta.Bytes()), nil
}

// replaceLegacy is replace for a legacy call: the replacement goes out
// whole as the first function_call fragment, in that shape, and the other
// fragments are dropped.
func (e *streamEncoder) replaceLegacy(c, delta jsonx.Object, idx int, act *neutral.Action) jsonx.Object {
	if !act.ChangedAt(0) {
		return nil
	}
	key := [2]int{idx, 0}
	if e.sentCall[key] {
		delta = delta.Delete("function_call")
	} else {
		e.sentCall[key] = true
		nc := act.Calls[0]
		delta = delta.Set("function_call", jsonx.Object{
			{Key: "name", Value: jsonx.String(nc.Name)},
			{Key: "arguments", Value: jsonx.String(string(nc.Args))},
		}.Bytes())
	}
	return c.Set("delta", delta.Bytes())
}

// wholeCall is a replacement call as one delta at the original's index.
func wholeCall(index int, nc neutral.ToolCall) []byte {
	return jsonx.Object{
		{Key: "index", Value: []byte(fmt.Sprint(index))},
		{Key: "id", Value: jsonx.String(nc.ID)},
		{Key: "type", Value: []byte(`"function"`)},
		{Key: "function", Value: jsonx.Object{
			{Key: "name", Value: jsonx.String(nc.Name)},
			{Key: "arguments", Value: jsonx.String(string(nc.Args))},
		}.Bytes()},
	}.Bytes()
}

// touches reports whether a chunk may carry something Encode must change:
// it belongs to a choice that does not go out as the upstream sent it.
func touches(data []byte, actions []neutral.Action) bool {
	for i := range actions {
		if rewrites(&actions[i]) {
			return bytes.Contains(data, []byte(`"choices"`))
		}
	}
	return false
}

// emptied reports whether every choice of a rewritten chunk is left with an
// empty delta and no finish reason.
func emptied(choices [][]byte) bool {
	for _, raw := range choices {
		var c struct {
			Delta        map[string]json.RawMessage `json:"delta"`
			FinishReason json.RawMessage            `json:"finish_reason"`
			Logprobs     json.RawMessage            `json:"logprobs"`
		}
		if json.Unmarshal(raw, &c) != nil || len(c.Delta) > 0 || !jsonx.IsNull(c.FinishReason) || !jsonx.IsNull(c.Logprobs) {
			return false
		}
	}
	return len(choices) > 0
}
