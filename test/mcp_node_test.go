package test

import (
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// TestMCPTypeScriptSDK drives toolgate's MCP route with the official MCP
// TypeScript SDK as the client and the Go SDK as the server, so the MCP
// contract is checked against a second client with its own transport.
func TestMCPTypeScriptSDK(t *testing.T) {
	node := needNodeIn(t, "node-mcp", "@modelcontextprotocol/sdk")
	o := mcptest.Start(false)
	defer o.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	g := startGate(t, `upstreams: [{url: http://127.0.0.1:9}]
mcp_servers:
  - {name: orders, url: `+o.HTTP.URL+`, path_prefix: /mcp/orders}
  - {name: dead, url: `+dead+`, path_prefix: /mcp/dead, connect_timeout: 2s}
`+mcptest.Catalog)

	stdout := runNodeIn(t, node, "node-mcp", "mcp.mjs", 60*time.Second,
		"TOOLGATE_MCP_URL="+g.URL+"/mcp/orders", "TOOLGATE_MCP_DEAD_URL="+g.URL+"/mcp/dead")
	type res struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	}
	type refusal struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	}
	var got struct {
		Server             string    `json:"server"`
		Pages              int       `json:"pages"`
		Tools              []string  `json:"tools"`
		Valid              res       `json:"valid"`
		Unknown            refusal   `json:"unknown"`
		SchemaR            res       `json:"schema"`
		RuleR              res       `json:"rule"`
		Output             res       `json:"output"`
		ConfirmUnsupported res       `json:"confirmUnsupported"`
		ConfirmYes         res       `json:"confirmYes"`
		ConfirmNo          res       `json:"confirmNo"`
		Question           string    `json:"question"`
		BeforeChange       refusal   `json:"beforeChange"`
		ListChanged        bool      `json:"listChanged"`
		AfterChange        res       `json:"afterChange"`
		Logs               []string  `json:"logs"`
		Progress           []float64 `json:"progress"`
		Cancelled          refusal   `json:"cancelled"`
		ExportCancelled    bool      `json:"exportCancelled"`
		Expired            refusal   `json:"expired"`
		Dead               refusal   `json:"dead"`
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %s", what, stdout)
		}
	}
	check("initialize reached the server", got.Server == "orders")
	check("list with pagination", got.Pages == 4 && len(got.Tools) == 8 && slices.Contains(got.Tools, "lookup_order"))
	check("valid call", !got.Valid.IsError && got.Valid.Text == `{"status":"shipped"}`)
	check("unknown tool", got.Unknown.Code != nil && *got.Unknown.Code == -32602 && strings.Contains(got.Unknown.Message, "lookup_order"))
	check("schema violation", got.SchemaR.IsError && strings.Contains(got.SchemaR.Text, "/order_id"))
	check("rule violation", got.RuleR.IsError && strings.Contains(got.RuleR.Text, "refunds above 1000.00 need a person"))
	check("output schema violation", got.Output.IsError && strings.Contains(got.Output.Text, "outputSchema"))
	check("confirm unsupported", got.ConfirmUnsupported.IsError && strings.Contains(got.ConfirmUnsupported.Text, "elicitation"))
	check("confirm yes", !got.ConfirmYes.IsError && got.ConfirmYes.Text == "cancelled" && strings.Contains(got.Question, "cancel_order"))
	check("confirm no", got.ConfirmNo.IsError && strings.Contains(got.ConfirmNo.Text, "declined"))
	check("before list_changed", got.BeforeChange.Code != nil && *got.BeforeChange.Code == -32602)
	check("list_changed refresh", got.ListChanged && !got.AfterChange.IsError && got.AfterChange.Text == "in transit")
	check("progress", slices.Equal(got.Progress, []float64{1, 2}) && slices.Contains(got.Logs, "info"))
	check("cancellation", got.Cancelled.Message != "" && got.ExportCancelled)
	check("session expiry", got.Expired.Code != nil && *got.Expired.Code == 404)
	check("server down", strings.Contains(got.Dead.Message, "could not be reached"))
	if n := o.Cancels.Load(); n != 1 {
		t.Errorf("cancel_order ran %d times, want once (the yes)", n)
	}
	if n := o.Refunds.Load(); n != 0 {
		t.Errorf("issue_refund ran %d times; the refused refund must not", n)
	}
}
