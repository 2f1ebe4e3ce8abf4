package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// weatherGate starts toolgate with the fixture catalog in front of m; rest
// adds top-level config keys.
func weatherGate(t *testing.T, m *mockUpstream, rest string, extraTools ...string) *gate {
	t.Helper()
	return startGate(t, config(m, "", catalogYAML(t, "", extraTools...)+rest))
}

// SPEC §4 rung 1: an answer whose calls are all valid goes out as the
// upstream's own bytes.
func TestValidAnswerPassesByteIdentical(t *testing.T) {
	cases := []struct {
		fixture string
		want    []gotCall
	}{
		{"tool_call.json", []gotCall{{"call_8Oool8DklZDOCj2ISaJiHkTj", "get_current_weather", weatherArgs}}},
		{"parallel_tool_calls.json", []gotCall{
			{"call_xUdl7dXTPyLsxPFkThf4VucS", "get_current_weather", weatherArgs},
			{"call_mEHgaKwVJ7faC9qEwjky40UV", "get_stock_price", stockArgs},
		}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			fixture := readTestdata(t, c.fixture)
			m := newMock(t, mockReply{Body: string(fixture)})
			g := weatherGate(t, m, "")
			r := chat(t, g.URL, fixtureParams(t))
			got := r.ok(t)
			if !bytes.Equal(r.Raw, fixture) {
				t.Errorf("body differs from the upstream's:\n got  %s\n want %s", r.Raw, fixture)
			}
			expectCalls(t, callsOf(t, got, 0), c.want...)
			expectHeaders(t, r, "pass", 1)
			expectCount(t, m, 1)
			if sent := m.body(t, 1); !bytes.Equal(sent, r.Sent) {
				t.Errorf("toolgate changed the request:\n sdk  %s\n sent %s", r.Sent, sent)
			}
			if v := r.Resp.Header.Get("X-Toolgate-Catalog-Version"); v != fixtureVersion {
				t.Errorf("catalog version %q", v)
			}
		})
	}
}

// SPEC §4 rung 2, decision strategy: an invented tool is mapped onto a real
// one; the sibling call is untouched.
func TestHallucinationSubstituted(t *testing.T) {
	first := callsAnswer("chatcmpl-first", invented, stock)
	m := newMock(t, first, substitute("get_current_weather", weatherArgs, 0.92))
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t))
	got := r.ok(t)

	expectCalls(t, callsOf(t, got, 0),
		gotCall{invented.ID, "get_current_weather", weatherArgs},
		gotCall{stock.ID, stock.Name, stock.Args})
	expectHeaders(t, r, "substituted", 2)
	expectCount(t, m, 2)
	if !bytes.Equal(m.body(t, 1), r.Sent) {
		t.Errorf("the original request was not forwarded as the SDK sent it")
	}
	if got.ID != "chatcmpl-first" || got.Usage.PromptTokens != 50 || got.Usage.CompletionTokens != 10 {
		t.Errorf("the client must get the original answer (id, own usage); got id %q usage %+v", got.ID, got.Usage)
	}
	if got.Choices[0].Message.Content != "" {
		t.Errorf("a re-query's text leaked into the answer: %q", got.Choices[0].Message.Content)
	}

	replies := checkRequery(t, m.body(t, 1), m.body(t, 2), true, replayed{[]byte(first.Body), 0})
	if len(replies) != 2 {
		t.Fatalf("want 2 tool replies, got %v", replies)
	}
	prompt := replies[0].Content
	for _, want := range []string{`"fetch_weather_report"`, `"get_current_weather"`, `"get_stock_price"`, `"decision"`, "0.8"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("recovery prompt lacks %s:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "[HALLUCINATED_TOOL_NAME]") || strings.Contains(prompt, "[AVAILABLE_TOOLS_CATALOG]") {
		t.Errorf("recovery prompt has unfilled placeholders")
	}
	if !heldReply(replies[1].Content) {
		t.Errorf("valid sibling got %q, want a not-executed reply", replies[1].Content)
	}
	if n := len(g.Sink.records()); n != 0 {
		t.Errorf("a repaired answer reached the sinks (%d records)", n)
	}
}

// SPEC §4 rungs 2 and 4: a recovery answer that cannot be used escalates.
func TestDecisionEscalations(t *testing.T) {
	forecast := `    - name: get_weather_forecast
      description: Forecast the weather for the coming days.
      substitutable: false
      parameters: {"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`
	refund := `    - name: issue_refund
      description: Refund part or all of an order.
      policy: confirm
      substitutable: true
      parameters: {"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`
	cases := []struct {
		name     string
		decision mockReply
		extra    []string
		wantCode string
	}{
		{"below threshold", substitute("get_current_weather", weatherArgs, 0.5), nil, "unknown_tool"},
		{"substitute names another unknown tool", substitute("lookup_weather", weatherArgs, 0.95), nil, "invalid_decision"},
		{"prose instead of JSON", textAnswer("chatcmpl-d", "You should probably use the weather tool for this."), nil, "invalid_decision"},
		{"substitute arguments invalid", substitute("get_current_weather", `{"unit":"kelvin"}`, 0.95), nil, "invalid_decision"},
		{"substitute onto a tool that is not substitutable", substitute("get_weather_forecast", `{"location":"Boston, MA"}`, 0.95), []string{forecast}, "invalid_decision"},
		{"substitute onto a confirm tool", substitute("issue_refund", `{"order_id":"A1"}`, 0.95), []string{refund}, "confirmation_required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first := callsAnswer("chatcmpl-first", invented)
			m := newMock(t, first, c.decision)
			g := weatherGate(t, m, "", c.extra...)
			params := fixtureParams(t)
			params.Tools = append(params.Tools,
				sdkTool(t, "get_weather_forecast", "Forecast the weather for the coming days.", json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)),
				sdkTool(t, "issue_refund", "Refund part or all of an order.", json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)))
			r := chat(t, g.URL, params)
			e := escalated(t, r)
			if !hasCode(e, c.wantCode) {
				t.Errorf("codes %v lack %s", e.Escalation.Codes, c.wantCode)
			}
			expectHeaders(t, r, "escalated", 2)
			expectCount(t, m, 2)
			checkRequery(t, m.body(t, 1), m.body(t, 2), true, replayed{[]byte(first.Body), 0})
			if recs := g.Sink.records(); len(recs) != 1 || recs[0].Escalation.ID != e.Escalation.ID {
				t.Errorf("sinks got %d records, want the escalation", len(recs))
			}
		})
	}
}

// SPEC §5: the escalation body an agent acts on.
func TestEscalateDecisionErrorBody(t *testing.T) {
	first := callsAnswer("chatcmpl-first", invented)
	m := newMock(t, first, escalate("no tool reads weather reports", "get a weather report for Boston", "a weather report service", 0.3))
	g := weatherGate(t, m, "")
	// The SDK's own retries stay on: x-should-retry: false must stop them.
	r := chat(t, g.URL, fixtureParams(t), option.WithMaxRetries(2))
	e := escalated(t, r)
	x := e.Escalation
	if e.Code != "unknown_tool" || len(x.Codes) != 1 || x.Codes[0] != "unknown_tool" {
		t.Errorf("code %q codes %v, want unknown_tool", e.Code, x.Codes)
	}
	if x.Reason != "no tool reads weather reports" || x.OriginalIntent != "get a weather report for Boston" ||
		x.MissingCapability != "a weather report service" {
		t.Errorf("reason/intent/missing = %q / %q / %q", x.Reason, x.OriginalIntent, x.MissingCapability)
	}
	if x.CatalogVersion != fixtureVersion {
		t.Errorf("catalog_version %q", x.CatalogVersion)
	}
	if strings.Join(x.UpstreamRequestIDs, ",") != "req_mock_1,req_mock_2" {
		t.Errorf("upstream_request_ids %v", x.UpstreamRequestIDs)
	}
	if string(x.Call) != "null" && len(x.Call) != 0 {
		t.Errorf("call = %s, want null", x.Call)
	}
	if k := strings.Join(attemptKinds(e), ","); k != "call,decision" {
		t.Fatalf("attempt kinds %s, want call,decision", k)
	}
	a0, a1 := x.Attempts[0], x.Attempts[1]
	if a0.Tool != invented.Name || !sameJSON(string(a0.Arguments), invented.Args) ||
		a0.ArgumentsRaw == nil || *a0.ArgumentsRaw != invented.Args ||
		len(a0.Findings) != 1 || a0.Findings[0].Code != "unknown_tool" {
		t.Errorf("call attempt %+v", a0)
	}
	if a1.Decision != "escalate" || a1.Confidence == nil || *a1.Confidence != 0.3 {
		t.Errorf("decision attempt %+v", a1)
	}
	if !strings.Contains(e.Message, x.ID) {
		t.Errorf("message %q does not name the escalation", e.Message)
	}
	expectHeaders(t, r, "escalated", 2)
	expectCount(t, m, 2)
	if recs := g.Sink.records(); len(recs) != 1 || recs[0].Escalation.ID != x.ID || recs[0].API != "chat" {
		t.Errorf("sink records %+v", recs)
	}
}

// SPEC §4 rung 3: argument findings are reprompted with the exact reasons.
func TestArgumentsReprompted(t *testing.T) {
	refundTool := `    - name: issue_refund
      description: Refund part or all of an order.
      provenance: [/order_id]
      rules:
        - expr: "args.amount_cents <= 100000"
          message: refunds above 1000.00 need a person
      parameters: {"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["order_id","amount_cents"]}`
	cases := []struct {
		name      string
		bad       call
		fixed     string
		wantInMsg []string
	}{
		{"malformed argument string", call{"call_m", "get_current_weather", `{"location": "Boston, MA", "unit": "cel`}, weatherArgs, []string{"not valid JSON"}},
		{"arguments not an object", call{"call_a", "get_current_weather", `["Boston, MA"]`}, weatherArgs, []string{"not a JSON object"}},
		{"schema violation", badUnit, weatherArgs, []string{"/unit"}},
		{"missing required", call{"call_r", "get_current_weather", `{"unit":"celsius"}`}, weatherArgs, []string{"location"}},
		{"rule violation", call{"call_rule", "issue_refund", `{"order_id":"ORD-77","amount_cents":250000}`}, `{"order_id":"ORD-77","amount_cents":5000}`, []string{"refunds above 1000.00 need a person"}},
		{"provenance", call{"call_prov", "issue_refund", `{"order_id":"ORD-99","amount_cents":5000}`}, `{"order_id":"ORD-77","amount_cents":5000}`, []string{"/order_id"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first := callsAnswer("chatcmpl-first", c.bad)
			second := callsAnswer("chatcmpl-second", call{"call_new", c.bad.Name, c.fixed})
			m := newMock(t, first, second)
			g := weatherGate(t, m, "", refundTool)
			params := fixtureParams(t)
			params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Boston please; and refund order ORD-77.")}
			params.Tools = append(params.Tools, sdkTool(t, "issue_refund", "Refund part or all of an order.",
				json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["order_id","amount_cents"]}`)))
			r := chat(t, g.URL, params)
			got := r.ok(t)
			expectCalls(t, callsOf(t, got, 0), gotCall{c.bad.ID, c.bad.Name, c.fixed})
			expectHeaders(t, r, "reprompted", 2)
			expectCount(t, m, 2)
			replies := checkRequery(t, m.body(t, 1), m.body(t, 2), false, replayed{[]byte(first.Body), 0})
			for _, w := range c.wantInMsg {
				if len(replies) != 1 || !strings.Contains(replies[0].Content, w) {
					t.Errorf("reprompt %v does not name %q", replies, w)
				}
			}
		})
	}
}

// SPEC §4: reprompt.max_attempts bounds the repair; then it escalates.
func TestSchemaViolationPersists(t *testing.T) {
	first := callsAnswer("chatcmpl-first", badUnit)
	second := callsAnswer("chatcmpl-second", call{"call_again", "get_current_weather", `{"location":"Boston, MA","unit":"rankine"}`})
	m := newMock(t, first, second)
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t))
	e := escalated(t, r)
	if e.Code != "schema_violation" {
		t.Errorf("code %q, want schema_violation (codes %v)", e.Code, e.Escalation.Codes)
	}
	expectHeaders(t, r, "escalated", 2)
	expectCount(t, m, 2)
	var found bool
	for _, a := range e.Escalation.Attempts {
		for _, f := range a.Findings {
			if f.Code == "schema_violation" && f.Pointer == "/unit" && f.Keyword == "enum" {
				found = true
			}
			if strings.Contains(f.Message, "kelvin") || strings.Contains(f.Message, "rankine") {
				t.Errorf("finding message quotes an argument value: %q", f.Message)
			}
		}
	}
	if !found {
		t.Errorf("no schema_violation finding at /unit with keyword enum: %+v", e.Escalation.Attempts)
	}
}

// SPEC §4: several bad calls in one batch are each repaired in place.
func TestMixedBatchKeepsIdsAndPositions(t *testing.T) {
	first := callsAnswer("chatcmpl-first", invented, badUnit, stock)
	fixedUnit := `{"location":"Boston, MA","unit":"fahrenheit"}`
	m := newMock(t,
		first,
		substitute("get_current_weather", weatherArgs, 0.9),
		// The model repeats the held stock call, as models do; only the
		// new call answers the rejected position.
		callsAnswer("chatcmpl-third", call{"call_x1", "get_stock_price", stockArgs}, call{"call_x2", "get_current_weather", fixedUnit}),
	)
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t))
	got := r.ok(t)
	expectCalls(t, callsOf(t, got, 0),
		gotCall{invented.ID, "get_current_weather", weatherArgs},
		gotCall{badUnit.ID, "get_current_weather", fixedUnit},
		gotCall{stock.ID, stock.Name, stock.Args})
	expectHeaders(t, r, "reprompted", 3)
	expectCount(t, m, 3)
	orig := m.body(t, 1)
	dec := checkRequery(t, orig, m.body(t, 2), true, replayed{[]byte(first.Body), 0})
	rep := checkRequery(t, orig, m.body(t, 3), false, replayed{[]byte(first.Body), 0})
	if len(dec) == 3 && (!strings.Contains(dec[0].Content, invented.Name) || !heldReply(dec[2].Content)) {
		t.Errorf("decision re-query replies %v", dec)
	}
	if len(rep) == 3 && (!strings.Contains(rep[1].Content, "/unit") || !heldReply(rep[2].Content)) {
		t.Errorf("reprompt replies %v", rep)
	}
}

// SPEC §3: with no catalog in the config, the request's own tools judge.
func TestZeroConfigCatalog(t *testing.T) {
	t.Run("valid call passes", func(t *testing.T) {
		m := newMock(t, mockReply{Body: string(readTestdata(t, "tool_call.json"))})
		g := startGate(t, config(m, "", ""))
		r := chat(t, g.URL, fixtureParams(t))
		r.ok(t)
		expectHeaders(t, r, "pass", 1)
		if v := r.Resp.Header.Get("X-Toolgate-Catalog-Version"); v != "request" {
			t.Errorf("catalog version %q, want request", v)
		}
	})
	t.Run("request schema enforced", func(t *testing.T) {
		first := callsAnswer("chatcmpl-first", badUnit)
		m := newMock(t, first, callsAnswer("chatcmpl-2", call{"call_n", "get_current_weather", weatherArgs}))
		g := startGate(t, config(m, "", ""))
		r := chat(t, g.URL, fixtureParams(t))
		expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{badUnit.ID, "get_current_weather", weatherArgs})
		expectHeaders(t, r, "reprompted", 2)
		checkRequery(t, m.body(t, 1), m.body(t, 2), false, replayed{[]byte(first.Body), 0})
	})
	t.Run("invented tool substituted from request tools", func(t *testing.T) {
		m := newMock(t, callsAnswer("chatcmpl-first", invented), substitute("get_current_weather", weatherArgs, 0.9))
		g := startGate(t, config(m, "", ""))
		r := chat(t, g.URL, fixtureParams(t))
		expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{invented.ID, "get_current_weather", weatherArgs})
		expectHeaders(t, r, "substituted", 2)
	})
}

// SPEC §3: catalog modes and unlisted tools.
func TestCatalogModes(t *testing.T) {
	weatherOnly := func(mode, unlisted string) string {
		w := fixtureTools(t)[0]
		return "catalog:\n  version: modes\n  mode: " + mode + "\n  unlisted: " + unlisted + "\n  tools:\n" +
			"    - name: " + w.Name + "\n      description: " + strconv.Quote(w.Description) + "\n      parameters: " + string(w.Parameters) + "\n"
	}
	onlyStock := func(t *testing.T) openai.ChatCompletionNewParams {
		p := fixtureParams(t)
		p.Tools = p.Tools[1:]
		return p
	}
	cases := []struct {
		name     string
		catalog  string
		params   func(*testing.T) openai.ChatCompletionNewParams
		answer   call
		wantCode string // "" means the call passes
	}{
		// A bad name goes to recovery; the model escalates, so the finding
		// itself is the escalation's code.
		{"config mode: a catalog tool the request did not offer is callable", weatherOnly("config", "allow"), onlyStock, weather, ""},
		{"config mode: an offered tool the catalog lacks is unknown", weatherOnly("config", "allow"), fixtureParams, stock, "unknown_tool"},
		{"intersect: unlisted allow judges by the request schema", weatherOnly("intersect", "allow"), fixtureParams, stock, ""},
		{"intersect: unlisted reject", weatherOnly("intersect", "reject"), fixtureParams, stock, "tool_not_in_catalog"},
		{"intersect: catalog tool not offered", weatherOnly("intersect", "allow"), onlyStock, weather, "tool_not_offered"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first := callsAnswer("chatcmpl-first", c.answer)
			m := newMock(t, first, escalate("no such tool here", "call "+c.answer.Name, c.answer.Name, 0.1))
			g := startGate(t, config(m, "", c.catalog))
			r := chat(t, g.URL, c.params(t))
			if c.wantCode == "" {
				expectCalls(t, callsOf(t, r.ok(t), 0), gotCall(c.answer))
				expectHeaders(t, r, "pass", 1)
			} else {
				e := escalated(t, r)
				if e.Code != c.wantCode {
					t.Errorf("code %q (codes %v), want %s", e.Code, e.Escalation.Codes, c.wantCode)
				}
				expectHeaders(t, r, "escalated", 2)
				expectCount(t, m, 2)
				replies := checkRequery(t, m.body(t, 1), m.body(t, 2), true, replayed{[]byte(first.Body), 0})
				if len(replies) == 1 && !strings.Contains(replies[0].Content, c.answer.Name) {
					t.Errorf("recovery prompt does not name %s", c.answer.Name)
				}
				return
			}
			expectCount(t, m, 1)
		})
	}
}

// SPEC §3: tool_choice none leaves nothing callable; a call anyway is
// escalated without asking again.
func TestToolChoiceNoneEscalates(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-first", weather))
	g := weatherGate(t, m, "")
	params := fixtureParams(t)
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
	r := chat(t, g.URL, params)
	e := escalated(t, r)
	if !hasCode(e, "no_tools_offered") {
		t.Errorf("codes %v lack no_tools_offered", e.Escalation.Codes)
	}
	expectHeaders(t, r, "escalated", 1)
	expectCount(t, m, 1)
}

// SPEC §4 rung 2, correction strategy: the model is told the real names and
// answers again; the new answer is validated.
func TestCorrectionStrategy(t *testing.T) {
	first := callsAnswer("chatcmpl-first", invented, stock)
	second := callsAnswer("chatcmpl-second", call{"call_fresh", "get_current_weather", weatherArgs})
	m := newMock(t, first, second)
	g := weatherGate(t, m, "recovery:\n  strategy: correction\n")
	r := chat(t, g.URL, fixtureParams(t))
	expectCalls(t, callsOf(t, r.ok(t), 0),
		gotCall{invented.ID, "get_current_weather", weatherArgs},
		gotCall{stock.ID, stock.Name, stock.Args})
	expectHeaders(t, r, "corrected", 2)
	expectCount(t, m, 2)
	replies := checkRequery(t, m.body(t, 1), m.body(t, 2), false, replayed{[]byte(first.Body), 0})
	if len(replies) != 2 {
		t.Fatalf("replies %v", replies)
	}
	msg := replies[0].Content
	iw, is := strings.Index(msg, `"get_current_weather"`), strings.Index(msg, `"get_stock_price"`)
	if !strings.Contains(msg, `"fetch_weather_report"`) || iw < 0 || is < iw {
		t.Errorf("correction reply must name the unknown tool and the sorted real ones: %q", msg)
	}
	if !heldReply(replies[1].Content) {
		t.Errorf("sibling reply %q", replies[1].Content)
	}

	t.Run("new answer still wrong escalates", func(t *testing.T) {
		m := newMock(t, first, callsAnswer("chatcmpl-second", call{"call_fresh", "still_not_real", "{}"}))
		g := weatherGate(t, m, "recovery:\n  strategy: correction\n")
		r := chat(t, g.URL, fixtureParams(t))
		e := escalated(t, r)
		if !hasCode(e, "unknown_tool") {
			t.Errorf("codes %v", e.Escalation.Codes)
		}
		expectCount(t, m, 2)
	})
}

// SPEC §2 mode shadow: validate and count, forward unchanged.
func TestShadowMode(t *testing.T) {
	cases := []struct {
		name    string
		answer  mockReply
		outcome string
	}{
		{"valid", mockReply{Body: string(readTestdata(t, "tool_call.json"))}, "shadow-pass"},
		{"invented tool", callsAnswer("chatcmpl-first", invented, stock), "shadow-would-recover"},
		{"bad arguments", callsAnswer("chatcmpl-first", badUnit), "shadow-would-reprompt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMock(t, c.answer)
			g := weatherGate(t, m, "mode: shadow\n")
			r := chat(t, g.URL, fixtureParams(t))
			r.ok(t)
			if string(r.Raw) != c.answer.Body {
				t.Errorf("shadow mode changed the answer:\n got  %s\n want %s", r.Raw, c.answer.Body)
			}
			expectHeaders(t, r, c.outcome, 1)
			expectCount(t, m, 1)
		})
	}
}

// SPEC §5 mode message: the agent gets a text for the user instead of a 422,
// except when it asked for structured output.
func TestMessageModeEscalation(t *testing.T) {
	first := callsAnswer("chatcmpl-first", invented, stock)
	script := func() *mockUpstream {
		return newMock(t, first, escalate("nothing reads weather reports", "weather report", "weather reports", 0.2))
	}
	t.Run("text answer", func(t *testing.T) {
		m := script()
		g := weatherGate(t, m, "escalation:\n  mode: message\n")
		r := chat(t, g.URL, fixtureParams(t))
		got := r.ok(t)
		id := r.Resp.Header.Get("X-Toolgate-Escalation-Id")
		if !strings.HasPrefix(id, "esc_") {
			t.Fatalf("X-Toolgate-Escalation-Id %q", id)
		}
		ch := got.Choices[0]
		if !strings.HasSuffix(ch.Message.Content, "[toolgate:"+id+"]") {
			t.Errorf("content %q does not end with the escalation marker", ch.Message.Content)
		}
		if ch.FinishReason != "stop" || len(ch.Message.ToolCalls) != 0 {
			t.Errorf("finish %q with %d tool calls, want stop and none", ch.FinishReason, len(ch.Message.ToolCalls))
		}
		var raw struct {
			Escalation *escalation `json:"toolgate_escalation"`
		}
		if err := json.Unmarshal([]byte(got.RawJSON()), &raw); err != nil || raw.Escalation == nil {
			t.Fatalf("no toolgate_escalation in %s", got.RawJSON())
		}
		if raw.Escalation.ID != id || raw.Escalation.Reason != "nothing reads weather reports" || raw.Escalation.RequestID != r.Resp.Header.Get("X-Toolgate-Request-Id") {
			t.Errorf("toolgate_escalation %+v", raw.Escalation)
		}
		expectHeaders(t, r, "escalated", 2)
		expectCount(t, m, 2)
		if len(g.Sink.records()) != 1 {
			t.Errorf("sinks got %d records", len(g.Sink.records()))
		}
	})
	t.Run("response_format forces error mode", func(t *testing.T) {
		m := script()
		g := weatherGate(t, m, "escalation:\n  mode: message\n")
		params := fixtureParams(t)
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		r := chat(t, g.URL, params)
		e := escalated(t, r)
		if e.Code != "unknown_tool" {
			t.Errorf("code %q", e.Code)
		}
		expectCount(t, m, 2)
		checkRequery(t, m.body(t, 1), m.body(t, 2), true, replayed{[]byte(first.Body), 0})
	})
}

// SPEC §4 rung 5: a valid call to a confirm tool needs a person.
func TestConfirmPolicy(t *testing.T) {
	refund := `    - name: issue_refund
      description: Refund part or all of an order.
      policy: confirm
      parameters: {"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["order_id","amount_cents"]}`
	args := `{"order_id":"ORD-77","amount_cents":1500}`
	m := newMock(t, callsAnswer("chatcmpl-first", call{"call_refund", "issue_refund", args}))
	g := weatherGate(t, m, "", refund)
	params := fixtureParams(t)
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Refund 15.00 on order ORD-77.")}
	params.Tools = append(params.Tools, sdkTool(t, "issue_refund", "Refund part or all of an order.",
		json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["order_id","amount_cents"]}`)))
	r := chat(t, g.URL, params)
	e := escalated(t, r)
	if e.Code != "confirmation_required" {
		t.Errorf("code %q", e.Code)
	}
	var c struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(e.Escalation.Call, &c); err != nil {
		t.Fatalf("call %s: %v", e.Escalation.Call, err)
	}
	if c.ID != "call_refund" || c.Type != "function" || c.Function.Name != "issue_refund" || !sameJSON(c.Function.Arguments, args) {
		t.Errorf("escalation call %s", e.Escalation.Call)
	}
	expectHeaders(t, r, "escalated", 1)
	expectCount(t, m, 1)
}

// SPEC §4 rung 4: a retryable failure of a re-query goes back as is, so the
// SDK retries the whole request; anything else escalates.
func TestRequeryUpstreamFailure(t *testing.T) {
	cases := []struct {
		name   string
		reply  mockReply
		status int
	}{
		{"429 with retry-after", mockReply{Status: 429, Header: map[string]string{"Retry-After": "7"},
			Body: openAIError("Rate limit reached for gpt-4o", "requests", "", "rate_limit_exceeded")}, 429},
		{"503", mockReply{Status: 503, Body: openAIError("The server is overloaded", "server_error", "", "")}, 503},
		{"500", mockReply{Status: 500, Body: openAIError("The server had an error", "server_error", "", "")}, 500},
		{"409", mockReply{Status: 409, Body: openAIError("conflict", "invalid_request_error", "", "")}, 409},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMock(t, callsAnswer("chatcmpl-first", invented), c.reply)
			g := weatherGate(t, m, "")
			r := chat(t, g.URL, fixtureParams(t))
			if r.APIErr == nil || r.APIErr.StatusCode != c.status {
				t.Fatalf("got %v, want status %d", r.Err, c.status)
			}
			body, _ := io.ReadAll(r.Resp.Body)
			if string(body) != c.reply.Body {
				t.Errorf("body %s, want the upstream's %s", body, c.reply.Body)
			}
			if got, want := r.Resp.Header.Get("Retry-After"), c.reply.Header["Retry-After"]; got != want {
				t.Errorf("retry-after %q, want %q", got, want)
			}
			if r.Resp.Header.Get("X-Toolgate-Escalation-Id") != "" {
				t.Errorf("a retryable failure is not an escalation")
			}
			expectCount(t, m, 2)
			if n := len(g.Sink.records()); n != 0 {
				t.Errorf("sinks got %d records, want none", n)
			}
		})
	}
	t.Run("400 escalates", func(t *testing.T) {
		m := newMock(t, callsAnswer("chatcmpl-first", invented),
			mockReply{Status: 400, Body: openAIError("This model's maximum context length is exceeded", "invalid_request_error", "messages", "context_length_exceeded")})
		g := weatherGate(t, m, "")
		r := chat(t, g.URL, fixtureParams(t))
		e := escalated(t, r)
		if e.Code != "unknown_tool" {
			t.Errorf("code %q", e.Code)
		}
		var sawStatus bool
		for _, a := range e.Escalation.Attempts {
			if a.Kind == "upstream_error" && a.Status == 400 {
				sawStatus = true
			}
		}
		if !sawStatus {
			t.Errorf("attempts %+v lack the upstream_error with status 400", e.Escalation.Attempts)
		}
		expectHeaders(t, r, "escalated", 2)
		expectCount(t, m, 2)
	})
}

// SPEC §4: all re-queries of one request fit in recovery.deadline.
func TestRecoveryDeadline(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-first", invented),
		mockReply{Delay: 3 * time.Second, Body: substitute("get_current_weather", weatherArgs, 0.9).Body})
	g := weatherGate(t, m, "recovery:\n  deadline: 300ms\n")
	start := time.Now()
	r := chat(t, g.URL, fixtureParams(t))
	took := time.Since(start)
	e := escalated(t, r)
	if !hasCode(e, "deadline") {
		t.Errorf("codes %v lack deadline", e.Escalation.Codes)
	}
	if took > 2*time.Second {
		t.Errorf("took %v: the deadline did not cut the re-query", took)
	}
	expectHeaders(t, r, "escalated", 2)
	expectCount(t, m, 2)
}

// SPEC §4: a call cut off by max_tokens is never re-asked.
func TestTruncatedCallEscalates(t *testing.T) {
	m := newMock(t, truncatedAnswer())
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t))
	e := escalated(t, r)
	if e.Code != "truncated" {
		t.Errorf("code %q (codes %v), want truncated", e.Code, e.Escalation.Codes)
	}
	expectHeaders(t, r, "escalated", 1)
	expectCount(t, m, 1)
}

// SPEC §4: every choice is judged; the re-query for one choice asks for one.
func TestNChoicesOneBad(t *testing.T) {
	first := mockReply{Body: answerOf("chatcmpl-first", 80, 30,
		choice{Calls: []call{weather}},
		choice{Calls: []call{invented}})}
	m := newMock(t, first, substitute("get_stock_price", stockArgs, 0.85))
	g := weatherGate(t, m, "")
	params := fixtureParams(t)
	params.N = openai.Int(2)
	r := chat(t, g.URL, params)
	got := r.ok(t)
	if len(got.Choices) != 2 {
		t.Fatalf("%d choices", len(got.Choices))
	}
	expectCalls(t, callsOf(t, got, 0), gotCall(weather))
	expectCalls(t, callsOf(t, got, 1), gotCall{invented.ID, "get_stock_price", stockArgs})
	expectHeaders(t, r, "substituted", 2)
	expectCount(t, m, 2)
	rq := m.body(t, 2)
	var q struct {
		N *int `json:"n"`
	}
	_ = json.Unmarshal(rq, &q)
	if q.N == nil || *q.N != 1 {
		t.Errorf("re-query n = %v, want 1", q.N)
	}
	checkRequery(t, m.body(t, 1), rq, true, replayed{[]byte(first.Body), 1})
}

// SPEC §1: anything but the validated routes passes byte for byte.
func TestPassThroughModels(t *testing.T) {
	list := `{"object":"list","data":[{"id":"gpt-4o-2024-08-06","object":"model","created":1722814719,"owned_by":"system"}]}` + "\n"
	notFound := openAIError("The model 'nope' does not exist", "invalid_request_error", "model", "model_not_found")
	m := newMockFunc(t, func(n int, r *mockRequest) mockReply {
		if r.Path == "/v1/models" {
			return mockReply{Body: list, Header: map[string]string{"Openai-Processing-Ms": "12", "X-Request-Id": "req_models", "Openai-Version": "2020-10-01"}}
		}
		return mockReply{Status: 404, Body: notFound, Header: map[string]string{"X-Request-Id": "req_404"}}
	})
	base, _ := startToolgate(t, config(m, "", catalogYAML(t, "")))
	client := newClient(base)

	var raw *http.Response
	if err := client.Get(context.Background(), "models", nil, &raw); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(raw.Body)
	raw.Body.Close()
	if raw.StatusCode != 200 || string(body) != list {
		t.Errorf("status %d body %q", raw.StatusCode, body)
	}
	for k, v := range map[string]string{"Openai-Processing-Ms": "12", "X-Request-Id": "req_models", "Openai-Version": "2020-10-01", "Content-Type": "application/json"} {
		if raw.Header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, raw.Header.Get(k), v)
		}
	}
	page, err := client.Models.List(context.Background())
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "gpt-4o-2024-08-06" {
		t.Errorf("SDK list: %v %+v", err, page)
	}

	_, err = client.Models.Get(context.Background(), "nope")
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Code != "model_not_found" {
		t.Fatalf("want the upstream's 404, got %v", err)
	}
	if ae.Response.Header.Get("X-Request-Id") != "req_404" {
		t.Errorf("404 headers not passed through")
	}
	rs := m.requests()
	if len(rs) != 3 || rs[0].Method != "GET" || rs[0].Path != "/v1/models" || rs[2].Path != "/v1/models/nope" {
		t.Errorf("upstream saw %+v", rs)
	}
	if rs[0].Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("Authorization not forwarded on pass-through")
	}
}

// SPEC §1: an upstream error on the first call reaches the SDK as the
// provider sent it.
func TestUpstreamErrorPassedThrough(t *testing.T) {
	reply := mockReply{Status: 500, Body: openAIError("The server had an error while processing your request.", "server_error", "", ""),
		Header: map[string]string{"X-Request-Id": "req_boom", "Retry-After": "3"}}
	m := newMock(t, reply)
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t))
	if r.APIErr == nil || r.APIErr.StatusCode != 500 {
		t.Fatalf("got %v, want 500", r.Err)
	}
	body, _ := io.ReadAll(r.Resp.Body)
	if string(body) != reply.Body {
		t.Errorf("body %s", body)
	}
	if r.Resp.Header.Get("X-Request-Id") != "req_boom" || r.Resp.Header.Get("Retry-After") != "3" {
		t.Errorf("headers not passed through: %v", r.Resp.Header)
	}
	if r.Resp.Header.Get("X-Toolgate-Request-Id") == "" {
		t.Errorf("X-Toolgate-Request-Id missing")
	}
	expectCount(t, m, 1)
}

// SPEC §1: route matching ignores the query string.
func TestRouteWithQueryStringValidated(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-first", invented), substitute("get_current_weather", weatherArgs, 0.9))
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t), option.WithQuery("foo", "1"))
	expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{invented.ID, "get_current_weather", weatherArgs})
	expectHeaders(t, r, "substituted", 2)
	for _, rq := range m.requests() {
		if rq.Path != "/v1/chat/completions" || rq.RawQuery != "foo=1" {
			t.Errorf("upstream saw %s?%s", rq.Path, rq.RawQuery)
		}
	}
}

// SPEC §1: a client accepting gzip still gets validated answers.
func TestGzipClientStillValidated(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-first", invented), substitute("get_current_weather", weatherArgs, 0.9))
	m.gzip = true
	g := weatherGate(t, m, "")
	// Set by hand, Accept-Encoding also turns off Go's transparent
	// decompression: the SDK reads exactly what toolgate sends.
	r := chat(t, g.URL, fixtureParams(t), option.WithHeader("Accept-Encoding", "gzip"))
	expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{invented.ID, "get_current_weather", weatherArgs})
	expectHeaders(t, r, "substituted", 2)
	for _, rq := range m.requests() {
		if !strings.Contains(rq.Header.Get("Accept-Encoding"), "gzip") {
			t.Errorf("upstream was not asked for gzip, so this test proves nothing")
		}
	}
}

// SPEC §1: toolgate's own header namespace is not forwarded; the rest is.
func TestInboundHeaders(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-first", invented), substitute("get_current_weather", weatherArgs, 0.9))
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t),
		option.WithHeader("X-Toolgate-Foo", "bar"),
		option.WithHeader("X-Toolgate-Outcome", "pass"),
		option.WithOrganization("org-e2e"),
		option.WithHeader("OpenAI-Beta", "assistants=v2"))
	r.ok(t)
	for _, rq := range m.requests() {
		for k := range rq.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-toolgate-") {
				t.Errorf("request #%d forwarded %s", rq.N, k)
			}
		}
		if rq.Header.Get("Openai-Organization") != "org-e2e" || rq.Header.Get("Openai-Beta") != "assistants=v2" ||
			rq.Header.Get("Authorization") != "Bearer sk-test" {
			t.Errorf("request #%d lost client headers: %v", rq.N, rq.Header)
		}
	}
}

// SPEC §2: api_key_env and api_key_mode.
func TestUpstreamKey(t *testing.T) {
	t.Setenv("TG_E2E_UPSTREAM_KEY", "sk-upstream")
	cases := []struct {
		name, mode string
		opts       []option.RequestOption
		want       string
	}{
		{"replace overrides the client's key", "replace", nil, "Bearer sk-upstream"},
		{"if_missing keeps the client's key", "if_missing", nil, "Bearer sk-test"},
		{"if_missing fills in a missing key", "if_missing", []option.RequestOption{option.WithHeaderDel("Authorization")}, "Bearer sk-upstream"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMock(t, callsAnswer("chatcmpl-first", invented), substitute("get_current_weather", weatherArgs, 0.9))
			g := startGate(t, config(m, "api_key_env: TG_E2E_UPSTREAM_KEY\napi_key_mode: "+c.mode, catalogYAML(t, "")))
			r := chat(t, g.URL, fixtureParams(t), c.opts...)
			r.ok(t)
			for _, rq := range m.requests() {
				if got := rq.Header.Get("Authorization"); got != c.want {
					t.Errorf("request #%d Authorization %q, want %q", rq.N, got, c.want)
				}
			}
			expectCount(t, m, 2)
		})
	}
}

// SPEC §2 inbound_auth: clients need a token, which never reaches the
// upstream.
func TestInboundAuth(t *testing.T) {
	t.Setenv("TG_E2E_TOKENS", "tok-a,tok-b")
	t.Setenv("TG_E2E_UPSTREAM_KEY", "sk-upstream")
	m := newMock(t, mockReply{Body: string(readTestdata(t, "tool_call.json"))})
	g := startGate(t, config(m, "api_key_env: TG_E2E_UPSTREAM_KEY", "inbound_auth:\n  tokens_env: TG_E2E_TOKENS\n"+catalogYAML(t, "")))

	for _, key := range []string{"", "tok-c"} {
		var opts []option.RequestOption
		if key == "" {
			opts = append(opts, option.WithHeaderDel("Authorization"))
		} else {
			opts = append(opts, option.WithAPIKey(key))
		}
		r := chat(t, g.URL, fixtureParams(t), opts...)
		if r.APIErr == nil || r.APIErr.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: got %v, want 401", key, r.Err)
		}
	}
	expectCount(t, m, 0)

	r := chat(t, g.URL, fixtureParams(t), option.WithAPIKey("tok-b"))
	r.ok(t)
	expectCount(t, m, 1)
	if got := m.requests()[0].Header.Get("Authorization"); got != "Bearer sk-upstream" {
		t.Errorf("upstream Authorization %q, want toolgate's key", got)
	}
	for _, v := range m.requests()[0].Header {
		for _, s := range v {
			if strings.Contains(s, "tok-b") {
				t.Errorf("the inbound token reached the upstream")
			}
		}
	}
}

// SPEC §2 limits.max_request_bytes.
func TestRequestTooLarge(t *testing.T) {
	m := newMock(t)
	g := weatherGate(t, m, "limits:\n  max_request_bytes: 4096\n")
	params := fixtureParams(t)
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("weather? ", 1000))}
	r := chat(t, g.URL, params)
	if r.APIErr == nil || r.APIErr.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("got %v, want 413", r.Err)
	}
	expectCount(t, m, 0)
}

// SPEC §6: usage of every upstream call, and toolgate's own time.
func TestUsageAndOverheadHeaders(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-first", invented), substitute("get_current_weather", weatherArgs, 0.9))
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t))
	got := r.ok(t)
	var u struct {
		Input  *int64 `json:"input_tokens"`
		Output *int64 `json:"output_tokens"`
	}
	raw := r.Resp.Header.Get("X-Toolgate-Usage")
	if err := json.Unmarshal([]byte(raw), &u); err != nil || u.Input == nil || u.Output == nil {
		t.Fatalf("X-Toolgate-Usage %q: %v", raw, err)
	}
	// 50/10 for the answer, 60/20 for the decision.
	if *u.Input != 110 || *u.Output != 30 {
		t.Errorf("usage %s, want input 110 output 30", raw)
	}
	if got.Usage.PromptTokens != 50 || got.Usage.CompletionTokens != 10 {
		t.Errorf("body usage %+v must stay the returned answer's own", got.Usage)
	}
	ms := r.Resp.Header.Get("X-Toolgate-Overhead-Ms")
	if !regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`).MatchString(ms) {
		t.Fatalf("X-Toolgate-Overhead-Ms %q is not a decimal", ms)
	}
	if v, err := strconv.ParseFloat(ms, 64); err != nil || v < 0 || v > 5000 {
		t.Errorf("X-Toolgate-Overhead-Ms %q", ms)
	}
}

// SPEC §4: an agent loop. The second turn carries the first turn's call and
// its result; a repair must keep that history intact and acceptable to the
// provider, and provenance reads the tool result.
func TestAgentLoopMultiTurn(t *testing.T) {
	refund := `    - name: issue_refund
      description: Refund part or all of an order.
      provenance: [/order_id]
      parameters: {"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["order_id","amount_cents"]}
    - name: list_orders
      description: List the customer's recent orders.
      parameters: {"type":"object","properties":{}}`
	turn2 := callsAnswer("chatcmpl-t2", call{"call_refund", "issue_refund", `{"order_id":"ORD-0001","amount_cents":4200}`})
	m := newMock(t,
		callsAnswer("chatcmpl-t1", call{"call_list", "list_orders", `{}`}),
		turn2,
		callsAnswer("chatcmpl-t2b", call{"call_refund2", "issue_refund", `{"order_id":"ORD-5521","amount_cents":4200}`}),
	)
	g := weatherGate(t, m, "", refund)
	params := fixtureParams(t)
	params.Messages = []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are a support agent."),
		openai.UserMessage("Please refund my most recent order."),
	}
	params.Tools = append(params.Tools,
		sdkTool(t, "issue_refund", "Refund part or all of an order.", json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["order_id","amount_cents"]}`)),
		sdkTool(t, "list_orders", "List the customer's recent orders.", json.RawMessage(`{"type":"object","properties":{}}`)))

	r1 := chat(t, g.URL, params)
	c1 := r1.ok(t)
	expectHeaders(t, r1, "pass", 1)
	msg := c1.Choices[0].Message
	params.Messages = append(params.Messages, msg.ToParam(),
		openai.ToolMessage(`{"orders":[{"id":"ORD-5521","total_cents":4200}]}`, msg.ToolCalls[0].ID))

	r2 := chat(t, g.URL, params)
	expectCalls(t, callsOf(t, r2.ok(t), 0), gotCall{"call_refund", "issue_refund", `{"order_id":"ORD-5521","amount_cents":4200}`})
	expectHeaders(t, r2, "reprompted", 2)
	expectCount(t, m, 3)
	if !bytes.Equal(m.body(t, 2), r2.Sent) {
		t.Errorf("second turn not forwarded as sent")
	}
	replies := checkRequery(t, m.body(t, 2), m.body(t, 3), false, replayed{[]byte(turn2.Body), 0})
	if len(replies) != 1 || !strings.Contains(replies[0].Content, "/order_id") {
		t.Errorf("provenance reprompt %v", replies)
	}
}

// SPEC §4: recovery.max_attempts bounds the correction chain; each round
// replays every earlier exchange in order.
func TestCorrectionChainHistory(t *testing.T) {
	first := callsAnswer("chatcmpl-1", invented)
	second := callsAnswer("chatcmpl-2", call{"call_2", "weather_now", `{"location":"Boston, MA"}`})
	m := newMock(t, first, second, callsAnswer("chatcmpl-3", call{"call_3", "get_current_weather", weatherArgs}))
	g := weatherGate(t, m, "recovery:\n  strategy: correction\n  max_attempts: 2\n")
	r := chat(t, g.URL, fixtureParams(t))
	expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{invented.ID, "get_current_weather", weatherArgs})
	expectHeaders(t, r, "corrected", 3)
	expectCount(t, m, 3)
	orig := m.body(t, 1)
	checkRequery(t, orig, m.body(t, 2), false, replayed{[]byte(first.Body), 0})
	replies := checkRequery(t, orig, m.body(t, 3), false, replayed{[]byte(first.Body), 0}, replayed{[]byte(second.Body), 0})
	if len(replies) == 2 && !strings.Contains(replies[1].Content, `"weather_now"`) {
		t.Errorf("second correction reply %q does not name the second invented tool", replies[1].Content)
	}
}

// SPEC §4 rung 4: with no recovery budget an invented tool escalates at
// once.
func TestRecoveryBudgetZero(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-1", invented))
	g := weatherGate(t, m, "recovery:\n  max_attempts: 0\n")
	r := chat(t, g.URL, fixtureParams(t))
	e := escalated(t, r)
	if !hasCode(e, "unknown_tool") || !hasCode(e, "budget") {
		t.Errorf("codes %v, want unknown_tool and budget", e.Escalation.Codes)
	}
	expectHeaders(t, r, "escalated", 1)
	expectCount(t, m, 1)
}

// SPEC §4 rung 6: the virtual "no tool fits" exit.
func TestAbstain(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-1", call{"call_abstain", "toolgate_no_suitable_tool", `{"reason":"No tool here can book a restaurant."}`}))
	g := weatherGate(t, m, "abstain:\n  enabled: true\n")
	r := chat(t, g.URL, fixtureParams(t))
	if names := chatToolNames(m.body(t, 1)); len(names) != 3 || names[2] != "toolgate_no_suitable_tool" {
		t.Errorf("the abstain tool was not appended last to the upstream request: %s", m.body(t, 1))
	}
	got := r.ok(t)
	ch := got.Choices[0]
	if ch.Message.Content != "No tool here can book a restaurant." || len(ch.Message.ToolCalls) != 0 || ch.FinishReason != "stop" {
		t.Errorf("abstention answer %+v", ch)
	}
	expectHeaders(t, r, "abstained", 1)
	expectCount(t, m, 1)
}

// SPEC §4 rung 4 and §6: a re-query that fails retryably is passed through;
// the request was not a pass and must not be reported or counted as one.
func TestRequeryFailureIsNotAPass(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-first", invented),
		mockReply{Status: 429, Header: map[string]string{"Retry-After": "7"}, Body: openAIError("Rate limit reached", "requests", "", "rate_limit_exceeded")})
	g := weatherGate(t, m, "")
	r := chat(t, g.URL, fixtureParams(t))
	if r.Resp.StatusCode != 429 {
		t.Fatalf("status %d", r.Resp.StatusCode)
	}
	if got := r.Resp.Header.Get("X-Toolgate-Outcome"); got == "pass" {
		t.Errorf("X-Toolgate-Outcome = pass on a hallucinated answer that was never repaired")
	}
	if n := testutil.ToFloat64(g.App.Metrics.Requests.WithLabelValues("chat", "pass")); n != 0 {
		t.Errorf("toolgate_requests_total{outcome=\"pass\"} = %v, want 0", n)
	}
}

// SPEC §4 rung 4: a timeout is one of the retryable re-query failures, "so
// the SDK retries". The Go SDK obeys x-should-retry before the status.
func TestRequeryTimeoutLetsTheSDKRetry(t *testing.T) {
	m := newMock(t, callsAnswer("chatcmpl-first", invented),
		mockReply{Delay: 2 * time.Second, Body: substitute("get_current_weather", weatherArgs, 0.9).Body})
	g := startGate(t, config(m, "first_byte_timeout: 200ms", catalogYAML(t, "")))
	r := chat(t, g.URL, fixtureParams(t))
	if r.APIErr == nil || r.APIErr.StatusCode < 500 {
		t.Fatalf("got %v, want a retryable 5xx", r.Err)
	}
	if got := r.Resp.Header.Get("X-Should-Retry"); got == "false" {
		t.Errorf("x-should-retry: false on a retryable re-query timeout")
	}
	if n := len(g.Sink.records()); n != 0 {
		t.Errorf("a retryable failure reached the sinks")
	}
}
