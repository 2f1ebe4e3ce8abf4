package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
		"HTTP 422 confirmation_required; approval apr_", "person <- admin      HTTP 200",
		"X-Toolgate-Outcome: approved, upstream calls: 0", `issue_refund({"order_id":"ord_1","amount_cents":500})`,
		"refused approval_used", "the model was asked 0 more times",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// With --trace-endpoint the demo exports its three requests' traces, each
// under the trace id it prints, and the first is the recovered request.
func TestDemoTraced(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "--trace-endpoint", rcv.URL}, &out, &errb); code != 0 {
		t.Fatalf("demo: code %d\n%s", code, errb.String())
	}
	ids := regexp.MustCompile(`(?m)^trace  ([0-9a-f]{32})$`).FindAllStringSubmatch(out.String(), -1)
	if len(ids) != 3 {
		t.Fatalf("demo printed %d trace ids:\n%s", len(ids), out.String())
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
