package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/validate"
)

// ladderConfig has one tool of each kind the ladder treats differently: two
// plain substitutable tools, a confirm tool and a tool that may not be the
// target of a substitution.
const ladderConfig = `
upstreams:
  - url: https://api.example.com
catalog:
  tools:
    - name: get_weather
      description: Current weather for a city.
      parameters:
        type: object
        properties:
          city: {type: string}
          unit: {type: string, enum: [c, f]}
        required: [city]
        additionalProperties: false
    - name: search_docs
      description: Search the help center articles.
      parameters:
        type: object
        properties:
          query: {type: string}
        required: [query]
    - name: issue_refund
      description: Refund part or all of an order.
      policy: confirm
      substitutable: true
      parameters:
        type: object
        properties:
          order_id: {type: string}
          amount_cents: {type: integer}
        required: [order_id, amount_cents]
    - name: delete_account
      description: Permanently delete a user account.
      substitutable: false
      parameters:
        type: object
        properties:
          user_id: {type: string}
        required: [user_id]
`

var ladderTools = []string{"get_weather", "search_docs", "issue_refund", "delete_account"}

func ladderSnapshot(t testing.TB) *catalog.Snapshot {
	t.Helper()
	cfg, err := catalog.Parse([]byte(ladderConfig), "test.yaml")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return snap
}

func ladderEffective(t testing.TB, choice catalog.ToolChoice) *catalog.Effective {
	t.Helper()
	offered := make([]catalog.Offered, len(ladderTools))
	for i, n := range ladderTools {
		offered[i] = catalog.Offered{Name: n}
	}
	return ladderSnapshot(t).Effective(offered, choice, true)
}

// askStep is one scripted answer of the fake upstream.
type askStep struct {
	turn *Turn
	err  error
	// block waits until the ladder's context ends and returns its error, as
	// a real upstream call does when the deadline passes or the client goes.
	block bool
}

// fakeAsker plays the upstream: it records every re-query and answers from a
// script, so a test can check both what the ladder asked and what it did
// with the answer.
type fakeAsker struct {
	mu      sync.Mutex
	steps   []askStep
	queries []*Query
	extra   int
	// started is closed on the first blocking step, so a test can cancel
	// the parent context while the ladder waits.
	started chan struct{}
}

func (f *fakeAsker) Ask(ctx context.Context, q *Query) (*Turn, error) {
	f.mu.Lock()
	cp := *q
	cp.History = append([]Round(nil), q.History...)
	f.queries = append(f.queries, &cp)
	if len(f.steps) == 0 {
		f.extra++
		f.mu.Unlock()
		return nil, errors.New("fake asker: no scripted answer left")
	}
	s := f.steps[0]
	f.steps = f.steps[1:]
	f.mu.Unlock()
	if s.block {
		if f.started != nil {
			close(f.started)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.turn, s.err
}

func baseSettings() Settings {
	return Settings{
		Strategy:         catalog.StrategyDecision,
		RecoveryAttempts: 1,
		RepromptAttempts: 1,
		Threshold:        0.8,
		Shortlist:        20,
		Deadline:         5 * time.Second,
		Truncated:        catalog.TruncatedEscalate,
	}
}

type ladderRun struct {
	res   *Result
	err   error
	asker *fakeAsker
	eff   *catalog.Effective
}

// runLadder judges turn with the default settings changed by mod, answering
// re-queries from steps. It fails the test if a scripted answer was left
// unused or the ladder asked more often than scripted.
func runLadder(t *testing.T, turn *Turn, mod func(*Settings), steps ...askStep) ladderRun {
	t.Helper()
	return runLadderCtx(t, context.Background(), turn, ladderEffective(t, catalog.ToolChoice{}), mod, false, steps...)
}

func runLadderCtx(t *testing.T, ctx context.Context, turn *Turn, eff *catalog.Effective, mod func(*Settings), stateful bool, steps ...askStep) ladderRun {
	t.Helper()
	s := baseSettings()
	if mod != nil {
		mod(&s)
	}
	a := &fakeAsker{steps: steps}
	vcx := &validate.Context{Effective: eff, Evidence: validate.NewCorpus([]string{"weather in Paris please"})}
	res, err := Run(ctx, &Input{
		Turn:      turn,
		Judge:     localJudge(vcx),
		Effective: eff,
		Settings:  &s,
		Ask:       a,
		Stateful:  stateful,
		UserText:  "weather in Paris please",
	})
	if len(a.steps) != 0 {
		t.Errorf("%d scripted answers were never asked for", len(a.steps))
	}
	if a.extra != 0 {
		t.Errorf("the ladder asked %d more times than scripted", a.extra)
	}
	if res == nil {
		t.Fatal("Run returned no result")
	}
	return ladderRun{res: res, err: err, asker: a, eff: eff}
}

func mkCall(id, name, args string) validate.ToolCall {
	return validate.ToolCall{ID: id, Name: name, Args: []byte(args), Kind: validate.Function}
}

func turnOf(calls ...validate.ToolCall) *Turn {
	return &Turn{Calls: calls, Raw: "raw"}
}

func textTurn(text string) *Turn { return &Turn{Text: text} }

func substitute(tool, args string, conf float64) *Turn {
	return textTurn(fmt.Sprintf(`{"decision":"substitute","corrected_tool_call":{"tool_name":%q,"arguments":%s},"escalation":null,"confidence":%v}`, tool, args, conf))
}

func escalateDecision(reason, intent, missing string, conf float64) *Turn {
	return textTurn(fmt.Sprintf(`{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":%q,"original_intent":%q,"missing_capability":%q},"confidence":%v}`, reason, intent, missing, conf))
}

var (
	validWeather = mkCall("call_w", "get_weather", `{"city":"Paris"}`)
	validSearch  = mkCall("call_s", "search_docs", `{"query":"refund policy"}`)
	invented     = mkCall("call_x", "weather_lookup", `{"location":"Paris"}`)
	badArgs      = mkCall("call_b", "get_weather", `{"city":12}`)
)

// expectEscalation checks the common shape of an escalation.
func expectEscalation(t *testing.T, r ladderRun, label string) *Escalation {
	t.Helper()
	if r.err != nil {
		t.Fatalf("Run error: %v", r.err)
	}
	e := r.res.Escalation
	if e == nil {
		t.Fatalf("no escalation; outcome %q", r.res.Outcome)
	}
	if r.res.Outcome != Escalated && r.res.Outcome != ShadowWouldEscalate {
		t.Errorf("Outcome = %q with an escalation", r.res.Outcome)
	}
	if e.Label != label {
		t.Errorf("Label = %q, want %q (codes %v, reason %q)", e.Label, label, e.Codes, e.Reason)
	}
	if len(e.Codes) == 0 || e.Codes[0] != label || e.Code() != label {
		t.Errorf("Codes = %v, want %q first", e.Codes, label)
	}
	if !regexp.MustCompile(`^esc_[0-9a-f]{24}$`).MatchString(e.ID) {
		t.Errorf("ID = %q", e.ID)
	}
	if e.Reason == "" {
		t.Error("empty Reason")
	}
	if e.Time.IsZero() {
		t.Error("zero Time")
	}
	if len(e.Attempts) == 0 {
		t.Error("no attempts recorded")
	}
	if r.res.Upstream != nil {
		t.Errorf("Upstream set alongside an escalation: %v", r.res.Upstream)
	}
	return e
}

func attemptKinds(e *Escalation) []string {
	out := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		out[i] = a.Kind
	}
	return out
}

func TestRunPassesWithoutAsking(t *testing.T) {
	tests := []struct {
		name string
		turn *Turn
		mod  func(*Settings)
		want Outcome
	}{
		{"all valid", turnOf(validWeather, validSearch), nil, Pass},
		{"no calls", turnOf(), nil, Pass},
		{"only other kinds", turnOf(validate.ToolCall{ID: "ws_1", Name: "web_search", Kind: validate.Other},
			validate.ToolCall{ID: "mcp_1", Name: "anything", Args: []byte("\x00"), Kind: validate.Other}), nil, Pass},
		{"truncated with truncated: pass", &Turn{Calls: []validate.ToolCall{invented, badArgs}, Stop: neutral.StopMaxTokens},
			func(s *Settings) { s.Truncated = catalog.TruncatedPass }, Pass},
		{"shadow all valid", turnOf(validWeather), func(s *Settings) { s.Shadow = true }, ShadowPass},
		{"shadow only other kinds", turnOf(validate.ToolCall{Kind: validate.Other}), func(s *Settings) { s.Shadow = true }, ShadowPass},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runLadder(t, tc.turn, tc.mod)
			if r.err != nil || r.res.Escalation != nil || r.res.Upstream != nil {
				t.Fatalf("err %v, escalation %+v, upstream %v", r.err, r.res.Escalation, r.res.Upstream)
			}
			if r.res.Outcome != tc.want {
				t.Errorf("Outcome = %q, want %q", r.res.Outcome, tc.want)
			}
			if len(r.asker.queries) != 0 {
				t.Errorf("asked %d times", len(r.asker.queries))
			}
			if !reflect.DeepEqual(r.res.Calls, tc.turn.Calls) && len(tc.turn.Calls) > 0 {
				t.Errorf("Calls changed: %+v", r.res.Calls)
			}
			for i, c := range r.res.Changed {
				if c {
					t.Errorf("Changed[%d] set", i)
				}
			}
			if len(r.res.Reports) != len(tc.turn.Calls) || len(r.res.Changed) != len(tc.turn.Calls) {
				t.Errorf("Reports %d, Changed %d for %d calls", len(r.res.Reports), len(r.res.Changed), len(tc.turn.Calls))
			}
		})
	}
}

func TestRunAbstain(t *testing.T) {
	const abstain = "toolgate_no_suitable_tool"
	tests := []struct {
		name   string
		calls  []validate.ToolCall
		shadow bool
		want   Outcome
		reason string
	}{
		{"with a reason", []validate.ToolCall{mkCall("a1", abstain, `{"reason":"No tool can book flights."}`)}, false, Abstained, "No tool can book flights."},
		{"beside other calls", []validate.ToolCall{validWeather, mkCall("a1", abstain, `{"reason":"Only half of it is possible."}`)}, false, Abstained, "Only half of it is possible."},
		{"without a reason", []validate.ToolCall{mkCall("a1", abstain, `{}`)}, false, Abstained, "No available tool fits this request."},
		{"blank reason", []validate.ToolCall{mkCall("a1", abstain, `{"reason":"  "}`)}, false, Abstained, "No available tool fits this request."},
		{"malformed arguments", []validate.ToolCall{mkCall("a1", abstain, `{"reason":`)}, false, Abstained, "No available tool fits this request."},
		{"custom call of that name is not the exit", []validate.ToolCall{{ID: "a1", Name: abstain, Kind: validate.Custom}}, true, ShadowWouldRecover, ""},
		{"never in shadow mode", []validate.ToolCall{mkCall("a1", abstain, `{"reason":"x"}`)}, true, ShadowWouldRecover, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runLadder(t, turnOf(tc.calls...), func(s *Settings) {
				s.AbstainTool = abstain
				s.Shadow = tc.shadow
			})
			if r.err != nil || r.res.Escalation != nil {
				t.Fatalf("err %v escalation %+v", r.err, r.res.Escalation)
			}
			if r.res.Outcome != tc.want || r.res.AbstainReason != tc.reason {
				t.Errorf("Outcome %q reason %q, want %q %q", r.res.Outcome, r.res.AbstainReason, tc.want, tc.reason)
			}
			if len(r.asker.queries) != 0 {
				t.Errorf("asked %d times", len(r.asker.queries))
			}
		})
	}
}

func TestRunTruncated(t *testing.T) {
	turn := &Turn{Calls: []validate.ToolCall{validWeather, mkCall("call_t", "get_weather", `{"ci`)}, Stop: neutral.StopMaxTokens}
	r := runLadder(t, turn, nil)
	e := expectEscalation(t, r, string(validate.Truncated))
	if len(r.asker.queries) != 0 {
		t.Errorf("a truncated answer was re-asked %d times", len(r.asker.queries))
	}
	for i, v := range r.res.Reports {
		last := v.Findings[len(v.Findings)-1]
		if last.Code != validate.Truncated {
			t.Errorf("report %d lacks the truncated finding: %+v", i, v.Findings)
		}
	}
	for _, c := range e.Codes {
		if c == string(validate.UnknownTool) {
			t.Error("a truncated call must not count as a hallucination")
		}
	}
}

func TestRunNoToolsOffered(t *testing.T) {
	eff := ladderEffective(t, catalog.ToolChoice{Kind: catalog.ChoiceNone})
	if eff.Len() != 0 {
		t.Fatalf("tool_choice none left %d tools", eff.Len())
	}
	for _, tc := range []struct {
		name string
		turn *Turn
	}{
		{"real tool", turnOf(validWeather)},
		{"invented tool", turnOf(invented)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runLadderCtx(t, context.Background(), tc.turn, eff, nil, false)
			expectEscalation(t, r, "no_tools_offered")
			if len(r.asker.queries) != 0 {
				t.Errorf("asked %d times", len(r.asker.queries))
			}
		})
	}
}

func TestRunDecisionSubstitutes(t *testing.T) {
	turn := turnOf(validWeather, invented, validSearch)
	answer := substitute("get_weather", `{"city":"Paris","unit":"c"}`, 0.93)
	r := runLadder(t, turn, nil, askStep{turn: answer})
	if r.err != nil || r.res.Escalation != nil {
		t.Fatalf("err %v escalation %+v", r.err, r.res.Escalation)
	}
	if r.res.Outcome != Substituted {
		t.Fatalf("Outcome = %q", r.res.Outcome)
	}

	t.Run("result", func(t *testing.T) {
		want := []validate.ToolCall{validWeather,
			{ID: "call_x", Name: "get_weather", Args: []byte(`{"city":"Paris","unit":"c"}`), Kind: validate.Function}, validSearch}
		if !reflect.DeepEqual(r.res.Calls, want) {
			t.Errorf("Calls = %+v\nwant %+v", r.res.Calls, want)
		}
		if !reflect.DeepEqual(r.res.Changed, []bool{false, true, false}) {
			t.Errorf("Changed = %v", r.res.Changed)
		}
		if r.res.Original[1].Name != "weather_lookup" {
			t.Errorf("Original was modified: %+v", r.res.Original[1])
		}
		if c := r.res.Reports[1].Codes(); len(c) != 1 || c[0] != validate.UnknownTool {
			t.Errorf("Reports[1] should judge the original call: %v", c)
		}
		if len(r.res.Turns) != 1 || r.res.Turns[0] != answer {
			t.Errorf("Turns = %v", r.res.Turns)
		}
		if len(r.res.Events) != 1 {
			t.Fatalf("Events = %+v", r.res.Events)
		}
		ev := r.res.Events[0]
		if ev.Strategy != "decision" || ev.Result != "substituted" || ev.Name != "weather_lookup" ||
			ev.Suggested != "get_weather" || ev.Confidence != 0.93 || ev.ArgsBytes != len(invented.Args) {
			t.Errorf("Event = %+v", ev)
		}
	})

	t.Run("query", func(t *testing.T) {
		if len(r.asker.queries) != 1 {
			t.Fatalf("asked %d times", len(r.asker.queries))
		}
		q := r.asker.queries[0]
		if q.Kind != KindRecovery || !q.Decision {
			t.Errorf("Kind %q Decision %v", q.Kind, q.Decision)
		}
		if len(q.History) != 1 || q.History[0].Turn != turn {
			t.Fatalf("History must replay the original turn once: %+v", q.History)
		}
		replies := q.History[0].Replies
		if len(replies) != len(turn.Calls) {
			t.Fatalf("%d replies for %d calls", len(replies), len(turn.Calls))
		}
		for i, rep := range replies {
			if rep.CallID != turn.Calls[i].ID {
				t.Errorf("reply %d answers %q, want %q", i, rep.CallID, turn.Calls[i].ID)
			}
			if i == 1 {
				continue
			}
			if rep.IsError || rep.Content != heldText {
				t.Errorf("sibling reply %d = %+v", i, rep)
			}
		}
		bad := replies[1]
		if !bad.IsError {
			t.Error("the invented call's reply is not an error")
		}
		for _, want := range []string{`"weather_lookup"`, `"name":"get_weather"`, `"name":"search_docs"`, "0.8", `{\"location\":\"Paris\"}`} {
			if !strings.Contains(bad.Content, want) {
				t.Errorf("recovery prompt lacks %s", want)
			}
		}
		for _, hidden := range []string{`"name":"issue_refund"`, `"name":"delete_account"`, "[HALLUCINATED_TOOL_NAME]"} {
			if strings.Contains(bad.Content, hidden) {
				t.Errorf("recovery prompt contains %s", hidden)
			}
		}
	})
}

func TestRunDecisionUsesOwnTemplate(t *testing.T) {
	r := runLadder(t, turnOf(invented), func(s *Settings) {
		s.Prompt = "Tool [HALLUCINATED_TOOL_NAME] is unknown. Threshold [CONFIDENCE_THRESHOLD]."
		s.Threshold = 0.5
	}, askStep{turn: substitute("get_weather", `{"city":"Paris"}`, 0.5)})
	if r.res.Outcome != Substituted {
		t.Fatalf("Outcome = %q (%+v)", r.res.Outcome, r.res.Escalation)
	}
	got := r.asker.queries[0].History[0].Replies[0].Content
	want := "Tool ```data\n\"weather_lookup\"\n``` is unknown. Threshold 0.5."
	if got != want {
		t.Errorf("prompt = %q, want %q", got, want)
	}
}

func TestRunDecisionEscalates(t *testing.T) {
	tests := []struct {
		name     string
		answer   askStep
		label    string
		event    string
		callIdx  int
		attempts []string
	}{
		{"below threshold", askStep{turn: substitute("get_weather", `{"city":"Paris"}`, 0.79)}, "unknown_tool", "escalated", -1, []string{"call", "decision"}},
		{"unknown substitute", askStep{turn: substitute("weather_api", `{"city":"Paris"}`, 0.9)}, "invalid_decision", "invalid_decision", -1, []string{"call", "decision"}},
		{"substitute needs a prefix stripped", askStep{turn: substitute("functions.get_weather", `{"city":"Paris"}`, 0.9)}, "invalid_decision", "invalid_decision", -1, []string{"call", "decision"}},
		{"non-substitutable tool", askStep{turn: substitute("delete_account", `{"user_id":"u1"}`, 0.95)}, "invalid_decision", "invalid_decision", -1, []string{"call", "decision"}},
		{"confirm tool", askStep{turn: substitute("issue_refund", `{"order_id":"ord_1","amount_cents":500}`, 0.95)}, "confirmation_required", "escalated", 0, []string{"call", "decision"}},
		{"confirm tool with bad arguments", askStep{turn: substitute("issue_refund", `{"order_id":"ord_1"}`, 0.95)}, "invalid_decision", "invalid_decision", -1, []string{"call", "decision", "call"}},
		{"arguments fail the schema", askStep{turn: substitute("get_weather", `{"city":"Paris","unit":"kelvin"}`, 0.95)}, "invalid_decision", "invalid_decision", -1, []string{"call", "decision", "call"}},
		{"prose", askStep{turn: textTurn("I think get_weather would do.")}, "invalid_decision", "invalid_decision", -1, []string{"call", "decision"}},
		{"broken JSON", askStep{turn: textTurn(`{"decision":"substitute",`)}, "invalid_decision", "invalid_decision", -1, []string{"call", "decision"}},
		{"tool calls instead of a decision", askStep{turn: turnOf(mkCall("call_n", "get_weather", `{"city":"Paris"}`))}, "invalid_decision", "invalid_decision", -1, []string{"call", "decision"}},
		{"escalate decision", askStep{turn: escalateDecision("no weather source", "see the weather", "weather lookup", 0.3)}, "unknown_tool", "escalated", -1, []string{"call", "decision"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runLadder(t, turnOf(invented), nil, tc.answer)
			e := expectEscalation(t, r, tc.label)
			if len(r.asker.queries) != 1 {
				t.Errorf("asked %d times", len(r.asker.queries))
			}
			if e.CallIndex != tc.callIdx {
				t.Errorf("CallIndex = %d, want %d", e.CallIndex, tc.callIdx)
			}
			if len(r.res.Events) != 1 || r.res.Events[0].Result != tc.event || r.res.Events[0].Strategy != "decision" {
				t.Errorf("Events = %+v, want one with result %q", r.res.Events, tc.event)
			}
			if got := attemptKinds(e); !reflect.DeepEqual(got, tc.attempts) {
				t.Errorf("attempt kinds = %v, want %v", got, tc.attempts)
			}
			if e.Attempts[0].Tool != "weather_lookup" || e.Attempts[0].ArgumentsRaw == nil || *e.Attempts[0].ArgumentsRaw != string(invented.Args) {
				t.Errorf("first attempt = %+v", e.Attempts[0])
			}
			if !hasCode(e.Codes, "unknown_tool") {
				t.Errorf("Codes = %v lack unknown_tool", e.Codes)
			}
			if tc.callIdx >= 0 {
				c := r.res.Calls[tc.callIdx]
				if c.ID != invented.ID || c.Name != "issue_refund" || !r.res.Changed[tc.callIdx] {
					t.Errorf("the call to confirm is not in place: %+v", c)
				}
			} else if r.res.Changed[0] || r.res.Calls[0].Name != invented.Name {
				t.Errorf("an escalated call was replaced: %+v", r.res.Calls[0])
			}
		})
	}
}

func TestRunDecisionEscalateCarriesTheModelsAccount(t *testing.T) {
	r := runLadder(t, turnOf(invented), nil, askStep{turn: escalateDecision("no tool reads forecasts", "know if it rains in Paris", "weather forecasts", 0.25)})
	e := expectEscalation(t, r, "unknown_tool")
	if e.Reason != "no tool reads forecasts" || e.OriginalIntent != "know if it rains in Paris" || e.MissingCapability != "weather forecasts" {
		t.Errorf("escalation = %+v", e)
	}
	if got := attemptKinds(e); !reflect.DeepEqual(got, []string{"call", "decision"}) {
		t.Fatalf("attempt kinds = %v", got)
	}
	d := e.Attempts[1]
	if d.Decision != "escalate" || d.Confidence == nil || *d.Confidence != 0.25 {
		t.Errorf("decision attempt = %+v", d)
	}
	if r.res.Events[0].Confidence != 0.25 {
		t.Errorf("event confidence = %v", r.res.Events[0].Confidence)
	}
	// The escalation must marshal as SPEC §5 shows it.
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"id":"esc_`, `"codes":["unknown_tool"]`, `"original_intent":`, `"missing_capability":`, `"attempts":[{"kind":"call","tool":"weather_lookup","arguments":{"location":"Paris"}`, `"kind":"decision","decision":"escalate","confidence":0.25`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
}

func TestRunRecoveryBudget(t *testing.T) {
	t.Run("second unknown call has no budget", func(t *testing.T) {
		second := mkCall("call_y", "forecast_lookup", `{"city":"Paris"}`)
		r := runLadder(t, turnOf(invented, second), nil, askStep{turn: substitute("get_weather", `{"city":"Paris"}`, 0.9)})
		expectEscalation(t, r, "budget")
		if len(r.asker.queries) != 1 {
			t.Errorf("asked %d times, want 1", len(r.asker.queries))
		}
		if !hasCode(r.res.Escalation.Codes, "unknown_tool") {
			t.Errorf("Codes = %v", r.res.Escalation.Codes)
		}
	})
	t.Run("two attempts cover two calls", func(t *testing.T) {
		second := mkCall("call_y", "forecast_lookup", `{"query":"rain"}`)
		r := runLadder(t, turnOf(invented, second), func(s *Settings) { s.RecoveryAttempts = 2 },
			askStep{turn: substitute("get_weather", `{"city":"Paris"}`, 0.9)},
			askStep{turn: substitute("search_docs", `{"query":"rain"}`, 0.9)})
		if r.res.Outcome != Substituted || r.res.Escalation != nil {
			t.Fatalf("Outcome %q escalation %+v", r.res.Outcome, r.res.Escalation)
		}
		if r.res.Calls[0].ID != "call_x" || r.res.Calls[1].ID != "call_y" || r.res.Calls[1].Name != "search_docs" {
			t.Errorf("Calls = %+v", r.res.Calls)
		}
		// Each decision replays the same original turn and errors only its own call.
		for qi, q := range r.asker.queries {
			reps := q.History[0].Replies
			for j, rep := range reps {
				if rep.IsError != (j == qi) {
					t.Errorf("query %d reply %d IsError = %v", qi, j, rep.IsError)
				}
			}
		}
	})
	t.Run("zero attempts", func(t *testing.T) {
		r := runLadder(t, turnOf(invented), func(s *Settings) { s.RecoveryAttempts = 0 })
		expectEscalation(t, r, "budget")
		if len(r.asker.queries) != 0 {
			t.Errorf("asked %d times", len(r.asker.queries))
		}
	})
	t.Run("zero reprompt attempts", func(t *testing.T) {
		r := runLadder(t, turnOf(badArgs), func(s *Settings) { s.RepromptAttempts = 0 })
		expectEscalation(t, r, "budget")
		if len(r.asker.queries) != 0 {
			t.Errorf("asked %d times", len(r.asker.queries))
		}
	})
}

func TestRunCorrection(t *testing.T) {
	correction := func(s *Settings) { s.Strategy = catalog.StrategyCorrection }
	t.Run("corrected", func(t *testing.T) {
		turn := turnOf(validWeather, invented)
		fixed := turnOf(mkCall("call_new", "search_docs", `{"query":"Paris"}`))
		r := runLadder(t, turn, correction, askStep{turn: fixed})
		if r.err != nil || r.res.Escalation != nil || r.res.Outcome != Corrected {
			t.Fatalf("err %v outcome %q escalation %+v", r.err, r.res.Outcome, r.res.Escalation)
		}
		if got := r.res.Calls[1]; got.ID != "call_x" || got.Name != "search_docs" || string(got.Args) != `{"query":"Paris"}` {
			t.Errorf("Calls[1] = %+v", got)
		}
		if !reflect.DeepEqual(r.res.Changed, []bool{false, true}) {
			t.Errorf("Changed = %v", r.res.Changed)
		}
		q := r.asker.queries[0]
		if q.Kind != KindRecovery || q.Decision || len(q.History) != 1 || q.History[0].Turn != turn {
			t.Fatalf("query = %+v", q)
		}
		reps := q.History[0].Replies
		if reps[0].IsError || reps[0].Content != heldText || reps[0].CallID != "call_w" {
			t.Errorf("sibling reply = %+v", reps[0])
		}
		want := CorrectionMessage("weather_lookup", []string{"delete_account", "get_weather", "issue_refund", "search_docs"})
		if !reps[1].IsError || reps[1].CallID != "call_x" || reps[1].Content != want {
			t.Errorf("error reply = %+v\nwant content %q", reps[1], want)
		}
		if !strings.Contains(want, `"weather_lookup"`) || !strings.Contains(want, `"delete_account", "get_weather", "issue_refund", "search_docs"`) {
			t.Errorf("correction text does not name the unknown tool and the sorted real ones: %q", want)
		}
		if len(r.res.Events) != 1 || r.res.Events[0].Strategy != "correction" || r.res.Events[0].Result != "corrected" {
			t.Errorf("Events = %+v", r.res.Events)
		}
	})
	t.Run("invented again", func(t *testing.T) {
		r := runLadder(t, turnOf(invented), correction, askStep{turn: turnOf(mkCall("call_n", "weather_service", `{}`))})
		expectEscalation(t, r, "unknown_tool")
		if n := len(r.res.Events); n != 1 || r.res.Events[n-1].Result != "escalated" {
			t.Errorf("Events = %+v", r.res.Events)
		}
	})
	t.Run("corrected name then bad arguments are reprompted", func(t *testing.T) {
		r := runLadder(t, turnOf(invented), correction,
			askStep{turn: turnOf(mkCall("call_n", "get_weather", `{"town":"Paris"}`))},
			askStep{turn: turnOf(mkCall("call_m", "get_weather", `{"city":"Paris"}`))})
		if r.res.Outcome != Reprompted || r.res.Escalation != nil {
			t.Fatalf("Outcome %q escalation %+v", r.res.Outcome, r.res.Escalation)
		}
		if r.asker.queries[0].Kind != KindRecovery || r.asker.queries[1].Kind != KindReprompt {
			t.Errorf("kinds %q %q", r.asker.queries[0].Kind, r.asker.queries[1].Kind)
		}
		if len(r.asker.queries[1].History) != 2 {
			t.Errorf("the reprompt must extend the correction's history")
		}
		if r.res.Calls[0].ID != "call_x" {
			t.Errorf("id not kept: %+v", r.res.Calls[0])
		}
	})
	t.Run("corrected onto a confirm tool", func(t *testing.T) {
		r := runLadder(t, turnOf(invented), correction,
			askStep{turn: turnOf(mkCall("call_n", "issue_refund", `{"order_id":"o1","amount_cents":100}`))})
		e := expectEscalation(t, r, "confirmation_required")
		if e.CallIndex != 0 || r.res.Calls[0].Name != "issue_refund" || r.res.Calls[0].ID != "call_x" {
			t.Errorf("CallIndex %d call %+v", e.CallIndex, r.res.Calls[0])
		}
	})
}

func TestRunReprompt(t *testing.T) {
	t.Run("fixed", func(t *testing.T) {
		turn := turnOf(validSearch, badArgs)
		r := runLadder(t, turn, nil, askStep{turn: turnOf(mkCall("call_z", "get_weather", `{"city":"Lyon"}`))})
		if r.res.Outcome != Reprompted || r.res.Escalation != nil {
			t.Fatalf("Outcome %q escalation %+v", r.res.Outcome, r.res.Escalation)
		}
		if got := r.res.Calls[1]; got.ID != "call_b" || string(got.Args) != `{"city":"Lyon"}` {
			t.Errorf("Calls[1] = %+v", got)
		}
		q := r.asker.queries[0]
		if q.Kind != KindReprompt || q.Decision || len(q.History) != 1 || q.History[0].Turn != turn {
			t.Fatalf("query = %+v", q)
		}
		reps := q.History[0].Replies
		if reps[0].IsError || reps[0].Content != heldText {
			t.Errorf("sibling reply = %+v", reps[0])
		}
		if !reps[1].IsError || !strings.Contains(reps[1].Content, "arguments/city") {
			t.Errorf("error reply does not give the exact reason: %+v", reps[1])
		}
		if len(r.res.Events) != 1 || r.res.Events[0].Strategy != "reprompt" || r.res.Events[0].Result != "reprompted" {
			t.Errorf("Events = %+v", r.res.Events)
		}
	})
	t.Run("still failing", func(t *testing.T) {
		r := runLadder(t, turnOf(badArgs), nil, askStep{turn: turnOf(mkCall("call_z", "get_weather", `{"city":true}`))})
		e := expectEscalation(t, r, "schema_violation")
		if len(r.asker.queries) != 1 {
			t.Errorf("asked %d times, want exactly 1", len(r.asker.queries))
		}
		if n := len(r.res.Events); n != 1 || r.res.Events[0].Result != "escalated" {
			t.Errorf("the failed reprompt must count as escalated: %+v", r.res.Events)
		}
		if got := attemptKinds(e); !reflect.DeepEqual(got, []string{"call", "call"}) {
			t.Errorf("attempt kinds = %v", got)
		}
		if r.res.Calls[0].ID != "call_b" {
			t.Errorf("Calls = %+v", r.res.Calls)
		}
	})
	t.Run("every judged answer is an attempt", func(t *testing.T) {
		first := mkCall("call_b", "get_weather", `{"city":"Paris","unit":"kelvin"}`)
		again := mkCall("call_z", "get_weather", `{"unit":"c"}`)
		r := runLadder(t, turnOf(first), nil, askStep{turn: turnOf(again)})
		e := expectEscalation(t, r, "schema_violation")
		if e.Reason != "the repaired call is still not acceptable" {
			t.Errorf("Reason = %q", e.Reason)
		}
		if len(e.Attempts) != 2 {
			t.Fatalf("attempts = %+v, want the first answer and the reprompt's", e.Attempts)
		}
		for i, want := range []struct{ raw, keyword string }{{string(first.Args), "enum"}, {string(again.Args), "required"}} {
			a := e.Attempts[i]
			if a.Kind != "call" || a.Tool != "get_weather" || a.ArgumentsRaw == nil || *a.ArgumentsRaw != want.raw {
				t.Errorf("attempt %d = %+v, want the call %s", i, a, want.raw)
			}
			if len(a.Findings) != 1 || a.Findings[0].Keyword != want.keyword {
				t.Errorf("attempt %d findings = %+v, want one %q", i, a.Findings, want.keyword)
			}
		}
	})
	t.Run("chain of two", func(t *testing.T) {
		turn := turnOf(validSearch, badArgs)
		first := turnOf(mkCall("call_r1", "search_docs", `{"query":"refund policy"}`), mkCall("call_r2", "get_weather", `{"city":"Paris","unit":"kelvin"}`))
		second := turnOf(mkCall("call_s1", "get_weather", `{"city":"Paris","unit":"c"}`))
		r := runLadder(t, turn, func(s *Settings) { s.RepromptAttempts = 2 }, askStep{turn: first}, askStep{turn: second})
		if r.res.Outcome != Reprompted || r.res.Escalation != nil {
			t.Fatalf("Outcome %q escalation %+v", r.res.Outcome, r.res.Escalation)
		}
		if len(r.asker.queries) != 2 {
			t.Fatalf("asked %d times", len(r.asker.queries))
		}
		q1, q2 := r.asker.queries[0], r.asker.queries[1]
		if len(q1.History) != 1 || len(q2.History) != 2 {
			t.Fatalf("history lengths %d, %d", len(q1.History), len(q2.History))
		}
		if q2.History[0].Turn != q1.History[0].Turn || !reflect.DeepEqual(q2.History[0].Replies, q1.History[0].Replies) {
			t.Error("the second re-query rewrote the first round")
		}
		ex := q2.History[1]
		if ex.Turn != first {
			t.Error("the second re-query does not replay the first re-query's answer")
		}
		if len(ex.Replies) != 2 || ex.Replies[0].CallID != "call_r1" || ex.Replies[0].IsError || ex.Replies[0].Content != heldText ||
			ex.Replies[1].CallID != "call_r2" || !ex.Replies[1].IsError || !strings.Contains(ex.Replies[1].Content, "arguments/unit") {
			t.Errorf("second round replies = %+v", ex.Replies)
		}
		want := []validate.ToolCall{validSearch, {ID: "call_b", Name: "get_weather", Args: []byte(`{"city":"Paris","unit":"c"}`), Kind: validate.Function}}
		if !reflect.DeepEqual(r.res.Calls, want) || !reflect.DeepEqual(r.res.Changed, []bool{false, true}) {
			t.Errorf("Calls = %+v Changed = %v", r.res.Calls, r.res.Changed)
		}
		results := []string{}
		for _, ev := range r.res.Events {
			results = append(results, ev.Result)
		}
		if !reflect.DeepEqual(results, []string{"", "reprompted"}) {
			t.Errorf("event results = %q", results)
		}
	})
	t.Run("repeated held sibling is ignored", func(t *testing.T) {
		turn := turnOf(validSearch, badArgs)
		answer := turnOf(mkCall("call_r1", "search_docs", `{ "query" : "refund policy" }`), mkCall("call_r2", "get_weather", `{"city":"Nice"}`))
		r := runLadder(t, turn, nil, askStep{turn: answer})
		if r.res.Outcome != Reprompted {
			t.Fatalf("Outcome %q escalation %+v", r.res.Outcome, r.res.Escalation)
		}
		if r.res.Changed[0] || r.res.Calls[0].ID != "call_s" || !r.res.Changed[1] || string(r.res.Calls[1].Args) != `{"city":"Nice"}` {
			t.Errorf("Calls = %+v Changed = %v", r.res.Calls, r.res.Changed)
		}
	})
	t.Run("a changed sibling is not a repeat", func(t *testing.T) {
		turn := turnOf(validSearch, badArgs)
		answer := turnOf(mkCall("call_r1", "search_docs", `{"query":"other"}`), mkCall("call_r2", "get_weather", `{"city":"Nice"}`))
		r := runLadder(t, turn, nil, askStep{turn: answer})
		expectEscalation(t, r, "schema_violation")
	})
	wrong := []struct {
		name   string
		answer *Turn
	}{
		{"no calls", textTurn("Sorry, I cannot.")},
		{"too many calls", turnOf(mkCall("c1", "get_weather", `{"city":"A"}`), mkCall("c2", "get_weather", `{"city":"B"}`))},
	}
	for _, tc := range wrong {
		t.Run("wrong number: "+tc.name, func(t *testing.T) {
			r := runLadder(t, turnOf(validSearch, badArgs), nil, askStep{turn: tc.answer})
			e := expectEscalation(t, r, "schema_violation")
			if r.res.Changed[1] || r.res.Calls[1].ID != "call_b" || string(r.res.Calls[1].Args) != string(badArgs.Args) {
				t.Errorf("an unmatched answer replaced a call: %+v", r.res.Calls[1])
			}
			last := e.Attempts[len(e.Attempts)-1]
			if last.Kind != string(KindReprompt) || last.Decision != "unmatched" {
				t.Errorf("last attempt = %+v", last)
			}
		})
	}
	t.Run("repaired answer truncated", func(t *testing.T) {
		answer := &Turn{Calls: []validate.ToolCall{mkCall("c1", "get_weather", `{"ci`)}, Stop: neutral.StopMaxTokens}
		r := runLadder(t, turnOf(badArgs), nil, askStep{turn: answer})
		expectEscalation(t, r, "truncated")
	})
	t.Run("repaired onto a different tool", func(t *testing.T) {
		r := runLadder(t, turnOf(badArgs), nil, askStep{turn: turnOf(mkCall("c1", "search_docs", `{"query":"Paris weather"}`))})
		if r.res.Outcome != Reprompted || r.res.Calls[0].Name != "search_docs" || r.res.Calls[0].ID != "call_b" {
			t.Errorf("Outcome %q Calls %+v", r.res.Outcome, r.res.Calls)
		}
	})
}

func TestRunMixedBatch(t *testing.T) {
	turn := turnOf(invented, badArgs, validSearch)
	r := runLadder(t, turn, nil,
		askStep{turn: substitute("get_weather", `{"city":"Paris"}`, 0.9)},
		askStep{turn: turnOf(mkCall("call_q", "get_weather", `{"city":"Rome"}`))})
	if r.err != nil || r.res.Escalation != nil {
		t.Fatalf("err %v escalation %+v", r.err, r.res.Escalation)
	}
	if r.res.Outcome != Reprompted {
		t.Errorf("Outcome = %q, want the worse of substituted and reprompted", r.res.Outcome)
	}
	if len(r.asker.queries) != 2 {
		t.Fatalf("asked %d times", len(r.asker.queries))
	}
	if q := r.asker.queries[0]; q.Kind != KindRecovery || !q.Decision {
		t.Errorf("first query = %q decision %v", q.Kind, q.Decision)
	}
	if q := r.asker.queries[1]; q.Kind != KindReprompt || q.Decision {
		t.Errorf("second query = %q decision %v", q.Kind, q.Decision)
	}
	want := []validate.ToolCall{
		{ID: "call_x", Name: "get_weather", Args: []byte(`{"city":"Paris"}`), Kind: validate.Function},
		{ID: "call_b", Name: "get_weather", Args: []byte(`{"city":"Rome"}`), Kind: validate.Function},
		validSearch,
	}
	if !reflect.DeepEqual(r.res.Calls, want) {
		t.Errorf("Calls = %+v\nwant %+v", r.res.Calls, want)
	}
	if !reflect.DeepEqual(r.res.Changed, []bool{true, true, false}) {
		t.Errorf("Changed = %v", r.res.Changed)
	}
	if len(r.res.Turns) != 2 {
		t.Errorf("Turns = %d", len(r.res.Turns))
	}
}

func TestRunConfirm(t *testing.T) {
	refund := mkCall("call_r", "issue_refund", `{"order_id":"ord_1","amount_cents":500}`)
	t.Run("valid call to a confirm tool", func(t *testing.T) {
		r := runLadder(t, turnOf(validWeather, refund), nil)
		e := expectEscalation(t, r, "confirmation_required")
		if e.CallIndex != 1 {
			t.Errorf("CallIndex = %d", e.CallIndex)
		}
		if len(r.asker.queries) != 0 {
			t.Errorf("asked %d times", len(r.asker.queries))
		}
		if len(e.Attempts) != 1 || e.Attempts[0].Tool != "issue_refund" {
			t.Errorf("attempts = %+v", e.Attempts)
		}
	})
	t.Run("bad arguments are fixed before confirmation", func(t *testing.T) {
		bad := mkCall("call_r", "issue_refund", `{"order_id":"ord_1"}`)
		r := runLadder(t, turnOf(bad), nil, askStep{turn: turnOf(mkCall("c2", "issue_refund", `{"order_id":"ord_1","amount_cents":500}`))})
		e := expectEscalation(t, r, "confirmation_required")
		if e.CallIndex != 0 || r.res.Calls[0].ID != "call_r" || !strings.Contains(string(r.res.Calls[0].Args), "amount_cents") {
			t.Errorf("CallIndex %d call %+v", e.CallIndex, r.res.Calls[0])
		}
	})
}

func TestRunShadow(t *testing.T) {
	refund := mkCall("call_r", "issue_refund", `{"order_id":"ord_1","amount_cents":500}`)
	tests := []struct {
		name       string
		turn       *Turn
		want       Outcome
		escalation bool
	}{
		{"valid", turnOf(validWeather), ShadowPass, false},
		{"unknown tool", turnOf(validWeather, invented), ShadowWouldRecover, false},
		{"unknown and bad arguments", turnOf(badArgs, invented), ShadowWouldRecover, false},
		{"bad arguments", turnOf(badArgs), ShadowWouldReprompt, false},
		{"confirm", turnOf(refund), ShadowWouldEscalate, false},
		{"truncated", &Turn{Calls: []validate.ToolCall{validWeather}, Stop: neutral.StopMaxTokens}, ShadowWouldEscalate, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runLadder(t, tc.turn, func(s *Settings) { s.Shadow = true })
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.res.Outcome != tc.want {
				t.Errorf("Outcome = %q, want %q", r.res.Outcome, tc.want)
			}
			if (r.res.Escalation != nil) != tc.escalation {
				t.Errorf("Escalation = %+v", r.res.Escalation)
			}
			if len(r.asker.queries) != 0 {
				t.Errorf("shadow mode asked %d times", len(r.asker.queries))
			}
			for i, c := range r.res.Changed {
				if c {
					t.Errorf("shadow mode changed call %d", i)
				}
			}
		})
	}
}

func TestRunStateful(t *testing.T) {
	for _, tc := range []struct {
		name string
		turn *Turn
	}{
		{"unknown tool", turnOf(invented)},
		{"bad arguments", turnOf(badArgs)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runLadderCtx(t, context.Background(), tc.turn, ladderEffective(t, catalog.ToolChoice{}), nil, true)
			expectEscalation(t, r, "stateful_unrecoverable")
			if len(r.asker.queries) != 0 {
				t.Errorf("asked %d times", len(r.asker.queries))
			}
		})
	}
	t.Run("valid answer passes", func(t *testing.T) {
		r := runLadderCtx(t, context.Background(), turnOf(validWeather), ladderEffective(t, catalog.ToolChoice{}), nil, true)
		if r.res.Outcome != Pass {
			t.Errorf("Outcome = %q", r.res.Outcome)
		}
	})
}

func TestRunUpstreamFailures(t *testing.T) {
	retryAfter := http.Header{"Retry-After": []string{"3"}}
	retryable := []struct {
		name string
		err  error
	}{
		{"429", &UpstreamError{Retryable: true, Status: 429, Header: retryAfter}},
		{"503", &UpstreamError{Retryable: true, Status: 503, Body: []byte("unavailable")}},
		{"500", &UpstreamError{Retryable: true, Status: 500}},
		{"408", &UpstreamError{Retryable: true, Status: 408}},
		{"409", &UpstreamError{Retryable: true, Status: 409}},
		{"transport error", &UpstreamError{Retryable: true, Err: errors.New("connection reset by peer")}},
		{"upstream timeout while the deadline is far", &UpstreamError{Retryable: true, Err: fmt.Errorf("first byte: %w", context.DeadlineExceeded)}},
		{"wrapped", fmt.Errorf("asking: %w", &UpstreamError{Retryable: true, Status: 502})},
	}
	for _, turn := range []struct {
		name string
		turn *Turn
	}{{"decision", turnOf(invented)}, {"reprompt", turnOf(badArgs)}} {
		for _, tc := range retryable {
			t.Run(turn.name+"/retryable "+tc.name, func(t *testing.T) {
				r := runLadder(t, turn.turn, nil, askStep{err: tc.err})
				if r.err != nil {
					t.Fatalf("Run error %v", r.err)
				}
				if r.res.Escalation != nil {
					t.Fatalf("a retryable failure escalated: %+v", r.res.Escalation)
				}
				var want *UpstreamError
				if !errors.As(tc.err, &want) || r.res.Upstream != want {
					t.Errorf("Upstream = %v, want the failure as is", r.res.Upstream)
				}
				if n := len(r.res.Events); n != 1 || r.res.Events[0].Result != "upstream_error" {
					t.Errorf("Events = %+v", r.res.Events)
				}
			})
		}
	}
	final := []struct {
		name   string
		err    error
		status int
	}{
		{"400", &UpstreamError{Status: 400, Body: []byte(`{"error":{"message":"bad tool message"}}`)}, 400},
		{"401", &UpstreamError{Status: 401}, 401},
		{"unreadable answer", fmt.Errorf("%w: eof", ErrBadAnswer), 0},
	}
	for _, tc := range final {
		t.Run("final "+tc.name, func(t *testing.T) {
			r := runLadder(t, turnOf(invented), nil, askStep{err: tc.err})
			e := expectEscalation(t, r, "unknown_tool")
			last := e.Attempts[len(e.Attempts)-1]
			if last.Kind != "upstream_error" || last.Status != tc.status {
				t.Errorf("last attempt = %+v", last)
			}
		})
	}
	t.Run("nil turn without error", func(t *testing.T) {
		r := runLadder(t, turnOf(badArgs), nil, askStep{})
		expectEscalation(t, r, "schema_violation")
	})
}

func TestRunDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		turn *Turn
	}{{"decision", turnOf(invented)}, {"reprompt", turnOf(badArgs)}} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := runLadder(t, tc.turn, func(s *Settings) { s.Deadline = 20 * time.Millisecond }, askStep{block: true})
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v", d)
			}
			expectEscalation(t, r, "deadline")
		})
	}
}

func TestRunClientCancels(t *testing.T) {
	t.Run("before asking", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := runLadderCtx(t, ctx, turnOf(invented), ladderEffective(t, catalog.ToolChoice{}), nil, false, askStep{block: true})
		if !errors.Is(r.err, ErrCanceled) {
			t.Errorf("err = %v, want ErrCanceled", r.err)
		}
	})
	t.Run("while asking", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		eff := ladderEffective(t, catalog.ToolChoice{})
		s := baseSettings()
		a := &fakeAsker{steps: []askStep{{block: true}}, started: make(chan struct{})}
		go func() {
			<-a.started
			cancel()
		}()
		vcx := &validate.Context{Effective: eff}
		res, err := Run(ctx, &Input{Turn: turnOf(badArgs), Effective: eff, Settings: &s, Ask: a,
			Judge: localJudge(vcx)})
		if !errors.Is(err, ErrCanceled) {
			t.Errorf("err = %v, want ErrCanceled", err)
		}
		if res == nil || res.Escalation != nil {
			t.Errorf("a canceled request must not escalate: %+v", res)
		}
	})
}

func TestEscalationCodesLeadWithLabel(t *testing.T) {
	tests := []struct {
		name  string
		turn  *Turn
		mod   func(*Settings)
		steps []askStep
		label string
		codes []string
	}{
		{"finding label", turnOf(invented), nil, []askStep{{turn: substitute("get_weather", `{"city":"P"}`, 0.1)}}, "unknown_tool", []string{"unknown_tool"}},
		{"invalid_decision", turnOf(invented), nil, []askStep{{turn: textTurn("no")}}, "invalid_decision", []string{"invalid_decision", "unknown_tool"}},
		{"budget", turnOf(invented), func(s *Settings) { s.RecoveryAttempts = 0 }, nil, "budget", []string{"budget", "unknown_tool"}},
		{"deadline", turnOf(badArgs), func(s *Settings) { s.Deadline = time.Millisecond }, []askStep{{block: true}}, "deadline", []string{"deadline", "schema_violation"}},
		{"confirm after a substitution", turnOf(invented), nil, []askStep{{turn: substitute("issue_refund", `{"order_id":"o","amount_cents":1}`, 0.9)}}, "confirmation_required", []string{"confirmation_required", "unknown_tool"}},
		{"several findings", turnOf(invented, badArgs), func(s *Settings) { s.RecoveryAttempts = 0 }, nil, "budget", []string{"budget", "unknown_tool", "schema_violation"}},
		{"truncated", &Turn{Calls: []validate.ToolCall{invented}, Stop: neutral.StopMaxTokens}, nil, nil, "truncated", []string{"truncated", "unknown_tool"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runLadder(t, tc.turn, tc.mod, tc.steps...)
			e := expectEscalation(t, r, tc.label)
			if !reflect.DeepEqual(e.Codes, tc.codes) {
				t.Errorf("Codes = %v, want %v", e.Codes, tc.codes)
			}
		})
	}
}

func TestNewEscalationID(t *testing.T) {
	re := regexp.MustCompile(`^esc_[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewEscalationID()
		if !re.MatchString(id) {
			t.Fatalf("id %q", id)
		}
		if seen[id] {
			t.Fatalf("id %q repeated", id)
		}
		seen[id] = true
	}
}

func TestWorse(t *testing.T) {
	order := []Outcome{Pass, Substituted, Corrected, Reprompted, Abstained, Escalated}
	for i, a := range order {
		for j, b := range order {
			want := a
			if j > i {
				want = b
			}
			t.Run(string(a)+"_vs_"+string(b), func(t *testing.T) {
				if got := Worse(a, b); got != want {
					t.Errorf("Worse(%q, %q) = %q, want %q", a, b, got, want)
				}
			})
		}
	}
	tests := []struct {
		a, b, want Outcome
	}{
		{ShadowPass, ShadowWouldRecover, ShadowWouldRecover},
		{ShadowWouldReprompt, ShadowWouldEscalate, ShadowWouldEscalate},
		{ShadowWouldEscalate, ShadowPass, ShadowWouldEscalate},
		{ShadowWouldRecover, ShadowWouldReprompt, ShadowWouldRecover},
		{Pass, ShadowPass, Pass},
		{"", Pass, ""},
		{"", Substituted, Substituted},
	}
	for _, tc := range tests {
		t.Run(string(tc.a)+"_vs_"+string(tc.b), func(t *testing.T) {
			if got := Worse(tc.a, tc.b); got != tc.want {
				t.Errorf("Worse(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestSettingsFrom(t *testing.T) {
	s := SettingsFrom(ladderSnapshot(t))
	want := Settings{Strategy: "decision", RecoveryAttempts: 1, RepromptAttempts: 1, Threshold: 0.8, Shortlist: 20,
		Deadline: 60 * time.Second, Truncated: "escalate"}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("SettingsFrom = %+v, want %+v", s, want)
	}
}

func hasCode(codes []string, c string) bool {
	for _, x := range codes {
		if x == c {
			return true
		}
	}
	return false
}

// FuzzRunDecision answers the recovery prompt with arbitrary text. Whatever
// the model says, the ladder asks once and either substitutes a call that
// passes every check onto a substitutable tool, under the original id, or
// escalates; it never lets an unchecked call through.
func FuzzRunDecision(f *testing.F) {
	f.Add(`{"decision":"substitute","corrected_tool_call":{"tool_name":"get_weather","arguments":{"city":"Paris"}},"escalation":null,"confidence":0.9}`)
	f.Add(`{"decision":"substitute","corrected_tool_call":{"tool_name":"issue_refund","arguments":{"order_id":"o","amount_cents":1}},"escalation":null,"confidence":1}`)
	f.Add(`{"decision":"substitute","corrected_tool_call":{"tool_name":"delete_account","arguments":"{\"user_id\":\"u\"}"},"escalation":null,"confidence":1}`)
	f.Add(`{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":"r"},"confidence":0.1}`)
	f.Add("```json\n{\"decision\":\"substitute\"}\n```")
	f.Add("no")
	eff := ladderEffective(f, catalog.ToolChoice{})
	vcx := &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil)}
	check := localJudge(vcx)
	f.Fuzz(func(t *testing.T, text string) {
		s := baseSettings()
		a := &fakeAsker{steps: []askStep{{turn: textTurn(text)}}}
		res, err := Run(context.Background(), &Input{Turn: turnOf(invented), Judge: check, Effective: eff, Settings: &s, Ask: a})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(a.queries) != 1 || a.extra != 0 {
			t.Fatalf("asked %d times", len(a.queries))
		}
		got := res.Calls[0]
		switch {
		case res.Outcome == Substituted:
			if res.Escalation != nil || !res.Changed[0] || got.ID != invented.ID {
				t.Fatalf("substitution in bad shape: %+v", res)
			}
			tool, st, _ := eff.Lookup(got.Name)
			if st != catalog.Found || !tool.Substitutable || tool.Policy == catalog.PolicyConfirm {
				t.Fatalf("substituted onto %q", got.Name)
			}
			if v := validate.Check(got, vcx); !v.Valid() {
				t.Fatalf("substituted an invalid call: %+v", v.Findings)
			}
		case res.Escalation != nil:
			if res.Outcome != Escalated {
				t.Fatalf("Outcome %q with an escalation", res.Outcome)
			}
			if res.Escalation.Label == string(validate.ConfirmationRequired) {
				if v := validate.Check(got, vcx); !v.Valid() || got.Name != "issue_refund" || res.Escalation.CallIndex != 0 {
					t.Fatalf("a call to confirm that is not valid: %+v %+v", got, v.Findings)
				}
			} else if res.Changed[0] {
				t.Fatalf("an escalation replaced the call: %+v", got)
			}
		default:
			t.Fatalf("neither substituted nor escalated: %+v", res)
		}
	})
}

// localJudge judges with the local checks alone, as a request without
// validators does.
func localJudge(vcx *validate.Context) JudgeFunc { return (&judge.Judge{Local: vcx}).Batch }

// judgeCall is one call of a recording JudgeFunc.
type judgeCall struct {
	names []string
	at    []int
	ctxOK bool
}

// The ladder judges the original answer as one batch, and the repaired
// calls of a re-query together, each seeing the answer as it now stands;
// every judgement runs under the recovery deadline.
func TestLadderJudgesBatches(t *testing.T) {
	eff := ladderEffective(t, catalog.ToolChoice{})
	vcx := &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil)}
	var got []judgeCall
	judgeFn := func(ctx context.Context, calls []validate.ToolCall, at []int) []validate.CallReport {
		_, hasDeadline := ctx.Deadline()
		jc := judgeCall{at: append([]int(nil), at...), ctxOK: hasDeadline}
		for _, c := range calls {
			jc.names = append(jc.names, c.Name+string(c.Args))
		}
		got = append(got, jc)
		return localJudge(vcx)(ctx, calls, at)
	}
	bad2 := mkCall("call_b2", "get_weather", `{"city":13}`)
	s := baseSettings()
	a := &fakeAsker{steps: []askStep{{turn: turnOf(mkCall("n1", "get_weather", `{"city":"Oslo"}`), mkCall("n2", "get_weather", `{"city":"Rome"}`))}}}
	res, err := Run(context.Background(), &Input{Turn: turnOf(badArgs, validSearch, bad2), Judge: judgeFn, Effective: eff, Settings: &s, Ask: a})
	if err != nil || res.Outcome != Reprompted {
		t.Fatalf("outcome %q err %v", res.Outcome, err)
	}
	want := []judgeCall{
		{names: []string{`get_weather{"city":12}`, `search_docs{"query":"refund policy"}`, `get_weather{"city":13}`}, at: []int{0, 1, 2}, ctxOK: true},
		{names: []string{`get_weather{"city":"Oslo"}`, `search_docs{"query":"refund policy"}`, `get_weather{"city":"Rome"}`}, at: []int{0, 2}, ctxOK: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("judged\n %+v\nwant\n %+v", got, want)
	}
}

// With nobody to ask (an MCP client's call), a bad call escalates at once
// with its own finding as the label and reason, a valid one passes, and a
// confirm call still reaches the last rung.
func TestLadderWithoutAsker(t *testing.T) {
	eff := ladderEffective(t, catalog.ToolChoice{})
	run := func(calls ...validate.ToolCall) *Result {
		s := baseSettings()
		vcx := &validate.Context{Effective: eff, Evidence: validate.NewCorpus([]string{"weather in Paris please"})}
		res, err := Run(context.Background(), &Input{Turn: &Turn{Calls: calls}, Judge: localJudge(vcx), Effective: eff, Settings: &s})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := run(invented); r.Escalation == nil || r.Escalation.Label != "unknown_tool" ||
		!reflect.DeepEqual(r.Escalation.Codes, []string{"unknown_tool"}) || r.Escalation.Reason != r.Reports[0].Findings[0].Message {
		t.Errorf("unknown tool: %+v", r.Escalation)
	}
	if r := run(badArgs); r.Escalation == nil || r.Escalation.Label != "schema_violation" ||
		r.Escalation.Reason != "the arguments do not pass the tool's checks" || len(r.Escalation.Attempts) != 1 {
		t.Errorf("bad arguments: %+v", r.Escalation)
	}
	if r := run(badArgs); r.Outcome != Escalated || len(r.Events) != 0 {
		t.Errorf("outcome %q, %d re-queries", r.Outcome, len(r.Events))
	}
	empty := ladderEffective(t, catalog.ToolChoice{Kind: catalog.ChoiceNone})
	s := baseSettings()
	res, _ := Run(context.Background(), &Input{Turn: &Turn{Calls: []validate.ToolCall{invented}},
		Judge: localJudge(&validate.Context{Effective: empty}), Effective: empty, Settings: &s})
	if res.Escalation == nil || res.Escalation.Label == ReasonNoTools {
		t.Errorf("no tools: %+v; the call's own finding names what is wrong", res.Escalation)
	}
}
