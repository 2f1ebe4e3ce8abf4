package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/toolgate/toolgate/internal/httpx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/recovery"
)

// Every failure toolgate answers itself carries its class where it
// arises: its status, code, message and whether a retry may meet another
// result. Classify reads it off, and converts the few errors that come
// from elsewhere; codecs only wrap the Failure in their API's envelope.

// failure is one of toolgate's own errors with its class. It may be
// wrapped with detail for the log; the client is told only f.
type failure struct {
	// cause is what went wrong, for the log.
	cause string
	f     neutral.Failure
}

func (e *failure) Error() string { return e.cause }

// refusedAnswer is an upstream answer toolgate will not forward: what it
// judged and what the agent would run could differ.
func refusedAnswer(cause string) *failure {
	return upstreamFailure(cause, cause+", so it was not forwarded")
}

// upstreamFailure is an upstream that could not be used. A 502 may not
// happen again: the SDK's own retry policy decides, so it is retryable.
func upstreamFailure(cause, msg string) *failure {
	return &failure{cause: cause, f: neutral.Failure{Status: http.StatusBadGateway, Code: neutral.CodeUpstream,
		Message: msg, Retryable: true}}
}

// Why an upstream answer is refused. Each one is a way what toolgate
// judged and what the agent would run could differ, so the answer is not
// forwarded.
var (
	// ErrNotUTF8: JSON between systems must be UTF-8 (RFC 8259 §8.1). Go's
	// decoder reads invalid bytes as U+FFFD, so toolgate would judge one
	// call while the unchanged bytes make a strict client parser fail or
	// read another.
	ErrNotUTF8 = refusedAnswer("the upstream answer is not valid UTF-8")
	// ErrFoldedKey: a key that differs from a protocol key only by case
	// ("Choices", "Tool_calls"). Go's decoder would read it as the real
	// key while the agent's SDK ignores it, or the reverse. In a stream it
	// is reported as a bad event.
	ErrFoldedKey = refusedAnswer("the upstream answer has a key that differs from a protocol key only in letter case")
	// ErrNoCallID: the agent answers a call by its id and a re-query must
	// too, so such a call can be neither run nor repaired.
	ErrNoCallID = refusedAnswer("the upstream answer has a tool call without an id")
	// ErrTwoForms: calls, or the tools offered, in two forms at once
	// (Chat's tools and its legacy functions): which one the agent runs is
	// its SDK's choice, so neither is judged alone.
	ErrTwoForms = refusedAnswer("the exchange mixes tools with the legacy functions form, which cannot be judged as one")
	// ErrUnreadable: the codec could not decode the answer; the codec's
	// error is wrapped around it for the log.
	ErrUnreadable = &failure{cause: "unreadable upstream answer", f: upstreamFailure("",
		"toolgate could not read the upstream answer, so it was not forwarded").f}
)

// Why an upstream answer or stream could not be used.
var (
	// ErrTooLarge: an upstream answer over max_response_bytes.
	ErrTooLarge = upstreamFailure("the upstream answer exceeds max_response_bytes",
		"the upstream answer exceeds max_response_bytes")
	// ErrEncoding: a compressed answer the transport did not decode.
	ErrEncoding = upstreamFailure("the upstream answer uses a content encoding toolgate cannot read",
		"the upstream answer uses a content encoding toolgate cannot read")
	// ErrBadEvent: a stream event the codec cannot read.
	ErrBadEvent = upstreamFailure("the upstream sent a stream event toolgate cannot read",
		"the upstream sent a stream event toolgate cannot read")
	// ErrCut: a stream that ended before its terminal event.
	ErrCut = upstreamFailure("the upstream stream ended before the answer was complete",
		"the upstream stream ended before the answer was complete")
	// ErrStreamIdle: a stream that went silent past idle_timeout.
	ErrStreamIdle = &failure{cause: "the upstream stream went silent", f: neutral.Failure{Status: http.StatusGatewayTimeout,
		Code: neutral.CodeUpstreamTimeout, Message: "the upstream stream went silent for longer than idle_timeout", Retryable: true}}
	// ErrRender: toolgate could not build the repaired answer; a bug.
	ErrRender = &failure{cause: "toolgate could not build the repaired answer", f: neutral.Failure{Status: http.StatusBadGateway,
		Code: neutral.CodeInternal, Message: "toolgate could not build the repaired answer", Retryable: true}}
)

// Request body failures.
var (
	// ErrRequestTimeout: a body that came too slowly may come in time on
	// a retry.
	ErrRequestTimeout = &failure{cause: "request body timeout", f: neutral.Failure{Status: http.StatusRequestTimeout,
		Code: neutral.CodeRequestTimeout, Message: "the request body did not arrive in time", Retryable: true}}
	ErrRequestRead = &failure{cause: "request body unreadable", f: neutral.Failure{Status: http.StatusBadRequest,
		Code: neutral.CodeRequestRead, Message: "the request body could not be read"}}
)

// StatusEscalated is the status of an error-mode escalation (docs/escalations.md).
const StatusEscalated = http.StatusUnprocessableEntity

// Classify turns an error met while answering into toolgate's own error:
// the class it carries, or, for an error from elsewhere, the one its kind
// has. A re-query's failure is classed as such whatever it wraps, and a
// failure's own class wins over a cause wrapped in it.
func Classify(err error) neutral.Failure {
	var ue *recovery.UpstreamError
	var f *failure
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ue):
		return RepairFailure(ue, false)
	case errors.As(err, &f):
		return f.f
	case errors.As(err, &mbe):
		return neutral.Failure{Status: http.StatusRequestEntityTooLarge, Code: neutral.CodeRequestTooLarge,
			Message: fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit)}
	case errors.Is(err, httpx.ErrIdle), isTimeout(err):
		f := upstreamFailure("", "the upstream did not answer in time").f
		f.Status = http.StatusGatewayTimeout
		return f
	}
	return upstreamFailure("", "the upstream could not be reached").f
}

// RepairFailure is a re-query the upstream failed while toolgate was
// repairing a call. The provider's own status answer is relayed as it is
// where nothing was written yet; this is the error for a transport failure,
// or for a stream that has begun.
func RepairFailure(ue *recovery.UpstreamError, streaming bool) neutral.Failure {
	msg := "the upstream failed while toolgate was repairing a tool call; retry the request"
	if streaming && ue.Status != 0 {
		msg += " (upstream status " + strconv.Itoa(ue.Status) + ")"
	}
	return neutral.Failure{Status: http.StatusGatewayTimeout, Code: neutral.CodeUpstream, Message: msg, Retryable: true}
}

// RequeryFailure is what a re-query that could not be sent or read comes
// to: the client's own cancellation or the recovery deadline as such; an
// answer toolgate refuses (too large, an unknown encoding) as it is, for
// the ladder to escalate; and a connection that failed (refused, reset,
// an idle timeout before the headers or inside the body) as a transport
// failure, which the client's retry may well not meet again. A refused
// status is StatusFailure's.
func RequeryFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.As(err, new(*failure)) {
		return err
	}
	return transportFailure(err)
}

// transportFailure is a re-query that failed without a status (a reset,
// a timeout): the client's retry may well not meet it again.
func transportFailure(err error) *recovery.UpstreamError {
	return &recovery.UpstreamError{Err: err, Retryable: true}
}

// StatusFailure is a re-query the provider refused.
func StatusFailure(status int, h http.Header, body []byte) *recovery.UpstreamError {
	return &recovery.UpstreamError{Status: status, Header: h, Body: body,
		Retryable: RetryableStatus(status)}
}

// RetryableStatus reports whether the official SDKs retry an answer with
// status: a 408, 409 (lock timeout), 429 or any 5xx. Others (a 400 on the
// re-query's own shape, a 401) would fail again.
func RetryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// BodyError names what went wrong reading a request body.
func BodyError(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrRequestTimeout, err)
	}
	return fmt.Errorf("%w: %w", ErrRequestRead, err)
}

// AuthFailure answers a request without a valid inbound token.
var AuthFailure = neutral.Failure{Status: http.StatusUnauthorized, Code: neutral.CodeAuth, Message: "a valid toolgate token is required"}

// PanicFailure answers a request whose handler panicked.
func PanicFailure(rid string) neutral.Failure {
	return neutral.Failure{Status: http.StatusBadGateway, Code: neutral.CodeInternal,
		Message: "toolgate failed on this request; request id " + rid, Retryable: true}
}

// ShouldRetry is the X-Should-Retry value for f, or "" to leave the SDK's
// own policy in charge. toolgate's own refusals (auth, size) will not
// change on a retry.
func ShouldRetry(f neutral.Failure) string {
	if f.Retryable {
		return ""
	}
	return "false"
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// StoreFailure answers when the approval store cannot be reached: the
// call stays held, and a retry a moment later may meet the store again.
func StoreFailure(msg string) neutral.Failure {
	return neutral.Failure{Status: http.StatusServiceUnavailable, Code: neutral.CodeStoreUnavailable, Message: msg, Retryable: true}
}

// retryAfterOf is the Retry-After value for f, or "" for none: only an
// unreachable approval store says when to come back.
func retryAfterOf(f neutral.Failure) string {
	if f.Code == neutral.CodeStoreUnavailable {
		return "1"
	}
	return ""
}
