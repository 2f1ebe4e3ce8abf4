// Package openaiwire holds the wire pieces OpenAI's two APIs share (Chat
// Completions and Responses): the error envelope, message content text and
// the tool_choice strings. Both codecs use it, so neither imports the other.
package openaiwire

import (
	"encoding/json"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// ContentText is the text of a message content: a string, or the text
// parts of an array of parts, each followed by a newline.
func ContentText(raw json.RawMessage) string {
	if s, ok := jsonx.Unquote(raw); ok {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var out []byte
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text...)
			out = append(out, '\n')
		}
	}
	return string(out)
}

// ResultText is a tool result's text as the model read it: ContentText,
// without the newline that closes the last part of an array.
func ResultText(raw json.RawMessage) string {
	t := ContentText(raw)
	if _, isString := jsonx.Unquote(raw); !isString {
		t = strings.TrimSuffix(t, "\n")
	}
	return t
}

// SimpleToolChoice reads a tool_choice that is absent, null or one of the
// strings both OpenAI APIs share ("none", "required", "auto"); ok is false
// for an object, which each API spells its own way.
func SimpleToolChoice(raw []byte) (c neutral.ToolChoice, ok bool) {
	if jsonx.IsNull(raw) {
		return neutral.ToolChoice{Kind: neutral.ChoiceAuto}, true
	}
	s, isString := jsonx.Unquote(raw)
	if !isString {
		return c, false
	}
	switch s {
	case "none":
		return neutral.ToolChoice{Kind: neutral.ChoiceNone}, true
	case "required":
		return neutral.ToolChoice{Kind: neutral.ChoiceRequired}, true
	}
	return neutral.ToolChoice{Kind: neutral.ChoiceAuto}, true
}

// EscalationError is the error-mode escalation in OpenAI's error envelope
// (docs/escalations.md): every official SDK surfaces it as an API error whose body
// holds the escalation.
func EscalationError(e *neutral.Escalated) []byte {
	inner := jsonx.Object{
		{Key: "type", Value: []byte(`"tool_call_escalation"`)},
		{Key: "code", Value: jsonx.String(e.Code)},
		{Key: "message", Value: jsonx.String(e.Text)},
		{Key: "param", Value: []byte("null")},
		{Key: "escalation", Value: e.Body},
	}
	return jsonx.Object{{Key: "error", Value: inner.Bytes()}}.Bytes()
}

// Error is one of toolgate's own errors in OpenAI's envelope. A refusal of
// the request is an invalid_request_error with the reason as its code;
// other failures are typed by their code, as the SDKs print the type.
func Error(f neutral.Failure) []byte {
	typ := string(f.Code)
	if f.Refusal {
		typ = "invalid_request_error"
	}
	inner := jsonx.Object{
		{Key: "type", Value: jsonx.String(typ)},
		{Key: "code", Value: jsonx.String(string(f.Code))},
		{Key: "message", Value: jsonx.String(f.Message)},
		{Key: "param", Value: []byte("null")},
	}
	return jsonx.Object{{Key: "error", Value: inner.Bytes()}}.Bytes()
}
