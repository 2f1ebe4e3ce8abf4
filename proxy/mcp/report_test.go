package mcp_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// An MCP request's log line is the one every route writes, with the same
// fields as a model request's (the server in place of the model),
// counting the requests sent to the server, toolgate's own list reads
// among them.
func TestMCPRequestLine(t *testing.T) {
	o := startStateless(t, true, func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs = 3600000 })
	core, logs := observer.New(zapcore.InfoLevel)
	g := startGateLog(t, o.HTTP.URL, "", mcptest.Catalog, zap.New(core))
	for range 2 {
		if _, out := call2026(t, g.url, "lookup_order", `{"order_id":"ord_1"}`); !strings.Contains(out, "shipped") {
			t.Fatalf("lookup: %s", out)
		}
	}
	var lines []map[string]any
	waitFor(t, func() bool {
		lines = nil
		for _, e := range logs.FilterMessage("request").All() {
			lines = append(lines, e.ContextMap())
		}
		return len(lines) == 2
	})
	keys := make([]string, 0, len(lines[0]))
	for k := range lines[0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, ","); got != "api,duration,findings,mcp_server,outcome,overhead,request_id,route,status,upstream_calls" {
		t.Fatalf("fields %s", got)
	}
	pages := int64(o.Wire.Count("tools/list"))
	if lines[0]["upstream_calls"] != pages+1 || lines[1]["upstream_calls"] != int64(1) || lines[0]["mcp_server"] != "orders" {
		t.Fatalf("lines %v; %d list pages", lines, pages)
	}
}
