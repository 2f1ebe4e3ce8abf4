package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Both MCP scenarios' calls pass their check against the mock's servers,
// the session one after one initialize per worker; an answer without the
// tool's result, or an error, does not.
func TestMCPScenarioCalls(t *testing.T) {
	srv := httptest.NewServer(withMCP(mockHandler(&mockStats{})))
	t.Cleanup(srv.Close)
	d := newDriver(10 * time.Second)
	ctx := context.Background()
	for _, name := range extraScenarios {
		sc := allScenarios[name]
		var w mcpWorker
		for i := range 3 {
			if s := w.one(ctx, d, srv.URL, sc); s.out != okExact {
				t.Fatalf("%s call %d: outcome %d", name, i, s.out)
			}
		}
		if sc.MCP == mcpSession && w.session == "" {
			t.Fatalf("%s: no session", name)
		}
	}

	answers := map[string]string{
		"other result": `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"x"}]}}`,
		"error":        `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"no"}}`,
		"tool error":   `{"jsonrpc":"2.0","id":2,"result":{"isError":true,"structuredContent":{"status":"shipped","total":4200}}}`,
	}
	wants := map[string]outcome{"other result": corrupted, "error": failed, "tool error": failed}
	for what, body := range answers {
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}))
		var w mcpWorker
		if s := w.one(ctx, d, bad.URL, allScenarios["mcp-call-stateless-c32"]); s.out != wants[what] {
			t.Errorf("%s: outcome %d, want %d", what, s.out, wants[what])
		}
		bad.Close()
	}
}
