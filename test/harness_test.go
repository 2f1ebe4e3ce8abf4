// Package test drives a real toolgate, started the way cmd/toolgate starts
// it, through the official OpenAI SDKs against a scripted upstream. It
// checks the contract of SPEC.md from the outside: what the client gets,
// and what the provider is sent.
package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/proxy/pipeline"
)

// gate is one running toolgate.
type gate struct {
	URL  string
	App  *app.App
	Sink *recordingSink
}

// recordingSink keeps every escalation toolgate hands to its sinks.
type recordingSink struct {
	mu   sync.Mutex
	recs []*pipeline.EscalationRecord
}

func (s *recordingSink) Record(r *pipeline.EscalationRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
}

func (s *recordingSink) records() []*pipeline.EscalationRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pipeline.EscalationRecord(nil), s.recs...)
}

// startToolgate starts toolgate from configYAML, as a config file would
// (catalog.Parse then catalog.Compile), on loopback ports of its own, and
// stops it when the test ends.
func startToolgate(t *testing.T, configYAML string) (baseURL string, a *app.App) {
	t.Helper()
	g := startGate(t, configYAML)
	return g.URL, g.App
}

// startGate is startToolgate with the escalation sink exposed.
func startGate(t *testing.T, configYAML string) *gate {
	t.Helper()
	g, _ := startGateWith(t, configYAML, app.Options{Sink: &recordingSink{}})
	return g
}

// testLogger is silent unless TOOLGATE_TEST_LOG is set, so -v output stays
// readable; the log is the first thing to turn on when a test fails.
func testLogger(t *testing.T) *zap.Logger {
	if os.Getenv("TOOLGATE_TEST_LOG") != "" {
		return zaptest.NewLogger(t)
	}
	return zap.NewNop()
}

// config renders a toolgate config with m as its only upstream. upstream
// holds extra keys for the upstream entry, rest the other top-level keys.
func config(m *mockUpstream, upstream, rest string) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: mock\n    url: " + m.URL() + "\n")
	for _, line := range strings.Split(strings.TrimSpace(upstream), "\n") {
		if line != "" {
			b.WriteString("    " + strings.TrimSpace(line) + "\n")
		}
	}
	b.WriteString(rest)
	b.WriteString("\n")
	return b.String()
}

// fixtureVersion labels the fixture catalog, so headers, escalations and
// metrics carry a known catalog_version.
const fixtureVersion = "fixtures-v1"

// catalogYAML is a catalog: block holding the two tools of the fixtures'
// request.json with their exact schemas (JSON is YAML), followed by extra
// tool entries written as YAML list items at the tools indentation.
func catalogYAML(t *testing.T, extraKeys string, extraTools ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("catalog:\n  version: " + fixtureVersion + "\n")
	for _, line := range strings.Split(strings.TrimSpace(extraKeys), "\n") {
		if line != "" {
			b.WriteString("  " + strings.TrimSpace(line) + "\n")
		}
	}
	b.WriteString("  tools:\n")
	for _, ft := range fixtureTools(t) {
		b.WriteString("    - name: " + ft.Name + "\n")
		b.WriteString("      description: " + strconv.Quote(ft.Description) + "\n")
		b.WriteString("      parameters: " + string(ft.Parameters) + "\n")
	}
	for _, x := range extraTools {
		b.WriteString(x)
		if !strings.HasSuffix(x, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// fixtureTool is one function tool of testdata/request.json.
type fixtureTool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fixtureTools(t *testing.T) []fixtureTool {
	t.Helper()
	var req struct {
		Tools []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(readTestdata(t, "request.json"), &req); err != nil {
		t.Fatal(err)
	}
	var out []fixtureTool
	for _, tl := range req.Tools {
		var c bytes.Buffer
		if err := json.Compact(&c, tl.Function.Parameters); err != nil {
			t.Fatal(err)
		}
		out = append(out, fixtureTool{tl.Function.Name, tl.Function.Description, c.Bytes()})
	}
	return out
}

// sdkTool turns a tool definition into the SDK's request type.
func sdkTool(t *testing.T, name, desc string, params json.RawMessage) openai.ChatCompletionToolUnionParam {
	t.Helper()
	var p shared.FunctionParameters
	if err := json.Unmarshal(params, &p); err != nil {
		t.Fatal(err)
	}
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: name, Description: openai.String(desc), Parameters: p})
}

// fixtureParams is the fixtures' request.json as the Go SDK sends it
// (non-streaming): the user's question, both tools, tool_choice auto.
func fixtureParams(t *testing.T) openai.ChatCompletionNewParams {
	t.Helper()
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(readTestdata(t, "request.json"), &req); err != nil {
		t.Fatal(err)
	}
	p := openai.ChatCompletionNewParams{
		Model:      req.Model,
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage(req.Messages[0].Content)},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")},
	}
	for _, ft := range fixtureTools(t) {
		p.Tools = append(p.Tools, sdkTool(t, ft.Name, ft.Description, ft.Parameters))
	}
	return p
}

// chatResult is everything a test looks at after one SDK call.
type chatResult struct {
	C      *openai.ChatCompletion
	Err    error
	APIErr *openai.Error
	Resp   *http.Response
	// Sent is the request body the SDK put on the wire.
	Sent []byte
	// Raw is the response body as it came off the wire.
	Raw []byte
}

// newClient is the SDK client every test uses: toolgate as base URL and no
// retries, so that the upstream call counts are exactly toolgate's.
func newClient(base string, opts ...option.RequestOption) openai.Client {
	all := []option.RequestOption{
		option.WithBaseURL(base + "/v1/"),
		option.WithAPIKey("sk-test"),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(20 * time.Second),
	}
	return openai.NewClient(append(all, opts...)...)
}

// chat makes one Chat Completions call through the SDK.
func chat(t *testing.T, base string, params openai.ChatCompletionNewParams, opts ...option.RequestOption) chatResult {
	t.Helper()
	var r chatResult
	capture := option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		if req.GetBody != nil {
			if rc, err := req.GetBody(); err == nil {
				r.Sent, _ = io.ReadAll(rc)
				rc.Close()
			}
		}
		resp, err := next(req)
		if err == nil && resp.Body != nil {
			// Keep the exact wire bytes; the SDK reads its copy.
			r.Raw, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(r.Raw))
		}
		return resp, err
	})
	client := newClient(base, capture)
	opts = append(opts, option.WithResponseInto(&r.Resp))
	r.C, r.Err = client.Chat.Completions.New(context.Background(), params, opts...)
	if r.Err != nil {
		var ae *openai.Error
		if errors.As(r.Err, &ae) {
			r.APIErr = ae
		}
	}
	if r.Resp == nil {
		t.Fatalf("no HTTP response: %v", r.Err)
	}
	return r
}

// ok fails the test unless the call succeeded.
func (r chatResult) ok(t *testing.T) *openai.ChatCompletion {
	t.Helper()
	if r.Err != nil {
		body := ""
		if r.APIErr != nil {
			body = r.APIErr.RawJSON()
		}
		t.Fatalf("call failed: %v %s", r.Err, body)
	}
	return r.C
}

// expectHeaders checks the SPEC §6 headers of a validated answer.
func expectHeaders(t *testing.T, r chatResult, outcome string, upstreamCalls int) {
	t.Helper()
	h := r.Resp.Header
	if got := h.Get("X-Toolgate-Outcome"); got != outcome {
		t.Errorf("X-Toolgate-Outcome = %q, want %q", got, outcome)
	}
	if got := h.Get("X-Toolgate-Upstream-Calls"); got != strconv.Itoa(upstreamCalls) {
		t.Errorf("X-Toolgate-Upstream-Calls = %q, want %d", got, upstreamCalls)
	}
	if !strings.HasPrefix(h.Get("X-Toolgate-Request-Id"), "req_") {
		t.Errorf("X-Toolgate-Request-Id = %q", h.Get("X-Toolgate-Request-Id"))
	}
	if h.Get("X-Toolgate-Catalog-Version") == "" {
		t.Errorf("X-Toolgate-Catalog-Version missing")
	}
}

// expectCount checks how many requests reached the upstream.
func expectCount(t *testing.T, m *mockUpstream, want int) {
	t.Helper()
	if got := m.count(); got != want {
		t.Errorf("upstream got %d requests, want %d", got, want)
	}
}

// escalationError is the error object of a SPEC §5 error-mode answer.
type escalationError struct {
	Type       string     `json:"type"`
	Code       string     `json:"code"`
	Message    string     `json:"message"`
	Escalation escalation `json:"escalation"`
}

type escalation struct {
	ID                 string          `json:"id"`
	Codes              []string        `json:"codes"`
	Reason             string          `json:"reason"`
	OriginalIntent     string          `json:"original_intent"`
	MissingCapability  string          `json:"missing_capability"`
	CatalogVersion     string          `json:"catalog_version"`
	RequestID          string          `json:"request_id"`
	UpstreamRequestIDs []string        `json:"upstream_request_ids"`
	Call               json.RawMessage `json:"call"`
	Attempts           []attempt       `json:"attempts"`
	// Approval is set when the call is held for a person (SPEC §5a).
	Approval *ticket `json:"approval"`
}

type attempt struct {
	Kind         string          `json:"kind"`
	Tool         string          `json:"tool"`
	Arguments    json.RawMessage `json:"arguments"`
	ArgumentsRaw *string         `json:"arguments_raw"`
	Findings     []finding       `json:"findings"`
	Decision     string          `json:"decision"`
	Confidence   *float64        `json:"confidence"`
	Status       int             `json:"status"`
}

type finding struct {
	Code    string `json:"code"`
	Pointer string `json:"pointer"`
	Keyword string `json:"keyword"`
	Message string `json:"message"`
}

// escalated checks an error-mode escalation (HTTP 422 with its headers) and
// returns its error object.
func escalated(t *testing.T, r chatResult) escalationError {
	t.Helper()
	if r.APIErr == nil {
		t.Fatalf("want a 422 escalation, got err=%v", r.Err)
	}
	if r.APIErr.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422; body %s", r.APIErr.StatusCode, r.APIErr.RawJSON())
	}
	var e escalationError
	if err := json.Unmarshal([]byte(r.APIErr.RawJSON()), &e); err != nil {
		t.Fatalf("escalation body: %v\n%s", err, r.APIErr.RawJSON())
	}
	h := r.Resp.Header
	if got := h.Get("X-Should-Retry"); got != "false" {
		t.Errorf("x-should-retry = %q, want false", got)
	}
	if got := h.Get("X-Toolgate-Escalation-Id"); got == "" || got != e.Escalation.ID {
		t.Errorf("X-Toolgate-Escalation-Id = %q, escalation id %q", got, e.Escalation.ID)
	}
	if !strings.HasPrefix(e.Escalation.ID, "esc_") {
		t.Errorf("escalation id %q", e.Escalation.ID)
	}
	if e.Type != "tool_call_escalation" {
		t.Errorf("error type %q", e.Type)
	}
	if len(e.Escalation.Codes) == 0 || e.Code != e.Escalation.Codes[0] {
		t.Errorf("error code %q, escalation codes %v", e.Code, e.Escalation.Codes)
	}
	if got := h.Get("X-Toolgate-Request-Id"); e.Escalation.RequestID != got {
		t.Errorf("escalation request_id %q, header %q", e.Escalation.RequestID, got)
	}
	if got := h.Get("X-Toolgate-Catalog-Version"); e.Escalation.CatalogVersion != got {
		t.Errorf("escalation catalog_version %q, header %q", e.Escalation.CatalogVersion, got)
	}
	return e
}

func hasCode(e escalationError, code string) bool {
	for _, c := range e.Escalation.Codes {
		if c == code {
			return true
		}
	}
	return false
}

func attemptKinds(e escalationError) []string {
	var out []string
	for _, a := range e.Escalation.Attempts {
		out = append(out, a.Kind)
	}
	return out
}

// gotCall is one tool call of the SDK's parsed answer.
type gotCall struct{ ID, Name, Args string }

func callsOf(t *testing.T, c *openai.ChatCompletion, choice int) []gotCall {
	t.Helper()
	if choice >= len(c.Choices) {
		t.Fatalf("answer has %d choices", len(c.Choices))
	}
	var out []gotCall
	for _, tc := range c.Choices[choice].Message.ToolCalls {
		out = append(out, gotCall{tc.ID, tc.Function.Name, tc.Function.Arguments})
	}
	return out
}

// expectCalls compares calls, with arguments compared as JSON values.
func expectCalls(t *testing.T, got []gotCall, want ...gotCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d calls %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Name != want[i].Name || !sameJSON(got[i].Args, want[i].Args) {
			t.Errorf("call %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return a == b
	}
	return reflect.DeepEqual(va, vb)
}

// ---- scripted answers ----

// call is a tool call in a scripted answer.
type call struct{ ID, Name, Args string }

type wireAnswer struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []wireChoice `json:"choices"`
	Usage             wireUsage    `json:"usage"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type wireChoice struct {
	Index        int             `json:"index"`
	Message      wireMessage     `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type wireMessage struct {
	Role        string     `json:"role"`
	Content     *string    `json:"content"`
	ToolCalls   []wireCall `json:"tool_calls,omitempty"`
	Refusal     *string    `json:"refusal"`
	Annotations []string   `json:"annotations"`
}

type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// choice is one scripted choice: calls, or text when calls is empty.
type choice struct {
	Calls  []call
	Text   string
	Finish string
}

// answerOf renders a chat.completion with the given choices and usage.
func answerOf(id string, in, out int64, choices ...choice) string {
	a := wireAnswer{ID: id, Object: "chat.completion", Created: 1741569952, Model: "gpt-4o-2024-08-06",
		Usage: wireUsage{in, out, in + out}, SystemFingerprint: "fp_mock"}
	for i, c := range choices {
		ch := wireChoice{Index: i, Logprobs: json.RawMessage("null"), FinishReason: c.Finish,
			Message: wireMessage{Role: "assistant", Annotations: []string{}}}
		if len(c.Calls) > 0 {
			for _, k := range c.Calls {
				var wc wireCall
				wc.ID, wc.Type = k.ID, "function"
				wc.Function.Name, wc.Function.Arguments = k.Name, k.Args
				ch.Message.ToolCalls = append(ch.Message.ToolCalls, wc)
			}
			if ch.FinishReason == "" {
				ch.FinishReason = "tool_calls"
			}
		} else {
			text := c.Text
			ch.Message.Content = &text
			if ch.FinishReason == "" {
				ch.FinishReason = "stop"
			}
		}
		a.Choices = append(a.Choices, ch)
	}
	b, err := json.Marshal(a)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// callsAnswer is a one-choice answer with tool calls.
func callsAnswer(id string, calls ...call) mockReply {
	return mockReply{Body: answerOf(id, 50, 10, choice{Calls: calls})}
}

// textAnswer is a one-choice text answer.
func textAnswer(id, text string) mockReply {
	return mockReply{Body: answerOf(id, 60, 20, choice{Text: text})}
}

// substitute is a decision answer, fenced as models like to write it.
func substitute(tool, args string, confidence float64) mockReply {
	d := fmt.Sprintf(`{"decision":"substitute","corrected_tool_call":{"tool_name":%q,"arguments":%s},"escalation":null,"confidence":%g}`,
		tool, args, confidence)
	return textAnswer("chatcmpl-decision", "```json\n"+d+"\n```")
}

// escalate is a decision answer that gives up.
func escalate(reason, intent, missing string, confidence float64) mockReply {
	d := fmt.Sprintf(`{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":%q,"original_intent":%q,"missing_capability":%q},"confidence":%g}`,
		reason, intent, missing, confidence)
	return textAnswer("chatcmpl-decision", d)
}

// Calls used throughout: the fixtures' valid calls and broken variants.
var (
	weatherArgs = `{"location":"Boston, MA","unit":"celsius"}`
	stockArgs   = `{"ticker":"AAPL","exchange":"NASDAQ"}`
	weather     = call{"call_weather", "get_current_weather", weatherArgs}
	stock       = call{"call_stock", "get_stock_price", stockArgs}
	invented    = call{"call_invented", "fetch_weather_report", `{"city":"Boston"}`}
	badUnit     = call{"call_badunit", "get_current_weather", `{"location":"Boston, MA","unit":"kelvin"}`}
)

// ---- re-query checks ----

// replayed names an upstream answer's choice that a re-query must replay.
type replayed struct {
	Answer []byte
	Choice int
}

// toolReply is one role:"tool" message a re-query appended.
type toolReply struct{ ID, Content string }

// checkRequery asserts the SPEC §4 re-query shape of rq against the
// original request orig: append only, the client's messages and tools byte
// for byte, n 1, no streaming, each replayed assistant turn equal to the
// upstream's own message, then one tool message per call id of that turn in
// order. decision says whether the re-query asks for a decision (tool_choice
// none, no response_format). It returns the appended tool messages.
func checkRequery(t *testing.T, orig, rq []byte, decision bool, turns ...replayed) []toolReply {
	t.Helper()
	var o, q map[string]json.RawMessage
	if err := json.Unmarshal(orig, &o); err != nil {
		t.Fatalf("original request: %v", err)
	}
	if err := json.Unmarshal(rq, &q); err != nil {
		t.Fatalf("re-query: %v", err)
	}
	if n, ok := q["n"]; ok && string(n) != "1" {
		t.Errorf("re-query n = %s, want absent or 1", n)
	}
	if s, ok := q["stream"]; ok && string(s) != "false" {
		t.Errorf("re-query stream = %s, want absent or false", s)
	}
	if _, ok := q["stream_options"]; ok {
		t.Errorf("re-query carries stream_options")
	}
	if !bytes.Equal(o["tools"], q["tools"]) {
		t.Errorf("re-query tools changed:\n orig %s\n got  %s", o["tools"], q["tools"])
	}
	if decision {
		if string(q["tool_choice"]) != `"none"` {
			t.Errorf("decision re-query tool_choice = %s, want \"none\"", q["tool_choice"])
		}
		if _, ok := q["response_format"]; ok {
			t.Errorf("decision re-query keeps response_format")
		}
	} else if !bytes.Equal(o["tool_choice"], q["tool_choice"]) {
		t.Errorf("re-query tool_choice = %s, want %s", q["tool_choice"], o["tool_choice"])
	}
	// Everything else is the client's, byte for byte.
	for k, v := range o {
		switch k {
		case "messages", "n", "stream", "stream_options", "tool_choice", "response_format":
			continue
		}
		if !bytes.Equal(v, q[k]) {
			t.Errorf("re-query field %q = %s, want %s", k, q[k], v)
		}
	}
	for k := range q {
		if _, ok := o[k]; !ok && k != "tool_choice" {
			t.Errorf("re-query adds field %q", k)
		}
	}

	var om, qm []json.RawMessage
	if err := json.Unmarshal(o["messages"], &om); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(q["messages"], &qm); err != nil {
		t.Fatal(err)
	}
	if len(qm) <= len(om) {
		t.Fatalf("re-query has %d messages, the original %d: nothing appended", len(qm), len(om))
	}
	for i := range om {
		if !bytes.Equal(om[i], qm[i]) {
			t.Errorf("message %d rewritten:\n orig %s\n got  %s", i, om[i], qm[i])
		}
	}
	rest := qm[len(om):]
	var out []toolReply
	for _, turn := range turns {
		want := replayedMessage(t, turn)
		if len(rest) == 0 {
			t.Fatalf("re-query lacks a replayed assistant turn")
		}
		var gotV, wantV any
		_ = json.Unmarshal(rest[0], &gotV)
		_ = json.Unmarshal(want, &wantV)
		if !reflect.DeepEqual(gotV, wantV) {
			t.Errorf("replayed assistant turn differs from the upstream's:\n upstream %s\n replayed %s", want, rest[0])
		}
		rest = rest[1:]
		var msg struct {
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		_ = json.Unmarshal(want, &msg)
		for _, tc := range msg.ToolCalls {
			if len(rest) == 0 {
				t.Fatalf("re-query does not answer call %s", tc.ID)
			}
			var tm struct {
				Role       string `json:"role"`
				ToolCallID string `json:"tool_call_id"`
				Content    string `json:"content"`
			}
			if err := json.Unmarshal(rest[0], &tm); err != nil {
				t.Fatalf("tool message: %v", err)
			}
			if tm.Role != "tool" || tm.ToolCallID != tc.ID {
				t.Errorf("expected the tool message for %s, got %s", tc.ID, rest[0])
			}
			out = append(out, toolReply{tm.ToolCallID, tm.Content})
			rest = rest[1:]
		}
	}
	if len(rest) > 0 {
		t.Errorf("re-query appends %d unexpected messages: %s", len(rest), rest)
	}
	return out
}

// replayedMessage is the raw message object of one choice of an answer.
func replayedMessage(t *testing.T, r replayed) json.RawMessage {
	t.Helper()
	var a struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(r.Answer, &a); err != nil || r.Choice >= len(a.Choices) {
		t.Fatalf("answer has no choice %d: %v", r.Choice, err)
	}
	return a.Choices[r.Choice].Message
}

// heldReply reports whether a tool message is the "not executed" reply
// that valid siblings of a bad call get.
func heldReply(content string) bool {
	c := strings.ToLower(content)
	return strings.Contains(c, "not executed") && strings.Contains(c, "do not repeat")
}
