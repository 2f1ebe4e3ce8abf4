package test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// mcpStateConfig mounts the order tools' server at /mcp/orders with the
// approvals store and the requestState secret two replicas share.
func mcpStateConfig(upURL, store string) string {
	return "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams: [{url: http://127.0.0.1:9}]\n" +
		"approvals:\n  store: " + store + "\n" +
		"mcp_servers: [{name: orders, url: " + upURL + ", path_prefix: /mcp/orders, idle_timeout: 20s}]\n" +
		strings.Replace(mcptest.Catalog, "catalog:\n", "catalog:\n  mcp:\n    state_secret_env: TG_MCP_STATE\n", 1)
}

// postMCP2026 sends one 2026-07-28 tools/call of cancel_order with params
// extra and returns the JSON-RPC answer.
func postMCP2026(t *testing.T, url, extra string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"cancel_order","arguments":{"order_id":"ord_1"}` + extra +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`
	st, _, out, err := postRaw(url, body, map[string]string{"Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "cancel_order"})
	if err != nil || st != http.StatusOK {
		t.Fatalf("tools/call: %d %v %s", st, err, out)
	}
	return string(out)
}

// A confirmation's requestState runs its call once across replicas: the
// replica that took the yes marks it used in the shared redis store, and
// the same retry sent to the other replica is refused; with the store
// down, a retry is told to try again and runs nothing.
func TestMCPRequestStateOnceAcrossReplicas(t *testing.T) {
	t.Setenv("TG_MCP_STATE", "a secret the replicas share")
	rd := startTestRedis(t)
	o := mcptest.StartStateless(false, nil)
	t.Cleanup(o.Close)
	store := "redis://" + rd.addr + "/0"
	a := startApprovalGate(t, t.TempDir(), mcpStateConfig(o.HTTP.URL, store))
	b := startApprovalGate(t, t.TempDir(), mcpStateConfig(o.HTTP.URL, store))

	ask := func(g *approvalGate) string {
		var m struct {
			Result struct {
				ResultType   string `json:"resultType"`
				RequestState string `json:"requestState"`
			} `json:"result"`
		}
		out := postMCP2026(t, g.url()+"/mcp/orders", "")
		if err := json.Unmarshal([]byte(out), &m); err != nil || m.Result.ResultType != "input_required" || m.Result.RequestState == "" {
			t.Fatalf("not an input request: %s", out)
		}
		return m.Result.RequestState
	}
	yes := func(g *approvalGate, state string) string {
		s, _ := json.Marshal(state)
		return postMCP2026(t, g.url()+"/mcp/orders", `,"inputResponses":{"toolgate/confirm":{"action":"accept","content":{"confirm":true}}},"requestState":`+string(s))
	}

	state := ask(a)
	if out := yes(a, state); !strings.Contains(out, "cancelled") {
		t.Fatalf("accept at a: %s", out)
	}
	if out := yes(b, state); !strings.Contains(out, `"state_used"`) || strings.Contains(out, "cancelled") {
		t.Fatalf("the same retry at b: %s", out)
	}
	if out := yes(a, state); !strings.Contains(out, `"state_used"`) {
		t.Fatalf("the same retry at a: %s", out)
	}
	// The other way round: asked at a, taken at b, replayed at a.
	state = ask(a)
	if out := yes(b, state); !strings.Contains(out, "cancelled") {
		t.Fatalf("accept at b: %s", out)
	}
	if out := yes(a, state); !strings.Contains(out, `"state_used"`) {
		t.Fatalf("replay at a: %s", out)
	}
	if n, calls := o.Cancels.Load(), o.Wire.Count("tools/call"); n != 2 || calls != 2 {
		t.Fatalf("the server ran %d cancels in %d calls, want 2 in 2", n, calls)
	}

	state = ask(b)
	rd.stop()
	out := yes(a, state)
	if !strings.Contains(out, "store_unavailable") || !strings.Contains(out, "retry it") || strings.Contains(out, "cancelled") {
		t.Fatalf("accept with the store down: %s", out)
	}
	if n := o.Cancels.Load(); n != 2 {
		t.Fatalf("the server ran %d cancels with the store down, want 2", n)
	}
}
