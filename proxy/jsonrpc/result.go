package jsonrpc

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// metaProtocolVersion is the _meta key naming a request's revision from
// MCP 2026-07-28 on.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// _meta keys toolgate writes into the results it answers with.
const (
	metaEscalation = "toolgate/escalation"
	metaApproval   = "toolgate/approval"
	metaOutput     = "toolgate/output"
)

// toolResult is a CallToolResult toolgate answers with.
type toolResult struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError"`
	// ResultType is set for a 2026-07-28 call, whose results must carry it.
	ResultType string         `json:"resultType,omitempty"`
	Meta       map[string]any `json:"_meta,omitempty"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// findingJSON is a finding in a result's _meta. Reason, a validator's own
// words, goes to the client as in the model side's escalation; sinks and
// logs never see it.
type findingJSON struct {
	Code    string `json:"code"`
	Pointer string `json:"pointer"`
	Keyword string `json:"keyword"`
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
}

func findingsJSON(fs []neutral.Finding) []findingJSON {
	out := make([]findingJSON, 0, len(fs))
	for _, f := range fs {
		out = append(out, findingJSON{Code: f.Code, Pointer: f.Pointer, Keyword: f.Keyword, Message: f.Message, Reason: f.Reason})
	}
	return out
}

// escalationMeta is the escalation as a result's _meta carries it.
func escalationMeta(e *neutral.Escalated) map[string]any {
	return map[string]any{"id": e.ID, "codes": e.Codes, "catalog_version": e.CatalogVersion, "findings": findingsJSON(e.Findings)}
}

// refusal is the error result of a call toolgate did not forward: the
// exact reasons and what the caller should do next.
func refusal(name string, e *neutral.Escalated) toolResult {
	var b strings.Builder
	b.WriteString("toolgate did not run this call to " + strconv.Quote(name) + ":\n")
	for _, f := range e.Findings {
		if !f.Blocking {
			continue
		}
		b.WriteString("- " + f.Code)
		if f.Pointer != "" {
			b.WriteString(" at " + f.Pointer)
		}
		if f.Keyword != "" {
			b.WriteString(" (" + f.Keyword + ")")
		}
		b.WriteString(": " + f.Detail + "\n")
	}
	advice := e.Advice
	if advice == "" {
		advice = "Correct the arguments and call the tool again."
	}
	b.WriteString(advice)
	meta := map[string]any{metaEscalation: escalationMeta(e)}
	if e.Approval != nil {
		meta[metaApproval] = json.RawMessage(e.Approval)
	}
	return toolResult{Content: []textContent{{Type: "text", Text: b.String()}}, IsError: true, Meta: meta}
}

// Withheld replaces a server's tool result whose structuredContent breaks
// the tool's outputSchema with an error result. msg is the response
// message; meta is the result's own _meta, which stays (a tasks/result
// answer must keep its related-task entry).
func Withheld(msg []byte, tool string, fs []neutral.Finding, meta []byte) []byte {
	text := "toolgate withheld the result of " + strconv.Quote(tool) + ": it does not match the tool's outputSchema:\n"
	for _, f := range fs {
		text += "- " + f.Message + "\n"
	}
	return replaceResult(msg, meta, metaOutput, map[string]any{"findings": findingsJSON(fs)},
		text+"The tool may have misbehaved; do not rely on this call having produced data.")
}

// replaceResult puts an error result saying text in place of the result
// of the response message msg. The result's own _meta stays, with key set
// to val beside it, and so does the server's resultType: a 2026-07-28
// client needs one. A message that is no JSON object is returned as is.
func replaceResult(msg, meta []byte, key string, val any, text string) []byte {
	kept := map[string]any{}
	if obj, err := jsonx.ParseObject(meta); err == nil {
		for _, f := range obj {
			kept[f.Key] = json.RawMessage(f.Value)
		}
	}
	kept[key] = val
	out := toolResult{Content: []textContent{{Type: "text", Text: text}}, IsError: true, Meta: kept}
	obj, err := jsonx.ParseObject(msg)
	if err != nil {
		return msg
	}
	if res, err := jsonx.ParseObject(obj.Get("result")); err == nil {
		out.ResultType, _ = jsonx.Unquote(res.Get("resultType"))
	}
	b, _ := jsonx.Marshal(out)
	return obj.Set("result", b).Bytes()
}

// Response encodes a JSON-RPC result answering id.
func Response(id []byte, result any) []byte { return response(id, result) }

func response(id []byte, result any) []byte {
	b, _ := jsonx.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", idOrNull(id), result})
	return b
}

// ErrorResponse encodes a JSON-RPC error answering id (JSON; nil for
// null), with data when it is not nil.
func ErrorResponse(id []byte, code int, msg string, data any) []byte {
	type errObj struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	b, _ := jsonx.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errObj          `json:"error"`
	}{"2.0", idOrNull(id), errObj{Code: code, Message: msg, Data: data}})
	return b
}

func idOrNull(id []byte) json.RawMessage {
	if id == nil {
		return json.RawMessage("null")
	}
	return id
}

func objectOrNil(b []byte) json.RawMessage {
	t := strings.TrimSpace(string(b))
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return nil
}
