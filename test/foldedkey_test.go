package test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A key that differs from a protocol key only by case is read by Go's
// decoder as the real key and by most SDKs not at all, so the call toolgate
// judged and the call the agent runs could differ: such answers are refused.
func TestFoldedProtocolKeysRefused(t *testing.T) {
	hidden := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"Tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Boston, MA\"}"}}]},"finish_reason":"tool_calls"}]}`
	m := newMock(t, mockReply{Body: hidden})
	g := weatherGate(t, m, "")
	plain := strings.Replace(string(readTestdata(t, "request.json")), `"stream": true`, `"stream": false`, 1)
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(plain))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}

	stream := "data: {\"id\":\"s\",\"object\":\"chat.completion.chunk\",\"Choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"drop_tables\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\ndata: [DONE]\n\n"
	ms := newMock(t, mockReply{Body: stream, Header: map[string]string{"Content-Type": "text/event-stream"}})
	gs := weatherGate(t, ms, "")
	resp2, err := http.Post(gs.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(readTestdata(t, "request.json"))))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	b, err := io.ReadAll(resp2.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	if resp2.StatusCode == http.StatusOK && !strings.Contains(body, `"error"`) {
		t.Fatalf("a folded-key stream was forwarded: %s", body)
	}
	if strings.Contains(body, "drop_tables") {
		t.Fatalf("the hidden call reached the client: %s", body)
	}
}
