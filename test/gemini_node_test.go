package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// gemNodeCase is one scripted exchange driven through @google/genai.
type gemNodeCase struct {
	name   string
	config string
	script func(n int) gemReply
	check  func(t *testing.T, g *gate, r gemNodeResult)
	// streamOnly: the script answers with chunks only a stream can carry.
	streamOnly bool
}

// gemNodeResult is one line of test/node-gemini/e2e.mjs.
type gemNodeResult struct {
	Case  string `json:"case"`
	Calls []struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"calls"`
	Text       string          `json:"text"`
	Finish     string          `json:"finish"`
	Outcome    string          `json:"outcome"`
	Escalation json.RawMessage `json:"toolgate_escalation"`
	Error      *struct {
		Status int `json:"status"`
		Body   struct {
			Error struct {
				Code    int              `json:"code"`
				Message string           `json:"message"`
				Status  string           `json:"status"`
				Details []map[string]any `json:"details"`
			} `json:"error"`
		} `json:"body"`
	} `json:"error"`
}

func (r gemNodeResult) calls() string {
	var out []string
	for _, c := range r.Calls {
		var v any
		_ = json.Unmarshal(c.Args, &v)
		b, _ := json.Marshal(v)
		out = append(out, c.Name+" "+string(b))
	}
	return strings.Join(out, "; ")
}

// firstThen answers the first request with first and every later one
// with then.
func firstThen(first, then string) func(int) gemReply {
	return func(n int) gemReply {
		if n == 1 {
			return gemReply{Chunks: []string{first}}
		}
		return gemReply{Chunks: []string{then}}
	}
}

func gemNodeCases() []gemNodeCase {
	invented := gemAnswer("STOP", gemText("I'll look up both."), gemFC("weather_lookup", `{"city":"Boston"}`, "c2lnLWJhZA=="), gemFC("get_stock_price", `{"ticker":"AAPL"}`, ""))
	dbCall := gemAnswer("STOP", gemText("Let me query that."), gemFC("database_query", `{"sql":"SELECT 1"}`, "c2lnLWRi"))
	escalate := gemAnswer("STOP", gemText(gemDecision("escalate", "", "", 0.2)))
	wantCalls := func(want string) func(t *testing.T, g *gate, r gemNodeResult) {
		return func(t *testing.T, g *gate, r gemNodeResult) {
			if r.Error != nil || r.calls() != want {
				t.Errorf("%s: calls %q error %+v, want %q", r.Case, r.calls(), r.Error, want)
			}
		}
	}
	escalated := func(code string) func(t *testing.T, g *gate, r gemNodeResult) {
		return func(t *testing.T, g *gate, r gemNodeResult) {
			recs := g.Sink.records()
			if r.Error == nil || len(recs) != 1 || len(r.Error.Body.Error.Details) == 0 {
				t.Fatalf("%s: %+v, %d sink records", r.Case, r, len(recs))
			}
			e := r.Error.Body.Error
			d := e.Details[0]
			codes, _ := d["codes"].([]any)
			if r.Error.Status != 422 || e.Code != 422 || e.Status != "FAILED_PRECONDITION" || d["id"] != recs[0].Escalation.ID || len(codes) == 0 || codes[0] != code {
				t.Errorf("%s: ApiError %+v", r.Case, r.Error)
			}
		}
	}
	return []gemNodeCase{
		{name: "valid", script: firstThen(gemAnswer("STOP", gemFC("get_current_weather", weatherOK, "c2ln"), gemFC("get_stock_price", `{"ticker":"AAPL","exchange":"NASDAQ"}`, "")), ""),
			check: wantCalls(`get_current_weather {"location":"Boston, MA","unit":"fahrenheit"}; get_stock_price {"exchange":"NASDAQ","ticker":"AAPL"}`)},
		{name: "substituted", script: firstThen(invented, gemAnswer("STOP", gemText(gemDecision("substitute", "get_current_weather", `{"location":"Boston, MA"}`, 0.93)))),
			check: wantCalls(`get_current_weather {"location":"Boston, MA"}; get_stock_price {"ticker":"AAPL"}`)},
		{name: "corrected", config: "recovery:\n  strategy: correction", script: firstThen(gemAnswer("STOP", gemFC("weather_lookup", `{"city":"Boston"}`, "c2ln")), gemAnswer("STOP", gemFC("get_current_weather", `{"location":"Boston, MA"}`, "c2lnMg=="))),
			check: wantCalls(`get_current_weather {"location":"Boston, MA"}`)},
		{name: "reprompted", script: firstThen(gemAnswer("STOP", gemFC("get_current_weather", `{"location":"Boston, MA","unit":"kelvin"}`, "c2lnLWs="), gemFC("get_stock_price", `{"ticker":"AAPL"}`, "")), gemAnswer("STOP", gemFC("get_current_weather", weatherOK, "c2lnLWY="))),
			check: wantCalls(`get_current_weather {"location":"Boston, MA","unit":"fahrenheit"}; get_stock_price {"ticker":"AAPL"}`)},
		{name: "escalated", script: firstThen(dbCall, escalate), check: escalated("unknown_tool")},
		{name: "escalated-message", config: "escalation:\n  mode: message", script: firstThen(dbCall, escalate),
			check: func(t *testing.T, g *gate, r gemNodeResult) {
				recs := g.Sink.records()
				if r.Error != nil || len(recs) != 1 || len(r.Calls) != 0 || !strings.HasSuffix(r.Text, "[toolgate:"+recs[0].Escalation.ID+"]") || r.Finish != "STOP" {
					t.Errorf("%s: %+v", r.Case, r)
				}
			}},
		{name: "escalated-after-text", streamOnly: true, script: func(n int) gemReply {
			if n == 1 {
				return gemReply{Chunks: []string{gemAnswer("", gemText("Let me query that.")), gemAnswer("STOP", gemFC("database_query", `{"sql":"SELECT 1"}`, "c2lnLWRi"))}}
			}
			return gemReply{Chunks: []string{escalate}}
		}, check: func(t *testing.T, g *gate, r gemNodeResult) {
			// The text went out before the call: the escalation is an
			// error event in the stream, which the SDK throws, after a
			// chunk that says it as text for the clients that drop it.
			escalated("unknown_tool")(t, g, r)
			if recs := g.Sink.records(); len(recs) != 1 || !strings.HasPrefix(r.Text, "Let me query that.") ||
				!strings.HasSuffix(r.Text, "[toolgate:"+recs[0].Escalation.ID+"]") {
				t.Errorf("%s: text %q", r.Case, r.Text)
			}
		}},
		{name: "truncated", script: firstThen(gemAnswer("MAX_TOKENS", gemFC("get_current_weather", `{"location":"Bos"}`, "c2lnLXQ=")), ""), check: escalated("truncated")},
		{name: "abstain", config: "abstain:\n  enabled: true", script: firstThen(gemAnswer("STOP", gemFC("toolgate_no_suitable_tool", `{"reason":"No tool books flights."}`, "c2lnLWE=")), ""),
			check: func(t *testing.T, g *gate, r gemNodeResult) {
				if r.Error != nil || len(r.Calls) != 0 || !strings.Contains(r.Text, "No tool books flights.") {
					t.Errorf("%s: %+v", r.Case, r)
				}
			}},
	}
}

// TestGeminiNodeSDK drives every case through @google/genai, plain and
// streaming, against the same refusing upstream as the Go SDK tests: what
// the JavaScript SDK hands the caller is checked too, including where its
// ApiError carries the escalation (the JSON body in err.message).
func TestGeminiNodeSDK(t *testing.T) {
	node := needNodeIn(t, "node-gemini", "@google/genai")
	gates := map[string]string{}
	byName := map[string]*gate{}
	checks := map[string]gemNodeCase{}
	for _, c := range gemNodeCases() {
		for _, mode := range []string{"plain", "stream"} {
			if c.streamOnly && mode == "plain" {
				continue
			}
			name := c.name + ":" + mode
			script := c.script
			up := newGemUpstream(t, func(n int, _ *gemRequest) gemReply { return script(n) })
			g := gemGate(t, up, c.config)
			gates[name], byName[name], checks[name] = g.URL, g, c
		}
	}
	env, _ := json.Marshal(gates)
	stdout := runNodeIn(t, node, "node-gemini", "e2e.mjs", 60*time.Second, "TOOLGATE_GATES="+string(env))
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		var r gemNodeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %s: %v", sc.Bytes(), err)
		}
		c, ok := checks[r.Case]
		if !ok {
			t.Fatalf("unknown case %q", r.Case)
		}
		seen++
		t.Run(r.Case, func(t *testing.T) { c.check(t, byName[r.Case], r) })
		if !strings.HasSuffix(r.Case, ":stream") && r.Error == nil && r.Outcome == "" {
			t.Errorf("%s: no outcome header", r.Case)
		}
	}
	if seen != len(gates) {
		t.Errorf("%d results for %d cases:\n%s", seen, len(gates), stdout)
	}
}
