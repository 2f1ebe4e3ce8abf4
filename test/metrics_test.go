package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// counterNames are the SPEC §8 counters these tests pin down.
var counterNames = []string{"toolgate_tool_calls_total", "toolgate_hallucinations_total",
	"toolgate_recoveries_total", "toolgate_escalations_total", "toolgate_requests_total"}

// SPEC §8: after a known sequence of answers the counters say exactly what
// happened. Only the original answers' calls count, so a repair does not
// inflate the hallucination rate.
func TestMetricsAfterKnownSequence(t *testing.T) {
	m := newMock(t,
		// 1. valid
		mockReply{Body: string(readTestdata(t, "tool_call.json"))},
		// 2. invented + valid sibling, substituted
		callsAnswer("chatcmpl-2", invented, stock),
		substitute("get_current_weather", weatherArgs, 0.9),
		// 3. invented, the model escalates
		callsAnswer("chatcmpl-3", invented),
		escalate("nothing fits", "weather report", "weather reports", 0.2),
		// 4. bad argument, reprompted
		callsAnswer("chatcmpl-4", badUnit),
		callsAnswer("chatcmpl-4b", call{"call_n", "get_current_weather", weatherArgs}),
	)
	g := weatherGate(t, m, "")
	for i, want := range []string{"pass", "substituted", "escalated", "reprompted"} {
		r := chat(t, g.URL, fixtureParams(t))
		if got := r.Resp.Header.Get("X-Toolgate-Outcome"); got != want {
			t.Fatalf("request %d: outcome %q, want %q", i+1, got, want)
		}
	}
	expectCount(t, m, 7)

	const expected = `
# HELP toolgate_escalations_total Escalations by reason.
# TYPE toolgate_escalations_total counter
toolgate_escalations_total{catalog_version="fixtures-v1",reason="unknown_tool"} 1
# HELP toolgate_hallucinations_total Calls to tools that do not exist.
# TYPE toolgate_hallucinations_total counter
toolgate_hallucinations_total{api="chat",catalog_version="fixtures-v1"} 2
toolgate_hallucinations_total{api="gemini",catalog_version="fixtures-v1"} 0
toolgate_hallucinations_total{api="messages",catalog_version="fixtures-v1"} 0
toolgate_hallucinations_total{api="responses",catalog_version="fixtures-v1"} 0
# HELP toolgate_recoveries_total Repair attempts by strategy and result.
# TYPE toolgate_recoveries_total counter
toolgate_recoveries_total{catalog_version="fixtures-v1",result="escalated",strategy="decision"} 1
toolgate_recoveries_total{catalog_version="fixtures-v1",result="reprompted",strategy="reprompt"} 1
toolgate_recoveries_total{catalog_version="fixtures-v1",result="substituted",strategy="decision"} 1
# HELP toolgate_requests_total Validated requests by API and outcome.
# TYPE toolgate_requests_total counter
toolgate_requests_total{api="chat",outcome="escalated"} 1
toolgate_requests_total{api="chat",outcome="pass"} 1
toolgate_requests_total{api="chat",outcome="reprompted"} 1
toolgate_requests_total{api="chat",outcome="substituted"} 1
# HELP toolgate_tool_calls_total Tool calls in upstream answers, by verdict.
# TYPE toolgate_tool_calls_total counter
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="schema_violation",tool="get_current_weather"} 1
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="unknown_tool",tool="_unknown"} 2
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="valid",tool="get_current_weather"} 1
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="valid",tool="get_stock_price"} 1
` + zeroSeries + `
`
	if err := testutil.GatherAndCompare(g.App.Registry, strings.NewReader(expected), counterNames...); err != nil {
		t.Error(err)
	}
}

// SPEC §4 and §8: a call cut off by the token limit is a truncated call, not
// a model that wrote bad JSON, and not a hallucination.
func TestMetricsTruncatedCall(t *testing.T) {
	m := newMock(t, truncatedAnswer())
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t))
	escalated(t, r)
	const expected = `
# HELP toolgate_escalations_total Escalations by reason.
# TYPE toolgate_escalations_total counter
toolgate_escalations_total{catalog_version="fixtures-v1",reason="truncated"} 1
# HELP toolgate_hallucinations_total Calls to tools that do not exist.
# TYPE toolgate_hallucinations_total counter
toolgate_hallucinations_total{api="chat",catalog_version="fixtures-v1"} 0
toolgate_hallucinations_total{api="gemini",catalog_version="fixtures-v1"} 0
toolgate_hallucinations_total{api="messages",catalog_version="fixtures-v1"} 0
toolgate_hallucinations_total{api="responses",catalog_version="fixtures-v1"} 0
# HELP toolgate_requests_total Validated requests by API and outcome.
# TYPE toolgate_requests_total counter
toolgate_requests_total{api="chat",outcome="escalated"} 1
# HELP toolgate_tool_calls_total Tool calls in upstream answers, by verdict.
# TYPE toolgate_tool_calls_total counter
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="truncated",tool="get_current_weather"} 1
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="unknown_tool",tool="_unknown"} 0
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="valid",tool="get_current_weather"} 0
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="valid",tool="get_stock_price"} 0
` + zeroSeries + `
`
	if err := testutil.GatherAndCompare(g.App.Registry, strings.NewReader(expected), counterNames...); err != nil {
		t.Error(err)
	}
}

// truncatedAnswer is a call cut off by max_tokens in the middle of its
// arguments, the usual way truncation shows.
func truncatedAnswer() mockReply {
	return mockReply{Body: answerOf("chatcmpl-cut", 50, 4096,
		choice{Calls: []call{{"call_cut", "get_current_weather", `{"loc`}}, Finish: "length"})}
}

// zeroSeries are the tool-call series toolgate creates at zero for the
// catalog before any traffic, so that rate() sees a fresh version's first
// calls.
const zeroSeries = `toolgate_tool_calls_total{api="gemini",catalog_version="fixtures-v1",result="unknown_tool",tool="_unknown"} 0
toolgate_tool_calls_total{api="gemini",catalog_version="fixtures-v1",result="valid",tool="get_current_weather"} 0
toolgate_tool_calls_total{api="gemini",catalog_version="fixtures-v1",result="valid",tool="get_stock_price"} 0
toolgate_tool_calls_total{api="messages",catalog_version="fixtures-v1",result="unknown_tool",tool="_unknown"} 0
toolgate_tool_calls_total{api="messages",catalog_version="fixtures-v1",result="valid",tool="get_current_weather"} 0
toolgate_tool_calls_total{api="messages",catalog_version="fixtures-v1",result="valid",tool="get_stock_price"} 0
toolgate_tool_calls_total{api="responses",catalog_version="fixtures-v1",result="unknown_tool",tool="_unknown"} 0
toolgate_tool_calls_total{api="responses",catalog_version="fixtures-v1",result="valid",tool="get_current_weather"} 0
toolgate_tool_calls_total{api="responses",catalog_version="fixtures-v1",result="valid",tool="get_stock_price"} 0`

// SPEC §5 and §8: in error mode one escalation answers the request, but
// every choice that escalated is recorded in the sinks and counted, not
// only the first: an operator reading the sink sees each call a person
// must look at.
func TestTwoChoicesEscalatingInErrorMode(t *testing.T) {
	m := newMock(t, mockReply{Body: answerOf("chatcmpl-two", 50, 4096,
		choice{Calls: []call{{"call_cut0", "get_current_weather", `{"loc`}}, Finish: "length"},
		choice{Calls: []call{{"call_cut1", "get_stock_price", `{"tic`}}, Finish: "length"})})
	g := weatherGate(t, m, "")
	params := fixtureParams(t)
	params.N = openai.Int(2)
	r := chat(t, g.URL, params)
	e := escalated(t, r)
	expectCount(t, m, 1)
	recs := g.Sink.records()
	if len(recs) != 2 {
		t.Fatalf("%d sink records, want 2", len(recs))
	}
	// The answer carries the first choice's escalation; the second is
	// recorded beside it, for the same request.
	if recs[0].Escalation.ID != e.Escalation.ID || recs[1].Escalation.ID == e.Escalation.ID {
		t.Errorf("sink ids %q, %q; answer's %q", recs[0].Escalation.ID, recs[1].Escalation.ID, e.Escalation.ID)
	}
	for i, rec := range recs {
		if rec.Escalation.RequestID != e.Escalation.RequestID || rec.API != "chat" {
			t.Errorf("record %d: request %q api %q", i, rec.Escalation.RequestID, rec.API)
		}
	}
	const expected = `
# HELP toolgate_escalations_total Escalations by reason.
# TYPE toolgate_escalations_total counter
toolgate_escalations_total{catalog_version="fixtures-v1",reason="truncated"} 2
# HELP toolgate_requests_total Validated requests by API and outcome.
# TYPE toolgate_requests_total counter
toolgate_requests_total{api="chat",outcome="escalated"} 1
# HELP toolgate_tool_calls_total Tool calls in upstream answers, by verdict.
# TYPE toolgate_tool_calls_total counter
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="truncated",tool="get_current_weather"} 1
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="truncated",tool="get_stock_price"} 1
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="unknown_tool",tool="_unknown"} 0
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="valid",tool="get_current_weather"} 0
toolgate_tool_calls_total{api="chat",catalog_version="fixtures-v1",result="valid",tool="get_stock_price"} 0
` + zeroSeries + `
`
	if err := testutil.GatherAndCompare(g.App.Registry, strings.NewReader(expected),
		"toolgate_escalations_total", "toolgate_requests_total", "toolgate_tool_calls_total"); err != nil {
		t.Error(err)
	}
}

// The same in a stream that begins with the calls: nothing was sent when
// they are judged, so the first escalation is a plain 422, and both are
// recorded and counted.
func TestTwoChoicesEscalatingInAStream(t *testing.T) {
	chunk := func(index int, id, name, args, finish string) string {
		fin := "null"
		if finish != "" {
			fin = `"` + finish + `"`
		}
		return fmt.Sprintf(`data: {"id":"chatcmpl-two","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06",`+
			`"choices":[{"index":%d,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":%q,"type":"function",`+
			`"function":{"name":%q,"arguments":%q}}]},"finish_reason":%s}]}`+"\n\n", index, id, name, args, fin)
	}
	sse := chunk(0, "call_cut0", "get_current_weather", `{"loc`, "length") +
		chunk(1, "call_cut1", "get_stock_price", `{"tic`, "length") + "data: [DONE]\n\n"
	m := newMock(t, mockReply{Body: sse, Header: map[string]string{"Content-Type": "text/event-stream"}})
	g := weatherGate(t, m, "")
	req, err := json.Marshal(fixtureParams(t))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.Unmarshal(req, &body)
	body["stream"], body["n"] = true, 2
	req, _ = json.Marshal(body)
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	recs := g.Sink.records()
	if len(recs) != 2 || recs[0].Escalation.ID != resp.Header.Get("X-Toolgate-Escalation-Id") ||
		!strings.Contains(string(out), recs[0].Escalation.ID) || strings.Contains(string(out), recs[1].Escalation.ID) {
		t.Fatalf("%d sink records; answer %s", len(recs), out)
	}
	const expected = `
# HELP toolgate_escalations_total Escalations by reason.
# TYPE toolgate_escalations_total counter
toolgate_escalations_total{catalog_version="fixtures-v1",reason="truncated"} 2
`
	if err := testutil.GatherAndCompare(g.App.Registry, strings.NewReader(expected), "toolgate_escalations_total"); err != nil {
		t.Error(err)
	}
}
