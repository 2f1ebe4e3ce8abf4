package test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Approvals bound to their caller: with inbound_auth, a resume is
// released only to the client token that made the hold. An approval's id
// is no secret (logs, sink records, traces and notifications carry it).

const (
	bindTokenA = "tok-alice-8c1f2e0d6b"
	bindTokenB = "tok-bob-5a9e7c3b41"
)

// boundConfig is refundConfig with inbound_auth on the two tokens.
func boundConfig(t *testing.T, upstreamURL, store, approver string) string {
	t.Setenv("TG_BIND_TOKENS", bindTokenA+","+bindTokenB)
	return refundConfig(upstreamURL, store, 100000, approver) + "inbound_auth: {tokens_env: TG_BIND_TOKENS}\n"
}

// as adds the token to h: in x-api-key for the Anthropic SDK, as a bearer
// token for the others (the Gemini SDK writes its own key over a
// x-goog-api-key header; toolgate reads the first header holding a token).
func as(rt route, token string, h map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	switch rt.name {
	case "messages":
		out["X-Api-Key"] = token
	default:
		out["Authorization"] = "Bearer " + token
	}
	return out
}

// TestApprovalsBoundToInboundToken: on every route, plain and streamed,
// a call held for client A and approved is refused to client B with
// approval_mismatch (409, the route's envelope, x-should-retry false),
// which releases nothing; A then gets it once.
func TestApprovalsBoundToInboundToken(t *testing.T) {
	for _, rt := range routes {
		for _, stream := range []bool{false, true} {
			t.Run(rt.name+map[bool]string{false: "/whole", true: "/stream"}[stream], func(t *testing.T) {
				up := newRefundUpstream(t)
				g := startApprovalGate(t, t.TempDir(), boundConfig(t, up.srv.URL, "  store: memory\n", "operator"))
				r := rt.send(t, g.url(), stream, false, as(rt, bindTokenA, nil))
				if r.status != http.StatusUnprocessableEntity || len(r.calls) != 0 {
					t.Fatalf("hold: %d %v %v; body %s", r.status, r.calls, r.err, r.raw)
				}
				tk := r.approval(t)
				if st := g.decide(tk.ID, "approve"); st != http.StatusOK {
					t.Fatalf("approve: %d", st)
				}
				for range 2 {
					expectResumeRefused(t, rt.send(t, g.url(), stream, false, as(rt, bindTokenB, resumeWith(tk.ID))), "approval_mismatch", http.StatusConflict)
				}
				r = rt.send(t, g.url(), stream, false, as(rt, bindTokenA, resumeWith(tk.ID)))
				if r.err != nil || strings.Join(r.calls, "|") != strings.Join(wantRefund, "|") || r.header.Get("X-Toolgate-Outcome") != "approved" {
					t.Fatalf("A's resume: %d %v %v; body %s", r.status, r.err, r.calls, r.raw)
				}
				expectResumeRefused(t, rt.send(t, g.url(), stream, false, as(rt, bindTokenA, resumeWith(tk.ID))), "approval_used", http.StatusConflict)
				if n := up.n.Load(); n != 1 {
					t.Errorf("%d upstream requests, want 1 (the hold)", n)
				}
				for _, rec := range g.sink.records() {
					if b, _ := json.Marshal(rec); strings.Contains(string(b), bindTokenA) || strings.Contains(string(b), bindTokenB) {
						t.Errorf("a sink record holds a client token: %s", b)
					}
				}
			})
		}
	}
}

// A caller approval's secret does not stand in for the caller: B holding
// A's id and secret is refused, and A's secret still releases it.
func TestApprovalsCallerSecretBoundToToken(t *testing.T) {
	rt := routes[0]
	up := newRefundUpstream(t)
	g := startApprovalGate(t, t.TempDir(), boundConfig(t, up.srv.URL, "  store: memory\n", "caller"))
	r := rt.send(t, g.url(), false, false, as(rt, bindTokenA, nil))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("hold: %d %v; body %s", r.status, r.err, r.raw)
	}
	tk := r.approval(t)
	if len(tk.Secret) != 32 {
		t.Fatalf("caller approval without a secret: %+v", tk)
	}
	withSecret := map[string]string{"X-Toolgate-Approval": tk.ID, "X-Toolgate-Approval-Secret": tk.Secret}
	expectResumeRefused(t, rt.send(t, g.url(), false, false, as(rt, bindTokenB, withSecret)), "approval_mismatch", http.StatusConflict)
	r = rt.send(t, g.url(), false, false, as(rt, bindTokenA, withSecret))
	if r.err != nil || strings.Join(r.calls, "|") != strings.Join(wantRefund, "|") {
		t.Fatalf("A's resume: %d %v %v; body %s", r.status, r.err, r.calls, r.raw)
	}
}

// TestApprovalsBoundAcrossRedisReplicas: two toolgates on one redis-server.
// Held for A at one and approved, the call is refused to B at both and
// released to A at the other, once.
func TestApprovalsBoundAcrossRedisReplicas(t *testing.T) {
	rd := startTestRedis(t)
	up := newRefundUpstream(t)
	store := "  store: redis://" + rd.addr + "/0\n"
	a := startApprovalGate(t, t.TempDir(), boundConfig(t, up.srv.URL, store, "operator"))
	b := startApprovalGate(t, t.TempDir(), boundConfig(t, up.srv.URL, store, "operator"))
	bearer := func(tok string, h map[string]string) map[string]string {
		return as(routes[0], tok, h)
	}
	st, _, body := rawChat(t, a.url(), bearer(bindTokenA, nil))
	if st != http.StatusUnprocessableEntity {
		t.Fatalf("hold at a: %d %s", st, body)
	}
	id := approvalID(t, body)
	if st := b.decide(id, "approve"); st != http.StatusOK {
		t.Fatalf("approve at b: %d", st)
	}
	for _, g := range []*approvalGate{a, b} {
		st, h, body := rawChat(t, g.url(), bearer(bindTokenB, resumeWith(id)))
		if st != http.StatusConflict || !strings.Contains(string(body), `"approval_mismatch"`) || h.Get("X-Should-Retry") != "false" ||
			strings.Contains(string(body), "ord_1") {
			t.Fatalf("B's resume: %d %v %s", st, h, body)
		}
	}
	st, h, body := rawChat(t, b.url(), bearer(bindTokenA, resumeWith(id)))
	if st != http.StatusOK || h.Get("X-Toolgate-Outcome") != "approved" || !strings.Contains(string(body), `"issue_refund"`) {
		t.Fatalf("A's resume at b: %d %s", st, body)
	}
	if st, _, body := rawChat(t, a.url(), bearer(bindTokenA, resumeWith(id))); st != http.StatusConflict || !strings.Contains(string(body), "approval_used") {
		t.Fatalf("A's second resume at a: %d %s", st, body)
	}
	if n := up.n.Load(); n != 1 {
		t.Errorf("%d upstream requests, want 1 (the hold)", n)
	}
	// The record in redis keeps the token's digest, never the token.
	resp, err := http.Get("http://" + a.app.AdminAddr() + "/approvals/" + id)
	if err != nil {
		t.Fatal(err)
	}
	view, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(view), bindTokenA) {
		t.Errorf("the admin view shows the client token: %s", view)
	}
}

// approvalID reads the approval's id from an escalation body.
func approvalID(t *testing.T, body []byte) string {
	t.Helper()
	var v any
	_ = json.Unmarshal(body, &v)
	a, _ := findKey(v, "approval")
	m, _ := a.(map[string]any)
	id, _ := m["id"].(string)
	if id == "" {
		t.Fatalf("no approval in %s", body)
	}
	return id
}
