package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// ChatPath is where the re-queries go on the first upstream: eval always
// speaks Chat Completions.
const ChatPath = "/v1/chat/completions"

// Defaults of Options.
const (
	DefaultConcurrency  = 4
	DefaultRetries      = 5
	DefaultMinPrecision = 0.95
)

// Retry pacing. A retry-after longer than maxRetryWait is cut to it, so a
// confused upstream cannot park the run for hours; without a header the
// wait doubles from baseRetryWait.
var (
	baseRetryWait = time.Second
	maxRetryWait  = 2 * time.Minute
)

// Options configure a Run.
type Options struct {
	// Model is the request's "model".
	Model string
	// Concurrency bounds the cases in flight; 0 means DefaultConcurrency.
	Concurrency int
	// Retries bounds how often one case is retried after a retryable
	// upstream answer (429, 5xx, timeouts); 0 means DefaultRetries and a
	// negative value none.
	Retries int
	// MinPrecision is the precision the recommended threshold must reach.
	MinPrecision float64
	// ResultsPath, when set, is a JSONL file of per-case results: cases
	// already in it are not run again, and every new result is appended as
	// soon as it is known, so an interrupted run loses nothing.
	ResultsPath string
	// Progress receives progress output; nil for none.
	Progress io.Writer
	// Interactive draws a progress bar instead of periodic lines.
	Interactive bool
	// Log receives notes (resumed results, settings eval overrides).
	Log io.Writer
}

// LoadSnapshot reads the config at path as serve does, minus what eval does
// not use: listeners, inbound auth, escalation sinks and shadow mode are
// neutralised, so their environment variables need not be set to measure.
func LoadSnapshot(path string) (*catalog.Snapshot, error) {
	cfg, err := catalog.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	return CompileForEval(cfg, filepath.Dir(path))
}

// CompileForEval compiles cfg for eval (see LoadSnapshot). It changes cfg.
func CompileForEval(cfg *catalog.Config, baseDir string) (*catalog.Snapshot, error) {
	cfg.Mode = catalog.ModeEnforce
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminListen = "127.0.0.1:0"
	cfg.InboundAuth = catalog.InboundAuth{}
	cfg.Escalation.Sinks = catalog.Sinks{}
	snap, err := catalog.Compile(cfg, baseDir)
	if err != nil {
		return nil, err
	}
	if len(snap.Config.Upstreams) == 0 {
		return nil, errors.New("the config has no upstream to ask")
	}
	return snap, nil
}

// runSetup is what every case of a run shares.
type runSetup struct {
	snap  *catalog.Snapshot
	model string
	// settings are the ladder's in the run's toolgate; settings.Prompt is
	// the template with the configured threshold filled in.
	settings     recovery.Settings
	catalogTools []json.RawMessage
	// upstream is the config's first, where re-queries go: at endpoint,
	// with key.
	upstream catalog.Upstream
	endpoint string
	key      string
	retries  int
	gate     gate
	srv      *served
}

// newSetup derives the run's settings from the snapshot: serve's own, with
// the threshold at 0 so every decision is recorded, and with the decision
// strategy and exactly one re-query per case whatever the config says.
func newSetup(snap *catalog.Snapshot, opt *Options, log io.Writer) (*runSetup, error) {
	if strings.TrimSpace(opt.Model) == "" {
		return nil, errors.New("a model is needed (--model): it is the re-query's \"model\"")
	}
	if log == nil {
		log = io.Discard
	}
	cfg := snap.Config
	s := recovery.SettingsFrom(snap)
	if s.Strategy != catalog.StrategyDecision {
		fmt.Fprintf(log, "note: recovery.strategy is %q in the config; eval measures the decision strategy\n", s.Strategy)
		s.Strategy = catalog.StrategyDecision
	}
	if s.RecoveryAttempts != 1 {
		fmt.Fprintf(log, "note: recovery.max_attempts is %d in the config; eval asks once per case\n", s.RecoveryAttempts)
	}
	s.RecoveryAttempts, s.RepromptAttempts = 1, 0
	s.Shadow, s.AbstainTool = false, ""
	// The prompt tells the model the configured threshold, as serve's
	// does; only the ladder's own test runs at 0. The placeholder is filled
	// here, before FillPrompt's single pass, which leaves no placeholder
	// for it to find: the result is the prompt serve would send.
	tmpl := s.Prompt
	if tmpl == "" {
		tmpl = recovery.DefaultPrompt
	}
	s.Prompt = strings.ReplaceAll(tmpl, recovery.PlaceholderThreshold, strconv.FormatFloat(s.Threshold, 'f', -1, 64))
	s.Threshold = 0

	up := cfg.Upstreams[0]
	base, err := url.Parse(up.URL)
	if err != nil {
		return nil, fmt.Errorf("upstreams[0].url: %w", err)
	}
	base.Path = strings.TrimSuffix(base.Path, "/") + ChatPath
	base.RawPath, base.RawQuery = "", ""
	rs := &runSetup{
		snap:     snap,
		model:    opt.Model,
		settings: s,
		upstream: up,
		endpoint: base.String(),
		key:      snap.Secrets.UpstreamKeys[up.Name],
		retries:  opt.Retries,
		// Built once: every case without tools of its own offers these.
		catalogTools: catalogTools(snap),
	}
	return rs, nil
}

// snippet is the start of an error body, for a result's error text. Error
// bodies are the provider's, never the conversation's.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// gate pauses every worker after a 429: the limit is the account's, not
// one case's, so all of them must wait out the retry-after.
type gate struct {
	mu    sync.Mutex
	until time.Time
}

func (g *gate) pauseFor(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := time.Now().Add(d); t.After(g.until) {
		g.until = t
	}
}

func (g *gate) wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		d := time.Until(g.until)
		g.mu.Unlock()
		if d <= 0 {
			return nil
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryDelay is how long to wait before retrying after ue: the provider's
// retry-after-ms or retry-after when given (seconds or an HTTP date), else
// an exponential backoff; never more than maxRetryWait.
func retryDelay(ue *recovery.UpstreamError, attempt int) time.Duration {
	d := time.Duration(-1)
	if h := http.Header(ue.Header); h != nil {
		if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
			if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
				d = time.Duration(ms * float64(time.Millisecond))
			}
		}
		if v := strings.TrimSpace(h.Get("Retry-After")); d < 0 && v != "" {
			if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
				d = time.Duration(s * float64(time.Second))
			} else if t, err := http.ParseTime(v); err == nil {
				d = max(time.Until(t), 0)
			}
		}
	}
	if d < 0 {
		d = baseRetryWait << min(attempt, 10)
	}
	return min(d, maxRetryWait)
}

// runCase runs one case to a result, retrying retryable upstream answers.
// It reports false when the run was stopped before the case finished: such
// a case is not recorded, and runs again on resume.
func (rs *runSetup) runCase(ctx context.Context, p *prepared) (CaseResult, bool) {
	var tokens recovery.Usage
	for attempt := 0; ; attempt++ {
		row, ue, ok := rs.tryOnce(ctx, p)
		if !ok {
			return CaseResult{}, false
		}
		tokens.Input += row.InputTokens
		tokens.Output += row.OutputTokens
		row.InputTokens, row.OutputTokens = tokens.Input, tokens.Output
		row.Retries = attempt
		if ue == nil {
			return row, true
		}
		if attempt >= rs.retries {
			row.Error = fmt.Sprintf("still failing after %d retries: %s", attempt, row.Error)
			return row, true
		}
		d := retryDelay(ue, attempt)
		if ue.Status == http.StatusTooManyRequests {
			rs.gate.pauseFor(d)
		} else if sleep(ctx, d) != nil {
			return CaseResult{}, false
		}
	}
}

// tryOnce sends one case through toolgate and reads what it did. A
// retryable upstream failure is returned for runCase to retry.
func (rs *runSetup) tryOnce(ctx context.Context, p *prepared) (CaseResult, *recovery.UpstreamError, bool) {
	// Waiting out a 429 happens here, before the request, so that the
	// pause does not eat into recovery.deadline.
	if rs.gate.wait(ctx) != nil {
		return CaseResult{}, nil, false
	}
	t := rs.srv.front.issue(p.answer)
	defer rs.srv.front.drop(t)
	ans, err := rs.srv.ask(ctx, p.body, t)
	if ctx.Err() != nil {
		return CaseResult{}, nil, false
	}
	latency, failure := t.seen()
	row := CaseResult{
		ID:             p.testCase.ID,
		Kind:           p.testCase.Kind,
		Key:            p.key,
		Expected:       p.testCase.Expected,
		CatalogVersion: rs.snap.Version,
		Model:          rs.model,
		LatencyMS:      float64(latency.Microseconds()) / 1000,
		Time:           time.Now().UTC(),
	}
	if err != nil {
		row.Error = err.Error()
		return row, nil, true
	}
	row.InputTokens, row.OutputTokens = ans.requeryTokens()
	if ans.header.Get("X-Toolgate-Outcome") == "" {
		// Nothing was decided: toolgate passed a failed re-query on as the
		// provider sent it (the client's SDK would retry), or answered an
		// error of its own.
		if failure == "" {
			failure = fmt.Sprintf("toolgate answered status %d: %s", ans.status, snippet(ans.body))
		}
		row.Error = failure
		if pipeline.RetryableStatus(ans.status) {
			return row, &recovery.UpstreamError{Status: ans.status, Header: ans.header, Retryable: true}, true
		}
		return row, nil, true
	}
	classify(&row, ans, callID(p.testCase.ID), failure)
	return row, nil, true
}

// classify reads the decision out of toolgate's answer. At threshold 0 the
// only ways to end are: substituted; an escalation after a decision
// (escalate, an invalid answer, a substitute that failed its checks or
// needs confirmation); or a failure to get an answer at all, which is not a
// measurement and is recorded as an error. failure is the front's account
// of a re-query that got no answer.
func classify(row *CaseResult, ans *answered, id, failure string) {
	for _, ev := range ans.steps {
		if ev.Strategy == catalog.StrategyDecision && ev.Confidence >= 0 {
			c := ev.Confidence
			row.Confidence = &c
		}
	}
	switch outcome := ans.header.Get("X-Toolgate-Outcome"); recovery.Outcome(outcome) {
	case recovery.Substituted:
		tool, err := calledTool(ans.body, id)
		switch {
		case err != nil:
			row.Error = err.Error()
		case row.Confidence == nil:
			row.Error = "toolgate substituted, but no decision confidence was observed"
		default:
			row.Decision, row.Outcome, row.Valid = recovery.DecisionSubstitute, OutcomeSubstituted, true
			row.Tool, row.Correct = tool, tool == row.Expected
		}
	case recovery.Escalated:
		label, e, err := escalationIn(ans.body)
		if err != nil {
			row.Error = err.Error()
			return
		}
		classifyEscalation(row, label, e, failure)
	default:
		row.Error = fmt.Sprintf("toolgate ended the case with outcome %q and no decision", outcome)
	}
}

// classifyEscalation reads an escalation: the decision that led to it, or
// why there was none.
func classifyEscalation(row *CaseResult, label string, e *recovery.Escalation, failure string) {
	for _, at := range e.Attempts {
		if at.Kind != "upstream_error" {
			continue
		}
		switch {
		case failure != "":
			row.Error = failure
		case at.Status != 0:
			row.Error = fmt.Sprintf("the upstream answered status %d", at.Status)
		default:
			row.Error = "toolgate refused the model's answer to the re-query: over limits.max_response_bytes, " +
				"a key that differs from a protocol key only in letter case, or not a chat completion"
		}
		return
	}
	if label == "deadline" {
		row.Error = "recovery.deadline passed before the model answered"
		return
	}
	row.Reason = e.Reason
	for _, at := range e.Attempts {
		if at.Kind != "decision" {
			continue
		}
		if at.Confidence != nil {
			c := *at.Confidence
			row.Confidence = &c
		}
		switch at.Decision {
		case recovery.DecisionSubstitute:
			row.Decision, row.Tool = recovery.DecisionSubstitute, at.Tool
			row.Outcome = label
			// A confirm tool's substitute passed every check; serve hands
			// it to a person instead of running it.
			row.Valid = label == string(validate.ConfirmationRequired)
			row.Correct = row.Tool == row.Expected
		case recovery.DecisionEscalate:
			row.Decision, row.Outcome = recovery.DecisionEscalate, OutcomeEscalated
		default:
			row.Decision, row.Outcome = DecisionInvalid, "invalid_decision"
		}
		return
	}
	row.Error = fmt.Sprintf("escalated (%s) before the model decided: %s", label, e.Reason)
}
