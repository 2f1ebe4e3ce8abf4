package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/anthropic"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/gemini"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/proxy/responses"
)

// conformanceCase is one codec's row of the conformance table: recorded
// exchanges (testdata/, see its README) and what its API's wire shapes
// look like to a client. A codec joins the table with one more row; a row
// without a stream skips the stream checks.
type conformanceCase struct {
	name string
	api  api.API
	// path is the route's path less its prefix, as DecodeRequest reads it.
	path string
	// request is a recorded request body that offers tools.
	request string
	tools   []string
	// answer is a recorded whole answer whose first choice calls calls.
	answer string
	calls  []string
	// stream is a recorded streamed answer calling streamCalls; framed
	// names the Content-Type of a stream that is not SSE.
	stream      string
	streamCalls []string
	framed      string
	// envelope reads the API's error shape: the message a client's SDK
	// raises, ok false when body is not that shape.
	envelope func(body []byte) (message string, ok bool)
	// client checks what a client reads of a stream's bytes: that no event
	// came twice and the API's ordering holds.
	client func(t *testing.T, stream []byte)
}

var conformance = []conformanceCase{
	{
		name: "chat", api: openaichat.API{}, request: "chat_request.json",
		tools:  []string{"get_current_weather", "get_stock_price"},
		answer: "chat_tool_call.json", calls: []string{"get_current_weather"},
		stream: "chat_parallel_tool_calls_stream.sse", streamCalls: []string{"get_current_weather", "get_stock_price"},
		envelope: openAIEnvelope, client: chatClient,
	},
	{
		name: "messages", api: anthropic.API{}, request: "messages_request.json",
		tools:  []string{"get_current_weather", "get_stock_price"},
		answer: "messages_tool_use.json", calls: []string{"get_current_weather"},
		stream: "messages_tool_use_stream.sse", streamCalls: []string{"get_current_weather"},
		envelope: anthropicEnvelope, client: messagesClient,
	},
	{
		name: "responses", api: responses.API{}, request: "responses_request.json",
		tools:  []string{"get_current_weather", "get_stock_price"},
		answer: "responses_function_call.json", calls: []string{"get_current_weather"},
		stream: "responses_function_call_stream.sse", streamCalls: []string{"get_current_weather"},
		envelope: openAIEnvelope, client: responsesClient,
	},
	{
		name: "gemini", api: gemini.API{}, path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
		request: "gemini_sse_thought_then_call_gemini-2.5-flash.request.json", tools: []string{"weather"},
		answer: "gemini_generate_thought_and_call_gemini-2.5-flash.json", calls: []string{"weather"},
		stream: "gemini_sse_thought_then_call_gemini-2.5-flash.sse", streamCalls: []string{"weather"},
		envelope: geminiEnvelope, client: geminiSSEClient,
	},
	{
		name: "gemini array", api: gemini.API{}, path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
		request: "gemini_array_thought_then_call_gemini-2.5-flash.request.json", tools: []string{"pelican_name_generator"},
		stream: "gemini_array_thought_then_call_gemini-2.5-flash.json", framed: "application/json",
		streamCalls: []string{"pelican_name_generator"},
		envelope:    geminiEnvelope, client: geminiArrayClient,
	},
}

func TestConformance(t *testing.T) {
	for _, cc := range conformance {
		t.Run(cc.name, func(t *testing.T) {
			t.Run("request", cc.testRequest)
			if cc.answer != "" {
				t.Run("answer", cc.testAnswer)
			}
			t.Run("errors", cc.testErrors)
			if cc.stream != "" {
				t.Run("stream", cc.testStream)
				t.Run("stream error", cc.testStreamError)
			}
		})
	}
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// codec is a new codec that has read the row's request.
func (cc *conformanceCase) codec(t *testing.T) api.Codec {
	t.Helper()
	c := cc.api.NewCodec()
	if _, err := c.DecodeRequest(cc.path, read(t, cc.request)); err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	return c
}

func (cc *conformanceCase) testRequest(t *testing.T) {
	req, err := cc.api.NewCodec().DecodeRequest(cc.path, read(t, cc.request))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range req.Offered {
		names = append(names, o.Name)
		if !json.Valid(o.Parameters) {
			t.Errorf("tool %s: parameters %q", o.Name, o.Parameters)
		}
	}
	if strings.Join(names, ",") != strings.Join(cc.tools, ",") {
		t.Errorf("offered %v, want %v", names, cc.tools)
	}
}

// replacement is the action that gives the first call other arguments,
// keeping its name and id.
func replacement(calls []neutral.ToolCall) neutral.Action {
	act := neutral.Action{Kind: neutral.Replace, Calls: append([]neutral.ToolCall(nil), calls...), Changed: make([]bool, len(calls))}
	act.Calls[0].Args = []byte(`{"conformance":"replaced"}`)
	act.Changed[0] = true
	return act
}

var escalation = &neutral.Escalated{ID: "esc_conformance", Code: "unknown_tool",
	Text: "A person decides this call [toolgate:esc_conformance]", Body: []byte(`{"id":"esc_conformance","code":"unknown_tool"}`)}

func responding() neutral.Action {
	return neutral.Action{Kind: neutral.Respond, Text: escalation.Text, Escalation: escalation}
}

// actionsFor gives every choice after the first act's kind as Keep.
func actionsFor(n int, first neutral.Action) []neutral.Action {
	acts := make([]neutral.Action, n)
	acts[0] = first
	return acts
}

func (cc *conformanceCase) testAnswer(t *testing.T) {
	body := read(t, cc.answer)
	c := cc.codec(t)
	a, err := c.DecodeAnswer(body)
	if err != nil {
		t.Fatal(err)
	}
	calls := a.Choices[0].Calls
	checkNames(t, "decoded", calls, cc.calls)
	for _, call := range calls {
		if !json.Valid(call.Args) {
			t.Errorf("call %s: arguments %q", call.Name, call.Args)
		}
	}
	kept, err := c.EncodeAnswer(a, actionsFor(len(a.Choices), neutral.Action{Kind: neutral.Keep}))
	// The pipeline sends the upstream's bytes when nothing changed; an
	// answer encoded with every choice kept says the same, as JSON.
	if err != nil || compact(t, kept) != compact(t, body) {
		t.Errorf("kept answer differs (%v): %s", err, kept)
	}
	replaced, err := c.EncodeAnswer(a, actionsFor(len(a.Choices), replacement(calls)))
	if err != nil {
		t.Fatal(err)
	}
	again := cc.decode(t, replaced)
	checkReplaced(t, again.Choices[0].Calls, calls)
	responded, err := c.EncodeAnswer(a, actionsFor(len(a.Choices), responding()))
	if err != nil {
		t.Fatal(err)
	}
	if turn := cc.decode(t, responded).Choices[0]; len(turn.Calls) != 0 || !strings.Contains(turn.Text, escalation.Text) {
		t.Errorf("responded answer reads as %d calls and text %q", len(turn.Calls), turn.Text)
	}
}

// decode reads an answer the way a client of the API would, with a codec
// of its own.
func (cc *conformanceCase) decode(t *testing.T, body []byte) *neutral.Answer {
	t.Helper()
	a, err := cc.codec(t).DecodeAnswer(body)
	if err != nil {
		t.Fatalf("written answer unreadable: %v\n%s", err, body)
	}
	return a
}

func checkNames(t *testing.T, what string, calls []neutral.ToolCall, want []string) {
	t.Helper()
	var names []string
	for _, c := range calls {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("%s calls %v, want %v", what, names, want)
	}
}

// checkReplaced holds the calls read back after a replacement to the
// replacement: the first with the new arguments, its name and id kept,
// the others unchanged.
func checkReplaced(t *testing.T, got, orig []neutral.ToolCall) {
	t.Helper()
	if len(got) != len(orig) {
		t.Fatalf("%d calls read back, %d written", len(got), len(orig))
	}
	for i, c := range got {
		want := orig[i]
		if i == 0 {
			want.Args = []byte(`{"conformance":"replaced"}`)
		}
		if c.Name != want.Name || c.ID != want.ID || compact(t, c.Args) != compact(t, want.Args) {
			t.Errorf("call %d read back as %s %s(%s), want %s %s(%s)", i, c.ID, c.Name, c.Args, want.ID, want.Name, want.Args)
		}
	}
}

func compact(t *testing.T, b []byte) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("not JSON: %q", b)
	}
	return out.String()
}

func (cc *conformanceCase) testErrors(t *testing.T) {
	c := cc.codec(t)
	f := neutral.Failure{Status: http.StatusBadGateway, Code: neutral.CodeUpstream, Message: "the upstream went away"}
	if msg, ok := cc.envelope(c.EncodeError(f)); !ok || msg != f.Message {
		t.Errorf("EncodeError: %q is not the API's error carrying the message", c.EncodeError(f))
	}
	body := c.EncodeEscalation(escalation)
	if msg, ok := cc.envelope(body); !ok || msg != escalation.Text || !bytes.Contains(body, []byte(`"esc_conformance"`)) {
		t.Errorf("EncodeEscalation: %q is not the API's error carrying the escalation", body)
	}
}
