package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/catalog"
)

// fakeServer is an MCP server written by hand, for what an SDK would not
// send: batches, odd answers, recorded headers.
type fakeServer struct {
	srv *httptest.Server
	// proto is the revision the server's initialize answer names.
	proto string
	// callResult, when set, is the result of every tools/call, written as
	// one SSE event when callSSE is set.
	callResult string
	callSSE    bool
	// discover, when set, is the result of server/discover.
	discover string
	// listError, when set, is the error tools/list answers with, with
	// HTTP status listStatus when that is set.
	listError  string
	listStatus int
	mu         sync.Mutex
	bodies     []string
	headers    []http.Header
}

const fakeTools = `{"tools":[{"name":"issue_refund","inputSchema":{"type":"object","properties":{"amount_cents":{"type":"integer"}},"required":["amount_cents"]}},{"name":"lookup_order","inputSchema":{"type":"object"}}]}`

func newFake(t *testing.T) *fakeServer {
	f := &fakeServer{proto: "2025-03-26"}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, string(body))
		f.headers = append(f.headers, r.Header.Clone())
		f.mu.Unlock()
		var one map[string]json.RawMessage
		var many []map[string]json.RawMessage
		if json.Unmarshal(body, &many) != nil {
			if json.Unmarshal(body, &one) != nil {
				http.Error(w, "bad", http.StatusBadRequest)
				return
			}
			many = []map[string]json.RawMessage{one}
		}
		var out []string
		sseAnswer := false
		for _, m := range many {
			if m["id"] == nil {
				continue
			}
			var method string
			_ = json.Unmarshal(m["method"], &method)
			result := `{"content":[{"type":"text","text":"ran"}]}`
			switch method {
			case "tools/list":
				result = fakeTools
				if f.listError != "" {
					w.Header().Set("Content-Type", "application/json")
					if f.listStatus != 0 {
						w.WriteHeader(f.listStatus)
					}
					io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m["id"])+`,"error":`+f.listError+`}`)
					return
				}
			case "tools/call":
				if f.callResult != "" {
					result, sseAnswer = f.callResult, f.callSSE
				}
			case "server/discover":
				if f.discover != "" {
					result = f.discover
				}
			case "initialize":
				result = `{"protocolVersion":"` + f.proto + `","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`
			}
			out = append(out, `{"jsonrpc":"2.0","id":`+string(m["id"])+`,"result":`+result+`}`)
		}
		if len(out) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if sseAnswer && one != nil {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: "+out[0]+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if one != nil {
			io.WriteString(w, out[0])
			return
		}
		io.WriteString(w, "["+strings.Join(out, ",")+"]")
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, b := range f.bodies {
		n += strings.Count(b, `"tools/call"`)
	}
	return n
}

func (f *fakeServer) lastHeader() http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headers[len(f.headers)-1]
}

func post(t *testing.T, url, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i]) // a later empty value takes the header away
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestMalformedJSONRPC(t *testing.T) {
	f := newFake(t)
	g := startGate(t, f.srv.URL, "")
	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"not json", `{"jsonrpc":`, 400, "-32700"},
		{"not an object", `"hello"`, 400, "-32600"},
		{"no version", `{"id":1,"method":"tools/list"}`, 400, "-32600"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"issue_refund"}}`, 400, "-32600"},
		{"duplicate name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup_order","name":"issue_refund","arguments":{}}}`, 400, "-32600"},
		{"batch in 2025-06-18", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, 400, "-32600"},
		{"empty batch", `[]`, 400, "-32600"},
		{"call without id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"issue_refund","arguments":{"amount_cents":1}}}`, 200, "-32600"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := post(t, g.url, tc.body, "Mcp-Protocol-Version", "2025-06-18")
			if status != tc.status || !strings.Contains(body, `"code":`+tc.code) {
				t.Fatalf("got %d %s", status, body)
			}
		})
	}
	if f.calls() != 0 {
		t.Fatal("a malformed call reached the server")
	}
}

// A client's folded key must not smuggle a second name past toolgate: the
// judged name is the exact "name" key, which is what the server reads.
func TestCaseFoldedKeyIsNotTheName(t *testing.T) {
	f := newFake(t)
	g := startGate(t, f.srv.URL, "")
	_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop_tables","Name":"lookup_order","arguments":{}}}`,
		"Mcp-Protocol-Version", "2025-06-18")
	if !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, "drop_tables") || f.calls() != 0 {
		t.Fatalf("got %s, %d calls forwarded", body, f.calls())
	}
}

func TestBatchJudgedPerElement(t *testing.T) {
	f := newFake(t)
	g := startGate(t, f.srv.URL, "")
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup_order","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"issue_refund","arguments":{"amount_cents":"ten"}}},` +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}},` +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}},` +
		`{"oops":true}]`
	status, _, body := post(t, g.url, batch, "Mcp-Protocol-Version", "2025-03-26")
	var answers []struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &answers) != nil || len(answers) != 4 {
		t.Fatalf("got %d %s", status, body)
	}
	byID := map[string]int{}
	for i, a := range answers {
		byID[string(a.ID)] = i
	}
	if a := answers[byID["1"]]; a.Result == nil || a.Result.IsError {
		t.Errorf("the valid call: %s", body)
	}
	if a := answers[byID["2"]]; a.Result == nil || !a.Result.IsError {
		t.Errorf("the bad arguments: %s", body)
	}
	if a := answers[byID["3"]]; a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("the unknown tool: %s", body)
	}
	if a := answers[byID["null"]]; a.Error == nil || a.Error.Code != -32600 {
		t.Errorf("the element that is no message: %s", body)
	}
	f.mu.Lock()
	last := f.bodies[len(f.bodies)-1]
	f.mu.Unlock()
	if f.calls() != 1 || !strings.Contains(last, `"notifications/progress"`) || strings.Contains(last, `"nope"`) {
		t.Fatalf("forwarded %s", last)
	}
}

func TestExposeCatalogHidesAndRefuses(t *testing.T) {
	f := newFake(t)
	g := startGate(t, f.srv.URL, "catalog:\n  mcp: {expose: catalog}\n  tools:\n    - name: orders/lookup_order\n")
	_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Mcp-Protocol-Version", "2025-06-18")
	if !strings.Contains(body, "lookup_order") || strings.Contains(body, "issue_refund") {
		t.Fatalf("list %s", body)
	}
	_, _, body = post(t, g.url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"issue_refund","arguments":{"amount_cents":1}}}`,
		"Mcp-Protocol-Version", "2025-06-18")
	if !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, "tool_not_in_catalog") || strings.Contains(body, `issue_refund, `) {
		t.Fatalf("call %s", body)
	}
	if f.calls() != 0 {
		t.Fatal("a hidden tool's call reached the server")
	}
}

func TestKeysAndHeaders(t *testing.T) {
	f := newFake(t)
	t.Setenv("ORDERS_KEY", "srv-key")
	t.Setenv("GATE_TOKENS", "gate-token")
	cfg := "inbound_auth: {tokens_env: GATE_TOKENS}\n"
	g := startGateKey(t, f.srv.URL, "ORDERS_KEY", cfg)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if status, _, _ := post(t, g.url, list); status != http.StatusUnauthorized {
		t.Fatalf("no token: %d", status)
	}
	post(t, g.url, list, "X-Api-Key", "gate-token", "X-Toolgate-Debug", "1")
	h := f.lastHeader()
	if h.Get("Authorization") != "Bearer srv-key" || h.Get("X-Api-Key") != "" || h.Get("X-Toolgate-Debug") != "" {
		t.Fatalf("upstream headers %v", h)
	}
	post(t, g.url, list, "X-Api-Key", "gate-token", "Authorization", "Bearer user-token", "Mcp-Session-Id", "s1")
	if h := f.lastHeader(); h.Get("Authorization") != "Bearer user-token" || h.Get("Mcp-Session-Id") != "s1" {
		t.Fatalf("the client's Authorization or session did not reach the server: %v", h)
	}
}

func TestLimits(t *testing.T) {
	f := newFake(t)
	g := startGate(t, f.srv.URL, "limits: {max_request_bytes: 200}\n")
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup_order","arguments":{"x":"` + strings.Repeat("a", 300) + `"}}}`
	if status, _, body := post(t, g.url, big); status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "-32600") {
		t.Fatalf("got %d %s", status, body)
	}
	waitFor(t, func() bool {
		return metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "limited"}) == 1
	})
}

// max_streams counts calls in flight, not the session's standing GET
// stream; a call over the cap waits for a slot, and one that finds none
// within idle_timeout gets a JSON-RPC error naming the limit.
func TestStreamCapPerSession(t *testing.T) {
	// Each token on finish lets one slow call answer; stop ends them all.
	finish, stop := make(chan struct{}, 4), make(chan struct{})
	slow := make(chan struct{}, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			rc.Flush()
			<-r.Context().Done()
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		rc.Flush()
		if m.Method == "slow" {
			slow <- struct{}{}
			// Keep the answer from going idle while the call works.
			for done := false; !done; {
				select {
				case <-finish:
					done = true
				case <-stop:
					return
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
					io.WriteString(w, ": working\n\n")
					rc.Flush()
				}
			}
		}
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"+string(m.ID)+",\"result\":{}}\n\n")
	}))
	defer up.Close()
	defer close(stop)
	g := startGate(t, up.URL, "mcp_servers: [{name: orders, url: "+up.URL+", path_prefix: /mcp/orders, max_streams: 1, idle_timeout: 1s}]\n")
	sid := []string{"Mcp-Session-Id", "s1"}

	getCtx, stopGet := context.WithCancel(context.Background())
	defer stopGet()
	req, _ := http.NewRequestWithContext(getCtx, http.MethodGet, g.url, nil)
	req.Header.Set("Mcp-Session-Id", "s1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	if _, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, sid...); !strings.Contains(body, `"id":1,"result"`) {
		t.Fatalf("a call beside the standing GET stream: %s", body)
	}

	// One call in flight: the next waits for it, then is answered.
	slowDone := make(chan string, 1)
	go func() {
		_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":2,"method":"slow"}`, sid...)
		slowDone <- body
	}()
	<-slow
	waited := make(chan string, 1)
	go func() {
		_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, sid...)
		waited <- body
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case body := <-waited:
		t.Fatalf("a call over the cap did not wait: %s", body)
	default:
	}
	finish <- struct{}{}
	if body := <-waited; !strings.Contains(body, `"id":3,"result"`) {
		t.Fatalf("the waiting call: %s", body)
	}
	if body := <-slowDone; !strings.Contains(body, `"id":2,"result"`) {
		t.Fatalf("the slow call: %s", body)
	}

	// A call that finds no slot within idle_timeout: an error naming the limit.
	go func() { post(t, g.url, `{"jsonrpc":"2.0","id":4,"method":"slow"}`, sid...) }()
	<-slow
	status, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":5,"method":"ping"}`, sid...)
	if status != http.StatusOK || !strings.Contains(body, `"id":5,"error":{"code":-32001`) || !strings.Contains(body, "max_streams") {
		t.Fatalf("no slot in time: %d %s", status, body)
	}
	// Another session is not held back by this one.
	if _, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":6,"method":"ping"}`, "Mcp-Session-Id", "s2"); !strings.Contains(body, `"id":6,"result"`) {
		t.Fatalf("another session: %s", body)
	}
	waitFor(t, func() bool {
		return metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "limited"}) == 1
	})
}

// A server stream that ends after an event id, even abruptly, is the
// client's to resume: toolgate ends it too and adds no error of its own.
func TestResumableStreamEndsWithoutAnError(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/list"`) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal(body, &m)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"tools":[{"name":"slow","inputSchema":{"type":"object"}}]}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 40\nretry: 50\ndata: \n\n")
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer up.Close()
	up.Config.ErrorLog = log.New(io.Discard, "", 0)
	g := startGate(t, up.URL, "")
	_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":{}}}`, "Mcp-Protocol-Version", "2025-11-25")
	if body != "id: 40\nretry: 50\ndata: \n\n" {
		t.Fatalf("got %q", body)
	}
	if n := metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "upstream_error"}); n != 0 {
		t.Fatalf("counted %v upstream errors", n)
	}
}

// server/discover is forwarded, and a revision in its answer toolgate
// does not serve is taken out of it.
func TestDiscoverForwarded(t *testing.T) {
	f := newFake(t)
	f.discover = `{"supportedVersions":["2099-01-01","2026-07-28","2025-11-25"],"capabilities":{"tools":{}}}`
	g := startGate(t, f.srv.URL, "")
	_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`)
	if !strings.Contains(body, `"supportedVersions":["2026-07-28","2025-11-25"]`) || !strings.Contains(f.joined(), "server/discover") {
		t.Fatalf("got %s", body)
	}
}

func TestReloadKeepsSessionsAndAppliesTheNewCatalog(t *testing.T) {
	f := newFake(t)
	g := startGate(t, f.srv.URL, "")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"issue_refund","arguments":{"amount_cents":500}}}`
	if _, _, body := post(t, g.url, call, "Mcp-Session-Id", "s1"); strings.Contains(body, "isError") {
		t.Fatalf("before reload: %s", body)
	}
	lists := strings.Count(f.joined(), "tools/list")
	cfg := "upstreams: [{url: http://127.0.0.1:9}]\nmcp_servers: [{name: orders, url: " + f.srv.URL + ", path_prefix: /mcp/orders}]\n" +
		"catalog:\n  tools:\n    - name: orders/issue_refund\n      rules: [{expr: 'args.amount_cents <= 100', message: small refunds only}]\n"
	c, err := catalog.Parse([]byte(cfg), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(c, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Apply(snap); err != nil {
		t.Fatal(err)
	}
	_, _, body := post(t, g.url, call, "Mcp-Session-Id", "s1")
	if !strings.Contains(body, "small refunds only") || f.calls() != 1 {
		t.Fatalf("after reload: %s", body)
	}
	if now := strings.Count(f.joined(), "tools/list"); now != lists {
		t.Fatalf("the session's tool list was read again after the reload (%d, then %d)", lists, now)
	}
}

func (f *fakeServer) joined() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.bodies, "")
}

// The server's stream is relayed event by event as sent, Last-Event-ID
// reaches the server, and a result replayed on it is still checked against
// the outputSchema of the call it answers.
func TestServerStreamResumption(t *testing.T) {
	var gotLast string
	stream := "id: 41\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n" +
		": keepalive\n\n" +
		"id: 42\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[],\"structuredContent\":{\"n\":\"x\"}}}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			gotLast = r.Header.Get("Last-Event-ID")
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream)
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			if strings.Contains(string(body), `"tools/list"`) {
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				json.Unmarshal(body, &m)
				io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"tools":[{"name":"count","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}}}}]}}`)
				return
			}
			// The call's own stream breaks off; the answer comes on a resumed GET.
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "id: 40\ndata: \n\n")
		}
	}))
	defer up.Close()
	g := startGate(t, up.URL, "")
	post(t, g.url, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"count","arguments":{}}}`, "Mcp-Session-Id", "s1", "Mcp-Protocol-Version", "2025-11-25")

	req, _ := http.NewRequest(http.MethodGet, g.url, nil)
	req.Header.Set("Mcp-Session-Id", "s1")
	req.Header.Set("Last-Event-ID", "40")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if gotLast != "40" {
		t.Fatalf("Last-Event-ID at the server: %q", gotLast)
	}
	parts := strings.SplitAfterN(string(body), "\n\n", 3)
	if len(parts) != 3 || parts[0]+parts[1] != stream[:strings.Index(stream, "id: 42")] {
		t.Fatalf("the first events changed:\n%q", body)
	}
	if !strings.HasPrefix(parts[2], "id: 42\n") || !strings.Contains(parts[2], `"isError":true`) || strings.Contains(parts[2], `"structuredContent"`) {
		t.Fatalf("the replayed result was not checked: %q", parts[2])
	}
}

func TestUnknownRevisionFailsTheHandshake(t *testing.T) {
	f := newFake(t)
	f.proto = "2099-01-01"
	g := startGate(t, f.srv.URL, "")
	_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if !strings.Contains(body, `"error"`) || !strings.Contains(body, "2099-01-01") || strings.Contains(body, `"result"`) {
		t.Fatalf("got %s", body)
	}
	if status, _, _ := post(t, g.url, `{}`); status != http.StatusBadRequest {
		t.Fatalf("a message of no kind: %d", status)
	}
	req, _ := http.NewRequest(http.MethodPut, g.url, strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST, DELETE" {
		t.Fatalf("PUT on the MCP route: %d %v", resp.StatusCode, resp.Header)
	}
}

// A notifications/cancelled for a call held for a person ends the wait;
// neither the call nor the notification reaches the server.
func TestCancelHeldCall(t *testing.T) {
	f := newFake(t)
	g := startGate(t, f.srv.URL, "catalog:\n  tools:\n    - {name: orders/issue_refund, policy: confirm}\n")
	post(t, g.url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}`)
	req, _ := http.NewRequest(http.MethodPost, g.url, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"issue_refund","arguments":{"amount_cents":1}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var first string
	for !strings.HasSuffix(first, "\n\n") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %q %v", first, err)
		}
		first += line
	}
	if !strings.Contains(first, `"elicitation/create"`) {
		t.Fatalf("first event %q", first)
	}
	status, _, _ := post(t, g.url, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	rest, _ := io.ReadAll(br)
	if status != http.StatusAccepted || strings.Contains(string(rest), `"id":5`) {
		t.Fatalf("cancel: %d, then the stream said %q", status, rest)
	}
	if f.calls() != 0 || strings.Contains(f.joined(), "notifications/cancelled") {
		t.Fatalf("the server saw %s", f.joined())
	}
}

// A server whose SSE answer breaks off before it answered: the client gets
// a JSON-RPC error for its request instead of waiting.
func TestBrokenStreamAnswersWithAnError(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/list"`) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal(body, &m)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"tools":[{"name":"slow","inputSchema":{"type":"object"}}]}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"res")
	}))
	defer up.Close()
	g := startGate(t, up.URL, "")
	_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	if !strings.Contains(body, "notifications/progress") || !strings.Contains(body, `"id":9,"error":{"code":-32000`) {
		t.Fatalf("got %q", body)
	}
}
