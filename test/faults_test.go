package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/proxy/pipeline"
)

// Faults on the upstream side: every way a provider, the network or a
// broken middlebox can fail, and what the agent gets. The contract in each
// case: never a panic, never an invalid tool call forwarded, no escalation
// record for a failure the client should simply retry, and an answer the
// SDK understands (the provider's own error, a clear 502/504, or an error
// event in a stream that had begun).

// retryStatuses are the failures providers answer with under load; 529 is
// Anthropic's "overloaded".
var retryStatuses = []int{500, 502, 503, 529, 429}

// fuGate starts toolgate with the fixture catalog in front of u; rest adds
// top-level config keys, upstream keys of the upstream entry.
func fuGate(t *testing.T, u *faultUpstream, upstream, rest string) *gate {
	t.Helper()
	return startGate(t, fuConfig(u, upstream, catalogYAML(t, "")+rest))
}

func providerError(status int) (string, []string) {
	body := openAIError(fmt.Sprintf("The server is overloaded (%d). Please retry.", status), "server_error", "", "")
	return body, []string{"Retry-After", "2", "X-Request-Id", fmt.Sprintf("req_fault_%d", status)}
}

// expectPassedThrough checks that r is the provider's own failure, as sent.
func expectPassedThrough(t *testing.T, r fuResult, status int, body string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	if string(r.Body) != body {
		t.Errorf("body %s, want the upstream's %s", r.Body, body)
	}
	if got := r.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2", got)
	}
	if got := r.Header.Get("X-Should-Retry"); got == "false" {
		t.Errorf("x-should-retry: false on a retryable failure")
	}
	if !strings.HasPrefix(r.Header.Get("X-Toolgate-Request-Id"), "req_") {
		t.Errorf("X-Toolgate-Request-Id %q", r.Header.Get("X-Toolgate-Request-Id"))
	}
}

func expectNoRecords(t *testing.T, g *gate) {
	t.Helper()
	if n := len(g.Sink.records()); n != 0 {
		t.Errorf("a retryable failure reached the escalation sinks (%d records)", n)
	}
}

func expectNoPanics(t *testing.T, g *gate) {
	t.Helper()
	if n := testutil.ToFloat64(g.App.Metrics.PanicsRecovered); n != 0 {
		t.Errorf("toolgate_panics_total = %v", n)
	}
}

// SPEC §1: a provider failure on the first call reaches the SDK as sent,
// streamed request or not.
func TestFaultStatusOnFirstCall(t *testing.T) {
	for _, status := range retryStatuses {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d stream=%v", status, stream), func(t *testing.T) {
				body, hdr := providerError(status)
				u := newFaultQueue(t, fuStatus(status, body, hdr...))
				g := fuGate(t, u, "", "")
				r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, stream))
				expectPassedThrough(t, r, status, body)
				if got := r.Header.Get("X-Request-Id"); got != fmt.Sprintf("req_fault_%d", status) {
					t.Errorf("X-Request-Id %q not passed through", got)
				}
				if u.count() != 1 {
					t.Errorf("upstream got %d requests", u.count())
				}
				expectNoRecords(t, g)
			})
		}
	}
}

// SPEC §4 rung 4: a provider failure during a recovery or a reprompt
// re-query is passed through as is, so the SDK retries the whole request;
// nothing of the bad answer is forwarded and nothing is escalated.
func TestFaultStatusDuringRequery(t *testing.T) {
	kinds := []struct {
		name  string
		first mockReply
		bad   string
	}{
		{"recovery", callsAnswer("chatcmpl-first", invented, stock), invented.Name},
		{"reprompt", callsAnswer("chatcmpl-first", badUnit), "kelvin"},
	}
	for _, k := range kinds {
		for _, status := range retryStatuses {
			t.Run(fmt.Sprintf("%s %d", k.name, status), func(t *testing.T) {
				body, hdr := providerError(status)
				u := newFaultQueue(t, fuReply(k.first), fuStatus(status, body, hdr...))
				g := fuGate(t, u, "", "")
				r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, false))
				expectPassedThrough(t, r, status, body)
				if bytes.Contains(r.Body, []byte(k.bad)) {
					t.Errorf("the bad call reached the client")
				}
				if u.count() != 2 {
					t.Errorf("upstream got %d requests, want 2", u.count())
				}
				expectNoRecords(t, g)
				if n := testutil.ToFloat64(g.App.Metrics.Requests.WithLabelValues("chat", "pass")); n != 0 {
					t.Errorf("counted as a pass")
				}
			})
		}
	}

	// A streamed answer: before any byte went out the failure is the plain
	// status; after the text began it is an error event, and the held call
	// is never sent.
	t.Run("stream held from the first byte", func(t *testing.T) {
		body, hdr := providerError(503)
		u := newFaultQueue(t, fuSSE(fuCallEvents(invented.ID, invented.Name, invented.Args), 0), fuStatus(503, body, hdr...))
		g := fuGate(t, u, "", "")
		r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, true))
		expectPassedThrough(t, r, 503, body)
		expectNoRecords(t, g)
	})
	t.Run("stream after text", func(t *testing.T) {
		body, hdr := providerError(503)
		u := newFaultQueue(t, fuSSE(fuConcat(fuTextEvents("Checking."), fuCallEvents(invented.ID, invented.Name, invented.Args)), 0),
			fuStatus(503, body, hdr...))
		g := fuGate(t, u, "", "")
		r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, true))
		if r.Status != 200 {
			t.Fatalf("status %d", r.Status)
		}
		if names := streamedCallNames(r.Body); len(names) != 0 {
			t.Errorf("calls %v reached the client", names)
		}
		e := streamError(r.Body)
		if e == nil || !strings.Contains(fmt.Sprint(e["message"]), "503") {
			t.Errorf("want an error event naming the upstream status, got %s", r.Body)
		}
		expectNoRecords(t, g)
	})
}

// The point of passing a re-query failure through: the official SDK's own
// retry then gets a repaired answer.
func TestFaultRequeryFailureRetriedBySDK(t *testing.T) {
	body, _ := providerError(503)
	u := newFaultQueue(t,
		fuReply(callsAnswer("chatcmpl-1", invented)),
		fuStatus(503, body, "Retry-After-Ms", "10"),
		fuReply(callsAnswer("chatcmpl-2", invented)),
		fuReply(substitute("get_current_weather", weatherArgs, 0.9)))
	g := fuGate(t, u, "", "")
	r := chat(t, g.URL, fixtureParams(t), option.WithMaxRetries(1))
	expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{invented.ID, "get_current_weather", weatherArgs})
	expectHeaders(t, r, "substituted", 2)
	if u.count() != 4 {
		t.Errorf("upstream got %d requests, want 4", u.count())
	}
	expectNoRecords(t, g)
}

// The network fails: resets before the headers, inside a body, inside a
// stream, and during a re-query.
func TestFaultConnectionReset(t *testing.T) {
	plain := callsAnswer("chatcmpl-1", weather).Body
	cases := []struct {
		name    string
		stream  bool
		actions []faultAction
		// status is the status the client must get; 200 means a stream
		// that began and must end with an error event.
		status int
	}{
		{"before headers", false, []faultAction{fuResetBeforeHeaders()}, 502},
		{"before headers, stream", true, []faultAction{fuResetBeforeHeaders()}, 502},
		{"mid-body", false, []faultAction{fuResetMidBody(plain)}, 502},
		{"mid-stream after text", true, []faultAction{fuSSEThenCut(fuTextEvents("The weather", " in Boston"))}, 200},
		{"mid-stream while a call is held", true, []faultAction{fuSSEThenCut(fuConcat(fuTextEvents("Checking."),
			fuCallEvents(weather.ID, weather.Name, weather.Args)[:2]))}, 200},
		{"mid-stream before any byte was sent", true, []faultAction{fuSSEThenCut(fuCallEvents(weather.ID, weather.Name, weather.Args)[:2])}, 502},
		{"recovery re-query before headers", false, []faultAction{fuReply(callsAnswer("chatcmpl-1", invented)), fuResetBeforeHeaders()}, 504},
		{"recovery re-query mid-body", false, []faultAction{fuReply(callsAnswer("chatcmpl-1", invented)),
			fuResetMidBody(substitute("get_current_weather", weatherArgs, 0.9).Body)}, 504},
		{"reprompt re-query mid-body", false, []faultAction{fuReply(callsAnswer("chatcmpl-1", badUnit)), fuResetMidBody(plain)}, 504},
		{"stream recovery re-query reset", true, []faultAction{fuSSE(fuCallEvents(invented.ID, invented.Name, invented.Args), 0),
			fuResetMidBody(substitute("get_current_weather", weatherArgs, 0.9).Body)}, 504},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newFaultQueue(t, c.actions...)
			g := fuGate(t, u, "", "")
			r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, c.stream))
			if r.Status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.Status, c.status, r.Body)
			}
			if c.status == 200 {
				if e := streamError(r.Body); e == nil {
					t.Errorf("the cut stream did not end with an error event: %s", r.Body)
				}
				if names := streamedCallNames(r.Body); len(names) != 0 {
					t.Errorf("a partial call reached the client: %v", names)
				}
			} else if errorMessage(r.Body) == "" {
				t.Errorf("no error message in %s", r.Body)
			}
			if r.Status >= 500 && r.Header.Get("X-Should-Retry") == "false" {
				t.Errorf("x-should-retry: false on a network failure")
			}
			if u.count() != len(c.actions) {
				t.Errorf("upstream got %d requests, want %d", u.count(), len(c.actions))
			}
			expectNoRecords(t, g)
			expectNoPanics(t, g)
		})
	}
}

// SPEC §2 first_byte_timeout and idle_timeout: a silent upstream is cut off
// on time, and its handler sees the cancellation.
func TestFaultStalls(t *testing.T) {
	// Each case has exactly one stalling call, whose handler must see its
	// request canceled once toolgate gives up.
	cases := []struct {
		name    string
		stream  bool
		actions []faultAction
		status  int
	}{
		{"before headers", false, []faultAction{fuStallBeforeHeaders()}, 504},
		{"before headers, stream", true, []faultAction{fuStallBeforeHeaders()}, 504},
		{"mid-body", false, []faultAction{fuBodyThenStall(`{"id":"chatcmpl-stall","choices":[`)}, 504},
		{"mid-stream after text", true, []faultAction{fuSSEThenStall(fuTextEvents("The weather"))}, 200},
		{"mid-stream while a call is held", true, []faultAction{fuSSEThenStall(fuConcat(fuTextEvents("Checking."),
			fuCallEvents(weather.ID, weather.Name, weather.Args)[:2]))}, 200},
		{"recovery re-query before headers", false, []faultAction{fuReply(callsAnswer("chatcmpl-1", invented)), fuStallBeforeHeaders()}, 504},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newFaultQueue(t, c.actions...)
			g := fuGate(t, u, "first_byte_timeout: 300ms\nidle_timeout: 300ms", "")
			r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, c.stream))
			if r.Status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.Status, c.status, r.Body)
			}
			if r.Elapsed > 1500*time.Millisecond {
				t.Errorf("answered after %v; the timeouts are 300ms", r.Elapsed)
			}
			if c.status == 200 {
				e := streamError(r.Body)
				if e == nil || e["code"] != "upstream_timeout" {
					t.Errorf("want an upstream_timeout error event, got %s", r.Body)
				}
				if names := streamedCallNames(r.Body); len(names) != 0 {
					t.Errorf("a partial call reached the client: %v", names)
				}
			} else if errorMessage(r.Body) == "" {
				t.Errorf("no error message in %s", r.Body)
			}
			waitFor(t, 2*time.Second, "the stalled upstream handler to see its request end", func() bool {
				return u.active.Load() == 0 && u.canceled.Load() == 1
			})
			expectNoRecords(t, g)
		})
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SPEC §2 limits.max_response_bytes: an answer over the limit is refused
// with a clear 502, and none of it is forwarded.
func TestFaultResponseTooLarge(t *testing.T) {
	const limit = 64 << 10
	big := strings.Repeat("x", 2*limit)
	cases := []struct {
		name   string
		stream bool
		action faultAction
	}{
		{"text answer", false, fuJSON(answerOf("chatcmpl-big", 1, 1, choice{Text: big}))},
		{"valid call with huge arguments", false, fuJSON(callsAnswer("chatcmpl-big", call{"call_big", "get_current_weather",
			`{"location":"` + big + `"}`}).Body)},
		{"held streamed call with huge arguments", true, fuSSE(fuCallEvents("call_big", "get_current_weather", `{"location":"`+big+`"}`), 0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newFaultQueue(t, c.action)
			g := fuGate(t, u, "", fmt.Sprintf("limits:\n  max_response_bytes: %d\n", limit))
			r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, c.stream))
			if r.Status != 502 {
				t.Fatalf("status %d, want 502; body %.300s", r.Status, r.Body)
			}
			if msg := errorMessage(r.Body); !strings.Contains(msg, "max_response_bytes") {
				t.Errorf("message %q does not say what was exceeded", msg)
			}
			if bytes.Contains(r.Body, []byte("xxxxxxxx")) {
				t.Errorf("part of the oversized answer was forwarded")
			}
			expectNoPanics(t, g)
		})
	}
}

// peakHeap samples HeapAlloc until stop is called and returns the peak.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// Compressed answers: gzip is read and validated like plain JSON; a gzip
// bomb is cut off at max_response_bytes without inflating it in memory; an
// encoding the transport cannot decode is refused, not forwarded as bytes
// toolgate never read.
func TestFaultCompressedBodies(t *testing.T) {
	t.Run("gzip answer passes validated", func(t *testing.T) {
		fixture := readTestdata(t, "tool_call.json")
		u := newFaultQueue(t, fuGzip("application/json", fixture))
		g := fuGate(t, u, "", "")
		r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, false))
		if r.Status != 200 || !bytes.Equal(r.Body, fixture) || r.Header.Get("X-Toolgate-Outcome") != "pass" {
			t.Fatalf("status %d outcome %q body %s", r.Status, r.Header.Get("X-Toolgate-Outcome"), r.Body)
		}
		if got := u.requests()[0].Header.Get("Accept-Encoding"); !strings.Contains(got, "gzip") {
			t.Errorf("upstream asked for %q, so this proves nothing", got)
		}
	})
	t.Run("gzip answer with an invented tool is repaired", func(t *testing.T) {
		u := newFaultQueue(t,
			fuGzip("application/json", []byte(callsAnswer("chatcmpl-1", invented).Body)),
			fuGzip("application/json", []byte(substitute("get_current_weather", weatherArgs, 0.9).Body)))
		g := fuGate(t, u, "", "")
		r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, false))
		if r.Status != 200 || r.Header.Get("X-Toolgate-Outcome") != "substituted" || bytes.Contains(r.Body, []byte(invented.Name)) {
			t.Fatalf("status %d outcome %q body %s", r.Status, r.Header.Get("X-Toolgate-Outcome"), r.Body)
		}
	})
	t.Run("gzip stream with an invented tool escalates", func(t *testing.T) {
		events := strings.Join(fuCallEvents(invented.ID, invented.Name, invented.Args), "")
		u := newFaultQueue(t, fuGzip("text/event-stream", []byte(events)),
			fuReply(escalate("nothing fits", "weather report", "weather reports", 0.1)))
		g := fuGate(t, u, "", "")
		r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, true))
		if r.Status != 422 || bytes.Contains(r.Body, []byte(`"name":"`+invented.Name)) {
			t.Fatalf("status %d body %s", r.Status, r.Body)
		}
	})

	const limit = 1 << 20
	const expansion = 256 << 20
	bomb := gzipBomb(`{"id":"chatcmpl-bomb","object":"chat.completion","choices":[`, expansion)
	streamBomb := gzipBomb(fuCallEvents(weather.ID, weather.Name, weather.Args)[0][:40], expansion)
	for _, c := range []struct {
		name   string
		stream bool
		body   []byte
		ctype  string
	}{
		{"gzip bomb", false, bomb, "application/json"},
		{"gzip bomb in a stream", true, streamBomb, "text/event-stream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newFaultQueue(t, fuEncoded("gzip", c.ctype, c.body))
			g := fuGate(t, u, "", fmt.Sprintf("limits:\n  max_response_bytes: %d\n", limit))
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			stop := peakHeap()
			r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, c.stream))
			peak := stop()
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d-byte gzip expanding to %d MiB: status %d in %v, heap peak %.1f MiB, allocated %.1f MiB",
				len(c.body), expansion>>20, r.Status, r.Elapsed.Round(time.Millisecond), float64(peak)/(1<<20), float64(allocated)/(1<<20))
			if r.Status != 502 || errorMessage(r.Body) == "" {
				t.Fatalf("status %d body %.300s, want a clear 502", r.Status, r.Body)
			}
			if peak > expansion/8 || allocated > expansion/8 {
				t.Errorf("memory follows the expansion: heap peak %d, allocated %d, expansion %d", peak, allocated, expansion)
			}
			expectNoPanics(t, g)
		})
	}

	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("br stream=%v", stream), func(t *testing.T) {
			ctype := "application/json"
			if stream {
				ctype = "text/event-stream"
			}
			// Random-looking bytes as a brotli body would be; toolgate
			// never asked for br, so its transport leaves it encoded.
			body := bytes.Repeat([]byte{0x1b, 0x8f, 0x03, 0xf8, 0x25, 0x00, 0x8d, 0x0a, 0x0a}, 64)
			u := newFaultQueue(t, fuEncoded("br", ctype, body))
			g := fuGate(t, u, "", "")
			r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, stream))
			if r.Status != 502 || !strings.Contains(errorMessage(r.Body), "content encoding") {
				t.Fatalf("status %d body %q, want a 502 naming the encoding", r.Status, r.Body)
			}
			if bytes.Contains(r.Body, body[:8]) {
				t.Errorf("undecoded bytes were forwarded")
			}
		})
	}

	// A provider error in an encoding toolgate cannot read is still the
	// provider's to relay: as is, and labelled as it came, so the client
	// does not read compressed bytes as plain ones.
	t.Run("br error relayed with its encoding", func(t *testing.T) {
		body := []byte{0x1b, 0x8f, 0x03, 0xf8, 0x25, 0x00, 0x8d, 0x0a}
		u := newFaultQueue(t, fuBytes(503, "application/json", body, "Content-Encoding", "br", "Retry-After", "2"))
		g := fuGate(t, u, "", "")
		r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, false))
		if r.Status != 503 || !bytes.Equal(r.Body, body) || r.Header.Get("Content-Encoding") != "br" {
			t.Fatalf("status %d encoding %q body %q", r.Status, r.Header.Get("Content-Encoding"), r.Body)
		}
	})
}

// knownTools are the fixture catalog's tools with their required keys.
var knownTools = map[string][]string{
	"get_current_weather": {"location"},
	"get_stock_price":     {"ticker", "exchange"},
}

// deep nests n levels of open and close around inner.
func deep(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// rawCallAnswer is a chat.completion whose one tool call is given as raw
// JSON, so the call can be malformed in ways a struct cannot express.
func rawCallAnswer(rawCall string) string {
	return `{"id":"chatcmpl-raw","object":"chat.completion","created":1741569952,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		rawCall + `]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`
}

// rawCall is a call with the given raw id, name and arguments values.
func rawCall(id, name, args string) string {
	return `{"id":` + id + `,"type":"function","function":{"name":` + name + `,"arguments":` + args + `}}`
}

// jsonStr encodes s as a JSON string (arguments travel as one).
func jsonStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// judgeAnswer checks that whatever toolgate answered carries no invalid
// call: an escalation (422), a clear error (5xx with a message), or a 200
// whose every call names a known tool with a JSON object holding its
// required keys. It returns a short description of the outcome.
func judgeAnswer(t *testing.T, r fuResult, stream bool) string {
	t.Helper()
	switch {
	case r.Status == 422:
		var e struct {
			Error escalationError `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &e); err != nil || e.Error.Type != "tool_call_escalation" {
			t.Errorf("422 without an escalation: %.300s", r.Body)
		}
		return "422 escalation " + strings.Join(e.Error.Escalation.Codes, ",")
	case r.Status >= 500:
		msg := errorMessage(r.Body)
		if msg == "" {
			t.Errorf("%d without a message: %.300s", r.Status, r.Body)
		}
		return fmt.Sprintf("%d %s", r.Status, msg)
	case r.Status != 200:
		t.Errorf("status %d: %.300s", r.Status, r.Body)
		return fmt.Sprint(r.Status)
	}
	if stream {
		for _, c := range streamedCalls(r.Body) {
			checkForwardedCall(t, c)
		}
		if e := streamError(r.Body); e != nil {
			return fmt.Sprintf("200 stream, error event %v", e["code"])
		}
		return "200 stream, " + r.Header.Get("X-Toolgate-Outcome")
	}
	if !utf8.Valid(r.Body) {
		// Decoders disagree on invalid bytes (Go substitutes U+FFFD, strict
		// ones fail): what toolgate judged may not be what the client reads.
		t.Errorf("an answer that is not UTF-8 was forwarded")
	}
	var a struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Errorf("a 200 answer that is not a chat completion went out: %v", err)
	}
	for _, c := range a.Choices {
		for _, tc := range c.Message.ToolCalls {
			checkForwardedCall(t, streamedCall{ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments})
		}
	}
	return "200 " + r.Header.Get("X-Toolgate-Outcome")
}

// checkForwardedCall fails the test unless c names a known tool, has an id,
// and its arguments are a JSON object holding the tool's required keys.
func checkForwardedCall(t *testing.T, c streamedCall) {
	t.Helper()
	req, ok := knownTools[c.Name]
	var args map[string]any
	if !ok || c.ID == "" || json.Unmarshal([]byte(c.Args), &args) != nil {
		t.Errorf("invalid call forwarded: %+v", c)
		return
	}
	for _, k := range req {
		if _, ok := args[k]; !ok {
			t.Errorf("call forwarded without %s: %+v", k, c)
		}
	}
}

// Answers no provider should send. Every re-query is answered with the
// same broken answer, so a repair cannot hide what toolgate does with it.
func TestFaultMalformedAnswers(t *testing.T) {
	nest := 100_000
	cases := []struct {
		name string
		body string
	}{
		{"HTML error page with status 200", "<html><body><h1>502 Bad Gateway</h1></body></html>"},
		{"empty body", ""},
		{"truncated JSON", `{"id":"chatcmpl-x","choices":[{"index":0,"message":{"role":"assist`},
		{"choices is a string", `{"choices": "x"}`},
		{"an array", `[]`},
		{"null", `null`},
		{"a string", `"chat.completion"`},
		{"empty object", `{}`},
		{"choices holds null", `{"id":"c","choices":[null]}`},
		{"message null", `{"id":"c","choices":[{"index":0,"message":null,"finish_reason":"tool_calls"}]}`},
		{"tool_calls a string", `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","tool_calls":"get_current_weather"},"finish_reason":"tool_calls"}]}`},
		{"tool_calls holds null", rawCallAnswer(`null`)},
		{"tool call empty object", rawCallAnswer(`{}`)},
		{"function null", rawCallAnswer(`{"id":"call_1","type":"function","function":null}`)},
		{"name null", rawCallAnswer(rawCall(`"call_1"`, `null`, jsonStr(weatherArgs)))},
		{"name empty", rawCallAnswer(rawCall(`"call_1"`, `""`, jsonStr(weatherArgs)))},
		{"name a number", rawCallAnswer(rawCall(`"call_1"`, `42`, jsonStr(weatherArgs)))},
		{"id null", rawCallAnswer(rawCall(`null`, `"get_current_weather"`, jsonStr(weatherArgs)))},
		{"id empty", rawCallAnswer(rawCall(`""`, `"get_current_weather"`, jsonStr(weatherArgs)))},
		{"id and name null", rawCallAnswer(rawCall(`null`, `null`, `null`))},
		{"arguments null", rawCallAnswer(rawCall(`"call_1"`, `"get_current_weather"`, `null`))},
		{"arguments an object, not a string", rawCallAnswer(rawCall(`"call_1"`, `"get_current_weather"`, weatherArgs))},
		{"arguments a number", rawCallAnswer(rawCall(`"call_1"`, `"get_current_weather"`, `7`))},
		{"arguments with NaN", rawCallAnswer(rawCall(`"call_1"`, `"get_current_weather"`, jsonStr(`{"location":"Boston, MA","unit":NaN}`)))},
		{"arguments with a duplicate key", rawCallAnswer(rawCall(`"call_1"`, `"get_current_weather"`, jsonStr(`{"location":"Boston, MA","unit":"celsius","unit":"kelvin"}`)))},
		{"arguments nested 100k objects deep", rawCallAnswer(rawCall(`"call_1"`, `"get_current_weather"`, jsonStr(deep(`{"a":`, `}`, nest, `1`))))},
		{"arguments holding 100k nested arrays", rawCallAnswer(rawCall(`"call_1"`, `"get_current_weather"`, jsonStr(`{"location":`+deep(`[`, `]`, nest, `"Boston"`)+`}`)))},
		{"answer nested 100k deep", `{"id":"c","x":` + deep(`[`, `]`, nest, ``) + `,"choices":[]}`},
		{"call nested 100k deep inside the answer", rawCallAnswer(`{"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":` + jsonStr(weatherArgs) + `,"extra":` + deep(`{"a":`, `}`, nest, `1`) + `}}`)},
		{"invalid UTF-8 in the arguments", rawCallAnswer(rawCall(`"call_1"`, `"get_current_weather"`, `"{\"location\":\"Bo`+"\xff\xfe"+`ston, MA\"}"`))},
		{"invalid UTF-8 in the name", rawCallAnswer(rawCall(`"call_1"`, "\"get_current_weather\xff\"", jsonStr(weatherArgs)))},
		{"lone surrogate in the arguments", rawCallAnswer(rawCall(`"call_1"`, `"get_current_weather"`, `"{\"location\":\"\\\\ud800\"}"`))},
		{"invented tool with huge arguments", rawCallAnswer(rawCall(`"call_1"`, `"fetch_weather_report"`, jsonStr(`{"city":"`+strings.Repeat("B", 512<<10)+`"}`)))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newFaultUpstream(t, func(int, *faultRequest) faultAction { return fuJSON(c.body) })
			g := fuGate(t, u, "", "limits:\n  max_response_bytes: 1048576\n")
			r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, false))
			out := judgeAnswer(t, r, false)
			t.Logf("%s -> %s (%d upstream calls)", c.name, out, u.count())
			expectNoPanics(t, g)
			if u.count() > 3 {
				t.Errorf("upstream got %d calls; the budget is 1+1+1", u.count())
			}
			// toolgate still serves.
			u.setScript(func(int, *faultRequest) faultAction { return fuJSON(string(readTestdata(t, "tool_call.json"))) })
			if r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, false)); r.Status != 200 {
				t.Errorf("the next request got %d", r.Status)
			}
		})
	}
}

// The same for streams: events no provider should send.
func TestFaultMalformedStreams(t *testing.T) {
	nest := 100_000
	head := func(name string) string {
		return fuChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":`+name+`,"arguments":""}}]}`, "")
	}
	args := func(raw string) string {
		return fuChunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+raw+`}}]}`, "")
	}
	tail := fuCallEvents("x", "y", "zz")[3:]
	cases := []struct {
		name   string
		events []string
	}{
		{"data not JSON", fuConcat(fuTextEvents("Hi"), []string{"data: {not json\n\n"}, tail)},
		{"choices a string", fuConcat(fuTextEvents("Hi"), []string{`data: {"choices":"x"}` + "\n\n"}, tail)},
		{"an error object mid-stream", fuConcat(fuTextEvents("Hi"), []string{`data: {"error":{"message":"overloaded","type":"server_error"}}` + "\n\n"})},
		{"name null", fuConcat([]string{head(`null`), args(jsonStr(weatherArgs))}, tail)},
		{"name empty", fuConcat([]string{head(`""`), args(jsonStr(weatherArgs))}, tail)},
		{"no id", fuConcat([]string{fuChunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"get_current_weather","arguments":""}}]}`, ""),
			args(jsonStr(weatherArgs))}, tail)},
		{"call index out of range", fuConcat([]string{fuChunk(`{"tool_calls":[{"index":1000000000,"id":"c","type":"function","function":{"name":"get_current_weather","arguments":"{}"}}]}`, "")}, tail)},
		{"negative call index", fuConcat([]string{fuChunk(`{"tool_calls":[{"index":-1,"id":"c","type":"function","function":{"name":"get_current_weather","arguments":"{}"}}]}`, "")}, tail)},
		{"arguments an object fragment", fuConcat([]string{head(`"get_current_weather"`), args(weatherArgs)}, tail)},
		{"arguments nested 100k deep", fuConcat([]string{head(`"get_current_weather"`), args(jsonStr(deep(`{"a":`, `}`, nest, `1`)))}, tail)},
		{"invalid UTF-8 in the arguments", fuConcat([]string{head(`"get_current_weather"`), args(`"{\"location\":\"Bo` + "\xff\xfe" + `ston\"}"`)}, tail)},
		{"one event of 9 MiB", fuConcat(fuTextEvents("Hi"), []string{"data: " + strings.Repeat("x", 9<<20) + "\n\n"}, tail)},
		{"ends without finish or [DONE]", fuConcat([]string{head(`"get_current_weather"`), args(jsonStr(weatherArgs))})},
		{"[DONE] first", []string{"data: [DONE]\n\n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newFaultUpstream(t, func(_ int, r *faultRequest) faultAction {
				if r.Stream {
					return fuSSE(c.events, 0)
				}
				// Re-queries are plain; the model keeps inventing.
				return fuReply(callsAnswer("chatcmpl-again", invented))
			})
			g := fuGate(t, u, "", "")
			r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, true))
			out := judgeAnswer(t, r, true)
			t.Logf("%s -> %s (%d upstream calls)", c.name, out, u.count())
			expectNoPanics(t, g)
		})
	}
}

// panicSink fails the way a buggy custom sink would.
type panicSink struct{ n atomic.Int64 }

func (s *panicSink) Record(*pipeline.EscalationRecord) {
	s.n.Add(1)
	panic("sink exploded")
}

// A panic anywhere in a request becomes a 502 naming the request id, one
// log line and one count; the process keeps serving.
func TestPanicBecomes502(t *testing.T) {
	u := newFaultUpstream(t, func(_ int, r *faultRequest) faultAction {
		if bytes.Contains(r.Body, []byte("please escalate")) {
			if r.Stream {
				return fuSSE(fuConcat(fuTextEvents("Let me check."), fuCallEvents(invented.ID, invented.Name, invented.Args)), 0)
			}
			return fuReply(callsAnswer("chatcmpl-1", invented))
		}
		return fuJSON(string(readTestdata(t, "tool_call.json")))
	})
	core, logs := observer.New(zapcore.DebugLevel)
	sink := &panicSink{}
	g, _ := startGateWith(t, fuConfig(u, "", catalogYAML(t, "")+"recovery:\n  max_attempts: 0\n"),
		app.Options{Logger: zap.New(core), Sink: sink})

	escalating := func(stream bool) []byte {
		var req map[string]any
		_ = json.Unmarshal(fuChatBody(t, stream), &req)
		req["messages"] = []any{map[string]any{"role": "user", "content": "please escalate"}}
		b, _ := json.Marshal(req)
		return b
	}

	r := fuPost(t, g.URL, "/v1/chat/completions", escalating(false))
	rid := r.Header.Get("X-Toolgate-Request-Id")
	if r.Status != 502 || rid == "" || !strings.Contains(string(r.Body), rid) {
		t.Fatalf("status %d, request id %q, body %s: want a 502 naming the request id", r.Status, rid, r.Body)
	}
	if sink.n.Load() != 1 {
		t.Fatalf("the sink was not reached")
	}
	if n := testutil.ToFloat64(g.App.Metrics.PanicsRecovered); n != 1 {
		t.Errorf("toolgate_panics_total = %v, want 1", n)
	}
	lines := logs.FilterMessage("handler panic").FilterField(zap.String("request_id", rid)).All()
	if len(lines) != 1 || lines[0].Level != zapcore.ErrorLevel {
		t.Errorf("want one error log line for %s, got %d", rid, len(lines))
	}

	// The process still serves, validated and pass-through alike.
	if r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, false)); r.Status != 200 || r.Header.Get("X-Toolgate-Outcome") != "pass" {
		t.Errorf("after the panic: status %d outcome %q", r.Status, r.Header.Get("X-Toolgate-Outcome"))
	}

	// A stream whose text already went out cannot turn into a 502; the
	// client must see the stream fail, not end as if it were complete.
	resp, err := fuClient.Post(g.URL+"/v1/chat/completions", "application/json", bytes.NewReader(escalating(true)))
	if err != nil {
		t.Fatal(err)
	}
	body, rerr := readAllErr(resp)
	if rerr == nil {
		t.Errorf("a stream cut by a panic ended cleanly (status %d): %s", resp.StatusCode, body)
	}
	if bytes.Contains(body, []byte("[DONE]")) || bytes.Contains(body, []byte(invented.Name)) {
		t.Errorf("the cut stream claims completion or carries the bad call: %s", body)
	}
	if n := testutil.ToFloat64(g.App.Metrics.PanicsRecovered); n != 2 {
		t.Errorf("toolgate_panics_total = %v, want 2", n)
	}
	if r := fuPost(t, g.URL, "/v1/chat/completions", fuChatBody(t, false)); r.Status != 200 {
		t.Errorf("after the second panic: status %d", r.Status)
	}
}

func readAllErr(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err := buf.ReadFrom(resp.Body)
	return buf.Bytes(), err
}
