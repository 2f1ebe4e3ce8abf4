// Package jsonrpc is the codec of MCP's tools/call: JSON-RPC 2.0 messages
// read into the pipeline's neutral values and the pipeline's decisions
// written back. For MCP the judged answer is the client's tools/call
// itself, a call a model asked for on its way to the server: the codec
// reads it as a turn of one call, and writes the call as it was, a
// refusal the client is answered with, or one of toolgate's own errors.
// Like every codec it decides nothing and never sees the catalog.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// API is MCP's tools/call as the pipeline sees it.
type API struct{}

// Name implements api.API.
func (API) Name() string { return "mcp" }

// NewCodec implements api.API.
func (API) NewCodec() api.Codec { return &Codec{} }

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

// Codec reads one tools/call. It keeps the message's id and whether the
// call runs as a task, which decide the shape of a refusal.
type Codec struct {
	id   json.RawMessage
	name string
	task bool
	body []byte
}

var (
	errNotCall   = errors.New("the message is not a tools/call request")
	errNoReQuery = errors.New("an MCP call cannot be asked again: its client reads the refusal")
)

// DecodeRequest implements api.Codec: a tools/call offers no tools (the
// server's list does), so the request is the message alone.
func (c *Codec) DecodeRequest(_ string, body []byte) (*neutral.Request, error) {
	if _, err := c.read(body); err != nil {
		return nil, err
	}
	return &neutral.Request{Body: body}, nil
}

// DecodeAnswer implements api.Codec: the call, as one turn of one call.
// The answer to a call (a result, or an error) reads as a turn of text:
// what the caller's model is told.
func (c *Codec) DecodeAnswer(body []byte) (*neutral.Answer, error) {
	if text, ok := answerText(body); ok {
		return &neutral.Answer{Body: body, Choices: []*neutral.Turn{{Text: text, Stop: neutral.StopEnd}}}, nil
	}
	call, err := c.read(body)
	if err != nil {
		return nil, err
	}
	return &neutral.Answer{Body: body, Choices: []*neutral.Turn{{Calls: []neutral.ToolCall{call}, Stop: neutral.StopToolCalls}}}, nil
}

// answerText reads a response: its result's text content, or its
// error's message.
func answerText(body []byte) (string, bool) {
	msg, err := jsonx.ParseObject(body)
	if err != nil || msg.Has("method") {
		return "", false
	}
	if e, err := jsonx.ParseObject(msg.Get("error")); err == nil {
		s, _ := jsonx.Unquote(e.Get("message"))
		return s, true
	}
	var res struct {
		Content []textContent `json:"content"`
	}
	if r := msg.Get("result"); r == nil || json.Unmarshal(r, &res) != nil {
		return "", false
	}
	var b strings.Builder
	for _, c := range res.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String(), true
}

// read reads a tools/call request and remembers what a reply needs.
func (c *Codec) read(body []byte) (neutral.ToolCall, error) {
	msg, err := jsonx.ParseObject(body)
	if err != nil {
		return neutral.ToolCall{}, err
	}
	method, _ := jsonx.Unquote(msg.Get("method"))
	id := msg.Get("id")
	if method != "tools/call" || id == nil {
		return neutral.ToolCall{}, errNotCall
	}
	params, err := jsonx.ParseObject(msg.Get("params"))
	if err != nil {
		return neutral.ToolCall{}, errors.New("params must be an object with the tool's name")
	}
	name, ok := jsonx.Unquote(params.Get("name"))
	if !ok || name == "" {
		return neutral.ToolCall{}, errors.New("params.name must be the tool's name")
	}
	args := params.Get("arguments")
	if args == nil || string(args) == "null" {
		args = []byte("{}")
	}
	_, terr := jsonx.ParseObject(params.Get("task"))
	c.id, c.name, c.task, c.body = id, name, terr == nil, body
	return neutral.ToolCall{ID: string(id), Name: name, Args: args, Kind: neutral.Function}, nil
}

// Decoded is the codec and the answer of a tools/call its route already
// read: id, tool name, arguments and whether it runs as a task.
func Decoded(id []byte, name string, args []byte, task bool, body []byte) (*Codec, *neutral.Answer) {
	c := &Codec{id: id, name: name, task: task, body: body}
	call := neutral.ToolCall{ID: string(id), Name: name, Args: args, Kind: neutral.Function}
	return c, &neutral.Answer{Body: body, Choices: []*neutral.Turn{{Calls: []neutral.ToolCall{call}, Stop: neutral.StopToolCalls}}}
}

// ReQuery implements api.Codec: nobody can be asked again.
func (c *Codec) ReQuery(*neutral.Answer, *neutral.Query) ([]byte, error) { return nil, errNoReQuery }

// InjectTool implements api.Codec: a tools/call has no tools to add to.
func (c *Codec) InjectTool(neutral.Offered) ([]byte, error) { return nil, errNoReQuery }

// EncodeAnswer implements api.Codec: the call goes to the server as the
// client sent it (Keep) or with the call the pipeline chose (Replace);
// Respond answers the client instead, with an error result.
func (c *Codec) EncodeAnswer(a *neutral.Answer, actions []neutral.Action) ([]byte, error) {
	if len(actions) != 1 {
		return nil, errors.New("a tools/call has exactly one call")
	}
	act := &actions[0]
	switch act.Kind {
	case neutral.Replace:
		return replaceCall(a.Body, act.Calls[0])
	case neutral.Respond:
		res := toolResult{Content: []textContent{{Type: "text", Text: act.Text}}, IsError: true, ResultType: c.resultType()}
		if e := act.Escalation; e != nil {
			res.Meta = map[string]any{metaEscalation: escalationMeta(e)}
		}
		return response(c.id, res), nil
	}
	return a.Body, nil
}

func replaceCall(body []byte, call neutral.ToolCall) ([]byte, error) {
	msg, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	params, err := jsonx.ParseObject(msg.Get("params"))
	if err != nil {
		return nil, err
	}
	params = params.Set("name", jsonx.String(call.Name)).Set("arguments", call.Args)
	return msg.Set("params", params.Bytes()).Bytes(), nil
}

// EncodeEscalation implements api.Codec: a refused call is answered with
// an error result that lists every reason, so the model can correct it
// (MCP 2025-11-25 asks servers to report input validation errors so). A
// task-augmented call, whose client expects a task handle, and a call to
// a tool the server does not have get a JSON-RPC error instead.
func (c *Codec) EncodeEscalation(e *neutral.Escalated) []byte {
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
func (c *Codec) resultType() string {
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

// EncodeError implements api.Codec: toolgate's own error as a JSON-RPC
// error, its code in data.
func (c *Codec) EncodeError(f neutral.Failure) []byte {
	code := CodeUnavailable
	if f.Refusal {
		code = CodeInvalidRequest
	}
	return ErrorResponse(c.id, code, f.Message, map[string]string{"code": string(f.Code)})
}

// Error is f as the JSON-RPC error answering the request with id (JSON;
// nil for null), for an error that answers no single tools/call.
func Error(id []byte, f neutral.Failure) []byte { return (&Codec{id: id}).EncodeError(f) }

// CallJSON implements api.Codec: a call as tools/call params spell it.
func (c *Codec) CallJSON(call neutral.ToolCall) []byte {
	b, _ := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}{call.Name, objectOrNil(call.Args)})
	return b
}

// NewStream implements api.Codec: a server's SSE answer to the call.
func (c *Codec) NewStream() api.Stream { return &Stream{id: c.id} }

// NewFramedStream implements api.Codec: MCP streams are SSE.
func (c *Codec) NewFramedStream(http.Header, io.Reader) (api.Stream, api.EventReader, bool) {
	return nil, nil, false
}

// FollowUpRoute implements api.Codec; there are no follow-ups.
func (c *Codec) FollowUpRoute(path, rawQuery string) (string, string) { return path, rawQuery }

// Notes implements api.Codec: nothing to note besides the call.
func (c *Codec) Notes(*neutral.Turn) []string { return nil }

// protocolKeys are the keys a tools/call is read by.
var protocolKeys = jsonx.NewKeyFold("jsonrpc", "id", "method", "params", "name", "arguments", "task", "result", "error")

// FoldedKey implements api.Codec.
func (c *Codec) FoldedKey(data []byte) bool { return protocolKeys.In(data) }

// StrictTools implements api.StrictMarker: the server, not the client,
// declares MCP tools, and no provider decodes them.
func (c *Codec) StrictTools() []api.StrictTool { return nil }

// StrictPerRequest implements api.StrictMarker.
func (c *Codec) StrictPerRequest() bool { return false }

// MarkStrict implements api.StrictMarker: there is nothing to mark.
func (c *Codec) MarkStrict([]string) ([]byte, error) { return c.body, nil }

// UpstreamError implements api.StrictMarker: a JSON-RPC error's message.
func (c *Codec) UpstreamError(body []byte) (string, string) {
	msg, err := jsonx.ParseObject(body)
	if err != nil {
		return "", ""
	}
	e, err := jsonx.ParseObject(msg.Get("error"))
	if err != nil {
		return "", ""
	}
	s, _ := jsonx.Unquote(e.Get("message"))
	return s, ""
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

// A Stream follows a server's SSE answer to a tools/call: messages the
// server sends on the way (progress, requests of its own) and then its
// response. The server's answer carries no model calls, so nothing in it
// is held; Feed reads each event to refuse what cannot be read.
type Stream struct {
	api.SSEStream
	id []byte
}

// Feed implements api.Stream. The response to the call is the last event.
func (s *Stream) Feed(ev *sse.Event) (neutral.Step, error) {
	if len(ev.Data) == 0 {
		return neutral.Step{}, nil
	}
	msg, err := jsonx.ParseObject(ev.Data)
	if err != nil {
		return neutral.Step{}, err
	}
	if string(msg.Get("id")) == string(s.id) {
		switch {
		case msg.Has("error"):
			// The server's own error answers the call and ends it.
			return neutral.Step{UpstreamError: true}, nil
		case msg.Has("result"):
			return neutral.Step{Done: true}, nil
		}
	}
	return neutral.Step{}, nil
}

// Turns implements api.Stream: a server's answer holds no model calls.
func (s *Stream) Turns() []*neutral.Turn { return nil }

// Encode implements api.Stream: nothing is changed in a server's events.
func (s *Stream) Encode(held []neutral.HeldEvent, _ []neutral.Action, _ api.Sent) ([]byte, error) {
	var out []byte
	for _, h := range held {
		out = append(out, h.Raw...)
	}
	return out, nil
}

// ErrorEvent implements api.Stream: the call's answer, as an event.
func (s *Stream) ErrorEvent(f neutral.Failure, _ *neutral.Escalated, _ api.Sent) []byte {
	c := &Codec{id: s.id}
	return Event(nil, c.EncodeError(f))
}

// UpstreamError implements api.Stream: the server's error goes as sent;
// nothing before it is ever held, so there is nothing to renumber.
func (s *Stream) UpstreamError(ev neutral.HeldEvent, _ api.Sent) []byte { return ev.Raw }

// Usage implements api.Stream: MCP answers count no tokens.
func (s *Stream) Usage() neutral.Usage { return neutral.Usage{} }

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
