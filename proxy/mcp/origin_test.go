package mcp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// DNS rebinding (SPEC §3a): a foreign Origin or Host is refused with 403
// before anything reaches the server, on every method; loopback and
// allowed values pass, and the server sees the client's Origin unchanged.
func TestOriginAndHostChecked(t *testing.T) {
	f := newFake(t)
	g := startGate(t, f.srv.URL, "mcp_servers: [{name: orders, url: "+f.srv.URL+", path_prefix: /mcp/orders, "+
		"allowed_origins: ['https://app.example.com'], allowed_hosts: [gate.internal, 'mcp.example.com:8443']}]\n")
	send := func(method, host, origin string) (int, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		}
		req, _ := http.NewRequest(method, g.url, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ method, host, origin string }{
		{http.MethodPost, "evil.example.com", ""},
		{http.MethodPost, "evil.example.com:8080", "http://localhost:3000"},
		{http.MethodPost, "", "http://evil.example.com"},
		{http.MethodPost, "", "null"},
		{http.MethodPost, "", "http://localhost.evil.example.com"},
		{http.MethodPost, "", "https://app.example.com:444"},
		{http.MethodPost, "mcp.example.com:80", ""},
		{http.MethodGet, "", "http://evil.example.com"},
		{http.MethodDelete, "evil.example.com", ""},
	} {
		status, body := send(tc.method, tc.host, tc.origin)
		if status != http.StatusForbidden || !strings.Contains(body, `"code":-32600`) || !strings.Contains(body, "Forbidden") {
			t.Errorf("%s Host %q Origin %q: %d %s", tc.method, tc.host, tc.origin, status, body)
		}
	}
	if got := f.joined(); got != "" {
		t.Fatalf("the server received refused requests: %s", got)
	}
	if n := metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "forbidden"}); n != 9 {
		t.Fatalf("forbidden counted %v times", n)
	}

	for _, tc := range []struct{ host, origin string }{
		{"", ""},
		{"localhost:1234", "http://localhost:3000"},
		{"[::1]:80", "http://127.0.0.1"},
		{"", "http://[::1]:5173"},
		{"gate.internal:8080", "https://app.example.com"},
		{"GATE.internal", "HTTPS://APP.EXAMPLE.COM"},
		{"mcp.example.com:8443", ""},
	} {
		if status, body := send(http.MethodPost, tc.host, tc.origin); status != http.StatusOK || !strings.Contains(body, `"result"`) {
			t.Errorf("Host %q Origin %q: %d %s", tc.host, tc.origin, status, body)
		}
		if tc.origin != "" && f.lastHeader().Get("Origin") != tc.origin {
			t.Errorf("the server saw Origin %q, want %q", f.lastHeader().Get("Origin"), tc.origin)
		}
	}
}

// A client that leaves while toolgate waits for the server's GET headers
// is not a server failure: no upstream_error, no "unreachable" warning.
func TestClientLeavesDuringGETHandshake(t *testing.T) {
	entered := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done()
	}))
	defer up.Close()
	core, logs := observer.New(zapcore.DebugLevel)
	g := startGateLog(t, up.URL, "", "", zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url, nil)
	req.Header.Set("Mcp-Session-Id", "s1")
	req.Header.Set("Accept", "text/event-stream")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-entered
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the GET was answered")
	}
	waitFor(t, func() bool {
		return metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "cancelled"}) == 1
	})
	if n := metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "upstream_error"}); n != 0 {
		t.Fatalf("counted %v upstream errors", n)
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
		t.Fatalf("logged %d warnings: %v", n, logs.All())
	}
}

// A browser on an allowed origin sends a CORS preflight first: it reaches
// the server, whose Access-Control-* answer comes back unchanged; from any
// other origin it is refused like every request.
func TestCORSPreflightForwarded(t *testing.T) {
	var mu sync.Mutex
	var preflights []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodOptions {
			http.Error(w, "only preflights here", http.StatusBadRequest)
			return
		}
		mu.Lock()
		preflights = append(preflights, r.Header.Get("Origin")+" "+r.Header.Get("Access-Control-Request-Method"))
		mu.Unlock()
		w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		w.Header().Set("Access-Control-Allow-Headers", "content-type, mcp-session-id, mcp-protocol-version")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer up.Close()
	g := startGate(t, up.URL, "mcp_servers: [{name: orders, url: "+up.URL+", path_prefix: /mcp/orders, allowed_origins: ['https://app.example.com']}]\n")
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, g.url, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := preflight("https://app.example.com"); resp.StatusCode != http.StatusNoContent ||
		resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Fatalf("preflight from the allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := preflight("https://evil.example.com"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("preflight from another origin: %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(preflights) != 1 || preflights[0] != "https://app.example.com POST" {
		t.Fatalf("the server saw preflights %q", preflights)
	}
}
