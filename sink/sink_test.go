package sink

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

func counters() Counters {
	return Counters{
		Dropped:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "d"}, []string{"sink"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "f"}, []string{"sink"}),
	}
}

func record(id string) *pipeline.EscalationRecord {
	raw := `{"order_id":"ord_secret1","note":"keep"}`
	return &pipeline.EscalationRecord{
		Time: time.Unix(1700000000, 0).UTC(), API: "chat", Model: "m",
		Escalation: &recovery.Escalation{
			ID: id, Codes: []string{"unknown_tool"}, Reason: "r", CatalogVersion: "v1", RequestID: "req_1",
			Attempts: []recovery.Attempt{{Kind: "call", Tool: "t", Arguments: json.RawMessage(raw), ArgumentsRaw: &raw}},
			Call:     json.RawMessage(`{"id":"c1","type":"function","function":{"name":"t","arguments":"{\"order_id\":\"ord_secret1\"}"}}`),
		},
	}
}

func TestFileSinkAppendsRedactedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "esc.jsonl")
	s, err := New(catalog.Escalation{Redact: []string{"/order_id"}, Sinks: catalog.Sinks{File: path}}, catalog.Secrets{}, zap.NewNop(), counters())
	if err != nil {
		t.Fatal(err)
	}
	s.Record(record("esc_1"))
	s.Record(record("esc_2"))
	s.Close()

	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "ord_secret1") {
		t.Fatalf("redacted value leaked into the sink: %s", data)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	var ids []string
	for sc.Scan() {
		var rec struct {
			Escalation struct {
				ID       string `json:"id"`
				Attempts []struct {
					Arguments map[string]string `json:"arguments"`
				} `json:"attempts"`
			} `json:"escalation"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line is not JSON: %v", err)
		}
		ids = append(ids, rec.Escalation.ID)
		if got := rec.Escalation.Attempts[0].Arguments; got["order_id"] != redacted || got["note"] != "keep" {
			t.Errorf("arguments = %v", got)
		}
	}
	if strings.Join(ids, ",") != "esc_1,esc_2" {
		t.Errorf("ids = %v", ids)
	}
}

func fastRetries(t *testing.T) {
	old := backoffBase
	backoffBase = 5 * time.Millisecond
	t.Cleanup(func() { backoffBase = old })
}

func TestWebhookRetriesUntilTheReceiverRecovers(t *testing.T) {
	fastRetries(t)
	var calls atomic.Int32
	var mu sync.Mutex
	got := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Toolgate-Signature") != Sign([]byte("s3cret"), body) {
			t.Errorf("bad signature")
		}
		if calls.Add(1) <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var rec struct {
			Escalation struct{ ID string } `json:"escalation"`
		}
		_ = json.Unmarshal(body, &rec)
		mu.Lock()
		got[rec.Escalation.ID] = true
		mu.Unlock()
	}))
	defer srv.Close()
	c := counters()
	s, err := New(catalog.Escalation{Sinks: catalog.Sinks{Webhook: srv.URL}}, catalog.Secrets{WebhookSecret: "s3cret"}, zap.NewNop(), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"esc_a", "esc_b", "esc_c"} {
		s.Record(record(id))
	}
	s.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("delivered %v, want all three despite the first failures", got)
	}
	if n := testutil.ToFloat64(c.Dropped.WithLabelValues("webhook")); n != 0 {
		t.Errorf("dropped = %v", n)
	}
}

func TestHangingWebhookNeverBlocksRecord(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := counters()
	s, err := New(catalog.Escalation{Sinks: catalog.Sinks{Webhook: srv.URL}}, catalog.Secrets{}, zap.NewNop(), c)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < queueSize+50; i++ {
		s.Record(record("esc_x"))
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Record blocked for %v with a hanging webhook", d)
	}
	if n := testutil.ToFloat64(c.Dropped.WithLabelValues("webhook")); n < 1 {
		t.Errorf("dropped = %v, want the overflow counted", n)
	}
	old := drainWait
	drainWait = 50 * time.Millisecond
	defer func() { drainWait = old }()
	s.Close()
}

func TestWebhookDoesNotFollowRedirects(t *testing.T) {
	fastRetries(t)
	var hit atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Store(true) }))
	defer target.Close()
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer redir.Close()
	w := newWebhook(redir.URL, "")
	if err := w.post([]byte(`{}`)); err == nil {
		t.Fatal("a redirect counted as delivered")
	}
	if hit.Load() {
		t.Fatal("the redirect was followed")
	}
}

func TestRedactCallShapes(t *testing.T) {
	for name, call := range map[string]string{
		"chat":      `{"id":"c","type":"function","function":{"name":"t","arguments":"{\"card\":\"4111\"}"}}`,
		"anthropic": `{"type":"tool_use","id":"c","name":"t","input":{"card":"4111"}}`,
		"responses": `{"type":"function_call","call_id":"c","name":"t","arguments":"{\"card\":\"4111\"}"}`,
	} {
		t.Run(name, func(t *testing.T) {
			out := redactCall(json.RawMessage(call), []string{"/card"})
			if strings.Contains(string(out), "4111") {
				t.Fatalf("value survived: %s", out)
			}
		})
	}
}

// A validator's own words never reach a sink record, with or without
// redaction, and the record the proxy holds is left as it was.
func TestEncodeDropsValidatorReasons(t *testing.T) {
	for _, redact := range [][]string{nil, {"/order_id"}} {
		rec := record("esc_1")
		f := validate.Finding{Code: validate.RuleViolation, Pointer: "/amount_cents", Keyword: "validator:orders",
			Message: "arguments/amount_cents: denied by validator orders", Reason: "account 4411 is frozen"}
		rec.Escalation.Attempts[0].Findings = []validate.Finding{f}
		line, err := Encode(rec, redact)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(line), "4411") || !strings.Contains(string(line), `"keyword":"validator:orders"`) {
			t.Fatalf("redact %v: %s", redact, line)
		}
		if rec.Escalation.Attempts[0].Findings[0].Reason == "" {
			t.Fatal("Encode changed the proxy's record")
		}
	}
}
