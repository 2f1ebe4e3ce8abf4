package responses

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// errConversation reports a re-query of a request bound to a conversation
// object: the conversation would grow by toolgate's own messages, so the
// ladder must escalate instead of asking.
var errConversation = errors.New("responses: a request with a conversation cannot be re-queried")

// ReQuery implements api.Codec. The request as sent upstream is kept byte
// for byte except for the fields a re-query must change. Two shapes:
//
//   - chained: the request continues a stored conversation
//     (previous_response_id, store not false). The bad answer is stored
//     upstream too, so the re-query chains on the last answer's id and sends
//     only the outputs for that answer's calls; resending the history would
//     duplicate it.
//   - stateless: the original input, then each replayed turn's output items
//     and one output per call, appended.
func (c *codec) ReQuery(_ *neutral.Answer, q *neutral.Query) ([]byte, error) {
	if c.body == nil {
		return nil, errNoRequest
	}
	if c.info.conversation {
		return nil, errConversation
	}
	if len(q.History) == 0 {
		return nil, errors.New("responses: a re-query needs a turn to answer")
	}
	obj, err := jsonx.ParseObject(c.body)
	if err != nil {
		return nil, err
	}
	var input [][]byte
	if c.info.chain {
		last := q.History[len(q.History)-1]
		if last.Turn.ResponseID == "" {
			return nil, errors.New("responses: the answer to chain on has no id")
		}
		obj = obj.Set("previous_response_id", jsonx.String(last.Turn.ResponseID))
		input = appendOutputs(input, last)
	} else if input, err = c.replayInput(obj.Get("input"), q.History); err != nil {
		return nil, err
	}
	obj = obj.Set("input", jsonx.AppendArray(nil, input))
	if obj.Has("stream") {
		obj = obj.Set("stream", []byte("false"))
	}
	obj = obj.Delete("stream_options")
	if q.Decision {
		obj = askDecision(obj)
	}
	return obj.Bytes(), nil
}

// replayInput is a stateless re-query's input: the original input, then
// each round's output items and the outputs that answer its calls.
func (c *codec) replayInput(orig []byte, history []neutral.Round) ([][]byte, error) {
	input, err := originalInput(orig)
	if err != nil {
		return nil, err
	}
	for _, round := range history {
		ti, ok := round.Turn.Raw.(*turnItems)
		if !ok {
			return nil, errForeignTurn
		}
		input = append(input, replayItems(ti.items, c.info.store)...)
		input = appendOutputs(input, round)
	}
	return input, nil
}

// askDecision makes a re-query ask for free text: tool_choice none and no
// text.format; verbosity and other text options stay as the client set
// them.
func askDecision(obj jsonx.Object) jsonx.Object {
	obj = obj.Set("tool_choice", []byte(`"none"`))
	text, err := jsonx.ParseObject(obj.Get("text"))
	if err != nil {
		return obj
	}
	text = text.Delete("format")
	if len(text) == 0 {
		return obj.Delete("text")
	}
	return obj.Set("text", text.Bytes())
}

// originalInput returns the request's input as a list of items. A string
// input is, per the API reference, "equivalent to a text input with the
// user role", so it becomes the one user message it stands for; the model
// sees the same conversation and the replayed turn can follow it.
func originalInput(raw []byte) ([][]byte, error) {
	if jsonx.IsNull(raw) {
		return nil, nil
	}
	if _, ok := jsonx.Unquote(raw); ok {
		msg := jsonx.Object{
			{Key: "role", Value: []byte(`"user"`)},
			{Key: "content", Value: raw},
		}
		return [][]byte{msg.Bytes()}, nil
	}
	items, err := jsonx.ParseArray(raw)
	if err != nil {
		return nil, fmt.Errorf("responses: input: %w", err)
	}
	return append([][]byte(nil), items...), nil
}

// replayItems returns a turn's output items for a stateless re-query, byte
// for byte: reasoning items go with the calls they led to.
//
// One case cannot be replayed as is: with store false, a reasoning item
// without encrypted_content (the client did not ask for
// include: ["reasoning.encrypted_content"]) only points at a reasoning the
// provider did not keep, and the provider refuses to look it up. Such an
// item is left out, and the turn's other items lose their item ids, because
// the provider refuses an item id whose reasoning item is missing; calls
// keep their call_id, which is what the outputs answer.
func replayItems(items [][]byte, store bool) [][]byte {
	if store {
		return items
	}
	var out [][]byte
	dropped := false
	for _, it := range items {
		var head struct {
			Type             string          `json:"type"`
			EncryptedContent json.RawMessage `json:"encrypted_content"`
		}
		if json.Unmarshal(it, &head) == nil && head.Type == "reasoning" && jsonx.IsNull(head.EncryptedContent) {
			dropped = true
			continue
		}
		out = append(out, it)
	}
	if !dropped {
		return out
	}
	for i, it := range out {
		if o, err := jsonx.ParseObject(it); err == nil && o.Has("id") {
			out[i] = o.Delete("id").Bytes()
		}
	}
	return out
}

// appendOutputs answers every call of a round's turn, in order: a
// function_call_output per function call, a custom_tool_call_output per
// custom call. The Responses API has no error flag; the text says it.
func appendOutputs(dst [][]byte, round neutral.Round) [][]byte {
	for _, r := range round.Replies {
		typ := "function_call_output"
		for _, c := range round.Turn.Calls {
			if c.ID == r.CallID {
				if c.Kind == neutral.Custom {
					typ = "custom_tool_call_output"
				}
				break
			}
		}
		dst = append(dst, jsonx.Object{
			{Key: "type", Value: jsonx.String(typ)},
			{Key: "call_id", Value: jsonx.String(r.CallID)},
			{Key: "output", Value: jsonx.String(r.Content)},
		}.Bytes())
	}
	return dst
}
