package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolgate/toolgate/internal/signature"
	"github.com/toolgate/toolgate/internal/webhook"
)

func TestParseIDAndSecret(t *testing.T) {
	r, sec := NewRecord(HeldAnswer{Approver: Caller}, time.Now(), time.Minute)
	if _, err := ParseID(r.ID); err != nil {
		t.Fatalf("a new id %q does not parse: %v", r.ID, err)
	}
	if _, err := ParseSecret(r.Ticket(sec).Secret); err != nil {
		t.Fatalf("a new secret does not parse: %v", err)
	}
	for _, bad := range []string{"", "apr_", "apr_0123456789abcdef0123456789abcde", "apr_0123456789abcdef0123456789abcdef0",
		"APR_0123456789abcdef0123456789abcdef", "apr_0123456789abcdeF0123456789abcdef", "apr_0123456789abcdef0123456789abcdeg",
		" apr_0123456789abcdef0123456789abcdef", "apr_0123456789abcdef0123456789abcde\u00e9"} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) accepted", bad)
		}
	}
	if _, err := ParseSecret("0123"); err == nil {
		t.Error("a short secret parsed")
	}
	other, _ := NewRecord(HeldAnswer{}, time.Now(), time.Minute)
	if other.ID == r.ID {
		t.Fatal("two records got one id")
	}
}

// TestSecretNeverPrinted: a secret shows only in the escalation's ticket.
func TestSecretNeverPrinted(t *testing.T) {
	r, sec := NewRecord(HeldAnswer{Approver: Caller, Calls: []HeldCall{{Tool: "t", Digest: "sha256:x"}}}, time.Now(), time.Minute)
	raw := r.Ticket(sec).Secret
	if len(raw) != 32 {
		t.Fatalf("secret %q", raw)
	}
	rec, _ := json.Marshal(r)
	holder, _ := json.Marshal(struct{ S Secret }{sec})
	for _, s := range []string{sec.String(), fmt_(sec), fmtV(struct{ S Secret }{sec}), string(rec), string(holder)} {
		if strings.Contains(s, raw) {
			t.Fatalf("secret printed in %q", s)
		}
	}
	tk, _ := json.Marshal(r.Ticket(sec))
	if !strings.Contains(string(tk), `"secret":"`+raw+`"`) {
		t.Fatalf("ticket lacks the secret: %s", tk)
	}
	op, none := NewRecord(HeldAnswer{}, time.Now(), time.Minute)
	if tk, _ := json.Marshal(op.Ticket(none)); strings.Contains(string(tk), "secret") || op.SecretHash != nil {
		t.Fatalf("an operator approval has a secret: %s", tk)
	}
}

func TestServiceCountsEveryChange(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	count := func(res string) float64 { return testutil.ToFloat64(f.m.Total.WithLabelValues(res)) }
	a, _ := f.hold(t, Operator)
	b, _ := f.hold(t, Operator)
	c, _ := f.hold(t, Operator)
	if count(ResultRequested) != 3 || testutil.ToFloat64(f.m.Pending) != 3 {
		t.Fatalf("requested %v, pending %v", count(ResultRequested), testutil.ToFloat64(f.m.Pending))
	}
	if _, err := f.svc.Decide(ctx, a.ID, Decision{Approve: true, By: "ana"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Decide(ctx, b.ID, Decision{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	m := Match{RequestDigest: "sha256:req", Route: "/v1/chat/completions", Upstream: "openai"}
	if _, err := f.svc.Claim(ctx, a.ID, m); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Claim(ctx, a.ID, m); err == nil {
		t.Fatal("second claim released")
	}
	f.clock.Add(DefaultTTL)
	if err := f.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for res, want := range map[string]float64{ResultApproved: 1, ResultDenied: 1, ResultReleased: 1, ResultRefused: 1, ResultExpired: 1} {
		if got := count(res); got != want {
			t.Errorf("%s = %v, want %v", res, got, want)
		}
	}
	if testutil.ToFloat64(f.m.Pending) != 0 {
		t.Errorf("pending gauge %v after the sweep", testutil.ToFloat64(f.m.Pending))
	}
	byResult := map[string]Event{}
	for _, e := range f.events {
		byResult[e.Result] = e
	}
	if e := byResult[ResultApproved]; e.ApprovalID != a.ID || e.EscalationID != "esc_9" || e.By != "ana" || e.CallDigest != a.CallDigest() || e.At.IsZero() {
		t.Errorf("approved event %+v", e)
	}
	if e := byResult[ResultExpired]; e.ApprovalID != c.ID {
		t.Errorf("expired event %+v", e)
	}
	if e := byResult[ResultRefused]; e.Code != CodeUsed {
		t.Errorf("refused event %+v", e)
	}
	if len(f.events) != 8 {
		t.Errorf("%d events, want 8", len(f.events))
	}
}

func TestNotifySignedRetriedAndNeverBlocking(t *testing.T) {
	var calls atomic.Int32
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(signature.Header) != signature.Sign([]byte("s3cret"), body) {
			t.Errorf("bad signature")
		}
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		got <- body
	}))
	defer srv.Close()
	m := NewMetrics(prometheus.NewRegistry())
	n := NewNotifier(srv.URL, "s3cret", webhook.Retry{Attempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond, Timeout: time.Second}, m, nil)
	defer n.Close()
	svc := New(Config{Store: NewMemory(Options{}), Metrics: m, Notifier: n,
		Redact: func(string, json.RawMessage) json.RawMessage { return json.RawMessage(`{"card":"[redacted]"}`) }})
	call, _ := NewCall("refund", []byte(`{"card":"4111"}`))
	r, _, err := svc.Request(context.Background(), HeldAnswer{Calls: []HeldCall{call}, Held: []byte("secret answer")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-got:
		var msg struct {
			Type     string
			Approval View
		}
		if err := json.Unmarshal(body, &msg); err != nil || msg.Type != "approval.pending" || msg.Approval.ID != r.ID {
			t.Fatalf("notification %s", body)
		}
		if strings.Contains(string(body), "4111") || strings.Contains(string(body), "secret answer") {
			t.Fatalf("notification shows what it must not: %s", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification after a retry")
	}
	// A caller approval notifies nobody: the app asks its own user.
	if _, _, err := svc.Request(context.Background(), HeldAnswer{Approver: Caller, Calls: []HeldCall{call}}); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-got:
		t.Fatalf("caller approval notified: %s", body)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestNotifyFullQueueDrops(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	m := NewMetrics(nil)
	n := NewNotifier(srv.URL, "", webhook.DefaultRetry, m, nil)
	start := time.Now()
	for i := 0; i < notifyQueue+20; i++ {
		n.Notify([]byte(`{}`))
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Notify blocked for %v", d)
	}
	if testutil.ToFloat64(m.NotifyDropped) < 1 {
		t.Fatal("overflow not counted")
	}
	old := notifyDrain
	notifyDrain = 20 * time.Millisecond
	defer func() { notifyDrain = old }()
	n.Close()
	before := testutil.ToFloat64(m.NotifyDropped)
	n.Notify([]byte(`{}`)) // after Close: dropped, not a panic
	n.Close()
	if testutil.ToFloat64(m.NotifyDropped) != before+1 {
		t.Fatal("a notification after Close was not counted as dropped")
	}
}

func fmt_(s Secret) string { return fmtSprint("%s|%v|%+v|%#v|%q|%x", s, s, s, s, s, s) }
func fmtV(v any) string    { return fmtSprint("%v|%+v|%#v", v, v, v) }

var fmtSprint = fmt.Sprintf

// TestRunSweepsOnItsTicker: the sweeper expires on its own, and stops
// with its context.
func TestRunSweepsOnItsTicker(t *testing.T) {
	f := newFixture(t, "")
	f.hold(t, Operator)
	f.clock.Add(DefaultTTL)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { f.svc.Run(ctx, 5*time.Millisecond, nil); close(stopped) }()
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(f.m.Total.WithLabelValues(ResultExpired)) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the sweeper never expired the record")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

func TestCallerReleaseIsAuditedAsTheCaller(t *testing.T) {
	f := newFixture(t, "")
	r, sec := f.hold(t, Caller)
	got, err := f.svc.Claim(context.Background(), r.ID, Match{RequestDigest: "sha256:req", Route: "/v1/chat/completions", Upstream: "openai", Secret: sec})
	if err != nil || string(got.Held) != "answer" {
		t.Fatalf("claim = %+v, %v", got, err)
	}
	last := f.events[len(f.events)-1]
	if last.Result != ResultReleased || last.By != "caller" || last.ApprovalID != r.ID {
		t.Fatalf("release event %+v", last)
	}
}

// A reload's ttl applies to calls held from then on; a stale refusal is
// counted and audited like a claim's.
func TestSetTTLAndRefuse(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	var events []Event
	m := NewMetrics(prometheus.NewRegistry())
	svc := New(Config{Store: NewMemory(Options{Now: func() time.Time { return now }}), TTL: time.Minute, Metrics: m,
		Audit: func(e Event) { events = append(events, e) }, Now: func() time.Time { return now }})
	spec := HeldAnswer{RequestDigest: "sha256:req", Route: "/v1/chat/completions", Upstream: "openai", Held: []byte("answer")}
	r1, _, err := svc.Request(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	svc.SetTTL(2 * time.Hour)
	svc.SetTTL(0) // ignored: a ttl is never zero
	r2, _, err := svc.Request(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !r1.ExpiresAt.Equal(now.Add(time.Minute)) || !r2.ExpiresAt.Equal(now.Add(2*time.Hour)) {
		t.Errorf("expiries %v, %v", r1.ExpiresAt, r2.ExpiresAt)
	}
	svc.Refuse(r2, CodeStale)
	last := events[len(events)-1]
	if last.Result != ResultRefused || last.Code != CodeStale || last.ApprovalID != r2.ID {
		t.Errorf("refusal event %+v", last)
	}
	if got := testutil.ToFloat64(m.Total.WithLabelValues(ResultRefused)); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
}
