package test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// faultUpstream is an upstream that misbehaves on purpose: it fails with
// provider statuses, resets connections before headers, inside a body or
// inside a stream, stalls, compresses, or answers with bodies no provider
// would send. Each request is answered by the action its script picks.
//
// It also keeps score of how its handlers ended, so a test can tell that
// no upstream call was left open after toolgate's clients went away:
// active is the number of handlers running now (peak its highest); every
// handler that ran ends up counted in completed (it wrote its whole answer)
// or canceled (its request context ended, or a write failed, before that).
type faultUpstream struct {
	srv    *httptest.Server
	script func(n int, r *faultRequest) faultAction

	mu   sync.Mutex
	reqs []faultRequest

	entered   atomic.Int64
	active    atomic.Int64
	peak      atomic.Int64
	completed atomic.Int64
	canceled  atomic.Int64
}

// faultRequest is one request the upstream received, as it arrived.
type faultRequest struct {
	N      int
	Method string
	Path   string
	// RequestURI is the request line's target, byte for byte.
	RequestURI string
	Header     http.Header
	Body       []byte
	// Stream is the request body's "stream" field.
	Stream bool
}

// faultAction answers one request. It reports whether it wrote its whole
// answer (true) or stopped because the request ended (false).
type faultAction func(w http.ResponseWriter, r *http.Request) bool

// newFaultUpstream starts an upstream answering request n (1-based) with
// script(n, request).
func newFaultUpstream(t *testing.T, script func(n int, r *faultRequest) faultAction) *faultUpstream {
	t.Helper()
	u := &faultUpstream{script: script}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

// newFaultQueue answers requests with the given actions in order; a request
// beyond the queue fails the test.
func newFaultQueue(t *testing.T, actions ...faultAction) *faultUpstream {
	t.Helper()
	return newFaultUpstream(t, func(n int, _ *faultRequest) faultAction {
		if n > len(actions) {
			t.Errorf("fault upstream: unexpected request #%d (script has %d)", n, len(actions))
			return fuStatus(http.StatusInternalServerError, openAIError("no scripted reply", "server_error", "", ""))
		}
		return actions[n-1]
	})
}

func (u *faultUpstream) serve(w http.ResponseWriter, r *http.Request) {
	u.entered.Add(1)
	for a := u.active.Add(1); ; {
		p := u.peak.Load()
		if a <= p || u.peak.CompareAndSwap(p, a) {
			break
		}
	}
	defer u.active.Add(-1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		u.canceled.Add(1)
		return
	}
	var s struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &s)
	u.mu.Lock()
	req := faultRequest{N: len(u.reqs) + 1, Method: r.Method, Path: r.URL.Path, RequestURI: r.RequestURI,
		Header: r.Header.Clone(), Body: body, Stream: s.Stream}
	u.reqs = append(u.reqs, req)
	script := u.script
	u.mu.Unlock()
	if script(req.N, &req)(w, r) {
		u.completed.Add(1)
	} else {
		u.canceled.Add(1)
	}
}

// setScript replaces the script for the requests still to come.
func (u *faultUpstream) setScript(script func(n int, r *faultRequest) faultAction) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.script = script
}

// URL is the base URL to configure as the upstream.

func (u *faultUpstream) requests() []faultRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]faultRequest(nil), u.reqs...)
}

func (u *faultUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

// fuConfig is the harness's config() with this upstream as the only one.
func fuConfig(u *faultUpstream, upstream, rest string) string {
	return config(&mockUpstream{srv: u.srv}, upstream, rest)
}

// ---- actions ----

// fuStatus answers with a status, a JSON body and headers given as
// name, value pairs.
func fuStatus(status int, body string, header ...string) faultAction {
	return fuBytes(status, "application/json", []byte(body), header...)
}

// fuJSON is a 200 answer with a JSON body.
func fuJSON(body string) faultAction { return fuStatus(http.StatusOK, body) }

// fuReply turns a harness mockReply into an action.
func fuReply(m mockReply) faultAction {
	var h []string
	for k, v := range m.Header {
		h = append(h, k, v)
	}
	status := m.Status
	if status == 0 {
		status = http.StatusOK
	}
	return fuStatus(status, m.Body, h...)
}

func fuBytes(status int, contentType string, body []byte, header ...string) faultAction {
	return func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", contentType)
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(status)
		_, err := w.Write(body)
		return err == nil
	}
}

// fuEncoded answers 200 with body sent as is under a Content-Encoding, so
// the bytes on the wire are exactly body whatever the encoding claims.
func fuEncoded(encoding, contentType string, body []byte) faultAction {
	return fuBytes(http.StatusOK, contentType, body, "Content-Encoding", encoding)
}

// fuGzip answers 200 with body gzip-compressed, as api.openai.com does.
func fuGzip(contentType string, body []byte) faultAction {
	return fuEncoded("gzip", contentType, gzipBytes(body))
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// gzipBomb is a small gzip stream that expands to prefix followed by size
// bytes of spaces: valid-looking JSON that never ends. It is one member
// for the prefix and then the same 1 MiB member of spaces over and over
// (gzip readers read concatenated members as one stream), so building it
// costs one small compression, even under the race detector.
func gzipBomb(prefix string, size int) []byte {
	out := gzipBytes([]byte(prefix))
	member := gzipBytes(bytes.Repeat([]byte(" "), 1<<20))
	for n := 0; n < size; n += 1 << 20 {
		out = append(out, member...)
	}
	return out
}

// hijack takes the raw connection, flushing whatever the handler wrote.
func hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(fmt.Sprintf("fault upstream: hijack: %v", err))
	}
	return conn, rw
}

// reset closes a connection with a TCP RST rather than a FIN, as a
// crashed process or a middlebox does.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// fuResetBeforeHeaders reads the request and resets the connection
// without answering.
func fuResetBeforeHeaders() faultAction {
	return func(w http.ResponseWriter, r *http.Request) bool {
		conn, _ := hijack(w)
		reset(conn)
		return true
	}
}

// fuResetMidBody announces a whole body, sends half of it and resets.
func fuResetMidBody(body string) faultAction {
	return func(w http.ResponseWriter, r *http.Request) bool {
		conn, rw := hijack(w)
		fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
		_, _ = rw.WriteString(body[:len(body)/2])
		_ = rw.Flush()
		time.Sleep(20 * time.Millisecond)
		reset(conn)
		return true
	}
}

// fuSSE streams events with a flush after each and gap between them.
func fuSSE(events []string, gap time.Duration) faultAction {
	return func(w http.ResponseWriter, r *http.Request) bool {
		return writeSSE(w, r, events, gap)
	}
}

func writeSSE(w http.ResponseWriter, r *http.Request, events []string, gap time.Duration) bool {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	for i, ev := range events {
		if i > 0 && gap > 0 {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return false
			}
		}
		if _, err := io.WriteString(w, ev); err != nil {
			return false
		}
		if rc.Flush() != nil {
			return false
		}
	}
	return r.Context().Err() == nil
}

// fuSSEThenCut streams events and then closes the connection in the
// middle of the chunked body, as a crashed upstream does. It closes with a
// FIN, not a reset: a reset may discard events the kernel still holds for
// toolgate, which would make what reaches the client a matter of timing.
func fuSSEThenCut(events []string) faultAction {
	return func(w http.ResponseWriter, r *http.Request) bool {
		writeSSE(w, r, events, 0)
		conn, _ := hijack(w)
		_ = conn.Close()
		return true
	}
}

// stallCap bounds every stall, so a toolgate that never gives up fails the
// test instead of hanging it.
const stallCap = 10 * time.Second

// fuStallBeforeHeaders never answers; it returns when the request ends.
func fuStallBeforeHeaders() faultAction {
	return func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-r.Context().Done():
			return false
		case <-time.After(stallCap):
			return true
		}
	}
}

// fuSSEThenStall streams events and then goes silent with the stream open.
func fuSSEThenStall(events []string) faultAction {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !writeSSE(w, r, events, 0) {
			return false
		}
		select {
		case <-r.Context().Done():
			return false
		case <-time.After(stallCap):
			return true
		}
	}
}

// fuBodyThenStall sends the headers and part of a plain body, then goes
// silent.
func fuBodyThenStall(partial string) faultAction {
	return func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, partial)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
			return false
		case <-time.After(stallCap):
			return true
		}
	}
}

// ---- chat stream events ----

// fuChunk is one chat.completion.chunk event.
func fuChunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-fu","object":"chat.completion.chunk","created":1741569970,"model":"gpt-4o","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + f + `}]}` + "\n\n"
}

// fuTextEvents are the opening role chunk and text deltas.
func fuTextEvents(parts ...string) []string {
	evs := []string{fuChunk(`{"role":"assistant","content":""}`, "")}
	for _, p := range parts {
		b, _ := json.Marshal(p)
		evs = append(evs, fuChunk(`{"content":`+string(b)+`}`, ""))
	}
	return evs
}

// fuCallEvents stream one call: its head, its arguments in two fragments,
// the finish chunk, a usage chunk and [DONE].
func fuCallEvents(id, name, args string) []string {
	half := len(args) / 2
	for half < len(args) && !utf8.RuneStart(args[half]) {
		half++ // a fragment never ends inside a UTF-8 sequence
	}
	a1, _ := json.Marshal(args[:half])
	a2, _ := json.Marshal(args[half:])
	return []string{
		fuChunk(`{"tool_calls":[{"index":0,"id":"`+id+`","type":"function","function":{"name":"`+name+`","arguments":""}}]}`, ""),
		fuChunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(a1)+`}}]}`, ""),
		fuChunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(a2)+`}}]}`, ""),
		fuChunk(`{}`, "tool_calls"),
		`data: {"id":"chatcmpl-fu","object":"chat.completion.chunk","created":1741569970,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70}}` + "\n\n",
		"data: [DONE]\n\n",
	}
}

func fuConcat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ---- requests and toolgate ----

// fuChatBody is the fixtures' chat request, streamed or not.
func fuChatBody(t *testing.T, stream bool) []byte {
	t.Helper()
	var req map[string]any
	if err := json.Unmarshal(readTestdata(t, "request.json"), &req); err != nil {
		t.Fatal(err)
	}
	req["stream"] = stream
	if !stream {
		delete(req, "stream_options")
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fuResult is one raw HTTP exchange with toolgate.
type fuResult struct {
	Status int
	Header http.Header
	Body   []byte
	// Err is a failure reading the body (a cut stream), nil otherwise.
	Err     error
	Elapsed time.Duration
}

var fuClient = &http.Client{Timeout: 30 * time.Second}

// fuPost posts body to base+path with header name, value pairs and reads
// the whole answer.
func fuPost(t *testing.T, base, path string, body []byte, header ...string) fuResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	resp, err := fuClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	return fuResult{Status: resp.StatusCode, Header: resp.Header, Body: b, Err: rerr, Elapsed: time.Since(start)}
}

// errorMessage is the message of an OpenAI-style error body, or "".
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return e.Error.Message
}

// startGateWith is startGate with the app.Options a test needs: a logger
// it reads, a sink that misbehaves, the config's own sinks (o.Sink nil;
// the gate's Sink is then nil) or a short header timeout. The returned
// stop shuts toolgate down once, so a test can flush the file sink before
// reading it; cleanup calls it too.
func startGateWith(t *testing.T, configYAML string, o app.Options) (*gate, func()) {
	t.Helper()
	cfg, err := catalog.Parse([]byte(configYAML), "e2e.yaml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, configYAML)
	}
	if !strings.Contains(configYAML, "replay_window") {
		// These tests script the model's answer to each request, the same
		// request again included: only a test that sets the window
		// expects an escalation replayed.
		off := catalog.Duration(0)
		cfg.Escalation.ReplayWindow = &off
	}
	return startGateConfig(t, cfg, t.TempDir(), o)
}

// startGateConfig is startGateWith for a Config already read, whose
// relative paths are taken from dir.
func startGateConfig(t *testing.T, cfg *catalog.Config, dir string, o app.Options) (*gate, func()) {
	t.Helper()
	// A config that names no listener would take toolgate's default ports,
	// and the suite must pass beside a toolgate already running on them.
	if cfg.Listen == "" || cfg.Listen == catalog.DefaultListen {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.AdminListen == "" || cfg.AdminListen == catalog.DefaultAdminListen {
		cfg.AdminListen = "127.0.0.1:0"
	}
	snap, err := catalog.Compile(cfg, dir)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	a, err := app.StartSnapshot(snap, o)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			// Longer than net/http's own 5 s: a connection a client's
			// transport dialled and never sent a request on (it raced
			// another for one request) is waited for that long before
			// Shutdown counts it idle.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := a.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	g := &gate{URL: "http://" + a.ProxyAddr(), App: a}
	if rs, ok := o.Sink.(*recordingSink); ok {
		g.Sink = rs
	}
	return g, stop
}

// sseData returns the data fields of an SSE body, in order.
func sseData(body []byte) []string {
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			out = append(out, strings.TrimSpace(d))
		}
	}
	return out
}

// streamedCallNames are the tool-call names a chat stream delivered,
// assembled per call index as an SDK would.
func streamedCallNames(body []byte) []string {
	var names []string
	for _, c := range streamedCalls(body) {
		names = append(names, c.Name)
	}
	return names
}

// streamedCall is one call of a chat stream, assembled as an SDK would.
type streamedCall struct{ ID, Name, Args string }

// streamedCalls assembles a chat stream's calls by index: names and
// argument fragments joined, the last non-empty id kept.
func streamedCalls(body []byte) []streamedCall {
	byIndex := map[int]streamedCall{}
	maxIdx := -1
	for _, d := range sseData(body) {
		var ch struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(d), &ch) != nil {
			continue
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				v := byIndex[tc.Index]
				v.Name += tc.Function.Name
				v.Args += tc.Function.Arguments
				if tc.ID != "" {
					v.ID = tc.ID
				}
				byIndex[tc.Index] = v
				maxIdx = max(maxIdx, tc.Index)
			}
		}
	}
	out := make([]streamedCall, maxIdx+1)
	for i := range out {
		out[i] = byIndex[i]
	}
	return out
}

// streamError is the error object a chat stream ended with, or nil.
func streamError(body []byte) map[string]any {
	for _, d := range sseData(body) {
		var e struct {
			Error map[string]any `json:"error"`
		}
		if json.Unmarshal([]byte(d), &e) == nil && e.Error != nil {
			return e.Error
		}
	}
	return nil
}
