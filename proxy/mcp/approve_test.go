package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/observe"
)

// startApprovalGate is startGate with approvals on a memory store.
func startApprovalGate(t *testing.T, upURL string) (string, *approval.Service, *proxy.Server) {
	t.Helper()
	snap := approvalSnap(t, upURL, mcptest.Catalog)
	svc := approval.New(approval.Config{Store: approval.NewMemory(approval.Options{})})
	srv, err := proxy.New(proxy.Options{Store: catalog.NewStore(snap), Metrics: observe.NewMetrics(prometheus.NewRegistry()),
		Sink: &sinkRec{}, Approvals: svc})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp/orders", svc, srv
}

func approvalSnap(t *testing.T, upURL, catalogYAML string) *catalog.Snapshot {
	t.Helper()
	cfg := "upstreams: [{url: http://127.0.0.1:9}]\n" +
		"mcp_servers: [{name: orders, url: " + upURL + ", path_prefix: /mcp/orders, idle_timeout: 20s}]\n" + catalogYAML
	c, err := catalog.Parse([]byte(cfg), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(c, "")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// A client without elicitation gets the confirm call held with an
// approval in _meta; after approval the same call with the approval in
// params._meta runs once, and a changed argument, an early or a second
// resume are refused with their codes.
func TestApprovalHoldAndResumeWithMeta(t *testing.T) {
	o := start(t, false)
	url, svc, _ := startApprovalGate(t, o.HTTP.URL)
	cs, _ := connect(t, url, nil)
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
	resume := func(a map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: a, Meta: mcp.Meta{"toolgate/approval": tk.ID}})
	}
	if _, err := resume(args); err == nil || !strings.Contains(err.Error(), "approval_pending") {
		t.Fatalf("resume before a decision: %v", err)
	}
	if _, err := svc.Decide(context.Background(), tk.ID, approval.Decision{Approve: true, By: "ana"}); err != nil {
		t.Fatal(err)
	}
	if _, err := resume(map[string]any{"order_id": "ord_10"}); err == nil || !strings.Contains(err.Error(), "approval_mismatch") {
		t.Fatalf("resume with a changed argument: %v", err)
	}
	if n := o.Cancels.Load(); n != 0 {
		t.Fatalf("the tool ran %d times before its approved call", n)
	}
	res, err = resume(args)
	if err != nil || res.IsError || resultText(res) != "cancelled" {
		t.Fatalf("approved resume: %v %+v", err, res)
	}
	if body := o.Wire.Body("tools/call"); o.Wire.Count("tools/call") != 1 || strings.Contains(string(body), "toolgate/approval") {
		t.Errorf("the server got %d calls, the approval in them: %s", o.Wire.Count("tools/call"), body)
	}
	if _, err := resume(args); err == nil || !strings.Contains(err.Error(), "approval_used") {
		t.Fatalf("second resume: %v", err)
	}
	if n := o.Cancels.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
}

// An approved call that a reload makes fail its rules is refused with
// approval_stale, and the tool does not run.
func TestApprovalStaleAfterReload(t *testing.T) {
	o := start(t, false)
	url, svc, srv := startApprovalGate(t, o.HTTP.URL)
	cs, _ := connect(t, url, nil)
	args := map[string]any{"order_id": "ord_9"}
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: args})
	if err != nil || !res.IsError {
		t.Fatalf("first call: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.Meta["toolgate/approval"])
	var tk struct{ ID string }
	_ = json.Unmarshal(raw, &tk)
	if _, err := svc.Decide(context.Background(), tk.ID, approval.Decision{Approve: true, By: "ana"}); err != nil {
		t.Fatal(err)
	}
	stricter := strings.Replace(mcptest.Catalog, "    - name: orders/cancel_order\n      policy: confirm\n",
		"    - name: orders/cancel_order\n      policy: confirm\n      rules:\n        - expr: \"args.order_id != 'ord_9'\"\n          message: ord_9 is frozen\n", 1)
	if stricter == mcptest.Catalog {
		t.Fatal("the catalog did not change")
	}
	if err := srv.Apply(approvalSnap(t, o.HTTP.URL, stricter)); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: args, Meta: mcp.Meta{"toolgate/approval": tk.ID}})
	if err == nil || !strings.Contains(err.Error(), "approval_stale") {
		t.Fatalf("resume after the reload: %v", err)
	}
	if n := o.Cancels.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
}

// An approval is bound to the session that held the call: another session
// presenting it with the same call is refused with approval_mismatch and
// the tool does not run; the session that held it still resumes it once.
func TestApprovalBoundToSession(t *testing.T) {
	o := start(t, false)
	url, svc, _ := startApprovalGate(t, o.HTTP.URL)
	holder, _ := connect(t, url, nil)
	other, _ := connect(t, url, nil)
	if holder.ID() == "" || holder.ID() == other.ID() {
		t.Fatalf("sessions %q and %q", holder.ID(), other.ID())
	}
	args := map[string]any{"order_id": "ord_9"}
	res, err := holder.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: args})
	if err != nil || !res.IsError {
		t.Fatalf("first call: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.Meta["toolgate/approval"])
	var tk struct{ ID string }
	if err := json.Unmarshal(raw, &tk); err != nil || !strings.HasPrefix(tk.ID, "apr_") {
		t.Fatalf("approval in _meta: %s", raw)
	}
	if _, err := svc.Decide(context.Background(), tk.ID, approval.Decision{Approve: true, By: "ana"}); err != nil {
		t.Fatal(err)
	}
	resume := func(cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: args, Meta: mcp.Meta{"toolgate/approval": tk.ID}})
	}
	_, err = resume(other)
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || !strings.Contains(string(rpcErr.Data), `"code":"approval_mismatch"`) {
		t.Fatalf("resume from another session: %v", err)
	}
	if n := o.Cancels.Load(); n != 0 || o.Wire.Count("tools/call") != 0 {
		t.Fatalf("another session's resume ran the tool (%d runs, %d calls)", n, o.Wire.Count("tools/call"))
	}
	if rec, err := svc.Get(context.Background(), tk.ID); err != nil || rec.State != approval.Approved {
		t.Fatalf("after the refused resume: %+v, %v", rec, err)
	}
	res, err = resume(holder)
	if err != nil || res.IsError || resultText(res) != "cancelled" {
		t.Fatalf("the holding session's resume: %v %+v", err, res)
	}
	if _, err := resume(holder); err == nil || !strings.Contains(err.Error(), "approval_used") {
		t.Fatalf("second resume: %v", err)
	}
	if n := o.Cancels.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
}

// bearerRT sends every request with an inbound token.
type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// With inbound_auth an approval is also bound to the client token: the
// holding session's id presented with another client's token is refused
// with approval_mismatch, and the tool does not run.
func TestApprovalBoundToInboundToken(t *testing.T) {
	o := start(t, false)
	url, svc := startTokenGate(t, o.HTTP.URL)
	cs := connectAs(t, url, "tok-a-1f2e3d")
	tk := holdApproved(t, cs, svc)
	// The same session, another client's token.
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"cancel_order","arguments":{"order_id":"ord_9"},"_meta":{"toolgate/approval":"` + tk.ID + `"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
	req.Header.Set("Authorization", "Bearer tok-b-4c5b6a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(answer), `"code":"approval_mismatch"`) || strings.Contains(string(answer), "cancelled") {
		t.Fatalf("resume with another token: %d %s", resp.StatusCode, answer)
	}
	if n := o.Cancels.Load(); n != 0 {
		t.Fatalf("another client's resume ran the tool %d times", n)
	}
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "ord_9"},
		Meta: mcp.Meta{"toolgate/approval": tk.ID}})
	if err != nil || res.IsError || resultText(res) != "cancelled" || o.Cancels.Load() != 1 {
		t.Fatalf("the holder's resume: %v %+v (%d runs)", err, res, o.Cancels.Load())
	}
}

// startTokenGate is startApprovalGate with inbound_auth on two tokens,
// tok-a-1f2e3d and tok-b-4c5b6a.
func startTokenGate(t *testing.T, upURL string) (string, *approval.Service) {
	t.Helper()
	t.Setenv("TG_MCP_BIND_TOKENS", "tok-a-1f2e3d,tok-b-4c5b6a")
	snap := approvalSnap(t, upURL, mcptest.Catalog+"inbound_auth: {tokens_env: TG_MCP_BIND_TOKENS}\n")
	svc := approval.New(approval.Config{Store: approval.NewMemory(approval.Options{})})
	srv, err := proxy.New(proxy.Options{Store: catalog.NewStore(snap), Metrics: observe.NewMetrics(prometheus.NewRegistry()),
		Sink: &sinkRec{}, Approvals: svc})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp/orders", svc
}

// connectAs connects an SDK client that sends token with every request.
func connectAs(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	cs, _ := connect(t, url, nil, func(tr *mcp.StreamableClientTransport) { tr.HTTPClient = &http.Client{Transport: bearerRT{token}} })
	return cs
}

// heldApproval is the approval in a held call's _meta.
type heldApproval struct{ ID string }

// holdApproved has cs call cancel_order(ord_9), which is held, approves
// it, and returns its approval.
func holdApproved(t *testing.T, cs *mcp.ClientSession, svc *approval.Service) heldApproval {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "ord_9"}})
	if err != nil || !res.IsError {
		t.Fatalf("first call: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.Meta["toolgate/approval"])
	var tk heldApproval
	if err := json.Unmarshal(raw, &tk); err != nil || !strings.HasPrefix(tk.ID, "apr_") {
		t.Fatalf("approval in _meta: %s", raw)
	}
	if _, err := svc.Decide(context.Background(), tk.ID, approval.Decision{Approve: true, By: "ana"}); err != nil {
		t.Fatal(err)
	}
	return tk
}

// On 2026-07-28 there is no session: with inbound_auth the approval is
// bound to the client token alone, and another client's resume is refused.
func TestStatelessApprovalBoundToInboundToken(t *testing.T) {
	o := startStateless(t, false, nil)
	url, svc := startTokenGate(t, o.HTTP.URL)
	a, b := connectAs(t, url, "tok-a-1f2e3d"), connectAs(t, url, "tok-b-4c5b6a")
	if v := a.InitializeResult().ProtocolVersion; v != "2026-07-28" || a.ID() != "" {
		t.Fatalf("negotiated %q, session %q", v, a.ID())
	}
	tk := holdApproved(t, a, svc)
	resume := func(cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "ord_9"},
			Meta: mcp.Meta{"toolgate/approval": tk.ID}})
	}
	_, err := resume(b)
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || !strings.Contains(string(rpcErr.Data), `"code":"approval_mismatch"`) {
		t.Fatalf("resume with another token: %v", err)
	}
	if n := o.Cancels.Load(); n != 0 {
		t.Fatalf("another client's resume ran the tool %d times", n)
	}
	res, err := resume(a)
	if err != nil || res.IsError || resultText(res) != "cancelled" || o.Cancels.Load() != 1 {
		t.Fatalf("the holder's resume: %v %+v (%d runs)", err, res, o.Cancels.Load())
	}
}
