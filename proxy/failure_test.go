package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/neutral"
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
// retry policy, in plain answers and streams.
func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		streaming bool
		status    int
		code      neutral.FailureCode
		msg       string
		retry     bool
	}{
		{"request too large", &http.MaxBytesError{Limit: 10}, false, 413, neutral.CodeRequestTooLarge, "the request body exceeds 10 bytes", false},
		{"request slow", bodyError(fmt.Errorf("read: %w", os.ErrDeadlineExceeded)), false, 408, neutral.CodeRequestTimeout, "the request body did not arrive in time", true},
		{"request unreadable", bodyError(errors.New("reset")), false, 400, neutral.CodeRequestRead, "the request body could not be read", false},
		{"not utf-8", errNotUTF8, false, 502, neutral.CodeUpstream, errNotUTF8.Error() + ", so it was not forwarded", true},
		{"folded key", errFoldedKey, false, 502, neutral.CodeUpstream, errFoldedKey.Error() + ", so it was not forwarded", true},
		{"folded key in a stream", errFoldedKey, true, 502, neutral.CodeUpstream, errBadEvent.Error(), true},
		{"no call id", errNoCallID, true, 502, neutral.CodeUpstream, errNoCallID.Error() + ", so it was not forwarded", true},
		{"answer too large", errTooLarge, false, 502, neutral.CodeUpstream, errTooLarge.Error(), true},
		{"encoding", errEncoding, false, 502, neutral.CodeUpstream, errEncoding.Error(), true},
		{"unreadable answer", unreadable{errors.New("eof")}, false, 502, neutral.CodeUpstream, "toolgate could not read the upstream answer, so it was not forwarded", true},
		{"bad event", fmt.Errorf("%w: x", errBadEvent), true, 502, neutral.CodeUpstream, errBadEvent.Error(), true},
		{"cut stream", fmt.Errorf("%w: eof", errCut), true, 502, neutral.CodeUpstream, errCut.Error(), true},
		{"idle stream", errIdle, true, 504, neutral.CodeUpstreamTimeout, "the upstream stream went silent for longer than idle_timeout", true},
		{"idle answer", errIdle, false, 504, neutral.CodeUpstream, "the upstream did not answer in time", true},
		{"render", errRender, false, 502, neutral.CodeInternal, errRender.Error(), true},
		{"repair transport", transportFailure(errors.New("reset")), false, 504, neutral.CodeUpstream, "the upstream failed while toolgate was repairing a tool call; retry the request", true},
		{"repair status in a stream", statusFailure(503, nil, nil), true, 504, neutral.CodeUpstream, "the upstream failed while toolgate was repairing a tool call; retry the request (upstream status 503)", true},
		{"unreachable", errors.New("dial tcp: refused"), false, 502, neutral.CodeUpstream, "the upstream could not be reached", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := classify(tc.err, tc.streaming)
			if f.Status != tc.status || f.Code != tc.code || f.Message != tc.msg || f.Retryable != tc.retry {
				t.Errorf("classify = %+v", f)
			}
			if want := map[bool]string{true: "", false: "false"}[tc.retry]; shouldRetry(f) != want {
				t.Errorf("X-Should-Retry %q", shouldRetry(f))
			}
		})
	}
}
