package test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/sink"
)

// slackReceiver is an incoming webhook that keeps each message's text.
type slackReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	msgs []string
}

func newSlackReceiver(t *testing.T) *slackReceiver {
	s := &slackReceiver{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Text string `json:"text"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &m) != nil || m.Text == "" {
			t.Errorf("not an incoming-webhook message: %s", b)
		}
		s.mu.Lock()
		s.msgs = append(s.msgs, m.Text)
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// message waits for the message that names id.
func (s *slackReceiver) message(t *testing.T, id string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		for _, m := range s.msgs {
			if strings.Contains(m, id) {
				s.mu.Unlock()
				return m
			}
		}
		s.mu.Unlock()
	}
	t.Fatalf("no slack message names %s", id)
	return ""
}

// TestApprovalsPageInChromium: a person opens the link of a Slack
// message in a real browser with scripts off, signs in with a named
// token, sees the held refund with its redacted arguments and the user's
// message, clicks Approve, and the client's resume is released; Deny
// refuses the other. decided_by is the token's name, the session cookie
// is HttpOnly and SameSite=Strict, and the page asks no other host for
// anything.
func TestApprovalsPageInChromium(t *testing.T) {
	chrome := startChromium(t)
	up := newRefundUpstream(t)
	slack := newSlackReceiver(t)
	t.Setenv("TG_PAGE_ADMINS", "ana:ana-page-token,bob:bob-page-token")
	cfg := refundConfig(up.srv.URL, "  admin_tokens_env: TG_PAGE_ADMINS\n  notify: "+slack.srv.URL+
		"\n  notify_format: slack\n  page_url: https://ops.example/ui/approvals\n", 100000, "operator") +
		"escalation:\n  redact: [/order_id]\n"
	g := startApprovalGate(t, t.TempDir(), cfg)
	admin := "http://" + g.app.AdminAddr()

	// Two requests that differ, so the second is no retry of the first.
	const again = "Refund order ord_1 again, it came broken."
	approveID, denyID := rawHold(t, g.url()), holdAsking(t, g.url(), again)
	if st, _, b := rawChat(t, g.url(), resumeWith(approveID)); st != http.StatusConflict || !strings.Contains(string(b), "approval_pending") {
		t.Fatalf("resume before a decision: %d %s", st, b)
	}
	msg := slack.message(t, approveID)
	link := msg[strings.Index(msg, "https://ops.example/"):]
	if !strings.HasSuffix(link, "/ui/approvals#"+approveID) || strings.Contains(msg, "ord_1") || !strings.Contains(msg, "issue_refund") {
		t.Fatalf("slack message %q", msg)
	}
	// The link, with the admin listener for ops.example.
	pageURL := admin + strings.TrimPrefix(link, "https://ops.example")

	chrome.openPage()
	var mu sync.Mutex
	var asked []string
	record := func(m cdpMessage) {
		if m.Method != "Network.requestWillBeSent" {
			return
		}
		var p struct {
			Request struct {
				URL string `json:"url"`
			} `json:"request"`
		}
		_ = json.Unmarshal(m.Params, &p)
		mu.Lock()
		asked = append(asked, p.Request.URL)
		mu.Unlock()
	}
	chrome.call("Network.enable", nil)
	chrome.call("Page.enable", nil)
	chrome.call("Emulation.setScriptExecutionDisabled", map[string]any{"value": true})
	chrome.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 960, "height": 900, "deviceScaleFactor": 1, "mobile": false})
	navigate := func(u string) {
		var nav struct {
			LoaderID string `json:"loaderId"`
		}
		chrome.decode(chrome.call("Page.navigate", map[string]any{"url": u}), &nav)
		if nav.LoaderID == "" {
			// Only the fragment changed: the document stays, so load it
			// again to see what changed since.
			chrome.call("Page.reload", nil)
		}
		chrome.waitEvent("Page.loadEventFired", record)
	}
	submit := func(selector string) {
		chrome.click(selector)
		chrome.waitEvent("Page.loadEventFired", record)
	}
	cookies := func() []map[string]any {
		var out struct {
			Cookies []map[string]any `json:"cookies"`
		}
		chrome.decode(chrome.call("Network.getCookies", map[string]any{"urls": []string{admin + "/ui/approvals"}}), &out)
		return out.Cookies
	}

	navigate(pageURL)
	if !strings.Contains(chrome.html(), `name="token"`) {
		t.Fatalf("no login form:\n%s", chrome.html())
	}
	chrome.typeInto("#token", "not-a-token")
	submit("form.login button")
	if html := chrome.html(); !strings.Contains(html, "not an approvals admin token") || strings.Contains(html, approveID) {
		t.Fatalf("a wrong token:\n%s", html)
	}
	if cs := cookies(); len(cs) != 0 {
		t.Fatalf("a wrong token set a cookie: %v", cs)
	}
	chrome.typeInto("#token", "ana-page-token")
	submit("form.login button")
	cs := cookies()
	if len(cs) != 1 || cs[0]["httpOnly"] != true || cs[0]["sameSite"] != "Strict" || cs[0]["secure"] != false || cs[0]["path"] != "/ui/" {
		t.Fatalf("session cookie %v", cs)
	}

	navigate(pageURL)
	html := chrome.html()
	for _, want := range []string{`id="` + approveID + `"`, `id="` + denyID + `"`, "issue_refund", `"order_id": "[redacted]"`,
		"Refund order [redacted], 5 dollars.", "Refund order [redacted] again, it came broken.", "refunds-v1", "signed in as <b>ana</b>", `href="#` + approveID + `"`} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(html, "ord_1") {
		t.Error("the page shows a redacted value")
	}
	png := chrome.screenshot()
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatal("the screenshot is not a PNG")
	}
	shot := filepath.Join(t.TempDir(), "approvals-page.png")
	if os.Getenv("TOOLGATE_UPDATE_SCREENSHOT") == "1" {
		shot = filepath.Join("..", "docs", "approvals-page.png")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}

	submit("#" + approveID + " button.approve")
	if html := chrome.html(); !strings.Contains(html, approveID+" approved") {
		t.Fatalf("after Approve:\n%s", html)
	}
	st, hdr, b := rawChat(t, g.url(), resumeWith(approveID))
	if st != http.StatusOK || hdr.Get("X-Toolgate-Outcome") != "approved" || !strings.Contains(string(b), "issue_refund") {
		t.Fatalf("resume after Approve: %d %v %s", st, hdr, b)
	}

	chrome.typeInto("#note-"+denyID, "customer withdrew")
	submit("#" + denyID + " button.deny")
	if st, _, b, _ := postRaw(g.url()+"/v1/chat/completions", askingBody(again), resumeWith(denyID)); st != http.StatusForbidden || !strings.Contains(string(b), "approval_denied") {
		t.Fatalf("resume after Deny: %d %s", st, b)
	}
	for id, want := range map[string]string{approveID: "released", denyID: "denied"} {
		v := adminGet(t, admin+"/approvals/"+id, "bob-page-token")
		if v["state"] != want || v["decided_by"] != "ana" {
			t.Errorf("%s: %v", id, v)
		}
	}
	if html := chrome.html(); !strings.Contains(html, "customer withdrew") || !strings.Contains(html, "Recent decisions") {
		t.Errorf("recent decisions do not show the deny:\n%s", html)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(asked) < 5 {
		t.Fatalf("recorded only %d requests: %v", len(asked), asked)
	}
	for _, u := range asked {
		p, err := url.Parse(u)
		if err != nil || p.Host != g.app.AdminAddr() {
			t.Errorf("the page asked another host: %s", u)
		}
	}

	// The sinks' approval records, as the file sink writes them, chain.
	var lines bytes.Buffer
	for _, r := range g.sink.records() {
		line, err := sink.Encode(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		lines.Write(append(line, '\n'))
	}
	if n, err := approval.VerifyChain(&lines); err != nil || n < 6 {
		t.Fatalf("sink records: %d verified, %v", n, err)
	}
}

// askingBody is the refund request with text as the user's message.
func askingBody(text string) string {
	return strings.Replace(chatRefundBody, "Refund order ord_1, 5 dollars.", text, 1)
}

// holdAsking holds the refund for a conversation whose user message is
// text and returns the approval id.
func holdAsking(t *testing.T, base, text string) string {
	t.Helper()
	st, _, b, err := postRaw(base+"/v1/chat/completions", askingBody(text), nil)
	if err != nil || st != http.StatusUnprocessableEntity {
		t.Fatalf("hold: %d %v %s", st, err, b)
	}
	var v any
	_ = json.Unmarshal(b, &v)
	a, _ := findKey(v, "approval")
	m, _ := a.(map[string]any)
	id, _ := m["id"].(string)
	if id == "" {
		t.Fatalf("no approval in %s", b)
	}
	return id
}

func adminGet(t *testing.T, u, token string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
