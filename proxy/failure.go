package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/recovery"
)

// Every failure toolgate answers itself is classified here: its status,
// code, message and whether a retry may meet another result. Codecs only
// wrap the Failure in their API's envelope; nothing else picks a status.

// Why an upstream answer is refused. Each one is a way what toolgate
// judged and what the agent would run could differ, so the answer is not
// forwarded.
var (
	// errNotUTF8: JSON between systems must be UTF-8 (RFC 8259 §8.1). Go's
	// decoder reads invalid bytes as U+FFFD, so toolgate would judge one
	// call while the unchanged bytes make a strict client parser fail or
	// read another.
	errNotUTF8 = errors.New("the upstream answer is not valid UTF-8")
	// errFoldedKey: a key that differs from a protocol key only by case
	// ("Choices", "Tool_calls"). Go's decoder would read it as the real
	// key while the agent's SDK ignores it, or the reverse.
	errFoldedKey = errors.New("the upstream answer has a key that differs from a protocol key only in letter case")
	// errNoCallID: the agent answers a call by its id and a re-query must
	// too, so such a call can be neither run nor repaired.
	errNoCallID = errors.New("the upstream answer has a tool call without an id")
	// errTooLarge: an upstream answer over max_response_bytes.
	errTooLarge = errors.New("the upstream answer exceeds max_response_bytes")
	// errEncoding: a compressed answer the transport did not decode.
	errEncoding = errors.New("the upstream answer uses a content encoding toolgate cannot read")
	// errBadEvent: a stream event the codec cannot read.
	errBadEvent = errors.New("the upstream sent a stream event toolgate cannot read")
	// errCut: a stream that ended before its terminal event.
	errCut = errors.New("the upstream stream ended before the answer was complete")
	// errRender: toolgate could not build the repaired answer; a bug.
	errRender = errors.New("toolgate could not build the repaired answer")
)

// unreadable wraps a codec's decoding error: the answer is refused.
type unreadable struct{ err error }

func (u unreadable) Error() string { return "unreadable upstream answer: " + u.err.Error() }
func (u unreadable) Unwrap() error { return u.err }

// classify turns an error met while answering into toolgate's own error.
// streaming selects the wording of a stream's failures, which the client
// reads after text it already has.
func classify(err error, streaming bool) neutral.Failure {
	up := func(status int, msg string) neutral.Failure {
		// A 502 or 504 may not happen again: the SDK's own retry policy
		// decides, so these are retryable.
		return neutral.Failure{Status: status, Code: neutral.CodeUpstream, Message: msg, Retryable: true}
	}
	var mbe *http.MaxBytesError
	var ue *recovery.UpstreamError
	switch {
	case errors.As(err, &mbe):
		return neutral.Failure{Status: http.StatusRequestEntityTooLarge, Code: neutral.CodeRequestTooLarge,
			Message: fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit)}
	case errors.Is(err, errRequestTimeout):
		// A body that came too slowly may come in time on a retry.
		return neutral.Failure{Status: http.StatusRequestTimeout, Code: neutral.CodeRequestTimeout,
			Message: "the request body did not arrive in time", Retryable: true}
	case errors.Is(err, errRequestRead):
		return neutral.Failure{Status: http.StatusBadRequest, Code: neutral.CodeRequestRead, Message: "the request body could not be read"}
	case errors.Is(err, errRender):
		return neutral.Failure{Status: http.StatusBadGateway, Code: neutral.CodeInternal, Message: err.Error(), Retryable: true}
	case errors.As(err, &ue):
		return repairFailure(ue, streaming)
	case errors.Is(err, errNotUTF8), errors.Is(err, errNoCallID), errors.Is(err, errFoldedKey) && !streaming:
		return up(http.StatusBadGateway, rootMessage(err)+", so it was not forwarded")
	case errors.Is(err, errTooLarge), errors.Is(err, errEncoding):
		return up(http.StatusBadGateway, rootMessage(err))
	case errors.Is(err, errFoldedKey), errors.Is(err, errBadEvent):
		return up(http.StatusBadGateway, errBadEvent.Error())
	case errors.Is(err, errCut):
		return up(http.StatusBadGateway, errCut.Error())
	case errors.Is(err, errIdle) && streaming:
		f := up(http.StatusGatewayTimeout, "the upstream stream went silent for longer than idle_timeout")
		f.Code = neutral.CodeUpstreamTimeout
		return f
	case errors.Is(err, errIdle), isTimeout(err):
		return up(http.StatusGatewayTimeout, "the upstream did not answer in time")
	case errors.As(err, new(unreadable)):
		return up(http.StatusBadGateway, "toolgate could not read the upstream answer, so it was not forwarded")
	}
	return up(http.StatusBadGateway, "the upstream could not be reached")
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

// transportFailure is a re-query that failed without a status (a reset,
// a timeout): the client's retry may well not meet it again.
func transportFailure(err error) *recovery.UpstreamError {
	return &recovery.UpstreamError{Err: err, Retryable: true}
}

// upstreamReply is the provider's answer to a refused re-query, relayed to
// the client as it came when the failure is handed back.
type upstreamReply struct {
	header http.Header
	body   []byte
}

// statusFailure is a re-query the provider refused.
func statusFailure(status int, h http.Header, body []byte) *recovery.UpstreamError {
	return &recovery.UpstreamError{Status: status, Reply: &upstreamReply{header: h, body: body},
		Retryable: RetryableStatus(status)}
}

// RetryableStatus reports whether the official SDKs retry an answer with
// status: a 408, 409 (lock timeout), 429 or any 5xx. Others (a 400 on the
// re-query's own shape, a 401) would fail again.
func RetryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// rootMessage is the message of the sentinel err wraps, without the
// detail wrapped around it (which may quote upstream bytes).
func rootMessage(err error) string {
	for _, s := range []error{errNotUTF8, errNoCallID, errFoldedKey, errTooLarge, errEncoding} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return err.Error()
}

// Request body failures, told apart for classify.
var (
	errRequestTimeout = errors.New("request body timeout")
	errRequestRead    = errors.New("request body unreadable")
)

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
