package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/otlptest"
)

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestVersionAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "toolgate ") {
		t.Fatalf("version: code %d, %q", code, out.String())
	}
	if code := run([]string{"bogus"}, &out, &errb); code != 2 {
		t.Fatalf("unknown command: code %d", code)
	}
}

func TestCheckExampleConfig(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--config", "../../config.yaml"}, &out, &errb); code != 0 {
		t.Fatalf("check of the shipped config.yaml: code %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "valid; catalog version") {
		t.Fatalf("check output: %q", out.String())
	}
	// The fit table of the example catalog: the refund's minimum keeps it
	// out of Anthropic's subset, the search's open object out of both.
	for _, line := range []string{"  openai (chat, responses):\n    fit: get_order, issue_refund\n",
		"    issue_refund: /properties/amount_cents: minimum is outside the subset\n",
		"    web_search: /: additionalProperties must be false\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("check output lacks %q:\n%s", line, out.String())
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("upstreams: [{url: x}]\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run([]string{"check", "--config", bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "bogus") {
		t.Fatalf("check of a bad config: code %d, %q", code, errb.String())
	}
}

// serve reloads on SIGHUP and drains on SIGTERM, exiting 0.
func TestServeSignals(t *testing.T) {
	// The config is a symlink into another folder: writing the real file
	// makes no event in the watched folder, so only SIGHUP can reload it.
	real := filepath.Join(t.TempDir(), "config.yaml")
	path := filepath.Join(t.TempDir(), "config.yaml")
	listen, admin := freePort(t), freePort(t)
	cfg := func(version string) []byte {
		return []byte("listen: " + listen + "\nadmin_listen: " + admin +
			"\nupstreams: [{url: 'http://127.0.0.1:9'}]\ncatalog:\n  version: " + version +
			"\n  tools: [{name: t, description: d}]\nlog: {level: info}\n")
	}
	if err := os.WriteFile(real, cfg("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	holdSignals(t)
	done := make(chan int, 1)
	var logs bytes.Buffer // written only by serve's locked, buffered log sink
	go func() { done <- run([]string{"serve", "--config", path}, io.Discard, &logs) }()

	metric := func() string {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitUntil(t, "toolgate to serve v1", func() bool { return strings.Contains(metric(), `toolgate_catalog_info{catalog_version="v1"} 1`) })

	if err := os.WriteFile(real, cfg("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the SIGHUP reload to v2", func() bool { return strings.Contains(metric(), `toolgate_catalog_info{catalog_version="v2"} 1`) })

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d after SIGTERM, want 0", code)
		}
		// Log lines are buffered; the last ones must still be written at exit.
		if !strings.Contains(logs.String(), `"msg":"draining"`) || !strings.Contains(logs.String(), `"signal":"terminated"`) {
			t.Errorf("the drain line was not flushed at exit; log:\n%s", logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The demo runs end to end with no network and no key, and shows the
// outcomes it promises, a refund released once after approval among them.
func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"demo"}, &out, &errb); code != 0 {
		t.Fatalf("demo: code %d\n%s", code, errb.String())
	}
	for _, want := range []string{
		"X-Toolgate-Outcome: substituted", "web_search(", "X-Toolgate-Outcome: escalated",
		"HTTP 422", "X-Toolgate-Outcome: reprompted", `"passengers":2`,
		"HTTP 422 confirmation_required; approval apr_", "/ui/approvals#apr_", "person <- admin      HTTP 200",
		"X-Toolgate-Outcome: approved, upstream calls: 0", `issue_refund({"order_id":"ord_1","amount_cents":500})`,
		"refused approval_used", "the model was asked 0 more times",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// With --trace-endpoint the demo exports every scene's trace under the
// trace id it prints: the first is the recovered request, the fourth the
// refund held and resumed twice.
func TestDemoTraced(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "--trace-endpoint", rcv.URL}, &out, &errb); code != 0 {
		t.Fatalf("demo: code %d\n%s", code, errb.String())
	}
	ids := regexp.MustCompile(`(?m)^trace  ([0-9a-f]{32})$`).FindAllStringSubmatch(out.String(), -1)
	if len(ids) != 4 {
		t.Fatalf("demo printed %d trace ids, want one per scene:\n%s", len(ids), out.String())
	}
	servers := 0
	for _, s := range otlptest.Trace(rcv.Spans(), ids[3][1]) {
		if s.Kind == 2 {
			servers++
		}
	}
	if servers != 3 {
		t.Errorf("the refund scene's trace holds %d server spans, want 3 (the hold and two resumes)", servers)
	}
	// Shutdown flushed the spans before the demo returned.
	spans := otlptest.Trace(rcv.Spans(), ids[0][1])
	var outcome string
	kinds := map[string]int{}
	for _, s := range spans {
		if s.Kind == 2 {
			outcome = s.Attr("toolgate.outcome")
		}
		if k := s.Attr("toolgate.upstream.kind"); k != "" {
			kinds[k]++
		}
	}
	if outcome != "substituted" || kinds["original"] != 1 || kinds["recovery"] != 1 {
		t.Errorf("first scene's trace: outcome %q, upstream calls %v (%d spans)", outcome, kinds, len(spans))
	}
}

// Every subcommand answers --help with its own usage on stdout and exit 0;
// an unknown flag or a stray argument is a usage error (exit 2) that runs
// nothing.
func TestSubcommandHelpAndArguments(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want string // in the help text
	}{
		{"serve", "Usage: toolgate serve"},
		{"check", "Usage: toolgate check"},
		{"demo", "Usage: toolgate demo"},
		{"eval", "toolgate eval --config"},
		{"version", "Usage: toolgate version"},
	} {
		for _, h := range []string{"--help", "-h"} {
			var out, errb bytes.Buffer
			if code := run([]string{c.cmd, h}, &out, &errb); code != 0 || !strings.Contains(out.String(), c.want) {
				t.Errorf("%s %s: code %d, stdout %q, stderr %q", c.cmd, h, code, out.String(), errb.String())
			}
		}
		var out, errb bytes.Buffer
		if code := run([]string{c.cmd, "--no-such-flag"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "no-such-flag") {
			t.Errorf("%s --no-such-flag: code %d, stderr %q", c.cmd, code, errb.String())
		}
		out.Reset()
		errb.Reset()
		if code := run([]string{c.cmd, "extra", "args"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unexpected argument "extra"`) {
			t.Errorf("%s extra args: code %d, stdout %q, stderr %q", c.cmd, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "--listen", "127.0.0.1:0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--listen needs --serve") {
		t.Errorf("demo --listen without --serve: code %d, %q", code, errb.String())
	}
	for _, h := range []string{"help", "--help", "-h"} {
		out.Reset()
		if code := run([]string{h}, &out, &errb); code != 0 || !strings.Contains(out.String(), "toolgate demo    [--serve") {
			t.Errorf("%s: code %d, %q", h, code, out.String())
		}
	}
}

// A config file that is not there names the flag to point at another.
func TestMissingConfigHint(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, cmd := range []string{"check", "serve"} {
		var out, errb bytes.Buffer
		if code := run([]string{cmd}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "pass --config PATH") {
			t.Errorf("%s without config.yaml: code %d, %q", cmd, code, errb.String())
		}
	}
}

// check runs where the secrets are not set: each variable the config
// names is a warning and the exit is 0, while serve still refuses.
func TestCheckWithoutEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\ninbound_auth: {tokens_env: TG_TEST_TOKENS}\n" +
		"upstreams: [{url: 'https://x', api_key_env: TG_TEST_KEY}]\n" +
		"tracing: {endpoint: 'http://127.0.0.1:4318', headers_env: TG_TEST_TRACE}\n" +
		"catalog: {tools: [{name: t, description: d}]}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"TG_TEST_TOKENS", "TG_TEST_KEY", "TG_TEST_TRACE"} {
		t.Setenv(v, "")
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--config", path}, &out, &errb); code != 0 {
		t.Fatalf("check: code %d\n%s%s", code, out.String(), errb.String())
	}
	for _, v := range []string{"TG_TEST_KEY", "TG_TEST_TOKENS", "TG_TEST_TRACE"} {
		if !strings.Contains(out.String(), "warning: environment variable "+v+" is not set") {
			t.Errorf("check does not warn about %s:\n%s", v, out.String())
		}
	}
	// A set variable is no warning.
	t.Setenv("TG_TEST_KEY", "sk-test")
	out.Reset()
	if code := run([]string{"check", "--config", path}, &out, &errb); code != 0 || strings.Contains(out.String(), "TG_TEST_KEY") {
		t.Errorf("check with TG_TEST_KEY set: code %d\n%s", code, out.String())
	}
	errb.Reset()
	if code := run([]string{"serve", "--config", path}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "TG_TEST_TOKENS is not set") && !strings.Contains(errb.String(), "TG_TEST_TOKENS holds no tokens") {
		t.Errorf("serve without the variables: code %d, %q", code, errb.String())
	}
}

// The shipped configs pass check in an empty environment: the test binary
// runs itself as toolgate with no variable set at all.
func TestCheckShippedConfigsWithoutEnvironment(t *testing.T) {
	paths := []string{"../../config.yaml"}
	for _, g := range []string{"../../deploy/kubernetes/*/config.yaml", "../../deploy/kubernetes/overlays/*/config.yaml"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) < 3 {
		t.Fatalf("found only %v", paths)
	}
	for _, p := range paths {
		cmd := exec.Command(os.Args[0], "-test.run=^TestToolgateProcess$", "--", "check", "--config", p)
		cmd.Env = []string{}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "valid; catalog version") {
			t.Errorf("check %s with an empty environment: %v\n%s", p, err, out)
		}
		if strings.Contains(p, "overlays/shared") && !strings.Contains(string(out), "warning: environment variable TOOLGATE_ADMIN_TOKEN is not set") {
			t.Errorf("check %s names no unset variable:\n%s", p, out)
		}
	}
}

// TestToolgateProcess is toolgate itself when the test binary is started
// with "--" and a command line (by the test above); otherwise it does
// nothing.
func TestToolgateProcess(t *testing.T) {
	for i, a := range os.Args {
		if a == "--" {
			os.Exit(run(os.Args[i+1:], os.Stdout, os.Stderr))
		}
	}
}

// lockedBuffer is serve's log, read while serve still writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A reload of an invalid config is one log line that says why, with no
// stack trace, and serve keeps running.
func TestRejectedReloadLogsOneLine(t *testing.T) {
	real := filepath.Join(t.TempDir(), "config.yaml")
	path := filepath.Join(t.TempDir(), "config.yaml")
	good := "listen: " + freePort(t) + "\nadmin_listen: " + freePort(t) +
		"\nupstreams: [{url: 'http://127.0.0.1:9'}]\ncatalog: {tools: [{name: t, description: d}]}\n"
	if err := os.WriteFile(real, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, path); err != nil {
		t.Fatal(err)
	}
	holdSignals(t)
	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() { done <- run([]string{"serve", "--config", path}, io.Discard, logs) }()
	waitUntil(t, "serve to start", func() bool { return strings.Contains(logs.String(), `"msg":"toolgate started"`) })

	if err := os.WriteFile(real, []byte(good+"bogus_key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var line string
	waitUntil(t, "the rejected reload's log line", func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "config reload rejected") {
				line = l
				return true
			}
		}
		return false
	})
	if !strings.Contains(line, "bogus_key") || strings.Contains(line, "stacktrace") || strings.Contains(line, "goroutine") {
		t.Errorf("rejected reload line: %s", line)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if strings.Contains(logs.String(), "stacktrace") {
		t.Errorf("the log holds a stack trace:\n%s", logs.String())
	}
}

// holdSignals keeps SIGHUP and SIGTERM from ending the test binary when
// the test sends one before serve has called signal.Notify.
func holdSignals(t *testing.T) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP, syscall.SIGTERM)
	t.Cleanup(func() { signal.Stop(c) })
}
