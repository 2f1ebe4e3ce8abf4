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
	node, err := exec.LookPath("node")
	if err == nil {
		if _, statErr := os.Stat(filepath.Join("node", "node_modules", "openai", "package.json")); statErr != nil {
			err = statErr
		}
	}
	if err != nil {
		msg := "needs node and `npm ci` in test/node: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}

	m := newMock(t,
		callsAnswer("chatcmpl-1", invented),
		substitute("get_current_weather", weatherArgs, 0.9),
		callsAnswer("chatcmpl-2", call{"call_table", "book_restaurant", `{"party":2}`}),
		escalate("no tool books restaurants", "book a table", "restaurant booking", 0.1),
	)
	g := weatherGate(t, m, "")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "e2e.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(), "TOOLGATE_BASE_URL="+g.URL)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node e2e.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	var lines []json.RawMessage
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		lines = append(lines, json.RawMessage(append([]byte(nil), sc.Bytes()...)))
	}
	if len(lines) != 2 {
		t.Fatalf("want 2 result lines, got %d:\n%s", len(lines), stdout.String())
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
