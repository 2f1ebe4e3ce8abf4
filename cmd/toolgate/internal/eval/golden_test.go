package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// goldenKinds are the kinds the shipped set must cover.
var goldenKinds = []string{"namespace_dropped", "verb_synonym", "case_style", "transposed_letters", "plural", "invented_generic", "no_tool"}

func loadGolden(t *testing.T, upstream string) (*catalog.Snapshot, []Case) {
	t.Helper()
	cfg, err := catalog.LoadConfig("golden/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstreams[0].URL = upstream
	t.Setenv(cfg.Upstreams[0].APIKeyEnv, testKey)
	snap, err := CompileForEval(cfg, "golden")
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open("golden/golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cases, err := ReadCases(fh)
	if err != nil {
		t.Fatal(err)
	}
	return snap, cases
}

// TestGoldenSetIsSound checks the shipped set itself: enough cases of every
// kind, every bad call a genuinely unknown tool, every label a tool that
// recovery can choose (prepare refuses anything else).
func TestGoldenSetIsSound(t *testing.T) {
	snap, cases := loadGolden(t, "http://127.0.0.1:9")
	if n := len(snap.Tools); n < 18 || n > 24 {
		t.Errorf("the golden catalog has %d tools, want about 20", n)
	}
	if len(cases) < 60 {
		t.Errorf("%d golden cases, want at least 60", len(cases))
	}
	rs, err := newSetup(snap, &Options{Model: testModel}, nil)
	if err != nil {
		t.Fatal(err)
	}
	perKind := map[string]int{}
	escalate := 0
	for _, c := range cases {
		perKind[c.Kind]++
		if c.Expected == ExpectEscalate {
			escalate++
		}
		p, err := prepare(snap, rs, c)
		if err != nil {
			t.Errorf("%s: %v", c.ID, err)
			continue
		}
		v := validate.Check(p.resp.Choices[0].Calls[0], &validate.Context{Effective: p.eff, Evidence: validate.NewCorpus(p.req.Vouching)})
		if cs := v.Codes(); len(cs) != 1 || cs[0] != validate.UnknownTool {
			t.Errorf("%s: the bad call yields %v, want unknown_tool alone", c.ID, cs)
		}
	}
	for _, k := range goldenKinds {
		if perKind[k] < 8 {
			t.Errorf("kind %s has %d cases, want at least 8", k, perKind[k])
		}
	}
	if len(perKind) != len(goldenKinds) {
		t.Errorf("kinds %v", perKind)
	}
	if escalate < 15 || escalate > len(cases)/2 {
		t.Errorf("%d cases expect an escalation", escalate)
	}
}

// oracle is a scripted model for the golden set: it mostly picks the
// labelled answer, with confidences and mistakes spread deterministically
// by case id, so the report has a curve worth looking at.
type oracle struct {
	mu    sync.Mutex
	byKey map[string]Case
	n     int
}

func (o *oracle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role      string `json:"role"`
			Content   any    `json:"content"`
			ToolCalls []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) < 4 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	user, _ := req.Messages[1].Content.(string)
	name := req.Messages[len(req.Messages)-2].ToolCalls[0].Function.Name
	o.mu.Lock()
	c, ok := o.byKey[name+"\x00"+user]
	o.n++
	o.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":{"message":"unknown case"}}`, http.StatusBadRequest)
		return
	}
	hf := fnv.New32a()
	hf.Write([]byte(c.ID))
	h := float64(hf.Sum32() % 100)
	query, _ := json.Marshal(map[string]string{"query": user})
	var text string
	switch {
	case c.Expected == ExpectEscalate && h < 25:
		text = sub("web_search", string(query), 0.5+float64(int(h)%25)*0.02)
	case c.Expected == ExpectEscalate:
		text = esc(0.8)
	case h < 8:
		other := "web_search"
		if c.Expected == other {
			other = "kb_search_articles"
		}
		text = sub(other, string(query), 0.55+float64(int(h)%8)/100)
	case h < 15:
		text = esc(0.3 + h/100)
	default:
		text = sub(c.Expected, string(c.BadCall.Arguments), 0.7+float64(int(h)%30)/100)
	}
	writeCompletion(w, text, 900+int64(h), 40+int64(h)/2)
}

// TestGoldenSetRuns runs the whole golden set against the oracle, the way
// an operator runs it against a real model. Set EVAL_GOLDEN_OUT to a folder
// to keep the JSON and HTML reports.
func TestGoldenSetRuns(t *testing.T) {
	o := &oracle{byKey: map[string]Case{}}
	srv := httptest.NewServer(o)
	defer srv.Close()
	snap, cases := loadGolden(t, srv.URL)
	for _, c := range cases {
		var user struct{ Content string }
		_ = json.Unmarshal(c.Messages[1], &user)
		o.byKey[c.BadCall.Name+"\x00"+user.Content] = c
	}
	rep := runEval(t, context.Background(), snap, cases, Options{Concurrency: 8})
	if rep.Measured != len(cases) || rep.Errors != 0 || o.n != len(cases) {
		t.Fatalf("measured %d of %d, errors %d %v, requests %d", rep.Measured, len(cases), rep.Errors, rep.Failures, o.n)
	}
	if len(rep.Kinds) != len(goldenKinds) {
		t.Errorf("kinds in the report: %d", len(rep.Kinds))
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("golden set against the oracle:\n%s", table.String())
	if dir := os.Getenv("EVAL_GOLDEN_OUT"); dir != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		var page bytes.Buffer
		if err := WriteHTML(&page, rep); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{"report.json": b, "report.html": page.Bytes(), "table.txt": table.Bytes()} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !strings.Contains(table.String(), "namespace_dropped") {
		t.Error("the per-kind table lacks a kind")
	}
}

// eval says when it measures something other than what the config asks
// for, and says nothing when the config already matches.
func TestSetupNotesOverrides(t *testing.T) {
	_, snap := newUpstream(t, nil)
	var log strings.Builder
	if _, err := newSetup(snap, &Options{Model: testModel}, &log); err != nil {
		t.Fatal(err)
	}
	if log.Len() != 0 {
		t.Errorf("notes for a config eval runs as it is:\n%s", log.String())
	}
	three := 3
	snap.Config.Recovery.MaxAttempts = &three
	snap.Config.Recovery.Strategy = catalog.StrategyCorrection
	log.Reset()
	rs, err := newSetup(snap, &Options{Model: testModel}, &log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`recovery.strategy is "correction"`, "recovery.max_attempts is 3"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("notes do not say %q:\n%s", want, log.String())
		}
	}
	if rs.settings.Strategy != catalog.StrategyDecision || rs.settings.RecoveryAttempts != 1 || rs.settings.RepromptAttempts != 0 {
		t.Errorf("settings %+v, want decision, one re-query, no reprompt", rs.settings)
	}

	// The run's toolgate reads exactly these settings from its snapshot,
	// and calls nothing but the front, without a key.
	snap.Config.Mode = catalog.ModeShadow
	snap.Config.Abstain.Enabled = true
	ps := proxySnapshot(snap, rs.settings, "http://127.0.0.1:1")
	if got := recovery.SettingsFrom(ps); got != rs.settings {
		t.Errorf("toolgate's settings\n %+v\nwant\n %+v", got, rs.settings)
	}
	c := ps.Config
	if len(c.Upstreams) != 1 || c.Upstreams[0].URL != "http://127.0.0.1:1" || len(ps.Secrets.UpstreamKeys) != 0 ||
		c.Abstain.Enabled || c.Escalation.Mode != catalog.EscalationError {
		t.Errorf("toolgate's config: upstreams %+v keys %d abstain %v escalation %q",
			c.Upstreams, len(ps.Secrets.UpstreamKeys), c.Abstain.Enabled, c.Escalation.Mode)
	}
	if snap.Config.Mode != catalog.ModeShadow || snap.Config.Upstreams[0].URL == "http://127.0.0.1:1" {
		t.Error("proxySnapshot changed the snapshot it was given")
	}
}
