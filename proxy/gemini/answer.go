package gemini

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

type wireUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
}

// usage counts what the provider bills: the prompt (which already includes
// cachedContentTokenCount) and tool-use prompt as input, the candidates and
// the thoughts as output.
func (u *wireUsage) usage() recovery.Usage {
	if u == nil {
		return recovery.Usage{}
	}
	return recovery.Usage{Input: u.PromptTokenCount + u.ToolUsePromptTokenCount, Output: u.CandidatesTokenCount + u.ThoughtsTokenCount}
}

// turn is a candidate's content as the adapter keeps it: the content object
// replayed byte for byte in a re-query (every part, thought parts and
// thoughtSignature included), and its finish reason.
type turn struct {
	content []byte
	finish  string
}

// syntheticID prefixes the id a call is given when the model sent none.
// The pipeline matches replies to calls by id; on the wire such a call is
// answered by name and position, and the id is never written.
const syntheticID = "toolgate-call-"

// callsOf reads the parts of one candidate: its calls, numbered from
// first, and its visible text. Thought parts are the model's reasoning,
// not text for the user.
func callsOf(parts [][]byte, first int, t *recovery.Turn, text *[]byte) error {
	for _, raw := range parts {
		p, err := jsonx.ParseObject(raw)
		if err != nil {
			return fmt.Errorf("%w: a part is not an object", ErrShape)
		}
		if fc := p.Get("functionCall"); fc != nil {
			c, err := callOf(fc, first+len(t.Calls))
			if err != nil {
				return err
			}
			t.Calls = append(t.Calls, c)
			continue
		}
		if string(p.Get("thought")) == "true" {
			continue
		}
		if s, ok := jsonx.Unquote(p.Get("text")); ok {
			*text = append(*text, s...)
		}
	}
	return nil
}

// callOf is one functionCall in neutral form. Args are the object exactly
// as sent; absent args are an empty object, as the SDKs hand it over.
func callOf(raw []byte, pos int) (validate.ToolCall, error) {
	fc, err := jsonx.ParseObject(raw)
	if err != nil {
		return validate.ToolCall{}, fmt.Errorf("%w: functionCall is not an object", ErrShape)
	}
	name, ok := jsonx.Unquote(fc.Get("name"))
	if !ok {
		return validate.ToolCall{}, fmt.Errorf("%w: functionCall without a name", ErrShape)
	}
	c := validate.ToolCall{Name: name, Args: fc.Get("args"), Kind: validate.Function}
	if jsonx.IsNull(c.Args) {
		c.Args = []byte("{}")
	} else if c.Args[0] != '{' {
		c.BadShape = true
	}
	if id, ok := jsonx.Unquote(fc.Get("id")); ok && id != "" {
		c.ID = id
	} else {
		c.ID = syntheticID + strconv.Itoa(pos)
	}
	return c, nil
}

// ParseResponse implements api.Adapter: one turn per candidate.
func (Adapter) ParseResponse(body []byte) (*api.Response, error) {
	if (Adapter{}).FoldedKey(body) {
		return nil, errFolded
	}
	obj, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	if !obj.Has("candidates") && !obj.Has("promptFeedback") && !obj.Has("usageMetadata") {
		return nil, ErrShape
	}
	var w struct {
		UsageMetadata *wireUsage `json:"usageMetadata"`
		ResponseID    string     `json:"responseId"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	resp := &api.Response{Body: body, Usage: w.UsageMetadata.usage()}
	cands, err := array(obj.Get("candidates"))
	if err != nil {
		return nil, fmt.Errorf("%w: candidates", ErrShape)
	}
	for _, raw := range cands {
		c, err := jsonx.ParseObject(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: a candidate is not an object", ErrShape)
		}
		finish, _ := jsonx.Unquote(c.Get("finishReason"))
		t := &recovery.Turn{ResponseID: w.ResponseID, Usage: resp.Usage, Raw: &turn{content: c.Get("content"), finish: finish}}
		parts, err := contentParts(c.Get("content"))
		if err != nil {
			return nil, err
		}
		var text []byte
		if err := callsOf(parts, 0, t, &text); err != nil {
			return nil, err
		}
		t.Text = string(text)
		t.Truncated = finish == "MAX_TOKENS" && len(t.Calls) > 0
		resp.Choices = append(resp.Choices, t)
	}
	return resp, nil
}

// array reads an array that may be absent.
func array(raw []byte) ([][]byte, error) {
	if jsonx.IsNull(raw) {
		return nil, nil
	}
	return jsonx.ParseArray(raw)
}

// contentParts reads the parts of a content object that may be absent (a
// candidate stopped for safety has none).
func contentParts(raw []byte) ([][]byte, error) {
	if jsonx.IsNull(raw) {
		return nil, nil
	}
	c, err := jsonx.ParseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: content is not an object", ErrShape)
	}
	parts, err := array(c.Get("parts"))
	if err != nil {
		return nil, fmt.Errorf("%w: parts", ErrShape)
	}
	return parts, nil
}

// Notes implements api.Noter. A candidate the API ended because the model's
// call was malformed, called a tool it may not call, or called too many
// carries no call to judge and passes as the API sent it (the SDKs report
// the finish reason, and the client decides whether to retry); the
// operator sees the note in the request's log line and in
// toolgate_unvalidated_total.
func (Adapter) Notes(t *recovery.Turn) []string {
	if r, ok := t.Raw.(*turn); ok {
		switch r.finish {
		case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS":
			return []string{"gemini_" + strings.ToLower(r.finish)}
		}
	}
	return nil
}

var _ api.Noter = Adapter{}

// CallJSON implements api.Adapter: a functionCall part.
func (Adapter) CallJSON(c validate.ToolCall) []byte {
	fc := jsonx.Object{}
	if !strings.HasPrefix(c.ID, syntheticID) {
		fc = append(fc, jsonx.Field{Key: "id", Value: jsonx.String(c.ID)})
	}
	fc = append(fc, jsonx.Field{Key: "name", Value: jsonx.String(c.Name)}, jsonx.Field{Key: "args", Value: jsonx.Embeddable(c.Args)})
	return jsonx.Object{{Key: "functionCall", Value: fc.Bytes()}}.Bytes()
}

// objectJSON is a repaired call's arguments, compacted; anything but an
// object fails the render (see jsonx.CompactObject).
func objectJSON(args []byte) ([]byte, error) {
	b, err := jsonx.CompactObject(args)
	if err != nil {
		return nil, fmt.Errorf("gemini: repaired arguments: %w", err)
	}
	return b, nil
}

// escalationType names the detail that carries an escalation.
const escalationType = "type.googleapis.com/toolgate.ToolCallEscalation"

// ErrorBody implements api.Adapter: Google's error envelope, the
// escalation's fields in its first detail next to "@type". Go's
// genai.APIError exposes it as Details[0]; JavaScript's ApiError carries
// the whole body, JSON-encoded, in its message.
func (Adapter) ErrorBody(e *api.Escalated) []byte {
	return envelope(422, "FAILED_PRECONDITION", e.Text, detail(e))
}

// detail is the escalation as one error detail.
func detail(e *api.Escalated) []byte {
	d := jsonx.Object{{Key: "@type", Value: jsonx.String(escalationType)}}
	if obj, err := jsonx.ParseObject(e.Body); err == nil {
		d = append(d, obj...)
	} else {
		d = append(d, jsonx.Field{Key: "escalation", Value: e.Body})
	}
	return d.Bytes()
}

// envelope is {"error":{"code","message","status","details"}}.
func envelope(code int, status, message string, details ...[]byte) []byte {
	inner := jsonx.Object{
		{Key: "code", Value: strconv.AppendInt(nil, int64(code), 10)},
		{Key: "message", Value: jsonx.String(message)},
		{Key: "status", Value: jsonx.String(status)},
	}
	if len(details) > 0 {
		inner = append(inner, jsonx.Field{Key: "details", Value: jsonx.AppendArray(nil, details)})
	}
	return jsonx.Object{{Key: "error", Value: inner.Bytes()}}.Bytes()
}

// PlainError implements api.PlainErrorer: toolgate's own errors in
// Google's envelope, the reason in a google.rpc.ErrorInfo detail.
func (Adapter) PlainError(status int, code, message string) []byte {
	info := jsonx.Object{
		{Key: "@type", Value: []byte(`"type.googleapis.com/google.rpc.ErrorInfo"`)},
		{Key: "reason", Value: jsonx.String(code)},
		{Key: "domain", Value: []byte(`"toolgate"`)},
	}
	return envelope(status, rpcStatus(status), message, info.Bytes())
}

var _ api.PlainErrorer = Adapter{}

// rpcStatus is the google.rpc.Code name Google's APIs send with an HTTP
// status.
func rpcStatus(status int) string {
	switch status {
	case 400, 413:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 408, 504:
		return "DEADLINE_EXCEEDED"
	case 422:
		return "FAILED_PRECONDITION"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 502, 503:
		return "UNAVAILABLE"
	}
	return "INTERNAL"
}
