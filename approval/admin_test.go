package approval

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const adminToken = "t0ken-for-tests"

type fixture struct {
	svc    *Service
	h      http.Handler
	m      *Metrics
	clock  *clock
	mu     sync.Mutex
	events []Event
}

func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
	f := &fixture{clock: newClock(), m: NewMetrics(prometheus.NewRegistry())}
	f.svc = New(Config{
		Store: NewMemory(Options{Now: f.clock.Now}), Metrics: f.m, Now: f.clock.Now,
		Audit: func(e Event) { f.mu.Lock(); f.events = append(f.events, e); f.mu.Unlock() },
		Redact: func(_ string, args json.RawMessage) json.RawMessage {
			return json.RawMessage(strings.ReplaceAll(string(args), `"4111"`, `"[redacted]"`))
		},
	})
	f.h = f.svc.Handler(Tokens{Admin: token})
	return f
}

func (f *fixture) hold(t *testing.T, who Approver) (*Record, Secret) {
	t.Helper()
	call, err := NewCall("issue_refund", []byte(`{"order_id":"A1","card":"4111"}`))
	if err != nil {
		t.Fatal(err)
	}
	r, sec, err := f.svc.Request(context.Background(), HeldAnswer{Approver: who, RequestDigest: "sha256:req",
		Route: "/v1/chat/completions", Upstream: "openai", EscalationID: "esc_9", Calls: []HeldCall{call}, Held: []byte("answer")})
	if err != nil {
		t.Fatal(err)
	}
	return r, sec
}

func (f *fixture) do(t *testing.T, method, path, auth, ctype string, body io.Reader) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, body)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil && method != http.MethodDelete {
		t.Fatalf("%s %s: answer is not JSON: %q", method, path, rec.Body.String())
	}
	return rec.Code, out, rec.Header()
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

const bearerOK = "Bearer " + adminToken

func TestAdminRefusesMissingOrWrongToken(t *testing.T) {
	f := newFixture(t, adminToken)
	r, _ := f.hold(t, Operator)
	for _, c := range []struct {
		auth   string
		status int
	}{
		{"", http.StatusUnauthorized},
		{"Basic " + adminToken, http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusForbidden},
		{"Bearer " + adminToken + "x", http.StatusForbidden},
		{"Bearer " + adminToken[:4], http.StatusForbidden},
	} {
		for _, req := range []struct{ method, path string }{
			{http.MethodGet, "/approvals"},
			{http.MethodGet, "/approvals/" + r.ID},
			{http.MethodPost, "/approvals/" + r.ID},
		} {
			status, _, h := f.do(t, req.method, req.path, c.auth, "application/json", strings.NewReader(`{"decision":"approve","by":"x"}`))
			if status != c.status {
				t.Errorf("%s %s with %q = %d, want %d", req.method, req.path, c.auth, status, c.status)
			}
			if status == http.StatusUnauthorized && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge")
			}
		}
	}
	if got, _ := f.svc.Get(context.Background(), r.ID); got.State != Pending {
		t.Fatalf("a refused request changed the approval: %s", got.State)
	}
	if status, _, _ := f.do(t, http.MethodGet, "/approvals", "bearer "+adminToken, "", nil); status != http.StatusOK {
		t.Fatalf("the right token (scheme in lower case) = %d", status)
	}
}

func TestAdminWithoutTokenIsOpen(t *testing.T) {
	f := newFixture(t, "")
	if status, _, _ := f.do(t, http.MethodGet, "/approvals", "", "", nil); status != http.StatusOK {
		t.Fatalf("no token configured: %d", status)
	}
}

func TestAdminBadBodies(t *testing.T) {
	f := newFixture(t, adminToken)
	r, _ := f.hold(t, Operator)
	path := "/approvals/" + r.ID
	for name, c := range map[string]struct {
		ctype, body string
		status      int
		says        string
	}{
		"no body":           {"application/json", "", 400, "empty"},
		"blank body":        {"", "  \n", 400, "empty"},
		"huge body":         {"application/json", `{"decision":"approve","by":"x","note":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, 413, "larger than"},
		"bad json":          {"application/json", `{"decision":`, 400, "not a decision object"},
		"not an object":     {"application/json", `["approve"]`, 400, "not a decision object"},
		"two values":        {"application/json", `{"decision":"approve","by":"x"} {}`, 400, "more than one"},
		"unknown decision":  {"application/json", `{"decision":"maybe","by":"x"}`, 400, `"maybe" is not`},
		"no decision":       {"application/json", `{"by":"x"}`, 400, `"" is not`},
		"unknown field":     {"application/json", `{"decision":"approve","by":"x","amount":1}`, 400, "unknown field"},
		"no by":             {"application/json", `{"decision":"approve"}`, 400, `"by" is required`},
		"control in by":     {"application/json", `{"decision":"approve","by":"a\u001b[31m"}`, 400, "control character"},
		"long note":         {"application/json", `{"decision":"approve","by":"x","note":"` + strings.Repeat("é", maxNote+1) + `"}`, 400, "longer than"},
		"wrong type":        {"application/json", `{"decision":true,"by":"x"}`, 400, "not a decision object"},
		"form content type": {"application/x-www-form-urlencoded", `decision=approve`, 415, "application/json"},
	} {
		t.Run(name, func(t *testing.T) {
			status, out, _ := f.do(t, http.MethodPost, path, bearerOK, c.ctype, strings.NewReader(c.body))
			e, _ := out["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if status != c.status || !strings.Contains(msg, c.says) {
				t.Fatalf("= %d %q, want %d saying %q", status, msg, c.status, c.says)
			}
			wantCode := map[int]string{400: "bad_request", 413: "too_large", 415: "unsupported_media_type"}[c.status]
			if errCode(out) != wantCode {
				t.Fatalf("code %q, want %q", errCode(out), wantCode)
			}
		})
	}
	if got, _ := f.svc.Get(context.Background(), r.ID); got.State != Pending {
		t.Fatalf("a bad body changed the approval: %s", got.State)
	}
}

func TestAdminDecideTwiceAndUnknown(t *testing.T) {
	f := newFixture(t, adminToken)
	r, _ := f.hold(t, Operator)
	path := "/approvals/" + r.ID
	status, out, _ := f.do(t, http.MethodPost, path, bearerOK, "application/json", strings.NewReader(`{"decision":"approve","by":"ana","note":"checked the order"}`))
	if status != 200 || out["state"] != "approved" || out["decided_by"] != "ana" || out["note"] != "checked the order" {
		t.Fatalf("approve = %d %v", status, out)
	}
	status, out, _ = f.do(t, http.MethodPost, path, bearerOK, "application/json", strings.NewReader(`{"decision":"deny","by":"bob"}`))
	if status != http.StatusConflict || errCode(out) != "approval_decided" || !strings.Contains(out["error"].(map[string]any)["message"].(string), "approved") {
		t.Fatalf("second decision = %d %v", status, out)
	}
	status, out, _ = f.do(t, http.MethodPost, "/approvals/apr_0123456789abcdef0123456789abcdef", bearerOK, "application/json", strings.NewReader(`{"decision":"deny","by":"bob"}`))
	if status != http.StatusNotFound || errCode(out) != "approval_unknown" {
		t.Fatalf("unknown id = %d %v", status, out)
	}
	status, out, _ = f.do(t, http.MethodGet, "/approvals/apr_0123456789abcdef0123456789abcdef", bearerOK, "", nil)
	if status != http.StatusNotFound || errCode(out) != "approval_unknown" {
		t.Fatalf("GET unknown id = %d %v", status, out)
	}
	for _, bad := range []string{"apr_XYZ", "apr_0123456789ABCDEF0123456789ABCDEF", "esc_0123456789abcdef0123456789abcdef"} {
		status, out, _ = f.do(t, http.MethodGet, "/approvals/"+bad, bearerOK, "", nil)
		if status != http.StatusBadRequest || errCode(out) != "bad_id" {
			t.Fatalf("GET %s = %d %v", bad, status, out)
		}
	}
	if n := testutil.ToFloat64(f.m.Total.WithLabelValues(ResultApproved)); n != 1 {
		t.Fatalf("approved counted %v times", n)
	}
}

func TestAdminDecideExpired(t *testing.T) {
	f := newFixture(t, "")
	r, _ := f.hold(t, Operator)
	f.clock.Add(DefaultTTL)
	status, out, _ := f.do(t, http.MethodPost, "/approvals/"+r.ID, "", "", strings.NewReader(`{"decision":"approve","by":"ana"}`))
	if status != http.StatusGone || errCode(out) != "approval_expired" {
		t.Fatalf("late approval = %d %v", status, out)
	}
}

func TestAdminListAndShowRedact(t *testing.T) {
	f := newFixture(t, adminToken)
	r1, _ := f.hold(t, Operator)
	f.clock.Add(time.Second)
	r2, _ := f.hold(t, Operator)
	if _, err := f.svc.Decide(context.Background(), r2.ID, Decision{By: "ana"}); err != nil {
		t.Fatal(err)
	}
	status, out, _ := f.do(t, http.MethodGet, "/approvals?state=pending", bearerOK, "", nil)
	list, _ := out["approvals"].([]any)
	if status != 200 || len(list) != 1 {
		t.Fatalf("pending list = %d %v", status, out)
	}
	one := list[0].(map[string]any)
	args, _ := json.Marshal(one["arguments"])
	if one["id"] != r1.ID || one["tool"] != "issue_refund" || strings.Contains(string(args), "4111") ||
		one["call_digest"] != r1.CallDigest() || one["request_digest"] != "sha256:req" || one["held"] != nil {
		t.Fatalf("listed %v", one)
	}
	_, all, _ := f.do(t, http.MethodGet, "/approvals", bearerOK, "", nil)
	if l, _ := all["approvals"].([]any); len(l) != 2 {
		t.Fatalf("all = %v", all)
	}
	rc, sec := f.hold(t, Caller)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/approvals/"+rc.ID, nil)
		r.Header.Set("Authorization", bearerOK)
		return r
	}())
	if body := rec.Body.String(); rec.Code != 200 || strings.Contains(body, "secret") || strings.Contains(body, rc.Ticket(sec).Secret) || strings.Contains(body, `"held"`) {
		t.Fatalf("a caller approval shows its secret or held answer: %d %s", rec.Code, body)
	}
	status, out, _ = f.do(t, http.MethodGet, "/approvals?state=bogus", bearerOK, "", nil)
	if status != 400 || errCode(out) != "bad_state" {
		t.Fatalf("bad state = %d %v", status, out)
	}
	status, out, _ = f.do(t, http.MethodGet, "/approvals/"+r2.ID, bearerOK, "", nil)
	if status != 200 || out["state"] != "denied" || out["decided_by"] != "ana" || out["decided_at"] == nil {
		t.Fatalf("show = %d %v", status, out)
	}
}

// failingStore is a store that cannot be reached.
type failingStore struct{ *Memory }

func (*failingStore) Get(context.Context, string) (*Record, error) {
	return nil, unavailableErr(io.ErrUnexpectedEOF)
}
func (*failingStore) Decide(context.Context, string, Decision) (*Record, error) {
	return nil, unavailableErr(io.ErrUnexpectedEOF)
}
func (*failingStore) List(context.Context, State) ([]*Record, error) {
	return nil, unavailableErr(io.ErrUnexpectedEOF)
}

func TestAdminStoreUnavailableIs503(t *testing.T) {
	svc := New(Config{Store: &failingStore{NewMemory(Options{})}})
	h := svc.Handler(Tokens{})
	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/approvals", nil),
		httptest.NewRequest(http.MethodGet, "/approvals/apr_0123456789abcdef0123456789abcdef", nil),
		httptest.NewRequest(http.MethodPost, "/approvals/apr_0123456789abcdef0123456789abcdef", strings.NewReader(`{"decision":"approve","by":"a"}`)),
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s %s = %d", req.Method, req.URL, rec.Code)
		}
	}
}

func FuzzAdminDecisionBody(f *testing.F) {
	for _, s := range []string{`{"decision":"approve","by":"ana"}`, `{"decision":"deny","by":"b","note":"x\ny"}`, ``, `{`, `{"decision":"approve","by":"a","x":1}`, `null`, `{"decision":"approve","by":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fx := newFixture(t, "")
		r, _ := fx.hold(t, Operator)
		req := httptest.NewRequest(http.MethodPost, "/approvals/"+r.ID, strings.NewReader(string(body)))
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("answer is not JSON: %q", rec.Body.String())
		}
		got, _ := fx.svc.Get(context.Background(), r.ID)
		d, status, _ := ParseDecision(body)
		switch {
		case len(body) > MaxBodyBytes:
			if rec.Code != http.StatusRequestEntityTooLarge || got.State != Pending {
				t.Fatalf("huge body: %d, state %s", rec.Code, got.State)
			}
		case status != 0:
			if rec.Code != status || got.State != Pending {
				t.Fatalf("refused body: %d (want %d), state %s", rec.Code, status, got.State)
			}
		default:
			want := Denied
			if d.Approve {
				want = Approved
			}
			if rec.Code != http.StatusOK || got.State != want || got.DecidedBy == "" {
				t.Fatalf("accepted body %q: %d, state %s", body, rec.Code, got.State)
			}
		}
	})
}

// FuzzParseID fuzzes the resume headers' values: X-Toolgate-Approval and
// X-Toolgate-Approval-Secret accept exactly their one form.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"apr_0123456789abcdef0123456789abcdef", "apr_", "apr_0123456789ABCDEF0123456789abcdef", " apr_0123456789abcdef0123456789abcdef", "apr_0123456789abcdef0123456789abcdef\n", "0123456789abcdef0123456789abcdef"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if id, err := ParseID(v); err == nil {
			if id != v || len(v) != 36 || !strings.HasPrefix(v, "apr_") || strings.Trim(v[4:], "0123456789abcdef") != "" {
				t.Fatalf("accepted id %q", v)
			}
		}
		if sec, err := ParseSecret(v); err == nil {
			if len(v) != 32 || strings.Trim(v, "0123456789abcdef") != "" || !sec.matches(SecretFrom(v).hash()) {
				t.Fatalf("accepted secret %q", v)
			}
		}
	})
}
