package test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// mockRequest is one request the scripted upstream received, as it arrived.
type mockRequest struct {
	N        int
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
}

// mockReply is what the scripted upstream answers. Status 0 means 200.
type mockReply struct {
	Status int
	Body   string
	Header map[string]string
	// Delay holds the answer back; a canceled request ends the wait, so a
	// deadline test does not leave the server busy after toolgate gave up.
	Delay time.Duration
}

// mockUpstream is a scripted stand-in for the OpenAI API. Besides answering
// from its script, it plays the provider's referee for re-queries: any chat
// request whose tool-call pairing OpenAI would refuse gets the same 400 the
// real API sends, and the test fails, since toolgate must never send one.
type mockUpstream struct {
	t   *testing.T
	srv *httptest.Server
	// gzip makes the mock compress answers for clients that accept gzip,
	// as api.openai.com does.
	gzip bool

	mu       sync.Mutex
	reqs     []mockRequest
	rejected []string
	script   func(n int, r *mockRequest) mockReply
}

// newMock answers requests from a queue, one reply per request in order.
// A request beyond the queue fails the test.
func newMock(t *testing.T, replies ...mockReply) *mockUpstream {
	t.Helper()
	return newMockFunc(t, func(n int, _ *mockRequest) mockReply {
		if n > len(replies) {
			t.Errorf("mock upstream: unexpected request #%d (script has %d replies)", n, len(replies))
			return mockReply{Status: http.StatusInternalServerError, Body: openAIError("no scripted reply", "server_error", "", "")}
		}
		return replies[n-1]
	})
}

// newMockFunc answers request n (1-based) with script(n, request).
func newMockFunc(t *testing.T, script func(n int, r *mockRequest) mockReply) *mockUpstream {
	t.Helper()
	m := &mockUpstream{t: t, script: script}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(func() {
		m.srv.Close()
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, r := range m.rejected {
			t.Errorf("mock upstream rejected a request as OpenAI would: %s", r)
		}
	})
	return m
}

// URL is the base URL to configure as the upstream.
func (m *mockUpstream) URL() string { return m.srv.URL }

func (m *mockUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read error", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	req := mockRequest{N: len(m.reqs) + 1, Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body}
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()

	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions") {
		if msg, param := checkChatRequest(body); msg != "" {
			m.mu.Lock()
			m.rejected = append(m.rejected, fmt.Sprintf("request #%d: %s", req.N, msg))
			m.mu.Unlock()
			writeMock(w, r, false, mockReply{Status: http.StatusBadRequest,
				Body: openAIError(msg, "invalid_request_error", param, "")})
			return
		}
	}
	reply := m.script(req.N, &req)
	if reply.Delay > 0 {
		select {
		case <-time.After(reply.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if reply.Header == nil || reply.Header["X-Request-Id"] == "" {
		// Real answers carry a request id; escalations list them.
		w.Header().Set("X-Request-Id", fmt.Sprintf("req_mock_%d", req.N))
	}
	writeMock(w, r, m.gzip, reply)
}

func writeMock(w http.ResponseWriter, r *http.Request, gz bool, reply mockReply) {
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	body := []byte(reply.Body)
	if gz && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// requests returns a copy of everything received so far.
func (m *mockUpstream) requests() []mockRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mockRequest(nil), m.reqs...)
}

// count is the number of requests received.
func (m *mockUpstream) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

// body returns the body of request n (1-based), failing the test if there
// was no such request.
func (m *mockUpstream) body(t *testing.T, n int) []byte {
	t.Helper()
	rs := m.requests()
	if n > len(rs) {
		t.Fatalf("mock upstream got %d requests, want at least %d", len(rs), n)
	}
	return rs[n-1].Body
}

// openAIError is an error body in the shape api.openai.com sends.
func openAIError(msg, typ, param, code string) string {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if param != "" {
		e["param"] = param
	}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

// checkChatRequest applies the message-order rules OpenAI enforces on chat
// requests and returns its error message and param, or "" when the request
// is acceptable. Only what the real API refuses is refused here: an
// assistant message with tool_calls must be followed, before any other
// role, by one tool message for each of its call ids (in any order); a tool
// message must answer a call of the assistant message before it. In the
// legacy form a function message must answer the function_call of the
// assistant message just before it, by that function's name, and the
// request may not offer tools in both forms.
func checkChatRequest(body []byte) (msg, param string) {
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			Name       string `json:"name"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			FunctionCall *struct {
				Name string `json:"name"`
			} `json:"function_call"`
		} `json:"messages"`
		Tools     json.RawMessage `json:"tools"`
		Functions json.RawMessage `json:"functions"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "We could not parse the JSON body of your request.", ""
	}
	if len(req.Tools) > 0 && len(req.Functions) > 0 {
		return "Invalid request: 'tools' and 'functions' cannot both be given.", "functions"
	}
	ms := req.Messages
	for i := 0; i < len(ms); {
		m := ms[i]
		switch {
		case m.Role == "function":
			if i == 0 || ms[i-1].Role != "assistant" || ms[i-1].FunctionCall == nil || ms[i-1].FunctionCall.Name != m.Name {
				return "Invalid parameter: messages with role 'function' must be a response to a preceding message with 'function_call' of the same name.",
					fmt.Sprintf("messages.[%d].role", i)
			}
			i++
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			open := map[string]bool{}
			var order []string
			for _, c := range m.ToolCalls {
				open[c.ID] = true
				order = append(order, c.ID)
			}
			j := i + 1
			for ; j < len(ms) && ms[j].Role == "tool"; j++ {
				if _, ok := open[ms[j].ToolCallID]; !ok {
					return fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", ms[j].ToolCallID),
						fmt.Sprintf("messages.[%d].tool_call_id", j)
				}
				open[ms[j].ToolCallID] = false
			}
			var missing []string
			for _, id := range order {
				if open[id] {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				return "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " +
					strings.Join(missing, ", "), fmt.Sprintf("messages.[%d].role", j)
			}
			i = j
		case m.Role == "tool":
			return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
				fmt.Sprintf("messages.[%d].role", i)
		default:
			i++
		}
	}
	return "", ""
}

// TestMockRejectsWhatOpenAIRejects keeps the referee honest: a mock that
// accepted everything would make every re-query test pass vacuously.
func TestMockRejectsWhatOpenAIRejects(t *testing.T) {
	const asst = `{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]}`
	user := `{"role":"user","content":"hi"}`
	const legacyAsst = `{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}`
	fn := func(name string) string { return `{"role":"function","name":"` + name + `","content":"x"}` }
	tool := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"x"}` }
	body := func(msgs ...string) []byte {
		return []byte(`{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`)
	}
	cases := []struct {
		name   string
		body   []byte
		reject string
	}{
		{"both answered in order", body(user, asst, tool("a"), tool("b")), ""},
		{"both answered out of order", body(user, asst, tool("b"), tool("a")), ""},
		{"both answered then user", body(user, asst, tool("a"), tool("b"), user), ""},
		{"one call unanswered", body(user, asst, tool("a")), "did not have response messages: b"},
		{"user before the tool messages", body(user, asst, user, tool("a"), tool("b")), "did not have response messages: a, b"},
		{"tool answers a call that does not exist", body(user, asst, tool("a"), tool("b"), tool("c")), "'tool_call_id' of 'c' not found"},
		{"tool message without a preceding call", body(user, tool("a")), "must be a response to a preceeding message"},
		{"not JSON", []byte(`{`), "could not parse"},
		{"function message answering its function_call", body(user, legacyAsst, fn("f"), user), ""},
		{"function message with no function_call", body(user, fn("f")), "must be a response to a preceding message with 'function_call'"},
		{"function message answering another function", body(user, legacyAsst, fn("g")), "must be a response to a preceding message with 'function_call'"},
		{"function message after a tool call", body(user, asst, tool("a"), tool("b"), fn("f")), "must be a response to a preceding message with 'function_call'"},
		{"tools and functions", []byte(`{"model":"m","messages":[],"tools":[],"functions":[]}`), "cannot both be given"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg, _ := checkChatRequest(c.body)
			if c.reject == "" && msg != "" {
				t.Fatalf("rejected an acceptable request: %s", msg)
			}
			if c.reject != "" && !strings.Contains(msg, c.reject) {
				t.Fatalf("got %q, want a rejection containing %q", msg, c.reject)
			}
		})
	}
}
