package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/catalog"
)

// startLogged starts the config at path with its log observed.
func startLogged(t *testing.T, path string) (*App, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	a, err := Start(path, Options{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return a, logs
}

// A rejected reload's log line names every URL field the config refused
// for its credentials, and shows none of them.
func TestReloadLogLeavesOutURLCredentials(t *testing.T) {
	up := upstreamOK(t)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(configText(up.URL, "v1")), 0o644); err != nil {
		t.Fatal(err)
	}
	a, logs := startLogged(t, path)
	pw := map[string]string{
		"upstreams[0].url":         "upstreamPW1",
		"mcp_servers[0].url":       "mcpPW2",
		"validators[0].url":        "validatorPW3",
		"escalation.sinks.webhook": "webhookPW4",
		"approvals.notify":         "notifyPW5",
		"approvals.store":          "redisPW6",
	}
	u := func(field string) string { return "https://user-" + pw[field] + ":" + pw[field] + "@example.com/x" }
	bad := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n" +
		"upstreams: [{url: '" + u("upstreams[0].url") + "'}]\n" +
		"mcp_servers: [{name: orders, url: '" + u("mcp_servers[0].url") + "', path_prefix: /mcp/orders}]\n" +
		"validators: [{name: audit, url: '" + u("validators[0].url") + "'}]\n" +
		"escalation: {sinks: {webhook: '" + u("escalation.sinks.webhook") + "'}}\n" +
		"approvals: {notify: '" + u("approvals.notify") + "', store: 'redis://:" + pw["approvals.store"] + "@127.0.0.1:6379/0'}\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil {
		t.Fatal("URLs with credentials were accepted")
	}
	lines := logs.FilterMessageSnippet("config reload rejected").All()
	if len(lines) != 1 {
		t.Fatalf("%d reload-rejected log lines", len(lines))
	}
	var text strings.Builder
	for _, e := range logs.All() {
		text.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			text.WriteString(" " + k + "=")
			if s, ok := v.(string); ok {
				text.WriteString(s)
			}
		}
		text.WriteString("\n")
	}
	for field, secret := range pw {
		if !strings.Contains(text.String(), field) {
			t.Errorf("the reload log does not name %s:\n%s", field, text.String())
		}
		if strings.Contains(text.String(), secret) {
			t.Errorf("the reload log shows the password of %s:\n%s", field, text.String())
		}
	}
}

// refundUpstream answers every chat request with one valid call to
// issue_refund.
func refundUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"issue_refund","arguments":"{\"order_id\":\"A1\",\"amount_cents\":500}"}}]},"finish_reason":"tool_calls"}]}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// refundParts is a config in two parts: the first, everything before
// catalog:, is a valid config of its own, with no catalog and so no
// confirm policy; the second is the catalog, whose one tool needs a
// person's yes.
func refundParts(upstream, version string) (head, catalog string) {
	head = "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams: [{url: " + upstream + "}]\napprovals: {store: memory}\n"
	catalog = "catalog:\n  version: " + version + "\n  tools:\n    - name: issue_refund\n      policy: confirm\n" +
		"      parameters: {type: object, properties: {order_id: {type: string}, amount_cents: {type: integer}}, required: [order_id, amount_cents]}\n"
	return head, catalog
}

// refundAsked numbers the refund requests: each is a new one, never a
// client's retry of the last, which toolgate would answer from memory.
var refundAsked atomic.Int64

// held reports whether the refund is held for approval (a 422 escalation
// with an approval) rather than let through.
func held(t *testing.T, a *App) bool {
	t.Helper()
	body := `{"model":"m","messages":[{"role":"user","content":"refund A1, request ` + strconv.FormatInt(refundAsked.Add(1), 10) + `"}],` +
		`"tools":[{"type":"function","function":{"name":"issue_refund","parameters":{"type":"object"}}}]}`
	resp, err := http.Post("http://"+a.ProxyAddr()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	// The same request again within escalation.replay_window is the same
	// escalation, replayed as a 409: held all the same.
	escalated := resp.StatusCode == http.StatusUnprocessableEntity ||
		resp.StatusCode == http.StatusConflict && strings.Contains(string(b), `"tool_call_escalation"`)
	return escalated && strings.Contains(string(b), `"approval"`) && strings.Contains(string(b), `"apr_`)
}

// A config written in place in two parts, with a pause of 2 s between
// them, never goes live half-written: the confirm call stays held all
// through the pause and after, until SIGHUP's reload (Reload) applies the
// finished file. A file renamed over the config is applied by the watcher.
func TestReloadNeverAppliesAFileWrittenInPlace(t *testing.T) {
	up := refundUpstream(t)
	path := filepath.Join(t.TempDir(), "config.yaml")
	head, cat := refundParts(up.URL, "v1")
	if err := os.WriteFile(path, []byte(head+cat), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := catalog.Parse([]byte(head), "head.yaml"); err != nil {
		t.Fatalf("the first part alone must be a valid config for this test to mean anything: %v", err)
	} else if _, err := catalog.Compile(c, ""); err != nil {
		t.Fatalf("the first part alone does not compile: %v", err)
	}
	a, logs := startLogged(t, path)
	stop, err := a.Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !held(t, a) {
		t.Fatal("the confirm call is not held before the write")
	}

	head2, cat2 := refundParts(up.URL, "v2")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(head2); err != nil {
		t.Fatal(err)
	}
	// The watcher sees the first part at once; for 2 s, well past its
	// debounce, the call must stay held.
	checks := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); checks++ {
		if !held(t, a) {
			t.Fatalf("the confirm call went through %d checks into the pause: the first part went live", checks)
		}
		if v := a.Store.Load().Version; v != "v1" {
			t.Fatalf("version %s went live mid-write", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := f.WriteString(cat2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// One log line for each part: the first during the pause, the second
	// once the watcher saw the end of the write.
	waitFor(t, "the in-place write's log lines", func() bool {
		return logs.FilterMessageSnippet("written in place").FilterField(zap.String("file", "config.yaml")).Len() >= 2
	})
	if v := a.Store.Load().Version; v != "v1" || !held(t, a) {
		t.Fatalf("after the in-place write: version %s", v)
	}
	if n := testutil.ToFloat64(a.Metrics.ConfigReloads.WithLabelValues("success")) + testutil.ToFloat64(a.Metrics.ConfigReloads.WithLabelValues("error")); n != 0 {
		t.Fatalf("the watcher reloaded %v times on an in-place write", n)
	}

	// SIGHUP reloads the finished file at once.
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if v := a.Store.Load().Version; v != "v2" || !held(t, a) {
		t.Fatalf("after the reload: version %s", v)
	}

	// A finished file renamed over the config is applied by the watcher.
	head3, cat3 := refundParts(up.URL, "v3")
	tmp := filepath.Join(filepath.Dir(path), ".config.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(head3+cat3), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the renamed file to go live", func() bool { return a.Store.Load().Version == "v3" })
	if !held(t, a) {
		t.Fatal("the confirm call is not held after the rename")
	}
}

// A config removed and created again in place, its first part landing
// just as the watcher reads the new file, does not go live: the write
// shows in the window the watcher waits after reading, and the file is
// left for SIGHUP like any written in place.
func TestReloadNeverAppliesAFileCreatedInPlace(t *testing.T) {
	up := refundUpstream(t)
	path := filepath.Join(t.TempDir(), "config.yaml")
	head, cat := refundParts(up.URL, "v1")
	if err := os.WriteFile(path, []byte(head+cat), 0o644); err != nil {
		t.Fatal(err)
	}
	a, logs := startLogged(t, path)
	head2, cat2 := refundParts(up.URL, "v2")
	var created atomic.Pointer[os.File]
	var once sync.Once
	wrote := make(chan struct{})
	a.watchRead = func() {
		if f := created.Load(); f != nil {
			once.Do(func() {
				if _, err := f.WriteString(head2); err != nil {
					t.Error(err)
				}
				close(wrote)
			})
		}
	}
	stop, err := a.Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	created.Store(f)
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher never read the new file")
	}
	// The first part is on disk and was read; for 2 s the call stays held.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		if !held(t, a) || a.Store.Load().Version != "v1" {
			t.Fatalf("the first part went live (version %s)", a.Store.Load().Version)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := f.WriteString(cat2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the in-place write's log lines", func() bool {
		return logs.FilterMessageSnippet("written in place").Len() >= 2
	})
	if v := a.Store.Load().Version; v != "v1" || !held(t, a) {
		t.Fatalf("after the write: version %s", v)
	}
	if err := a.Reload(); err != nil || a.Store.Load().Version != "v2" {
		t.Fatalf("SIGHUP's reload: %v, version %s", err, a.Store.Load().Version)
	}
}
