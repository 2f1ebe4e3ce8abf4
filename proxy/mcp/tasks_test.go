package mcp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Task-augmented calls (MCP 2025-11-25): judged before they are
// forwarded, their task handle passes as the server sent it, the result
// fetched through tasks/result is checked against the outputSchema, and a
// refusal is a JSON-RPC error with the findings, not a result.
func TestTaskAugmentedCalls(t *testing.T) {
	var calls atomic.Int32
	up := taskServer(t, &calls)
	g := startGate(t, up.URL, "")
	hdr := []string{"Mcp-Session-Id", "s1", "Mcp-Protocol-Version", "2025-11-25"}

	_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"report","arguments":{"order_id":"ord_1"},"task":{"ttl":60000}}}`, hdr...)
	if body != taskHandle {
		t.Fatalf("the task handle changed: %s", body)
	}
	_, _, body = post(t, g.url, `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t1"}}`, hdr...)
	checkTaskResult(t, body)
	_, _, body = post(t, g.url, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"report","arguments":{"order_id":"x"},"task":{}}}`, hdr...)
	checkTaskRefusal(t, body)
	// The same call without a task is refused with an error result.
	_, _, body = post(t, g.url, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"report","arguments":{"order_id":"x"}}}`, hdr...)
	if !strings.Contains(body, `"id":5,"result"`) || !strings.Contains(body, `"isError":true`) {
		t.Fatalf("a refused call: %s", body)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the server ran %d calls, want the valid one", n)
	}
}

// Tasks are the io.modelcontextprotocol/tasks extension on 2026-07-28: a
// task-creating call is judged before it is forwarded, with no session,
// and its result checked when the client fetches it.
func TestTaskAugmentedCalls2026(t *testing.T) {
	var calls atomic.Int32
	up := taskServer(t, &calls)
	g := startGate(t, up.URL, "")
	hdr := func(method, name string) []string {
		return []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method, "Mcp-Name", name}
	}
	_, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"report","arguments":{"order_id":"ord_1"},"task":{"ttl":60000},`+meta2026+`}}`,
		hdr("tools/call", "report")...)
	if body != taskHandle {
		t.Fatalf("the task handle changed: %s", body)
	}
	_, _, body = post(t, g.url, `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t1",`+meta2026+`}}`, hdr("tasks/result", "t1")...)
	checkTaskResult(t, body)
	status, _, body := post(t, g.url, `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t1",`+meta2026+`}}`, hdr("tasks/result", "t2")...)
	if status != 400 || !strings.Contains(body, `"code":-32020`) {
		t.Fatalf("a task id header that is not the body's: %d %s", status, body)
	}
	_, _, body = post(t, g.url, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"report","arguments":{"order_id":"x"},"task":{},`+meta2026+`}}`,
		hdr("tools/call", "report")...)
	checkTaskRefusal(t, body)
	if n := calls.Load(); n != 1 {
		t.Fatalf("the server ran %d calls, want the valid one", n)
	}
}

const taskHandle = `{"jsonrpc":"2.0","id":2,"result":{"task":{"taskId":"t1","status":"working","createdAt":"2026-01-01T00:00:00Z","ttl":60000}}}`

// taskServer runs a server whose one tool runs as a task and whose task
// result breaks the tool's outputSchema; calls counts its tools/calls.
func taskServer(t *testing.T, calls *atomic.Int32) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "tools/list":
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"tools":[{"name":"report","execution":{"taskSupport":"required"},`+
				`"inputSchema":{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ord_"}},"required":["order_id"]},`+
				`"outputSchema":{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}}]}}`)
		case "tools/call":
			calls.Add(1)
			io.WriteString(w, taskHandle)
		case "tasks/result":
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":"many"}],"structuredContent":{"count":"many"},`+
				`"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t1"}}}}`)
		default:
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{}}`)
		}
	}))
	t.Cleanup(up.Close)
	return up
}

func checkTaskResult(t *testing.T, body string) {
	t.Helper()
	if !strings.Contains(body, `"id":3`) || !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "outputSchema") || strings.Contains(body, `"many"}`) ||
		!strings.Contains(body, `"io.modelcontextprotocol/related-task":{"taskId":"t1"}`) {
		t.Fatalf("tasks/result was not checked: %s", body)
	}
}

func checkTaskRefusal(t *testing.T, body string) {
	t.Helper()
	var refused struct {
		Result json.RawMessage `json:"result"`
		Error  struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Codes    []string `json:"codes"`
				Findings []struct {
					Pointer string `json:"pointer"`
				} `json:"findings"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &refused); err != nil || refused.Result != nil || refused.Error.Code != -32602 ||
		!strings.Contains(refused.Error.Message, "schema_violation at /order_id") ||
		len(refused.Error.Data.Findings) != 1 || refused.Error.Data.Findings[0].Pointer != "/order_id" {
		t.Fatalf("a refused task call: %s", body)
	}
}
