package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/webhook"
)

// TestAdminDuplicateMembersDecideNothing: a decision naming a member
// twice, in any case, is refused and the approval stays pending.
func TestAdminDuplicateMembersDecideNothing(t *testing.T) {
	f := newFixture(t, adminToken)
	r, _ := f.hold(t, Operator)
	for _, body := range []string{
		`{"decision":"deny","by":"ana","decision":"approve"}`,
		`{"decision":"approve","by":"ana","by":"bob"}`,
		`{"decision":"approve","by":"ana","note":"a","note":"b"}`,
		`{"decision":"deny","Decision":"approve","by":"ana"}`,
		`{"decision":"approve","BY":"mallory","by":"ana"}`,
	} {
		code, out, _ := f.do(t, http.MethodPost, "/approvals/"+r.ID, "Bearer "+adminToken, "application/json", strings.NewReader(body))
		if code != http.StatusBadRequest || errCode(out) != "bad_request" {
			t.Errorf("%s = %d %v, want 400", body, code, out)
		}
	}
	got, err := f.svc.Get(context.Background(), r.ID)
	if err != nil || got.State != Pending || got.DecidedBy != "" {
		t.Fatalf("after refused bodies: %+v, %v", got, err)
	}
}

// TestNamedTokensRecordTheirName: a named token's decision records its
// name whatever the body says; the admin token records the body's by;
// an unknown token decides nothing.
func TestNamedTokensRecordTheirName(t *testing.T) {
	f := newFixture(t, adminToken)
	f.h = f.svc.Handler(Tokens{Admin: adminToken, Named: []NamedToken{{Name: "ana", Token: "ana-token-1"}, {Name: "bob", Token: "bob-token-2"}}})
	r1, _ := f.hold(t, Operator)
	r2, _ := f.hold(t, Operator)
	r3, _ := f.hold(t, Operator)
	decide := func(id, token, body string) (int, map[string]any) {
		code, out, _ := f.do(t, http.MethodPost, "/approvals/"+id, "Bearer "+token, "application/json", strings.NewReader(body))
		return code, out
	}
	if code, out := decide(r1.ID, "bob-token-2", `{"decision":"approve","by":"ana"}`); code != 200 || out["decided_by"] != "bob" {
		t.Fatalf("named token, body by ana: %d %v", code, out)
	}
	if code, out := decide(r2.ID, "ana-token-1", `{"decision":"deny"}`); code != 200 || out["decided_by"] != "ana" {
		t.Fatalf("named token, no by: %d %v", code, out)
	}
	if code, out := decide(r3.ID, adminToken, `{"decision":"deny"}`); code != 400 {
		t.Fatalf("admin token without by: %d %v", code, out)
	}
	if code, out := decide(r3.ID, "carol-token", `{"decision":"deny","by":"carol"}`); code != 403 {
		t.Fatalf("unknown token: %d %v", code, out)
	}
	if code, out := decide(r3.ID, adminToken, `{"decision":"approve","by":"ops@example.com"}`); code != 200 || out["decided_by"] != "ops@example.com" {
		t.Fatalf("admin token with by: %d %v", code, out)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var by []string
	for _, e := range f.events {
		if e.Result != ResultRequested {
			by = append(by, e.By)
		}
	}
	if strings.Join(by, ",") != "bob,ana,ops@example.com" {
		t.Fatalf("audited deciders %v", by)
	}
}

// browser is a cookie-keeping client of a page served by h.
type browser struct {
	t       *testing.T
	h       http.Handler
	cookies map[string]*http.Cookie
	tls     bool
}

func (b *browser) do(method, path string, form url.Values) *httptest.ResponseRecorder {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if !b.tls {
		req.TLS = nil
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if b.cookies == nil {
			b.cookies = map[string]*http.Cookie{}
		}
		b.cookies[c.Name] = c
	}
	return rec
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func (b *browser) csrf() string {
	b.t.Helper()
	page := b.do(http.MethodGet, "/ui/approvals", nil)
	m := csrfField.FindStringSubmatch(page.Body.String())
	if m == nil {
		b.t.Fatalf("no CSRF token on the page: %d %s", page.Code, page.Body)
	}
	return m[1]
}

func TestPageLoginCookieAndCSRF(t *testing.T) {
	f := newFixture(t, adminToken)
	f.h = f.svc.Handler(Tokens{Admin: adminToken, Named: []NamedToken{{Name: "ana", Token: "ana-token-1"}}})
	r, _ := f.hold(t, Operator)

	// A wrong token sets no cookie.
	b := &browser{t: t, h: f.h}
	if rec := b.do(http.MethodPost, "/ui/login", url.Values{"token": {"nope"}}); rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("wrong token: %d %v", rec.Code, rec.Result().Cookies())
	}
	if page := b.do(http.MethodGet, "/ui/approvals", nil); strings.Contains(page.Body.String(), r.ID) {
		t.Fatal("the page shows approvals without a login")
	}

	rec := b.do(http.MethodPost, "/ui/login", url.Values{"token": {"ana-token-1"}})
	c := b.cookies[sessionCookie]
	if rec.Code != http.StatusSeeOther || c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/ui/" {
		t.Fatalf("login: %d %+v", rec.Code, c)
	}
	page := b.do(http.MethodGet, "/ui/approvals", nil)
	body := page.Body.String()
	for _, want := range []string{`id="` + r.ID + `"`, `href="#` + r.ID + `"`, "issue_refund", "[redacted]", "signed in as <b>ana</b>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "4111") || strings.Contains(body, "<script") {
		t.Error("the page shows a redacted value or carries a script")
	}
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}

	// Without the CSRF token, or with another session's, nothing is decided.
	other := &browser{t: t, h: f.h}
	other.do(http.MethodPost, "/ui/login", url.Values{"token": {adminToken}})
	for name, form := range map[string]url.Values{
		"no csrf":              {"decision": {"approve"}},
		"wrong csrf":           {"decision": {"approve"}, "csrf": {strings.Repeat("0", 64)}},
		"other session csrf":   {"decision": {"approve"}, "csrf": {other.csrf()}},
		"csrf given twice":     {"decision": {"approve"}, "csrf": {b.csrf(), b.csrf()}},
		"decision given twice": {"decision": {"deny", "approve"}, "csrf": {b.csrf()}},
	} {
		if rec := b.do(http.MethodPost, "/ui/approvals/"+r.ID, form); rec.Code < 400 {
			t.Errorf("%s: %d", name, rec.Code)
		}
	}
	// No cookie (a cross-site post carries none under SameSite=Strict).
	anon := &browser{t: t, h: f.h}
	if rec := anon.do(http.MethodPost, "/ui/approvals/"+r.ID, url.Values{"decision": {"approve"}, "csrf": {b.csrf()}}); rec.Code != http.StatusUnauthorized {
		t.Errorf("no session: %d", rec.Code)
	}
	// An altered cookie is no session.
	forged := &browser{t: t, h: f.h, cookies: map[string]*http.Cookie{sessionCookie: {Name: sessionCookie, Value: strings.Replace(c.Value, ".", ".A", 1)}}}
	if rec := forged.do(http.MethodPost, "/ui/approvals/"+r.ID, url.Values{"decision": {"approve"}, "csrf": {b.csrf()}}); rec.Code != http.StatusUnauthorized {
		t.Errorf("forged cookie: %d", rec.Code)
	}
	if got, _ := f.svc.Get(context.Background(), r.ID); got.State != Pending {
		t.Fatalf("a refused form decided: %+v", got)
	}

	rec = b.do(http.MethodPost, "/ui/approvals/"+r.ID, url.Values{"decision": {"approve"}, "note": {"checked"}, "csrf": {b.csrf()}})
	if rec.Code != http.StatusSeeOther || !strings.HasSuffix(rec.Header().Get("Location"), "#"+r.ID) {
		t.Fatalf("decide: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	got, _ := f.svc.Get(context.Background(), r.ID)
	if got.State != Approved || got.DecidedBy != "ana" || got.Note != "checked" {
		t.Fatalf("after the page's approve: %+v", got)
	}
	// The admin token's session records "admin".
	r2, _ := f.hold(t, Operator)
	other.do(http.MethodPost, "/ui/approvals/"+r2.ID, url.Values{"decision": {"deny"}, "csrf": {other.csrf()}})
	if got, _ := f.svc.Get(context.Background(), r2.ID); got.State != Denied || got.DecidedBy != adminName {
		t.Fatalf("admin session deny: %+v", got)
	}
	// The crafted words, not their digits alone: an id or a token on the
	// page may hold "555" by chance.
	if page := b.do(http.MethodGet, "/ui/approvals?decided="+r.ID+"&state=call+ops+at+555", nil).Body.String(); strings.Contains(page, "ops at") {
		t.Error("a crafted link put its words on the page")
	}
	if page := b.do(http.MethodGet, "/ui/approvals?decided="+r.ID+"&state=approved", nil).Body.String(); !strings.Contains(page, r.ID+" approved") {
		t.Error("the redirect's message is missing")
	}
	if page := b.do(http.MethodGet, "/ui/approvals", nil).Body.String(); !strings.Contains(page, "Recent decisions") || !strings.Contains(page, "checked") {
		t.Fatal("recent decisions missing")
	}

	// Over TLS the cookie is Secure.
	tb := &browser{t: t, h: f.h, tls: true}
	req := httptest.NewRequest(http.MethodPost, "https://admin.example/ui/login", strings.NewReader("token=ana-token-1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	out := httptest.NewRecorder()
	tb.h.ServeHTTP(out, req)
	if cs := out.Result().Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Fatalf("login over TLS: %v", cs)
	}
}

// TestPageSessionAcrossReplicas: a cookie made by one replica works at
// another with the same token, and ends when the token is removed.
func TestPageSessionAcrossReplicas(t *testing.T) {
	store := NewMemory(Options{})
	a := New(Config{Store: store}).Handler(Tokens{Named: []NamedToken{{Name: "ana", Token: "ana-token-1"}}})
	bh := New(Config{Store: store}).Handler(Tokens{Named: []NamedToken{{Name: "ana", Token: "ana-token-1"}}})
	gone := New(Config{Store: store}).Handler(Tokens{Named: []NamedToken{{Name: "ana", Token: "rotated"}}})
	br := &browser{t: t, h: a}
	br.do(http.MethodPost, "/ui/login", url.Values{"token": {"ana-token-1"}})
	br.h = bh
	if !strings.Contains(br.do(http.MethodGet, "/ui/approvals", nil).Body.String(), "signed in as") {
		t.Fatal("replica B does not take replica A's session")
	}
	br.h = gone
	if strings.Contains(br.do(http.MethodGet, "/ui/approvals", nil).Body.String(), "signed in as") {
		t.Fatal("a session outlived its token")
	}
	// Without any token the page stays closed.
	closed := &browser{t: t, h: New(Config{Store: store}).Handler(Tokens{})}
	if rec := closed.do(http.MethodPost, "/ui/login", url.Values{"token": {""}}); rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("login without tokens: %d", rec.Code)
	}
}

func TestNotifySlackFormat(t *testing.T) {
	got := make(chan []byte, 1)
	var ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ctype = r.Header.Get("Content-Type")
		got <- body
	}))
	defer srv.Close()
	m := NewMetrics(prometheus.NewRegistry())
	n := NewNotifier(srv.URL, "", webhook.Retry{Attempts: 1, Base: time.Millisecond, Max: time.Millisecond, Timeout: time.Second}, m, nil)
	defer n.Close()
	svc := New(Config{Store: NewMemory(Options{}), Metrics: m, Notifier: n, NotifyFormat: "slack",
		PageURL: "https://ops.example/ui/approvals",
		Redact: func(string, json.RawMessage) json.RawMessage {
			return json.RawMessage(`{"card":"[redacted]","memo":"<b>` + strings.Repeat("x", 500) + `"}`)
		}})
	call, _ := NewCall("issue_refund", []byte(`{"card":"4111","memo":"hi"}`))
	r, _, err := svc.Request(context.Background(), HeldAnswer{Calls: []HeldCall{call}, Held: []byte("held"), UserText: "refund my order please"})
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	select {
	case body = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification")
	}
	var msg map[string]any
	if err := json.Unmarshal(body, &msg); err != nil || len(msg) != 1 {
		t.Fatalf("not an incoming-webhook message: %s", body)
	}
	text, _ := msg["text"].(string)
	for _, want := range []string{"issue_refund", "[redacted]", "&lt;b&gt;", "…", "https://ops.example/ui/approvals#" + r.ID, r.ExpiresAt.UTC().Format(time.RFC3339)} {
		if !strings.Contains(text, want) {
			t.Errorf("message lacks %q: %s", want, text)
		}
	}
	if strings.Contains(text, "4111") || strings.Contains(text, "<b>") || strings.Contains(text, "refund my order") || len(text) > 600 {
		t.Errorf("message shows what it must not, or is too long (%d): %s", len(text), text)
	}
	if ctype != "application/json" {
		t.Errorf("content type %q", ctype)
	}
}

// TestChainVerifies: the events of a service form a chain that verifies,
// and deleting, editing or reordering one record breaks it at its line.
func TestChainVerifies(t *testing.T) {
	var lines [][]byte
	svc := New(Config{Store: NewMemory(Options{}), Audit: func(e Event) {
		b, _ := json.Marshal(map[string]any{"time": e.At, "api": "approvals", "approval": e})
		lines = append(lines, b)
	}})
	other := New(Config{Store: NewMemory(Options{}), Audit: func(e Event) {
		b, _ := json.Marshal(map[string]any{"api": "approvals", "approval": e})
		lines = append(lines, b)
	}})
	call, _ := NewCall("refund", []byte(`{}`))
	for i := 0; i < 3; i++ {
		for _, s := range []*Service{svc, other} {
			r, _, _ := s.Request(context.Background(), HeldAnswer{Calls: []HeldCall{call}, Held: []byte("h")})
			if _, err := s.Decide(context.Background(), r.ID, Decision{Approve: i%2 == 0, By: "ana"}); err != nil {
				t.Fatal(err)
			}
		}
		lines = append(lines, []byte(`{"api":"openai.chat","escalation":{"id":"esc_1"}}`))
	}
	file := func(ls [][]byte) io.Reader { return bytes.NewReader(append(bytes.Join(ls, []byte("\n")), '\n')) }
	n, err := VerifyChain(file(lines))
	if err != nil || n != 12 {
		t.Fatalf("intact chain: %d, %v", n, err)
	}
	without := func(i int) [][]byte { return append(append([][]byte{}, lines[:i]...), lines[i+1:]...) }
	brokenAt := func(name string, ls [][]byte, line int) {
		t.Helper()
		_, err := VerifyChain(file(ls))
		var ce *ChainError
		if !errors.As(err, &ce) || ce.Line != line {
			t.Errorf("%s: %v, want a break at line %d", name, err, line)
		}
	}
	// Each round: svc requested, svc decided, other requested, other
	// decided, an escalation.
	brokenAt("deleted first", without(0), 1)
	brokenAt("deleted other's first", without(2), 3)
	brokenAt("deleted a middle one", without(5), 6)
	edited := append([][]byte{}, lines...)
	edited[1] = bytes.Replace(edited[1], []byte(`"by":"ana"`), []byte(`"by":"bob"`), 1)
	if bytes.Equal(edited[1], lines[1]) {
		t.Fatal("the edit changed nothing")
	}
	brokenAt("edited by", edited, 6)
	swapped := append([][]byte{}, lines...)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	brokenAt("reordered", swapped, 1)
	// Re-escaping a string the same way is no edit.
	same := append([][]byte{}, lines...)
	same[0] = bytes.Replace(same[0], []byte(`"requested"`), []byte(`"requ\u0065sted"`), 1)
	if _, err := VerifyChain(file(same)); err != nil {
		t.Errorf("an equal re-encoding broke the chain: %v", err)
	}
	if _, err := VerifyChain(strings.NewReader("{\"approval\":{\"result\":\"approved\"}}\n")); err == nil {
		t.Error("a record without chain fields verified")
	}
}

// pauseRedis stops the server's process until the returned func resumes
// it (also at cleanup).
func pauseRedis(t *testing.T, srv *redisServer) func() {
	t.Helper()
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = srv.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

// whilePaused runs f with the server's process stopped, resumes it and
// waits until the store answers again.
func whilePaused(t *testing.T, srv *redisServer, s *Redis, f func()) {
	t.Helper()
	resume := pauseRedis(t, srv)
	f()
	resume()
	for deadline := time.Now().Add(10 * time.Second); s.Ping(ctx) != nil; {
		if time.Now().After(deadline) {
			t.Fatal("redis did not come back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedisPausedLeavesNoChange: a server paused while a decision or a
// hold is on its way answers ErrUnavailable, and once it runs again the
// write it received late has changed nothing: the record is still
// pending, and the hold left no record. The scripts are loaded and the
// connection open first, so the paused server holds the write itself.
func TestRedisPausedLeavesNoChange(t *testing.T) {
	srv := startRedis(t)
	s := openRedis(t, srv.Addr, Options{})
	svc := New(Config{Store: s})
	call, _ := NewCall("refund", []byte(`{}`))
	spec := HeldAnswer{Calls: []HeldCall{call}, Held: []byte("h"), RequestDigest: "sha256:r"}
	warm, _, err := svc.Request(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Decide(ctx, warm.ID, Decision{By: "ana"}); err != nil {
		t.Fatal(err)
	}
	r, _, err := svc.Request(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	whilePaused(t, srv, s, func() {
		if _, err := svc.Decide(ctx, r.ID, Decision{Approve: true, By: "ana"}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("decide with redis paused: %v", err)
		}
	})
	if got, err := s.Get(ctx, r.ID); err != nil || got.State != Pending {
		t.Errorf("a decision answered 503 applied: %+v, %v", got, err)
	}
	whilePaused(t, srv, s, func() {
		if _, _, err := svc.Request(ctx, spec); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("hold with redis paused: %v", err)
		}
	})
	if n, err := s.Pending(ctx); err != nil || n != 1 {
		t.Errorf("pending after a hold answered 503: %d, %v (want only the first)", n, err)
	}
	recs, err := s.List(ctx, "")
	if err != nil || len(recs) != 2 {
		t.Errorf("records after the pauses: %d, %v", len(recs), err)
	}
	// The store works again, and the retried decision applies once.
	if got, err := svc.Decide(ctx, r.ID, Decision{Approve: true, By: "ana"}); err != nil || got.State != Approved {
		t.Fatalf("retry: %+v, %v", got, err)
	}
	// A release answered 503 did not use the approval: the retry gets
	// the held answer.
	m := Match{RequestDigest: "sha256:r"}
	if _, err := svc.Claim(ctx, warm.ID, m); err == nil {
		t.Fatal("claimed a denied approval") // loads the claim script
	}
	whilePaused(t, srv, s, func() {
		if _, err := svc.Claim(ctx, r.ID, m); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("claim with redis paused: %v", err)
		}
	})
	if got, err := svc.Claim(ctx, r.ID, m); err != nil || string(got.Held) != "h" {
		t.Fatalf("a release answered 503 used the approval: %+v, %v", got, err)
	}
}

// TestAdminPausedRedisAnswers503: through the admin API, the 503 says
// nothing changed, and nothing did.
func TestAdminPausedRedisAnswers503(t *testing.T) {
	srv := startRedis(t)
	s := openRedis(t, srv.Addr, Options{})
	svc := New(Config{Store: s})
	h := svc.Handler(Tokens{Named: []NamedToken{{Name: "ana", Token: "ana-token-1"}}})
	call, _ := NewCall("refund", []byte(`{}`))
	r, _, err := svc.Request(ctx, HeldAnswer{Calls: []HeldCall{call}, Held: []byte("h")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Decide(ctx, "apr_00000000000000000000000000000000", Decision{By: "x"}); err == nil {
		t.Fatal("decided an unknown approval") // loads the script
	}
	resume := pauseRedis(t, srv)
	req := httptest.NewRequest(http.MethodPost, "/approvals/"+r.ID, strings.NewReader(`{"decision":"approve"}`))
	req.Header.Set("Authorization", "Bearer ana-token-1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resume()
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "nothing was changed") {
		t.Fatalf("approve with redis paused: %d %s", rec.Code, rec.Body)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := s.Get(ctx, r.ID)
		if err == nil {
			if got.State != Pending {
				t.Fatalf("a 503 left a change behind: %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis did not come back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestViewMasksRedactedValuesInTheUserMessage: a value escalation.redact
// blanks in the arguments is blanked in the user's message too.
func TestViewMasksRedactedValuesInTheUserMessage(t *testing.T) {
	f := newFixture(t, adminToken) // redacts "4111"
	call, _ := NewCall("issue_refund", []byte(`{"order_id":"A1","card":"4111"}`))
	r, _, err := f.svc.Request(context.Background(), HeldAnswer{Calls: []HeldCall{call}, Held: []byte("h"),
		UserText: "Refund A1 to card 4111 please, 41111 is not mine"})
	if err != nil {
		t.Fatal(err)
	}
	v := f.svc.view(r)
	if v.LastUserMessage != "Refund A1 to card [redacted] please, [redacted]1 is not mine" {
		t.Fatalf("message %q", v.LastUserMessage)
	}
}

// FuzzVerifyChain: any file is read without a panic, and a file that
// verifies still verifies with a line of another record kind added.
func FuzzVerifyChain(f *testing.F) {
	f.Add([]byte(`{"approval":{"result":"requested","approval_id":"apr_1","at":"2026-01-01T00:00:00Z","chain":"c","seq":1,"prev":""}}` + "\n"))
	f.Add([]byte(`{"approval":{"chain":"c","seq":2,"prev":"sha256:00"}}` + "\n{}\n"))
	f.Add([]byte("{\"approval\":null}\n\n[1]\n"))
	f.Add([]byte(`{"approval":{"chain":"c","seq":1,"prev":"","by":"a","by":"b"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := VerifyChain(bytes.NewReader(data))
		if err == nil {
			m, err2 := VerifyChain(bytes.NewReader(append(append([]byte(nil), data...), "\n{\"api\":\"chat\"}\n"...)))
			if err2 != nil || m != n {
				t.Fatalf("an escalation line changed the verdict: %d %v -> %d %v", n, err, m, err2)
			}
		} else if ce, ok := err.(*ChainError); !ok || ce.Line < 1 {
			t.Fatalf("error %T %v", err, err)
		}
	})
}

// FuzzSessionCookie: no cookie value but one the handler signed is a
// session, and none panics.
func FuzzSessionCookie(f *testing.F) {
	p := &pageHandler{svc: New(Config{Store: NewMemory(Options{})}), tokens: newTokenSet(Tokens{Admin: "adm", Named: []NamedToken{{Name: "ana", Token: "t"}}})}
	k, _ := p.tokens.byName(true, "ana")
	good := cookieValue(k, "nonce", time.Now().Add(time.Hour))
	f.Add(good)
	f.Add(strings.Replace(good, ".", ".x", 1))
	f.Add("bnxhbmF8OTk5OTk5OTk5OXxu.AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		req := httptest.NewRequest(http.MethodGet, "/ui/approvals", nil)
		req.Header.Set("Cookie", sessionCookie+"="+v)
		ss, ok := p.session(req, time.Now())
		if ok && v != good {
			// Another value is a session only if it signs the same payload.
			pl, _, _ := strings.Cut(v, ".")
			gpl, _, _ := strings.Cut(good, ".")
			if pl != gpl || ss.by() != "ana" {
				t.Fatalf("forged session %q accepted as %+v", v, ss)
			}
		}
	})
}

// TestDecideOutlivesItsRequest: a decision whose request is gone still
// completes and is audited, rather than changing the store unrecorded.
func TestDecideOutlivesItsRequest(t *testing.T) {
	srv := startRedis(t)
	var events []Event
	svc := New(Config{Store: openRedis(t, srv.Addr, Options{}), Audit: func(e Event) { events = append(events, e) }})
	call, _ := NewCall("refund", []byte(`{}`))
	r, _, err := svc.Request(ctx, HeldAnswer{Calls: []HeldCall{call}, Held: []byte("h")})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := svc.Decide(cctx, r.ID, Decision{Approve: true, By: "ana"})
	if err != nil || got.State != Approved || len(events) != 2 || events[1].Result != ResultApproved {
		t.Fatalf("decide on a cancelled context: %+v, %v, %d events", got, err, len(events))
	}
}

// TestPageShowsWhoAsked: the caller's digest a hold was bound to is on the
// page, shortened, and in the admin API whole.
func TestPageShowsWhoAsked(t *testing.T) {
	f := newFixture(t, adminToken)
	call, _ := NewCall("issue_refund", []byte(`{}`))
	caller := Binding{Token: "client-token"}.Digest()
	r, _, err := f.svc.Request(context.Background(), HeldAnswer{Calls: []HeldCall{call}, Held: []byte("h"), Caller: caller})
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, h: f.h}
	b.do(http.MethodPost, "/ui/login", url.Values{"token": {adminToken}})
	page := b.do(http.MethodGet, "/ui/approvals", nil).Body.String()
	if !strings.Contains(page, ">"+caller[:len("sha256:")+12]+"…<") || !strings.Contains(page, `title="`+caller+`"`) {
		t.Fatalf("the page does not say who asked (%s):\n%s", caller, page)
	}
	if code, out, _ := f.do(t, http.MethodGet, "/approvals/"+r.ID, "Bearer "+adminToken, "", nil); code != 200 || out["asked_by"] != caller {
		t.Fatalf("admin API: %d %v", code, out)
	}
}
