package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/recovery"
)

// comparable drops what legitimately differs between two runs over the
// same results: the clock, measured latencies, and the interrupted flag.
func comparable(t *testing.T, rep *Report) string {
	t.Helper()
	c := *rep
	c.Generated = time.Time{}
	c.Cost.LatencyP50MS, c.Cost.LatencyP95MS = 0, 0
	c.Interrupted = false
	c.Endpoint = "" // each test upstream has its own port
	b, err := json.MarshalIndent(&c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

func TestResumeAfterInterrupt(t *testing.T) {
	cases, script := suite()
	_, snap := newUpstream(t, script)
	ref := runEval(t, context.Background(), snap, cases, Options{Concurrency: 1})

	up, snap := newUpstream(t, script)
	path := filepath.Join(t.TempDir(), "results.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The seventh request is where the user presses Ctrl-C: it is never
	// answered, so exactly six cases (fed in order, one at a time) finish.
	up.before = func(n int) bool {
		if n == 7 {
			cancel()
			return false
		}
		return true
	}
	first := runEval(t, ctx, snap, cases, Options{Concurrency: 1, ResultsPath: path})
	if !first.Interrupted || first.Measured != 6 || first.Errors != 0 || first.Pending != 7 {
		t.Fatalf("interrupted run: interrupted %v measured %d errors %d pending %d",
			first.Interrupted, first.Measured, first.Errors, first.Pending)
	}
	if n := countLines(t, path); n != 6 {
		t.Fatalf("results file has %d lines after the interruption, want 6", n)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, first); err != nil || !strings.Contains(table.String(), "the run was interrupted") {
		t.Errorf("the partial report does not say it is partial:\n%s", table.String())
	}

	up.mu.Lock()
	up.before = nil
	up.mu.Unlock()
	before := up.requests()
	second := runEval(t, context.Background(), snap, cases, Options{Concurrency: 3, ResultsPath: path})
	if got := up.requests() - before; got != 7 {
		t.Errorf("the resumed run asked %d times, want 7 (the cases not yet measured)", got)
	}
	if second.Interrupted {
		t.Error("the resumed run reports an interruption")
	}
	if a, b := comparable(t, second), comparable(t, ref); a != b {
		t.Errorf("the resumed report differs from an uninterrupted run's:\nresumed %s\n    ref %s", a, b)
	}

	// A third run reuses everything but the failed case, which is retried.
	before = up.requests()
	third := runEval(t, context.Background(), snap, cases, Options{ResultsPath: path})
	if got := up.requests() - before; got != 1 {
		t.Errorf("a complete results file still caused %d requests, want 1 (the failed case)", got)
	}
	if comparable(t, third) != comparable(t, ref) {
		t.Error("the report changed on a run that measured nothing new")
	}

	// A case whose content changed is measured again; a relabelled one is
	// not, since labels are read from the cases at report time.
	changed := append([]Case(nil), cases...)
	changed[0] = tcase("c01", "alpha", "Weather in Oslo, please?", "fetch_weather", `{"city":"Oslo"}`, "get_weather")
	changed[5].Expected = "web_search" // c06 escalated: now counted as a miss
	before = up.requests()
	fourth := runEval(t, context.Background(), snap, changed, Options{ResultsPath: path})
	if got := up.requests() - before; got != 2 {
		t.Errorf("%d requests after changing one case, want 2 (it and the failed one)", got)
	}
	if fourth.WithRightTool != 9 {
		t.Errorf("relabelling was not picked up: %d cases with a right tool, want 9", fourth.WithRightTool)
	}
}

func TestResultsFileCutOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	good := `{"id":"a","key":"k","decision":"escalate","confidence":0.5,"outcome":"escalated"}` + "\n" +
		"garbage in the middle\n" +
		`{"id":"b","key":"k","decision":"escalate","confidence":0.5,"outcome":"escalated"}` + "\n"
	if err := os.WriteFile(path, []byte(good+`{"id":"c","key":"k","deci`), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.rows) != 2 || st.skipped != 1 {
		t.Fatalf("rows %d skipped %d", len(st.rows), st.skipped)
	}
	if err := st.add(CaseResult{ID: "c", Key: "k", Decision: "escalate"}); err != nil {
		t.Fatal(err)
	}
	if err := st.close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), good) || strings.Contains(string(b), `"deci`+"\n") {
		t.Fatalf("the cut-off line was not dropped:\n%s", b)
	}
	st, err = openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if len(st.rows) != 3 || st.skipped != 1 {
		t.Errorf("after appending: rows %d skipped %d", len(st.rows), st.skipped)
	}

	// A last line that is whole but lacks its newline is kept, and the
	// next record starts a line of its own.
	path2 := filepath.Join(t.TempDir(), "r.jsonl")
	if err := os.WriteFile(path2, []byte(`{"id":"a","key":"k"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	st2, err := openStore(path2)
	if err != nil {
		t.Fatal(err)
	}
	_ = st2.add(CaseResult{ID: "b", Key: "k"})
	_ = st2.close()
	st2, _ = openStore(path2)
	defer st2.close()
	if len(st2.rows) != 2 || st2.skipped != 0 {
		t.Errorf("rows %d skipped %d", len(st2.rows), st2.skipped)
	}
}

func TestRetryAfter429(t *testing.T) {
	cases := []Case{tcase("r1", "k", "Weather in Oslo?", "fetch_weather", `{"city":"Oslo"}`, "get_weather")}
	script := map[string][]reply{"r1": {
		{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "1"}},
		{text: sub("get_weather", `{"city":"Oslo"}`, 0.9), in: 7, out: 3},
	}}
	up, snap := newUpstream(t, script)
	var mu sync.Mutex
	var at []time.Time
	up.before = func(int) bool {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		return true
	}
	rep := runEval(t, context.Background(), snap, cases, Options{})
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 {
		t.Fatalf("%d requests, want 2", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < time.Second {
		t.Errorf("retried after %v, before the retry-after of 1s", gap)
	}
	if rep.Measured != 1 || rep.Errors != 0 || rep.Cost.Retries != 1 || rep.Thresholds[0].Correct != 1 || rep.Cost.InputTokens != 7 {
		t.Errorf("measured %d errors %d retries %d correct %d tokens %d",
			rep.Measured, rep.Errors, rep.Cost.Retries, rep.Thresholds[0].Correct, rep.Cost.InputTokens)
	}
}

func TestRetriesBounded(t *testing.T) {
	old := baseRetryWait
	baseRetryWait = time.Millisecond
	defer func() { baseRetryWait = old }()
	cases := []Case{
		tcase("busy", "k", "Weather?", "fetch_weather", `{"city":"Oslo"}`, "get_weather"),
		tcase("flaky", "k", "Weather?", "fetch_weather", `{"city":"Oslo"}`, "get_weather"),
	}
	script := map[string][]reply{
		"busy":  {{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "0"}}},
		"flaky": {{status: http.StatusServiceUnavailable}, {text: sub("get_weather", `{"city":"Oslo"}`, 0.9)}},
	}
	up, snap := newUpstream(t, script)
	rep := runEval(t, context.Background(), snap, cases, Options{Retries: 2, Concurrency: 1})
	if got := up.requests(); got != 5 {
		t.Errorf("%d requests, want 3 for busy (1 + 2 retries) and 2 for flaky", got)
	}
	if rep.Errors != 1 || rep.Failures[0].ID != "busy" || !strings.Contains(rep.Failures[0].Error, "still failing after 2 retries") ||
		!strings.Contains(rep.Failures[0].Error, "429") {
		t.Errorf("failures %+v", rep.Failures)
	}
	if rep.Measured != 1 || rep.Cost.Retries != 3 {
		t.Errorf("measured %d retries %d", rep.Measured, rep.Cost.Retries)
	}
}

func TestRetryDelay(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	future := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	for _, c := range []struct {
		name    string
		header  http.Header
		attempt int
		lo, hi  time.Duration
	}{
		{"seconds", h("Retry-After", "2"), 0, 2 * time.Second, 2 * time.Second},
		{"milliseconds win", h("Retry-After-Ms", "1500", "Retry-After", "9"), 0, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{"http date", h("Retry-After", future), 0, 28 * time.Second, 30 * time.Second},
		{"capped", h("Retry-After", "86400"), 0, maxRetryWait, maxRetryWait},
		{"backoff", nil, 2, 4 * baseRetryWait, 4 * baseRetryWait},
		{"junk falls back", h("Retry-After", "soon"), 0, baseRetryWait, baseRetryWait},
	} {
		ue := &recovery.UpstreamError{Status: http.StatusTooManyRequests, Header: c.header}
		if d := retryDelay(ue, c.attempt); d < c.lo || d > c.hi {
			t.Errorf("%s: %v, want %v..%v", c.name, d, c.lo, c.hi)
		}
	}
}
