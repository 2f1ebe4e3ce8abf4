// Package jsonrpc is the one place of MCP's JSON-RPC 2.0 envelopes: the
// refusal a judged tools/call is answered with, toolgate's own errors, a
// withheld result, SSE framing. The MCP route reads the calls and the
// pipeline of package proxy judges them; this package decides nothing,
// never sees the catalog, and is no model codec: an MCP call is not a
// model's answer, so nothing here speaks proxy/api's contract.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// JSON-RPC 2.0 error codes (https://www.jsonrpc.org/specification#error_object)
// and the implementation-defined ones toolgate answers with.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	// CodeUnavailable: toolgate could not get the server's answer, or
	// failed otherwise (the failure code is in data).
	CodeUnavailable = -32000
	// CodeHeaderMismatch: MCP 2026-07-28's routing headers are missing or
	// differ from the body.
	CodeHeaderMismatch = -32020
	// CodeUnsupportedProtocolVersion: MCP 2026-07-28's answer to a request
	// for a revision the receiver does not serve; data lists the ones it
	// does.
	CodeUnsupportedProtocolVersion = -32022
)

// Call is the envelope of one tools/call as its route read it: the
// message's id and whether the call runs as a task decide the shape of a
// refusal.
type Call struct {
	id   json.RawMessage
	name string
	task bool
	body []byte
}

// NewCall is the envelope of the tools/call body, whose id, tool name and
// task-ness its route read.
func NewCall(id []byte, name string, task bool, body []byte) *Call {
	return &Call{id: id, name: name, task: task, body: body}
}

// Refusal is the answer to a refused call: an error result that lists
// every reason, so the model can correct it (MCP 2025-11-25 asks servers to
// report input validation errors so). A task-augmented call, whose client
// expects a task handle, and a call to a tool the server does not have get
// a JSON-RPC error instead.
func (c *Call) Refusal(e *neutral.Escalated) []byte {
	if e.Available != nil {
		return ErrorResponse(c.id, CodeInvalidParams, unknownToolText(c.name, e.Available), struct {
			Code      string   `json:"code"`
			Tool      string   `json:"tool"`
			Available []string `json:"available"`
		}{e.Code, c.name, e.Available})
	}
	res := refusal(c.name, e)
	res.ResultType = c.resultType()
	if c.task {
		return ErrorResponse(c.id, CodeInvalidParams, res.Content[0].Text, res.Meta[metaEscalation])
	}
	return response(c.id, res)
}

// resultType is what a result toolgate answers this call with says of
// itself: complete for a call of 2026-07-28 on (its _meta names the
// revision), nothing before. It is read here, not with the call, so that
// only the calls toolgate answers itself pay for it.
func (c *Call) resultType() string {
	msg, err := jsonx.ParseObject(c.body)
	if err != nil {
		return ""
	}
	params, err := jsonx.ParseObject(msg.Get("params"))
	if err != nil {
		return ""
	}
	if meta, err := jsonx.ParseObject(params.Get("_meta")); err == nil && meta.Has(metaProtocolVersion) {
		return "complete"
	}
	return ""
}

// Error is f as the JSON-RPC error answering the request with id (JSON;
// nil for null), its failure code in data.
func Error(id []byte, f neutral.Failure) []byte {
	code := CodeUnavailable
	if f.Refusal {
		code = CodeInvalidRequest
	}
	return ErrorResponse(id, code, f.Message, map[string]string{"code": string(f.Code)})
}

// CallJSON is a call as tools/call params spell it, for its escalation
// record.
func CallJSON(name string, args []byte) []byte {
	b, _ := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}{name, objectOrNil(args)})
	return b
}

const maxNamesShown = 50

func unknownToolText(name string, names []string) string {
	more := ""
	if len(names) > maxNamesShown {
		more = " and " + strconv.Itoa(len(names)-maxNamesShown) + " more"
		names = names[:maxNamesShown]
	}
	list := "none"
	if len(names) > 0 {
		list = strings.Join(names, ", ") + more
	}
	return "Unknown tool: " + strconv.Quote(name) + ". The tools of this server are: " + list + "."
}

// Event frames one JSON-RPC message as an SSE event; id, when set, is
// the event id of the event it replaces, so a resumed stream still finds
// its place.
func Event(id, data []byte) []byte {
	var b bytes.Buffer
	if id != nil {
		b.WriteString("id: ")
		b.Write(id)
		b.WriteByte('\n')
	}
	b.WriteString("event: message\ndata: ")
	b.Write(bytes.ReplaceAll(data, []byte("\n"), []byte("\ndata: ")))
	b.WriteString("\n\n")
	return b.Bytes()
}
