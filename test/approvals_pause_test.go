package test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pause stops redis-server's process (SIGSTOP) until the returned func
// continues it (also at cleanup).
func (r *testRedis) pause(t *testing.T) func() {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	done := false
	resume := func() {
		if !done {
			done = true
			_ = r.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

// adminDecide posts a decision body to the admin API with a bearer token.
func adminDecide(t *testing.T, admin, id, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, admin+"/approvals/"+id, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String()
}

// pendingIDs lists the pending approvals through the admin API, waiting
// until the store answers.
func pendingIDs(t *testing.T, admin, token string) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, admin+"/approvals?state=pending", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil && resp.StatusCode == http.StatusOK {
			var out struct {
				Approvals []struct {
					ID string `json:"id"`
				} `json:"approvals"`
			}
			err = jsonDecode(resp, &out)
			if err == nil {
				ids := make([]string, len(out.Approvals))
				for i, a := range out.Approvals {
					ids[i] = a.ID
				}
				return ids
			}
		} else if err == nil {
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admin API did not list approvals: %v", err)
		}
	}
}

// TestApprovalsRedisPausedLeavesNoChange: with the shared redis paused,
// an approve through the admin API and a hold through the proxy answer
// 503; once redis runs again, the approval is still pending and the hold
// left no record. Duplicate members decide nothing either. Then the
// approval goes through and the call is released.
func TestApprovalsRedisPausedLeavesNoChange(t *testing.T) {
	rd := startTestRedis(t)
	up := newRefundUpstream(t)
	t.Setenv("TG_PAUSE_ADMINS", "ana:ana-pause-token")
	g := startApprovalGate(t, t.TempDir(), refundConfig(up.srv.URL, "  store: redis://"+rd.addr+"/0\n  admin_tokens_env: TG_PAUSE_ADMINS\n", 100000, "operator"))
	admin := "http://" + g.app.AdminAddr()
	const tok = "ana-pause-token"

	// Warm the connections and scripts: a paused server then holds the
	// writes themselves, not a connection's handshake.
	warm := rawHold(t, g.url())
	if st, b := adminDecide(t, admin, warm, tok, `{"decision":"deny"}`); st != http.StatusOK {
		t.Fatalf("warm-up deny: %d %s", st, b)
	}
	id := holdAsking(t, g.url(), "Refund order ord_1 now.")
	if st, _, _ := rawChat(t, g.url(), resumeWith(warm)); st != http.StatusForbidden {
		t.Fatalf("warm-up resume: %d", st)
	}

	for _, body := range []string{`{"decision":"deny","decision":"approve"}`, `{"decision":"deny","Decision":"approve"}`} {
		if st, b := adminDecide(t, admin, id, tok, body); st != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", body, st, b)
		}
	}

	resume := rd.pause(t)
	st, b := adminDecide(t, admin, id, tok, `{"decision":"approve"}`)
	resume()
	if st != http.StatusServiceUnavailable || !strings.Contains(b, "store_unavailable") {
		t.Fatalf("approve with redis paused: %d %s", st, b)
	}
	if ids := pendingIDs(t, admin, tok); len(ids) != 1 || ids[0] != id {
		t.Fatalf("after a 503 approve, pending: %v, want only %s", ids, id)
	}

	resume = rd.pause(t)
	hst, _, hb, err := postRaw(g.url()+"/v1/chat/completions", strings.Replace(chatRefundBody, "5 dollars", "6 dollars", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	resume()
	if hst != http.StatusServiceUnavailable {
		t.Fatalf("hold with redis paused: %d %s", hst, hb)
	}
	if ids := pendingIDs(t, admin, tok); len(ids) != 1 || ids[0] != id {
		t.Fatalf("after a 503 hold, pending: %v, want only %s (an orphan no client holds the id of)", ids, id)
	}

	if st, b := adminDecide(t, admin, id, tok, `{"decision":"approve"}`); st != http.StatusOK || !strings.Contains(b, `"decided_by":"ana"`) {
		t.Fatalf("approve: %d %s", st, b)
	}
	if st, hdr, b, _ := postRaw(g.url()+"/v1/chat/completions", askingBody("Refund order ord_1 now."), resumeWith(id)); st != http.StatusOK || hdr.Get("X-Toolgate-Outcome") != "approved" {
		t.Fatalf("resume: %d %s", st, b)
	}
}

func jsonDecode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
