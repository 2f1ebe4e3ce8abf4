// Package api is the contract between toolgate's provider-neutral pipeline
// and its per-API adapters. An adapter translates one wire format into
// neutral values and back; it never decides anything.
package api

import (
	"io"
	"net/http"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy/sse"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// Request is what the pipeline needs to know about a client request.
type Request struct {
	// Body is the request exactly as the client sent it.
	Body    []byte
	Model   string
	Stream  bool
	Offered []catalog.Offered
	Choice  catalog.ToolChoice
	// StructuredOutput is set when the request asks for response_format /
	// text.format: escalations then always use error mode.
	StructuredOutput bool
	// HistoryUpstream is set when earlier turns live at the provider.
	HistoryUpstream bool
	// Stateful is set when a re-query cannot extend the conversation.
	Stateful bool
	// Evidence vouches for provenance from user content and tool results.
	Evidence validate.Evidence
	// History is the conversation's earlier tool calls paired with their
	// results, for rules and validators. Adapters only record what the
	// wire carries; pairing and parsing are validate's.
	History *validate.History
	// UserText is the last user message, for shortlist ranking.
	UserText string
	// Private is the adapter's own parsed form of the request.
	Private any
}

// Response is a decoded non-streaming answer.
type Response struct {
	Body []byte
	// Choices are the answer's assistant turns (one unless n > 1).
	Choices []*recovery.Turn
	Usage   recovery.Usage
	// Private is the adapter's own parsed form of the answer.
	Private any
}

// Escalated pairs an escalation with the choice it replaces.
type Escalated struct {
	Choice     int
	Escalation *recovery.Escalation
	// Body is the escalation object as JSON (already redacted for the wire
	// where needed), so adapters embed it without re-encoding.
	Body []byte
	// Text is the user-facing sentence for message mode.
	Text string
}

// Final is the pipeline's decision for one choice, for Render.
type Final struct {
	Result *recovery.Result
	// Escalated is set when this choice is replaced by an escalation message.
	Escalated *Escalated
}

// Adapter translates one API's wire format.
type Adapter interface {
	// Name is the api metric label: chat, messages or responses.
	Name() string
	// ParseRequest reads the client's request. An error means the pipeline
	// cannot read it; the body is then forwarded as is.
	ParseRequest(body []byte) (*Request, error)
	// ParseResponse decodes a non-streaming answer.
	ParseResponse(body []byte) (*Response, error)
	// FollowUp builds a re-query from the original request with q's history
	// appended, in the provider's exact shape.
	FollowUp(req *Request, prev *Response, q *recovery.Query) ([]byte, error)
	// Render writes the answer the client gets: the original body with only
	// repaired calls replaced and escalated or abstained choices rewritten.
	Render(req *Request, resp *Response, finals []Final) ([]byte, error)
	// ErrorBody is the error-mode escalation body (SPEC §5).
	ErrorBody(e *Escalated) []byte
	// CallJSON renders one validated call in the route's own shape, for the
	// escalation's "call" field.
	CallJSON(c validate.ToolCall) []byte
	// NewStream follows one streamed answer to req.
	NewStream(req *Request) Stream
}

// ResponseParser is implemented by adapters whose answers can only be read
// knowing the request: Anthropic's tool_use blocks for its own client tools
// (bash, text editor) look like function calls, and only the request's tool
// list says which they are.
type ResponseParser interface {
	ParseResponseFor(req *Request, body []byte) (*Response, error)
}

// PlainErrorer is implemented by adapters whose API wraps errors in an
// envelope other than OpenAI's. toolgate's own refusals on the route (a
// misspelt path, a method or body encoding it cannot judge) are written in
// it, and where the SDKs need it (Gemini's read error fields by type) its
// own errors too: upstream down, timeouts, too large; without it they take
// OpenAI's shape.
type PlainErrorer interface {
	// PlainError is an error body for status with a machine-readable code
	// and a message for people.
	PlainError(status int, code, msg string) []byte
}

// ToolInjector is implemented by adapters that can offer the model an extra
// tool, used for the abstain exit. It returns the new request body with the
// tool appended last to the request's tools.
type ToolInjector interface {
	InjectTool(req *Request, t catalog.Offered) ([]byte, error)
}

// RouteReader is implemented by adapters whose requests say part of what
// they mean in the path: Gemini names the model and the streaming verb
// there (…/models/{model}:streamGenerateContent). The pipeline then calls
// ParseRequestAt with the path (prefix removed) instead of ParseRequest.
type RouteReader interface {
	ParseRequestAt(path string, body []byte) (*Request, error)
}

// FollowUpRouter is implemented by adapters whose re-queries go to another
// path or query than the client's request: a re-query is read whole, and
// Gemini asks for a stream by the path's verb and alt=sse, not in the body.
type FollowUpRouter interface {
	FollowUpRoute(path, rawQuery string) (string, string)
}

// Noter is implemented by adapters whose answers can carry facts the
// operator must see although no call is judged (Gemini's finish reason
// MALFORMED_FUNCTION_CALL). Notes are fixed, bounded labels.
type Noter interface {
	Notes(t *recovery.Turn) []string
}

// KeyChecker is implemented by adapters that find, themselves, keys that
// differ from a protocol key only in letter case, at the places of their
// wire format where keys are read. The pipeline's check of every key of a
// document would also refuse an argument named like a protocol key
// ("Type", "Name") where a call's arguments are an object, as in Gemini.
type KeyChecker interface {
	FoldedKey(data []byte) bool
}

// EventReader yields a streamed answer's events; *sse.Reader is one.
type EventReader interface {
	Next() bool
	Event() sse.Event
	// Buffered reports whether another whole event is already read.
	Buffered() bool
	// Err is what ended the events early, or nil at a clean end.
	Err() error
}

// Framer is implemented by adapters whose streams are not always SSE:
// Gemini's :streamGenerateContent without alt=sse answers one JSON array
// written element by element. ok is false for an answer that is not such
// a stream.
type Framer interface {
	NewFramedStream(req *Request, path string, h http.Header, body io.Reader) (st Stream, rd EventReader, ok bool)
}

// EOFEnder is implemented by streams that have no terminal event (Gemini's
// SSE stream just ends): at a clean end of the body the pipeline asks
// whether the answer is complete.
type EOFEnder interface {
	Complete() bool
}

// Keepaliver is implemented by streams whose clients cannot take the SSE
// comment the pipeline writes while holding (the Go GenAI SDK fails on
// one); it returns the bytes to write instead.
type Keepaliver interface {
	Keepalive() []byte
}

// Step is what a stream event means for the pipeline.
type Step struct {
	// Hold: a tool call has begun; this event and every later one must be
	// held until the calls are validated.
	Hold bool
	// Done: the stream's terminal event ([DONE], message_stop,
	// response.completed). Nothing that follows is read.
	Done bool
	// Opening: the event opens the answer and carries nothing for the
	// user yet: no text, no call, no usage, no end (a role-only delta,
	// message_start, a ping before any content block, response.created).
	// Adapters only say so; the pipeline decides what to do with it.
	Opening bool
}

// HeldEvent is a copy of an event the pipeline held back.
type HeldEvent struct {
	Raw   []byte
	Event string
	Data  []byte
}

// Stream follows one streamed answer: it assembles the calls from deltas and
// writes replacement events. A Stream is used by one goroutine.
type Stream interface {
	// Feed reads one upstream event. An error means the upstream sent an
	// event that cannot be read; the stream is then failed, never guessed.
	Feed(ev *sse.Event) (Step, error)
	// Turns returns the assembled answer, one turn per choice. Each turn's
	// Raw replays it in a re-query.
	Turns() []*recovery.Turn
	// Render writes the events that replace held, given the pipeline's
	// decision per choice. Indexes and sequence numbers stay contiguous.
	Render(held []HeldEvent, finals []Final) ([]byte, error)
	// ErrorEvent is an in-stream error (an escalation when esc is set, else
	// a failure such as a cut upstream), including any terminator the API
	// needs after it.
	ErrorEvent(code, message string, esc *Escalated) []byte
	// Usage is the streamed answer's own usage, when the upstream sent it.
	Usage() recovery.Usage
	// Committed reports whether the client has already been given an id
	// that a re-query would have to change (a stored Responses id).
	Committed() bool
}

// Replacement is what an escalated or abstained choice becomes: the text
// the user reads and, for an escalation, its object. ok is false for a
// choice that keeps its calls.
func (f Final) Replacement() (text string, esc []byte, ok bool) {
	switch {
	case f.Escalated != nil:
		return f.Escalated.Text, f.Escalated.Body, true
	case f.Result != nil && f.Result.Outcome == recovery.Abstained:
		return f.Result.AbstainReason, nil, true
	}
	return "", nil, false
}

// ChangedAt reports whether the call at position j was replaced.
func (f Final) ChangedAt(j int) bool {
	r := f.Result
	return r != nil && j >= 0 && j < len(r.Changed) && j < len(r.Calls) && r.Changed[j]
}
