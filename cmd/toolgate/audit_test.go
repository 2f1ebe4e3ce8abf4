package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/sink"
)

// TestAuditVerify writes approval records through the file sink as serve
// does, then checks the file with "toolgate audit verify": intact it
// passes, and deleting or editing one record fails at that line.
func TestAuditVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "escalations.jsonl")
	set, err := sink.New(catalog.Escalation{Sinks: catalog.Sinks{File: path}}, catalog.Secrets{}, zap.NewNop(), sink.Counters{
		Dropped:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "d"}, []string{"sink"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f"}, []string{"sink"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := approval.New(approval.Config{Store: approval.NewMemory(approval.Options{}), Audit: func(e approval.Event) {
		set.Record(&pipeline.EscalationRecord{Time: e.At, API: "approvals", Approval: &e})
	}})
	call, _ := approval.NewCall("issue_refund", []byte(`{"order_id":"A1"}`))
	for i, by := range []string{"ana", "bob", "carol"} {
		r, _, err := svc.Request(context.Background(), approval.HeldAnswer{Calls: []approval.HeldCall{call}, Held: []byte("h")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Decide(context.Background(), r.ID, approval.Decision{Approve: i != 1, By: by}); err != nil {
			t.Fatal(err)
		}
	}
	set.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 6 || !strings.Contains(lines[1], `"prev":"sha256:`) {
		t.Fatalf("sink file:\n%s", data)
	}
	verify := func(name, content string) (int, string) {
		t.Helper()
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := run([]string{"audit", "verify", p}, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := verify("intact", string(data)); code != 0 || !strings.Contains(out, "ok, 6 approval records") {
		t.Fatalf("intact: %d %s", code, out)
	}
	deleted := strings.Join(append(append([]string{}, lines[:2]...), lines[3:]...), "")
	if code, out := verify("deleted", deleted); code != 1 || !strings.Contains(out, "line 3:") {
		t.Fatalf("a deleted record: %d %s", code, out)
	}
	edited := strings.Replace(string(data), `"by":"bob"`, `"by":"ana"`, 1)
	if code, out := verify("edited", edited); code != 1 || !strings.Contains(out, "line 5:") || !strings.Contains(out, "altered") {
		t.Fatalf("an edited record: %d %s", code, out)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"audit", "verify", filepath.Join(t.TempDir(), "missing")}, &out, &errb); code != 2 {
		t.Fatalf("a missing file: %d", code)
	}
	if code := run([]string{"audit"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "toolgate audit verify FILE") {
		t.Fatalf("no subcommand: %d %s", code, errb.String())
	}
}
