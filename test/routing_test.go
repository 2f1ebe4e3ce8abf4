package test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A streaming request toolgate cannot read still gets a judged stream: the
// answer's framing, not the request's flag, picks the path, and the answer
// is held to the config catalog.
func TestUnreadableStreamingRequestStillJudged(t *testing.T) {
	events := strings.Join([]string{
		`data: {"id":"s","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Checking."},"finish_reason":null}]}`,
		`data: {"id":"s","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Boston, MA\"}"}}]},"finish_reason":null}]}`,
		`data: {"id":"s","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`data: [DONE]`,
	}, "\n\n") + "\n\n"
	m := newMock(t, mockReply{Body: events, Header: map[string]string{"Content-Type": "text/event-stream"}})
	g := weatherGate(t, m, "")
	// "description": 5 makes the request unreadable for toolgate; the
	// upstream decides about it.
	req := `{"model":"m","stream":true,"messages":[{"role":"user","content":"weather?"}],` +
		`"tools":[{"type":"function","function":{"name":"get_current_weather","description":5,"parameters":{"type":"object"}}}]}`
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != events {
		t.Fatalf("status %d, body:\n%s\nwant the upstream's stream unchanged", resp.StatusCode, body)
	}
}

// Anthropic-defined client tools (the text editor here) produce tool_use
// blocks that are not function tools of the catalog: a non-streamed answer
// calling one is forwarded, not judged as an invented tool.
func TestAnthropicClientToolNotJudged(t *testing.T) {
	answer := `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[` +
		`{"type":"tool_use","id":"toolu_1","name":"str_replace_based_edit_tool","input":{"command":"view","path":"/tmp/a"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5}}`
	m := newMock(t, mockReply{Body: answer})
	g := startGate(t, config(m, "", ""))
	req := `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"show /tmp/a"}],` +
		`"tools":[{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},` +
		`{"name":"get_weather","description":"Weather.","input_schema":{"type":"object"}}]}`
	resp, err := http.Post(g.URL+"/v1/messages", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != answer {
		t.Fatalf("status %d, body %s; want the answer unchanged", resp.StatusCode, body)
	}
	expectCount(t, m, 1)
}
