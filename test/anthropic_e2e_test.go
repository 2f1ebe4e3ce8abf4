package test

// End-to-end tests of the Anthropic Messages route: a real toolgate, the
// official anthropic-sdk-go as the client, and a scripted upstream that
// refuses, as the Messages API does, any request whose tool_use /
// tool_result pairing is wrong. Every helper here is prefixed anth so this
// file stands apart from the OpenAI suite's harness.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	oaishared "github.com/openai/openai-go/v3/shared"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// anthRequest is one request the scripted upstream received.
type anthRequest struct {
	N      int
	Path   string
	Header http.Header
	Body   []byte
}

// field decodes one top-level field of the request body into v.
func (r *anthRequest) field(t *testing.T, key string, v any) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("upstream request %d: %v", r.N, err)
	}
	if raw, ok := m[key]; ok {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("upstream request %d field %s: %v", r.N, key, err)
		}
	}
}

// anthReply is what the scripted upstream answers: a message (JSON) or a
// stream (SSE). Status 0 means 200.
type anthReply struct {
	Status int
	JSON   string
	SSE    string
}

// anthUpstream is a scripted stand-in for the Messages API.
type anthUpstream struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []*anthRequest
	rejected []string
	script   func(n int, r *anthRequest) anthReply
}

func newAnthUpstream(t *testing.T, script func(n int, r *anthRequest) anthReply) *anthUpstream {
	t.Helper()
	u := &anthUpstream{t: t, script: script}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		u.srv.Close()
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, r := range u.rejected {
			t.Errorf("the mock upstream refused a request as the Messages API would: %s", r)
		}
	})
	return u
}

func (u *anthUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	req := &anthRequest{N: len(u.reqs) + 1, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	u.reqs = append(u.reqs, req)
	msg := ""
	if r.URL.Path != "/v1/messages" {
		msg = "unexpected path " + r.URL.Path
	} else {
		msg = anthReject(body)
	}
	if msg != "" {
		u.rejected = append(u.rejected, fmt.Sprintf("request %d: %s", req.N, msg))
	}
	u.mu.Unlock()
	if msg != "" {
		anthWrite(w, anthReply{Status: http.StatusBadRequest, JSON: anthError("invalid_request_error", msg)})
		return
	}
	anthWrite(w, u.script(req.N, req))
}

func anthWrite(w http.ResponseWriter, reply anthReply) {
	w.Header().Set("Request-Id", "req_mock")
	if reply.SSE != "" {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, reply.SSE)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reply.JSON)
}

func (u *anthUpstream) requests() []*anthRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*anthRequest(nil), u.reqs...)
}

func anthError(typ, msg string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	return string(b)
}

// anthReject plays the Messages API's referee: it returns the reason the
// API would refuse body with a 400, or "".
func anthReject(body []byte) string {
	var r struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		ToolChoice *struct {
			Type string `json:"type"`
		} `json:"tool_choice"`
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "body is not a Messages request: " + err.Error()
	}
	if r.Model == "" || r.MaxTokens <= 0 || len(r.Messages) == 0 {
		return "model, max_tokens and messages are required"
	}
	if r.Messages[0].Role != "user" {
		return "the first message must use the user role"
	}
	thinking := r.Thinking != nil && r.Thinking.Type == "enabled"
	if thinking && r.ToolChoice != nil && (r.ToolChoice.Type == "any" || r.ToolChoice.Type == "tool") {
		return "Thinking may not be enabled when tool_choice forces tool use."
	}
	type block struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		ToolUseID string          `json:"tool_use_id"`
		Text      *string         `json:"text"`
		Input     json.RawMessage `json:"input"`
	}
	blocksOf := func(raw json.RawMessage) ([]block, bool) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return nil, true
		}
		var bs []block
		return bs, json.Unmarshal(raw, &bs) == nil
	}
	lastAssistant := -1
	for i, m := range r.Messages {
		if m.Role == "assistant" {
			lastAssistant = i
		}
	}
	for i, m := range r.Messages {
		bs, ok := blocksOf(m.Content)
		if !ok {
			return fmt.Sprintf("messages.%d.content: not a string or a list of blocks", i)
		}
		var uses []string
		for j, b := range bs {
			if b.Type == "text" && (b.Text == nil || *b.Text == "") {
				return fmt.Sprintf("messages.%d.content.%d: text content blocks must be non-empty", i, j)
			}
			if b.Type == "tool_use" {
				var obj map[string]any
				if json.Unmarshal(b.Input, &obj) != nil || obj == nil {
					return fmt.Sprintf("messages.%d.content.%d.input: Input should be an object", i, j)
				}
				uses = append(uses, b.ID)
			}
		}
		switch m.Role {
		case "assistant":
			if len(uses) == 0 {
				continue
			}
			if thinking && i == lastAssistant && (len(bs) == 0 || (bs[0].Type != "thinking" && bs[0].Type != "redacted_thinking")) {
				return fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block", i, bs[0].Type)
			}
			var answered []string
			if i+1 < len(r.Messages) && r.Messages[i+1].Role == "user" {
				next, _ := blocksOf(r.Messages[i+1].Content)
				for _, b := range next {
					if b.Type != "tool_result" {
						break
					}
					answered = append(answered, b.ToolUseID)
				}
			}
			if strings.Join(answered, ",") != strings.Join(uses, ",") {
				return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %v (answered first: %v)", i, uses, answered)
			}
		case "user":
			var prev []string
			if i > 0 && r.Messages[i-1].Role == "assistant" {
				pb, _ := blocksOf(r.Messages[i-1].Content)
				for _, b := range pb {
					if b.Type == "tool_use" {
						prev = append(prev, b.ID)
					}
				}
			}
			for j, b := range bs {
				if b.Type != "tool_result" {
					continue
				}
				found := false
				for _, id := range prev {
					found = found || id == b.ToolUseID
				}
				if !found {
					return fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
				}
			}
		default:
			return fmt.Sprintf("messages.%d.role: unexpected role %q", i, m.Role)
		}
	}
	return ""
}

func TestAnthropicMockRejectsWhatTheAPIRejects(t *testing.T) {
	user := `{"role":"user","content":"hi"}`
	asst := `{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]}`
	for name, msgs := range map[string]string{
		"missing result":    user + `,` + asst + `,{"role":"user","content":"next"}`,
		"result not first":  user + `,` + asst + `,{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}`,
		"result for nobody": user + `,` + asst + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"},{"type":"tool_result","tool_use_id":"toolu_9","content":"r"}]}`,
		"orphan result":     user + `,{"role":"assistant","content":"text"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}`,
		"empty text":        `{"role":"user","content":[{"type":"text","text":""}]}`,
		"thinking dropped":  user + `,` + asst + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}`,
	} {
		extra := ""
		if name == "thinking dropped" {
			extra = `,"thinking":{"type":"enabled","budget_tokens":1024}`
		}
		if anthReject([]byte(`{"model":"m","max_tokens":5`+extra+`,"messages":[`+msgs+`]}`)) == "" {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := user + `,` + asst + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r","is_error":true},{"type":"text","text":"more"}]}`
	if msg := anthReject([]byte(`{"model":"m","max_tokens":5,"messages":[` + ok + `]}`)); msg != "" {
		t.Errorf("valid history refused: %s", msg)
	}
	if anthReject([]byte(`{"model":"m","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"tool_choice":{"type":"any"},"messages":[`+user+`]}`)) == "" {
		t.Error("forced tool use with thinking accepted")
	}
}

// anthGate starts toolgate from configYAML and returns its base URL.
func anthGate(t *testing.T, configYAML string) string {
	t.Helper()
	cfg, err := catalog.Parse([]byte(configYAML), "anthropic-e2e.yaml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, configYAML)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	a, err := app.StartSnapshot(snap, app.Options{Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return "http://" + a.ProxyAddr()
}

// anthConfig is a config with u as its only upstream; rest adds top-level
// keys. Without a catalog, the request's tools are the catalog.
func anthConfig(u *anthUpstream, rest string) string {
	return "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: anthropic\n    url: " + u.srv.URL + "\n" + rest + "\n"
}

func anthClient(base string) anthropic.Client {
	return anthropic.NewClient(anthoption.WithBaseURL(base), anthoption.WithAPIKey("sk-ant-client"), anthoption.WithMaxRetries(0))
}

// anthParams is the fixtures' request: the two tools of request.json and
// the user's question.
func anthParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5-20250929",
		MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(
			"What's the weather like in Boston today, and what is Apple (AAPL on NASDAQ) trading at?"))},
		Tools: []anthropic.ToolUnionParam{
			{OfTool: &anthropic.ToolParam{Name: "get_current_weather", Description: anthropic.String("Get the current weather in a given location"),
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{
					"location": map[string]any{"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
					"unit":     map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
				}, Required: []string{"location"}}}},
			{OfTool: &anthropic.ToolParam{Name: "get_stock_price", Description: anthropic.String("Fetch the latest price for a given ticker"),
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{
					"ticker":   map[string]any{"type": "string"},
					"exchange": map[string]any{"type": "string"},
				}, Required: []string{"ticker", "exchange"}}}},
		},
		ToolChoice: anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}},
	}
}

func anthFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "proxy", "anthropic", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// anthMsg writes a message answer with the given content blocks.
func anthMsg(id, stop string, blocks ...string) string {
	return `{"id":"` + id + `","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[` +
		strings.Join(blocks, ",") + `],"stop_reason":"` + stop + `","stop_sequence":null,"usage":{"input_tokens":100,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20}}`
}

func anthText(s string) string {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return string(b)
}

func anthToolUse(id, name, input string) string {
	return `{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":` + input + `}`
}

func anthThinking(thinking, sig string) string {
	b, _ := json.Marshal(map[string]string{"type": "thinking", "thinking": thinking, "signature": sig})
	return string(b)
}

// anthSSE streams a message answer the way the API does: message_start
// with empty content, each block as start / deltas / stop (tool input in
// fragments after an empty one, thinking then its signature), a ping after
// the first block starts, message_delta and message_stop.
func anthSSE(t *testing.T, message string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(message), &m); err != nil {
		t.Fatal(err)
	}
	var blocks []json.RawMessage
	_ = json.Unmarshal(m["content"], &blocks)
	var b strings.Builder
	ev := func(v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(data, &head)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", head.Type, data)
	}
	start := map[string]json.RawMessage{}
	for k, v := range m {
		start[k] = v
	}
	start["content"] = json.RawMessage("[]")
	start["stop_reason"] = json.RawMessage("null")
	ev(map[string]any{"type": "message_start", "message": start})
	for i, raw := range blocks {
		var blk map[string]json.RawMessage
		_ = json.Unmarshal(raw, &blk)
		var typ, text, thinking, sig string
		_ = json.Unmarshal(blk["type"], &typ)
		switch typ {
		case "text":
			_ = json.Unmarshal(blk["text"], &text)
			ev(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range thirds(text) {
				ev(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
			}
		case "thinking":
			_ = json.Unmarshal(blk["thinking"], &thinking)
			_ = json.Unmarshal(blk["signature"], &sig)
			ev(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, part := range thirds(thinking) {
				ev(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": part}})
			}
			ev(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": sig}})
		case "tool_use":
			head := map[string]json.RawMessage{}
			for k, v := range blk {
				head[k] = v
			}
			head["input"] = json.RawMessage("{}")
			ev(map[string]any{"type": "content_block_start", "index": i, "content_block": head})
			var in bytes.Buffer
			_ = json.Compact(&in, blk["input"])
			ev(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
			for _, part := range thirds(in.String()) {
				ev(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		default:
			ev(map[string]any{"type": "content_block_start", "index": i, "content_block": raw})
		}
		ev(map[string]any{"type": "content_block_stop", "index": i})
		if i == 0 {
			b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
		}
	}
	ev(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": m["stop_reason"], "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 20}})
	ev(map[string]any{"type": "message_stop"})
	return b.String()
}

// thirds cuts s in three at character boundaries, as the API does: a
// fragment never ends inside a UTF-8 sequence.
func thirds(s string) []string {
	if len(s) < 3 {
		return []string{s}
	}
	cut := func(i int) int {
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		return i
	}
	a, b := cut(len(s)/3), cut(2*len(s)/3)
	return []string{s[:a], s[a:b], s[b:]}
}

// anthAnswer answers in the shape the request asked for: a stream when it
// says stream: true.
func anthAnswer(t *testing.T, r *anthRequest, message string) anthReply {
	var stream bool
	r.field(t, "stream", &stream)
	if stream {
		return anthReply{SSE: anthSSE(t, message)}
	}
	return anthReply{JSON: message}
}

// anthCall sends params through the SDK, streamed or not, and returns the
// message the client ends up with and the response headers.
func anthCall(t *testing.T, base string, params anthropic.MessageNewParams, stream bool) (anthropic.Message, http.Header, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := anthClient(base)
	var resp *http.Response
	if !stream {
		msg, err := c.Messages.New(ctx, params, anthoption.WithResponseInto(&resp))
		var h http.Header
		if resp != nil {
			h = resp.Header
		}
		if msg == nil {
			return anthropic.Message{}, h, err
		}
		return *msg, h, err
	}
	// The bytes the client read are kept, so a failure can show them.
	rec := &anthRecorder{}
	s := c.Messages.NewStreaming(ctx, params, anthoption.WithResponseInto(&resp),
		anthoption.WithMiddleware(func(r *http.Request, next anthoption.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if err == nil {
				rec.rc = resp.Body
				resp.Body = rec
			}
			return resp, err
		}))
	defer s.Close()
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			return msg, nil, fmt.Errorf("accumulate: %w", err)
		}
	}
	var h http.Header
	if resp != nil {
		h = resp.Header
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the client read this stream:\n%s", rec.buf.Bytes())
		}
	})
	return msg, h, s.Err()
}

// anthRecorder keeps a copy of what is read through it.
type anthRecorder struct {
	rc  io.ReadCloser
	buf bytes.Buffer
}

func (r *anthRecorder) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

func (r *anthRecorder) Close() error { return r.rc.Close() }

// anthToolUses returns the tool_use blocks of a message as id/name/input.
func anthToolUses(t *testing.T, msg anthropic.Message) [][3]string {
	t.Helper()
	var out [][3]string
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			var in bytes.Buffer
			if err := json.Compact(&in, b.Input); err != nil {
				t.Fatalf("tool_use input is not JSON: %s", b.Input)
			}
			out = append(out, [3]string{b.ID, b.Name, in.String()})
		}
	}
	return out
}

func anthModes(t *testing.T, f func(t *testing.T, stream bool)) {
	for _, stream := range []bool{false, true} {
		name := "message"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) { f(t, stream) })
	}
}

func TestAnthropicValidPassesUnchanged(t *testing.T) {
	for _, tc := range []struct {
		json, sse string
		calls     [][3]string
	}{
		{"tool_use.json", "tool_use_stream.sse", nil},
		{"parallel_tool_use.json", "parallel_tool_use_stream.sse", nil},
	} {
		t.Run(tc.json, func(t *testing.T) {
			body, stream := anthFixture(t, tc.json), anthFixture(t, tc.sse)
			up := newAnthUpstream(t, func(_ int, r *anthRequest) anthReply {
				var s bool
				r.field(t, "stream", &s)
				if s {
					return anthReply{SSE: stream}
				}
				return anthReply{JSON: body}
			})
			base := anthGate(t, anthConfig(up, ""))

			msg, h, err := anthCall(t, base, anthParams(), false)
			if err != nil {
				t.Fatal(err)
			}
			// The SDK keeps the body without its final line break.
			if msg.RawJSON() != strings.TrimSuffix(body, "\n") {
				t.Errorf("a valid answer was changed:\n%s", msg.RawJSON())
			}
			if h.Get("X-Toolgate-Outcome") != "pass" || h.Get("X-Toolgate-Upstream-Calls") != "1" {
				t.Errorf("outcome %q calls %q", h.Get("X-Toolgate-Outcome"), h.Get("X-Toolgate-Upstream-Calls"))
			}
			want := anthToolUses(t, msg)

			smsg, _, err := anthCall(t, base, anthParams(), true)
			if err != nil {
				t.Fatal(err)
			}
			got := anthToolUses(t, smsg)
			if len(got) != len(want) || smsg.StopReason != "tool_use" {
				t.Fatalf("streamed calls %v, plain %v", got, want)
			}
			for i := range got {
				if got[i][1] != want[i][1] || got[i][2] != want[i][2] {
					t.Errorf("streamed call %d %v, plain %v", i, got[i], want[i])
				}
			}

			// Both answers reach a plain HTTP client byte for byte.
			for _, want := range []string{body, stream} {
				isStream := want == stream
				raw, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5-20250929", "max_tokens": 1024, "stream": isStream,
					"messages": []any{map[string]any{"role": "user", "content": "weather in Boston?"}},
					"tools":    []any{map[string]any{"name": "get_current_weather", "input_schema": map[string]any{"type": "object"}}, map[string]any{"name": "get_stock_price", "input_schema": map[string]any{"type": "object"}}}})
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages?beta=true", bytes.NewReader(raw))
				req.Header.Set("x-api-key", "sk-ant-raw")
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set("content-type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(got) != want {
					t.Errorf("the answer was changed (stream %v):\n%s", isStream, got)
				}
			}

			reqs := up.requests()
			if len(reqs) != 4 {
				t.Fatalf("%d upstream calls, want 4 (one per client request)", len(reqs))
			}
			for _, r := range reqs[:2] {
				if r.Header.Get("Authorization") != "Bearer sk-ant-client" || r.Header.Get("Anthropic-Version") == "" {
					t.Errorf("request %d: the SDK's headers were not forwarded: %v", r.N, r.Header)
				}
			}
			for _, r := range reqs[2:] {
				if r.Header.Get("X-Api-Key") != "sk-ant-raw" || r.Header.Get("Anthropic-Version") != "2023-06-01" {
					t.Errorf("request %d: client headers not forwarded: %v", r.N, r.Header)
				}
			}
		})
	}
}

// anthDecision is the model's answer to the recovery prompt.
func anthDecision(decision, tool, args string, confidence float64) string {
	if decision == "substitute" {
		return fmt.Sprintf(`{"decision":"substitute","corrected_tool_call":{"tool_name":%q,"arguments":%s},"escalation":null,"confidence":%g}`, tool, args, confidence)
	}
	return fmt.Sprintf(`{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":"no tool can query the database","original_intent":"count users","missing_capability":"database access"},"confidence":%g}`, confidence)
}

// anthRequery checks a re-query: never streamed, history appended after
// the client's own messages, and returns the tool_results of the last user
// turn.
type anthResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error"`
}

func anthRequery(t *testing.T, r *anthRequest, clientMessages int) (assistant json.RawMessage, results []anthResult) {
	t.Helper()
	var stream bool
	r.field(t, "stream", &stream)
	if stream {
		t.Errorf("re-query %d is streamed", r.N)
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	r.field(t, "messages", &msgs)
	if len(msgs) < clientMessages+2 || msgs[len(msgs)-2].Role != "assistant" || msgs[len(msgs)-1].Role != "user" {
		t.Fatalf("re-query %d messages: %s", r.N, r.Body)
	}
	if err := json.Unmarshal(msgs[len(msgs)-1].Content, &results); err != nil {
		t.Fatalf("re-query %d: user turn %s", r.N, msgs[len(msgs)-1].Content)
	}
	return msgs[len(msgs)-2].Content, results
}

// hallucinatedParallel is parallel_tool_use.json with its first call
// renamed to a tool that does not exist.
func hallucinatedParallel(t *testing.T) string {
	b := anthFixture(t, "parallel_tool_use.json")
	out := strings.Replace(b, `"name": "get_current_weather"`, `"name": "weather_lookup"`, 1)
	if out == b {
		t.Fatal("fixture edit failed")
	}
	return out
}

func TestAnthropicHallucinationSubstituted(t *testing.T) {
	anthModes(t, func(t *testing.T, stream bool) {
		bad := hallucinatedParallel(t)
		up := newAnthUpstream(t, func(n int, r *anthRequest) anthReply {
			if n == 1 {
				return anthAnswer(t, r, bad)
			}
			asst, results := anthRequery(t, r, 1)
			var tc struct {
				Type string `json:"type"`
			}
			r.field(t, "tool_choice", &tc)
			if tc.Type != "none" {
				t.Errorf("decision re-query tool_choice %q, want none", tc.Type)
			}
			if !stream {
				var m map[string]json.RawMessage
				_ = json.Unmarshal([]byte(bad), &m)
				if !bytes.Equal(asst, m["content"]) {
					t.Errorf("assistant turn not replayed byte for byte:\n%s", asst)
				}
			}
			if len(results) != 2 || !results[0].IsError || results[1].IsError ||
				results[0].ToolUseID != "toolu_01WVn2RNagKZ58sFy76HJ3zr" || results[1].ToolUseID != "toolu_01CJq9uUwkuHSAbZdYmM6J4t" ||
				!strings.Contains(results[0].Content, "weather_lookup") || !strings.Contains(results[1].Content, "Not executed") {
				t.Errorf("tool results %+v", results)
			}
			return anthReply{JSON: anthMsg("msg_decision", "end_turn", anthText(anthDecision("substitute", "get_current_weather", `{"location":"Boston, MA","unit":"celsius"}`, 0.93)))}
		})
		base := anthGate(t, anthConfig(up, ""))
		msg, h, err := anthCall(t, base, anthParams(), stream)
		if err != nil {
			t.Fatal(err)
		}
		calls := anthToolUses(t, msg)
		want := [][3]string{
			{"toolu_01WVn2RNagKZ58sFy76HJ3zr", "get_current_weather", `{"location":"Boston, MA","unit":"celsius"}`},
			{"toolu_01CJq9uUwkuHSAbZdYmM6J4t", "get_stock_price", `{"ticker":"AAPL","exchange":"NASDAQ"}`},
		}
		if fmt.Sprint(calls) != fmt.Sprint(want) {
			t.Errorf("calls %v\nwant %v", calls, want)
		}
		if len(msg.Content) != 3 || msg.Content[0].Text != "I'll look up both for you at the same time." || msg.StopReason != "tool_use" {
			t.Errorf("message %s", msg.RawJSON())
		}
		if strings.Contains(msg.RawJSON(), "decision") {
			t.Error("the re-query's text reached the client")
		}
		if !stream && (h.Get("X-Toolgate-Outcome") != "substituted" || h.Get("X-Toolgate-Upstream-Calls") != "2") {
			t.Errorf("outcome %q calls %q", h.Get("X-Toolgate-Outcome"), h.Get("X-Toolgate-Upstream-Calls"))
		}
		if n := len(up.requests()); n != 2 {
			t.Errorf("%d upstream calls", n)
		}
	})
}

func TestAnthropicReprompted(t *testing.T) {
	anthModes(t, func(t *testing.T, stream bool) {
		bad := anthMsg("msg_bad", "tool_use", anthText("Checking the price."), anthToolUse("toolu_stock1", "get_stock_price", `{"ticker":"AAPL"}`))
		up := newAnthUpstream(t, func(n int, r *anthRequest) anthReply {
			switch n {
			case 1:
				return anthAnswer(t, r, bad)
			case 2:
				_, results := anthRequery(t, r, 1)
				var tc struct {
					Type string `json:"type"`
				}
				r.field(t, "tool_choice", &tc)
				if tc.Type != "auto" {
					t.Errorf("a reprompt changed tool_choice to %q", tc.Type)
				}
				if len(results) != 1 || !results[0].IsError || results[0].ToolUseID != "toolu_stock1" || !strings.Contains(results[0].Content, "exchange") {
					t.Errorf("tool results %+v", results)
				}
				return anthReply{JSON: anthMsg("msg_fix", "tool_use", anthToolUse("toolu_stock2", "get_stock_price", `{"ticker":"AAPL","exchange":"NASDAQ"}`))}
			}
			t.Errorf("unexpected request %d", n)
			return anthReply{Status: 500, JSON: anthError("api_error", "unexpected")}
		})
		base := anthGate(t, anthConfig(up, ""))
		msg, h, err := anthCall(t, base, anthParams(), stream)
		if err != nil {
			t.Fatal(err)
		}
		calls := anthToolUses(t, msg)
		if fmt.Sprint(calls) != fmt.Sprint([][3]string{{"toolu_stock1", "get_stock_price", `{"ticker":"AAPL","exchange":"NASDAQ"}`}}) {
			t.Errorf("calls %v", calls)
		}
		if msg.Content[0].Text != "Checking the price." {
			t.Errorf("text %q", msg.Content[0].Text)
		}
		if !stream && h.Get("X-Toolgate-Outcome") != "reprompted" {
			t.Errorf("outcome %q", h.Get("X-Toolgate-Outcome"))
		}
	})
}

func TestAnthropicEscalated(t *testing.T) {
	bad := anthMsg("msg_bad", "tool_use", anthText("Let me query that."), anthToolUse("toolu_db", "database_query", `{"sql":"SELECT 1"}`))
	script := func(t *testing.T) func(n int, r *anthRequest) anthReply {
		return func(n int, r *anthRequest) anthReply {
			if n == 1 {
				return anthAnswer(t, r, bad)
			}
			anthRequery(t, r, 1)
			return anthReply{JSON: anthMsg("msg_decision", "end_turn", anthText(anthDecision("escalate", "", "", 0.2)))}
		}
	}
	t.Run("error mode", func(t *testing.T) {
		anthModes(t, func(t *testing.T, stream bool) {
			up := newAnthUpstream(t, script(t))
			base := anthGate(t, anthConfig(up, ""))
			_, _, err := anthCall(t, base, anthParams(), stream)
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v is not an API error", err)
			}
			raw := apiErr.RawJSON()
			if !stream {
				if apiErr.StatusCode != http.StatusUnprocessableEntity {
					t.Errorf("status %d", apiErr.StatusCode)
				}
				raw = anthBody(t, apiErr)
				if apiErr.Response.Header.Get("X-Should-Retry") != "false" || !strings.HasPrefix(apiErr.Response.Header.Get("X-Toolgate-Escalation-Id"), "esc_") {
					t.Errorf("headers %v", apiErr.Response.Header)
				}
			}
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type       string `json:"type"`
					Code       string `json:"code"`
					Message    string `json:"message"`
					Escalation struct {
						ID                string   `json:"id"`
						Codes             []string `json:"codes"`
						MissingCapability string   `json:"missing_capability"`
					} `json:"escalation"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(raw), &body); err != nil {
				t.Fatalf("error body %q: %v", raw, err)
			}
			e := body.Error
			if body.Type != "error" || e.Type != "tool_call_escalation" || e.Code != "unknown_tool" || !strings.HasPrefix(e.Escalation.ID, "esc_") ||
				e.Escalation.MissingCapability != "database access" || !strings.Contains(e.Message, "[toolgate:"+e.Escalation.ID+"]") {
				t.Errorf("escalation %s", raw)
			}
			if string(apiErr.Type()) != "tool_call_escalation" {
				t.Errorf("SDK error type %q", apiErr.Type())
			}
		})
	})
	t.Run("message mode", func(t *testing.T) {
		anthModes(t, func(t *testing.T, stream bool) {
			up := newAnthUpstream(t, script(t))
			base := anthGate(t, anthConfig(up, "escalation:\n  mode: message"))
			msg, h, err := anthCall(t, base, anthParams(), stream)
			if err != nil {
				t.Fatal(err)
			}
			if len(anthToolUses(t, msg)) != 0 || msg.StopReason != "end_turn" {
				t.Fatalf("message %s", msg.RawJSON())
			}
			last := msg.Content[len(msg.Content)-1]
			if last.Type != "text" || !strings.Contains(last.Text, "[toolgate:esc_") || !strings.HasSuffix(last.Text, "]") {
				t.Errorf("text %q", last.Text)
			}
			if stream {
				// The text streamed before the call stays; the call became text.
				if len(msg.Content) != 2 || msg.Content[0].Text != "Let me query that." {
					t.Errorf("content %s", msg.RawJSON())
				}
			} else {
				if len(msg.Content) != 1 {
					t.Errorf("content %s", msg.RawJSON())
				}
				if h.Get("X-Toolgate-Outcome") != "escalated" || !strings.HasPrefix(h.Get("X-Toolgate-Escalation-Id"), "esc_") {
					t.Errorf("headers %v", h)
				}
				var m struct {
					Escalation struct {
						ID string `json:"id"`
					} `json:"toolgate_escalation"`
				}
				_ = json.Unmarshal([]byte(msg.RawJSON()), &m)
				if !strings.Contains(last.Text, m.Escalation.ID) || m.Escalation.ID == "" {
					t.Errorf("toolgate_escalation %s", msg.RawJSON())
				}
			}
		})
	})
}

// anthBody is the body of a failed plain request, as the SDK received it.
// An answer that begins with a call opens with message_start and a ping,
// which carry nothing: they are held with the call, so the escalation is
// still a plain 422 that the SDK, retrying as it does by default, does not
// retry.
func TestAnthropicStreamCallFirstEscalationIsPlain(t *testing.T) {
	bad := anthMsg("msg_bad", "tool_use", anthToolUse("toolu_db", "database_query", `{"sql":"SELECT 1"}`))
	up := newAnthUpstream(t, func(n int, r *anthRequest) anthReply {
		if n == 1 {
			sse := anthSSE(t, bad)
			// As the API often does: the ping right after message_start.
			sse = strings.Replace(sse, "event: ping\ndata: {\"type\": \"ping\"}\n\n", "", 1)
			at := strings.Index(sse, "event: content_block_start")
			return anthReply{SSE: sse[:at] + "event: ping\ndata: {\"type\": \"ping\"}\n\n" + sse[at:]}
		}
		anthRequery(t, r, 1)
		return anthReply{JSON: anthMsg("msg_decision", "end_turn", anthText(anthDecision("escalate", "", "", 0.2)))}
	})
	base := anthGate(t, anthConfig(up, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := anthropic.NewClient(anthoption.WithBaseURL(base), anthoption.WithAPIKey("sk-ant-client"), anthoption.WithMaxRetries(2))
	s := c.Messages.NewStreaming(ctx, anthParams())
	defer s.Close()
	for s.Next() {
		t.Errorf("event %s reached the client", s.Current().RawJSON())
	}
	var apiErr *anthropic.Error
	if !errors.As(s.Err(), &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("err %v, want a plain 422", s.Err())
	}
	if apiErr.Response.Header.Get("X-Should-Retry") != "false" || !strings.Contains(anthBody(t, apiErr), `"escalation":{"id":"esc_`) {
		t.Errorf("headers %v body %s", apiErr.Response.Header, anthBody(t, apiErr))
	}
	if n := len(up.requests()); n != 2 {
		t.Errorf("%d upstream calls, want 2 (the SDK must not retry an escalation)", n)
	}
}

func anthBody(t *testing.T, e *anthropic.Error) string {
	t.Helper()
	if raw := e.RawJSON(); raw != "" {
		return raw
	}
	t.Fatal("the SDK error carries no body")
	return ""
}

func TestAnthropicMixedBlocksWithThinking(t *testing.T) {
	anthModes(t, func(t *testing.T, stream bool) {
		sig := "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxx+/8Ryh6vZ0XtkfJ1Z9bH7g=="
		bad := anthMsg("msg_mixed", "tool_use",
			anthThinking("The user wants the weather; I'll use a lookup.", sig),
			anthText("Let me check."),
			anthToolUse("toolu_mix1", "weather_lookup", `{"city":"Boston, MA"}`),
		)
		up := newAnthUpstream(t, func(n int, r *anthRequest) anthReply {
			if n == 1 {
				return anthAnswer(t, r, bad)
			}
			asst, results := anthRequery(t, r, 1)
			var blocks []map[string]any
			_ = json.Unmarshal(asst, &blocks)
			if len(blocks) != 3 || blocks[0]["type"] != "thinking" || blocks[0]["signature"] != sig ||
				blocks[0]["thinking"] != "The user wants the weather; I'll use a lookup." {
				t.Errorf("thinking not replayed with its signature: %s", asst)
			}
			if !stream {
				var m map[string]json.RawMessage
				_ = json.Unmarshal([]byte(bad), &m)
				if !bytes.Equal(asst, m["content"]) {
					t.Errorf("assistant turn not replayed byte for byte:\n%s", asst)
				}
			}
			if len(results) != 1 || results[0].ToolUseID != "toolu_mix1" || !results[0].IsError {
				t.Errorf("results %+v", results)
			}
			return anthReply{JSON: anthMsg("msg_dec", "end_turn",
				anthThinking("Map it onto get_current_weather.", "c2ln"),
				anthText(anthDecision("substitute", "get_current_weather", `{"location":"Boston, MA"}`, 0.9)))}
		})
		base := anthGate(t, anthConfig(up, ""))
		params := anthParams()
		params.MaxTokens = 4096
		params.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
		msg, _, err := anthCall(t, base, params, stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 3 || msg.Content[0].Type != "thinking" || msg.Content[0].Signature != sig || msg.Content[1].Text != "Let me check." {
			t.Fatalf("message %s", msg.RawJSON())
		}
		calls := anthToolUses(t, msg)
		if fmt.Sprint(calls) != fmt.Sprint([][3]string{{"toolu_mix1", "get_current_weather", `{"location":"Boston, MA"}`}}) {
			t.Errorf("calls %v", calls)
		}
	})
}

func TestAnthropicServerToolsPassUnjudged(t *testing.T) {
	answer := anthMsg("msg_srv", "tool_use",
		anthText("Searching."),
		`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"boston weather"}}`,
		`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://example.com","title":"Weather","encrypted_content":"abc","page_age":null}]}`,
		anthToolUse("toolu_w", "get_current_weather", `{"location":"Boston, MA"}`),
	)
	up := newAnthUpstream(t, func(_ int, r *anthRequest) anthReply { return anthAnswer(t, r, answer) })
	base := anthGate(t, anthConfig(up, ""))
	params := anthParams()
	params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}})
	anthModes(t, func(t *testing.T, stream bool) {
		msg, h, err := anthCall(t, base, params, stream)
		if err != nil {
			t.Fatal(err)
		}
		if !stream && (msg.RawJSON() != answer || h.Get("X-Toolgate-Outcome") != "pass") {
			t.Errorf("outcome %q, message %s", h.Get("X-Toolgate-Outcome"), msg.RawJSON())
		}
		if len(msg.Content) != 4 || msg.Content[1].Type != "server_tool_use" || msg.Content[3].Name != "get_current_weather" {
			t.Errorf("message %s", msg.RawJSON())
		}
	})
}

// TestAnthropicAndOpenAIUpstreams runs one toolgate in front of two
// providers, as a user with both would: OpenAI at the root and Anthropic
// under /anthropic, each reached through its own official SDK, each
// upstream seeing only its own API, with toolgate holding the Anthropic key.
func TestAnthropicAndOpenAIUpstreams(t *testing.T) {
	t.Setenv("TOOLGATE_E2E_ANTHROPIC_KEY", "sk-ant-held-by-toolgate")
	ant := newAnthUpstream(t, func(n int, r *anthRequest) anthReply {
		if r.Header.Get("X-Api-Key") != "sk-ant-held-by-toolgate" {
			t.Errorf("anthropic request %d: x-api-key is not toolgate's key", n)
		}
		var msgs []json.RawMessage
		r.field(t, "messages", &msgs)
		if len(msgs) == 1 {
			return anthAnswer(t, r, hallucinatedParallel(t))
		}
		anthRequery(t, r, 1)
		return anthReply{JSON: anthMsg("msg_decision", "end_turn", anthText(anthDecision("substitute", "get_current_weather", `{"location":"Boston, MA"}`, 0.9)))}
	})
	var oaiMu sync.Mutex
	var oaiPaths []string
	oai := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		oaiMu.Lock()
		oaiPaths = append(oaiPaths, r.URL.Path)
		oaiMu.Unlock()
		if r.Header.Get("Authorization") != "Bearer sk-openai-client" {
			t.Errorf("openai request: authorization %q", r.Header.Get("Authorization"))
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Boston, MA\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
	}))
	t.Cleanup(oai.Close)

	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n" +
		"  - name: openai\n    url: " + oai.URL + "\n" +
		"  - name: anthropic\n    url: " + ant.srv.URL + "\n    path_prefix: /anthropic\n    api_key_env: TOOLGATE_E2E_ANTHROPIC_KEY\n    api_key_mode: replace\n"
	base := anthGate(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	oc := openai.NewClient(oaioption.WithBaseURL(base+"/v1/"), oaioption.WithAPIKey("sk-openai-client"), oaioption.WithMaxRetries(0))
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Boston, MA?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(oaishared.FunctionDefinitionParam{
			Name:       "get_current_weather",
			Parameters: oaishared.FunctionParameters{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}, "required": []string{"location"}},
		})},
	})
	if err != nil {
		t.Fatalf("openai: %v", err)
	}
	if tc := cc.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "get_current_weather" {
		t.Errorf("openai calls %+v", tc)
	}

	msg, _, err := anthCall(t, base+"/anthropic/", anthParams(), false)
	if err != nil {
		t.Fatalf("anthropic: %v", err)
	}
	if calls := anthToolUses(t, msg); len(calls) != 2 || calls[0] != [3]string{"toolu_01WVn2RNagKZ58sFy76HJ3zr", "get_current_weather", `{"location":"Boston, MA"}`} {
		t.Errorf("anthropic calls %v", calls)
	}
	smsg, _, err := anthCall(t, base+"/anthropic", anthParams(), true)
	if err != nil {
		t.Fatalf("anthropic stream: %v", err)
	}
	if calls := anthToolUses(t, smsg); len(calls) != 2 || calls[1][1] != "get_stock_price" {
		t.Errorf("anthropic streamed calls %v", calls)
	}

	oaiMu.Lock()
	defer oaiMu.Unlock()
	if fmt.Sprint(oaiPaths) != "[/v1/chat/completions]" {
		t.Errorf("openai upstream saw %v", oaiPaths)
	}
	for _, r := range ant.requests() {
		if r.Path != "/v1/messages" {
			t.Errorf("anthropic upstream saw %s", r.Path)
		}
	}
}
