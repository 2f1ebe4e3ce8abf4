package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCommand runs `toolgate eval` end to end on files: the table on
// stdout, the JSON and HTML reports, and the results file.
func TestCommand(t *testing.T) {
	cases, script := suite()
	_, snap := newUpstream(t, script)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, testConfig, snap.Config.Upstreams[0].URL), 0o600); err != nil {
		t.Fatal(err)
	}
	var cb bytes.Buffer
	if err := WriteCases(&cb, cases); err != nil {
		t.Fatal(err)
	}
	casesPath := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(casesPath, cb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, page, results := filepath.Join(dir, "report.json"), filepath.Join(dir, "report.html"), filepath.Join(dir, "results.jsonl")
	var stdout, stderr bytes.Buffer
	code := command(context.Background(), []string{"--config", cfg, "--cases", casesPath, "--model", testModel,
		"--out", out, "--html", page, "--results", results, "--concurrency", "2", "--min-precision", "0.7"}, &stdout, &stderr)
	// c13 cannot be measured, and a run with failures says so in its code.
	if code != ExitFailed || !strings.Contains(stderr.String(), "1 case(s) failed") {
		t.Fatalf("exit %d\nstderr: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "<- recommended") || !strings.Contains(stdout.String(), "set recovery.confidence_threshold to 0.65") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	// Not a terminal: the progress is plain lines, ending with a summary.
	if !strings.Contains(stderr.String(), "eval: 13/13 cases in") || strings.Contains(stderr.String(), "\r") {
		t.Errorf("progress on a non-terminal:\n%q", stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(mustRead(t, out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Recommended == nil || *rep.Recommended != 0.65 || rep.Measured != 12 || len(rep.Thresholds) != 21 {
		t.Errorf("JSON report: recommended %v measured %d rows %d", rep.Recommended, rep.Measured, len(rep.Thresholds))
	}
	if !bytes.HasPrefix(mustRead(t, page), []byte("<!DOCTYPE html>")) {
		t.Error("no HTML page")
	}
	if n := countLines(t, results); n != 13 {
		t.Errorf("results file has %d lines", n)
	}
	if st, err := os.Stat(results); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("results file mode %v, %v", st.Mode(), err)
	}

	for _, bad := range [][]string{
		{"--config", cfg, "--model", testModel},
		{"--config", cfg, "--cases", casesPath},
		{"--config", cfg, "--cases", casesPath, "--model", testModel, "--min-precision", "2"},
		{"--from-sink", "x.jsonl"},
		{"stray"},
	} {
		stderr.Reset()
		if code := command(context.Background(), bad, &stdout, &stderr); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", bad, code, ExitUsage, stderr.String())
		}
	}

	// Interrupted before it starts: the report is written and says so.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stderr.Reset()
	code = command(ctx, []string{"--config", cfg, "--cases", casesPath, "--model", testModel, "--results", filepath.Join(dir, "other.jsonl")}, &stdout, &stderr)
	if code != ExitInterrupted || !strings.Contains(stderr.String(), "run the same command again") {
		t.Errorf("interrupted: exit %d, %s", code, stderr.String())
	}
}

func TestProgress(t *testing.T) {
	old := lineEvery
	lineEvery = 5 * time.Millisecond
	defer func() { lineEvery = old }()
	var b bytes.Buffer
	p := startProgress(&syncWriter{w: &b}, false, 4)
	p.add(false)
	p.add(true)
	time.Sleep(30 * time.Millisecond)
	p.add(false)
	p.add(false)
	p.finish()
	s := b.String()
	if !strings.Contains(s, "eval: 2/4 cases (50%)") || !strings.Contains(s, "left, 1 failed") || !strings.HasSuffix(s, "eval: 4/4 cases in 0:00, 1 failed\n") {
		t.Errorf("plain progress:\n%s", s)
	}

	b.Reset()
	p = startProgress(&syncWriter{w: &b}, true, 2)
	p.add(false)
	p.add(false)
	p.finish()
	if s := b.String(); !strings.HasPrefix(s, "\r[") || !strings.Contains(s, "2/2 100%") || !strings.HasSuffix(s, "\n") {
		t.Errorf("bar: %q", s)
	}
	if got := shortDuration(3*time.Hour + 4*time.Minute + 5*time.Second); got != "3:04:05" {
		t.Errorf("shortDuration %q", got)
	}
}

// syncWriter lets the progress goroutine and the test share a buffer.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
