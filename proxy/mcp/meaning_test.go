package mcp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/sink"
)

// validatorServer is an operator's validator: it records every request
// body and answers with reply, or never answers when reply is "".
type validatorServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newValidator(t *testing.T, reply string) *validatorServer {
	t.Helper()
	v := &validatorServer{}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		v.mu.Lock()
		v.bodies = append(v.bodies, string(b))
		v.mu.Unlock()
		if reply == "" {
			// Hangs until toolgate gives up on it.
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *validatorServer) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.bodies...)
}

// validatorRequest is the body a validator receives.
type validatorRequest struct {
	RequestID      string `json:"request_id"`
	CatalogVersion string `json:"catalog_version"`
	Call           struct {
		ID        string          `json:"id"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"call"`
	History         []json.RawMessage `json:"history"`
	HistoryComplete *bool             `json:"history_complete"`
	Context         map[string]string `json:"context"`
}

func validatorConfig(url, timeout, policy string) string {
	return mcptest.Catalog + "validators:\n  - {name: orders, url: '" + url + "', tools: [orders/issue_refund], timeout: " +
		timeout + ", failure_policy: " + policy + "}\n"
}

const frozenAccount = `{"allowed":false,"reasons":[{"pointer":"/amount_cents","message":"account 4411 is frozen until Friday"}]}`

// A tools/call passes the operator's validators before it reaches the
// server, as a model's call does: a denial or (under failure_policy fail)
// a validator that gives no answer is an error result naming the
// validator and its reasons, and the server never sees the call.
func TestValidatorsJudgeMCPCalls(t *testing.T) {
	cases := []struct {
		name, reply, timeout, policy string
		forwarded                    bool
		result                       string // toolgate_validator_requests_total
		want                         []string
	}{
		{"allowed", `{"allowed":true}`, "10s", "fail", true, "allowed", nil},
		{"denied", frozenAccount, "10s", "fail", false, "denied",
			[]string{"rule_violation at /amount_cents (validator:orders): account 4411 is frozen until Friday"}},
		{"timeout under fail", "", "50ms", "fail", false, "timeout",
			[]string{"(validator:orders)", "validator orders gave no answer (timeout)"}},
		{"timeout under ignore", "", "50ms", "ignore", true, "timeout", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := start(t, false)
			v := newValidator(t, tc.reply)
			g := startGate(t, o.HTTP.URL, validatorConfig(v.srv.URL, tc.timeout, tc.policy))
			cs, _ := connect(t, g.url, nil)
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1", "amount_cents": 2000}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.forwarded {
				if res.IsError || resultText(res) != "refunded" || o.Refunds.Load() != 1 {
					t.Fatalf("want the call forwarded, got %+v (refunds %d)", res, o.Refunds.Load())
				}
			} else {
				if !res.IsError || o.Wire.Count("tools/call") != 0 || o.Refunds.Load() != 0 {
					t.Fatalf("want an error result and nothing forwarded, got %+v (server saw %d calls)", res, o.Wire.Count("tools/call"))
				}
				for _, w := range tc.want {
					if !strings.Contains(resultText(res), w) {
						t.Errorf("text %q lacks %q", resultText(res), w)
					}
				}
				recs := g.sink.all()
				if len(recs) != 1 || recs[0].Escalation.Codes[0] != "rule_violation" {
					t.Fatalf("sink records %+v", recs)
				}
				if line, err := sink.Encode(recs[0], nil); err != nil || strings.Contains(string(line), "4411") {
					t.Fatalf("the sink line quotes the validator's reason: %s", line)
				}
			}
			if n := metric(t, g.reg, "toolgate_validator_requests_total", map[string]string{"validator": "orders", "result": tc.result}); n != 1 {
				t.Fatalf("toolgate_validator_requests_total{result=%q} = %v", tc.result, n)
			}
			bodies := v.all()
			if len(bodies) != 1 {
				t.Fatalf("the validator got %d requests", len(bodies))
			}
			var req validatorRequest
			if err := json.Unmarshal([]byte(bodies[0]), &req); err != nil {
				t.Fatal(err)
			}
			versions := labelValues(t, g.reg, "toolgate_tool_calls_total", "catalog_version")
			if req.Call.Tool != "orders/issue_refund" || string(req.Call.Arguments) != `{"amount_cents":2000,"order_id":"ord_1"}` ||
				req.RequestID == "" || len(versions) != 1 || req.CatalogVersion != versions[0] ||
				req.History == nil || len(req.History) != 0 || req.HistoryComplete == nil || *req.HistoryComplete {
				t.Fatalf("validator request %s (catalog versions counted %v)", bodies[0], versions)
			}
		})
	}
}

// A validator is not asked about a call the local checks refused, nor
// about a tool it does not list.
func TestValidatorsOnlySeeLocallyValidMCPCalls(t *testing.T) {
	o := start(t, false)
	v := newValidator(t, `{"allowed":true}`)
	g := startGate(t, o.HTTP.URL, validatorConfig(v.srv.URL, "10s", "fail"))
	cs, _ := connect(t, g.url, nil)
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1", "amount_cents": 200000}})
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "refunds above 1000.00 need a person") {
		t.Fatalf("rule violation: %+v %v", res, err)
	}
	res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "ord_7"}})
	if err != nil || res.IsError {
		t.Fatalf("lookup: %+v %v", res, err)
	}
	if n := len(v.all()); n != 0 {
		t.Fatalf("the validator was asked %d times", n)
	}
}

// withHeader makes the client send a header on every request.
func withHeader(k, v string) func(*mcp.StreamableClientTransport) {
	return func(tr *mcp.StreamableClientTransport) {
		tr.HTTPClient = &http.Client{Transport: headerRT{next: tr.HTTPClient.Transport, k: k, v: v}}
	}
}

type headerRT struct {
	next http.RoundTripper
	k, v string
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.k, h.v)
	return h.next.RoundTrip(r)
}

const contextCatalog = `catalog:
  context: {customer_id: {header: X-Customer-Id}}
  tools:
    - name: orders/issue_refund
      rules:
        - expr: "args.customer_id == context.customer_id"
          message: the order belongs to another customer
`

// A CEL rule on an MCP tool reads the request's context, taken from the
// configured header, which never reaches the MCP server; validators get
// the same values.
func TestContextRuleOnMCPCall(t *testing.T) {
	o := start(t, false)
	v := newValidator(t, `{"allowed":true}`)
	g := startGate(t, o.HTTP.URL, contextCatalog+"validators:\n  - {name: orders, url: '"+v.srv.URL+"', tools: [orders/issue_refund], timeout: 10s}\n")
	args := map[string]any{"order_id": "ord_1", "amount_cents": 2000, "customer_id": "c_1"}
	cases := []struct {
		name, header string
		forwarded    bool
		want         string
	}{
		{"missing", "", false, `context value "customer_id" is missing, so the rule cannot hold: the order belongs to another customer`},
		{"another customer", "c_2", false, "the order belongs to another customer"},
		{"matching", "c_1", true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tune []func(*mcp.StreamableClientTransport)
			if tc.header != "" {
				tune = append(tune, withHeader("X-Customer-Id", tc.header))
			}
			cs, _ := connect(t, g.url, nil, tune...)
			before := o.Wire.Count("tools/call")
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "issue_refund", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			if got := o.Wire.Count("tools/call") - before; res.IsError == tc.forwarded || (got == 1) != tc.forwarded {
				t.Fatalf("result %+v, the server saw %d calls", res, got)
			}
			if !strings.Contains(resultText(res), tc.want) {
				t.Fatalf("text %q lacks %q", resultText(res), tc.want)
			}
		})
	}
	if o.Refunds.Load() != 1 {
		t.Fatalf("%d refunds ran", o.Refunds.Load())
	}
	bodies := v.all()
	if len(bodies) != 1 || !strings.Contains(bodies[0], `"context":{"customer_id":"c_1"}`) {
		t.Fatalf("validator requests %q", bodies)
	}
	headers := o.Wire.Headers()
	if len(headers) == 0 {
		t.Fatal("the server recorded no request")
	}
	for _, h := range headers {
		if _, ok := h["X-Customer-Id"]; ok {
			t.Fatalf("the context header reached the MCP server: %v", h)
		}
	}
}

// A reload swaps the validators of the MCP routes with the snapshot: the
// same session's next call asks the new validator only.
func TestReloadSwapsMCPValidators(t *testing.T) {
	f := newFake(t)
	before := newValidator(t, frozenAccount)
	after := newValidator(t, `{"allowed":true}`)
	cfg := func(v *validatorServer) string {
		return "catalog:\n  tools:\n    - name: orders/issue_refund\n" +
			"validators:\n  - {name: orders, url: '" + v.srv.URL + "', tools: [orders/issue_refund], timeout: 10s}\n"
	}
	g := startGate(t, f.srv.URL, cfg(before))
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"issue_refund","arguments":{"amount_cents":500}}}`
	if _, _, body := post(t, g.url, call, "Mcp-Session-Id", "s1"); !strings.Contains(body, "account 4411 is frozen") || f.calls() != 0 {
		t.Fatalf("before reload: %s", body)
	}
	c, err := catalog.Parse([]byte("upstreams: [{url: http://127.0.0.1:9}]\nmcp_servers: [{name: orders, url: "+f.srv.URL+", path_prefix: /mcp/orders}]\n"+cfg(after)), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(c, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Apply(snap); err != nil {
		t.Fatal(err)
	}
	if _, _, body := post(t, g.url, call, "Mcp-Session-Id", "s1"); strings.Contains(body, "isError") || f.calls() != 1 {
		t.Fatalf("after reload: %s", body)
	}
	if len(before.all()) != 1 || len(after.all()) != 1 {
		t.Fatalf("the old validator got %d requests, the new one %d", len(before.all()), len(after.all()))
	}
}
