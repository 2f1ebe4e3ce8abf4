package demo

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is written by Serve and read by the test at the same time.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs Serve on a free port until the test ends and returns its
// printed text once the snippets are out, and the base URL.
func startServe(t *testing.T) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, out, ServeOptions{Listen: "127.0.0.1:0"}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), "x-toolgate-outcome\"], r.function_calls[0])") {
		select {
		case err := <-done:
			t.Fatalf("Serve returned early: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Serve printed no snippets:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	m := regexp.MustCompile(`toolgate listens on (http://127\.0\.0\.1:\d+) `).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no base URL in:\n%s", out.String())
	}
	return out.String(), m[1]
}

// Each API's path on the served demo answers with the judged call: the
// invented database_query replaced by web_search.
func TestServeJudgesEveryAPI(t *testing.T) {
	_, base := startServe(t)
	for _, c := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"scripted-1","messages":[{"role":"user","content":"hi"}]}`, `"name":"web_search"`},
		{"/anthropic/v1/messages", `{"model":"scripted-1","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, `"name":"web_search"`},
		{"/gemini/v1beta/models/scripted-1:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, `"name":"web_search"`},
	} {
		resp, err := http.Post(base+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		if o := resp.Header.Get("X-Toolgate-Outcome"); resp.StatusCode != 200 || o != "substituted" || !strings.Contains(b.String(), c.want) {
			t.Errorf("%s: HTTP %d, outcome %q, body %s", c.path, resp.StatusCode, o, b.String())
		}
	}
	// A streamed request is refused in words, not answered wrongly.
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"scripted-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Error("a streamed request was answered as if streamed")
	}
}

// The Node snippet Serve prints runs as printed with the openai npm
// package (test/node) and shows the substituted call.
func TestServeNodeSnippet(t *testing.T) {
	dir, err := filepath.Abs("../../../../test/node")
	if err != nil {
		t.Fatal(err)
	}
	node, lookErr := exec.LookPath("node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil || lookErr != nil {
		msg := "node or test/node/node_modules/openai missing (run make node-deps)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out, _ := startServe(t)
	m := regexp.MustCompile(`(?s)--- node openai ---\n(.*?)--- end ---`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no Node snippet in:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--input-type=module", "-e", m[1])
	cmd.Dir = dir // resolves "openai" from test/node/node_modules
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	if got, want := strings.TrimSpace(stdout.String()), `substituted web_search {"query":"number of active users"}`; got != want {
		t.Errorf("the snippet printed %q, want %q", got, want)
	}
}
