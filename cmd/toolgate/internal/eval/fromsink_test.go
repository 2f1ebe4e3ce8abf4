package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/sink"
	"github.com/toolgate/toolgate/validate"
)

func sinkLine(t *testing.T, e *recovery.Escalation, redact []string) []byte {
	t.Helper()
	rec := &pipeline.EscalationRecord{Time: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), API: "chat", Model: "gpt-test", Escalation: e}
	b, err := sink.Encode(rec, redact)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestFromSinkRoundTrip(t *testing.T) {
	conf := 0.3
	raw1 := `{"sql":"SELECT count(*) FROM users","db":"prod"}`
	raw3 := `{"query": "unterminated`
	unknown := []validate.Finding{{Code: validate.UnknownTool, Message: "no tool of that name"}}
	var file bytes.Buffer
	// 1: an invented tool the model escalated, with its intent.
	file.Write(sinkLine(t, &recovery.Escalation{
		ID: "esc_one", Codes: []string{"unknown_tool"}, Reason: "no tool reads the database",
		OriginalIntent: "count the active users", MissingCapability: "database access", CatalogVersion: "abc123",
		Attempts: []recovery.Attempt{
			{Kind: "call", Tool: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`), Findings: nil},
			{Kind: "call", Tool: "database_query", Arguments: json.RawMessage(raw1), ArgumentsRaw: &raw1, Findings: unknown},
			{Kind: "decision", Decision: "escalate", Confidence: &conf},
		},
	}, []string{"/db"}))
	// 2: a schema violation: nothing for recovery to measure.
	file.Write(sinkLine(t, &recovery.Escalation{
		ID: "esc_two", Codes: []string{"schema_violation"},
		Attempts: []recovery.Attempt{{Kind: "call", Tool: "get_weather", Arguments: json.RawMessage(`{}`),
			Findings: []validate.Finding{{Code: validate.SchemaViolation, Pointer: "", Keyword: "required"}}}},
	}, nil))
	file.WriteString("this line is not JSON\n")
	// 3: arguments that were not JSON, and no intent.
	file.Write(sinkLine(t, &recovery.Escalation{
		ID: "esc_three", Codes: []string{"invalid_decision", "unknown_tool"},
		Attempts: []recovery.Attempt{{Kind: "call", Tool: "searchWeb", ArgumentsRaw: &raw3, Findings: unknown}},
	}, nil))

	dir := t.TempDir()
	in := filepath.Join(dir, "escalations.jsonl")
	out := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(in, file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := command(context.Background(), []string{"--from-sink", in, "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"3 escalation record(s), 2 with an invented tool", "1 without one skipped", "for the 1 case(s) whose record had no intent"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "line 3") {
		t.Errorf("the unreadable line is not reported: %s", stderr.String())
	}

	fh, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cases, err := ReadCases(fh)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 {
		t.Fatalf("%d cases: %+v", len(cases), cases)
	}
	one, three := cases[0], cases[1]
	if one.ID != "esc_one" || one.Kind != KindProduction || one.Expected != "" || one.BadCall.Name != "database_query" || len(one.Tools) != 0 {
		t.Errorf("case one: %+v", one)
	}
	var args map[string]any
	if err := json.Unmarshal(one.BadCall.Arguments, &args); err != nil || args["sql"] != "SELECT count(*) FROM users" || args["db"] != "[redacted]" {
		t.Errorf("case one arguments %s (the redacted /db must stay redacted)", one.BadCall.Arguments)
	}
	var msg struct{ Role, Content string }
	if len(one.Messages) != 1 || json.Unmarshal(one.Messages[0], &msg) != nil || msg.Role != "user" || msg.Content != "count the active users" {
		t.Errorf("case one messages %s", one.Messages)
	}
	for _, want := range []string{"esc_one", "2025-03-04T05:06:07Z", "gpt-test", "abc123", "no tool reads the database", "database access"} {
		if !strings.Contains(one.Note, want) {
			t.Errorf("note %q lacks %q", one.Note, want)
		}
	}
	if three.ID != "esc_three" || three.BadCall.Name != "searchWeb" || len(three.Messages) != 0 {
		t.Errorf("case three: %+v", three)
	}
	if text, err := argumentText(three.BadCall.Arguments); err != nil || text != raw3 {
		t.Errorf("case three arguments %s -> %q, %v", three.BadCall.Arguments, text, err)
	}
	if !bytes.Contains(mustRead(t, out), []byte(`"messages":[]`)) || !bytes.Contains(mustRead(t, out), []byte(`"expected":""`)) {
		t.Errorf("messages and expected must be written out for the labeller:\n%s", mustRead(t, out))
	}

	// Unlabelled, the cases are refused with a clear reason.
	_, snap := newUpstream(t, nil)
	_, err = Run(context.Background(), snap, cases, Options{Model: testModel})
	if err == nil || !strings.Contains(err.Error(), `case "esc_one": not labelled`) || !strings.Contains(err.Error(), `case "esc_three": no messages`) {
		t.Errorf("unlabelled cases: %v", err)
	}

	// An existing cases file is never overwritten: it may hold labels.
	stdout.Reset()
	stderr.Reset()
	if code := command(context.Background(), []string{"--from-sink", in, "--out", out}, &stdout, &stderr); code != ExitFailed ||
		!strings.Contains(stderr.String(), "exists") {
		t.Errorf("overwrite: exit %d, %s", code, stderr.String())
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
