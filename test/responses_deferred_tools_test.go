package test

// Tools a Responses request offers outside its top-level tools: in an
// additional_tools input item (tool search with deferred tools), inside a
// namespace. A valid call to one passes byte for byte; an invented name is
// still unknown_tool.

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// deferredRequest offers lookup_refund_policy and a namespace's
// get_order_status only through an additional_tools item; the top-level
// tools hold tool_search alone.
func deferredRequest(stream bool) []byte {
	body := map[string]any{
		"model": "gpt-5.6",
		"tools": []any{map[string]any{"type": "tool_search"}},
		"input": []any{
			map[string]any{"type": "additional_tools", "role": "developer", "tools": []any{
				map[string]any{"type": "function", "name": "lookup_refund_policy", "description": "Look up the refund policy of a product category.",
					"defer_loading": true, "strict": true, "parameters": map[string]any{
						"type": "object", "properties": map[string]any{"category": map[string]any{"type": "string", "enum": []string{"electronics", "clothing", "books"}}},
						"required": []string{"category"}, "additionalProperties": false}},
				map[string]any{"type": "namespace", "name": "orders", "description": "Order lookups.", "tools": []any{
					map[string]any{"type": "function", "name": "get_order_status", "defer_loading": true, "parameters": map[string]any{
						"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []string{"order_id"}}}}},
			}},
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "What is your refund policy for electronics?"}}},
		},
		"stream": stream,
	}
	b, _ := json.Marshal(body)
	return b
}

// deferredAnswer is the recorded Responses answer (plain or streamed) with
// its call turned into a call of name with args, and the model gpt-5.6.
// The streamed arguments are re-cut into as many deltas as the recording
// has, so sequence numbers stay as recorded.
func deferredAnswer(t *testing.T, stream bool, name, args string) string {
	t.Helper()
	file := "function_call.json"
	if stream {
		file = "function_call_stream.sse"
	}
	b, err := os.ReadFile(filepath.Join("..", "proxy", "responses", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), "get_current_weather", name)
	s = strings.ReplaceAll(s, "gpt-4o-2024-08-06", "gpt-5.6")
	quoted, _ := json.Marshal(args)
	inner := string(quoted[1 : len(quoted)-1])
	s = strings.ReplaceAll(s, `{\"location\":\"Boston, MA\",\"unit\":\"celsius\"}`, inner)
	deltas := regexp.MustCompile(`"delta":"(?:[^"\\]|\\.)*"`)
	n := len(deltas.FindAllString(s, -1))
	i := 0
	s = deltas.ReplaceAllStringFunc(s, func(string) string {
		from, to := i*len(args)/n, (i+1)*len(args)/n
		i++
		frag, _ := json.Marshal(args[from:to])
		return `"delta":` + string(frag)
	})
	if strings.Contains(s, "Boston") {
		t.Fatal("the recorded call's arguments are still in the answer")
	}
	return s
}

func TestResponsesDeferredToolCallPasses(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, c := range []struct{ name, args string }{
			{"lookup_refund_policy", `{"category":"electronics"}`},
			{"get_order_status", `{"order_id":"ord_8812"}`},
		} {
			t.Run(c.name+map[bool]string{false: "/plain", true: "/stream"}[stream], func(t *testing.T) {
				answer := deferredAnswer(t, stream, c.name, c.args)
				action := fuJSON(answer)
				if stream {
					action = fuBytes(http.StatusOK, "text/event-stream", []byte(answer))
				}
				u := newFaultQueue(t, action)
				g := fuGate(t, u, "", "recovery:\n  max_attempts: 0\n")
				r := fuPost(t, g.URL, "/v1/responses", deferredRequest(stream))
				if r.Status != http.StatusOK || string(r.Body) != answer {
					t.Fatalf("status %d, body\n%s\nwant the upstream's answer byte for byte", r.Status, r.Body)
				}
				if !stream && r.Header.Get("X-Toolgate-Outcome") != "pass" {
					t.Errorf("outcome %q", r.Header.Get("X-Toolgate-Outcome"))
				}
				if u.count() != 1 {
					t.Errorf("%d upstream calls, want 1", u.count())
				}
			})
		}
	}
}

func TestResponsesDeferredToolInventedNameIsUnknown(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			answer := deferredAnswer(t, stream, "get_refund_policy", `{"category":"electronics"}`)
			action := fuJSON(answer)
			if stream {
				action = fuBytes(http.StatusOK, "text/event-stream", []byte(answer))
			}
			u := newFaultQueue(t, action)
			g := fuGate(t, u, "", "recovery:\n  max_attempts: 0\n")
			r := fuPost(t, g.URL, "/v1/responses", deferredRequest(stream))
			var e struct {
				Error escalationError `json:"error"`
			}
			if r.Status != http.StatusUnprocessableEntity || json.Unmarshal(r.Body, &e) != nil || !hasCode(e.Error, "unknown_tool") {
				t.Fatalf("status %d body %s, want an unknown_tool escalation", r.Status, r.Body)
			}
		})
	}
}
