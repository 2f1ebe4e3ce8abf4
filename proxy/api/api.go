// Package api is the contract between toolgate's provider-neutral pipeline
// and its per-API codecs. A codec translates one wire format into neutral
// values and back; it never decides anything, and it never sees the
// catalog, the checks or the ladder (an import test holds that).
package api

import (
	"errors"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/sse"
)

// API is one wire format. It is stateless and shared; every request gets a
// Codec of its own from NewCodec.
type API interface {
	// Name is the api metric label: chat, messages, responses or gemini.
	Name() string
	// NewCodec returns a codec for one request.
	NewCodec() Codec
}

// Codec translates one request's exchange. It owns what it parsed of the
// request, so the pipeline hands nothing back to it. A Codec is used by
// one goroutine at a time and is not shared between requests.
type Codec interface {
	// DecodeRequest reads the client's request; path is the route's path
	// less its prefix (Gemini names the model and the verb there). An
	// error means the request cannot be read; it is then forwarded as is.
	DecodeRequest(path string, body []byte) (*neutral.Request, error)
	// DecodeAnswer decodes a non-streaming answer. It refuses an answer
	// that is not UTF-8 (ErrNotUTF8) or has a key folding onto a protocol
	// key where FoldedKey looks (ErrFoldedKey), before any other error:
	// the bytes could be read one way here and another by the agent.
	DecodeAnswer(body []byte) (*neutral.Answer, error)
	// ReQuery builds a re-query from the request (as sent upstream) with
	// q's history appended, in the provider's exact shape; prev is the
	// original answer when it was not streamed.
	ReQuery(prev *neutral.Answer, q *neutral.Query) ([]byte, error)
	// EncodeAnswer writes the answer the client gets: a's body with each
	// choice changed as its action says. Kept choices stay byte for byte.
	EncodeAnswer(a *neutral.Answer, actions []neutral.Action) ([]byte, error)
	// EncodeEscalation is the error-mode escalation body (docs/escalations.md).
	EncodeEscalation(e *neutral.Escalated) []byte
	// EncodeError is one of toolgate's own errors in the API's envelope.
	EncodeError(f neutral.Failure) []byte
	// CallJSON renders one call in the API's own shape, for the
	// escalation's "call" field.
	CallJSON(c neutral.ToolCall) []byte
	// InjectTool returns the request body with t appended last to its
	// tools (the abstain exit), or an error when the request has no
	// place for it.
	InjectTool(t neutral.Offered) ([]byte, error)
	// NewStream follows one streamed answer (SSE) to the request.
	NewStream() Stream
	// NewFramedStream follows a streamed answer that is not SSE (Gemini's
	// :streamGenerateContent without alt=sse answers one JSON array written
	// element by element), with the reader of its elements. ok is false
	// for an answer that is not such a stream, as it always is for an API
	// whose streams are SSE only; the pipeline then looks for SSE.
	NewFramedStream(h http.Header, body io.Reader) (st Stream, rd EventReader, ok bool)
	// FollowUpRoute is the path and query of a re-query, given the
	// client's: a re-query is read whole, and Gemini asks for a stream by
	// the path's verb and alt=sse, not in the body. Most APIs keep both.
	FollowUpRoute(path, rawQuery string) (string, string)
	// Notes are facts the operator must see about a turn although no
	// call is judged (Gemini's finish reason MALFORMED_FUNCTION_CALL):
	// fixed, bounded labels, usually none.
	Notes(t *neutral.Turn) []string
	// FoldedKey reports a key of data that differs from a protocol key
	// only in letter case. A codec that knows where its wire format's
	// keys are read checks there only (a check of every key would refuse
	// a Gemini argument named "Type"); the others check every key of the
	// document against ProtocolKeys. DecodeAnswer and Feed refuse what it
	// reports, in the pass that reads the document where they can.
	FoldedKey(data []byte) bool
	// Strict mode (docs/strict.md): the codec only reads and writes the flag;
	// which tools get it is the pipeline's decision.
	StrictMarker
}

// The refusals of DecodeAnswer and Feed that the pipeline tells apart
// from an answer that is merely unreadable.
var (
	ErrNotUTF8   = jsonx.ErrNotUTF8
	ErrFoldedKey = jsonx.ErrFolded
	// ErrTwoForms: tools offered or called in two of an API's forms at
	// once (Chat's tools and its legacy functions), which no one judgment
	// covers.
	ErrTwoForms = errors.New("tools in two forms at once")
)

// Readable is the check DecodeAnswer starts with, for a codec that does not
// make it in its own reading pass: UTF-8, then folded, the codec's
// FoldedKey.
func Readable(body []byte, folded func([]byte) bool) error {
	switch {
	case !utf8.Valid(body):
		return ErrNotUTF8
	case folded(body):
		return ErrFoldedKey
	}
	return nil
}

// ProtocolKeys are the keys of the three APIs that carry tool calls, text
// and their framing; a key that differs from one only in letter case is
// refused by codecs that check every key of a document.
var ProtocolKeys = jsonx.NewKeyFold(
	"choices", "message", "delta", "tool_calls", "function", "custom", "name", "arguments", "input",
	"id", "type", "index", "content", "finish_reason", "usage", "error", "output", "call_id", "item",
	"output_index", "content_block", "partial_json", "stop_reason", "response", "status", "role", "text",
	"function_call",
)

// ReadEvent reads a stream event's data into tx against last, the stream's
// last event read whole (jsonx.Text.Follow), and refuses a key that folds
// onto one of ProtocolKeys, looking only at keys last did not have. read is
// false for data that is not JSON, which the codec's decoder then refuses
// with its own error; a folded key is reported first all the same.
func ReadEvent(tx, last *jsonx.Text, data []byte) (read, sameKeys bool, err error) {
	read, sameKeys = tx.Follow(last, data)
	switch {
	case !read && ProtocolKeys.In(data), read && !sameKeys && ProtocolKeys.InText(tx):
		return read, sameKeys, ErrFoldedKey
	}
	return read, sameKeys, nil
}

// KeepaliveComment is the keepalive of an SSE stream whose clients take
// comments.
var KeepaliveComment = sse.AppendComment(nil, "keepalive")

// EventReader yields a streamed answer's events; *sse.Reader is one.
type EventReader interface {
	Next() bool
	Event() sse.Event
	// Buffered reports whether another whole event is already read.
	Buffered() bool
	// Err is what ended the events early, or nil at a clean end.
	Err() error
}

// Stream follows one streamed answer: it reads the events one by one and
// writes what replaces held ones. It reports what the provider said; what
// went out to the client is the pipeline's, which passes it in as a Sent
// to every method that writes. A Stream is used by one goroutine.
type Stream interface {
	// Feed reads one upstream event. An error means the upstream sent an
	// event that cannot be read; the stream is then failed, never guessed.
	// An event with a key the codec's FoldedKey reports is refused with
	// an error that wraps ErrFoldedKey.
	Feed(ev *sse.Event) (neutral.Step, error)
	// Turns returns the assembled answer, one turn per choice. Each turn's
	// Raw replays it in a re-query.
	Turns() []*neutral.Turn
	// Encode writes the events that replace held, the events fed after
	// the sent.Events that went out, given the action per choice. Indexes
	// and sequence numbers go on from what was sent. Nothing is written to
	// the stream after Encode's output but an error event.
	Encode(held []neutral.HeldEvent, actions []neutral.Action, sent Sent) ([]byte, error)
	// ErrorEvent is an in-stream error: an escalation when esc is set, else
	// f (a cut upstream, a failed repair), with any terminator the API
	// needs after it, following what sent says went out.
	ErrorEvent(f neutral.Failure, esc *neutral.Escalated, sent Sent) []byte
	// UpstreamError writes ev, the event Feed reported as the upstream's
	// own error (Step.UpstreamError), with anything the API needs after
	// it. It is the upstream's bytes unless sent.Held says events were
	// held and dropped: then the event is renumbered or reframed to follow
	// what the client was sent.
	UpstreamError(ev neutral.HeldEvent, sent Sent) []byte
	// Usage is the streamed answer's own usage, when the upstream sent it.
	Usage() neutral.Usage
	// Keepalive is what the pipeline writes while it holds the stream:
	// KeepaliveComment, unless the stream's clients cannot take an SSE
	// comment (the Go GenAI SDK fails on one). It is asked when holding
	// starts, so it may match what the stream has seen.
	Keepalive() []byte
	// Complete reports, at a clean end of the body, whether the answer is
	// whole although no terminal event came: true only for streams that
	// have none (Gemini's just end).
	Complete() bool
}
