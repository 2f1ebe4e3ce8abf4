package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ordersServer is the MCP server of these tests: a few order tools with
// schemas, one with a broken result, and pages of two tools.
type ordersServer struct {
	*mcp.Server
	refunds   atomic.Int32
	cancels   atomic.Int32
	cancelled chan struct{}
}

func rawSchema(s string) json.RawMessage { return json.RawMessage(s) }

func newOrdersServer() *ordersServer {
	o := &ordersServer{cancelled: make(chan struct{}, 1)}
	o.Server = mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	o.AddTool(&mcp.Tool{Name: "lookup_order", Description: "Look an order up.",
		InputSchema:  rawSchema(`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ord_[0-9]+$"}},"required":["order_id"],"additionalProperties":false}`),
		OutputSchema: rawSchema(`{"type":"object","properties":{"status":{"type":"string"}},"required":["status"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(`{"status":"shipped"}`), StructuredContent: map[string]any{"status": "shipped"}}, nil
		})
	o.AddTool(&mcp.Tool{Name: "issue_refund", Description: "Refund an order.",
		InputSchema: rawSchema(`{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer","minimum":1}},"required":["order_id","amount_cents"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			o.refunds.Add(1)
			return &mcp.CallToolResult{Content: text("refunded")}, nil
		})
	o.AddTool(&mcp.Tool{Name: "cancel_order", Description: "Cancel an order for good.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
		InputSchema: rawSchema(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			o.cancels.Add(1)
			return &mcp.CallToolResult{Content: text("cancelled")}, nil
		})
	o.AddTool(&mcp.Tool{Name: "count_items", Description: "Count an order's items.",
		InputSchema:  rawSchema(`{"type":"object"}`),
		OutputSchema: rawSchema(`{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text("many"), StructuredContent: map[string]any{"count": "many"}}, nil
		})
	o.AddTool(&mcp.Tool{Name: "export_orders", Description: "A long export that reports progress.",
		InputSchema: rawSchema(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= 2; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 10, Message: "exporting"})
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "export running"})
			<-ctx.Done()
			o.cancelled <- struct{}{}
			return nil, ctx.Err()
		})
	return o
}

func ptr[T any](v T) *T { return &v }

const ordersCatalog = `catalog:
  tools:
    - name: orders/issue_refund
      rules:
        - expr: "args.amount_cents <= 100000"
          message: refunds above 1000.00 need a person
    - name: orders/cancel_order
      policy: confirm
`

func TestListPaginatedThroughToolgate(t *testing.T) {
	for _, jsonMode := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonMode), func(t *testing.T) {
			up := newUpstream(t, newOrdersServer().Server, jsonMode)
			g := startGate(t, up.srv.URL, ordersCatalog)
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
			if pages < 3 || len(names) != 5 {
				t.Fatalf("got %d pages, tools %v; want 3 pages of 5 tools", pages, names)
			}
		})
	}
}

func TestValidCallPassesByteForByte(t *testing.T) {
	for _, jsonMode := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonMode), func(t *testing.T) {
			up := newUpstream(t, newOrdersServer().Server, jsonMode)
			g := startGate(t, up.srv.URL, ordersCatalog)
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
				sent = up.wire.answerOf("tools/call")
				return got != nil && sent != nil
			})
			if len(sent) == 0 || !bytes.Equal(got, sent) {
				t.Fatalf("the client got other bytes than the server sent:\nserver %q\nclient %q", sent, got)
			}
			if n := metric(t, g.reg, "toolgate_tool_calls_total", map[string]string{"api": "mcp", "tool": "orders/lookup_order", "result": "valid"}); n != 1 {
				t.Fatalf("valid calls counted %v", n)
			}
		})
	}
}

func TestUnknownToolIsAJSONRPCError(t *testing.T) {
	up := newUpstream(t, newOrdersServer().Server, false)
	g := startGate(t, up.srv.URL, ordersCatalog)
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
	if n := up.wire.sawMethod("tools/call"); n != 0 {
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
			o := newOrdersServer()
			up := newUpstream(t, o.Server, false)
			g := startGate(t, up.srv.URL, ordersCatalog)
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
			if n := up.wire.sawMethod("tools/call"); n != 0 {
				t.Fatalf("the server saw %d tools/call", n)
			}
			recs := g.sink.all()
			if len(recs) != 1 || recs[0].Escalation.Codes[0] != tc.want[0] {
				t.Fatalf("sink records %+v", recs)
			}
			for _, f := range recs[0].Escalation.Attempts[0].Findings {
				if strings.Contains(f.Message, "42") {
					t.Fatalf("a sink finding quotes an argument value: %q", f.Message)
				}
			}
		})
	}
}
