package test

// The operator's validators in the ladder, end to end: a denial is
// reprompted with the validator's reason and the repaired call is
// validated again; a second denial escalates; shadow mode only counts; a
// reload swaps the validators with the rest of the config.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/sink"
)

// valServer is a validator whose answer a test scripts per request.
type valServer struct {
	srv *httptest.Server

	mu     sync.Mutex
	bodies []string
	answer func(n int, body string) string
	// hold, when set, is waited on before answering.
	hold chan struct{}
}

func newValServer(t *testing.T, answer func(n int, body string) string) *valServer {
	t.Helper()
	v := &valServer{answer: answer}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		v.mu.Lock()
		v.bodies = append(v.bodies, string(b))
		n, hold := len(v.bodies), v.hold
		v.mu.Unlock()
		if hold != nil {
			<-hold
		}
		_, _ = io.WriteString(w, v.answer(n, string(b)))
	}))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *valServer) requests() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.bodies...)
}

const frozen = `{"allowed":false,"reasons":[{"pointer":"/amount_cents","message":"account 4411 is frozen until Friday"}]}`

// valConfig is a config with the refund tool, the validators given as
// YAML list items, and the rest of the top level.
func valConfig(m *mockUpstream, version, validators, rest string) string {
	return config(m, "", `catalog:
  version: `+version+`
  tools:
    - name: issue_refund
      parameters: {type: object, properties: {order_id: {type: string}, amount_cents: {type: integer}}, required: [order_id, amount_cents]}
validators:
`+validators+rest)
}

func valValidator(name, url string) string {
	return "  - {name: " + name + ", url: '" + url + "', tools: [issue_refund], timeout: 10s}\n"
}

func refundParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("refund ord_1")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "issue_refund", Parameters: shared.FunctionParameters{"type": "object"}})},
	}
}

func refundAnswer(id, args string) mockReply {
	return mockReply{Body: csCompletion("", [3]string{id, "issue_refund", args})}
}

// A streamed answer is judged by the validators too, before any of the
// held call goes out.
func TestValidatorDenialRepromptedStream(t *testing.T) {
	v := newValServer(t, func(n int, _ string) string {
		if n == 1 {
			return frozen
		}
		return `{"allowed":true}`
	})
	m := newMock(t,
		mockReply{Body: strings.Join(fuCallEvents("call_1", "issue_refund", `{"order_id":"ord_1","amount_cents":3000}`), ""),
			Header: map[string]string{"Content-Type": "text/event-stream"}},
		refundAnswer("call_2", `{"order_id":"ord_1","amount_cents":2000}`))
	g := startGate(t, valConfig(m, "v1", valValidator("orders", v.srv.URL), ""))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := csClient(t, g.URL)
	s := client.Chat.Completions.NewStreaming(ctx, refundParams())
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	calls := csCalls(acc)
	if len(calls) != 1 || calls[0].ID != "call_1" || !sameJSON(calls[0].Function.Arguments, `{"order_id":"ord_1","amount_cents":2000}`) {
		t.Fatalf("client got %+v", calls)
	}
	if !strings.Contains(string(m.body(t, 2)), "account 4411 is frozen until Friday") || len(v.requests()) != 2 {
		t.Fatalf("reprompt %s; %d validator calls", m.body(t, 2), len(v.requests()))
	}
}

func TestValidatorDenialReprompted(t *testing.T) {
	v := newValServer(t, func(n int, _ string) string {
		if n == 1 {
			return frozen
		}
		return `{"allowed":true}`
	})
	m := newMock(t, refundAnswer("call_1", `{"order_id":"ord_1","amount_cents":3000}`), refundAnswer("call_2", `{"order_id":"ord_1","amount_cents":2000}`))
	g := startGate(t, valConfig(m, "v1", valValidator("orders", v.srv.URL), ""))
	r := chat(t, g.URL, refundParams())
	expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{"call_1", "issue_refund", `{"order_id":"ord_1","amount_cents":2000}`})
	expectHeaders(t, r, "reprompted", 2)
	if !strings.Contains(string(m.body(t, 2)), "account 4411 is frozen until Friday") {
		t.Errorf("the reprompt does not carry the validator's reason:\n%s", m.body(t, 2))
	}
	reqs := v.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1], `"amount_cents":2000`) {
		t.Fatalf("the repaired call was not validated: %q", reqs)
	}
	metrics := scrapeMetrics(t, g)
	for _, line := range []string{
		`toolgate_validator_requests_total{result="denied",validator="orders"} 1`,
		`toolgate_validator_requests_total{result="allowed",validator="orders"} 1`,
		`toolgate_validator_duration_seconds_count{validator="orders"} 2`,
		`toolgate_validator_requests_total{result="timeout",validator="orders"} 0`,
	} {
		if !strings.Contains(metrics, line) {
			t.Errorf("metrics lack %s", line)
		}
	}
}

func TestValidatorSecondDenialEscalates(t *testing.T) {
	v := newValServer(t, func(int, string) string { return frozen })
	m := newMock(t, refundAnswer("call_1", `{"order_id":"ord_1","amount_cents":3000}`), refundAnswer("call_2", `{"order_id":"ord_1","amount_cents":2500}`))
	g := startGate(t, valConfig(m, "v1", valValidator("orders", v.srv.URL), ""))
	r := chat(t, g.URL, refundParams())
	e := escalated(t, r)
	if e.Code != "rule_violation" || len(v.requests()) != 2 {
		t.Fatalf("code %q, %d validator calls", e.Code, len(v.requests()))
	}
	found := false
	for _, a := range e.Escalation.Attempts {
		for _, f := range a.Findings {
			if f.Code == "rule_violation" && f.Keyword == "validator:orders" && f.Pointer == "/amount_cents" &&
				f.Message == "arguments/amount_cents: denied by validator orders" {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("the escalation does not name the validator's finding: %+v", e.Escalation.Attempts)
	}
	// The validator's own words reach the model and the client's
	// escalation, never a sink record.
	if !strings.Contains(r.APIErr.RawJSON(), `"reason":"account 4411 is frozen until Friday"`) {
		t.Errorf("the escalation lacks the validator's reason: %s", r.APIErr.RawJSON())
	}
	recs := g.Sink.records()
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	line, err := sink.Encode(recs[0], nil)
	if err != nil || strings.Contains(string(line), "4411") || !strings.Contains(string(line), "validator:orders") {
		t.Fatalf("the sink record (err %v): %s", err, line)
	}
}

// Shadow mode calls the validators and counts; the answer goes out as is.
func TestValidatorShadowMode(t *testing.T) {
	v := newValServer(t, func(int, string) string { return frozen })
	m := newMock(t, refundAnswer("call_1", `{"order_id":"ord_1","amount_cents":3000}`))
	g := startGate(t, valConfig(m, "v1", valValidator("orders", v.srv.URL), "mode: shadow\n"))
	r := chat(t, g.URL, refundParams())
	expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{"call_1", "issue_refund", `{"order_id":"ord_1","amount_cents":3000}`})
	expectHeaders(t, r, "shadow-would-reprompt", 1)
	if len(v.requests()) != 1 {
		t.Fatalf("%d validator calls", len(v.requests()))
	}
	if !strings.Contains(scrapeMetrics(t, g), `toolgate_validator_requests_total{result="denied",validator="orders"} 1`) {
		t.Error("the shadow denial is not counted")
	}
}

// A reload swaps the validators with the rest of the config: a request in
// flight keeps the validators and catalog version it started with, the
// next one gets the new ones.
func TestValidatorReloadSwapsAtomically(t *testing.T) {
	v1 := newValServer(t, func(int, string) string { return `{"allowed":true}` })
	v2 := newValServer(t, func(int, string) string { return `{"allowed":true}` })
	v1.hold = make(chan struct{})
	m := newMockFunc(t, func(n int, _ *mockRequest) mockReply {
		return refundAnswer("call_1", `{"order_id":"ord_1","amount_cents":1}`)
	})
	g := startGate(t, valConfig(m, "gen-1", valValidator("first", v1.srv.URL), ""))

	inFlight := make(chan chatResult, 1)
	go func() { inFlight <- chat(t, g.URL, refundParams()) }()
	for wait := time.Now(); len(v1.requests()) == 0; time.Sleep(5 * time.Millisecond) {
		// Until the first request is held at its validator.
		if time.Since(wait) > 30*time.Second {
			t.Fatal("the first request never reached its validator")
		}
	}
	cfg, err := catalog.Parse([]byte(valConfig(m, "gen-2", valValidator("second", v2.srv.URL), "")), "reload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.App.Server.Apply(snap); err != nil {
		t.Fatal(err)
	}
	after := chat(t, g.URL, refundParams())
	close(v1.hold)
	before := <-inFlight

	if got := before.Resp.Header.Get("X-Toolgate-Catalog-Version"); got != "gen-1" || len(v1.requests()) != 1 {
		t.Errorf("in-flight request: version %q, %d calls to the first validator", got, len(v1.requests()))
	}
	if got := after.Resp.Header.Get("X-Toolgate-Catalog-Version"); got != "gen-2" || len(v2.requests()) != 1 {
		t.Errorf("later request: version %q, %d calls to the second validator", got, len(v2.requests()))
	}
	if !strings.Contains(v1.requests()[0], `"catalog_version":"gen-1"`) || !strings.Contains(v2.requests()[0], `"catalog_version":"gen-2"`) {
		t.Errorf("validator requests %q %q", v1.requests(), v2.requests())
	}
	before.ok(t)
	after.ok(t)
}

// A validator that never answers costs the request its timeout, no more:
// under failure_policy ignore the call then passes.
func TestValidatorHangingIgnored(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer hung.Close()
	defer close(release)
	m := newMock(t, refundAnswer("call_1", `{"order_id":"ord_1","amount_cents":1}`))
	g := startGate(t, valConfig(m, "v1", "  - {name: slow, url: '"+hung.URL+"', tools: ['*'], timeout: 300ms, failure_policy: ignore}\n", ""))
	done := make(chan chatResult, 1)
	go func() { done <- chat(t, g.URL, refundParams()) }()
	select {
	case r := <-done:
		expectHeaders(t, r, "pass", 1)
		expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{"call_1", "issue_refund", `{"order_id":"ord_1","amount_cents":1}`})
	case <-time.After(30 * time.Second):
		t.Fatal("a hanging validator held the answer far past its timeout")
	}
	if !strings.Contains(scrapeMetrics(t, g), `toolgate_validator_requests_total{result="timeout",validator="slow"} 1`) {
		t.Error("the timeout is not counted")
	}
}

func scrapeMetrics(t *testing.T, g *gate) string {
	t.Helper()
	resp, err := http.Get("http://" + g.App.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
