package openaichat

import (
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// replayed is the codec's form of a turn (Turn.Raw): it gives back the
// assistant message a re-query replays.
type replayed interface {
	message() ([]byte, error)
	// legacyCall: the message's call is a function_call, answered by a
	// function message.
	legacyCall() bool
}

// ReQuery implements api.Codec. The request as sent upstream (with any
// injected tool) is kept byte for byte except for the fields a re-query
// must change, and the new messages are appended after the client's own.
func (c *codec) ReQuery(_ *neutral.Answer, q *neutral.Query) ([]byte, error) {
	obj, err := jsonx.ParseObject(c.req.Body)
	if err != nil {
		return nil, err
	}
	msgs, err := jsonx.ParseArray(obj.Get("messages"))
	if err != nil {
		return nil, fmt.Errorf("openaichat: messages: %w", err)
	}
	for _, round := range q.History {
		rp, ok := round.Turn.Raw.(replayed)
		if !ok {
			return nil, errors.New("openaichat: turn from another codec")
		}
		m, err := rp.message()
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
		for j, r := range round.Replies {
			msgs = append(msgs, replyMessage(round.Turn, j, r, rp.legacyCall()))
		}
	}
	obj = obj.Set("messages", jsonx.AppendArray(nil, msgs))
	if obj.Has("n") {
		obj = obj.Set("n", []byte("1"))
	}
	if obj.Has("stream") {
		obj = obj.Set("stream", []byte("false"))
	}
	obj = obj.Delete("stream_options")
	if q.Decision && c.legacy {
		obj = obj.Set("function_call", []byte(`"none"`))
		obj = obj.Delete("response_format")
	} else if q.Decision {
		obj = obj.Set("tool_choice", []byte(`"none"`))
		obj = obj.Delete("response_format")
		// parallel_tool_calls is only allowed alongside tools; tools stay, so
		// it may stay too.
	}
	return obj.Bytes(), nil
}

// replyMessage answers the jth call of turn: a tool message naming its id,
// or, for a legacy call, which has no id, a function message naming its
// function.
func replyMessage(turn *neutral.Turn, j int, r neutral.CallReply, legacy bool) []byte {
	if !legacy {
		return jsonx.Object{
			{Key: "role", Value: []byte(`"tool"`)},
			{Key: "tool_call_id", Value: jsonx.String(r.CallID)},
			{Key: "content", Value: jsonx.String(r.Content)},
		}.Bytes()
	}
	name := ""
	if j < len(turn.Calls) {
		name = turn.Calls[j].Name
	}
	return jsonx.Object{
		{Key: "role", Value: []byte(`"function"`)},
		{Key: "name", Value: jsonx.String(name)},
		{Key: "content", Value: jsonx.String(r.Content)},
	}.Bytes()
}

func (turnRef) legacyCall() bool { return false }

func (legacyRef) legacyCall() bool { return true }

// message returns the raw assistant message of the answer's choice.
func (ref turnRef) message() ([]byte, error) {
	obj, err := jsonx.ParseObject(ref.body)
	if err != nil {
		return nil, err
	}
	choices, err := jsonx.ParseArray(obj.Get("choices"))
	if err != nil || ref.choice >= len(choices) {
		return nil, ErrShape
	}
	c, err := jsonx.ParseObject(choices[ref.choice])
	if err != nil {
		return nil, err
	}
	msg := c.Get("message")
	if msg == nil {
		return nil, ErrShape
	}
	return msg, nil
}

// rawMessage is an assistant message rebuilt from a stream: the empty
// message of a choice index the stream skipped.
type rawMessage []byte

func (m rawMessage) message() ([]byte, error) { return m, nil }

func (rawMessage) legacyCall() bool { return false }
