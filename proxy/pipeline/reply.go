package pipeline

import (
	"io"
	"net/http"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/recovery"
)

// Labels of requests and answers that were not judged, beside the ladder's
// outcomes and the failure codes.
const (
	// LabelUpstreamStatus: the upstream answered with an error status,
	// relayed as it came.
	LabelUpstreamStatus = "upstream_status"
	// LabelUpstreamError: the upstream reported an error inside its
	// stream, passed on as it came.
	LabelUpstreamError = "upstream_stream_error"
	// UnreadableRequest, UnreadableResponse: toolgate_unvalidated_total
	// reasons for a request or an answer the codec could not read.
	UnreadableRequest  = "request_unreadable"
	UnreadableResponse = "response_unreadable"
)

// Reply is what a judged request answers, known in full before a byte of
// it is written: the upstream's bytes relayed, an answer as it came or
// re-encoded, an escalation, one of toolgate's failures, or the tail of a
// stream whose head may have gone out already. Everything that decides
// builds one; the exchange's writer alone sends it.
type Reply struct {
	Status int
	// Label is the outcome header's value once decided, else what ended
	// the request; it labels the request metrics and the log line.
	Label string
	// Decided: the label is the whole answer's outcome, so the outcome
	// headers go out with it; a stream's tail has none, its headers went
	// out (or go out now) as a stream's, before it was decided.
	Decided bool
	// Upstream are the upstream answer's headers to pass on; Encoded
	// keeps their content encoding, for bytes relayed undecoded.
	Upstream http.Header
	Encoded  bool
	// The reply's own headers, set over the upstream's: Content-Type,
	// X-Should-Retry: false, Retry-After and Cache-Control: no-cache.
	ContentType string
	NoRetry     bool
	RetryAfter  string
	NoCache     bool
	Body        []byte
	// From, when set, is read to the client in place of Body, up to Limit
	// bytes: an upstream's own error, relayed as it arrives.
	From  io.Reader
	Limit int64
	// Tail makes Body the end of the request's stream: it goes out
	// through the stream's writer, after whatever that sent, on the
	// stream's status and headers.
	Tail bool
	// Escalation marks an escalation's 422, which the request's retries
	// get again.
	Escalation bool
}

// AnswerReply is a whole answer that goes out: the upstream's bytes or
// their re-encoding, under the upstream's headers.
func AnswerReply(upHeader http.Header, body []byte, o recovery.Outcome) Reply {
	return Reply{Status: http.StatusOK, Label: string(o), Decided: true, Upstream: upHeader, Body: body}
}

// RelayReply passes a non-success upstream answer on as it is, read from
// body up to limit: the SDK knows what to do with the provider's own
// errors and retry-after.
func RelayReply(status int, h http.Header, body io.Reader, limit int64) Reply {
	return Reply{Status: status, Label: LabelUpstreamStatus, Upstream: h, Encoded: true, From: body, Limit: limit}
}

// HandBackReply passes a retryable re-query failure to the client as the
// provider sent it. It carries no outcome header: nothing was decided,
// and the SDK's retry will be judged afresh.
func HandBackReply(cd api.Codec, ue *recovery.UpstreamError) Reply {
	if ue.Status == 0 {
		return FailureReply(cd, RepairFailure(ue, false))
	}
	return Reply{Status: ue.Status, Label: string(neutral.CodeUpstream), Upstream: ue.Header, Encoded: true, Body: ue.Body}
}

// FailureReply is one of toolgate's own errors in the API's envelope.
func FailureReply(cd api.Codec, f neutral.Failure) Reply {
	return Reply{Status: f.Status, Label: string(f.Code), ContentType: "application/json", NoRetry: !f.Retryable,
		RetryAfter: retryAfterOf(f), Body: cd.EncodeError(f)}
}

// EscalationReply answers in error mode (docs/escalations.md).
func EscalationReply(cd api.Codec, e *neutral.Escalated, o recovery.Outcome) Reply {
	return Reply{Status: StatusEscalated, Label: string(o), Decided: true, ContentType: "application/json",
		NoRetry: true, Body: cd.EncodeEscalation(e), Escalation: true}
}

// TailReply ends a stream with body; decided when the stream's answer
// was judged whole.
func TailReply(body []byte, label string, decided bool) Reply {
	return Reply{Status: http.StatusOK, Label: label, Decided: decided, Tail: true, Body: body}
}
