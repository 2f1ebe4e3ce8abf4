package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/internal/mcptest"
)

// startStateless runs the order tools as a stateless server for one test.
func startStateless(t *testing.T, jsonAnswers bool, cacheable func(context.Context, mcp.Request, *mcp.Cacheable)) *mcptest.Orders {
	o := mcptest.StartStateless(jsonAnswers, cacheable)
	t.Cleanup(o.Close)
	return o
}

// A client with the SDK's defaults speaks 2026-07-28 through toolgate to a
// stateless server: no initialize, no session, every call judged against
// the server's own list before the server sees it.
func TestStatelessSDKClient(t *testing.T) {
	for _, jsonAnswers := range []bool{false, true} {
		name := "sse"
		if jsonAnswers {
			name = "json"
		}
		t.Run(name, func(t *testing.T) {
			o := startStateless(t, jsonAnswers, nil)
			g := startGate(t, o.HTTP.URL, mcptest.Catalog)
			cs, _ := connect(t, g.url, nil)
			if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
				t.Fatalf("negotiated %q", v)
			}
			if n := o.Wire.Count("initialize"); n != 0 {
				t.Fatalf("the server saw %d initialize requests", n)
			}
			ctx := ctxT(t)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "ord_1"}})
			if err != nil || res.IsError {
				t.Fatalf("valid call: %v %+v", err, res)
			}
			if n := o.Wire.Count("tools/call"); n != 1 {
				t.Fatalf("the server ran %d calls, want 1", n)
			}
			for _, bad := range []*mcp.CallToolParams{
				{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1", "amount_cents": "ten"}},
				{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1", "amount_cents": 200000}},
			} {
				res, err := cs.CallTool(ctx, bad)
				if err != nil || !res.IsError || !strings.Contains(resultText(res), "toolgate did not run this call") {
					t.Fatalf("%v: %v %+v", bad.Arguments, err, res)
				}
			}
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_everything", Arguments: map[string]any{}})
			if err == nil || !strings.Contains(err.Error(), "delete_everything") {
				t.Fatalf("unknown tool: %v", err)
			}
			if n := o.Wire.Count("tools/call"); n != 1 || o.Refunds.Load() != 0 {
				t.Fatalf("refused calls reached the server: %d calls, %d refunds", n, o.Refunds.Load())
			}
			for _, h := range o.Wire.Headers() {
				if h.Get("Mcp-Session-Id") != "" {
					t.Fatalf("a session header reached a stateless server: %v", h)
				}
			}
		})
	}
}

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// call2026 is a raw 2026-07-28 tools/call with its routing headers, unless
// hdr sets them otherwise.
func call2026(t *testing.T, url, tool, args string, hdr ...string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + meta2026 + `}}`
	h := append([]string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool}, hdr...)
	status, _, out := post(t, url, body, h...)
	return status, out
}

// Raw stateless requests, with no list read first: toolgate reads the
// server's list itself, as the revision wants it asked, and refuses a call
// whose routing headers disagree with its body before the server sees it.
func TestStatelessRaw(t *testing.T) {
	o := startStateless(t, false, nil)
	g := startGate(t, o.HTTP.URL, mcptest.Catalog)

	if _, out := call2026(t, g.url, "issue_refund", `{"order_id":"ord_1","amount_cents":"ten"}`); !strings.Contains(out, `"isError":true`) {
		t.Fatalf("bad call: %s", out)
	}
	if n := o.Wire.Count("tools/call"); n != 0 {
		t.Fatalf("a refused call reached the server")
	}
	list := o.Wire.Body("tools/list")
	if !strings.Contains(string(list), `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`) {
		t.Fatalf("toolgate's list request: %s", list)
	}
	for _, h := range o.Wire.Headers() {
		if h.Get("Mcp-Method") != "tools/list" || h.Get("Mcp-Name") != "" {
			t.Fatalf("toolgate's list request went with Mcp-Method %q, Mcp-Name %q", h.Get("Mcp-Method"), h.Get("Mcp-Name"))
		}
	}
	if _, out := call2026(t, g.url, "issue_refund", `{"order_id":"ord_1","amount_cents":10}`, "Mcp-Name", " issue_refund\t"); !strings.Contains(out, "refunded") {
		t.Fatalf("valid call: %s", out)
	}
	if o.Refunds.Load() != 1 {
		t.Fatalf("refunds %d", o.Refunds.Load())
	}

	for _, c := range []struct {
		name string
		hdr  []string
		want string
	}{
		{"method differs", []string{"Mcp-Method", "tools/list"}, "Mcp-Method"},
		{"name differs", []string{"Mcp-Name", "lookup_order"}, "Mcp-Name"},
		{"name missing", []string{"Mcp-Name", ""}, "Mcp-Name"},
		{"method missing", []string{"Mcp-Method", ""}, "Mcp-Method"},
		{"version differs", []string{"Mcp-Protocol-Version", "2025-11-25"}, "MCP-Protocol-Version"},
	} {
		before := len(o.Wire.Headers())
		status, out := call2026(t, g.url, "issue_refund", `{"order_id":"ord_1","amount_cents":10}`, c.hdr...)
		if status != 400 || !strings.Contains(out, `"code":-32020`) || !strings.Contains(out, c.want) {
			t.Fatalf("%s: %d %s", c.name, status, out)
		}
		if n := len(o.Wire.Headers()); n != before {
			t.Fatalf("%s: the request reached the server", c.name)
		}
	}
	if o.Refunds.Load() != 1 {
		t.Fatalf("refunds %d after refused requests", o.Refunds.Load())
	}
	waitFor(t, func() bool {
		return metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "invalid"}) == 5
	})

	// server/discover is the server's to answer.
	status, _, out := post(t, g.url, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta2026+`}}`,
		"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "server/discover")
	if status != 200 || !strings.Contains(out, `"supportedVersions":["2026-07-28"`) || o.Wire.Count("server/discover") != 1 {
		t.Fatalf("discover: %d %s", status, out)
	}
	// A revision toolgate does not serve is answered in that revision's
	// terms, with the ones it serves.
	status, _, out = post(t, g.url, `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`,
		"Mcp-Protocol-Version", "2099-01-01", "Mcp-Method", "server/discover")
	if status != 400 || !strings.Contains(out, `"code":-32022`) || !strings.Contains(out, `"supported":["2026-07-28","2025-11-25","2025-06-18","2025-03-26"]`) {
		t.Fatalf("unsupported revision: %d %s", status, out)
	}
	if o.Wire.Count("server/discover") != 1 {
		t.Fatal("an unsupported revision reached the server")
	}
}

// listServer is a stateless order server whose lists carry ttlMs ttl
// and, when private, cacheScope private, behind toolgate.
func listServer(t *testing.T, ttl int, private bool) (*mcptest.Orders, func(hdr ...string)) {
	o := startStateless(t, false, func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
		c.TTLMs = ttl
		if private {
			c.CacheScope = "private"
		}
	})
	g := startGate(t, o.HTTP.URL, mcptest.Catalog)
	return o, func(hdr ...string) {
		t.Helper()
		if _, out := call2026(t, g.url, "lookup_order", `{"order_id":"ord_1"}`, hdr...); !strings.Contains(out, "shipped") {
			t.Fatalf("lookup: %s", out)
		}
	}
}

// The list judging stateless calls is the server's, kept for as long as
// its ttlMs says within its cacheScope, and read again on a call to a tool
// it does not list.
func TestStatelessToolListKept(t *testing.T) {
	t.Run("ttl", func(t *testing.T) {
		o, lookup := listServer(t, 60000, false)
		// The server pages its list two tools at a time: one read is
		// several pages.
		lookup()
		pages := o.Wire.Count("tools/list")
		if pages < 2 {
			t.Fatalf("read %d pages", pages)
		}
		lookup()
		lookup()
		if n := o.Wire.Count("tools/list"); n != pages {
			t.Fatalf("a fresh list was read again: %d pages", n)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		o := startStateless(t, false, func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs = 60000 })
		gt := startGate(t, o.HTTP.URL, mcptest.Catalog)
		if _, out := call2026(t, gt.url, "lookup_order", `{"order_id":"ord_1"}`); !strings.Contains(out, "shipped") {
			t.Fatalf("lookup: %s", out)
		}
		pages := o.Wire.Count("tools/list")
		o.AddTracking()
		if _, out := call2026(t, gt.url, "track_parcel", `{"parcel":"p1"}`); !strings.Contains(out, "in transit") {
			t.Fatalf("new tool: %s", out)
		}
		if n := o.Wire.Count("tools/list"); n <= pages {
			t.Fatal("the list was not read again for a tool it lacked")
		}
	})
	t.Run("ttl 0", func(t *testing.T) {
		o, lookup := listServer(t, 0, false)
		lookup()
		pages := o.Wire.Count("tools/list")
		lookup()
		if o.Wire.Count("tools/list") != 2*pages {
			t.Fatal("a list with ttlMs 0 judged a second call")
		}
	})
	t.Run("private", func(t *testing.T) {
		o, lookup := listServer(t, 60000, true)
		lookup("Authorization", "Bearer alice")
		pages := o.Wire.Count("tools/list")
		lookup("Authorization", "Bearer alice")
		if o.Wire.Count("tools/list") != pages {
			t.Fatal("a caller's private list was not kept for them")
		}
		lookup("Authorization", "Bearer bob")
		if o.Wire.Count("tools/list") != 2*pages {
			t.Fatal("one caller's private list judged another's call")
		}
		lookup()
		lookup()
		if o.Wire.Count("tools/list") != 4*pages {
			t.Fatal("a private list was kept for a caller toolgate cannot tell apart")
		}
	})
}

// A server that refuses toolgate's list read is named with what it said,
// not taken for one that cannot be reached.
func TestStatelessListRefusedIsNamed(t *testing.T) {
	f := newFake(t)
	f.listError = `{"code":-32603,"message":"tool registry offline"}`
	g := startGate(t, f.srv.URL, "")
	_, out := call2026(t, g.url, "issue_refund", `{"amount_cents":10}`)
	if !strings.Contains(out, `the MCP server \"orders\" refused toolgate's tools/list: \"tool registry offline\" (code -32603)`) ||
		strings.Contains(out, "could not be reached") {
		t.Fatalf("got %s", out)
	}
	if f.calls() != 0 {
		t.Fatal("an unjudged call was forwarded")
	}
	f.listStatus = 400
	_, out = call2026(t, g.url, "issue_refund", `{"amount_cents":10}`)
	if !strings.Contains(out, `answered toolgate's tools/list with HTTP 400`) || !strings.Contains(out, "tool registry offline") {
		t.Fatalf("got %s", out)
	}
}

// confirmCatalog is mcptest.Catalog with the requestState key shared by
// replicas read from $envName.
func confirmCatalog(envName string) string {
	return strings.Replace(mcptest.Catalog, "catalog:\n", "catalog:\n  mcp:\n    state_secret_env: "+envName+"\n", 1)
}

// A stateless client that declared elicitation confirms a call through an
// input request its SDK answers with the elicitation handler: a yes runs
// the call once, a no never runs it.
func TestStatelessConfirmThroughInputRequest(t *testing.T) {
	o := startStateless(t, false, nil)
	g := startGate(t, o.HTTP.URL, mcptest.Catalog)
	var answer atomic.Value
	var asked atomic.Int32
	cs, _ := connect(t, g.url, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		if !strings.Contains(req.Params.Message, `"cancel_order"`) || !strings.Contains(req.Params.Message, "ord_9") {
			t.Errorf("question: %s", req.Params.Message)
		}
		return answer.Load().(*mcp.ElicitResult), nil
	}})
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q", v)
	}
	ctx := ctxT(t)
	cancel := &mcp.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "ord_9"}}

	answer.Store(&mcp.ElicitResult{Action: "decline"})
	res, err := cs.CallTool(ctx, cancel)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "declined") {
		t.Fatalf("declined: %v %+v", err, res)
	}
	if o.Cancels.Load() != 0 || o.Wire.Count("tools/call") != 0 {
		t.Fatal("a declined call reached the server")
	}

	answer.Store(&mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}})
	res, err = cs.CallTool(ctx, cancel)
	if err != nil || res.IsError || resultText(res) != "cancelled" {
		t.Fatalf("accepted: %v %+v", err, res)
	}
	if o.Cancels.Load() != 1 || o.Wire.Count("tools/call") != 1 || asked.Load() != 2 {
		t.Fatalf("cancels %d, calls %d, asked %d", o.Cancels.Load(), o.Wire.Count("tools/call"), asked.Load())
	}
	body := string(o.Wire.Body("tools/call"))
	if strings.Contains(body, "requestState") || strings.Contains(body, "toolgate/confirm") {
		t.Fatalf("toolgate's own input reached the server: %s", body)
	}
	waitFor(t, func() bool {
		return metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "confirmed"}) == 1 &&
			metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "input_required"}) == 2
	})
}

// inputRequired asks for a confirmation with a raw call and returns the
// requestState toolgate signed.
func inputRequired(t *testing.T, url, args string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"cancel_order","arguments":` + args +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`
	_, _, out := post(t, url, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "cancel_order")
	var m struct {
		Result struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Result.ResultType != "input_required" ||
		len(m.Result.InputRequests) != 1 || !strings.Contains(string(m.Result.InputRequests["toolgate/confirm"]), `"elicitation/create"`) {
		t.Fatalf("not an input request: %s", out)
	}
	return m.Result.RequestState
}

// retry sends the confirmation's retry with a yes and state.
func retry(t *testing.T, url, args, state string) string {
	t.Helper()
	st, _ := json.Marshal(state)
	body := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"cancel_order","arguments":` + args +
		`,"inputResponses":{"toolgate/confirm":{"action":"accept","content":{"confirm":true}}},"requestState":` + string(st) +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
	_, _, out := post(t, url, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "cancel_order")
	return out
}

// A requestState binds its call and an expiry and releases one call: a
// replayed, changed, foreign or expired one is refused, and a replica with
// the same key takes the retry another one asked for.
func TestStatelessRequestStateRefused(t *testing.T) {
	t.Setenv("TG_MCP_STATE", "a shared secret of the replicas")
	o := startStateless(t, false, nil)
	a := startGate(t, o.HTTP.URL, confirmCatalog("TG_MCP_STATE"))
	b := startGate(t, o.HTTP.URL, confirmCatalog("TG_MCP_STATE"))
	other := startGate(t, o.HTTP.URL, mcptest.Catalog)
	args := `{"order_id":"ord_1"}`

	state := inputRequired(t, a.url, args)
	if out := retry(t, other.url, args, state); !strings.Contains(out, `"state_tampered"`) {
		t.Fatalf("a replica without the key: %s", out)
	}
	if out := retry(t, b.url, args, state); !strings.Contains(out, "cancelled") {
		t.Fatalf("the other replica: %s", out)
	}
	if out := retry(t, b.url, args, state); !strings.Contains(out, `"state_used"`) {
		t.Fatalf("replayed: %s", out)
	}
	state = inputRequired(t, a.url, args)
	tampered := state[:len(state)-3] + "AAA"
	if tampered == state {
		tampered = state[:len(state)-3] + "BBB"
	}
	if out := retry(t, a.url, args, tampered); !strings.Contains(out, `"state_tampered"`) {
		t.Fatalf("tampered: %s", out)
	}
	if out := retry(t, a.url, `{"order_id":"ord_2"}`, state); !strings.Contains(out, `"state_mismatch"`) {
		t.Fatalf("another call: %s", out)
	}
	if o.Cancels.Load() != 1 {
		t.Fatalf("the server ran %d cancels, want 1", o.Cancels.Load())
	}
}

// A confirmed call whose server asks for input of its own stays
// confirmed: the client answers the server's question, the retry carries
// the server's state back to it, and the person is asked once.
func TestStatelessConfirmedCallAsksTheServersOwnQuestion(t *testing.T) {
	o := startStateless(t, false, nil)
	var runs atomic.Int32
	o.Server.AddTool(&mcp.Tool{Name: "close_account", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Params.RequestState != "server-state-1" || req.Params.InputResponses["reason"] == nil {
				return &mcp.CallToolResult{RequestState: "server-state-1", InputRequests: mcp.InputRequestMap{
					"reason": &mcp.ElicitParams{Message: "Why close it?", RequestedSchema: json.RawMessage(
						`{"type":"object","properties":{"reason":{"type":"string"}},"required":["reason"]}`)}}}, nil
			}
			runs.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "closed"}}}, nil
		})
	g := startGate(t, o.HTTP.URL, mcptest.Catalog+"    - name: orders/close_account\n      policy: confirm\n")
	var confirms, reasons atomic.Int32
	cs, _ := connect(t, g.url, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if strings.Contains(req.Params.Message, "Why close it?") {
			reasons.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"reason": "moving"}}, nil
		}
		confirms.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	}})
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "close_account", Arguments: map[string]any{}})
	if err != nil || res.IsError || resultText(res) != "closed" {
		t.Fatalf("%v %+v", err, res)
	}
	if runs.Load() != 1 || confirms.Load() != 1 || reasons.Load() != 1 {
		t.Fatalf("runs %d, confirmations %d, reasons %d", runs.Load(), confirms.Load(), reasons.Load())
	}
}

// Approvals work on 2026-07-28 as on the session revisions: a client
// without elicitation gets the call held with its approval in _meta, and
// after a person's yes the same call with the approval runs once.
func TestStatelessApprovalHoldAndResume(t *testing.T) {
	o := startStateless(t, false, nil)
	url, svc, _ := startApprovalGate(t, o.HTTP.URL)
	cs, _ := connect(t, url, nil)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q", v)
	}
	args := map[string]any{"order_id": "ord_9"}
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: args})
	if err != nil || !res.IsError {
		t.Fatalf("first call: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.Meta["toolgate/approval"])
	var tk struct{ ID, State string }
	if err := json.Unmarshal(raw, &tk); err != nil || !strings.HasPrefix(tk.ID, "apr_") || tk.State != "pending" {
		t.Fatalf("approval in _meta: %s", raw)
	}
	if _, err := svc.Decide(context.Background(), tk.ID, approval.Decision{Approve: true, By: "ana"}); err != nil {
		t.Fatal(err)
	}
	resume := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: args, Meta: mcp.Meta{"toolgate/approval": tk.ID}})
	}
	res, err = resume()
	if err != nil || res.IsError || resultText(res) != "cancelled" {
		t.Fatalf("approved resume: %v %+v", err, res)
	}
	if body := o.Wire.Body("tools/call"); o.Wire.Count("tools/call") != 1 || strings.Contains(string(body), "toolgate/approval") ||
		!strings.Contains(string(body), "io.modelcontextprotocol/protocolVersion") {
		t.Errorf("the server got %d calls: %s", o.Wire.Count("tools/call"), body)
	}
	if _, err := resume(); err == nil || !strings.Contains(err.Error(), "approval_used") {
		t.Fatalf("second resume: %v", err)
	}
	if n := o.Cancels.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
}

// A stateless client's subscriptions/listen stream passes through, and a
// tools/list_changed on it makes toolgate read the server's list again
// before it judges the next call, however long the kept list's ttlMs.
func TestStatelessListenStream(t *testing.T) {
	o := startStateless(t, false, func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs = 3600000 })
	g := startGate(t, o.HTTP.URL, mcptest.Catalog)
	var changed atomic.Int32
	cs, _ := connect(t, g.url, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) }})
	waitFor(t, func() bool { return o.Wire.Count("subscriptions/listen") == 1 })
	ctx := ctxT(t)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "ord_1"}}); err != nil || res.IsError {
		t.Fatalf("lookup: %v %+v", err, res)
	}
	lists := o.Wire.Count("tools/list")
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_tracking", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("open_tracking: %v %+v", err, res)
	}
	waitFor(t, func() bool { return changed.Load() > 0 })
	if o.Wire.Count("tools/list") != lists {
		t.Fatal("the list was read before it was needed")
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "ord_1"}}); err != nil || res.IsError {
		t.Fatalf("lookup: %v %+v", err, res)
	}
	if o.Wire.Count("tools/list") == lists {
		t.Fatal("a list the server said changed judged a call")
	}
}

// A server's own input_required result passes as it was sent, though the
// tool declares an outputSchema its structuredContent is later checked
// against, and the client's retry is judged like any call.
func TestStatelessServersOwnInputRequest(t *testing.T) {
	o := startStateless(t, false, nil)
	var runs atomic.Int32
	o.Server.AddTool(&mcp.Tool{Name: "count_boxes", InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"boxes":{"type":"integer"}},"required":["boxes"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Params.RequestState != "which-warehouse" {
				return &mcp.CallToolResult{RequestState: "which-warehouse", InputRequests: mcp.InputRequestMap{
					"warehouse": &mcp.ElicitParams{Message: "Which warehouse?", RequestedSchema: json.RawMessage(
						`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}}}, nil
			}
			runs.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3"}}, StructuredContent: map[string]any{"boxes": 3}}, nil
		})
	g := startGate(t, o.HTTP.URL, mcptest.Catalog)
	cs, _ := connect(t, g.url, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "north"}}, nil
	}})
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "count_boxes", Arguments: map[string]any{"order_id": "ord_1"}})
	if err != nil || res.IsError || resultText(res) != "3" {
		t.Fatalf("%v %+v", err, res)
	}
	if runs.Load() != 1 || o.Wire.Count("tools/call") != 2 {
		t.Fatalf("runs %d, calls %d", runs.Load(), o.Wire.Count("tools/call"))
	}
	// The retry is a call like any other: with arguments that break the
	// schema it is refused, its state notwithstanding.
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"count_boxes","arguments":{"order_id":7},"requestState":"which-warehouse",` +
		`"inputResponses":{"warehouse":{"action":"accept","content":{"name":"north"}}},` + meta2026 + `}}`
	_, _, out := post(t, g.url, body, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "count_boxes")
	if !strings.Contains(out, `"isError":true`) || !strings.Contains(out, "schema_violation") || o.Wire.Count("tools/call") != 2 {
		t.Fatalf("a retry with bad arguments: %s", out)
	}
}
