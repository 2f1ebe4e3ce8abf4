package test

// Chat Completions' legacy form through openai-go: functions offered,
// message.function_call and delta.function_call answered. Such calls are
// judged, repaired, escalated, held and counted like tool_calls, and what
// the client gets stays in the legacy shape. Helpers are prefixed lc.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// lcJSON is s as a JSON string.
func lcJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// lcAnswer is a chat.completion whose one call is a function_call.
func lcAnswer(id, name, args string) string {
	return `{"id":"` + id + `","object":"chat.completion","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":null,"function_call":{"name":` + lcJSON(name) + `,"arguments":` + lcJSON(args) + `},"refusal":null},` +
		`"logprobs":null,"finish_reason":"function_call"}],"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60},"system_fingerprint":"fp_mock"}`
}

// lcStream is the same call streamed as OpenAI streams it: the name in the
// first delta, the arguments in three fragments, finish_reason
// function_call, then [DONE].
func lcStream(id, name, args string) string {
	chunk := func(delta, finish string) string {
		return `data: {"id":"` + id + `","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06",` +
			`"system_fingerprint":"fp_mock","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	out := chunk(`{"role":"assistant","content":null,"function_call":{"name":`+lcJSON(name)+`,"arguments":""},"refusal":null}`, "null")
	cut := []int{0, len(args) / 3, 2 * len(args) / 3, len(args)}
	for i := 0; i < 3; i++ {
		out += chunk(`{"function_call":{"arguments":`+lcJSON(args[cut[i]:cut[i+1]])+`}}`, "null")
	}
	return out + chunk(`{}`, `"function_call"`) + "data: [DONE]\n\n"
}

// lcReply answers with the call plain, or streamed when the request asked
// for a stream.
func lcReply(r *mockRequest, id, name, args string) mockReply {
	if lcStreamed(r.Body) {
		return mockReply{Body: lcStream(id, name, args), Header: map[string]string{"Content-Type": "text/event-stream"}}
	}
	return mockReply{Body: lcAnswer(id, name, args)}
}

func lcStreamed(body []byte) bool {
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	return req.Stream
}

// lcFunction is one entry of a request's functions.
func lcFunction(t *testing.T, name, desc string, params json.RawMessage) openai.ChatCompletionNewParamsFunction {
	t.Helper()
	var p shared.FunctionParameters
	if err := json.Unmarshal(params, &p); err != nil {
		t.Fatal(err)
	}
	return openai.ChatCompletionNewParamsFunction{Name: name, Description: openai.String(desc), Parameters: p}
}

// lcParams asks the fixtures' question offering the fixtures' tools as
// functions, function_call auto.
func lcParams(t *testing.T, question string) openai.ChatCompletionNewParams {
	t.Helper()
	p := openai.ChatCompletionNewParams{Model: "gpt-4o-2024-08-06",
		Messages:     []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		FunctionCall: openai.ChatCompletionNewParamsFunctionCallUnion{OfFunctionCallMode: openai.String("auto")}}
	for _, ft := range fixtureTools(t) {
		p.Functions = append(p.Functions, lcFunction(t, ft.Name, ft.Description, ft.Parameters))
	}
	return p
}

// lcResult is what the SDK made of one answer, and the answer's bytes.
type lcResult struct {
	name, args string
	// toolCalls counts calls the client got in the tool_calls form.
	toolCalls int
	content   string
	finish    string
	err       error
	status    int
	header    http.Header
	raw       []byte
}

// lcSend makes one call through openai-go, plain or streamed, and reads
// the function_call the way an agent on the legacy form does.
func lcSend(t *testing.T, base string, stream bool, params openai.ChatCompletionNewParams, h map[string]string) lcResult {
	t.Helper()
	w := &wire{}
	opts := []option.RequestOption{option.WithBaseURL(base + "/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: w})}
	for k, v := range h {
		opts = append(opts, option.WithHeader(k, v))
	}
	c := openai.NewClient(opts...)
	ctx, cancel := ctx20()
	defer cancel()
	var r lcResult
	if !stream {
		resp, err := c.Chat.Completions.New(ctx, params)
		r.err = err
		if err == nil && len(resp.Choices) > 0 {
			m := resp.Choices[0].Message
			r.name, r.args, r.toolCalls, r.finish = m.FunctionCall.Name, m.FunctionCall.Arguments, len(m.ToolCalls), resp.Choices[0].FinishReason
			r.content = m.Content
		}
	} else {
		s := c.Chat.Completions.NewStreaming(ctx, params)
		for s.Next() {
			for _, ch := range s.Current().Choices {
				r.name += ch.Delta.FunctionCall.Name
				r.args += ch.Delta.FunctionCall.Arguments
				r.toolCalls += len(ch.Delta.ToolCalls)
				r.content += ch.Delta.Content
				if ch.FinishReason != "" {
					r.finish = ch.FinishReason
				}
			}
		}
		r.err = s.Err()
		s.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r.status, r.header, r.raw = w.status, w.header, append([]byte(nil), w.raw.Bytes()...)
	return r
}

// lcReleased checks that the client got exactly the call name(args), in
// the legacy shape only, with no synthetic id on the wire.
func lcReleased(t *testing.T, r lcResult, name, args string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("call failed: %v; body %s", r.err, r.raw)
	}
	if r.name != name || !sameJSON(r.args, args) || r.toolCalls != 0 || r.finish != "function_call" {
		t.Fatalf("client got function_call %s(%s), %d tool calls, finish %q; want %s(%s) alone; body %s",
			r.name, r.args, r.toolCalls, r.finish, name, args, r.raw)
	}
	if bytes.Contains(r.raw, []byte(`"tool_calls"`)) || bytes.Contains(r.raw, []byte(`"id":"function_call`)) {
		t.Errorf("the answer left the legacy shape: %s", r.raw)
	}
}

// lcRefused checks a 422 escalation with code and that no call of any
// form reached the client.
func lcRefused(t *testing.T, r lcResult, code string) escalationError {
	t.Helper()
	var ae *openai.Error
	if !errors.As(r.err, &ae) || ae.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("want a 422 escalation, got %v; body %s", r.err, r.raw)
	}
	var e escalationError
	if err := json.Unmarshal([]byte(ae.RawJSON()), &e); err != nil {
		t.Fatalf("escalation %s: %v", ae.RawJSON(), err)
	}
	if e.Code != code || e.Type != "tool_call_escalation" || r.header.Get("X-Toolgate-Escalation-Id") != e.Escalation.ID {
		t.Errorf("escalation %s, want code %s", ae.RawJSON(), code)
	}
	if r.name != "" || bytes.Contains(r.raw, []byte(`"function_call":{`)) {
		t.Errorf("a refused call reached the client: %s", r.raw)
	}
	return e
}

// lcCheckRequery checks a re-query of a legacy request: functions and the
// client's messages byte for byte, no tools or tool_choice added, the
// model's function_call replayed and answered by a function message
// naming it; function_call none for a decision, as sent otherwise. It
// returns the function message's content.
func lcCheckRequery(t *testing.T, orig, rq []byte, decision bool, name, args string) string {
	t.Helper()
	var o, q map[string]json.RawMessage
	if json.Unmarshal(orig, &o) != nil || json.Unmarshal(rq, &q) != nil {
		t.Fatalf("requests are not JSON:\n%s\n%s", orig, rq)
	}
	if !bytes.Equal(o["functions"], q["functions"]) || len(q["functions"]) == 0 {
		t.Errorf("re-query functions %s, want %s", q["functions"], o["functions"])
	}
	for _, k := range []string{"tools", "tool_choice", "stream_options"} {
		if _, ok := q[k]; ok {
			t.Errorf("re-query carries %s", k)
		}
	}
	if s, ok := q["stream"]; ok && string(s) != "false" {
		t.Errorf("re-query stream %s", s)
	}
	wantFC := string(o["function_call"])
	if decision {
		wantFC = `"none"`
	}
	if string(q["function_call"]) != wantFC {
		t.Errorf("re-query function_call %s, want %s", q["function_call"], wantFC)
	}
	var om, qm []json.RawMessage
	_ = json.Unmarshal(o["messages"], &om)
	_ = json.Unmarshal(q["messages"], &qm)
	if len(qm) != len(om)+2 {
		t.Fatalf("re-query has %d messages, want the client's %d and two:\n%s", len(qm), len(om), q["messages"])
	}
	for i := range om {
		if !bytes.Equal(om[i], qm[i]) {
			t.Errorf("message %d rewritten: %s", i, qm[i])
		}
	}
	var asst struct {
		Role         string          `json:"role"`
		ToolCalls    json.RawMessage `json:"tool_calls"`
		FunctionCall struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function_call"`
	}
	_ = json.Unmarshal(qm[len(om)], &asst)
	if asst.Role != "assistant" || asst.FunctionCall.Name != name || asst.FunctionCall.Arguments != args || asst.ToolCalls != nil {
		t.Errorf("replayed turn %s, want the model's function_call %s(%s)", qm[len(om)], name, args)
	}
	var fn map[string]json.RawMessage
	_ = json.Unmarshal(qm[len(om)+1], &fn)
	var content string
	_ = json.Unmarshal(fn["content"], &content)
	if string(fn["role"]) != `"function"` || string(fn["name"]) != lcJSON(name) || fn["tool_call_id"] != nil || content == "" {
		t.Errorf("the call is answered by %s, want a function message naming %s", qm[len(om)+1], name)
	}
	return content
}

// TestLegacyCallsJudged: through openai-go, plain and streamed, a valid
// function_call goes out as the upstream's bytes; an invented function is
// substituted or escalated; bad arguments are reprompted, or escalated
// when they stay bad; every repair is written back as a function_call.
func TestLegacyCallsJudged(t *testing.T) {
	const question = "What's the weather like in Boston today?"
	inv := func(r *mockRequest) mockReply { return lcReply(r, "chatcmpl-l1", invented.Name, invented.Args) }
	bad := func(r *mockRequest) mockReply { return lcReply(r, "chatcmpl-l1", badUnit.Name, badUnit.Args) }
	for _, stream := range []bool{false, true} {
		mode := map[bool]string{false: "plain", true: "stream"}[stream]
		t.Run(mode+"/valid", func(t *testing.T) {
			var sent string
			m := newMockFunc(t, func(_ int, r *mockRequest) mockReply {
				reply := lcReply(r, "chatcmpl-l1", weather.Name, weatherArgs)
				sent = reply.Body
				return reply
			})
			g := weatherGate(t, m, "")
			r := lcSend(t, g.URL, stream, lcParams(t, question), nil)
			lcReleased(t, r, weather.Name, weatherArgs)
			if string(r.raw) != sent {
				t.Errorf("a valid legacy call is not the upstream's bytes:\n got  %s\n want %s", r.raw, sent)
			}
			lcOutcome(t, r, stream, "pass")
			expectCount(t, m, 1)
		})
		t.Run(mode+"/invented substituted", func(t *testing.T) {
			m := newMock(t)
			m.script = lcScript(inv, fixed(substitute(weather.Name, weatherArgs, 0.9)))
			g := weatherGate(t, m, "")
			r := lcSend(t, g.URL, stream, lcParams(t, question), nil)
			lcReleased(t, r, weather.Name, weatherArgs)
			lcOutcome(t, r, stream, "substituted")
			expectCount(t, m, 2)
			lcCheckRequery(t, m.body(t, 1), m.body(t, 2), true, invented.Name, invented.Args)
		})
		t.Run(mode+"/invented escalated", func(t *testing.T) {
			m := newMock(t)
			m.script = lcScript(inv, fixed(escalate("no such report", "weather report", "weather reports", 0.2)))
			g := weatherGate(t, m, "")
			e := lcRefused(t, lcSend(t, g.URL, stream, lcParams(t, question), nil), "unknown_tool")
			if recs := g.Sink.records(); len(recs) != 1 || recs[0].Escalation.ID != e.Escalation.ID {
				t.Errorf("sink records %+v", recs)
			}
			expectCount(t, m, 2)
		})
		t.Run(mode+"/invented escalated in message mode", func(t *testing.T) {
			m := newMock(t)
			m.script = lcScript(inv, fixed(escalate("no such report", "weather report", "weather reports", 0.2)))
			g := weatherGate(t, m, "escalation:\n  mode: message\n")
			r := lcSend(t, g.URL, stream, lcParams(t, question), nil)
			id := r.header.Get("X-Toolgate-Escalation-Id")
			if r.err != nil || !strings.HasPrefix(id, "esc_") || !strings.HasSuffix(r.content, "[toolgate:"+id+"]") || r.finish != "stop" {
				t.Fatalf("want the escalation as text, got %v, content %q, finish %q; body %s", r.err, r.content, r.finish, r.raw)
			}
			if r.name != "" || r.toolCalls != 0 || bytes.Contains(r.raw, []byte(`"function_call":{`)) {
				t.Errorf("a call reached the client beside the escalation: %s", r.raw)
			}
		})
		t.Run(mode+"/arguments reprompted", func(t *testing.T) {
			m := newMock(t)
			m.script = lcScript(bad, fixed(mockReply{Body: lcAnswer("chatcmpl-l2", weather.Name, weatherArgs)}))
			g := weatherGate(t, m, "")
			r := lcSend(t, g.URL, stream, lcParams(t, question), nil)
			lcReleased(t, r, weather.Name, weatherArgs)
			lcOutcome(t, r, stream, "reprompted")
			expectCount(t, m, 2)
			if msg := lcCheckRequery(t, m.body(t, 1), m.body(t, 2), false, badUnit.Name, badUnit.Args); !strings.Contains(msg, "/unit") {
				t.Errorf("the reprompt %q does not name /unit", msg)
			}
		})
		t.Run(mode+"/arguments stay bad", func(t *testing.T) {
			m := newMock(t)
			m.script = lcScript(bad, fixed(mockReply{Body: lcAnswer("chatcmpl-l2", weather.Name, `{"location":"Boston, MA","unit":"rankine"}`)}))
			g := weatherGate(t, m, "")
			lcRefused(t, lcSend(t, g.URL, stream, lcParams(t, question), nil), "schema_violation")
			expectCount(t, m, 2)
		})
	}
}

// lcOutcome checks X-Toolgate-Outcome of a plain answer; a stream's
// headers go out before its outcome is known.
func lcOutcome(t *testing.T, r lcResult, stream bool, want string) {
	t.Helper()
	if got := r.header.Get("X-Toolgate-Outcome"); !stream && got != want {
		t.Errorf("outcome %q, want %q", got, want)
	}
}

// sameJSONObject compares a JSON value with want as values.
func sameJSONObject(got json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && reflect.DeepEqual(a, b)
}

// lcScript answers request n with the nth step; one more fails the test.
func lcScript(steps ...func(*mockRequest) mockReply) func(int, *mockRequest) mockReply {
	return func(n int, r *mockRequest) mockReply {
		if n > len(steps) {
			return mockReply{Status: http.StatusInternalServerError, Body: openAIError("no scripted reply", "server_error", "", "")}
		}
		return steps[n-1](r)
	}
}

func fixed(reply mockReply) func(*mockRequest) mockReply {
	return func(*mockRequest) mockReply { return reply }
}

// TestLegacyFunctionCallNarrows: function_call {"name"} narrows the
// offered functions as tool_choice does, and "none" offers nothing.
func TestLegacyFunctionCallNarrows(t *testing.T) {
	for _, c := range []struct {
		name   string
		choice openai.ChatCompletionNewParamsFunctionCallUnion
		code   string
	}{
		{"named another", openai.ChatCompletionNewParamsFunctionCallUnion{OfFunctionCallOption: &openai.ChatCompletionFunctionCallOptionParam{Name: stock.Name}}, "tool_not_offered"},
		{"none", openai.ChatCompletionNewParamsFunctionCallUnion{OfFunctionCallMode: openai.String("none")}, "no_tools_offered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMock(t)
			m.script = lcScript(func(r *mockRequest) mockReply { return lcReply(r, "chatcmpl-l1", weather.Name, weatherArgs) },
				fixed(escalate("not offered", "weather", "weather", 0.1)))
			g := weatherGate(t, m, "")
			p := lcParams(t, "What's the weather like in Boston today?")
			p.FunctionCall = c.choice
			lcRefused(t, lcSend(t, g.URL, false, p, nil), c.code)
		})
	}
}

// TestLegacyConfirmHeldAndReleased: a function_call to a policy: confirm
// tool is held, plain and streamed; once approved the resume releases it
// exactly once, in the legacy shape, with no upstream request.
func TestLegacyConfirmHeldAndReleased(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			up, n := lcRefundUpstream(t)
			g := startApprovalGate(t, t.TempDir(), refundConfig(up.URL, "  store: memory\n", 100000, "operator"))
			p := openai.ChatCompletionNewParams{Model: "gpt-4o",
				Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question(false))},
				Functions: []openai.ChatCompletionNewParamsFunction{lcFunction(t, "issue_refund", "Refund an order", json.RawMessage(`{"type":"object"}`))}}
			p.Functions[0].Parameters = refundSchemaMap()

			first := lcSend(t, g.url(), stream, p, nil)
			e := lcRefused(t, first, "confirmation_required")
			if e.Escalation.Approval == nil || !strings.HasPrefix(e.Escalation.Approval.ID, "apr_") {
				t.Fatalf("no approval ticket: %s", first.raw)
			}
			// The escalation names the held call in its own shape, with no id.
			if !sameJSONObject(e.Escalation.Call, `{"name":"issue_refund","arguments":`+lcJSON(refundArgs)+`}`) {
				t.Errorf("escalation call %s", e.Escalation.Call)
			}
			id := e.Escalation.Approval.ID
			if st := g.decide(id, "approve"); st != http.StatusOK {
				t.Fatalf("approve: %d", st)
			}
			r := lcSend(t, g.url(), stream, p, resumeWith(id))
			lcReleased(t, r, "issue_refund", refundArgs)
			if r.header.Get("X-Toolgate-Outcome") != "approved" || r.header.Get("X-Toolgate-Upstream-Calls") != "0" {
				t.Errorf("outcome %q upstream calls %q", r.header.Get("X-Toolgate-Outcome"), r.header.Get("X-Toolgate-Upstream-Calls"))
			}
			again := lcSend(t, g.url(), stream, p, resumeWith(id))
			if again.status != http.StatusConflict || again.name != "" {
				t.Errorf("a second resume: %d, released %q; body %s", again.status, again.name, again.raw)
			}
			if got := n.Load(); got != 1 {
				t.Errorf("%d upstream requests, want 1", got)
			}
		})
	}
}

// lcRefundUpstream answers every request with the model's function_call
// to issue_refund, plain or streamed, and counts the requests.
func lcRefundUpstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		body, _ := io.ReadAll(r.Body)
		reply := lcReply(&mockRequest{Body: body}, "chatcmpl-r1", "issue_refund", refundArgs)
		w.Header().Set("Content-Type", "application/json")
		for k, v := range reply.Header {
			w.Header().Set(k, v)
		}
		_, _ = io.WriteString(w, reply.Body)
	}))
	t.Cleanup(up.Close)
	return up, &n
}

// TestNodeSDKLegacy drives the legacy form with the openai npm package:
// a valid call byte for byte, an invented function substituted and
// escalated, bad arguments reprompted and escalated, plain and streamed;
// and a confirm call held, approved and released once, plain and
// streamed.
func TestNodeSDKLegacy(t *testing.T) {
	node := needNode(t, "openai")
	t.Run("judge", func(t *testing.T) {
		var first string
		inv := func(r *mockRequest) mockReply { return lcReply(r, "chatcmpl-i", invented.Name, invented.Args) }
		bad := func(r *mockRequest) mockReply { return lcReply(r, "chatcmpl-b", badUnit.Name, badUnit.Args) }
		valid := func(r *mockRequest) mockReply { return lcReply(r, "chatcmpl-v", weather.Name, weatherArgs) }
		m := newMock(t)
		m.script = lcScript(
			func(r *mockRequest) mockReply { reply := valid(r); first = reply.Body; return reply },
			valid,
			inv, fixed(substitute(weather.Name, weatherArgs, 0.9)),
			inv, fixed(escalate("no such report", "weather report", "weather reports", 0.2)),
			bad, fixed(mockReply{Body: lcAnswer("chatcmpl-b2", weather.Name, weatherArgs)}),
			bad, fixed(mockReply{Body: lcAnswer("chatcmpl-b3", weather.Name, `{"location":"Boston, MA","unit":"rankine"}`)}),
		)
		g := weatherGate(t, m, "")
		lines := lcNodeLines(t, runNode(t, node, "legacy.mjs", 60*time.Second, "TOOLGATE_BASE_URL="+g.URL, "LEGACY_MODE=judge"), 6)

		var raw struct{ Raw, Outcome string }
		_ = json.Unmarshal(lines[0], &raw)
		if raw.Raw != first || raw.Outcome != "pass" {
			t.Errorf("a valid call is not the upstream's bytes: %s", lines[0])
		}
		lcNodeCall(t, lines[1], weather.Name, weatherArgs, "")
		lcNodeCall(t, lines[2], weather.Name, weatherArgs, "substituted")
		lcNodeRefused(t, lines[3], "unknown_tool")
		lcNodeCall(t, lines[4], weather.Name, weatherArgs, "reprompted")
		lcNodeRefused(t, lines[5], "schema_violation")
		expectCount(t, m, 10)
		lcCheckRequery(t, m.body(t, 3), m.body(t, 4), true, invented.Name, invented.Args)
		lcCheckRequery(t, m.body(t, 5), m.body(t, 6), true, invented.Name, invented.Args)
		lcCheckRequery(t, m.body(t, 7), m.body(t, 8), false, badUnit.Name, badUnit.Args)
	})
	t.Run("confirm", func(t *testing.T) {
		up, n := lcRefundUpstream(t)
		g := startApprovalGate(t, t.TempDir(), refundConfig(up.URL, "  store: memory\n", 100000, "operator"))
		lines := lcNodeLines(t, runNode(t, node, "legacy.mjs", 60*time.Second, "TOOLGATE_BASE_URL="+g.url(),
			"TOOLGATE_ADMIN_URL=http://"+g.app.AdminAddr(), "LEGACY_MODE=confirm"), 8)
		for i := 0; i < 2; i++ {
			held := lcNodeRefused(t, lines[4*i], "confirmation_required")
			if !strings.HasPrefix(held.Approval, "apr_") {
				t.Errorf("no approval: %s", lines[4*i])
			}
			if string(lines[4*i+1]) != `{"decided":200}` {
				t.Errorf("approval: %s", lines[4*i+1])
			}
			outcome := "approved"
			if i == 1 {
				outcome = ""
			}
			lcNodeCall(t, lines[4*i+2], "issue_refund", refundArgs, outcome)
			if got := lcNodeRefused(t, lines[4*i+3], ""); got.Status != http.StatusConflict {
				t.Errorf("a second resume: %s", lines[4*i+3])
			}
		}
		if got := n.Load(); got != 2 {
			t.Errorf("%d upstream requests, want one per hold", got)
		}
	})
}

// lcNodeLines splits the script's output into its want JSON lines.
func lcNodeLines(t *testing.T, stdout []byte, want int) []json.RawMessage {
	t.Helper()
	var lines []json.RawMessage
	for _, l := range bytes.Split(bytes.TrimSpace(stdout), []byte("\n")) {
		lines = append(lines, json.RawMessage(l))
	}
	if len(lines) != want {
		t.Fatalf("want %d result lines, got %d:\n%s", want, len(lines), stdout)
	}
	return lines
}

// lcNodeCall checks a line of a released call: name(args) as a
// function_call alone; outcome, when given, is the plain answer's.
func lcNodeCall(t *testing.T, line json.RawMessage, name, args, outcome string) {
	t.Helper()
	var got struct {
		FunctionCall *struct{ Name, Arguments string } `json:"function_call"`
		ToolCalls    int                               `json:"tool_calls"`
		Finish       string                            `json:"finish"`
		Outcome      *string                           `json:"outcome"`
	}
	if err := json.Unmarshal(line, &got); err != nil || got.FunctionCall == nil {
		t.Errorf("no function_call in %s", line)
		return
	}
	if got.FunctionCall.Name != name || !sameJSON(got.FunctionCall.Arguments, args) || got.ToolCalls != 0 || got.Finish != "function_call" {
		t.Errorf("got %s, want the function_call %s(%s) alone", line, name, args)
	}
	if outcome != "" && (got.Outcome == nil || *got.Outcome != outcome) {
		t.Errorf("got %s, want outcome %s", line, outcome)
	}
}

// lcNodeResult is a line of a refused call as the SDK's APIError says it.
type lcNodeResult struct {
	Status       int    `json:"status"`
	Code         string `json:"code"`
	EscalationID string `json:"escalation_id"`
	Approval     string `json:"approval"`
	Error        string `json:"error"`
}

// lcNodeRefused checks a line of an escalation with code (any code when
// empty).
func lcNodeRefused(t *testing.T, line json.RawMessage, code string) lcNodeResult {
	t.Helper()
	var got lcNodeResult
	if err := json.Unmarshal(line, &got); err != nil || got.Error != "" {
		t.Errorf("want a refusal, got %s", line)
		return got
	}
	if code != "" && (got.Status != http.StatusUnprocessableEntity || got.Code != code || !strings.HasPrefix(got.EscalationID, "esc_")) {
		t.Errorf("got %s, want a 422 escalation %s", line, code)
	}
	return got
}

// TestLegacyMetrics: legacy calls count in toolgate_tool_calls_total and
// the other call metrics as tool calls do.
func TestLegacyMetrics(t *testing.T) {
	m := newMock(t)
	m.script = lcScript(
		func(r *mockRequest) mockReply { return lcReply(r, "chatcmpl-1", weather.Name, weatherArgs) },
		func(r *mockRequest) mockReply { return lcReply(r, "chatcmpl-2", invented.Name, invented.Args) },
		fixed(substitute(weather.Name, weatherArgs, 0.9)),
		func(r *mockRequest) mockReply { return lcReply(r, "chatcmpl-3", badUnit.Name, badUnit.Args) },
		fixed(mockReply{Body: lcAnswer("chatcmpl-3b", weather.Name, weatherArgs)}),
	)
	g := weatherGate(t, m, "")
	// The first is streamed: its outcome is counted, not sent as a header.
	for i, want := range []string{"pass", "substituted", "reprompted"} {
		r := lcSend(t, g.URL, i == 0, lcParams(t, "What's the weather like in Boston today?"), nil)
		if r.err != nil {
			t.Fatalf("request %d: %v", i+1, r.err)
		}
		lcOutcome(t, r, i == 0, want)
	}
	metrics := scrape(t, g)
	const labels = `api="chat",catalog_version="fixtures-v1",`
	expectMetric(t, metrics, `toolgate_tool_calls_total{`+labels+`result="valid",tool="get_current_weather"}`, 1)
	expectMetric(t, metrics, `toolgate_tool_calls_total{`+labels+`result="unknown_tool",tool="_unknown"}`, 1)
	expectMetric(t, metrics, `toolgate_tool_calls_total{`+labels+`result="schema_violation",tool="get_current_weather"}`, 1)
	expectMetric(t, metrics, `toolgate_hallucinations_total{api="chat",catalog_version="fixtures-v1"}`, 1)
	expectMetric(t, metrics, `toolgate_requests_total{api="chat",outcome="pass"}`, 1)
	expectMetric(t, metrics, `toolgate_requests_total{api="chat",outcome="substituted"}`, 1)
	expectMetric(t, metrics, `toolgate_requests_total{api="chat",outcome="reprompted"}`, 1)
}

// TestLegacyTwoFormsRefused: what cannot be judged as one is refused and
// not passed: an answer carrying calls in both forms, and any call
// answering a request that offers tools in both forms.
func TestLegacyTwoFormsRefused(t *testing.T) {
	both := strings.Replace(lcAnswer("chatcmpl-b", weather.Name, weatherArgs), `"content":null,`,
		`"content":null,"tool_calls":[{"id":"call_s","type":"function","function":{"name":"get_stock_price","arguments":`+lcJSON(stockArgs)+`}}],`, 1)
	mixedReq := `{"model":"gpt-4o","messages":[{"role":"user","content":"weather?"}],` +
		`"tools":[{"type":"function","function":{"name":"get_stock_price","parameters":{"type":"object"}}}],` +
		`"functions":[{"name":"get_current_weather","parameters":{"type":"object"}}]}`
	for _, c := range []struct {
		name, req, answer string
	}{
		{"answer in both forms", `{"model":"gpt-4o","messages":[{"role":"user","content":"weather?"}],"functions":[{"name":"get_current_weather"}]}`, both},
		{"request in both forms", mixedReq, lcAnswer("chatcmpl-m", weather.Name, weatherArgs)},
		{"request in both forms, streamed", strings.Replace(mixedReq, `"model"`, `"stream":true,"model"`, 1), lcStream("chatcmpl-m", weather.Name, weatherArgs)},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A lax server that answers whatever it is sent: the mock's
			// referee would refuse the mixed request, as OpenAI does.
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(c.answer, "data:") {
					w.Header().Set("Content-Type", "text/event-stream")
				}
				_, _ = io.WriteString(w, c.answer)
			}))
			t.Cleanup(up.Close)
			g := startGate(t, "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: lax\n    url: "+up.URL+"\n"+catalogYAML(t, ""))
			status, _, body, err := postRaw(g.URL+"/v1/chat/completions", c.req, map[string]string{"Authorization": "Bearer sk-test"})
			if err != nil {
				t.Fatal(err)
			}
			if status == http.StatusOK && !bytes.Contains(body, []byte(`"error"`)) || bytes.Contains(body, []byte(`"function_call":{`)) {
				t.Fatalf("an unjudgeable call was passed: %d %s", status, body)
			}
			// A whole answer is refused as mixing the forms; in a stream the
			// call's first chunk is an event toolgate cannot read.
			why := "mixes tools with the legacy functions form"
			if strings.HasPrefix(c.answer, "data:") {
				why = "stream event toolgate cannot read"
			}
			if status != http.StatusBadGateway || !bytes.Contains(body, []byte(why)) {
				t.Errorf("got %d %s, want a 502 saying %q", status, body, why)
			}
		})
	}
}
