package test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// Abuse from the client side: bodies too large to buffer, clients that
// send their headers a byte at a time, bodies toolgate cannot parse, and a
// thousand streaming clients that hang up wherever they like.

const abuseLimit = 1 << 20

// rawExchange writes head (and body) on a fresh connection and returns the
// status line of the answer, within timeout.
func rawExchange(t *testing.T, addr, head string, timeout time.Duration) (string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer within %v: %v", timeout, err)
	}
	return strings.TrimSpace(line), time.Since(start)
}

// SPEC §2 limits.max_request_bytes: a declared length over the limit is
// refused from the headers alone, before any of the body is sent.
func TestAbuseRequestTooLargeDeclared(t *testing.T) {
	u := newFaultQueue(t)
	g := fuGate(t, u, "", fmt.Sprintf("limits:\n  max_request_bytes: %d\n", abuseLimit))
	addr := strings.TrimPrefix(g.URL, "http://")
	for _, route := range []string{"/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/files"} {
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: toolgate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
			route, abuseLimit+(1<<20))
		status, took := rawExchange(t, addr, head, 5*time.Second)
		if !strings.Contains(status, " 413 ") {
			t.Errorf("%s: %q, want 413", route, status)
		}
		t.Logf("%s: %s after %v with no body sent", route, status, took.Round(time.Millisecond))
	}
	if u.count() != 0 {
		t.Errorf("upstream got %d requests", u.count())
	}
}

// The same without a declared length (chunked): toolgate answers 413 as
// soon as the limit is passed, while the client is still writing. The
// writer stops after the limit and waits for the answer; a server that
// buffered the whole body would never answer and the test would time out.
func TestAbuseRequestTooLargeChunked(t *testing.T) {
	u := newFaultQueue(t)
	g := fuGate(t, u, "", fmt.Sprintf("limits:\n  max_request_bytes: %d\n", abuseLimit))
	for _, route := range []string{"/v1/chat/completions", "/v1/files"} {
		t.Run(route, func(t *testing.T) {
			total := abuseLimit + (1 << 20)
			pr, pw := io.Pipe()
			answered := make(chan struct{})
			var written atomic.Int64
			writerDone := make(chan struct{})
			go func() {
				defer close(writerDone)
				chunk := bytes.Repeat([]byte("a"), 32<<10)
				for written.Load() < int64(total) {
					if written.Load() >= abuseLimit+64<<10 {
						// Past the limit: hold the rest back until the
						// server has answered (or 10 s).
						select {
						case <-answered:
						case <-time.After(10 * time.Second):
						}
					}
					n, err := pw.Write(chunk)
					written.Add(int64(n))
					if err != nil {
						return
					}
				}
				_ = pw.Close()
			}()
			req, _ := http.NewRequest(http.MethodPost, g.URL+route, pr)
			req.ContentLength = -1
			start := time.Now()
			resp, err := fuClient.Do(req)
			// Read before releasing the writer: once released, the
			// transport may go on copying the rest to a closing socket.
			took, sent := time.Since(start), written.Load()
			close(answered)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = pr.CloseWithError(errors.New("test done"))
			<-writerDone
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(errorMessage(body), "exceeds") {
				t.Fatalf("status %d body %s, want 413", resp.StatusCode, body)
			}
			if sent >= int64(total) || took > 5*time.Second {
				t.Errorf("answered after %v with %d of %d bytes sent: the body was read whole", took, sent, total)
			}
			t.Logf("413 after %v with %d KiB of %d KiB sent", took.Round(time.Millisecond), sent>>10, total>>10)
		})
	}
	if u.count() != 0 {
		t.Errorf("upstream got %d requests", u.count())
	}
}

// A client sending its headers one byte every 100 ms is cut off by the
// server's ReadHeaderTimeout, and other clients are served meanwhile.
func TestAbuseSlowLoris(t *testing.T) {
	u := newFaultUpstream(t, func(int, *faultRequest) faultAction {
		return fuJSON(string(readTestdata(t, "tool_call.json")))
	})
	g, _ := startGateWith(t, fuConfig(u, "", catalogYAML(t, "")), app.Options{ReadHeaderTimeout: 500 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// The server's verdict is the connection closing under the client.
	closed := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, conn)
		closed <- time.Now()
	}()
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: toolgate\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-test\r\nContent-Length: 2\r\n\r\n{}"
	start := time.Now()
	sent := 0
	var cut time.Time
loop:
	for ; sent < len(head); sent++ {
		if _, err := conn.Write([]byte{head[sent]}); err != nil {
			cut = time.Now()
			break
		}
		select {
		case cut = <-closed:
			break loop
		case <-time.After(100 * time.Millisecond):
		}
		if sent == 3 {
			// Others are served while the slow client is connected.
			if r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, false)); r.Status != 200 {
				t.Errorf("a normal client got %d during the attack", r.Status)
			}
		}
	}
	if cut.IsZero() {
		t.Fatalf("the slow client sent all %d header bytes in %v without being cut off", len(head), time.Since(start))
	}
	if d := cut.Sub(start); d > 2*time.Second {
		t.Errorf("cut off after %v; ReadHeaderTimeout is 500ms", d)
	}
	t.Logf("slow client cut off after %v, %d of %d header bytes sent", cut.Sub(start).Round(time.Millisecond), sent, len(head))
	if u.count() != 1 {
		t.Errorf("upstream got %d requests, want only the normal client's", u.count())
	}
}

// SPEC §1: a body toolgate cannot parse reaches the upstream byte for
// byte, is counted, and the answer is still held to the config catalog.
func TestAbuseMalformedRequestForwarded(t *testing.T) {
	bodies := []struct {
		name, route, body string
	}{
		{"truncated JSON", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"`},
		{"not JSON", "/v1/chat/completions", "model=gpt-4o&messages=hi"},
		{"binary with NUL and invalid UTF-8", "/v1/chat/completions", "{\"model\":\"gpt\x00-4o\xff\xfe\",\x01}"},
		{"tools of the wrong shape", "/v1/chat/completions", `{"model":"gpt-4o","messages":[],"tools":"all of them"}`},
		{"an array", "/v1/messages", `[{"role":"user","content":"hi"}]`},
		{"deeply nested", "/v1/responses", `{"model":"gpt-4o","input":` + deep(`[`, `]`, 100_000, ``) + `}`},
	}
	u := newFaultUpstream(t, func(n int, r *faultRequest) faultAction {
		if n == len(bodies)+1 {
			// The last request's answer invents a tool: judged all the same.
			return fuReply(callsAnswer("chatcmpl-x", invented))
		}
		return fuStatus(400, openAIError("We could not parse the JSON body of your request.", "invalid_request_error", "", ""))
	})
	g := fuGate(t, u, "", "")
	counter := g.App.Metrics.Unvalidated.WithLabelValues("request_unreadable")
	for i, b := range bodies {
		r := fuPost(t, g.URL, b.route, []byte(b.body))
		if r.Status != 400 || !strings.Contains(errorMessage(r.Body), "could not parse") {
			t.Errorf("%s: status %d body %s, want the upstream's 400", b.name, r.Status, r.Body)
		}
		got := u.requests()[i]
		if !bytes.Equal(got.Body, []byte(b.body)) || got.Path != b.route {
			t.Errorf("%s: upstream saw %s %q, want the exact bytes", b.name, got.Path, got.Body)
		}
		if n := testutil.ToFloat64(counter); n != float64(i+1) {
			t.Errorf("%s: toolgate_unvalidated_total{reason=request_unreadable} = %v, want %d", b.name, n, i+1)
		}
	}
	r := fuPost(t, g.URL, "/v1/chat/completions", []byte(bodies[0].body))
	if r.Status == 200 || bytes.Contains(r.Body, []byte(`"name":"`+invented.Name)) {
		t.Errorf("an invented call passed for an unreadable request: %d %s", r.Status, r.Body)
	}
	t.Logf("invented call for an unreadable request -> %d %s", r.Status, errorMessage(r.Body))
	expectNoPanics(t, g)
}

// A thousand streaming clients at once, each hanging up at a random point:
// before the headers, during the text, while a call is held or re-queried,
// or not at all. Afterwards no goroutine is left behind, and every upstream
// call either completed or saw its request canceled: none is left open.
func TestAbuseConcurrentStreamDisconnects(t *testing.T) {
	const clients = 1000
	const gap = 30 * time.Millisecond
	text := fuTextEvents("The", " weather", " in", " Boston", " is")
	events := fuConcat(text, fuCallEvents(weather.ID, weather.Name, weather.Args))
	inventedEvents := fuConcat(text, fuCallEvents(invented.ID, invented.Name, invented.Args))
	u := newFaultUpstream(t, func(n int, r *faultRequest) faultAction {
		switch {
		case !r.Stream:
			return func(w http.ResponseWriter, r *http.Request) bool {
				// A re-query that takes a while, so some clients leave
				// during it.
				select {
				case <-time.After(100 * time.Millisecond):
				case <-r.Context().Done():
					return false
				}
				return fuReply(substitute("get_current_weather", weatherArgs, 0.9))(w, r)
			}
		case bytes.Contains(r.Body, []byte("invent")):
			return fuSSE(inventedEvents, gap)
		default:
			return fuSSE(events, gap)
		}
	})
	g := fuGate(t, u, "", "")
	// Let the servers' own goroutines start before the snapshot.
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	ignore := goleak.IgnoreCurrent()

	tr := &http.Transport{MaxIdleConnsPerHost: clients, IdleConnTimeout: 5 * time.Second}
	client := &http.Client{Transport: tr}
	plain := fuChatBody(t, true)
	inventing := bytes.Replace(plain, []byte("What's the weather"), []byte("Please invent: what's the weather"), 1)

	// Each client's plan, drawn up front from a fixed seed: when to hang
	// up, counted in time from the start or in data events read.
	type plan struct {
		early   time.Duration // hang up this long after starting
		events  int           // hang up after this many data events
		hold    time.Duration // hang up this long after the text ended
		stayAll bool
	}
	rng := rand.New(rand.NewPCG(7, 11))
	plans := make([]plan, clients)
	for i := range plans {
		switch i % 4 {
		case 0:
			plans[i].stayAll = true
		case 1:
			plans[i].early = time.Duration(rng.IntN(30)+1) * time.Millisecond
		case 2:
			plans[i].events = rng.IntN(len(text)) + 1
		case 3:
			plans[i].events = len(text)
			plans[i].hold = time.Duration(rng.IntN(250)) * time.Millisecond
		}
	}

	ctx, cancelAll := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelAll()
	var wg sync.WaitGroup
	var complete, hungUp atomic.Int64
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p := plans[i]
			body := plain
			if i%2 == 1 {
				body = inventing
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if p.early > 0 {
				time.AfterFunc(p.early, cancel)
			}
			req, _ := http.NewRequestWithContext(cctx, http.MethodPost, g.URL+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				if cctx.Err() != nil {
					hungUp.Add(1)
				} else {
					t.Errorf("client %d: %v", i, err)
				}
				return
			}
			defer resp.Body.Close()
			var all bytes.Buffer
			br := bufio.NewReader(io.TeeReader(resp.Body, &all))
			seen := 0
			for {
				line, err := br.ReadString('\n')
				if strings.HasPrefix(line, "data:") {
					seen++
					if !p.stayAll && p.events > 0 && seen == p.events {
						if p.hold == 0 {
							cancel()
						} else {
							time.AfterFunc(p.hold, cancel)
						}
					}
				}
				if err != nil {
					switch {
					case cctx.Err() != nil:
						hungUp.Add(1)
					case err != io.EOF || resp.StatusCode != 200 || !bytes.Contains(all.Bytes(), []byte("[DONE]")) || streamError(all.Bytes()) != nil:
						t.Errorf("client %d: status %d err %v body %.300s", i, resp.StatusCode, err, all.Bytes())
					default:
						complete.Add(1)
					}
					return
				}
			}
		}(i)
	}
	wg.Wait()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("the run hit its 30 s bound")
	}
	tr.CloseIdleConnections()
	waitFor(t, 10*time.Second, "every upstream handler to end", func() bool {
		return u.active.Load() == 0 && u.entered.Load() == u.completed.Load()+u.canceled.Load()
	})
	t.Logf("%d clients in %v: %d complete, %d hung up; upstream: %d calls (peak %d at once), %d completed, %d canceled",
		clients, took.Round(time.Millisecond), complete.Load(), hungUp.Load(),
		u.entered.Load(), u.peak.Load(), u.completed.Load(), u.canceled.Load())
	if u.canceled.Load() == 0 {
		t.Errorf("no upstream call saw its client's hang-up")
	}
	if complete.Load() < clients/4 || hungUp.Load() == 0 {
		t.Errorf("the run did not mix finished and abandoned streams")
	}

	// toolgate's pool to the upstream keeps idle connections on purpose;
	// a reload builds a fresh pool and closes the old one, after which
	// nothing of the run may be left.
	if err := g.App.Server.Apply(g.App.Store.Load()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := goleak.Find(ignore)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after the run (%d before, %d now): %v", before, runtime.NumGoroutine(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("goroutines: %d before, %d after", before, runtime.NumGoroutine())
}

// A client that sends its headers at once and then trickles its body is
// answered 408 once the server's ReadTimeout passes, and the upstream is
// never called for it.
func TestAbuseSlowBody(t *testing.T) {
	u := newFaultUpstream(t, func(int, *faultRequest) faultAction {
		return fuJSON(string(readTestdata(t, "tool_call.json")))
	})
	g, _ := startGateWith(t, fuConfig(u, "", catalogYAML(t, "")),
		app.Options{ReadHeaderTimeout: 500 * time.Millisecond, ReadTimeout: 700 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := fuChatBody(t, false)
	head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: toolgate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	answer := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		answer <- string(b)
	}()
	start := time.Now()
	var got string
trickle:
	for i := 0; i < min(len(body), 30); i++ { // 3 s at most
		if _, err := conn.Write(body[i : i+1]); err != nil {
			break
		}
		select {
		case got = <-answer:
			break trickle
		case <-time.After(100 * time.Millisecond):
		}
	}
	if got == "" {
		select {
		case got = <-answer:
		case <-time.After(2 * time.Second):
			t.Fatal("no answer to a body trickled past ReadTimeout")
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered after %v; ReadTimeout is 700ms", d)
	}
	if !strings.HasPrefix(got, "HTTP/1.1 408 ") || !strings.Contains(got, "request_timeout") || strings.Contains(strings.ToLower(got), "x-should-retry") {
		t.Errorf("answer to a slow body: %.300q", got)
	}
	if u.count() != 0 {
		t.Errorf("upstream got %d requests for a body that never arrived", u.count())
	}
}

// A stream that runs longer than ReadTimeout is not cut: the deadline
// covers reading the request only.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	u := newFaultUpstream(t, func(int, *faultRequest) faultAction {
		// Eight events 120 ms apart: about a second, over three times
		// the ReadTimeout, with a valid call at the end.
		return fuSSE(fuConcat(fuTextEvents("one", "two"), fuCallEvents("call_slow", "get_current_weather", `{"location":"Boston, MA"}`)), 120*time.Millisecond)
	})
	g, _ := startGateWith(t, fuConfig(u, "", catalogYAML(t, "")), app.Options{ReadTimeout: 300 * time.Millisecond})
	r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, true))
	if r.Status != 200 || !strings.Contains(string(r.Body), "[DONE]") || !strings.Contains(string(r.Body), "call_slow") {
		t.Fatalf("status %d, body %.300q", r.Status, r.Body)
	}
}
