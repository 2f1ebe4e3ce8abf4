package mcp_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// An MCP server's answer over limits.max_response_bytes, whole JSON or one
// SSE event, becomes a JSON-RPC error for the client and is not relayed.
func TestAnswerOverLimit(t *testing.T) {
	for _, sse := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "sse"}[sse]
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			big := strings.Repeat("x", 8192)
			f.callResult, f.callSSE = `{"content":[{"type":"text","text":"`+big+`"}]}`, sse
			g := startGate(t, f.srv.URL, "limits: {max_response_bytes: 4096}\n")
			status, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lookup_order","arguments":{}}}`,
				"Mcp-Protocol-Version", "2025-06-18")
			if f.calls() != 1 {
				t.Fatalf("the server got %d calls, want 1", f.calls())
			}
			if strings.Contains(body, "xxxx") || !strings.Contains(body, `"error"`) || !strings.Contains(body, "max_response_bytes") {
				t.Fatalf("HTTP %d, body %.300s: want a JSON-RPC error naming the limit and nothing of the answer", status, body)
			}
		})
	}
}

// syncBuffer is a log destination tests read after the requests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Sync() error { return nil }

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// No log line of an MCP exchange holds a call's argument values, the
// client's Authorization header or the key toolgate holds for the server,
// for a forwarded call and for a refused one, at debug level.
func TestLogsHoldNoArgumentsOrSecrets(t *testing.T) {
	f := newFake(t)
	t.Setenv("TOOLGATE_TEST_MCP_KEY", "sk-held-key-5521")
	var buf syncBuffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), &buf, zapcore.DebugLevel))
	g := startGateLog(t, f.srv.URL, "TOOLGATE_TEST_MCP_KEY", "", log)
	auth := []string{"Mcp-Protocol-Version", "2025-06-18", "Authorization", "Bearer sk-client-auth-8812"}
	_, _, ok := post(t, g.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup_order","arguments":{"order_id":"secret-arg-7731"}}}`, auth...)
	_, _, refused := post(t, g.url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"issue_refund","arguments":{"amount_cents":"secret-arg-9912"}}}`, auth...)
	if !strings.Contains(ok, `"ran"`) || !strings.Contains(refused, `"isError":true`) || f.calls() != 1 {
		t.Fatalf("valid call %s; refused call %s; server calls %d", ok, refused, f.calls())
	}
	if got := f.lastHeader().Get("Authorization"); got != "Bearer sk-client-auth-8812" {
		t.Fatalf("Authorization forwarded as %q", got)
	}
	logs := buf.String()
	// The refusal is logged (an escalation line); the secrets must not be.
	if !strings.Contains(logs, `"msg":"escalation"`) {
		t.Fatalf("no escalation line was logged: %q", logs)
	}
	for _, secret := range []string{"secret-arg-7731", "secret-arg-9912", "sk-client-auth-8812", "sk-held-key-5521"} {
		if strings.Contains(logs, secret) {
			t.Errorf("a log line holds %q:\n%s", secret, logs)
		}
	}
}
