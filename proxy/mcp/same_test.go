package mcp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// The same finding is the same event on both fronts: a refund over the
// rule's limit, asked of an MCP server and answered by a model, ends in
// the same request outcome, the same call result and escalation reason in
// the metrics, and escalation records alike in everything but where they
// happened. Both go through the one pipeline; a second judge, counter or
// escalation builder for MCP would drift from it.
func TestMCPAndModelRecordTheSameFinding(t *testing.T) {
	const args = `{"order_id":"ord_1","amount_cents":200000}`
	var modelCalls atomic.Int32
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		modelCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		// The model repeats its call when asked again, so the model side
		// escalates on the finding itself, as MCP does.
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",`+
			`"function":{"name":"issue_refund","arguments":`+string(mustJSON(t, args))+`}}]},"finish_reason":"tool_calls"}],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(model.Close)
	o := start(t, false)
	core, logs := observer.New(zap.InfoLevel)
	g := startGateLog(t, o.HTTP.URL, "", "upstreams: [{url: '"+model.URL+"'}]\n"+mcptest.Catalog+`    - name: issue_refund
      parameters: {type: object, properties: {order_id: {type: string}, amount_cents: {type: integer, minimum: 1}}, required: [order_id, amount_cents]}
      rules:
        - expr: "args.amount_cents <= 100000"
          message: refunds above 1000.00 need a person
`, zap.New(core))
	cs, _ := connect(t, g.url, nil)
	// Only the call is compared: the handshake has outcomes of its own.
	before := metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "escalated"})
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "issue_refund", Arguments: json.RawMessage(args)})
	if err != nil || !res.IsError {
		t.Fatalf("MCP: %+v, %v", res, err)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"refund ord_1"}],"tools":[{"type":"function","function":` +
		`{"name":"issue_refund","parameters":{"type":"object"}}}]}`
	resp, err := http.Post(strings.TrimSuffix(g.url, "/mcp/orders")+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || resp.Header.Get("X-Toolgate-Outcome") != "escalated" {
		t.Fatalf("model side: HTTP %d, outcome %q", resp.StatusCode, resp.Header.Get("X-Toolgate-Outcome"))
	}
	waitFor(t, func() bool {
		return metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "escalated"}) == before+1
	})
	if n := metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "chat", "outcome": "escalated"}); n != 1 {
		t.Errorf("chat: requests escalated %v", n)
	}
	for _, api := range []string{"mcp", "chat"} {
		if n := metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": api, "outcome": "escalated"}); n < 1 {
			t.Errorf("%s: requests escalated %v", api, n)
		}
		if n := metric(t, g.reg, "toolgate_tool_calls_total", map[string]string{"api": api, "result": "rule_violation"}); n != 1 {
			t.Errorf("%s: calls counted rule_violation %v", api, n)
		}
	}
	if n := metric(t, g.reg, "toolgate_added_latency_seconds", map[string]string{"api": "mcp"}); n < 1 {
		t.Errorf("no MCP request observed in toolgate_added_latency_seconds")
	}
	if n := metric(t, g.reg, "toolgate_escalations_total", map[string]string{"reason": "rule_violation"}); n != 2 {
		t.Errorf("escalations with reason rule_violation: %v, want one per front", n)
	}
	recs := g.sink.all()
	if len(recs) != 2 {
		t.Fatalf("%d sink records", len(recs))
	}
	m, c := recs[0].Escalation, recs[1].Escalation
	if recs[0].API != "mcp" || recs[1].API != "chat" {
		m, c = c, m
	}
	if m.Label != c.Label || !reflect.DeepEqual(m.Codes, c.Codes) || m.Code() != c.Code() {
		t.Errorf("label/codes: mcp %s %v, chat %s %v", m.Label, m.Codes, c.Label, c.Codes)
	}
	mf, cf := m.Attempts[0], c.Attempts[0]
	if mf.Kind != cf.Kind || mf.Tool != cf.Tool || string(mf.Arguments) != string(cf.Arguments) || !reflect.DeepEqual(mf.Findings, cf.Findings) {
		t.Errorf("first attempt differs:\nmcp  %+v\nchat %+v", mf, cf)
	}
	if m.RequestID == "" || c.RequestID == "" || m.CatalogVersion == "" || m.Time.IsZero() {
		t.Errorf("records lack request facts: %+v", m)
	}
	// Each request has the one log line, with the same fields.
	var lines []map[string]any
	for _, e := range logs.FilterMessage("request").All() {
		if f := e.ContextMap(); f["outcome"] == "escalated" && len(fmt.Sprint(f["findings"])) > 2 {
			lines = append(lines, f)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d escalated request lines with findings", len(lines))
	}
	for _, k := range []string{"request_id", "api", "route", "status", "outcome", "findings", "duration", "overhead"} {
		if _, ok := lines[0][k]; !ok {
			t.Errorf("%v lacks %s", lines[0], k)
		}
		if _, ok := lines[1][k]; !ok {
			t.Errorf("%v lacks %s", lines[1], k)
		}
	}
	if o.Refunds.Load() != 0 {
		t.Error("the MCP server ran the refund")
	}
}

func mustJSON(t *testing.T, s string) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
