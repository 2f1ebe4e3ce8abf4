package test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/internal/otlptest"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/test/internal/proc"
)

// testNginx is a real nginx the test started on a loopback port, balancing
// round-robin over upstreams, stopped by its PID.
type testNginx struct {
	addr string
	cmd  *exec.Cmd
}

func startTestNginx(t *testing.T, upstreams ...string) *testNginx {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nginx is not installed; CI must install it")
		}
		t.Skip("nginx is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	var servers strings.Builder
	for _, u := range upstreams {
		servers.WriteString("    server " + u + ";\n")
	}
	// One process, nothing outside dir: no master to outlive the test, no
	// worker switching users, no shared temp or log paths.
	conf := `daemon off;
master_process off;
pid ` + dir + `/nginx.pid;
error_log ` + dir + `/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ` + dir + `/body;
  proxy_temp_path ` + dir + `/proxy;
  fastcgi_temp_path ` + dir + `/fastcgi;
  uwsgi_temp_path ` + dir + `/uwsgi;
  scgi_temp_path ` + dir + `/scgi;
  upstream replicas {
` + servers.String() + `  }
  server {
    listen ` + addr + `;
    location / {
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
    }
  }
}
`
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", path, "-p", dir)
	proc.SetParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &testNginx{addr: addr, cmd: cmd}
	t.Cleanup(n.stop)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return n
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx on %s did not start: %s", addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *testNginx) stop() {
	if n.cmd.Process == nil || n.cmd.ProcessState != nil {
		return
	}
	_ = n.cmd.Process.Kill()
	_ = n.cmd.Wait()
}

// TestMCPStatelessReplicasBehindNginx puts two replicas of a stateless MCP
// server behind nginx round-robin and toolgate in front of nginx, the way
// a 2026-07-28 server is deployed: nothing sticky. Every valid call runs
// at one replica or the other, each judged by the list toolgate read from
// whichever replica answered; a bad call reaches neither.
func TestMCPStatelessReplicasBehindNginx(t *testing.T) {
	a, b := mcptest.StartStateless(false, nil), mcptest.StartStateless(true, nil)
	defer a.Close()
	defer b.Close()
	ng := startTestNginx(t, strings.TrimPrefix(a.HTTP.URL, "http://"), strings.TrimPrefix(b.HTTP.URL, "http://"))
	g := startGate(t, `upstreams: [{url: http://127.0.0.1:9}]
mcp_servers:
  - {name: orders, url: http://`+ng.addr+`/mcp, path_prefix: /mcp/orders}
`+mcptest.Catalog)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "replicas-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp/orders", MaxRetries: -1, HTTPClient: &http.Client{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q", v)
	}
	for i := range 20 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_" + strconv.Itoa(i), "amount_cents": 100 + i}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
	}
	ra, rb := a.Refunds.Load(), b.Refunds.Load()
	if ra+rb != 20 || ra == 0 || rb == 0 {
		t.Fatalf("refunds at the replicas: %d and %d, want 20 across both", ra, rb)
	}
	for _, bad := range []*mcp.CallToolParams{
		{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1", "amount_cents": "ten"}},
		{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1", "amount_cents": 500000}},
		{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1"}},
	} {
		for range 3 {
			res, err := cs.CallTool(ctx, bad)
			if err != nil || !res.IsError {
				t.Fatalf("%v: %v %+v", bad.Arguments, err, res)
			}
		}
	}
	for range 3 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wipe_orders", Arguments: map[string]any{}}); err == nil {
			t.Fatal("a call to an unknown tool was not refused")
		}
	}
	if a.Wire.Count("tools/call")+b.Wire.Count("tools/call") != 20 || a.Refunds.Load()+b.Refunds.Load() != 20 {
		t.Fatalf("refused calls reached a replica: %d and %d calls", a.Wire.Count("tools/call"), b.Wire.Count("tools/call"))
	}
}

// A 2026-07-28 request's trace context may come in params._meta instead
// of the traceparent header; toolgate continues it all the same.
func TestTraceMCPMetaContext(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	o := mcptest.StartStateless(false, nil)
	defer o.Close()
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams: [{url: 'http://127.0.0.1:1'}]\n" +
		"mcp_servers: [{name: orders, url: '" + o.HTTP.URL + "', path_prefix: /mcp/orders}]\n" + mcptest.Catalog +
		"tracing: {endpoint: '" + rcv.URL + "'}\n"
	g, _ := startGateWith(t, cfg, app.Options{Sink: &recordingSink{}, TraceTuning: telemetry.Tuning{Interval: 20 * time.Millisecond}})
	tp, traceID, spanID := traceparentFor()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"ord_1","amount_cents":5},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"traceparent":"` + tp + `"}}}`
	status, _, out, err := postRaw(g.URL+"/mcp/orders", body, map[string]string{"Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "issue_refund"})
	if err != nil || status != 200 || !strings.Contains(string(out), "refunded") {
		t.Fatalf("call: %v %d %s", err, status, out)
	}
	spans := rcv.Wait(t, 5*time.Second, func(s []otlptest.Span) bool {
		judged, parent := judgedUnderServer(otlptest.Trace(s, traceID))
		return judged != nil && parent != nil
	})
	_, parent := judgedUnderServer(otlptest.Trace(spans, traceID))
	if parent.Name != "mcp orders" || parent.ParentID != spanID {
		t.Fatalf("server span %+v, want the child of %s", parent, spanID)
	}
	for _, h := range o.Wire.Headers() {
		if v := h.Get("Traceparent"); !strings.HasPrefix(v, "00-"+traceID+"-") {
			t.Errorf("the MCP server got traceparent %q", v)
		}
	}
}
