package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestNodeSDK drives toolgate with the official openai npm package, so the
// wire contract is checked against a second SDK with its own parser and
// error classes. Locally it skips when Node or the installed package is
// missing; in CI (CI=true) that is a failure, so the check cannot silently
// stop running.
func TestNodeSDK(t *testing.T) {
	node := needNode(t, "openai")
	m := newMock(t,
		callsAnswer("chatcmpl-1", invented),
		substitute("get_current_weather", weatherArgs, 0.9),
		callsAnswer("chatcmpl-2", call{"call_table", "book_restaurant", `{"party":2}`}),
		escalate("no tool books restaurants", "book a table", "restaurant booking", 0.1),
	)
	g := weatherGate(t, m, "")

	stdout := runNode(t, node, "e2e.mjs", 30*time.Second, "TOOLGATE_BASE_URL="+g.URL)

	var lines []json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		lines = append(lines, json.RawMessage(append([]byte(nil), sc.Bytes()...)))
	}
	if len(lines) != 2 {
		t.Fatalf("want 2 result lines, got %d:\n%s", len(lines), stdout)
	}

	var first struct {
		ToolCall struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_call"`
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatalf("line 1 %s: %v", lines[0], err)
	}
	tc := first.ToolCall
	if tc.ID != invented.ID || tc.Type != "function" || tc.Function.Name != "get_current_weather" || !sameJSON(tc.Function.Arguments, weatherArgs) {
		t.Errorf("tool call %s", lines[0])
	}
	if first.Outcome != "substituted" {
		t.Errorf("outcome %q, want substituted", first.Outcome)
	}

	var second struct {
		Status       int    `json:"status"`
		EscalationID string `json:"escalation_id"`
		Code         string `json:"code"`
		HeaderID     string `json:"header_id"`
	}
	if err := json.Unmarshal(lines[1], &second); err != nil {
		t.Fatalf("line 2 %s: %v", lines[1], err)
	}
	recs := g.Sink.records()
	if second.Status != 422 || second.Code != "unknown_tool" || len(recs) != 1 ||
		second.EscalationID != recs[0].Escalation.ID || second.HeaderID != second.EscalationID {
		t.Errorf("escalation as the Node SDK saw it: %s (sink has %d records)", lines[1], len(recs))
	}
	expectCount(t, m, 4)
}

// needNode returns the node binary once it and the test/node packages pkgs
// are installed. Locally a missing one skips the test; under CI=true it
// fails it, so an SDK check cannot quietly stop running.
func needNode(t *testing.T, pkgs ...string) string {
	t.Helper()
	return needNodeIn(t, "node", pkgs...)
}

// needNodeIn is needNode for the packages of another folder of test/
// (each Node suite keeps its own package.json, so their pins do not meet).
func needNodeIn(t *testing.T, dir string, pkgs ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	for _, pkg := range pkgs {
		if err != nil {
			break
		}
		_, err = os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json"))
	}
	if err != nil {
		msg := "needs node and `npm ci` in test/" + dir + ": " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

// runNode runs a script of test/node with env added, bounded by d, and
// returns its standard output; a failure shows both outputs.
func runNode(t *testing.T, node, script string, d time.Duration, env ...string) []byte {
	t.Helper()
	return runNodeIn(t, node, "node", script, d, env...)
}

// runNodeIn is runNode for a script of another folder of test/.
func runNodeIn(t *testing.T, node, dir, script string, d time.Duration, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}
