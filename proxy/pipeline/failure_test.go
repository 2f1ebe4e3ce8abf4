package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/internal/httpx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/recovery"
)

// The re-query statuses the official SDKs retry go back to the client;
// the rest escalate.
func TestStatusFailureRetryable(t *testing.T) {
	for status, want := range map[int]bool{400: false, 401: false, 404: false, 422: false,
		408: true, 409: true, 429: true, 500: true, 502: true, 529: true} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			if got := StatusFailure(status, nil, nil).Retryable; got != want {
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
		{"request slow", BodyError(fmt.Errorf("read: %w", os.ErrDeadlineExceeded)), 408, neutral.CodeRequestTimeout, "the request body did not arrive in time", true},
		{"request unreadable", BodyError(errors.New("reset")), 400, neutral.CodeRequestRead, "the request body could not be read", false},
		{"not utf-8", ErrNotUTF8, 502, neutral.CodeUpstream, ErrNotUTF8.Error() + ", so it was not forwarded", true},
		{"folded key", ErrFoldedKey, 502, neutral.CodeUpstream, ErrFoldedKey.Error() + ", so it was not forwarded", true},
		{"folded key in a stream", fmt.Errorf("%w: %v", ErrBadEvent, ErrFoldedKey), 502, neutral.CodeUpstream, ErrBadEvent.Error(), true},
		{"no call id", ErrNoCallID, 502, neutral.CodeUpstream, ErrNoCallID.Error() + ", so it was not forwarded", true},
		{"answer too large", ErrTooLarge, 502, neutral.CodeUpstream, ErrTooLarge.Error(), true},
		{"encoding", ErrEncoding, 502, neutral.CodeUpstream, ErrEncoding.Error(), true},
		{"unreadable answer", fmt.Errorf("%w: %w", ErrUnreadable, errors.New("eof")), 502, neutral.CodeUpstream, "toolgate could not read the upstream answer, so it was not forwarded", true},
		{"bad event", fmt.Errorf("%w: x", ErrBadEvent), 502, neutral.CodeUpstream, ErrBadEvent.Error(), true},
		{"cut stream", fmt.Errorf("%w: eof", ErrCut), 502, neutral.CodeUpstream, ErrCut.Error(), true},
		{"idle stream", ErrStreamIdle, 504, neutral.CodeUpstreamTimeout, "the upstream stream went silent for longer than idle_timeout", true},
		{"idle answer", httpx.ErrIdle, 504, neutral.CodeUpstream, "the upstream did not answer in time", true},
		{"render", ErrRender, 502, neutral.CodeInternal, ErrRender.Error(), true},
		{"repair transport", transportFailure(errors.New("reset")), 504, neutral.CodeUpstream, "the upstream failed while toolgate was repairing a tool call; retry the request", true},
		{"repair transport idle", transportFailure(httpx.ErrIdle), 504, neutral.CodeUpstream, "the upstream failed while toolgate was repairing a tool call; retry the request", true},
		{"unreachable", errors.New("dial tcp: refused"), 502, neutral.CodeUpstream, "the upstream could not be reached", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := Classify(tc.err)
			if f.Status != tc.status || f.Code != tc.code || f.Message != tc.msg || f.Retryable != tc.retry {
				t.Errorf("Classify = %+v", f)
			}
			if want := map[bool]string{true: "", false: "false"}[tc.retry]; ShouldRetry(f) != want {
				t.Errorf("X-Should-Retry %q", ShouldRetry(f))
			}
		})
	}
	// A stream that has begun tells the provider's status in its error event.
	f := RepairFailure(StatusFailure(503, nil, nil), true)
	if f.Status != 504 || f.Code != neutral.CodeUpstream || !f.Retryable ||
		f.Message != "the upstream failed while toolgate was repairing a tool call; retry the request (upstream status 503)" {
		t.Errorf("repair status in a stream = %+v", f)
	}
}

// A re-query whose answer toolgate refuses escalates; one whose connection
// failed inside the body is handed back like a transport failure.
func TestRequeryFailure(t *testing.T) {
	for _, err := range []error{ErrTooLarge, ErrEncoding} {
		if got := RequeryFailure(context.Background(), err); got != err {
			t.Errorf("%v became %v", err, got)
		}
	}
	for _, err := range []error{httpx.ErrIdle, errors.New("connection reset")} {
		var ue *recovery.UpstreamError
		if !errors.As(RequeryFailure(context.Background(), err), &ue) || !ue.Retryable || ue.Status != 0 {
			t.Errorf("%v: not a retryable transport failure", err)
		}
	}
	// A client gone or the recovery deadline is the ladder's to tell apart.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := RequeryFailure(ctx, errors.New("reset")); got != context.Canceled {
		t.Errorf("after cancellation: %v", got)
	}
}
