package test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLangChain drives toolgate with LangChain's ChatOpenAI (bindTools then
// invoke), the layer most agents sit on: a repaired call must come out of
// LangChain's own parser as an ordinary AIMessage tool call. Locally it
// skips when Node or the installed packages are missing; under CI=true that
// is a failure, so the check cannot quietly stop running.
func TestLangChain(t *testing.T) {
	node := needNode(t, "@langchain/openai", "@langchain/core")
	first := callsAnswer("chatcmpl-lc-1", invented)
	m := newMock(t, first, substitute("get_current_weather", weatherArgs, 0.9))
	g := weatherGate(t, m, "")

	// LangSmith tracing stays off whatever the developer's shell says: the
	// test must not try to reach anything but toolgate.
	stdout := string(runNode(t, node, "langchain.mjs", 60*time.Second, "TOOLGATE_BASE_URL="+g.URL,
		"LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false", "LANGCHAIN_TRACING=false"))

	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("want 1 result line, got %d:\n%s", len(lines), stdout)
	}
	t.Logf("LangChain's AIMessage: %s", lines[0])
	var got struct {
		Type      string `json:"type"`
		Content   any    `json:"content"`
		ToolCalls []struct {
			ID   string          `json:"id"`
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
			Type string          `json:"type"`
		} `json:"tool_calls"`
		InvalidToolCalls []json.RawMessage `json:"invalid_tool_calls"`
		ResponseID       string            `json:"response_id"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatalf("result %s: %v", lines[0], err)
	}
	if got.Type != "ai" {
		t.Errorf("message type %q, want ai", got.Type)
	}
	if len(got.ToolCalls) != 1 {
		t.Fatalf("tool_calls %s, want exactly the substituted call", lines[0])
	}
	tc := got.ToolCalls[0]
	if tc.ID != invented.ID || tc.Name != "get_current_weather" || !sameJSON(string(tc.Args), weatherArgs) {
		t.Errorf("tool call %+v (args %s), want id %s get_current_weather %s", tc, tc.Args, invented.ID, weatherArgs)
	}
	if len(got.InvalidToolCalls) != 0 {
		t.Errorf("LangChain reports invalid tool calls: %s", lines[0])
	}
	if s, _ := got.Content.(string); s != "" {
		t.Errorf("content %q: a re-query's text leaked into the answer", s)
	}
	if got.ResponseID != "" && got.ResponseID != "chatcmpl-lc-1" {
		t.Errorf("response id %q, want the original answer's", got.ResponseID)
	}
	if strings.Contains(lines[0], invented.Name) {
		t.Errorf("the invented tool name reached the agent: %s", lines[0])
	}

	expectCount(t, m, 2)
	// LangChain's request reached the upstream as a Chat Completions call with
	// both bound tools, and the re-query kept to the provider's rules.
	if names := chatToolNames(m.body(t, 1)); len(names) != 2 {
		t.Errorf("LangChain's request as the upstream saw it: %s", m.body(t, 1))
	}
	checkRequery(t, m.body(t, 1), m.body(t, 2), true, replayed{[]byte(first.Body), 0})
	if n := testutil.ToFloat64(g.App.Metrics.Requests.WithLabelValues("chat", "substituted")); n != 1 {
		t.Errorf("toolgate_requests_total{outcome=substituted} = %v, want 1", n)
	}
}
