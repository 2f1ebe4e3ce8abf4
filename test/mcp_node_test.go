package test

import (
	"encoding/json"
	"net"
	"slices"
	"strconv"
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

// TestMCPTypeScriptSDKGate drives toolgate with the TypeScript SDK client
// in front of a TypeScript SDK server with a task tool (SPEC §3a): DNS
// rebinding probes are refused before they reach the server, a browser on
// an allowed origin gets through with its Origin intact, task-augmented
// calls are judged and their results checked, and 32 concurrent calls of
// one session beside its standing GET stream are all answered.
func TestMCPTypeScriptSDKGate(t *testing.T) {
	node := needNodeIn(t, "node-mcp", "@modelcontextprotocol/sdk")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := ln.Addr().String()
	_, port, _ := net.SplitHostPort(server)
	ln.Close()
	g := startGate(t, `upstreams: [{url: http://127.0.0.1:9}]
mcp_servers:
  - {name: tasks, url: http://`+server+`/mcp, path_prefix: /mcp/tasks, allowed_origins: ['https://app.example.com']}
`)
	stdout := runNodeIn(t, node, "node-mcp", "gate.mjs", 90*time.Second,
		"TOOLGATE_MCP_URL="+g.URL+"/mcp/tasks", "TOOLGATE_TS_SERVER_PORT="+port)
	type rpcErr struct {
		Code    *int            `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	type task struct {
		TaskID   string   `json:"taskId"`
		Statuses []string `json:"statuses"`
		Result   *struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			Content           []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *rpcErr `json:"error"`
	}
	var got struct {
		Server struct {
			Origins []string `json:"origins"`
		} `json:"server"`
		EvilHost             rpcErr `json:"evilHost"`
		EvilOrigin           rpcErr `json:"evilOrigin"`
		ProbesReachedServer  int    `json:"probesReachedServer"`
		Browser              struct{ Text string }
		TaskValid            task     `json:"taskValid"`
		TaskBroken           task     `json:"taskBroken"`
		TaskRefused          task     `json:"taskRefused"`
		RefusedReachedServer int      `json:"refusedReachedServer"`
		GetOpenDuringCalls   int      `json:"getOpenDuringCalls"`
		Concurrent           []string `json:"concurrent"`
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
	check("evil Host refused with 403", got.EvilHost.Code != nil && *got.EvilHost.Code == 403 && strings.Contains(got.EvilHost.Message, "Host"))
	check("evil Origin refused with 403", got.EvilOrigin.Code != nil && *got.EvilOrigin.Code == 403 && strings.Contains(got.EvilOrigin.Message, "Origin"))
	check("the probes reached no server", got.ProbesReachedServer == 0)
	check("a browser on an allowed origin works", got.Browser.Text == "from the page" && slices.Contains(got.Server.Origins, "https://app.example.com"))
	check("a valid task completes", got.TaskValid.TaskID != "" && got.TaskValid.Error == nil && got.TaskValid.Result != nil &&
		!got.TaskValid.Result.IsError && string(got.TaskValid.Result.StructuredContent) == `{"count":3}`)
	check("a task result that breaks the outputSchema becomes an error result", got.TaskBroken.TaskID != "" && got.TaskBroken.Result != nil &&
		got.TaskBroken.Result.IsError && len(got.TaskBroken.Result.Content) == 1 && strings.Contains(got.TaskBroken.Result.Content[0].Text, "outputSchema") &&
		got.TaskBroken.Result.StructuredContent == nil)
	check("a refused task call is an error with the findings", got.TaskRefused.TaskID == "" && got.TaskRefused.Error != nil &&
		got.TaskRefused.Error.Code != nil && *got.TaskRefused.Error.Code == -32602 &&
		strings.Contains(got.TaskRefused.Error.Message, "schema_violation at /order_id") && strings.Contains(string(got.TaskRefused.Error.Data), `"findings"`))
	check("the refused task never reached the server", got.RefusedReachedServer == 0)
	check("the standing GET stream was open", got.GetOpenDuringCalls >= 1)
	check("32 concurrent calls all answered", len(got.Concurrent) == 32)
	for i, a := range got.Concurrent {
		if a != strconv.Itoa(i) {
			t.Errorf("call %d: %s", i, a)
		}
	}
	m := scrapeMetrics(t, g)
	for _, o := range []string{"upstream_error", "limited"} {
		if strings.Contains(m, `toolgate_requests_total{api="mcp",outcome="`+o+`"}`) {
			t.Errorf("requests counted as %s:\n%s", o, m)
		}
	}
}
