package test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// replayOn is the default window, which the harness turns off unless a
// test's config names it.
const replayOn = "escalation:\n  replay_window: 60s\n"

// postChat sends body to the Chat route as it is, with extra headers, and
// returns the status, headers and body.
func postChat(t *testing.T, base string, body []byte, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// escalationID reads a 422's escalation id and checks the header names it.
func escalationID(t *testing.T, status int, h http.Header, body []byte) string {
	t.Helper()
	return escalationIDWith(t, http.StatusUnprocessableEntity, status, h, body)
}

// replayedID is escalationID for a replay, which answers 409.
func replayedID(t *testing.T, status int, h http.Header, body []byte) string {
	t.Helper()
	return escalationIDWith(t, http.StatusConflict, status, h, body)
}

func escalationIDWith(t *testing.T, want, status int, h http.Header, body []byte) string {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, want %d: %s", status, want, body)
	}
	var e struct {
		Error struct {
			Escalation struct {
				ID string `json:"id"`
			} `json:"escalation"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || !strings.HasPrefix(e.Error.Escalation.ID, "esc_") {
		t.Fatalf("escalation body (%v): %s", err, body)
	}
	if got := h.Get("X-Toolgate-Escalation-Id"); got != e.Error.Escalation.ID {
		t.Errorf("X-Toolgate-Escalation-Id %q, body's id %q", got, e.Error.Escalation.ID)
	}
	return e.Error.Escalation.ID
}

// reformatted is the same JSON request written differently: members in
// another order and indented, as another run of a client may write it.
func reformatted(t *testing.T, body []byte) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(out, body) {
		t.Fatal("the reformatted body is the same bytes")
	}
	return out
}

// An escalation costs the model once however often the client retries the
// same request: the retry gets the same escalation from memory, with no
// upstream call, no second sink record and no second count.
func TestEscalationReplayedOnRetry(t *testing.T) {
	bad := func(int, *mockRequest) mockReply { return callsAnswer("chatcmpl-bad", badUnit) }
	m := newMockFunc(t, bad)
	g := weatherGate(t, m, replayOn)
	body := readTestdata(t, "request.json")

	st, h, first := postChat(t, g.URL, body, nil)
	id := escalationID(t, st, h, first)
	expectCount(t, m, 2) // the answer and its reprompt

	st, h, again := postChat(t, g.URL, reformatted(t, body), nil)
	if got := replayedID(t, st, h, again); got != id {
		t.Errorf("the retry got escalation %s, want %s", got, id)
	}
	if !bytes.Equal(again, first) {
		t.Errorf("the retry's body differs:\n%s\n%s", again, first)
	}
	if h.Get("X-Should-Retry") != "false" || h.Get("X-Toolgate-Outcome") != "escalated" || h.Get("X-Toolgate-Upstream-Calls") != "0" {
		t.Errorf("replay headers: %v", h)
	}
	expectCount(t, m, 2)
	if n := len(g.Sink.records()); n != 1 {
		t.Errorf("%d sink records, want 1", n)
	}

	other := bytes.Replace(body, []byte("Boston today"), []byte("Boston tonight"), 1)
	st, h, third := postChat(t, g.URL, other, nil)
	if got := escalationID(t, st, h, third); got == id {
		t.Error("a different request got the first request's escalation")
	}
	expectCount(t, m, 4)
	if n := len(g.Sink.records()); n != 2 {
		t.Errorf("%d sink records, want 2", n)
	}
	metrics := scrape(t, g)
	expectMetric(t, metrics, `toolgate_escalation_replays_total{api="chat"}`, 1)
	expectMetric(t, metrics, `toolgate_escalations_total{catalog_version="fixtures-v1",reason="schema_violation"}`, 2)
}

// Another caller sending the same request is judged on its own: a replay
// never answers one caller with another's escalation.
func TestEscalationReplayIsPerCaller(t *testing.T) {
	t.Setenv("TG_REPLAY_TOKENS", "tok-alice,tok-bob")
	m := newMockFunc(t, func(int, *mockRequest) mockReply { return callsAnswer("chatcmpl-bad", badUnit) })
	g := startGate(t, config(m, "", "inbound_auth:\n  tokens_env: TG_REPLAY_TOKENS\n"+replayOn+catalogYAML(t, "")))
	body := readTestdata(t, "request.json")
	as := func(tok string) string {
		st, h, b := postChat(t, g.URL, body, map[string]string{"Authorization": "Bearer " + tok})
		return escalationID(t, st, h, b)
	}
	alice := as("tok-alice")
	bob := as("tok-bob")
	if alice == bob {
		t.Error("two callers share one escalation")
	}
	expectCount(t, m, 4)
	st, h, b := postChat(t, g.URL, body, map[string]string{"Authorization": "Bearer tok-alice"})
	if again := replayedID(t, st, h, b); again != alice {
		t.Errorf("alice's retry got %s, want %s", again, alice)
	}
	expectCount(t, m, 4)
}

// With replay_window 0 every retry is judged again.
func TestEscalationReplayOff(t *testing.T) {
	m := newMockFunc(t, func(int, *mockRequest) mockReply { return callsAnswer("chatcmpl-bad", badUnit) })
	g := weatherGate(t, m, "escalation:\n  replay_window: 0s\n")
	body := readTestdata(t, "request.json")
	st, h, b := postChat(t, g.URL, body, nil)
	first := escalationID(t, st, h, b)
	st, h, b = postChat(t, g.URL, body, nil)
	if escalationID(t, st, h, b) == first {
		t.Error("replayed with replay_window 0")
	}
	expectCount(t, m, 4)
}

// A failure the client should retry is no escalation and is not replayed:
// the retry reaches the model.
func TestRetryableFailureIsNotReplayed(t *testing.T) {
	m := newMockFunc(t, func(n int, _ *mockRequest) mockReply {
		if n == 2 {
			return mockReply{Status: http.StatusTooManyRequests, Body: openAIError("slow down", "requests", "", "rate_limit_exceeded")}
		}
		return callsAnswer("chatcmpl-bad", badUnit)
	})
	g := weatherGate(t, m, replayOn)
	body := readTestdata(t, "request.json")
	if st, _, b := postChat(t, g.URL, body, nil); st != http.StatusTooManyRequests {
		t.Fatalf("status %d, want the reprompt's 429: %s", st, b)
	}
	st, h, b := postChat(t, g.URL, body, nil)
	escalationID(t, st, h, b)
	expectCount(t, m, 4)
}

// A held escalation is replayed with its ticket while the approval waits:
// one approval however often the request is retried. Once it is decided
// and released, the same request is a new question.
func TestHeldEscalationReplayedWhilePending(t *testing.T) {
	up := newRefundUpstream(t)
	g := startApprovalGate(t, t.TempDir(), refundConfig(up.srv.URL, "  store: memory\n", 100000, "operator"))
	id := rawHold(t, g.url())
	st, _, b := rawChat(t, g.url(), nil)
	var v any
	_ = json.Unmarshal(b, &v)
	a, _ := findKey(v, "approval")
	if m, _ := a.(map[string]any); st != http.StatusConflict || m["id"] != id {
		t.Errorf("the retry got %d holding %v, want 409 holding %s: %s", st, a, id, b)
	}
	if n := up.n.Load(); n != 1 {
		t.Errorf("%d upstream requests, want 1", n)
	}
	if n := len(escalationRecords(g.sink.records())); n != 1 {
		t.Errorf("%d escalation records, want 1", n)
	}
	if st := g.decide(id, "approve"); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	if st, _, b := rawChat(t, g.url(), resumeWith(id)); st != http.StatusOK {
		t.Fatalf("resume: %d %s", st, b)
	}
	if next := rawHold(t, g.url()); next == id {
		t.Error("a released approval's escalation was replayed")
	}
	if n := up.n.Load(); n != 2 {
		t.Errorf("%d upstream requests, want 2", n)
	}
}

// A stream whose escalation came before any byte is a plain 422 too, and
// its retry is replayed the same way.
func TestStreamEscalationReplayed(t *testing.T) {
	m := newMockFunc(t, func(n int, r *mockRequest) mockReply {
		if bytes.Contains(r.Body, []byte(`"stream":true`)) {
			return mockReply{Body: csCall(badUnit.ID, badUnit.Name, badUnit.Args), Header: map[string]string{"Content-Type": "text/event-stream"}}
		}
		return callsAnswer("chatcmpl-bad", badUnit)
	})
	g := weatherGate(t, m, replayOn)
	body := bytes.Replace(readTestdata(t, "request.json"), []byte(`"model":`), []byte(`"stream":true,"model":`), 1)
	st, h, first := postChat(t, g.URL, body, nil)
	id := escalationID(t, st, h, first)
	expectCount(t, m, 2)
	st, h, again := postChat(t, g.URL, body, nil)
	if got := replayedID(t, st, h, again); got != id || !bytes.Equal(again, first) {
		t.Errorf("the retry got %s %s, want %s", got, again, id)
	}
	expectCount(t, m, 2)
	if n := len(g.Sink.records()); n != 1 {
		t.Errorf("%d sink records, want 1", n)
	}
}
