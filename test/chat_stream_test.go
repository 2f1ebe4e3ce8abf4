package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/proxy"
)

// Streaming Chat Completions seen through the official Go SDK: what an agent
// built on openai-go gets from toolgate when the model's streamed tool call
// is valid, repaired or escalated. Helpers are prefixed cs (chat stream) to
// keep clear of the other end-to-end files in this package.

// csUpstream is a scripted chat model. A streamed request (the client's
// original) is answered by stream; a plain one (toolgate's re-query) by
// requery, as a whole chat.completion.
type csUpstream struct {
	srv     *httptest.Server
	stream  func(w http.ResponseWriter, r *http.Request)
	requery string

	mu     sync.Mutex
	bodies [][]byte
}

func csStartUpstream(t *testing.T, stream func(w http.ResponseWriter, r *http.Request), requery string) *csUpstream {
	t.Helper()
	u := &csUpstream{stream: stream, requery: requery}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *csUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.mu.Unlock()
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		u.stream(w, r)
		return
	}
	if u.requery == "" {
		http.Error(w, `{"error":{"message":"no re-query expected","type":"server_error"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, u.requery)
}

func (u *csUpstream) requests() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.bodies...)
}

// csWrite writes each SSE event of s with a flush, as a provider streams.
func csWrite(w http.ResponseWriter, s string) {
	rc := http.NewResponseController(w)
	for _, ev := range strings.SplitAfter(s, "\n\n") {
		if ev == "" {
			continue
		}
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		_ = rc.Flush()
	}
}

// csText and csCall are the fault upstream's events as one stream.
func csText(parts ...string) string { return strings.Join(fuTextEvents(parts...), "") }

func csCall(id, name, args string) string { return strings.Join(fuCallEvents(id, name, args), "") }

// csCompletion is a whole chat.completion, the answer to a re-query.
func csCompletion(content string, calls ...[3]string) string {
	msg := map[string]any{"role": "assistant", "content": content, "refusal": nil}
	if len(calls) > 0 {
		msg["content"] = nil
		var tcs []any
		for _, c := range calls {
			tcs = append(tcs, map[string]any{"id": c[0], "type": "function", "function": map[string]any{"name": c[1], "arguments": c[2]}})
		}
		msg["tool_calls"] = tcs
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-re", "object": "chat.completion", "created": 1741569971, "model": "gpt-4o",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": 80, "completion_tokens": 30, "total_tokens": 110},
	})
	return string(b)
}

func csDecision(decision string, tool string, args string, confidence float64) string {
	corrected, esc := "null", "null"
	if decision == "substitute" {
		corrected = `{"tool_name":"` + tool + `","arguments":` + args + `}`
	} else {
		esc = `{"reason":"no tool can read the weather archive","original_intent":"historic weather","missing_capability":"weather archive"}`
	}
	return fmt.Sprintf("```json\n{\"decision\":%q,\"corrected_tool_call\":%s,\"escalation\":%s,\"confidence\":%g}\n```", decision, corrected, esc, confidence)
}

// csStartGate runs toolgate as the binary would, from config text; extra
// is appended at top level.
func csStartGate(t *testing.T, upstreamURL, extra string) string {
	t.Helper()
	g, _ := startGateWith(t, "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: mock\n    url: "+upstreamURL+"\n"+extra, app.Options{})
	return g.URL
}

func csClient(t *testing.T, base string, opts ...option.RequestOption) openai.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(base + "/v1/"),
		option.WithAPIKey("sk-test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	}, opts...)...)
}

func csParams() openai.ChatCompletionNewParams {
	fn := func(name, desc string, params map[string]any) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: name, Description: openai.String(desc), Parameters: params})
	}
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Boston, MA, and book Lisbon for two.")},
		Tools: []openai.ChatCompletionToolUnionParam{
			fn("get_current_weather", "Get the current weather in a given location", map[string]any{
				"type": "object",
				"properties": map[string]any{
					"location": map[string]any{"type": "string"},
					"unit":     map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
				},
				"required": []string{"location"},
			}),
			fn("book_flight", "Book a flight for a number of passengers", map[string]any{
				"type": "object",
				"properties": map[string]any{
					"destination": map[string]any{"type": "string"},
					"passengers":  map[string]any{"type": "integer", "minimum": 1},
				},
				"required": []string{"destination", "passengers"},
			}),
		},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
}

// csRun streams one request through the SDK and accumulates it.
func csRun(t *testing.T, client openai.Client) (openai.ChatCompletionAccumulator, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, csParams())
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator refused a chunk: %s", stream.Current().RawJSON())
		}
	}
	return acc, stream.Err()
}

func csCalls(acc openai.ChatCompletionAccumulator) []openai.ChatCompletionMessageToolCallUnion {
	if len(acc.Choices) == 0 {
		return nil
	}
	return acc.Choices[0].Message.ToolCalls
}

// csCheckRequery checks what toolgate sent upstream the second time: a
// plain request (no stream, no stream_options, n 1 if any) that replays the
// streamed call and answers it.
func csCheckRequery(t *testing.T, body []byte, callID string, decision bool) {
	t.Helper()
	var q map[string]json.RawMessage
	if err := json.Unmarshal(body, &q); err != nil {
		t.Fatal(err)
	}
	if s, ok := q["stream"]; ok && string(s) != "false" {
		t.Errorf("re-query has stream %s", s)
	}
	if _, ok := q["stream_options"]; ok {
		t.Error("re-query carries stream_options, which the API refuses without stream")
	}
	if n, ok := q["n"]; ok && string(n) != "1" {
		t.Errorf("re-query has n %s", n)
	}
	if decision && string(q["tool_choice"]) != `"none"` {
		t.Errorf("decision re-query has tool_choice %s", q["tool_choice"])
	}
	var msgs []struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(q["messages"], &msgs); err != nil {
		t.Fatal(err)
	}
	// As the API requires: the replayed assistant turn, then one tool
	// message per call id.
	if len(msgs) != 3 || msgs[0].Role != "user" || msgs[1].Role != "assistant" || len(msgs[1].ToolCalls) != 1 ||
		msgs[1].ToolCalls[0].ID != callID || msgs[2].Role != "tool" || msgs[2].ToolCallID != callID {
		t.Errorf("re-query messages %s", q["messages"])
	}
}

func TestChatStreamSDKValid(t *testing.T) {
	args := `{"location":"Boston, MA","unit":"celsius"}`
	up := csStartUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		csWrite(w, csText("Let me look.")+csCall("call_v1", "get_current_weather", args))
	}, "")
	acc, err := csRun(t, csClient(t, csStartGate(t, up.srv.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	calls := csCalls(acc)
	if len(calls) != 1 || calls[0].ID != "call_v1" || calls[0].Function.Name != "get_current_weather" || calls[0].Function.Arguments != args {
		t.Fatalf("calls %+v", calls)
	}
	if acc.Choices[0].Message.Content != "Let me look." || acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.TotalTokens != 70 {
		t.Errorf("content %q finish %q usage %d", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason, acc.Usage.TotalTokens)
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("%d upstream calls for a valid answer", n)
	}
}

func TestChatStreamSDKRepaired(t *testing.T) {
	cases := []struct {
		name     string
		config   string
		call     [2]string // name, arguments the model streams
		requery  string
		decision bool
		want     [2]string
	}{
		{
			name:     "substituted by decision",
			call:     [2]string{"fetch_weather_report", `{"city":"Boston, MA"}`},
			requery:  csCompletion(csDecision("substitute", "get_current_weather", `{"location":"Boston, MA","unit":"celsius"}`, 0.93)),
			decision: true,
			want:     [2]string{"get_current_weather", `{"location":"Boston, MA","unit":"celsius"}`},
		},
		{
			name:    "corrected",
			config:  "recovery:\n  strategy: correction\n",
			call:    [2]string{"fetch_weather_report", `{"city":"Boston, MA"}`},
			requery: csCompletion("", [3]string{"call_new", "get_current_weather", `{"location":"Boston, MA"}`}),
			want:    [2]string{"get_current_weather", `{"location":"Boston, MA"}`},
		},
		{
			name:    "reprompted",
			call:    [2]string{"book_flight", `{"destination":"Lisbon","passengers":"2"}`},
			requery: csCompletion("", [3]string{"call_new", "book_flight", `{"destination":"Lisbon","passengers":2}`}),
			want:    [2]string{"book_flight", `{"destination":"Lisbon","passengers":2}`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := csStartUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				csWrite(w, csText("On it.")+csCall("call_o1", c.call[0], c.call[1]))
			}, c.requery)
			acc, err := csRun(t, csClient(t, csStartGate(t, up.srv.URL, c.config)))
			if err != nil {
				t.Fatal(err)
			}
			calls := csCalls(acc)
			if len(calls) != 1 {
				t.Fatalf("calls %+v", calls)
			}
			// Same id and position as the model's call; only the call
			// itself is replaced, and the re-query's text is not added.
			if calls[0].ID != "call_o1" || calls[0].Function.Name != c.want[0] {
				t.Fatalf("call %s %s(%s), want call_o1 %s", calls[0].ID, calls[0].Function.Name, calls[0].Function.Arguments, c.want[0])
			}
			if !sameJSON(calls[0].Function.Arguments, c.want[1]) {
				t.Fatalf("arguments %s, want %s", calls[0].Function.Arguments, c.want[1])
			}
			if acc.Choices[0].Message.Content != "On it." || acc.Choices[0].FinishReason != "tool_calls" {
				t.Errorf("content %q finish %q", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason)
			}
			reqs := up.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d upstream calls, want the original and one re-query", len(reqs))
			}
			csCheckRequery(t, reqs[1], "call_o1", c.decision)
		})
	}
}

var csEscTag = regexp.MustCompile(`\[toolgate:esc_[A-Za-z0-9_-]+\]$`)

func TestChatStreamSDKEscalated(t *testing.T) {
	escalate := csCompletion(csDecision("escalate", "", "", 0.2))
	unknown := csCall("call_x1", "weather_archive_lookup", `{"city":"Boston","year":1990}`)

	t.Run("error mode after text: in-stream error", func(t *testing.T) {
		up := csStartUpstream(t, func(w http.ResponseWriter, r *http.Request) { csWrite(w, csText("Let me check.")+unknown) }, escalate)
		acc, err := csRun(t, csClient(t, csStartGate(t, up.srv.URL, "")))
		var se *ssestream.StreamError
		if !errors.As(err, &se) {
			t.Fatalf("err %T %v, want the SDK's in-stream error", err, err)
		}
		var body struct {
			Error struct {
				Type       string `json:"type"`
				Code       string `json:"code"`
				Escalation struct {
					ID    string   `json:"id"`
					Codes []string `json:"codes"`
				} `json:"escalation"`
			} `json:"error"`
		}
		if json.Unmarshal(se.Event.Data, &body) != nil || body.Error.Type != "tool_call_escalation" ||
			body.Error.Code != "unknown_tool" || !strings.HasPrefix(body.Error.Escalation.ID, "esc_") {
			t.Fatalf("error event %s", se.Event.Data)
		}
		if len(csCalls(acc)) != 0 || acc.Choices[0].Message.Content != "Let me check." {
			t.Fatalf("client got %+v", acc.Choices[0].Message)
		}
	})

	t.Run("error mode before any byte: plain 422", func(t *testing.T) {
		up := csStartUpstream(t, func(w http.ResponseWriter, r *http.Request) { csWrite(w, unknown) }, escalate)
		// Retries on, as SDKs default: x-should-retry: false must stop them.
		acc, err := csRun(t, csClient(t, csStartGate(t, up.srv.URL, ""), option.WithMaxRetries(2)))
		var ae *openai.Error
		if !errors.As(err, &ae) {
			t.Fatalf("err %T %v, want *openai.Error", err, err)
		}
		if ae.StatusCode != http.StatusUnprocessableEntity || ae.Type != "tool_call_escalation" || ae.Code != "unknown_tool" ||
			!strings.Contains(ae.RawJSON(), `"escalation":{"id":"esc_`) {
			t.Fatalf("status %d type %q code %q raw %s", ae.StatusCode, ae.Type, ae.Code, ae.RawJSON())
		}
		if ae.Response.Header.Get("X-Toolgate-Escalation-Id") == "" || ae.Response.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("headers %v", ae.Response.Header)
		}
		if len(csCalls(acc)) != 0 {
			t.Fatal("a call reached the client")
		}
		if n := len(up.requests()); n != 2 {
			t.Errorf("%d upstream calls, want 2 (the SDK must not retry an escalation)", n)
		}
	})

	// Chunks that open the answer and carry nothing are held with the
	// call, so the escalation is still a plain 422 that the SDK does not
	// retry.
	for name, opening := range map[string]string{
		"role and empty content": fuChunk(`{"role":"assistant","content":""}`, ""),
		"role and null refusal":  fuChunk(`{"role":"assistant","content":null,"refusal":null}`, ""),
		"no choices, no usage, a comment": `data: {"id":"chatcmpl-fu","object":"chat.completion.chunk","created":1741569970,"model":"gpt-4o","choices":[]}` +
			"\n\n: processing\n\n" + fuChunk(`{"role":"assistant","content":""}`, ""),
	} {
		t.Run("error mode after an opening chunk ("+name+"): plain 422", func(t *testing.T) {
			up := csStartUpstream(t, func(w http.ResponseWriter, r *http.Request) { csWrite(w, opening+unknown) }, escalate)
			_, err := csRun(t, csClient(t, csStartGate(t, up.srv.URL, ""), option.WithMaxRetries(2)))
			var ae *openai.Error
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnprocessableEntity || ae.Code != "unknown_tool" ||
				!strings.Contains(ae.RawJSON(), `"escalation":{"id":"esc_`) {
				t.Fatalf("err %T %v, want a plain 422 escalation", err, err)
			}
			if ae.Response.Header.Get("X-Should-Retry") != "false" {
				t.Errorf("headers %v", ae.Response.Header)
			}
			if n := len(up.requests()); n != 2 {
				t.Errorf("%d upstream calls, want 2 (the SDK must not retry an escalation)", n)
			}
		})
	}

	for _, lead := range []string{"", "Let me check. "} {
		t.Run(fmt.Sprintf("message mode, text before: %q", lead), func(t *testing.T) {
			up := csStartUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				// As OpenAI does, the first chunk carries the role: with
				// no text before, that is the call's own first chunk.
				s := strings.Replace(unknown, `{"tool_calls":[`, `{"role":"assistant","content":null,"tool_calls":[`, 1)
				if lead != "" {
					s = csText(lead) + unknown
				}
				csWrite(w, s)
			}, escalate)
			acc, err := csRun(t, csClient(t, csStartGate(t, up.srv.URL, "escalation:\n  mode: message\n")))
			if err != nil {
				t.Fatal(err)
			}
			msg := acc.Choices[0].Message
			if len(msg.ToolCalls) != 0 || !strings.HasPrefix(msg.Content, lead) || !csEscTag.MatchString(msg.Content) {
				t.Fatalf("content %q, %d calls", msg.Content, len(msg.ToolCalls))
			}
			if msg.Role != "assistant" {
				t.Errorf("role %q", msg.Role)
			}
			if acc.Choices[0].FinishReason != "stop" {
				t.Errorf("finish_reason %q, want stop", acc.Choices[0].FinishReason)
			}
			if acc.Usage.TotalTokens != 70 {
				t.Errorf("usage %d, want the upstream's usage chunk passed on", acc.Usage.TotalTokens)
			}
		})
	}
}

// The SDK sees the text before the upstream has sent the tool call at all.
func TestChatStreamSDKTextFirst(t *testing.T) {
	gotText := make(chan struct{})
	starved := make(chan struct{})
	up := csStartUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		csWrite(w, csText("Looking that up."))
		select {
		case <-gotText:
		case <-time.After(3 * time.Second):
			// The client never saw the text on its own: toolgate held it.
			close(starved)
		case <-r.Context().Done():
			return
		}
		csWrite(w, csCall("call_t1", "get_current_weather", `{"location":"Boston, MA"}`))
	}, "")
	client := csClient(t, csStartGate(t, up.srv.URL, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, csParams())
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	signalled := false
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if !signalled && acc.Choices[0].Message.Content == "Looking that up." {
			signalled = true
			close(gotText)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-starved:
		t.Fatal("the text reached the SDK only after the upstream gave up waiting: toolgate buffered it")
	default:
	}
	if !signalled {
		t.Fatal("text never arrived")
	}
	if calls := csCalls(acc); len(calls) != 1 || calls[0].ID != "call_t1" {
		t.Fatalf("calls %+v", calls)
	}
}

// Keepalive comments while a call is held must not disturb the SDK. The
// interval is only settable in code, so this runs the proxy handler
// directly.
func TestChatStreamSDKKeepalive(t *testing.T) {
	args := `{"location":"Boston, MA","unit":"celsius"}`
	up := csStartUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		s := csText("Hold on.") + csCall("call_k1", "get_current_weather", args)
		evs := strings.SplitAfter(s, "\n\n")
		csWrite(w, strings.Join(evs[:4], ""))
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		csWrite(w, strings.Join(evs[4:], ""))
	}, "")
	cfg, err := catalog.Parse([]byte("upstreams:\n  - url: "+up.srv.URL+"\n"), "ka.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Store: catalog.NewStore(snap), Keepalive: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	gate := httptest.NewServer(srv)
	t.Cleanup(gate.Close)

	var raw bytes.Buffer
	var rawMu sync.Mutex
	tee := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(r)
		if err == nil {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.TeeReader(resp.Body, &csLocked{mu: &rawMu, w: &raw}), resp.Body}
		}
		return resp, err
	})
	acc, err := csRun(t, csClient(t, gate.URL, tee))
	if err != nil {
		t.Fatal(err)
	}
	rawMu.Lock()
	n := strings.Count(raw.String(), ": keepalive\n")
	rawMu.Unlock()
	if n < 2 {
		t.Fatalf("%d keepalive comments during a 300ms hold at 50ms", n)
	}
	calls := csCalls(acc)
	if len(calls) != 1 || calls[0].ID != "call_k1" || calls[0].Function.Arguments != args || acc.Choices[0].Message.Content != "Hold on." {
		t.Fatalf("SDK assembled %+v", acc.Choices[0].Message)
	}
}

type csLocked struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *csLocked) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
