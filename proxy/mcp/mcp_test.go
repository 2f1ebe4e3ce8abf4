package mcp_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/sink"
)

func TestListPaginatedThroughToolgate(t *testing.T) {
	for _, jsonMode := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonMode), func(t *testing.T) {
			o := start(t, jsonMode)
			g := startGate(t, o.HTTP.URL, mcptest.Catalog)
			cs, _ := connect(t, g.url, nil)
			if cs.InitializeResult().ServerInfo.Name != "orders" {
				t.Fatalf("initialize went elsewhere: %+v", cs.InitializeResult().ServerInfo)
			}
			var names []string
			cursor, pages := "", 0
			for {
				res, err := cs.ListTools(ctxT(t), &mcp.ListToolsParams{Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, tl := range res.Tools {
					names = append(names, tl.Name)
				}
				if cursor = res.NextCursor; cursor == "" {
					break
				}
			}
			if pages != 4 || len(names) != 8 {
				t.Fatalf("got %d pages, tools %v; want 4 pages of 8 tools", pages, names)
			}
			if err := cs.Close(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return o.Wire.Count(http.MethodDelete) == 1 })
		})
	}
}

func TestValidCallPassesByteForByte(t *testing.T) {
	for _, jsonMode := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonMode), func(t *testing.T) {
			o := start(t, jsonMode)
			g := startGate(t, o.HTTP.URL, mcptest.Catalog)
			cs, cw := connect(t, g.url, nil)
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "ord_7"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || resultText(res) != `{"status":"shipped"}` {
				t.Fatalf("result %+v", res)
			}
			// Both sides record once their stream has ended, which may be
			// just after the call returned.
			var got, sent []byte
			waitFor(t, func() bool {
				cw.mu.Lock()
				got = cw.answers["tools/call"]
				cw.mu.Unlock()
				sent = o.Wire.Answer("tools/call")
				return got != nil && sent != nil
			})
			if len(sent) == 0 || !bytes.Equal(got, sent) {
				t.Fatalf("the client got other bytes than the server sent:\nserver %q\nclient %q", sent, got)
			}
			if n := metric(t, g.reg, "toolgate_tool_calls_total", map[string]string{"api": "mcp", "tool": "orders/lookup_order", "result": "valid"}); n != 1 {
				t.Fatalf("valid calls counted %v", n)
			}
			if err := cs.Ping(ctxT(t), nil); err != nil {
				t.Fatal(err)
			}
			// The server's recorder and toolgate's counters note a request
			// once its handler returns, which may be after the client is done.
			waitFor(t, func() bool {
				return o.Wire.Count("ping") == 1 &&
					metric(t, g.reg, "toolgate_upstream_duration_seconds", map[string]string{"api": "mcp", "kind": "original"}) >= 3 &&
					metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "pass"}) >= 3
			})
		})
	}
}

func TestUnknownToolIsAJSONRPCError(t *testing.T) {
	o := start(t, false)
	g := startGate(t, o.HTTP.URL, mcptest.Catalog)
	cs, _ := connect(t, g.url, nil)
	_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "lookup_ordr", Arguments: map[string]any{"order_id": "ord_7"}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -32602 {
		t.Fatalf("want JSON-RPC error -32602, got %v", err)
	}
	for _, want := range []string{`"lookup_ordr"`, "lookup_order", "issue_refund"} {
		if !strings.Contains(werr.Message, want) {
			t.Errorf("message %q lacks %s", werr.Message, want)
		}
	}
	if n := o.Wire.Count("tools/call"); n != 0 {
		t.Fatalf("the server saw %d tools/call", n)
	}
	recs := g.sink.all()
	if len(recs) != 1 || recs[0].Server != "orders" || recs[0].API != "mcp" || recs[0].Escalation.Codes[0] != "unknown_tool" || recs[0].Session == "" {
		t.Fatalf("sink records %+v", recs)
	}
	if n := metric(t, g.reg, "toolgate_hallucinations_total", map[string]string{"api": "mcp"}); n != 1 {
		t.Fatalf("hallucinations %v", n)
	}
	if n := metric(t, g.reg, "toolgate_tool_calls_total", map[string]string{"api": "mcp", "tool": "_unknown", "result": "unknown_tool"}); n != 1 {
		t.Fatalf("unknown calls counted %v", n)
	}
}

func TestBadArgumentsAreErrorResultsNotForwarded(t *testing.T) {
	cases := []struct {
		name, tool string
		args       map[string]any
		want       []string
	}{
		{"schema", "lookup_order", map[string]any{"order_id": 42}, []string{"schema_violation", "/order_id", "type"}},
		{"pattern", "lookup_order", map[string]any{"order_id": "x"}, []string{"schema_violation", "/order_id", "pattern"}},
		{"rule", "issue_refund", map[string]any{"order_id": "ord_1", "amount_cents": 200000}, []string{"rule_violation", "refunds above 1000.00 need a person"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := start(t, false)
			g := startGate(t, o.HTTP.URL, mcptest.Catalog)
			cs, _ := connect(t, g.url, nil)
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError {
				t.Fatalf("want an error result, got %+v", res)
			}
			for _, w := range tc.want {
				if !strings.Contains(resultText(res), w) {
					t.Errorf("text %q lacks %q", resultText(res), w)
				}
			}
			if n := o.Wire.Count("tools/call"); n != 0 {
				t.Fatalf("the server saw %d tools/call", n)
			}
			recs := g.sink.all()
			if len(recs) != 1 || recs[0].Escalation.Codes[0] != tc.want[0] {
				t.Fatalf("sink records %+v", recs)
			}
			line, err := sink.Encode(recs[0], []string{"/order_id"})
			if err != nil || strings.Contains(string(line), "ord_1") || !strings.Contains(string(line), "[redacted]") || !strings.Contains(string(line), `"server":"orders"`) {
				t.Fatalf("the sink line keeps a redacted value or lacks the server: %s", line)
			}
			for _, f := range recs[0].Escalation.Attempts[0].Findings {
				if strings.Contains(f.Message, "42") {
					t.Fatalf("a sink finding quotes an argument value: %q", f.Message)
				}
			}
		})
	}
}
