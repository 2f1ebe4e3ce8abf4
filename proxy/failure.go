package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/recovery"
)

// Every failure toolgate answers itself carries its class where it
// arises: its status, code, message and whether a retry may meet another
// result. classify reads it off, and converts the few errors that come
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
	// errNotUTF8: JSON between systems must be UTF-8 (RFC 8259 §8.1). Go's
	// decoder reads invalid bytes as U+FFFD, so toolgate would judge one
	// call while the unchanged bytes make a strict client parser fail or
	// read another.
	errNotUTF8 = refusedAnswer("the upstream answer is not valid UTF-8")
	// errFoldedKey: a key that differs from a protocol key only by case
	// ("Choices", "Tool_calls"). Go's decoder would read it as the real
	// key while the agent's SDK ignores it, or the reverse. In a stream it
	// is reported as a bad event.
	errFoldedKey = refusedAnswer("the upstream answer has a key that differs from a protocol key only in letter case")
	// errNoCallID: the agent answers a call by its id and a re-query must
	// too, so such a call can be neither run nor repaired.
	errNoCallID = refusedAnswer("the upstream answer has a tool call without an id")
	// errTwoForms: calls, or the tools offered, in two forms at once
	// (Chat's tools and its legacy functions): which one the agent runs is
	// its SDK's choice, so neither is judged alone.
	errTwoForms = refusedAnswer("the exchange mixes tools with the legacy functions form, which cannot be judged as one")
	// errUnreadable: the codec could not decode the answer; the codec's
	// error is wrapped around it for the log.
	errUnreadable = &failure{cause: "unreadable upstream answer", f: upstreamFailure("",
		"toolgate could not read the upstream answer, so it was not forwarded").f}
)

// Why an upstream answer or stream could not be used.
var (
	// errTooLarge: an upstream answer over max_response_bytes.
	errTooLarge = upstreamFailure("the upstream answer exceeds max_response_bytes",
		"the upstream answer exceeds max_response_bytes")
	// errEncoding: a compressed answer the transport did not decode.
	errEncoding = upstreamFailure("the upstream answer uses a content encoding toolgate cannot read",
		"the upstream answer uses a content encoding toolgate cannot read")
	// errBadEvent: a stream event the codec cannot read.
	errBadEvent = upstreamFailure("the upstream sent a stream event toolgate cannot read",
		"the upstream sent a stream event toolgate cannot read")
	// errCut: a stream that ended before its terminal event.
	errCut = upstreamFailure("the upstream stream ended before the answer was complete",
		"the upstream stream ended before the answer was complete")
	// errStreamIdle: a stream that went silent past idle_timeout.
	errStreamIdle = &failure{cause: "the upstream stream went silent", f: neutral.Failure{Status: http.StatusGatewayTimeout,
		Code: neutral.CodeUpstreamTimeout, Message: "the upstream stream went silent for longer than idle_timeout", Retryable: true}}
	// errRender: toolgate could not build the repaired answer; a bug.
	errRender = &failure{cause: "toolgate could not build the repaired answer", f: neutral.Failure{Status: http.StatusBadGateway,
		Code: neutral.CodeInternal, Message: "toolgate could not build the repaired answer", Retryable: true}}
)

// Request body failures.
var (
	// errRequestTimeout: a body that came too slowly may come in time on
	// a retry.
	errRequestTimeout = &failure{cause: "request body timeout", f: neutral.Failure{Status: http.StatusRequestTimeout,
		Code: neutral.CodeRequestTimeout, Message: "the request body did not arrive in time", Retryable: true}}
	errRequestRead = &failure{cause: "request body unreadable", f: neutral.Failure{Status: http.StatusBadRequest,
		Code: neutral.CodeRequestRead, Message: "the request body could not be read"}}
)

// statusEscalated is the status of an error-mode escalation (docs/escalations.md).
const statusEscalated = http.StatusUnprocessableEntity

// classify turns an error met while answering into toolgate's own error:
// the class it carries, or, for an error from elsewhere, the one its kind
// has. A re-query's failure is classed as such whatever it wraps, and a
// failure's own class wins over a cause wrapped in it.
func classify(err error) neutral.Failure {
	var ue *recovery.UpstreamError
	var f *failure
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ue):
		return repairFailure(ue, false)
	case errors.As(err, &f):
		return f.f
	case errors.As(err, &mbe):
		return neutral.Failure{Status: http.StatusRequestEntityTooLarge, Code: neutral.CodeRequestTooLarge,
			Message: fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit)}
	case errors.Is(err, upstream.ErrIdle), isTimeout(err):
		f := upstreamFailure("", "the upstream did not answer in time").f
		f.Status = http.StatusGatewayTimeout
		return f
	}
	return upstreamFailure("", "the upstream could not be reached").f
}

// repairFailure is a re-query the upstream failed while toolgate was
// repairing a call. The provider's own status answer is relayed as it is
// where nothing was written yet; this is the error for a transport failure,
// or for a stream that has begun.
func repairFailure(ue *recovery.UpstreamError, streaming bool) neutral.Failure {
	msg := "the upstream failed while toolgate was repairing a tool call; retry the request"
	if streaming && ue.Status != 0 {
		msg += " (upstream status " + strconv.Itoa(ue.Status) + ")"
	}
	return neutral.Failure{Status: http.StatusGatewayTimeout, Code: neutral.CodeUpstream, Message: msg, Retryable: true}
}

// requeryFailure is what a re-query that could not be sent or read comes
// to: the client's own cancellation or the recovery deadline as such; an
// answer toolgate refuses (too large, an unknown encoding) as it is, for
// the ladder to escalate; and a connection that failed (refused, reset,
// an idle timeout before the headers or inside the body) as a transport
// failure, which the client's retry may well not meet again. A refused
// status is statusFailure's.
func requeryFailure(ctx context.Context, err error) error {
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

// statusFailure is a re-query the provider refused.
func statusFailure(status int, h http.Header, body []byte) *recovery.UpstreamError {
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

// bodyError names what went wrong reading a request body.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: %w", errRequestTimeout, err)
	}
	return fmt.Errorf("%w: %w", errRequestRead, err)
}

// authFailure answers a request without a valid inbound token.
var authFailure = neutral.Failure{Status: http.StatusUnauthorized, Code: neutral.CodeAuth, Message: "a valid toolgate token is required"}

// panicFailure answers a request whose handler panicked.
func panicFailure(rid string) neutral.Failure {
	return neutral.Failure{Status: http.StatusBadGateway, Code: neutral.CodeInternal,
		Message: "toolgate failed on this request; request id " + rid, Retryable: true}
}

// shouldRetry is the X-Should-Retry value for f, or "" to leave the SDK's
// own policy in charge. toolgate's own refusals (auth, size) will not
// change on a retry.
func shouldRetry(f neutral.Failure) string {
	if f.Retryable {
		return ""
	}
	return "false"
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// storeFailure answers when the approval store cannot be reached: the
// call stays held, and a retry a moment later may meet the store again.
func storeFailure(msg string) neutral.Failure {
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
