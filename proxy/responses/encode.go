package responses

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/openaiwire"
)

// callIDs are the ids a rendered call item carries.
type callIDs struct {
	callID, itemID string
}

// EncodeAnswer implements api.Codec. Only what changed is spliced into the
// upstream's body: a repaired call keeps its item id, call_id, status and
// position; an answer that responds with text (an escalation in message
// mode, an abstention) becomes one message item.
//
// When the upstream stores the answers (store not false), the re-queries'
// answers are stored too, and the valid call lives in the last one. When the
// request chains on previous_response_id, the re-queries were chained on the
// bad response, so the stored conversation ends with that answer
// (docs/apis.md, "Responses: ids after a repair"); a request that is not
// chained was replayed whole, and that answer's stored input holds the bad
// call, its rejection and then the valid call. Either way the client must
// continue from there, so it gets that response's id, and each repaired call
// carries the item id and call_id the upstream stored for it: with the
// original ids, a client continuing by previous_response_id or an
// item_reference would point the model at the stored bad call, and answer a
// call the upstream considers answered while the stored one waits for its
// output.
func (c *codec) EncodeAnswer(a *neutral.Answer, actions []neutral.Action) ([]byte, error) {
	if len(actions) == 0 || len(a.Choices) == 0 {
		return a.Body, nil
	}
	act := &actions[0]
	switch {
	case act.Kind == neutral.Respond:
		return c.encodeText(a.Body, act)
	case replaces(act):
		return c.encodeRepair(a, act)
	}
	// Nothing to change: the upstream's bytes, as they came.
	return a.Body, nil
}

// replaces reports an action that replaces at least one call.
func replaces(act *neutral.Action) bool {
	return act.Kind == neutral.Replace && slices.Contains(act.Changed, true)
}

// encodeText makes the answer's whole output the message item that
// carries the action's text.
func (c *codec) encodeText(body []byte, act *neutral.Action) ([]byte, error) {
	obj, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	escBody, id := replacement(act)
	obj = replaceOutput(obj, messageItem(id, act.Text, "completed"), act.Text)
	if escBody != nil {
		obj = obj.Set("toolgate_escalation", escBody)
	}
	if rid := chainedID(c.info.stored(), act.ReQueries, false); rid != "" {
		obj = obj.Set("id", jsonx.String(rid))
	}
	return obj.Bytes(), nil
}

// encodeRepair splices the replaced calls, and on a chained request the
// stored ids, into the answer's output items.
func (c *codec) encodeRepair(a *neutral.Answer, act *neutral.Action) ([]byte, error) {
	obj, err := jsonx.ParseObject(a.Body)
	if err != nil {
		return nil, err
	}
	ti, ok := a.Choices[0].Raw.(*turnItems)
	if !ok {
		return nil, errForeignTurn
	}
	items, err := jsonx.ParseArray(obj.Get("output"))
	if err != nil {
		return nil, ErrShape
	}
	items = append([][]byte(nil), items...)
	var ids map[int]callIDs
	if c.info.stored() {
		ids = chainedCallIDs(act)
	}
	for j := range act.Changed {
		if j >= len(act.Calls) || j >= len(ti.callAt) || ti.callAt[j] >= len(items) {
			continue
		}
		at := ti.callAt[j]
		id, reID := ids[j]
		if !act.ChangedAt(j) && !reID {
			continue
		}
		var nc *neutral.ToolCall
		if act.ChangedAt(j) {
			nc = &act.Calls[j]
		}
		if items[at], err = spliceCall(items[at], nc, id, false); err != nil {
			return nil, err
		}
	}
	obj = obj.Set("output", jsonx.AppendArray(nil, items))
	if rid := chainedID(c.info.stored(), act.ReQueries, true); rid != "" {
		obj = obj.Set("id", jsonx.String(rid))
	}
	return obj.Bytes(), nil
}

// replacement is the escalation object (nil for an abstention) and the
// message item id of an answer that responds with text. An escalation's
// item is named after it, so the client can find it in the log.
func replacement(act *neutral.Action) (escBody []byte, itemID string) {
	if e := act.Escalation; e != nil {
		return e.Body, "msg_toolgate_" + strings.TrimPrefix(e.ID, "esc_")
	}
	return nil, "msg_toolgate_" + randomHex()
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
func spliceCall(item []byte, nc *neutral.ToolCall, ids callIDs, blank bool) ([]byte, error) {
	o, err := jsonx.ParseObject(item)
	if err != nil {
		return nil, err
	}
	if nc != nil {
		args := string(nc.Args)
		if blank {
			args = ""
		}
		if nc.Kind == neutral.Custom {
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
func chainedID(chain bool, reQueries []*neutral.Turn, repaired bool) string {
	if !chain || len(reQueries) == 0 {
		return ""
	}
	last := reQueries[len(reQueries)-1]
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
func chainedCallIDs(act *neutral.Action) map[int]callIDs {
	turns := act.ReQueries
	if len(turns) == 0 {
		return nil
	}
	out := map[int]callIDs{}
	claimed := map[[2]int]bool{}
	claim := func(ti int, c neutral.ToolCall) (callIDs, bool) {
		t := turns[ti]
		for k, tc := range t.Calls {
			if claimed[[2]int{ti, k}] || tc.Name != c.Name || !jsonx.SameText(tc.Args, c.Args) {
				continue
			}
			claimed[[2]int{ti, k}] = true
			return callIDs{callID: tc.ID, itemID: itemIDOf(t, k)}, true
		}
		return callIDs{}, false
	}
	for p := range act.Changed {
		if !act.ChangedAt(p) {
			continue
		}
		for ti := len(turns) - 1; ti >= 0; ti-- {
			if id, ok := claim(ti, act.Calls[p]); ok {
				out[p] = id
				break
			}
		}
	}
	for p := range act.Changed {
		if p >= len(act.Calls) || act.ChangedAt(p) {
			continue
		}
		if id, ok := claim(len(turns)-1, act.Calls[p]); ok {
			out[p] = id
		}
	}
	return out
}

// itemIDOf returns the output item id of call k of a turn, when known.
func itemIDOf(t *neutral.Turn, k int) string {
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

// CallJSON implements api.Codec: a function_call item (custom_tool_call
// for custom tools), the shape the client would have received.
func (*codec) CallJSON(c neutral.ToolCall) []byte {
	if c.Kind == neutral.Custom {
		return jsonx.Object{
			{Key: "type", Value: []byte(`"custom_tool_call"`)},
			{Key: "call_id", Value: jsonx.String(c.ID)},
			{Key: "name", Value: jsonx.String(c.Name)},
			{Key: "input", Value: jsonx.String(string(c.Args))},
		}.Bytes()
	}
	return jsonx.Object{
		{Key: "type", Value: []byte(`"function_call"`)},
		{Key: "call_id", Value: jsonx.String(c.ID)},
		{Key: "name", Value: jsonx.String(c.Name)},
		{Key: "arguments", Value: jsonx.String(string(c.Args))},
	}.Bytes()
}

// EncodeEscalation implements api.Codec: the OpenAI error envelope, as on
// the Chat Completions route.
func (*codec) EncodeEscalation(e *neutral.Escalated) []byte {
	return openaiwire.EscalationError(e)
}

// EncodeError implements api.Codec: toolgate's own errors in the OpenAI
// error envelope, which the Responses API shares with Chat Completions.
func (*codec) EncodeError(f neutral.Failure) []byte {
	return openaiwire.Error(f)
}
