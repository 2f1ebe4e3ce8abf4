package test

// An error the upstream sends inside its stream, on each API, through the
// real server to the official SDK: the client reads the provider's own
// error (status, code, message), never toolgate's 502, and a call held
// before the error never reaches it.

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// sseEvents splits a recorded stream into its events, each with its
// blank line.
func sseEvents(t *testing.T, path ...string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(path...))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range strings.SplitAfter(string(b), "\n\n") {
		if ev != "" {
			out = append(out, ev)
		}
	}
	return out
}

// expectUpstreamErrorOutcome checks that the request was counted as the
// upstream's error, not as one of toolgate's failures.
func expectUpstreamErrorOutcome(t *testing.T, a *app.App, api string) {
	t.Helper()
	// A client that stops at the error may be done before toolgate has
	// counted the request.
	waitFor(t, 5*time.Second, "the request to be counted", func() bool {
		return testutil.ToFloat64(a.Metrics.Requests.WithLabelValues(api, "upstream_stream_error")) == 1
	})
	for _, label := range []string{"upstream_error", "pass"} {
		if n := testutil.ToFloat64(a.Metrics.Requests.WithLabelValues(api, label)); n != 0 {
			t.Errorf("toolgate_requests_total{api=%q,outcome=%q} = %v, want 0", api, label, n)
		}
	}
	if n := testutil.ToFloat64(a.Metrics.Unvalidated.WithLabelValues("response_unreadable")); n != 0 {
		t.Errorf("the upstream's error was counted as an unreadable answer")
	}
}

func TestChatStreamUpstreamErrorReachesSDK(t *testing.T) {
	errEv := `data: {"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}` + "\n\n"
	head := fuTextEvents("Let me check.")
	call := fuCallEvents("call_e1", "get_current_weather", `{"location":"Boston, MA"}`)[:2]
	u := newFaultQueue(t, fuSSE(fuConcat(head, call, []string{errEv, "data: [DONE]\n\n"}), 0))
	g := fuGate(t, u, "", "")
	rec := &gemRecorder{}
	c := newClient(g.URL, option.WithHTTPClient(&http.Client{Transport: rec}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := c.Chat.Completions.NewStreaming(ctx, fixtureParams(t))
	text := ""
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text += ch.Delta.Content
			if len(ch.Delta.ToolCalls) > 0 {
				t.Errorf("a held partial call reached the client: %s", s.Current().RawJSON())
			}
		}
	}
	var se *ssestream.StreamError
	if !errors.As(s.Err(), &se) || !strings.Contains(se.Message, "Sorry about that!") || !strings.Contains(se.Message, "server_error") {
		t.Fatalf("err %v, want the upstream's error", s.Err())
	}
	if text != "Let me check." {
		t.Errorf("text %q", text)
	}
	want := strings.Join(head, "") + errEv + "data: [DONE]\n\n"
	if got := string(rec.raw.Bytes()); got != want {
		t.Errorf("client read\n%q\nwant\n%q", got, want)
	}
	if u.count() != 1 {
		t.Errorf("%d upstream calls, want 1", u.count())
	}
	expectUpstreamErrorOutcome(t, g.App, "chat")
}

func TestAnthropicStreamUpstreamErrorReachesSDK(t *testing.T) {
	evs := sseEvents(t, "..", "proxy", "anthropic", "testdata", "tool_use_stream.sse")
	errEv := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	// Six events of text go out; the tool_use block and two of its
	// deltas are held when the error comes.
	u := newFaultQueue(t, fuSSE(fuConcat(evs[:9], []string{errEv}), 0))
	g := fuGate(t, u, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := anthClient(g.URL)
	s := client.Messages.NewStreaming(ctx, anthParams())
	defer s.Close()
	var got []string
	for s.Next() {
		got = append(got, s.Current().Type)
		if s.Current().Type == "content_block_start" && s.Current().ContentBlock.Type == "tool_use" {
			t.Errorf("a held partial call reached the client")
		}
	}
	var apiErr *anthropic.Error
	if !errors.As(s.Err(), &apiErr) {
		t.Fatalf("err %v, want the upstream's error event as an *anthropic.Error", s.Err())
	}
	if body := apiErr.RawJSON(); !strings.Contains(body, `"overloaded_error"`) || !strings.Contains(body, `"Overloaded"`) {
		t.Errorf("error body %s", body)
	}
	if strings.Join(got, ",") != "message_start,content_block_start,content_block_delta,content_block_delta,content_block_stop" {
		t.Errorf("events %v", got)
	}
	expectUpstreamErrorOutcome(t, g.App, "messages")
}

func TestResponsesStreamUpstreamErrorReachesSDK(t *testing.T) {
	evs := sseEvents(t, "..", "proxy", "responses", "testdata", "function_call_stream.sse")
	errEv := "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"An error occurred while processing your request.\",\"param\":null,\"sequence_number\":8}\n\n"
	// The call opens the answer, so the whole stream before the error
	// is held: it is dropped, and the error is the client's first event.
	u := newFaultQueue(t, fuSSE(fuConcat(evs[:8], []string{errEv}), 0))
	g := fuGate(t, u, "", "")
	rec := &gemRecorder{}
	c := newClient(g.URL, option.WithHTTPClient(&http.Client{Transport: rec}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := c.Responses.NewStreaming(ctx, respParams("What's the weather like in Boston today?"))
	var types []string
	var code, msg string
	var seq int64 = -1
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if ev.Type == "error" {
			e := ev.AsError()
			code, msg, seq = e.Code, e.Message, e.SequenceNumber
		}
	}
	if s.Err() != nil {
		t.Fatalf("err %v", s.Err())
	}
	if strings.Join(types, ",") != "error" || code != "server_error" || msg != "An error occurred while processing your request." || seq != 0 {
		t.Errorf("events %v, error %q %q seq %d", types, code, msg, seq)
	}
	if got := rec.raw.String(); strings.Contains(got, "function_call") {
		t.Errorf("a held partial call reached the client: %s", got)
	}
	expectUpstreamErrorOutcome(t, g.App, "responses")
}

func TestGeminiStreamUpstreamErrorReachesSDK(t *testing.T) {
	text := `data: {"candidates": [{"content": {"parts": [{"text": "Let me look that up."}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 60,"totalTokenCount": 60},"modelVersion": "gemini-2.5-flash","responseId": "p2c1aPv_Ct"}` + "\r\n\r\n"
	call := `data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_current_weather","args": {"location": "Boston, MA"}}}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 60,"candidatesTokenCount": 9,"totalTokenCount": 69},"modelVersion": "gemini-2.5-flash","responseId": "p2c1aPv_Ct"}` + "\r\n\r\n"
	errEv := `data: {"error": {"code": 503,"message": "The model is overloaded. Please try again later.","status": "UNAVAILABLE"}}` + "\r\n\r\n"
	u := newFaultQueue(t, fuSSE([]string{text, call, errEv}, 0))
	g := fuGate(t, u, "", "")
	r := gemCall(t, g.URL, nil, true)
	if r.APIErr == nil || r.APIErr.Code != 503 || r.APIErr.Status != "UNAVAILABLE" || r.APIErr.Message != "The model is overloaded. Please try again later." {
		t.Fatalf("err %v, want the upstream's 503", r.Err)
	}
	if calls := r.calls(t); len(calls) != 0 {
		t.Errorf("a held call reached the client: %v", calls)
	}
	if got := string(r.Raw); got != text+errEv {
		t.Errorf("client read\n%q\nwant\n%q", got, text+errEv)
	}
	expectUpstreamErrorOutcome(t, g.App, "gemini")
}

// The JSON-array stream (no alt=sse): the error element and the closing
// bracket after it reach the client as the upstream sent them; a dropped
// call's element takes the opening bracket with it, so the error element
// opens the array.
func TestGeminiArrayStreamUpstreamError(t *testing.T) {
	text := `{"candidates": [{"content": {"parts": [{"text": "Let me look that up."}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash"}`
	call := `{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_current_weather","args": {"location": "Boston, MA"}}}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash"}`
	errEl := `{"error": {"code": 500,"message": "An internal error has occurred.","status": "INTERNAL"}}`
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"What's the weather like in Boston today?"}]}],` +
		`"tools":[{"functionDeclarations":[{"name":"get_current_weather","parameters":{"type":"OBJECT","properties":{"location":{"type":"STRING"}},"required":["location"]}}]}]}`)
	for _, c := range []struct{ name, upstream, want string }{
		{"after text", "[" + text + "\n,\r\n" + errEl + "\n]", "[" + text + "\n,\r\n" + errEl + "\n]"},
		{"after a held call", "[" + call + "\n,\r\n" + errEl + "\n]", "\n[\r\n" + errEl + "\n]"},
		{"after text and a held call", "[" + text + "\n,\r\n" + call + "\n,\r\n" + errEl + "\n]", "[" + text + "\n,\r\n" + errEl + "\n]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newFaultQueue(t, fuBytes(http.StatusOK, "application/json; charset=UTF-8", []byte(c.upstream)))
			g := fuGate(t, u, "", "")
			r := fuPost(t, g.URL, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", body, "x-goog-api-key", "k")
			if r.Status != http.StatusOK || string(r.Body) != c.want {
				t.Fatalf("status %d, client read\n%q\nwant\n%q", r.Status, r.Body, c.want)
			}
			expectUpstreamErrorOutcome(t, g.App, "gemini")
		})
	}
}

// A Gemini error written into an alt=sse stream without data: framing, as
// the API writes some server errors, is the upstream's error too: it goes
// on as sent, and the Go SDK raises it with the upstream's code.
func TestGeminiUnframedErrorInSSEReachesSDK(t *testing.T) {
	text := `data: {"candidates": [{"content": {"parts": [{"text": "Let me"}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash"}` + "\r\n\r\n"
	call := `data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_current_weather","args": {"location": "Boston, MA"}}}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash"}` + "\r\n\r\n"
	bare := `{"error": {"code": 500,"message": "An internal error has occurred.","status": "INTERNAL"}}` + "\r\n\r\n"
	u := newFaultQueue(t, fuSSE([]string{text, call, bare}, 0))
	g := fuGate(t, u, "", "")
	r := gemCall(t, g.URL, nil, true)
	if r.APIErr == nil || r.APIErr.Code != 500 || r.APIErr.Status != "INTERNAL" {
		t.Fatalf("err %v, want the upstream's 500", r.Err)
	}
	if got := string(r.Raw); got != text+bare {
		t.Errorf("client read\n%q\nwant\n%q", got, text+bare)
	}
	expectUpstreamErrorOutcome(t, g.App, "gemini")
}
