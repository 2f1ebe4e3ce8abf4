package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/recovery"
)

// The re-query statuses the official SDKs retry go back to the client;
// the rest escalate.
func TestStatusFailureRetryable(t *testing.T) {
	for status, want := range map[int]bool{400: false, 401: false, 404: false, 422: false,
		408: true, 409: true, 429: true, 500: true, 502: true, 529: true} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			if got := statusFailure(status, nil, nil).Retryable; got != want {
				t.Errorf("Retryable = %v", got)
			}
		})
	}
	if !transportFailure(errors.New("reset")).Retryable {
		t.Error("a transport failure is not retryable")
	}
}

// Every failure toolgate answers itself has one status, code, message and
// retry policy, in plain answers and streams. A stream's own failures are
// values of their own (a folded key is a bad event there, silence is a
// stream timeout), made where the stream meets them.
func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   neutral.FailureCode
		msg    string
		retry  bool
	}{
		{"request too large", &http.MaxBytesError{Limit: 10}, 413, neutral.CodeRequestTooLarge, "the request body exceeds 10 bytes", false},
		{"request slow", bodyError(fmt.Errorf("read: %w", os.ErrDeadlineExceeded)), 408, neutral.CodeRequestTimeout, "the request body did not arrive in time", true},
		{"request unreadable", bodyError(errors.New("reset")), 400, neutral.CodeRequestRead, "the request body could not be read", false},
		{"not utf-8", errNotUTF8, 502, neutral.CodeUpstream, errNotUTF8.Error() + ", so it was not forwarded", true},
		{"folded key", errFoldedKey, 502, neutral.CodeUpstream, errFoldedKey.Error() + ", so it was not forwarded", true},
		{"folded key in a stream", fmt.Errorf("%w: %v", errBadEvent, errFoldedKey), 502, neutral.CodeUpstream, errBadEvent.Error(), true},
		{"no call id", errNoCallID, 502, neutral.CodeUpstream, errNoCallID.Error() + ", so it was not forwarded", true},
		{"answer too large", errTooLarge, 502, neutral.CodeUpstream, errTooLarge.Error(), true},
		{"encoding", errEncoding, 502, neutral.CodeUpstream, errEncoding.Error(), true},
		{"unreadable answer", fmt.Errorf("%w: %w", errUnreadable, errors.New("eof")), 502, neutral.CodeUpstream, "toolgate could not read the upstream answer, so it was not forwarded", true},
		{"bad event", fmt.Errorf("%w: x", errBadEvent), 502, neutral.CodeUpstream, errBadEvent.Error(), true},
		{"cut stream", fmt.Errorf("%w: eof", errCut), 502, neutral.CodeUpstream, errCut.Error(), true},
		{"idle stream", errStreamIdle, 504, neutral.CodeUpstreamTimeout, "the upstream stream went silent for longer than idle_timeout", true},
		{"idle answer", upstream.ErrIdle, 504, neutral.CodeUpstream, "the upstream did not answer in time", true},
		{"render", errRender, 502, neutral.CodeInternal, errRender.Error(), true},
		{"repair transport", transportFailure(errors.New("reset")), 504, neutral.CodeUpstream, "the upstream failed while toolgate was repairing a tool call; retry the request", true},
		{"repair transport idle", transportFailure(upstream.ErrIdle), 504, neutral.CodeUpstream, "the upstream failed while toolgate was repairing a tool call; retry the request", true},
		{"unreachable", errors.New("dial tcp: refused"), 502, neutral.CodeUpstream, "the upstream could not be reached", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := classify(tc.err)
			if f.Status != tc.status || f.Code != tc.code || f.Message != tc.msg || f.Retryable != tc.retry {
				t.Errorf("classify = %+v", f)
			}
			if want := map[bool]string{true: "", false: "false"}[tc.retry]; shouldRetry(f) != want {
				t.Errorf("X-Should-Retry %q", shouldRetry(f))
			}
		})
	}
	// A stream that has begun tells the provider's status in its error event.
	f := repairFailure(statusFailure(503, nil, nil), true)
	if f.Status != 504 || f.Code != neutral.CodeUpstream || !f.Retryable ||
		f.Message != "the upstream failed while toolgate was repairing a tool call; retry the request (upstream status 503)" {
		t.Errorf("repair status in a stream = %+v", f)
	}
}

// A re-query whose answer toolgate refuses escalates; one whose connection
// failed inside the body is handed back like a transport failure.
func TestRequeryFailure(t *testing.T) {
	for _, err := range []error{errTooLarge, errEncoding} {
		if got := requeryFailure(context.Background(), err); got != err {
			t.Errorf("%v became %v", err, got)
		}
	}
	for _, err := range []error{upstream.ErrIdle, errors.New("connection reset")} {
		var ue *recovery.UpstreamError
		if !errors.As(requeryFailure(context.Background(), err), &ue) || !ue.Retryable || ue.Status != 0 {
			t.Errorf("%v: not a retryable transport failure", err)
		}
	}
	// A client gone or the recovery deadline is the ladder's to tell apart.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := requeryFailure(ctx, errors.New("reset")); got != context.Canceled {
		t.Errorf("after cancellation: %v", got)
	}
}
