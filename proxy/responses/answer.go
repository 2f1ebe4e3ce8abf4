package responses

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// Output item types that carry a call toolgate judges.
const (
	typeFunctionCall = "function_call"
	typeCustomCall   = "custom_tool_call"
)

// turnItems is a turn in replayable form: the answer's output items, each
// exactly as the upstream sent it, and where each judged call sits.
type turnItems struct {
	items [][]byte
	// callAt maps a position in Turn.Calls to its index in items, which is
	// the call's output_index.
	callAt []int
}

// wireItem is what toolgate reads of one output item.
type wireItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// isCallType reports an output item type whose calls are judged.
func isCallType(t string) bool { return t == typeFunctionCall || t == typeCustomCall }

// readTurn builds the neutral turn of a list of output items: the judged
// calls in output order and the visible text. Other items (reasoning,
// hosted tool calls, MCP) are not judged and stay where they are.
func readTurn(items [][]byte) (*recovery.Turn, *turnItems) {
	t := &recovery.Turn{}
	ti := &turnItems{items: items}
	var text strings.Builder
	for i, raw := range items {
		var it wireItem
		if json.Unmarshal(raw, &it) != nil {
			// An item of an unknown shape is not a call; it is replayed as is.
			continue
		}
		switch it.Type {
		case typeFunctionCall:
			c := validate.ToolCall{ID: it.CallID, Name: it.Name, Kind: validate.Function}
			if s, ok := jsonx.Unquote(it.Arguments); ok {
				c.Args = []byte(s)
			} else {
				// Arguments must be a JSON string; anything else is the
				// wrong shape, reported as such and never coerced.
				c.Args, c.BadShape = it.Arguments, true
			}
			t.Calls = append(t.Calls, c)
			ti.callAt = append(ti.callAt, i)
		case typeCustomCall:
			c := validate.ToolCall{ID: it.CallID, Name: it.Name, Kind: validate.Custom}
			if s, ok := jsonx.Unquote(it.Input); ok {
				c.Args = []byte(s)
			} else {
				c.Args, c.BadShape = it.Input, true
			}
			t.Calls = append(t.Calls, c)
			ti.callAt = append(ti.callAt, i)
		case "message":
			for _, p := range it.Content {
				if p.Type == "output_text" {
					text.WriteString(p.Text)
				}
			}
		}
	}
	t.Text = text.String()
	t.Raw = ti
	return t, ti
}

// wireHead is the part of a response object outside its output.
type wireHead struct {
	ID                string `json:"id"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *wireUsage `json:"usage"`
}

type wireUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

func (h *wireHead) usage() recovery.Usage {
	if h.Usage == nil {
		return recovery.Usage{}
	}
	return recovery.Usage{Input: h.Usage.InputTokens, Output: h.Usage.OutputTokens}
}

// truncated reports an answer the token limit cut off inside a call.
func (h *wireHead) truncated(calls int) bool {
	return h.Status == "incomplete" && h.IncompleteDetails != nil &&
		h.IncompleteDetails.Reason == "max_output_tokens" && calls > 0
}

// ParseResponse implements api.Adapter. A response has one assistant turn.
func (Adapter) ParseResponse(body []byte) (*api.Response, error) {
	obj, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	items, err := jsonx.ParseArray(obj.Get("output"))
	if err != nil {
		return nil, ErrShape
	}
	var h wireHead
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, err
	}
	t, _ := readTurn(items)
	t.ResponseID = h.ID
	t.Usage = h.usage()
	t.Truncated = h.truncated(len(t.Calls))
	return &api.Response{Body: body, Choices: []*recovery.Turn{t}, Usage: t.Usage}, nil
}

// ErrorBody implements api.Adapter: the OpenAI error envelope, as on the
// Chat Completions route.
func (Adapter) ErrorBody(e *api.Escalated) []byte {
	return openaichat.ErrorEnvelope(e)
}

// callIDs are the ids a rendered call item carries.
type callIDs struct {
	callID, itemID string
}

// Render implements api.Adapter. Only what changed is spliced into the
// upstream's body: a repaired call keeps its item id, call_id, status and
// position; an escalated or abstained answer becomes one message item.
//
// When the request chains on previous_response_id (the conversation is
// stored upstream), the re-queries were chained on the bad response, so the
// stored conversation now ends with the last re-query's answer. The client
// must continue from there (SPEC §4 item 7), so it gets that response's id,
// and each repaired call carries the call_id the upstream stored for it:
// otherwise the client's next request would answer a call the upstream
// considers answered and leave the stored one without its output, which
// the provider refuses.
func (Adapter) Render(req *api.Request, resp *api.Response, finals []api.Final) ([]byte, error) {
	if len(finals) == 0 || len(resp.Choices) == 0 {
		return resp.Body, nil
	}
	f := finals[0]
	chain := false
	if info, err := infoOf(req); err == nil {
		chain = info.chain
	}
	obj, err := jsonx.ParseObject(resp.Body)
	if err != nil {
		return nil, err
	}
	switch {
	case f.Escalated != nil || (f.Result != nil && f.Result.Outcome == recovery.Abstained):
		text, escBody, id := replacement(f)
		obj = replaceOutput(obj, messageItem(id, text, "completed"), text)
		if escBody != nil {
			obj = obj.Set("toolgate_escalation", escBody)
		}
		if rid := chainedID(chain, f, false); rid != "" {
			obj = obj.Set("id", jsonx.String(rid))
		}
	case f.Result != nil && f.Result.AnyChanged():
		ti, ok := resp.Choices[0].Raw.(*turnItems)
		if !ok {
			return nil, errForeignTurn
		}
		items, err := jsonx.ParseArray(obj.Get("output"))
		if err != nil {
			return nil, ErrShape
		}
		items = append([][]byte(nil), items...)
		var ids map[int]callIDs
		if chain {
			ids = chainedCallIDs(f.Result)
		}
		for j := range f.Result.Changed {
			if j >= len(f.Result.Calls) || j >= len(ti.callAt) || ti.callAt[j] >= len(items) {
				continue
			}
			at := ti.callAt[j]
			id, reID := ids[j]
			if !f.Result.Changed[j] && !reID {
				continue
			}
			var nc *validate.ToolCall
			if f.Result.Changed[j] {
				nc = &f.Result.Calls[j]
			}
			if items[at], err = spliceCall(items[at], nc, id, false); err != nil {
				return nil, err
			}
		}
		obj = obj.Set("output", jsonx.AppendArray(nil, items))
		if rid := chainedID(chain, f, true); rid != "" {
			obj = obj.Set("id", jsonx.String(rid))
		}
	default:
		// Nothing to change: the upstream's bytes, as they came.
		return resp.Body, nil
	}
	return obj.Bytes(), nil
}

// replacement is the text, escalation object and message item id that
// replace an escalated or abstained answer.
func replacement(f api.Final) (text string, escBody []byte, itemID string) {
	if f.Escalated != nil {
		return f.Escalated.Text, f.Escalated.Body, "msg_toolgate_" + strings.TrimPrefix(f.Escalated.Escalation.ID, "esc_")
	}
	return f.Result.AbstainReason, nil, "msg_toolgate_" + randomHex()
}

func randomHex() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// replaceOutput makes a response object's whole output the one message
// item. An answer cut off by the token limit is complete once replaced.
func replaceOutput(obj jsonx.Object, item []byte, text string) jsonx.Object {
	obj = obj.Set("output", jsonx.AppendArray(nil, [][]byte{item}))
	if s, ok := jsonx.Unquote(obj.Get("status")); ok && s == "incomplete" {
		obj = obj.Set("status", []byte(`"completed"`))
		obj = obj.Set("incomplete_details", []byte("null"))
	}
	if obj.Has("output_text") {
		// Not part of the wire object, but some servers add the SDKs'
		// convenience field; it must agree with the output.
		obj = obj.Set("output_text", jsonx.String(text))
	}
	return obj
}

// messageItem is an assistant message output item carrying text.
func messageItem(id, text, status string) []byte {
	content := [][]byte{}
	if status == "completed" {
		content = append(content, textPart(text))
	}
	return jsonx.Object{
		{Key: "type", Value: []byte(`"message"`)},
		{Key: "id", Value: jsonx.String(id)},
		{Key: "status", Value: jsonx.String(status)},
		{Key: "role", Value: []byte(`"assistant"`)},
		{Key: "content", Value: jsonx.AppendArray(nil, content)},
	}.Bytes()
}

func textPart(text string) []byte {
	return jsonx.Object{
		{Key: "type", Value: []byte(`"output_text"`)},
		{Key: "text", Value: jsonx.String(text)},
		{Key: "annotations", Value: []byte("[]")},
	}.Bytes()
}

// spliceCall rewrites one call item: with nc set, its name and arguments
// (input for a custom call) become nc's, emptied when blank is set (the
// item of an output_item.added event); with ids set, its item id and
// call_id change. Every other field stays as the upstream sent it.
func spliceCall(item []byte, nc *validate.ToolCall, ids callIDs, blank bool) ([]byte, error) {
	o, err := jsonx.ParseObject(item)
	if err != nil {
		return nil, err
	}
	if nc != nil {
		args := string(nc.Args)
		if blank {
			args = ""
		}
		if nc.Kind == validate.Custom {
			o = o.Set("type", []byte(`"`+typeCustomCall+`"`)).Delete("arguments")
			o = o.Set("name", jsonx.String(nc.Name)).Set("input", jsonx.String(args))
		} else {
			o = o.Set("type", []byte(`"`+typeFunctionCall+`"`)).Delete("input")
			o = o.Set("name", jsonx.String(nc.Name)).Set("arguments", jsonx.String(args))
		}
	}
	if ids.callID != "" {
		o = o.Set("call_id", jsonx.String(ids.callID))
	}
	if ids.itemID != "" {
		o = o.Set("id", jsonx.String(ids.itemID))
	}
	return o.Bytes(), nil
}

// chainedID is the response id the client must continue from when the
// request chains on previous_response_id, or "" to keep the original. A
// repaired answer continues from the last re-query. So does an escalation
// whose last re-query ended without calls (a decision): that stored answer
// leaves no call unanswered, while the original still holds the bad call.
func chainedID(chain bool, f api.Final, repaired bool) string {
	if !chain || f.Result == nil || len(f.Result.Turns) == 0 {
		return ""
	}
	last := f.Result.Turns[len(f.Result.Turns)-1]
	if !repaired && len(last.Calls) > 0 {
		return ""
	}
	return last.ResponseID
}

// chainedCallIDs finds, for each call position, the call the upstream
// stored in the chained conversation: a repaired call is the re-query call
// it was taken from (searched from the last re-query back); a held call
// that the model repeated in the last re-query is that repeat, since the
// repeat is the one still waiting for its output. Substitutes chosen by a
// decision have no stored call of their own and keep the original ids.
func chainedCallIDs(res *recovery.Result) map[int]callIDs {
	if len(res.Turns) == 0 {
		return nil
	}
	out := map[int]callIDs{}
	claimed := map[[2]int]bool{}
	claim := func(ti int, c validate.ToolCall) (callIDs, bool) {
		t := res.Turns[ti]
		for k, tc := range t.Calls {
			if claimed[[2]int{ti, k}] || tc.Name != c.Name || !sameJSON(tc.Args, c.Args) {
				continue
			}
			claimed[[2]int{ti, k}] = true
			return callIDs{callID: tc.ID, itemID: itemIDOf(t, k)}, true
		}
		return callIDs{}, false
	}
	for p, changed := range res.Changed {
		if !changed || p >= len(res.Calls) {
			continue
		}
		for ti := len(res.Turns) - 1; ti >= 0; ti-- {
			if id, ok := claim(ti, res.Calls[p]); ok {
				out[p] = id
				break
			}
		}
	}
	for p, changed := range res.Changed {
		if changed || p >= len(res.Calls) {
			continue
		}
		if id, ok := claim(len(res.Turns)-1, res.Calls[p]); ok {
			out[p] = id
		}
	}
	return out
}

// itemIDOf returns the output item id of call k of a turn, when known.
func itemIDOf(t *recovery.Turn, k int) string {
	ti, ok := t.Raw.(*turnItems)
	if !ok || k >= len(ti.callAt) || ti.callAt[k] >= len(ti.items) {
		return ""
	}
	var it struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(ti.items[ti.callAt[k]], &it)
	return it.ID
}

func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
