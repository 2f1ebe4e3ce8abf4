package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/sse"
)

// These tests drive the streaming path of the Chat Completions route end to
// end over real HTTP: a scripted upstream, toolgate's handler behind an
// httptest server, and a client reading raw bytes, so that what is checked
// is exactly what an SDK would receive.

const chatRoute = "/v1/chat/completions"

func chatFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "chat", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gateConfig is a config for one upstream at url. upstream adds lines to
// that upstream's entry, top adds top-level keys.
func gateConfig(url, upstream, top string) string {
	return "upstreams:\n  - name: mock\n    url: " + url + "\n" + upstream + top
}

// newGate is toolgate's handler for the given config and keepalive interval.
func newGate(t *testing.T, yaml string, keepalive time.Duration) http.Handler {
	t.Helper()
	cfg, err := catalog.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Store: catalog.NewStore(snap), Keepalive: keepalive})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// startGate serves toolgate with the given config and keepalive interval.
func startGate(t *testing.T, yaml string, keepalive time.Duration) *httptest.Server {
	t.Helper()
	gate := httptest.NewServer(newGate(t, yaml, keepalive))
	t.Cleanup(gate.Close)
	return gate
}

// upstream is a scripted model API. Each request is answered by script; it
// counts requests so a test can tell whether toolgate asked again.
type upstream struct {
	srv    *httptest.Server
	calls  atomic.Int32
	script func(w http.ResponseWriter, r *http.Request)
}

func startUpstream(t *testing.T, script func(w http.ResponseWriter, r *http.Request)) *upstream {
	t.Helper()
	u := &upstream{script: script}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		u.script(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// writeChopped writes data in pieces of the given sizes (cycling; none
// means whole), flushing after each so every piece is its own read at the
// other end.
func writeChopped(w http.ResponseWriter, data []byte, sizes ...int) {
	rc := http.NewResponseController(w)
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if len(sizes) > 0 {
			n = min(sizes[i%len(sizes)], len(data))
		}
		if _, err := w.Write(data[:n]); err != nil {
			return
		}
		_ = rc.Flush()
		data = data[n:]
	}
}

// writeEvents writes a stream one event at a time, as providers do.
func writeEvents(w http.ResponseWriter, data []byte) {
	rd := sse.NewReader(bytes.NewReader(data), 0)
	for rd.Next() {
		writeChopped(w, rd.Event().Raw)
	}
}

// events splits a stream into its raw events.
func events(t testing.TB, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	rd := sse.NewReader(bytes.NewReader(data), 0)
	for rd.Next() {
		out = append(out, bytes.Clone(rd.Event().Raw))
	}
	if rd.Err() != nil {
		t.Fatalf("not a complete SSE stream: %v", rd.Err())
	}
	return out
}

// streamRequest is the fixtures' request.json, which offers the two tools
// every fixture calls.
func streamRequest(t testing.TB) []byte {
	return chatFixture(t, "request.json")
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func post(t *testing.T, ctx context.Context, c *http.Client, url string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+chatRoute, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// fetch posts body and returns the status, headers and whole body.
func fetch(t *testing.T, url string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := post(t, ctx, newClient(t), url, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode, resp.Header, b
}

// chunk builds one chat.completion.chunk event for choice 0.
func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + f + `}]}` + "\n\n"
}

const (
	roleChunk = `{"role":"assistant","content":""}`
	doneEvent = "data: [DONE]\n\n"
)

func textStream(parts ...string) string {
	s := chunk(roleChunk, "")
	for _, p := range parts {
		b, _ := json.Marshal(p)
		s += chunk(`{"content":`+string(b)+`}`, "")
	}
	return s
}

// callStream is one call of name whose arguments arrive in the given
// fragments, each a JSON string literal, then the finish chunk and [DONE].
func callStream(name, finish string, frags ...string) string {
	s := chunk(`{"tool_calls":[{"index":0,"id":"call_s1","type":"function","function":{"name":"`+name+`","arguments":""}}]}`, "")
	for _, f := range frags {
		s += chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+f+`}}]}`, "")
	}
	return s + chunk(`{}`, finish) + doneEvent
}

func TestChatStreamReplayIsByteIdentical(t *testing.T) {
	cases := map[string][]byte{
		"tool_call_stream.sse":               chatFixture(t, "tool_call_stream.sse"),
		"parallel_tool_calls_stream.sse":     chatFixture(t, "parallel_tool_calls_stream.sse"),
		"tool_call_stream_include_usage.sse": chatFixture(t, "tool_call_stream_include_usage.sse"),
		"text only":                          []byte(textStream("It is ", "sunny in ", "Boston.") + chunk(`{}`, "stop") + doneEvent),
		"text then a tool call": []byte(textStream("Let me look that up.") +
			callStream("get_current_weather", "tool_calls", `"{\"location\":"`, `"\"Boston, MA\"}"`)),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeEvents(w, data) })
			gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)

			_, _, direct := fetch(t, up.srv.URL, streamRequest(t))
			status, h, got := fetch(t, gate.URL, streamRequest(t))
			if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q", status, h.Get("Content-Type"))
			}
			if !bytes.Equal(got, direct) || !bytes.Equal(got, data) {
				t.Fatalf("toolgate changed a valid stream:\n got %q\nwant %q", got, direct)
			}
			if h.Get("X-Toolgate-Request-Id") == "" || h.Get("X-Toolgate-Catalog-Version") == "" {
				t.Errorf("toolgate headers missing: %v", h)
			}
			if n := up.calls.Load(); n != 2 {
				t.Errorf("upstream saw %d requests, want 2 (direct + toolgate)", n)
			}
		})
	}
}

// flushCounter is a ResponseWriter that counts flushes: each is a write(2)
// to the client's socket in a real server.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

// Events that reach toolgate in one read from the upstream leave in one
// flush, not one each: per-event flushes were a syscall per event.
func TestChatStreamOneFlushPerRead(t *testing.T) {
	parts := make([]string, 30)
	for i := range parts {
		parts[i] = fmt.Sprintf("word %d ", i)
	}
	data := []byte(textStream(parts...) + chunk(`{}`, "stop") + doneEvent)
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeChopped(w, data) })
	gate := newGate(t, gateConfig(up.srv.URL, "", ""), 0)

	w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	req := httptest.NewRequest(http.MethodPost, chatRoute, bytes.NewReader(streamRequest(t)))
	req.Header.Set("Content-Type", "application/json")
	gate.ServeHTTP(w, req)
	if got := w.Body.Bytes(); w.Code != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("status %d, body %q; want the upstream's bytes", w.Code, got)
	}
	// One write upstream arrives in one read or, on a busy machine, a few;
	// a flush per event would be 33.
	if n := len(events(t, data)); w.flushes > 8 {
		t.Errorf("%d flushes for %d events written upstream at once", w.flushes, n)
	}
}

// readUntil reads events from br until one contains want, failing after d.
func readUntil(t *testing.T, br *bufio.Reader, want string, d time.Duration) []byte {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		var seen []byte
		rd := sse.NewReader(br, 0)
		for rd.Next() {
			seen = append(seen, rd.Event().Raw...)
			if bytes.Contains(rd.Event().Raw, []byte(want)) {
				break
			}
		}
		got <- seen
	}()
	select {
	case b := <-got:
		if !bytes.Contains(b, []byte(want)) {
			t.Fatalf("stream ended before %q arrived: %q", want, b)
		}
		return b
	case <-time.After(d):
		t.Fatalf("%q did not arrive within %v: toolgate is holding it", want, d)
	}
	return nil
}

// The client must see text before the upstream has even sent the tool call:
// the upstream blocks until the client reports the text, so a toolgate that
// buffered text would deadlock and fail here.
func TestChatStreamTextIsNotBuffered(t *testing.T) {
	head := textStream("Checking the weather now.")
	tail := callStream("get_current_weather", "tool_calls", `"{\"location\":\"Boston, MA\"}"`)
	seen := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, []byte(head))
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
			return
		}
		writeEvents(w, []byte(tail))
	})
	gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := post(t, ctx, newClient(t), gate.URL, streamRequest(t))
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first := readUntil(t, br, "Checking the weather now.", 2*time.Second)
	close(seen)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(first) + string(rest); got != head+tail {
		t.Fatalf("got %q\nwant %q", got, head+tail)
	}
}

// The role chunk carries nothing, so it is held until the first text and
// then goes out in front of it. Until then not even the headers go out,
// however many keepalive intervals pass: the upstream waits until the
// client has waited several of them, and a toolgate that forwarded the role
// chunk, or a keepalive, would have answered the client by then.
func TestChatStreamOpeningHeldUntilText(t *testing.T) {
	role := chunk(roleChunk, "")
	rest := textStream("Hello.")[len(role):] + chunk(`{}`, "stop") + doneEvent
	seen := make(chan struct{})
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, []byte(role))
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
			return
		}
		writeEvents(w, []byte(rest))
	})
	gate := startGate(t, gateConfig(up.srv.URL, "", ""), 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	answered := make(chan *http.Response, 1)
	go func() { answered <- post(t, ctx, newClient(t), gate.URL, streamRequest(t)) }()
	select {
	case resp := <-answered:
		resp.Body.Close()
		t.Fatal("the client got headers while only the role chunk had arrived")
	case <-time.After(200 * time.Millisecond):
	}
	close(seen)
	resp := <-answered
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != role+rest {
		t.Fatalf("got %q\nwant the upstream's stream %q", got, role+rest)
	}
}

// Once text has gone out, a held call is kept alive with comments, and
// removing them leaves the upstream's bytes.
func TestChatStreamKeepaliveWhileHolding(t *testing.T) {
	data := chatFixture(t, "parallel_tool_calls_stream.sse")
	evs := events(t, data)
	text := textStream("Checking both cities.")[len(evs[0]):]
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		// Role chunk, text, the start of the first call, then silence in
		// the middle of the call's arguments.
		writeChopped(w, evs[0])
		writeEvents(w, []byte(text))
		for _, e := range evs[1:3] {
			writeChopped(w, e)
		}
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		for _, e := range evs[3:] {
			writeChopped(w, e)
		}
	})
	gate := startGate(t, gateConfig(up.srv.URL, "", ""), 50*time.Millisecond)
	status, _, got := fetch(t, gate.URL, streamRequest(t))
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	const ka = ": keepalive\n\n"
	if n := bytes.Count(got, []byte(ka)); n < 2 {
		t.Fatalf("%d keepalive comments during a 300ms hold at 50ms, want several: %q", n, got)
	}
	want := append(append([]byte(string(evs[0])), text...), bytes.Join(evs[1:], nil)...)
	if stripped := bytes.ReplaceAll(got, []byte(ka), nil); !bytes.Equal(stripped, want) {
		t.Fatalf("without keepalives the stream differs from the upstream's:\n got %q\nwant %q", stripped, want)
	}
}

// An answer that begins with a call and is held for many keepalive
// intervals is still escalated as a plain 422: a comment would have sent
// the headers, and SDKs retry an error that arrives inside a 200 stream.
func TestChatStreamLongHoldStillPlain(t *testing.T) {
	head := chunk(roleChunk, "") + chunk(`{"tool_calls":[{"index":0,"id":"call_s1","type":"function","function":{"name":"database_query","arguments":""}}]}`, "")
	tail := chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, "") + chunk(`{}`, "tool_calls") + doneEvent
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, []byte(head))
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		writeEvents(w, []byte(tail))
	})
	gate := startGate(t, gateConfig(up.srv.URL, "", "recovery:\n  max_attempts: 0\n"), 20*time.Millisecond)
	status, h, got := fetch(t, gate.URL, streamRequest(t))
	if status != http.StatusUnprocessableEntity || h.Get("X-Should-Retry") != "false" {
		t.Fatalf("status %d, x-should-retry %q, body %q; want a plain 422 after a long hold", status, h.Get("X-Should-Retry"), got)
	}
	if bytes.Contains(got, []byte("keepalive")) || !bytes.Contains(got, []byte(`"tool_call_escalation"`)) {
		t.Fatalf("body %q", got)
	}
}

// A client that goes away mid-stream must cancel the upstream call, both
// while text flows and while a tool call is held (when toolgate writes
// nothing and can only learn of it from the connection).
func TestChatStreamDisconnectCancelsUpstream(t *testing.T) {
	for _, phase := range []string{"text", "holding", "opening"} {
		t.Run(phase, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			canceled := make(chan time.Time, 1)
			wrote := make(chan struct{})
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				s := textStream("partial answer")
				switch phase {
				case "holding":
					s += chunk(`{"tool_calls":[{"index":0,"id":"call_s1","type":"function","function":{"name":"get_current_weather","arguments":""}}]}`, "")
				case "opening":
					// Only the role chunk, which toolgate holds: the client
					// has not even had the headers.
					s = chunk(roleChunk, "")
				}
				writeEvents(w, []byte(s))
				close(wrote)
				select {
				case <-r.Context().Done():
					canceled <- time.Now()
				case <-time.After(5 * time.Second):
				}
			})
			gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
			client := newClient(t)
			ctx, cancel := context.WithCancel(context.Background())
			var resp *http.Response
			if phase == "opening" {
				// No byte reaches the client, so the request runs on its
				// own until the upstream has written the role chunk.
				go func() {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gate.URL+chatRoute, bytes.NewReader(streamRequest(t)))
					req.Header.Set("Content-Type", "application/json")
					if r, err := client.Do(req); err == nil {
						r.Body.Close()
					}
				}()
				<-wrote
				// Let toolgate read the role chunk and hold it.
				time.Sleep(50 * time.Millisecond)
			} else {
				resp = post(t, ctx, client, gate.URL, streamRequest(t))
				readUntil(t, bufio.NewReader(resp.Body), "partial answer", 2*time.Second)
			}
			if phase == "holding" {
				// Let toolgate read the tool call and start holding.
				time.Sleep(50 * time.Millisecond)
			}
			start := time.Now()
			cancel()
			if resp != nil {
				resp.Body.Close()
			}
			select {
			case at := <-canceled:
				if d := at.Sub(start); d > time.Second {
					t.Errorf("upstream canceled after %v, want within 1s", d)
				}
			case <-time.After(time.Second):
				t.Fatal("the upstream request was not canceled within 1s of the client leaving")
			}
			client.CloseIdleConnections()
			gate.Close()
			up.srv.Close()
		})
	}
}

// streamError is the in-stream error a Chat client receives.
type streamError struct {
	Error struct {
		Type       string          `json:"type"`
		Code       string          `json:"code"`
		Message    string          `json:"message"`
		Escalation json.RawMessage `json:"escalation"`
	} `json:"error"`
}

// endsInError checks that the stream's last two events are an error data
// event and [DONE], and returns the error.
func endsInError(t *testing.T, got []byte) streamError {
	t.Helper()
	evs := events(t, got)
	if len(evs) < 2 || string(evs[len(evs)-1]) != doneEvent {
		t.Fatalf("stream does not end with [DONE]: %q", got)
	}
	last := evs[len(evs)-2]
	var e streamError
	if !bytes.HasPrefix(last, []byte("data: ")) || json.Unmarshal(bytes.TrimSpace(last[len("data: "):]), &e) != nil || e.Error.Code == "" {
		t.Fatalf("no error event before [DONE]: %q", last)
	}
	return e
}

func TestChatStreamUpstreamFailures(t *testing.T) {
	parallel := chatFixture(t, "parallel_tool_calls_stream.sse")
	pevs := events(t, parallel)
	role := pevs[0] // the parallel fixture opens with a role-only chunk
	// lead is text the client has been sent before the call, so a failure
	// after it can only be reported inside the stream.
	lead := append(bytes.Clone(role), chunk(`{"content":"Checking."}`, "")...)

	t.Run("cut mid call without [DONE]", func(t *testing.T) {
		up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			writeChopped(w, lead)
			for _, e := range pevs[1:6] {
				writeChopped(w, e)
			}
			// Returning ends the body cleanly, at an event boundary.
		})
		gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
		status, _, got := fetch(t, gate.URL, streamRequest(t))
		if status != http.StatusOK || !bytes.HasPrefix(got, lead) {
			t.Fatalf("status %d body %q", status, got)
		}
		if e := endsInError(t, got); e.Error.Code != "upstream_error" {
			t.Errorf("code %q", e.Error.Code)
		}
		if bytes.Contains(got, []byte("tool_calls")) {
			t.Fatalf("a partial tool call reached the client: %q", got)
		}
	})

	t.Run("connection dropped mid event", func(t *testing.T) {
		up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			writeChopped(w, lead)
			for _, e := range pevs[1:4] {
				writeChopped(w, e)
			}
			writeChopped(w, pevs[4][:20])
			panic(http.ErrAbortHandler) // drops the connection mid-body
		})
		gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
		status, _, got := fetch(t, gate.URL, streamRequest(t))
		if status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
		endsInError(t, got)
		if bytes.Contains(got, []byte("tool_calls")) {
			t.Fatalf("a partial tool call reached the client: %q", got)
		}
	})

	t.Run("cut before anything was sent", func(t *testing.T) {
		// The single-call fixture opens with the call itself, and the
		// parallel one with a role chunk that carries nothing and is held:
		// either way nothing has reached the client and a plain error
		// status is possible.
		single := events(t, chatFixture(t, "tool_call_stream.sse"))
		for name, evs := range map[string][][]byte{"call first": single[:5], "role chunk first": pevs[:6]} {
			t.Run(name, func(t *testing.T) {
				up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					for _, e := range evs {
						writeChopped(w, e)
					}
				})
				gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
				status, h, got := fetch(t, gate.URL, streamRequest(t))
				if status != http.StatusBadGateway || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
					t.Fatalf("status %d (%s) body %q, want a plain 502", status, h.Get("Content-Type"), got)
				}
				if bytes.Contains(got, []byte("get_current_weather")) {
					t.Fatalf("a partial tool call reached the client: %q", got)
				}
			})
		}
	})

	t.Run("malformed chunk", func(t *testing.T) {
		for _, where := range []string{"while text flows", "while holding"} {
			t.Run(where, func(t *testing.T) {
				up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					writeChopped(w, lead)
					if where == "while holding" {
						writeChopped(w, pevs[1])
					}
					writeChopped(w, []byte(`data: {"id":"chatcmpl-zup","choices":[{"index":0,"delta":{"content":"oops"`+"\n\n"))
					writeChopped(w, []byte(doneEvent))
				})
				gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
				_, _, got := fetch(t, gate.URL, streamRequest(t))
				if e := endsInError(t, got); e.Error.Code != "upstream_error" {
					t.Errorf("code %q", e.Error.Code)
				}
				if bytes.Contains(got, []byte("oops")) || bytes.Contains(got, []byte("tool_calls")) {
					t.Fatalf("unreadable or held data reached the client: %q", got)
				}
			})
		}
	})

	t.Run("stall longer than idle_timeout", func(t *testing.T) {
		up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			writeChopped(w, lead)
			for _, e := range pevs[1:4] {
				writeChopped(w, e)
			}
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		})
		gate := startGate(t, gateConfig(up.srv.URL, "    idle_timeout: 200ms\n", ""), 0)
		start := time.Now()
		_, _, got := fetch(t, gate.URL, streamRequest(t))
		if d := time.Since(start); d > time.Second {
			t.Errorf("stall reported after %v, want within ~1s", d)
		}
		if e := endsInError(t, got); e.Error.Code != "upstream_timeout" {
			t.Errorf("code %q, want upstream_timeout", e.Error.Code)
		}
		if bytes.Contains(got, []byte("tool_calls")) {
			t.Fatalf("a partial tool call reached the client: %q", got)
		}
	})

	t.Run("finish_reason length inside a call", func(t *testing.T) {
		data := textStream("Sure. ") + callStream("get_current_weather", "length", `"{\"location\":\"Bos"`)
		up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeEvents(w, []byte(data)) })
		gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
		_, _, got := fetch(t, gate.URL, streamRequest(t))
		e := endsInError(t, got)
		if e.Error.Type != "tool_call_escalation" || e.Error.Code != "truncated" || len(e.Error.Escalation) == 0 {
			t.Fatalf("error %+v, want a truncated escalation", e.Error)
		}
		// The escalation may quote the cut arguments for the caller; no
		// tool call chunk may carry them.
		if bytes.Contains(got, []byte(`"tool_calls":[`)) {
			t.Fatalf("the cut call reached the client: %q", got)
		}
		if n := up.calls.Load(); n != 1 {
			t.Errorf("a truncated call is never re-asked, but the upstream saw %d requests", n)
		}
	})
}

// weatherRequest offers one tool whose location must be exactly one of two
// cities, so any damage to the argument bytes fails validation and makes
// toolgate ask again (which the upstream here would count).
const weatherRequest = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Weather in München?"}],` +
	`"tools":[{"type":"function","function":{"name":"get_current_weather","parameters":{"type":"object",` +
	`"properties":{"location":{"type":"string","enum":["München","Boston, MA"]}},"required":["location"],"additionalProperties":false}}}]}`

func TestChatStreamChunkBoundaries(t *testing.T) {
	type variant struct {
		name  string
		data  []byte
		sizes []int
	}
	var vs []variant
	for _, f := range []string{"tool_call_stream.sse", "parallel_tool_calls_stream.sse", "tool_call_stream_include_usage.sse"} {
		d := chatFixture(t, f)
		vs = append(vs,
			variant{f + " in 1-byte writes", d, []int{1}},
			variant{f + " in writes of 2,3,5,7,11 bytes", d, []int{2, 3, 5, 7, 11}},
			variant{f + " with CRLF line ends", bytes.ReplaceAll(d, []byte("\n"), []byte("\r\n")), []int{1, 2, 3}},
			variant{f + " with CR line ends", bytes.ReplaceAll(d, []byte("\n"), []byte("\r")), []int{3}},
		)
	}
	// Comments and bare blank lines (keep-alive events) anywhere, held or not.
	interleaved := textStream("Hi. ") + ": OPENROUTER PROCESSING\n\n" + "\n" +
		callStream("get_current_weather", "tool_calls", `"{\"location\":"`, `"\"Boston, MA\"}"`)
	interleaved = strings.Replace(interleaved, "data: [DONE]", ": still here\n\n\n\ndata: [DONE]", 1)
	vs = append(vs, variant{"comments and blank keep-alive events", []byte(interleaved), []int{4}})
	// München with the ü (c3 bc) cut across two events, with escapes in
	// the fragments; each event is written in pieces that also cut it.
	munich := callStream("get_current_weather", "tool_calls", "\"{\\\"location\\\":\\\"M\xc3\"", "\"\xbcnchen\\\"}\"")
	vs = append(vs, variant{"München cut across events", []byte(munich), []int{7}})
	// The same argument in one event, cut across writes between c3 and bc.
	whole := callStream("get_current_weather", "tool_calls", `"{\"location\":\"München\"}"`)
	at := strings.Index(whole, "\xc3") + 1
	vs = append(vs, variant{"München cut across writes", []byte(whole), []int{at, len(whole)}})

	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) { writeChopped(w, v.data, v.sizes...) })
			gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
			req := streamRequest(t)
			if strings.Contains(v.name, "München") {
				req = []byte(weatherRequest)
			}
			status, _, got := fetch(t, gate.URL, req)
			if status != http.StatusOK || !bytes.Equal(got, v.data) {
				t.Fatalf("status %d, got\n%q\nwant\n%q", status, got, v.data)
			}
			if n := up.calls.Load(); n != 1 {
				t.Fatalf("upstream saw %d requests: toolgate misread a valid call and asked again", n)
			}
		})
	}

	// Two writes cut at every offset of a small stream, so that every
	// boundary class (inside a field name, a JSON string, an escape, a
	// UTF-8 sequence, a line break, between events) is crossed once.
	t.Run("every offset", func(t *testing.T) {
		data := []byte(textStream("Grüße. ") + callStream("get_current_weather", "tool_calls", `"{\"location\":"`, "\"\\\"M\xc3\xbcnchen\\\"}\""))
		var cut atomic.Int64
		up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			n := int(cut.Load())
			writeChopped(w, data, n, len(data))
		})
		gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
		client := newClient(t)
		for n := 1; n < len(data); n++ {
			cut.Store(int64(n))
			resp := post(t, context.Background(), client, gate.URL, []byte(weatherRequest))
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("cut at %d: err %v, got\n%q", n, err, got)
			}
		}
		if n := up.calls.Load(); int(n) != len(data)-1 {
			t.Fatalf("upstream saw %d requests for %d streams: a cut made toolgate ask again", n, len(data)-1)
		}
	})
}

// Shadow mode validates and counts but must never hold: a hallucinated call
// goes out byte for byte, and each part before the upstream has finished.
func TestChatStreamShadowNeverHolds(t *testing.T) {
	data := bytes.ReplaceAll(chatFixture(t, "tool_call_stream_include_usage.sse"), []byte("get_current_weather"), []byte("fetch_weather_report"))
	evs := events(t, data)
	seen := make(chan struct{})
	var once sync.Once
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeChopped(w, evs[0]) // the hallucinated call's first chunk
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
			return
		}
		for _, e := range evs[1:] {
			writeChopped(w, e)
		}
	})
	gate := startGate(t, gateConfig(up.srv.URL, "", "mode: shadow\n"), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := post(t, ctx, newClient(t), gate.URL, streamRequest(t))
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first := readUntil(t, br, "fetch_weather_report", 2*time.Second)
	once.Do(func() { close(seen) })
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(first, rest...); !bytes.Equal(got, data) {
		t.Fatalf("shadow mode changed the stream:\n got %q\nwant %q", got, data)
	}
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("shadow mode asked the upstream again (%d requests)", n)
	}
}

// With a keepalive ticking about as fast as toolgate finishes, a failure or
// an escalation must still come out whole: either a plain JSON error
// (nothing sent yet) or an SSE stream ending in the error and [DONE], never
// a keepalive written into the JSON body or after [DONE]. Run with -race,
// the interval sweep also makes the first keepalive (which sends the
// headers) coincide with the pipeline setting the escalation header.
func TestChatStreamKeepaliveNeverCorruptsTheEnd(t *testing.T) {
	single := events(t, chatFixture(t, "tool_call_stream.sse"))
	truncated := callStream("fetch_weather_report", "length", `"{\"location\""`, `":\"Bos"`)
	cases := []struct {
		name, top string
		script    func(w http.ResponseWriter, r *http.Request)
	}{
		{"upstream cut after the first call chunk", "", func(w http.ResponseWriter, r *http.Request) {
			writeChopped(w, single[0])
		}},
		{"message-mode escalation", "escalation:\n  mode: message\n", func(w http.ResponseWriter, r *http.Request) {
			writeEvents(w, []byte(truncated))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := startUpstream(t, c.script)
			for _, ka := range []time.Duration{20 * time.Microsecond, 80 * time.Microsecond, 320 * time.Microsecond} {
				gate := startGate(t, gateConfig(up.srv.URL, "", c.top), ka)
				client := newClient(t)
				for i := range 40 {
					resp := post(t, context.Background(), client, gate.URL, streamRequest(t))
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil {
						t.Fatal(err)
					}
					ct := resp.Header.Get("Content-Type")
					switch {
					case strings.HasPrefix(ct, "application/json"):
						if !json.Valid(b) {
							t.Fatalf("keepalive %v, request %d: status %d with a broken JSON body %q", ka, i, resp.StatusCode, b)
						}
					case strings.HasPrefix(ct, "text/event-stream"):
						if !bytes.HasSuffix(b, []byte(doneEvent)) {
							t.Fatalf("keepalive %v, request %d: stream does not end with [DONE]: %q", ka, i, b)
						}
					default:
						t.Fatalf("keepalive %v, request %d: content type %q", ka, i, ct)
					}
				}
			}
		})
	}
}

// An error the upstream sends inside its stream reaches the client as the
// upstream sent it, whatever was sent before: never toolgate's own 502. A
// call held before it was never judged and never goes out.
func TestChatStreamUpstreamErrorPassedOn(t *testing.T) {
	pevs := events(t, chatFixture(t, "parallel_tool_calls_stream.sse"))
	single := events(t, chatFixture(t, "tool_call_stream.sse"))
	lead := textStream("Checking.")
	errEv := `data: {"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}` + "\n\n"
	for _, c := range []struct {
		name       string
		before     []byte
		after      string // what the upstream sends after its error
		want       string // what the client reads before the error
		callBefore bool
	}{
		{"while text flows", []byte(lead), doneEvent, lead, false},
		{"with only the opening held", pevs[0], doneEvent, string(pevs[0]), false},
		{"as the first event", nil, "", "", false},
		{"while holding a call after text", append([]byte(lead), bytes.Join(pevs[1:4], nil)...), doneEvent, lead, true},
		{"while holding a call that opened the answer", bytes.Join(single[:4], nil), "", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				writeChopped(w, c.before)
				writeChopped(w, []byte(errEv+c.after))
			})
			gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
			status, h, got := fetch(t, gate.URL, streamRequest(t))
			if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d (%s) body %q, want the upstream's stream", status, h.Get("Content-Type"), got)
			}
			if want := c.want + errEv + doneEvent; string(got) != want {
				t.Fatalf("client read\n%q\nwant\n%q", got, want)
			}
			if c.callBefore && bytes.Contains(got, []byte("tool_calls")) {
				t.Fatal("a held partial call reached the client")
			}
			if up.calls.Load() != 1 {
				t.Errorf("upstream asked %d times", up.calls.Load())
			}
		})
	}
	// Nothing that says something follows the error: a chunk after it, or
	// a line of an unknown field, is not passed on; a comment is.
	t.Run("what follows the error", func(t *testing.T) {
		up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			writeChopped(w, []byte(lead+errEv+": ping\n\n"+chunk(`{"content":"after"}`, "")+"id: 7\n\n"+doneEvent))
		})
		gate := startGate(t, gateConfig(up.srv.URL, "", ""), 0)
		_, _, got := fetch(t, gate.URL, streamRequest(t))
		if want := lead + errEv + doneEvent + ": ping\n\n"; string(got) != want {
			t.Fatalf("client read\n%q\nwant\n%q", got, want)
		}
	})
	// Shadow mode holds nothing, so the stream goes out as the upstream
	// sent it, call fragments and error alike.
	t.Run("shadow", func(t *testing.T) {
		before := bytes.Join(single[:4], nil)
		up := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			writeChopped(w, append(bytes.Clone(before), errEv+doneEvent...))
		})
		gate := startGate(t, gateConfig(up.srv.URL, "", "mode: shadow\n"), 0)
		status, _, got := fetch(t, gate.URL, streamRequest(t))
		if want := string(before) + errEv + doneEvent; status != http.StatusOK || string(got) != want {
			t.Fatalf("status %d, client read\n%q\nwant\n%q", status, got, want)
		}
	})
}
