package proxy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// resultsHistoryRequest is the bench request with a conversation of 50
// earlier calls before it, each answered by a 2 KB tool result that holds
// no credential: what an agent's tenth turn sends.
func resultsHistoryRequest(b *testing.B, plain []byte) []byte {
	b.Helper()
	var req map[string]json.RawMessage
	if err := json.Unmarshal(plain, &req); err != nil {
		b.Fatal(err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(req["messages"], &msgs); err != nil {
		b.Fatal(err)
	}
	line := "order ord_1234 shipped to Jane Doe, 12 Main Street, Springfield; carrier UPS, tracking 1Z999AA10123456784, status in transit.\n"
	result := strings.Repeat(line, 2048/len(line)+1)[:2048]
	history := make([]json.RawMessage, 0, len(msgs)+100)
	history = append(history, msgs...)
	for i := range 50 {
		id := fmt.Sprintf("call_h%d", i)
		call, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": id, "type": "function", "function": map[string]any{"name": "get_current_weather", "arguments": `{"location":"Boston, MA"}`}}}})
		res, _ := json.Marshal(map[string]any{"role": "tool", "tool_call_id": id, "content": result})
		history = append(history, call, res)
	}
	req["messages"], _ = json.Marshal(history)
	out, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkProxyResults is one plain request whose history carries 50
// tool results of 2 KB each, judged (docs/results.md), through toolgate and
// through a bare reverse proxy, answered with the two-call answer.
func BenchmarkProxyResults(b *testing.B) {
	e := newBenchEnv(b)
	body := resultsHistoryRequest(b, e.plainReq)
	for _, t := range []struct{ name, url string }{{"toolgate", e.gate.URL}, {"bare", e.bare.URL}} {
		b.Run(t.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				e.do(b, t.url, body, e.answer)
			}
		})
	}
}
