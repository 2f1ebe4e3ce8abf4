package gemini

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// EncodeAnswer implements api.Codec. Calls are matched to functionCall
// parts by order, the order DecodeAnswer read them in, so a replaced call
// keeps its id, its thoughtSignature and its place among the other parts.
// A candidate answered with text (an escalation or an abstention) becomes
// one text part with finishReason STOP; an escalation object rides in a
// top-level toolgate_escalation.
func (*codec) EncodeAnswer(a *neutral.Answer, actions []neutral.Action) ([]byte, error) {
	obj, err := jsonx.ParseObject(a.Body)
	if err != nil {
		return nil, err
	}
	obj = append(jsonx.Object(nil), obj...)
	cands, err := array(obj.Get("candidates"))
	if err != nil {
		return nil, err
	}
	cands = append([][]byte(nil), cands...)
	var escObj []byte
	for i := range cands {
		if i >= len(actions) {
			break
		}
		act := &actions[i]
		c, err := jsonx.ParseObject(cands[i])
		if err != nil {
			return nil, err
		}
		c = append(jsonx.Object(nil), c...)
		if act.Kind == neutral.Respond {
			c = c.Set("content", textContent(c.Get("content"), nil, act.Text)).Set(spelling(c, "finishReason"), []byte(`"STOP"`))
			if escObj == nil {
				escObj = escalationObject(act)
			}
		} else if anyChanged(act) {
			content, _, err := spliceCalls(c.Get("content"), act, 0, false)
			if err != nil {
				return nil, err
			}
			c = c.Set("content", content)
		} else {
			continue
		}
		cands[i] = c.Bytes()
	}
	obj = obj.Set("candidates", jsonx.AppendArray(nil, cands))
	if escObj != nil {
		obj = obj.Set("toolgate_escalation", escObj)
	}
	return obj.Bytes(), nil
}

// escalationObject is the escalation a Respond action carries, or nil.
func escalationObject(act *neutral.Action) []byte {
	if act.Escalation == nil {
		return nil
	}
	return act.Escalation.Body
}

// anyChanged reports whether a Replace action changes a call; one that
// changes none leaves its candidate byte for byte.
func anyChanged(act *neutral.Action) bool {
	for j := range act.Calls {
		if act.ChangedAt(j) {
			return true
		}
	}
	return false
}

// textContent is a content object whose parts are kept, then text (when
// not empty), with the role of orig.
func textContent(orig []byte, kept [][]byte, text string) []byte {
	parts := append([][]byte(nil), kept...)
	if text != "" {
		parts = append(parts, jsonx.Object{{Key: "text", Value: jsonx.String(text)}}.Bytes())
	}
	role := []byte(`"model"`)
	if c, err := jsonx.ParseObject(orig); err == nil && c.Has("role") {
		role = c.Get("role")
	}
	return jsonx.Object{{Key: "parts", Value: jsonx.AppendArray(nil, parts)}, {Key: "role", Value: role}}.Bytes()
}

// spliceCalls replaces the changed calls among a content object's parts;
// first is the position of its first call in the whole turn, and open
// whether its first part continues a call whose arguments are streamed.
// A changed streamed call is written whole in its first fragment, and its
// other fragments are dropped, so a client assembling fragments reads the
// repaired call. It returns the content and how many calls begin in it.
func spliceCalls(content []byte, act *neutral.Action, first int, open bool) ([]byte, int, error) {
	c, err := jsonx.ParseObject(content)
	if err != nil {
		return nil, 0, err
	}
	parts, err := array(c.Get("parts"))
	if err != nil {
		return nil, 0, err
	}
	out := make([][]byte, 0, len(parts))
	n := 0
	for _, raw := range parts {
		p, err := jsonx.ParseObject(raw)
		if err != nil {
			return nil, 0, err
		}
		key := spelling(p, "functionCall")
		fcRaw := p.Get(key)
		if fcRaw == nil {
			out = append(out, raw)
			continue
		}
		fc, err := jsonx.ParseObject(fcRaw)
		if err != nil {
			return nil, 0, fmt.Errorf("gemini: functionCall: %w", err)
		}
		begins, _ := callPart(fc, &open)
		j := first + n - 1
		if begins {
			j++
			n++
		}
		switch {
		case !act.ChangedAt(j):
			out = append(out, raw)
		case begins:
			whole, err := repairedCall(fc, act.Calls[j])
			if err != nil {
				return nil, 0, err
			}
			out = append(out, append(jsonx.Object(nil), p...).Set(key, whole).Bytes())
		}
	}
	c = append(jsonx.Object(nil), c...).Set("parts", jsonx.AppendArray(nil, out))
	return c.Bytes(), n, nil
}

// repairedCall is a functionCall object rewritten to nc: its other fields
// (the id) kept, the fragments' fields dropped.
func repairedCall(fc jsonx.Object, nc neutral.ToolCall) ([]byte, error) {
	args, err := objectJSON(nc.Args)
	if err != nil {
		return nil, err
	}
	out := make(jsonx.Object, 0, len(fc)+2)
	for _, f := range fc {
		switch camelOf(f.Key) {
		case "willContinue", "partialArgs":
			continue
		}
		out = append(out, f)
	}
	return out.Set("name", jsonx.String(nc.Name)).Set("args", args).Bytes(), nil
}

// CallJSON implements api.Codec: a functionCall part.
func (*codec) CallJSON(c neutral.ToolCall) []byte {
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

// EncodeEscalation implements api.Codec: Google's error envelope, the
// escalation's fields in its first detail next to "@type". Go's
// genai.APIError exposes it as Details[0]; JavaScript's ApiError carries
// the whole body, JSON-encoded, in its message.
func (*codec) EncodeEscalation(e *neutral.Escalated) []byte { return escalationBody(e) }

// escalationBody is EncodeEscalation, for streams too.
func escalationBody(e *neutral.Escalated) []byte {
	return envelope(422, "FAILED_PRECONDITION", e.Text, detail(e))
}

// detail is the escalation as one error detail.
func detail(e *neutral.Escalated) []byte {
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

// EncodeError implements api.Codec: toolgate's own errors in Google's
// envelope, the code in a google.rpc.ErrorInfo detail, as both SDKs read
// an error's fields by their type. A refusal of the request (a method or
// an encoding toolgate does not judge) is the client's mistake, so where
// its status has no code of its own it is INVALID_ARGUMENT, not INTERNAL.
func (*codec) EncodeError(f neutral.Failure) []byte {
	rpc := rpcStatus(f.Status)
	if f.Refusal && rpc == "INTERNAL" {
		rpc = "INVALID_ARGUMENT"
	}
	return failureBody(f.Status, rpc, string(f.Code), f.Message)
}

// failureBody is one of toolgate's own errors: its HTTP status, that
// status's google.rpc.Code name and toolgate's code.
func failureBody(status int, rpc, code, message string) []byte {
	info := jsonx.Object{
		{Key: "@type", Value: []byte(`"type.googleapis.com/google.rpc.ErrorInfo"`)},
		{Key: "reason", Value: jsonx.String(code)},
		{Key: "domain", Value: []byte(`"toolgate"`)},
	}
	return envelope(status, rpc, message, info.Bytes())
}

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
