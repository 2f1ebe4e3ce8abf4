package anthropic

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// exitTool is the abstain exit as the pipeline offers it.
var exitTool = neutral.Offered{Name: "toolgate_no_suitable_tool", Description: "No tool fits.",
	Parameters: []byte(`{"type":"object","properties":{"reason":{"type":"string"}},"required":["reason"]}`)}

// exitRequest has a client-run Anthropic tool before a function tool, so
// the exit is neither the first call nor among function tools only.
const exitRequest = `{"model":"m","max_tokens":64,"stream":true,"tools":[
 {"type":"bash_20250124","name":"bash"},
 {"name":"get_current_weather","input_schema":{"type":"object"}}],
 "messages":[{"role":"user","content":"Book me a flight"}]}`

// exitAnswer calls bash, the exit and a function tool, in that order.
const exitAnswer = `{"id":"msg_x","type":"message","role":"assistant","content":[
 {"type":"text","text":"Hm."},
 {"type":"tool_use","id":"toolu_bash","name":"bash","input":{"command":"ls"}},
 {"type":"tool_use","id":"toolu_exit","name":"toolgate_no_suitable_tool","input":{"reason":"no booking tool"}},
 {"type":"tool_use","id":"toolu_fn","name":"get_current_weather","input":{}}
],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4}}`

// exitStream is exitAnswer streamed.
var exitStream = streamOf(
	`{"type":"message_start","message":{"id":"msg_x","usage":{"input_tokens":3,"output_tokens":1}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hm."}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_bash","name":"bash","input":{}}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}}`,
	`{"type":"content_block_stop","index":1}`,
	`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_exit","name":"toolgate_no_suitable_tool","input":{}}}`,
	`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"reason\":\"no booking tool\"}"}}`,
	`{"type":"content_block_stop","index":2}`,
	`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_fn","name":"get_current_weather","input":{}}}`,
	`{"type":"content_block_stop","index":3}`,
	`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":4}}`,
	`{"type":"message_stop"}`,
)

// wantExitCalls checks that the calls are the answer's tool_use blocks in
// order, with the exit judged as a function call in its own place.
func wantExitCalls(t *testing.T, where string, calls []neutral.ToolCall) {
	t.Helper()
	want := []struct {
		id   string
		kind neutral.Kind
	}{{"toolu_bash", neutral.Other}, {"toolu_exit", neutral.Function}, {"toolu_fn", neutral.Function}}
	if len(calls) != len(want) {
		t.Fatalf("%s: calls %+v", where, calls)
	}
	for i, w := range want {
		if calls[i].ID != w.id || calls[i].Kind != w.kind {
			t.Errorf("%s: call %d is %s kind %d, want %s kind %d", where, i, calls[i].ID, calls[i].Kind, w.id, w.kind)
		}
	}
	if string(calls[1].Args) != `{"reason":"no booking tool"}` {
		t.Errorf("%s: exit arguments %s", where, calls[1].Args)
	}
}

// After InjectTool the codec's request is the injected one: answers and
// streams read the exit's call as a function call where the model put it,
// and re-queries still offer the exit.
func TestInjectToolThenDecodeAbstainCall(t *testing.T) {
	c, req := mustDecode(t, exitRequest)
	if len(req.Offered) != 1 {
		t.Fatalf("offered %+v", req.Offered)
	}
	body, err := c.InjectTool(exitTool)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.DecodeAnswer([]byte(exitAnswer))
	if err != nil {
		t.Fatal(err)
	}
	wantExitCalls(t, "answer", a.Choices[0].Calls)
	f := feedAll(t, c, exitStream)
	wantExitCalls(t, "stream", f.st.Turns()[0].Calls)

	q := &neutral.Query{Kind: neutral.KindRecovery, Decision: true, History: []neutral.Round{{Turn: a.Choices[0],
		Replies: []neutral.CallReply{{CallID: "toolu_bash", Content: "held"}, {CallID: "toolu_exit", Content: "held"}, {CallID: "toolu_fn", Content: "held"}}}}}
	out, err := c.ReQuery(a, q)
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := jsonx.ParseObject(body)
	got, _ := jsonx.ParseObject(out)
	if !bytes.Equal(got.Get("tools"), sent.Get("tools")) || !bytes.Contains(got.Get("tools"), []byte(`"toolgate_no_suitable_tool"`)) {
		t.Errorf("the re-query does not offer the tools sent upstream: %s", got.Get("tools"))
	}
	if msg := anthCheckPairing(out); msg != "" {
		t.Error(msg)
	}
}

// A request that names one of its Anthropic-defined tools like the exit
// still has the exit judged once it is offered as a function tool.
func TestInjectToolExitOverridesTypedName(t *testing.T) {
	body := strings.Replace(exitRequest, `"name":"bash"}`, `"name":"bash"},{"type":"memory_20250818","name":"toolgate_no_suitable_tool"}`, 1)
	c, _ := mustDecode(t, body)
	if !c.typed[exitTool.Name] {
		t.Fatal("the typed tool was not read")
	}
	if _, err := c.InjectTool(exitTool); err != nil {
		t.Fatal(err)
	}
	a, err := c.DecodeAnswer([]byte(exitAnswer))
	if err != nil {
		t.Fatal(err)
	}
	wantExitCalls(t, "answer", a.Choices[0].Calls)
	wantExitCalls(t, "stream", feedAll(t, c, exitStream).st.Turns()[0].Calls)
}

// A request without a tools array has no place for the exit: InjectTool
// fails and the codec's request stays the client's.
func TestInjectToolWithoutToolsFails(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	c, _ := mustDecode(t, body)
	if out, err := c.InjectTool(exitTool); err == nil {
		t.Fatalf("injected into a request without tools: %s", out)
	}
	if string(c.body) != body {
		t.Errorf("a failed injection changed the request: %s", c.body)
	}
}

// toolgate's own errors come in Anthropic's envelope, typed as Anthropic
// types the status, with toolgate's code beside.
func TestEncodeErrorEnvelope(t *testing.T) {
	for _, tc := range []struct {
		f   neutral.Failure
		typ string
	}{
		{neutral.Failure{Status: 404, Code: "unknown_route", Message: "m", Refusal: true}, "invalid_request_error"},
		{neutral.Failure{Status: 405, Code: "method_not_allowed", Message: "m", Refusal: true}, "invalid_request_error"},
		{neutral.Failure{Status: 415, Code: "unsupported_encoding", Message: "m", Refusal: true}, "invalid_request_error"},
		{neutral.Failure{Status: 400, Code: neutral.CodeRequestRead, Message: "m"}, "invalid_request_error"},
		{neutral.Failure{Status: 401, Code: neutral.CodeAuth, Message: "m"}, "authentication_error"},
		{neutral.Failure{Status: 413, Code: neutral.CodeRequestTooLarge, Message: "m"}, "request_too_large"},
		{neutral.Failure{Status: 408, Code: neutral.CodeRequestTimeout, Message: "m"}, "timeout_error"},
		{neutral.Failure{Status: 504, Code: neutral.CodeUpstreamTimeout, Message: "m", Retryable: true}, "timeout_error"},
		{neutral.Failure{Status: 502, Code: neutral.CodeUpstream, Message: "m", Retryable: true}, "api_error"},
		{neutral.Failure{Status: 500, Code: neutral.CodeInternal, Message: "m"}, "api_error"},
		{neutral.Failure{Status: 503, Code: neutral.CodeUpstream, Message: "m"}, "api_error"},
		{neutral.Failure{Status: 429, Code: "rate_limited", Message: "m"}, "rate_limit_error"},
		{neutral.Failure{Status: 403, Code: "forbidden", Message: "m"}, "permission_error"},
		{neutral.Failure{Status: 529, Code: neutral.CodeUpstream, Message: "m"}, "overloaded_error"},
	} {
		got := string(newCodec().EncodeError(tc.f))
		want := `{"type":"error","error":{"type":"` + tc.typ + `","code":"` + string(tc.f.Code) + `","message":"m"}}`
		if got != want {
			t.Errorf("%d %s:\n got %s\nwant %s", tc.f.Status, tc.f.Code, got, want)
		}
	}
	var env struct {
		Error struct{ Message string } `json:"error"`
	}
	msg := "a \"quoted\"\nline"
	got := newCodec().EncodeError(neutral.Failure{Status: 502, Code: neutral.CodeUpstream, Message: msg})
	if err := json.Unmarshal(got, &env); err != nil || env.Error.Message != msg {
		t.Errorf("message not carried as a JSON string: %s (%v)", got, err)
	}
}
