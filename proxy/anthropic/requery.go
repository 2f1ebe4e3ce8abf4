package anthropic

import (
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// ReQuery implements api.Codec. The request as sent upstream stays byte for
// byte except for the fields a re-query must change; each replayed
// assistant turn is followed by one user turn that opens with a
// tool_result for every tool_use of that turn, in order, as the API
// requires.
func (c *codec) ReQuery(_ *neutral.Answer, q *neutral.Query) ([]byte, error) {
	obj, err := jsonx.ParseObject(c.body)
	if err != nil {
		return nil, err
	}
	msgs, err := jsonx.ParseArray(obj.Get("messages"))
	if err != nil {
		return nil, fmt.Errorf("anthropic: messages: %w", err)
	}
	msgs = append([][]byte(nil), msgs...)
	for _, round := range q.History {
		if msgs, err = appendRound(msgs, round); err != nil {
			return nil, err
		}
	}
	obj = obj.Set("messages", jsonx.AppendArray(nil, msgs))
	if obj.Has("stream") {
		obj = obj.Set("stream", []byte("false"))
	}
	if q.Decision {
		obj = askDecision(obj)
	}
	return obj.Bytes(), nil
}

// appendRound appends a replayed assistant turn and the user turn that
// answers its calls.
func appendRound(msgs [][]byte, round neutral.Round) ([][]byte, error) {
	c, ok := round.Turn.Raw.(content)
	if !ok {
		return nil, errors.New("anthropic: turn from another codec")
	}
	if len(round.Replies) == 0 {
		// A user turn needs content; a turn without calls is never
		// replayed by the ladder.
		return nil, errors.New("anthropic: replayed turn has no calls to answer")
	}
	msgs = append(msgs, jsonx.Object{
		{Key: "role", Value: []byte(`"assistant"`)},
		{Key: "content", Value: c},
	}.Bytes())
	results := make([][]byte, len(round.Replies))
	for i, r := range round.Replies {
		res := jsonx.Object{
			{Key: "type", Value: []byte(`"tool_result"`)},
			{Key: "tool_use_id", Value: jsonx.String(r.CallID)},
			{Key: "content", Value: jsonx.String(r.Content)},
		}
		if r.IsError {
			res = append(res, jsonx.Field{Key: "is_error", Value: []byte("true")})
		}
		results[i] = res.Bytes()
	}
	return append(msgs, jsonx.Object{
		{Key: "role", Value: []byte(`"user"`)},
		{Key: "content", Value: jsonx.AppendArray(nil, results)},
	}.Bytes()), nil
}

// askDecision asks for the decision as text. With extended thinking on,
// the API refuses a forced tool_choice ("any" or "tool") but accepts
// "none", so this is valid whatever the request's thinking setting. Tools
// stay as sent: removing them would break the prompt cache and make the
// tool_use blocks being replayed refer to nothing.
func askDecision(obj jsonx.Object) jsonx.Object {
	obj = obj.Set("tool_choice", []byte(`{"type":"none"}`))
	obj = obj.Delete("output_format")
	if oc, err := jsonx.ParseObject(obj.Get("output_config")); err == nil && oc.Has("format") {
		oc = oc.Delete("format")
		if len(oc) == 0 {
			obj = obj.Delete("output_config")
		} else {
			obj = obj.Set("output_config", oc.Bytes())
		}
	}
	return obj
}

// InjectTool implements api.Codec: the tool is appended last to the
// request's tools as a custom tool. Last, so a cache_control breakpoint on
// the client's own last tool still covers the same prefix. From then on
// the codec's request is the injected one: re-queries offer the exit too,
// and its calls are function calls wherever they stand in an answer.
func (c *codec) InjectTool(t neutral.Offered) ([]byte, error) {
	tool := jsonx.Object{
		{Key: "name", Value: jsonx.String(t.Name)},
		{Key: "description", Value: jsonx.String(t.Description)},
		{Key: "input_schema", Value: t.Parameters},
	}
	body, err := jsonx.AppendToField(c.body, "tools", tool.Bytes())
	if err != nil {
		return nil, err
	}
	c.body = body
	delete(c.typed, t.Name)
	return body, nil
}
