package test

// Rules that read the conversation and the request's context, end to end
// through each official SDK: the refund example of the shipped config.yaml
// on Chat Completions, Messages and Responses, plain and streamed.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// The conversation every seed request carries: two orders looked up in
// parallel, the second owned by another customer.
const (
	seedOrder1 = `{"order_id":"ord_1","customer_id":"c_1","total_cents":4000,"refunded_cents":1500}`
	seedOrder9 = `{"order_id":"ord_9","customer_id":"c_2","total_cents":9000,"refunded_cents":0}`
	seedAsk    = "Refund order ord_1, ord_9 or ord_5 as I say."
)

// seedCall is one call of a scripted answer: id, tool, arguments.
type seedCall [3]string

// seedCase is one refund scenario: what the model answers first and, when
// re-asked, second; what the reprompt must say and how it ends.
type seedCase struct {
	name          string
	first, second seedCall
	// reason is the text the reprompt must carry; "" means no reprompt.
	reason string
	// want is the call the client gets, or nothing when escalated.
	want     *seedCall
	escalate bool
}

var seedCases = []seedCase{
	{name: "over the refundable balance", first: seedCall{"call_r1", "issue_refund", `{"order_id":"ord_1","amount_cents":3000}`},
		second: seedCall{"call_r2", "issue_refund", `{"order_id":"ord_1","amount_cents":2000}`},
		reason: "amount exceeds the refundable balance", want: &seedCall{"call_r1", "issue_refund", `{"order_id":"ord_1","amount_cents":2000}`}},
	{name: "another customer's order", first: seedCall{"call_r1", "issue_refund", `{"order_id":"ord_9","amount_cents":500}`},
		second: seedCall{"call_r2", "issue_refund", `{"order_id":"ord_9","amount_cents":400}`},
		reason: "the order belongs to another customer", escalate: true},
	{name: "order never looked up", first: seedCall{"call_r1", "issue_refund", `{"order_id":"ord_5","amount_cents":100}`},
		second: seedCall{"call_r2", "get_order", `{"order_id":"ord_5"}`},
		reason: "order not loaded; call get_order first", want: &seedCall{"call_r1", "get_order", `{"order_id":"ord_5"}`}},
	{name: "within the balance", first: seedCall{"call_r1", "issue_refund", `{"order_id":"ord_1","amount_cents":2000}`},
		want: &seedCall{"call_r1", "issue_refund", `{"order_id":"ord_1","amount_cents":2000}`}},
}

// seedGate starts toolgate with the get_order and issue_refund tools and
// the catalog.context of the shipped config.yaml, so the example the
// docs/checks.md shows is the one tested.
func seedGate(t *testing.T, upstreamURL string, extra func(*catalog.Config)) *gate {
	t.Helper()
	cfg, err := catalog.LoadConfig("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Upstreams = []catalog.Upstream{{Name: "mock", URL: upstreamURL}}
	cfg.Catalog.Tools = slices.DeleteFunc(cfg.Catalog.Tools, func(tc catalog.ToolConfig) bool {
		return tc.Name != "get_order" && tc.Name != "issue_refund"
	})
	if len(cfg.Catalog.Tools) != 2 || cfg.Catalog.Context["customer_id"].Header != "X-Customer-Id" {
		t.Fatalf("config.yaml no longer holds the refund example: %+v", cfg.Catalog)
	}
	if extra != nil {
		extra(cfg)
	}
	g, _ := startGateConfig(t, cfg, "..", app.Options{Sink: &recordingSink{}})
	return g
}

// seedSchemas are the two tools as each SDK offers them.
var seedSchemas = map[string]map[string]any{
	"get_order": {"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []string{"order_id"}},
	"issue_refund": {"type": "object", "properties": map[string]any{
		"order_id": map[string]any{"type": "string"}, "amount_cents": map[string]any{"type": "integer"}}, "required": []string{"order_id", "amount_cents"}},
}

// seedOutcome is what a client ended with.
type seedOutcome struct {
	calls []seedCall
	err   error
}

// seedSent is one request the upstream received.
type seedSent struct {
	body   string
	header http.Header
}

// checkSeed checks one scenario's outcome against the upstream requests.
func checkSeed(t *testing.T, tc seedCase, g *gate, got seedOutcome, sent []seedSent) {
	t.Helper()
	var upstream []string
	for i, r := range sent {
		upstream = append(upstream, r.body)
		if r.header.Get("X-Customer-Id") != "" {
			t.Errorf("upstream request %d carries X-Customer-Id", i+1)
		}
	}
	wantCalls := 1
	if tc.reason != "" {
		wantCalls = 2
	}
	if len(upstream) != wantCalls {
		t.Fatalf("%d upstream requests, want %d", len(upstream), wantCalls)
	}
	if tc.reason != "" && !strings.Contains(upstream[1], tc.reason) {
		t.Errorf("the reprompt does not say %q:\n%s", tc.reason, upstream[1])
	}
	for _, body := range upstream {
		if strings.Contains(strings.ToLower(body), "x-customer-id") {
			t.Errorf("the context header reached the upstream body")
		}
	}
	if tc.escalate {
		if got.err == nil || len(got.calls) != 0 {
			t.Fatalf("want an escalation, got calls %v err %v", got.calls, got.err)
		}
		recs := g.Sink.records()
		if len(recs) != 1 {
			t.Fatalf("%d escalations recorded, want 1", len(recs))
		}
		e := recs[0].Escalation
		if e.Codes[0] != "rule_violation" {
			t.Errorf("codes %v", e.Codes)
		}
		found := false
		for _, a := range e.Attempts {
			for _, f := range a.Findings {
				found = found || (f.Code == "rule_violation" && f.Message == tc.reason)
			}
		}
		if !found {
			t.Errorf("the escalation does not carry the rule's message: %+v", e.Attempts)
		}
		return
	}
	if got.err != nil {
		t.Fatalf("client error: %v", got.err)
	}
	if len(got.calls) != 1 || got.calls[0][0] != tc.want[0] || got.calls[0][1] != tc.want[1] || !sameJSON(got.calls[0][2], tc.want[2]) {
		t.Fatalf("client got %v, want %v", got.calls, *tc.want)
	}
	if n := len(g.Sink.records()); n != 0 {
		t.Errorf("%d escalations recorded", n)
	}
}

// answerFor picks the scripted answer of request n.
func (tc seedCase) answerFor(n int) seedCall {
	if n == 1 {
		return tc.first
	}
	return tc.second
}

func seedModes(t *testing.T, f func(t *testing.T, tc seedCase, stream bool)) {
	for _, tc := range seedCases {
		for _, stream := range []bool{false, true} {
			name := tc.name + "/plain"
			if stream {
				name = tc.name + "/stream"
			}
			t.Run(name, func(t *testing.T) { f(t, tc, stream) })
		}
	}
}

func TestSeedRefundChat(t *testing.T) {
	seedModes(t, func(t *testing.T, tc seedCase, stream bool) {
		m := newMockFunc(t, func(n int, r *mockRequest) mockReply {
			c := tc.answerFor(n)
			if strings.Contains(string(r.Body), `"stream":true`) {
				return mockReply{Body: strings.Join(fuCallEvents(c[0], c[1], c[2]), ""), Header: map[string]string{"Content-Type": "text/event-stream"}}
			}
			return mockReply{Body: csCompletion("", c)}
		})
		g := seedGate(t, m.URL(), nil)
		fn := func(name string) openai.ChatCompletionToolUnionParam {
			return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Parameters: seedSchemas[name]})
		}
		call := func(id, args string) openai.ChatCompletionMessageToolCallUnionParam {
			return openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_order", Arguments: args}}}
		}
		params := openai.ChatCompletionNewParams{
			Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("Look up ord_1 and ord_9."),
				{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{
					call("call_g1", `{"order_id":"ord_1"}`), call("call_g9", `{"order_id":"ord_9"}`)}}},
				// Answered out of order, as an agent running both at once may.
				openai.ToolMessage(seedOrder9, "call_g9"),
				openai.ToolMessage(seedOrder1, "call_g1"),
				openai.UserMessage(seedAsk),
			},
			Tools: []openai.ChatCompletionToolUnionParam{fn("get_order"), fn("issue_refund")},
		}
		client := csClient(t, g.URL, option.WithHeader("X-Customer-Id", "c_1"))
		var got seedOutcome
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if stream {
			s := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			got.err = s.Err()
			for _, c := range csCalls(acc) {
				got.calls = append(got.calls, seedCall{c.ID, c.Function.Name, c.Function.Arguments})
			}
		} else {
			resp, err := client.Chat.Completions.New(ctx, params)
			got.err = err
			if err == nil {
				for _, c := range resp.Choices[0].Message.ToolCalls {
					got.calls = append(got.calls, seedCall{c.ID, c.Function.Name, c.Function.Arguments})
				}
			}
		}
		var sent []seedSent
		for _, r := range m.requests() {
			sent = append(sent, seedSent{string(r.Body), r.Header})
		}
		checkSeed(t, tc, g, got, sent)
	})
}

func TestSeedRefundMessages(t *testing.T) {
	seedModes(t, func(t *testing.T, tc seedCase, stream bool) {
		u := newAnthUpstream(t, func(n int, r *anthRequest) anthReply {
			c := tc.answerFor(n)
			return anthAnswer(t, r, anthMsg("msg_"+c[0], "tool_use", anthToolUse(c[0], c[1], c[2])))
		})
		g := seedGate(t, u.srv.URL, nil)
		tool := func(name string) anthropic.ToolUnionParam {
			s := seedSchemas[name]
			return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name,
				InputSchema: anthropic.ToolInputSchemaParam{Properties: s["properties"], Required: s["required"].([]string)}}}
		}
		params := anthropic.MessageNewParams{
			Model:     "claude-sonnet-4-5-20250929",
			MaxTokens: 1024,
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock("Look up ord_1 and ord_9.")),
				anthropic.NewAssistantMessage(
					anthropic.NewToolUseBlock("toolu_g1", map[string]any{"order_id": "ord_1"}, "get_order"),
					anthropic.NewToolUseBlock("toolu_g9", map[string]any{"order_id": "ord_9"}, "get_order")),
				anthropic.NewUserMessage(
					anthropic.NewToolResultBlock("toolu_g1", seedOrder1, false),
					anthropic.NewToolResultBlock("toolu_g9", seedOrder9, false),
					anthropic.NewTextBlock(seedAsk)),
			},
			Tools: []anthropic.ToolUnionParam{tool("get_order"), tool("issue_refund")},
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		client := anthropic.NewClient(anthoption.WithBaseURL(g.URL), anthoption.WithAPIKey("sk-ant-client"),
			anthoption.WithMaxRetries(0), anthoption.WithHeader("X-Customer-Id", "c_1"))
		var got seedOutcome
		var msg anthropic.Message
		if stream {
			s := client.Messages.NewStreaming(ctx, params)
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			got.err = s.Err()
		} else {
			m, err := client.Messages.New(ctx, params)
			got.err = err
			if m != nil {
				msg = *m
			}
		}
		if got.err == nil {
			for _, c := range anthToolUses(t, msg) {
				got.calls = append(got.calls, seedCall(c))
			}
		}
		var sent []seedSent
		for _, r := range u.requests() {
			sent = append(sent, seedSent{string(r.Body), r.Header})
		}
		checkSeed(t, tc, g, got, sent)
	})
}

func TestSeedRefundResponses(t *testing.T) {
	seedModes(t, func(t *testing.T, tc seedCase, stream bool) {
		if tc.want != nil && tc.reason != "" {
			// Stored by default: a repaired call carries the ids of the
			// stored answer that holds it, the reprompt's (docs/apis.md).
			w := *tc.want
			w[0] = tc.second[0]
			tc.want = &w
		}
		m := newRespMock(t, func(n int, r *respReq) respAnswer {
			c := tc.answerFor(n)
			return respAnswer{Items: []string{respCall("fc_"+c[0], c[0], c[1], c[2])}}
		})
		g := seedGate(t, m.srv.URL, nil)
		fn := func(name string) responses.ToolUnionParam {
			return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: name, Parameters: seedSchemas[name], Strict: openai.Bool(false)}}
		}
		output := func(id, out string) responses.ResponseInputItemUnionParam {
			it := responses.ResponseInputItemParamOfFunctionCallOutput(out)
			it.OfFunctionCallOutput.CallID = openai.String(id)
			return it
		}
		params := responses.ResponseNewParams{
			Model: "gpt-5",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("Look up ord_1 and ord_9.", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfFunctionCall(`{"order_id":"ord_1"}`, "call_g1", "get_order"),
				responses.ResponseInputItemParamOfFunctionCall(`{"order_id":"ord_9"}`, "call_g9", "get_order"),
				output("call_g9", seedOrder9),
				output("call_g1", seedOrder1),
				responses.ResponseInputItemParamOfMessage(seedAsk, responses.EasyInputMessageRoleUser),
			}},
			Tools: []responses.ToolUnionParam{fn("get_order"), fn("issue_refund")},
		}
		client := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0),
			option.WithHeader("X-Customer-Id", "c_1"))
		out, _, _, err := respRun(t, client, params, stream)
		got := seedOutcome{err: err}
		if err == nil && len(out.Escalation) > 0 && string(out.Escalation) != "null" {
			got.err = errSeedEscalated
		}
		if got.err == nil {
			for i := range out.Output {
				if it := out.item(t, i); it.Type == "function_call" {
					got.calls = append(got.calls, seedCall{it.CallID, it.Name, it.Arguments})
				}
			}
		}
		var sent []seedSent
		for _, r := range m.requests() {
			sent = append(sent, seedSent{body: string(r.Body)})
		}
		checkSeed(t, tc, g, got, sent)
	})
}

// errSeedEscalated stands for an escalation a client got inside an answer.
var errSeedEscalated = &json.UnsupportedValueError{Str: "escalated"}

// The context header never reaches the upstream, on a validated route or
// a passed-through one.
func TestContextHeaderNeverForwarded(t *testing.T) {
	m := newMock(t, mockReply{Body: csCompletion("hi")}, mockReply{Body: `{"data":[]}`})
	g := seedGate(t, m.URL(), nil)
	for _, path := range []string{"/v1/chat/completions", "/v1/models"} {
		req, _ := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Customer-Id", "c_1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	reqs := m.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	for _, r := range reqs {
		if v := r.Header.Values("X-Customer-Id"); len(v) != 0 {
			t.Errorf("%s forwarded X-Customer-Id %v", r.Path, v)
		}
	}
}

// Without the context header the customer rule cannot hold: it fails
// closed, and the reprompt names the missing value.
func TestSeedRefundWithoutContext(t *testing.T) {
	refund := seedCall{"call_r1", "issue_refund", `{"order_id":"ord_1","amount_cents":2000}`}
	m := newMock(t, mockReply{Body: csCompletion("", refund)}, mockReply{Body: csCompletion("", refund)})
	g := seedGate(t, m.URL(), nil)
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"refund ord_1"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_g1","type":"function","function":{"name":"get_order","arguments":"{\"order_id\":\"ord_1\"}"}}]},
		{"role":"tool","tool_call_id":"call_g1","content":` + string(jsonString(seedOrder1)) + `}],
		"tools":[{"type":"function","function":{"name":"issue_refund","parameters":{"type":"object"}}}]}`
	r := fuPost(t, g.URL, "/v1/chat/completions", []byte(body))
	if r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want an escalation: %s", r.Status, r.Body)
	}
	// Both bodies are JSON, so the quotes around the name are escaped.
	const want = `context value \"customer_id\" is missing, so the rule cannot hold: the order belongs to another customer`
	if !strings.Contains(string(m.body(t, 2)), want) || !strings.Contains(string(r.Body), want) {
		t.Fatalf("reprompt %s\nescalation %s", m.body(t, 2), r.Body)
	}
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
