package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func approvalsConfig(upstream, store string) string {
	return configText(upstream, "v1") + "approvals:\n  store: " + store + "\n  admin_token_env: TG_TEST_ADMIN_TOKEN\n"
}

func adminGet(t *testing.T, a *App, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.AdminAddr()+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The approvals admin API is on the admin listener behind the token, the
// approval metrics are on /metrics, and a reload takes a new token while
// the store stays the one opened at start.
func TestApprovalsAdminMountedAndTokenReloads(t *testing.T) {
	up := upstreamOK(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.yaml")
	t.Setenv("TG_TEST_ADMIN_TOKEN", "first-token")
	if err := os.WriteFile(path, []byte(approvalsConfig(up.URL, "memory")), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Start(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(t.Context())

	if st, _ := adminGet(t, a, "/approvals", ""); st != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", st)
	}
	if st, _ := adminGet(t, a, "/approvals", "wrong"); st != http.StatusForbidden {
		t.Errorf("wrong token: %d, want 403", st)
	}
	if st, body := adminGet(t, a, "/approvals?state=pending", "first-token"); st != http.StatusOK || !strings.Contains(body, "[") {
		t.Errorf("list: %d %s", st, body)
	}
	if st, body := adminGet(t, a, "/approvals/apr_00000000000000000000000000000000", "first-token"); st != http.StatusNotFound ||
		!strings.Contains(body, "approval_unknown") {
		t.Errorf("unknown id: %d %s", st, body)
	}
	if _, body := adminGet(t, a, "/metrics", ""); !strings.Contains(body, "toolgate_approvals_pending") ||
		!strings.Contains(body, `toolgate_approvals_total{result="requested"}`) {
		t.Errorf("approval metrics missing from /metrics")
	}

	t.Setenv("TG_TEST_ADMIN_TOKEN", "second-token")
	if err := os.WriteFile(path, []byte(approvalsConfig(up.URL, "file:approvals.db")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if st, _ := adminGet(t, a, "/approvals", "first-token"); st != http.StatusForbidden {
		t.Errorf("old token after reload: %d, want 403", st)
	}
	if st, _ := adminGet(t, a, "/approvals", "second-token"); st != http.StatusOK {
		t.Errorf("new token after reload: %d, want 200", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "approvals.db")); err == nil {
		t.Error("a reload opened the new store; it takes effect on restart")
	}
}

// A held call is notified to approvals.notify, signed, without its held
// answer.
func TestApprovalsNotifyWired(t *testing.T) {
	up := upstreamOK(t)
	got := make(chan *http.Request, 1)
	bodies := make(chan string, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case got <- r:
			bodies <- string(b)
		default:
		}
	}))
	defer hook.Close()
	t.Setenv("TG_TEST_NOTIFY_KEY", "notify-key")
	cfg := strings.Replace(configText(up.URL, "v1"), "      parameters:", "      policy: confirm\n      parameters:", 1) +
		"approvals:\n  notify: " + hook.URL + "\n  notify_secret_env: TG_TEST_NOTIFY_KEY\n"
	path := filepath.Join(t.TempDir(), "toolgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Start(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(t.Context())
	resp, err := post(t, a)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want the held call's 422", resp.StatusCode)
	}
	select {
	case r := <-got:
		body := <-bodies
		if !strings.HasPrefix(r.Header.Get("X-Toolgate-Signature"), "sha256=") || !strings.Contains(body, `"type":"approval.pending"`) ||
			!strings.Contains(body, `"tool":"get_weather"`) || strings.Contains(body, "chat.completion") {
			t.Errorf("notification %v %s", r.Header, body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
}
