package anthropic

import (
	"fmt"
	"net/http"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// EncodeAnswer implements api.Codec. Calls are matched to tool_use blocks
// by order, the same order DecodeAnswer read them in, so a replaced call
// keeps its id and its place among text and thinking blocks.
func (c *codec) EncodeAnswer(a *neutral.Answer, actions []neutral.Action) ([]byte, error) {
	if len(actions) == 0 || !replacesAny(&actions[0]) {
		// Nothing to splice: the upstream's bytes are the answer.
		return a.Body, nil
	}
	act := &actions[0]
	obj, err := jsonx.ParseObject(a.Body)
	if err != nil {
		return nil, err
	}
	if act.Kind == neutral.Respond {
		obj = obj.Set("content", jsonx.AppendArray(nil, [][]byte{textBlock(act.Text)}))
		obj = obj.Set("stop_reason", []byte(`"end_turn"`))
		if obj.Has("stop_sequence") {
			obj = obj.Set("stop_sequence", []byte("null"))
		}
		if act.Escalation != nil {
			obj = obj.Set("toolgate_escalation", act.Escalation.Body)
		}
		return obj.Bytes(), nil
	}
	blocks, err := replaceCalls(obj.Get("content"), act)
	if err != nil {
		return nil, err
	}
	return obj.Set("content", jsonx.AppendArray(nil, blocks)).Bytes(), nil
}

// replacesAny reports whether the action changes the choice at all: a
// Replace that marks no call keeps every byte.
func replacesAny(act *neutral.Action) bool {
	if act.Kind != neutral.Replace {
		return act.Kind != neutral.Keep
	}
	for j := range act.Calls {
		if act.ChangedAt(j) {
			return true
		}
	}
	return false
}

// replaceCalls is the content array with the replaced calls' tool_use
// blocks rewritten in place; every other block keeps its bytes.
func replaceCalls(raw []byte, act *neutral.Action) ([][]byte, error) {
	blocks, err := jsonx.ParseArray(raw)
	if err != nil {
		return nil, err
	}
	blocks = append([][]byte(nil), blocks...)
	j := -1
	for i, raw := range blocks {
		b, err := jsonx.ParseObject(raw)
		if err != nil {
			return nil, err
		}
		if typ, _ := jsonx.Unquote(b.Get("type")); typ != "tool_use" {
			continue
		}
		j++
		if !act.ChangedAt(j) {
			continue
		}
		nc := act.Calls[j]
		input, err := objectJSON(nc.Args)
		if err != nil {
			return nil, err
		}
		blocks[i] = b.Set("name", jsonx.String(nc.Name)).Set("input", input).Bytes()
	}
	return blocks, nil
}

// objectJSON is a repaired call's arguments, compacted. Repaired calls have
// passed the validator, so anything but a JSON object is a toolgate bug and
// fails the encoding instead of reaching the client.
func objectJSON(args []byte) ([]byte, error) {
	b, err := jsonx.CompactObject(args)
	if err != nil {
		return nil, fmt.Errorf("anthropic: repaired arguments: %w", err)
	}
	return b, nil
}

func textBlock(text string) []byte {
	return jsonx.Object{
		{Key: "type", Value: []byte(`"text"`)},
		{Key: "text", Value: jsonx.String(text)},
	}.Bytes()
}

// CallJSON implements api.Codec: a tool_use block.
func (c *codec) CallJSON(call neutral.ToolCall) []byte {
	return jsonx.Object{
		{Key: "type", Value: []byte(`"tool_use"`)},
		{Key: "id", Value: jsonx.String(call.ID)},
		{Key: "name", Value: jsonx.String(call.Name)},
		{Key: "input", Value: jsonx.Embeddable(call.Args)},
	}.Bytes()
}

// EncodeEscalation implements api.Codec: the Anthropic error envelope
// carrying the escalation (docs/escalations.md).
func (c *codec) EncodeEscalation(e *neutral.Escalated) []byte {
	return escalationEnvelope(e)
}

func escalationEnvelope(e *neutral.Escalated) []byte {
	return errorEnvelope(jsonx.Object{
		{Key: "type", Value: []byte(`"tool_call_escalation"`)},
		{Key: "code", Value: jsonx.String(e.Code)},
		{Key: "message", Value: jsonx.String(e.Text)},
		{Key: "escalation", Value: e.Body},
	})
}

// errorEnvelope wraps an error object as the API does.
func errorEnvelope(inner jsonx.Object) []byte {
	return jsonx.Object{
		{Key: "type", Value: []byte(`"error"`)},
		{Key: "error", Value: inner.Bytes()},
	}.Bytes()
}

// EncodeError implements api.Codec: one of toolgate's own errors in
// Anthropic's envelope, typed with the error type Anthropic documents for
// the status, so an SDK raises the same exception class it would for the
// API itself; toolgate's own code rides along in "code".
func (c *codec) EncodeError(f neutral.Failure) []byte { return failureEnvelope(f) }

// failureEnvelope is the error object of a plain answer and of a stream's
// error event alike, so an SDK classes a failure the same either way.
func failureEnvelope(f neutral.Failure) []byte {
	return errorEnvelope(jsonx.Object{
		{Key: "type", Value: jsonx.String(errorType(f))},
		{Key: "code", Value: jsonx.String(string(f.Code))},
		{Key: "message", Value: jsonx.String(f.Message)},
	})
}

// errorType is Anthropic's documented error type for a failure. A refusal
// of the request itself is invalid whatever its status.
func errorType(f neutral.Failure) string {
	if f.Refusal {
		return "invalid_request_error"
	}
	switch f.Status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if f.Status >= 400 && f.Status < 500 {
		return "invalid_request_error"
	}
	// Any other failure is toolgate's or its upstream's, never the
	// client's.
	return "api_error"
}
