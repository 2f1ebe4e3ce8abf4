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

// A re-query's answer is held to what the first answer is: one that is not
// UTF-8, or that hides a key behind a case-folded protocol key, cannot
// supply a repair; the call escalates instead of going out repaired.
func TestRequeryAnswerHeldToTheSameReading(t *testing.T) {
	bad := call{"call_m", "get_current_weather", `{"location": "Boston, MA", "unit": "cel`}
	for name, second := range map[string]string{
		"not utf-8": strings.Replace(callsAnswer("chatcmpl-2", call{"call_n", "get_current_weather", `{"location":"Boston, MA"}`}).Body,
			"Boston", "Bost\xff", 1),
		"folded key": `{"id":"chatcmpl-2","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
			`"Tool_calls":[{"id":"call_n","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Boston, MA\"}"}}]},"finish_reason":"tool_calls"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			m := newMock(t, callsAnswer("chatcmpl-1", bad), mockReply{Body: second})
			g := weatherGate(t, m, "")
			plain := strings.Replace(string(readTestdata(t, "request.json")), `"stream": true`, `"stream": false`, 1)
			resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(plain))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnprocessableEntity || resp.Header.Get("X-Toolgate-Outcome") != "escalated" {
				t.Fatalf("status %d outcome %q: %s", resp.StatusCode, resp.Header.Get("X-Toolgate-Outcome"), b)
			}
			if m.count() != 2 {
				t.Fatalf("%d upstream calls, want 2", m.count())
			}
		})
	}
}
