package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// foldedAnswer is a chat completion whose message holds a substitute in
// "content" and an escalation under "Content": Go's decoder and the SDKs
// read different ones, so toolgate refuses the whole answer.
func foldedAnswer() string {
	return fmt.Sprintf(`{"id":"chatcmpl-f","object":"chat.completion","model":%q,"choices":[{"index":0,"finish_reason":"stop",`+
		`"message":{"role":"assistant","content":%q,"Content":%q}}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`,
		testModel, sub("get_weather", `{"city":"Bergen"}`, 0.9), esc(0.9))
}

// TestEvalRunsToolgatesChecks measures three cases whose answers eval's
// own copy of the re-query (the codec's parser and the local checks)
// read as substitutions: toolgate keeps one, escalates the one its
// validator refuses, and refuses the answer with a folded key.
func TestEvalRunsToolgatesChecks(t *testing.T) {
	var judged atomic.Int32
	desk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Call struct {
				Tool      string `json:"tool"`
				Arguments struct {
					City string `json:"city"`
				} `json:"arguments"`
			} `json:"call"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		judged.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if req.Call.Arguments.City == "Lima" {
			fmt.Fprint(w, `{"allowed":false,"reasons":[{"pointer":"/city","message":"no forecasts for Lima"}]}`)
			return
		}
		fmt.Fprint(w, `{"allowed":true}`)
	}))
	defer desk.Close()
	cases := []Case{
		tcase("plain", "k", "Weather in Oslo?", "fetch_weather", `{"city":"Oslo"}`, "get_weather"),
		tcase("vetoed", "k", "Weather in Lima?", "clima", `{"ciudad":"Lima"}`, "get_weather"),
		tcase("folded", "k", "Weather in Bergen?", "weather_now", `{"city":"Bergen"}`, "get_weather"),
	}
	script := map[string][]reply{
		"plain":  {{text: sub("get_weather", `{"city":"Oslo"}`, 0.9)}},
		"vetoed": {{text: sub("get_weather", `{"city":"Lima"}`, 0.9)}},
		"folded": {{raw: foldedAnswer()}},
	}
	up, snap := newUpstreamWith(t, script, "validators:\n  - name: desk\n    url: "+desk.URL+"\n    tools: [get_weather]\n")

	// What the old copy saw: the message's content, read without a check
	// for folded keys, is a substitute (the codec itself now refuses the
	// answer, as toolgate does), and the local checks pass the vetoed
	// substitute.
	cd := openaichat.API{}.NewCodec()
	if _, err := cd.DecodeAnswer([]byte(foldedAnswer())); !errors.Is(err, api.ErrFoldedKey) {
		t.Fatalf("the codec reads the folded answer: %v", err)
	}
	var wire struct {
		Choices []struct{ Message map[string]json.RawMessage }
	}
	var content string
	if err := json.Unmarshal([]byte(foldedAnswer()), &wire); err != nil || len(wire.Choices) != 1 {
		t.Fatalf("folded answer: %v", err)
	}
	if err := json.Unmarshal(wire.Choices[0].Message["content"], &content); err != nil {
		t.Fatal(err)
	}
	if d, err := recovery.ParseProposal(content); err != nil || d.Decision != recovery.DecisionSubstitute {
		t.Fatalf("the content reads %+v, %v; the test needs a substitute", d, err)
	}
	rs, err := newSetup(snap, &Options{Model: testModel}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := prepare(snap, rs, cases[1])
	if err != nil {
		t.Fatal(err)
	}
	vetoed := validate.ToolCall{ID: "c", Name: "get_weather", Args: []byte(`{"city":"Lima"}`), Kind: validate.Function}
	if v := validate.Check(vetoed, &validate.Context{Effective: p.eff}); !v.Valid() {
		t.Fatalf("the local checks refuse the vetoed substitute (%v); the test needs one only the validator refuses", v.Codes())
	}

	path := filepath.Join(t.TempDir(), "results.jsonl")
	rep := runEval(t, context.Background(), snap, cases, Options{Concurrency: 1, Retries: -1, ResultsPath: path})
	if up.requests() != 3 {
		t.Errorf("the provider saw %d re-queries, want 3", up.requests())
	}
	st, err := openStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if r, _ := st.get("plain"); r.Outcome != OutcomeSubstituted || !r.Valid || r.Tool != "get_weather" || r.Confidence == nil || *r.Confidence != 0.9 || r.Error != "" {
		t.Errorf("plain: %+v", r)
	}
	if r, _ := st.get("vetoed"); r.Decision != recovery.DecisionSubstitute || r.Outcome != "invalid_decision" || r.Valid ||
		r.Confidence == nil || *r.Confidence != 0.9 || r.Error != "" || !strings.Contains(r.Reason, "arguments are not valid") {
		t.Errorf("vetoed: %+v, want the substitute escalated as invalid", r)
	}
	if r, _ := st.get("folded"); r.Decision != "" || !strings.Contains(r.Error, "toolgate refused the model's answer") {
		t.Errorf("folded: %+v, want an error: toolgate refuses the answer", r)
	}
	if n := judged.Load(); n != 2 {
		t.Errorf("the validator judged %d calls, want 2 (the substitutes of plain and vetoed)", n)
	}
	if rep.Measured != 2 || rep.Errors != 1 || rep.Thresholds[0].Correct != 1 {
		t.Errorf("measured %d errors %d correct %d", rep.Measured, rep.Errors, rep.Thresholds[0].Correct)
	}
}

// TestUnreachableUpstreamRetried checks that a re-query that reaches no
// provider is retried like a 5xx, and that the result says why it failed.
func TestUnreachableUpstreamRetried(t *testing.T) {
	old := baseRetryWait
	baseRetryWait = time.Millisecond
	defer func() { baseRetryWait = old }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	t.Setenv("EVAL_TEST_KEY", testKey)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, testConfig, closed), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := LoadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := []Case{tcase("gone", "k", "Weather in Oslo?", "fetch_weather", `{"city":"Oslo"}`, "get_weather")}
	rep := runEval(t, context.Background(), snap, cases, Options{Retries: 1})
	if rep.Errors != 1 || rep.Cost.Retries != 1 || !strings.Contains(rep.Failures[0].Error, "still failing after 1 retries") ||
		!strings.Contains(rep.Failures[0].Error, "the upstream could not be reached") {
		t.Errorf("errors %d retries %d failures %+v", rep.Errors, rep.Cost.Retries, rep.Failures)
	}
}
