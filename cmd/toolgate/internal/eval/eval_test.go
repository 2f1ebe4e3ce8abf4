package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
)

// suite is thirteen cases whose scripted answers cover every way a
// decision ends. The comments give each case's fate; the expected report
// below is worked out from them by hand.
func suite() ([]Case, map[string][]reply) {
	cases := []Case{
		tcase("c01", "alpha", "Weather in Oslo?", "fetch_weather", `{"city":"Oslo"}`, "get_weather"),
		tcase("c02", "alpha", "Weather in Rome?", "weather", `{"city":"Rome"}`, "get_weather"),
		tcase("c03", "alpha", "Search for Go releases", "search_internet", `{"query":"go releases"}`, "web_search"),
		tcase("c04", "alpha", "Search for pi", "lookup", `{"query":"pi"}`, "web_search"),
		tcase("c05", "alpha", "Book a table", "book_table", `{"at":"8pm"}`, ExpectEscalate),
		tcase("c06", "alpha", "Order a pizza", "order_pizza", `{"size":"L"}`, ExpectEscalate),
		tcase("c07", "beta", "What is 1+1?", "calc", `{"expr":"1+1"}`, "calculator"),
		tcase("c08", "beta", "What is 2*3?", "compute", `{"e":"2*3"}`, "calculator"),
		tcase("c09", "beta", "Refund ord_1", "refund", `{"order_id":"ord_1"}`, ExpectEscalate),
		tcase("c10", "beta", "Weather in Lima?", "clima", `{"ciudad":"Lima"}`, "get_weather"),
		tcase("c11", "beta", "Show the vault", "vault_read", `{"name":"db"}`, ExpectEscalate),
		tcase("c12", "beta", "What is 9/3?", "divide", `{"a":9,"b":3}`, "calculator"),
		tcase("c13", "beta", "Search for cats", "cat_search", `{"q":"cats"}`, "web_search"),
	}
	// c03 offers its own tools: the request's tools, not the catalog's.
	cases[2].Tools = []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"name":"web_search","description":"Search the web.","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}}`),
		json.RawMessage(`{"type":"function","function":{"name":"calculator","description":"Evaluate.","parameters":{"type":"object","properties":{"expression":{"type":"string"}}}}}`),
	}
	ok := func(i int64, text string) []reply { return []reply{{text: text, in: 100 + i, out: 10 + i}} }
	script := map[string][]reply{
		"c01": ok(1, sub("get_weather", `{"city":"Oslo"}`, 0.95)),                     // substituted, correct
		"c02": ok(2, "```json\n"+sub("get_weather", `{"city":"Rome"}`, 0.72)+"\n```"), // fenced: still read
		"c03": ok(3, sub("web_search", `{"query":"go releases"}`, 0.88)),              // correct
		"c04": ok(4, sub("calculator", `{"expression":"pi"}`, 0.81)),                  // wrong tool
		"c05": ok(5, sub("web_search", `{"query":"book a table"}`, 0.62)),             // should have escalated
		"c06": ok(6, esc(0.9)),                                                        // escalated, right
		"c07": ok(7, sub("calculator", `{"expr":"1+1"}`, 0.97)),                       // substitute fails its schema
		"c08": ok(8, "I would use the calculator."),                                   // invalid decision
		"c09": ok(9, sub("issue_refund", `{"order_id":"ord_1"}`, 0.99)),               // confirm tool: a person decides
		"c10": ok(10, esc(0.4)),                                                       // escalated, missed a right tool
		"c11": ok(11, sub("get_secret", `{"name":"db"}`, 0.93)),                       // not substitutable
		"c12": ok(12, sub("calculator", `{"expression":"9/3"}`, 0.5)),                 // correct, low confidence
		"c13": {{status: http.StatusBadRequest}},                                      // cannot be measured
	}
	return cases, script
}

func TestSweepNumbers(t *testing.T) {
	cases, script := suite()
	up, snap := newUpstream(t, script)
	rep := runEval(t, context.Background(), snap, cases, Options{Concurrency: 3})

	if got := up.requests(); got != 13 {
		t.Errorf("upstream saw %d requests, want 13 (one per case)", got)
	}
	if rep.Cases != 13 || rep.Measured != 12 || rep.Errors != 1 || rep.Pending != 0 || rep.WithRightTool != 8 || rep.Interrupted {
		t.Fatalf("counts: cases %d measured %d errors %d pending %d right %d interrupted %v",
			rep.Cases, rep.Measured, rep.Errors, rep.Pending, rep.WithRightTool, rep.Interrupted)
	}
	if len(rep.Failures) != 1 || rep.Failures[0].ID != "c13" || !strings.Contains(rep.Failures[0].Error, "400") ||
		!strings.Contains(rep.Failures[0].Error, "scripted status 400") {
		t.Errorf("failures: %+v", rep.Failures)
	}
	if want := (Decisions{Substitute: 9, Escalate: 2, Invalid: 1, SubstituteRejected: 3}); rep.Decisions != want {
		t.Errorf("decisions %+v, want %+v", rep.Decisions, want)
	}
	if len(rep.Thresholds) != 21 {
		t.Fatalf("%d thresholds, want 21", len(rep.Thresholds))
	}
	for i, r := range rep.Thresholds {
		if r.Threshold != Threshold(i) {
			t.Errorf("row %d has threshold %v", i, r.Threshold)
		}
	}
	// Usable substitutes: c01 .95, c02 .72, c03 .88 (right), c04 .81 (wrong
	// tool), c05 .62 (should escalate), c12 .50 (right). 12 measured, 8 of
	// them with a right tool.
	want := map[float64]Row{
		0.00: row(0.00, 4, 1, 1, 12, 8),
		0.50: row(0.50, 4, 1, 1, 12, 8),
		0.55: row(0.55, 3, 1, 1, 12, 8),
		0.60: row(0.60, 3, 1, 1, 12, 8),
		0.65: row(0.65, 3, 1, 0, 12, 8),
		0.75: row(0.75, 2, 1, 0, 12, 8),
		0.80: row(0.80, 2, 1, 0, 12, 8),
		0.85: row(0.85, 2, 0, 0, 12, 8),
		0.90: row(0.90, 1, 0, 0, 12, 8),
		0.95: row(0.95, 1, 0, 0, 12, 8),
		1.00: row(1.00, 0, 0, 0, 12, 8),
	}
	for _, r := range rep.Thresholds {
		if w, ok := want[r.Threshold]; ok {
			sameRow(t, "sweep", r, w)
		}
	}
	if rep.Recommended == nil || *rep.Recommended != 0.85 {
		t.Errorf("recommended %v, want 0.85", rep.Recommended)
	}
	if rep.ConfiguredThreshold != 0.8 || rep.KindsAt != 0.85 {
		t.Errorf("configured %v, kinds at %v", rep.ConfiguredThreshold, rep.KindsAt)
	}
	if !strings.Contains(rep.Recommendation, "0.85") || !strings.Contains(rep.Recommendation, "the config has 0.80") {
		t.Errorf("recommendation %q", rep.Recommendation)
	}

	// Per kind, at 0.85: alpha has c01 and c03 right; beta substitutes
	// nothing and its c13 failed.
	if len(rep.Kinds) != 2 {
		t.Fatalf("kinds: %+v", rep.Kinds)
	}
	a, b := rep.Kinds[0], rep.Kinds[1]
	if a.Kind != "alpha" || a.Cases != 6 || a.Measured != 6 || a.Errors != 0 || a.WithRightTool != 4 {
		t.Errorf("alpha counts %+v", a)
	}
	sameRow(t, "alpha", a.Row, row(0.85, 2, 0, 0, 6, 4))
	if b.Kind != "beta" || b.Cases != 7 || b.Measured != 6 || b.Errors != 1 || b.WithRightTool != 4 {
		t.Errorf("beta counts %+v", b)
	}
	sameRow(t, "beta", b.Row, row(0.85, 0, 0, 0, 6, 4))

	// Tokens: case i used 100+i in and 10+i out; c13 got no answer.
	c := rep.Cost
	if c.Requeries != 12 || c.InputTokens != 1278 || c.OutputTokens != 198 || c.TotalTokens != 1476 || c.Retries != 0 {
		t.Errorf("cost %+v", c)
	}
	if !(c.LatencyP50MS > 0 && c.LatencyP50MS <= c.LatencyP95MS) {
		t.Errorf("latency p50 %v p95 %v", c.LatencyP50MS, c.LatencyP95MS)
	}

	// The printed table carries the same numbers.
	var out bytes.Buffer
	if err := WriteTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("the table:\n%s", out.String())
	lines := map[string]bool{}
	for _, l := range strings.Split(out.String(), "\n") {
		lines[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, l := range []string{
		"13 cases: 12 measured, 1 failed, 0 not run; 8 with a right tool",
		"decisions: 9 substitute (3 rejected by the checks), 2 escalate, 1 invalid",
		"threshold substituted subst.rate precision wrong escal.rate recall",
		"0.00 6 50.0% 66.7% 2 50.0% 50.0%",
		"0.55 5 41.7% 60.0% 2 58.3% 37.5%",
		"0.65 4 33.3% 75.0% 1 66.7% 37.5%",
		"0.80 3 25.0% 66.7% 1 75.0% 25.0% <- config",
		"0.85 2 16.7% 100.0% 0 83.3% 25.0% <- recommended",
		"0.95 1 8.3% 100.0% 0 91.7% 12.5%",
		"1.00 0 0.0% - 0 100.0% 0.0%",
		"by kind, at threshold 0.85:",
		"alpha 6 2 100.0% 0 66.7% 50.0% 0",
		"beta 7 0 - 0 100.0% 0.0% 1",
	} {
		if !lines[l] {
			t.Errorf("table lacks %q:\n%s", l, out.String())
		}
	}
	if !strings.Contains(out.String(), "cost: 12 re-queries, 1476 tokens (1278 in, 198 out)") {
		t.Errorf("table lacks the cost line:\n%s", out.String())
	}
}

// row builds the expected row at threshold t from the counts that define
// it: correct and wrong substitutions, out of n measured cases of which
// right have a right tool.
func row(t float64, correct, wrongTool, shouldEscalate, n, right int) Row {
	s := correct + wrongTool + shouldEscalate
	r := Row{Threshold: t, Substituted: s, Correct: correct, Wrong: wrongTool + shouldEscalate,
		WrongTool: wrongTool, ShouldEscalate: shouldEscalate, Escalated: n - s,
		SubstitutionRate: float64(s) / float64(n), EscalationRate: float64(n-s) / float64(n)}
	if s > 0 {
		r.Precision = fptr(float64(correct) / float64(s))
	}
	if right > 0 {
		r.Recall = fptr(float64(correct) / float64(right))
	}
	return r
}

func sameRow(t *testing.T, what string, got, want Row) {
	t.Helper()
	eq := func(a, b *float64) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return math.Abs(*a-*b) < 1e-12
	}
	if got.Threshold != want.Threshold || got.Substituted != want.Substituted || got.Correct != want.Correct ||
		got.Wrong != want.Wrong || got.WrongTool != want.WrongTool || got.ShouldEscalate != want.ShouldEscalate ||
		got.Escalated != want.Escalated || math.Abs(got.SubstitutionRate-want.SubstitutionRate) > 1e-12 ||
		math.Abs(got.EscalationRate-want.EscalationRate) > 1e-12 || !eq(got.Precision, want.Precision) || !eq(got.Recall, want.Recall) {
		t.Errorf("%s at %.2f:\n got %s\nwant %s", what, want.Threshold, showRow(got), showRow(want))
	}
}

func showRow(r Row) string {
	b, _ := json.Marshal(r)
	return string(b)
}

// TestRecordsPerCase checks what a result line says about each kind of
// ending, since the results file is what people read to see why.
func TestRecordsPerCase(t *testing.T) {
	cases, script := suite()
	_, snap := newUpstream(t, script)
	path := t.TempDir() + "/results.jsonl"
	runEval(t, context.Background(), snap, cases, Options{ResultsPath: path})
	st, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	check := func(id, decision, tool, outcome string, conf *float64, valid, correct bool) {
		t.Helper()
		r, ok := st.get(id)
		if !ok {
			t.Fatalf("%s not recorded", id)
		}
		confOK := (conf == nil && r.Confidence == nil) || (conf != nil && r.Confidence != nil && *conf == *r.Confidence)
		if r.Decision != decision || r.Tool != tool || r.Outcome != outcome || !confOK || r.Valid != valid || r.Correct != correct || r.Error != "" {
			t.Errorf("%s: %+v", id, r)
		}
		if r.LatencyMS <= 0 || r.Model != testModel || r.CatalogVersion != snap.Version || r.Key == "" {
			t.Errorf("%s: latency %v model %q catalog %q key %q", id, r.LatencyMS, r.Model, r.CatalogVersion, r.Key)
		}
	}
	check("c01", "substitute", "get_weather", "substituted", fptr(0.95), true, true)
	check("c04", "substitute", "calculator", "substituted", fptr(0.81), true, false)
	check("c06", "escalate", "", "escalated", fptr(0.9), false, false)
	check("c07", "substitute", "calculator", "invalid_decision", fptr(0.97), false, true)
	check("c08", "invalid", "", "invalid_decision", nil, false, false)
	check("c09", "substitute", "issue_refund", "confirmation_required", fptr(0.99), true, false)
	check("c11", "substitute", "get_secret", "invalid_decision", fptr(0.93), false, false)
	r, _ := st.get("c13")
	if r.Error == "" || r.Decision != "" {
		t.Errorf("c13: %+v", r)
	}
	if r, _ := st.get("c01"); r.InputTokens != 101 || r.OutputTokens != 11 {
		t.Errorf("c01 tokens %d/%d", r.InputTokens, r.OutputTokens)
	}
}

func TestRecommendationNone(t *testing.T) {
	cases := []Case{
		{ID: "a", Kind: "k", Expected: "x"},
		{ID: "b", Kind: "k", Expected: "y"},
	}
	results := map[string]CaseResult{
		"a": {ID: "a", Decision: "substitute", Outcome: OutcomeSubstituted, Tool: "x", Confidence: fptr(0.5)},
		"b": {ID: "b", Decision: "substitute", Outcome: OutcomeSubstituted, Tool: "x", Confidence: fptr(0.9)},
	}
	rep := Summarize(cases, results, Meta{MinPrecision: 0.95, ConfiguredThreshold: 0.8})
	if rep.Recommended != nil {
		t.Fatalf("recommended %v, want none", *rep.Recommended)
	}
	if !strings.Contains(rep.Recommendation, "no threshold reaches a precision of 95.0%") {
		t.Errorf("recommendation %q", rep.Recommendation)
	}
	if rep.KindsAt != 0.8 {
		t.Errorf("kinds at %v, want the configured 0.8", rep.KindsAt)
	}
	// Above 0.9 nothing is substituted: precision is undefined, which is
	// not a pass.
	last := rep.Thresholds[Steps]
	if last.Precision != nil || last.Substituted != 0 {
		t.Errorf("row at 1.0: %+v", last)
	}
	// A lower bar is met at the lowest threshold that reaches it.
	rep = Summarize(cases, results, Meta{MinPrecision: 0.5, ConfiguredThreshold: 0.8})
	if rep.Recommended == nil || *rep.Recommended != 0 {
		t.Errorf("recommended %v, want 0", rep.Recommended)
	}
}

func TestPercentile(t *testing.T) {
	vs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct{ p, want float64 }{{50, 5}, {95, 10}, {10, 1}, {100, 10}} {
		if got := percentile(vs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty percentile")
	}
}

// TestCasesChecked makes sure labelling mistakes stop the run before any
// request is made.
func TestCasesChecked(t *testing.T) {
	up, snap := newUpstream(t, nil)
	bad := []Case{
		tcase("real", "k", "q", "get_weather", `{"city":"Oslo"}`, "get_weather"),
		tcase("nolabel", "k", "q", "fetch_weather", `{}`, ""),
		tcase("missing", "k", "q", "fetch_weather", `{}`, "get_forecast"),
		tcase("confirm", "k", "q", "refund_order", `{}`, "issue_refund"),
		tcase("nosub", "k", "q", "read_secret", `{}`, "get_secret"),
		{ID: "nomsg", Kind: "k", BadCall: BadCall{Name: "x"}, Expected: ExpectEscalate},
	}
	_, err := Run(context.Background(), snap, bad, Options{Model: testModel})
	if err == nil {
		t.Fatal("bad cases were accepted")
	}
	for _, want := range []string{
		`case "real": bad_call "get_weather" names a tool of this case`,
		`case "nolabel": not labelled`,
		`case "missing": expected tool "get_forecast" is not a tool of this case`,
		`case "confirm": expected tool "issue_refund" is not substitutable`,
		`case "nosub": expected tool "get_secret" is not substitutable`,
		`case "nomsg": no messages`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if up.requests() != 0 {
		t.Errorf("%d requests made for invalid cases", up.requests())
	}
	if _, err := Run(context.Background(), snap, nil, Options{}); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("no model: %v", err)
	}
}

func TestReadCases(t *testing.T) {
	in := `{"id":"a","kind":"k","messages":[{"role":"user","content":"hi"}],"bad_call":{"name":"x","arguments":{"q":1}},"expected":"escalate"}

{"id":"a","kind":"k","messages":[],"bad_call":{"name":"x"},"expected":"escalate"}
{"id":"b","kind":"k","messages":[],"bad_call":{"name":"x"},"expect":"escalate"}
{"kind":"k"}
not json
`
	_, err := ReadCases(strings.NewReader(in))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"4 problem(s)", `line 3: id "a" is already used on line 1`, `line 4: json: unknown field "expect"`, "line 5: the case has no id", "line 6:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	cs, err := ReadCases(strings.NewReader(strings.SplitN(in, "\n", 2)[0]))
	if err != nil || len(cs) != 1 || cs[0].BadCall.Name != "x" || string(cs[0].BadCall.Arguments) != `{"q":1}` {
		t.Fatalf("%v %+v", err, cs)
	}
}
