package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/catalog"
)

// testConfig is a small catalog covering every way a decision can end:
// plain tools, a confirm tool that may be substituted, and a tool that may
// not be.
const testConfig = `
upstreams:
  - name: scripted
    url: %s
    api_key_env: EVAL_TEST_KEY
recovery:
  confidence_threshold: 0.8
catalog:
  tools:
    - name: get_weather
      description: Current weather for a city.
      parameters: {type: object, properties: {city: {type: string}}, required: [city], additionalProperties: false}
    - name: web_search
      description: Search the web and return the top results.
      parameters: {type: object, properties: {query: {type: string, minLength: 1}}, required: [query], additionalProperties: false}
    - name: calculator
      description: Evaluate an arithmetic expression.
      parameters: {type: object, properties: {expression: {type: string}}, required: [expression], additionalProperties: false}
    - name: issue_refund
      description: Refund an order.
      policy: confirm
      substitutable: true
      parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    - name: get_secret
      description: Read a secret from the vault.
      substitutable: false
      parameters: {type: object, properties: {name: {type: string}}, required: [name]}
`

const testKey = "sk-eval-test"
const testModel = "scripted-1"

// reply is one scripted answer of the upstream.
type reply struct {
	status int
	header map[string]string
	text   string
	in     int64
	out    int64
	// raw, when set, is the whole answer body, sent as it is.
	raw string
}

func sub(tool, args string, conf float64) string {
	return fmt.Sprintf(`{"decision":"substitute","corrected_tool_call":{"tool_name":%q,"arguments":%s},"escalation":null,"confidence":%v}`, tool, args, conf)
}

func esc(conf float64) string {
	return fmt.Sprintf(`{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":"no tool fits","original_intent":"something","missing_capability":"a tool"},"confidence":%v}`, conf)
}

// scripted is an upstream that answers each case from a script keyed by the
// case id found in the first user message ("[case c01] …"). It also checks
// that every re-query is one the provider accepts; a malformed one gets a
// 400 naming the problem, which the test sees as a failed case.
type scripted struct {
	mu     sync.Mutex
	script map[string][]reply
	seen   map[string]int
	total  int
	// before runs on each request, with the request's number, before it
	// is answered; returning false drops the request unanswered.
	before func(n int) bool
	// promptWants is text every recovery prompt must contain.
	promptWants string
}

var caseTag = regexp.MustCompile(`\[case ([A-Za-z0-9_-]+)\]`)

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The body is read first: only then does the server notice a client
	// that hangs up, which the unanswered request below waits for.
	body, err := io.ReadAll(r.Body)
	s.mu.Lock()
	s.total++
	n := s.total
	before := s.before
	s.mu.Unlock()
	if before != nil && !before(n) {
		// Unanswered: hold the request until the client gives up on it.
		<-r.Context().Done()
		return
	}
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, msg)
	}
	if r.Method != http.MethodPost || r.URL.Path != ChatPath {
		fail("unexpected %s %s", r.Method, r.URL.Path)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		fail("authorization header %q", got)
		return
	}
	if got := r.Header.Get(caseHeader); got != "" {
		fail("eval's own header %s reached the provider", caseHeader)
		return
	}
	var req struct {
		Model      string            `json:"model"`
		ToolChoice json.RawMessage   `json:"tool_choice"`
		Stream     *bool             `json:"stream"`
		Tools      []json.RawMessage `json:"tools"`
		Messages   []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		fail("body: %v", err)
		return
	}
	m := req.Messages
	switch {
	case req.Model != testModel:
		fail("model %q", req.Model)
		return
	case string(req.ToolChoice) != `"none"`:
		fail("tool_choice %s, want \"none\" on a decision re-query", req.ToolChoice)
		return
	case req.Stream != nil && *req.Stream:
		fail("a re-query must not stream")
		return
	case len(req.Tools) == 0:
		fail("tools must stay as sent")
		return
	case len(m) < 3:
		fail("%d messages", len(m))
		return
	}
	asst, tool := m[len(m)-2], m[len(m)-1]
	if asst.Role != "assistant" || len(asst.ToolCalls) != 1 || tool.Role != "tool" || tool.ToolCallID != asst.ToolCalls[0].ID {
		fail("the bad call must be the assistant turn, answered by its tool message")
		return
	}
	var prompt string
	_ = json.Unmarshal(tool.Content, &prompt)
	if s.promptWants != "" && !strings.Contains(prompt, s.promptWants) {
		fail("the recovery prompt lacks %q", s.promptWants)
		return
	}
	var user string
	_ = json.Unmarshal(m[0].Content, &user)
	tag := caseTag.FindStringSubmatch(user)
	if tag == nil {
		fail("no case tag in %q", user)
		return
	}
	s.mu.Lock()
	rs := s.script[tag[1]]
	i := s.seen[tag[1]]
	s.seen[tag[1]]++
	s.mu.Unlock()
	if len(rs) == 0 {
		fail("nothing scripted for %s", tag[1])
		return
	}
	rp := rs[min(i, len(rs)-1)]
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if rp.status != 0 && rp.status != http.StatusOK {
		w.WriteHeader(rp.status)
		fmt.Fprintf(w, `{"error":{"message":"scripted status %d"}}`, rp.status)
		return
	}
	if rp.raw != "" {
		_, _ = io.WriteString(w, rp.raw)
		return
	}
	writeCompletion(w, rp.text, rp.in, rp.out)
}

func writeCompletion(w http.ResponseWriter, text string, in, out int64) {
	resp := map[string]any{
		"id": "chatcmpl-scripted", "object": "chat.completion", "model": testModel,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}},
		"usage": map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *scripted) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// newUpstream starts the scripted upstream and a config pointing at it.
func newUpstream(t *testing.T, script map[string][]reply) (*scripted, *catalog.Snapshot) {
	t.Helper()
	return newUpstreamWith(t, script, "")
}

// newUpstreamWith is newUpstream with more top-level config lines.
func newUpstreamWith(t *testing.T, script map[string][]reply, extra string) (*scripted, *catalog.Snapshot) {
	t.Helper()
	s := &scripted{script: script, seen: map[string]int{}, promptWants: "at least 0.8 sure"}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Setenv("EVAL_TEST_KEY", testKey)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, append(fmt.Appendf(nil, testConfig, srv.URL), extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := LoadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	return s, snap
}

// tcase builds a case whose user message carries its id for the script.
func tcase(id, kind, question, bad, args, expected string) Case {
	msg := fmt.Sprintf(`{"role":"user","content":%q}`, "[case "+id+"] "+question)
	return Case{ID: id, Kind: kind, Messages: []json.RawMessage{json.RawMessage(msg)},
		BadCall: BadCall{Name: bad, Arguments: json.RawMessage(args)}, Expected: expected}
}

func runEval(t *testing.T, ctx context.Context, snap *catalog.Snapshot, cases []Case, opt Options) *Report {
	t.Helper()
	if opt.Model == "" {
		opt.Model = testModel
	}
	if opt.MinPrecision == 0 {
		opt.MinPrecision = DefaultMinPrecision
	}
	rep, err := Run(ctx, snap, cases, opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func fptr(v float64) *float64 { return &v }
