package validate_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/validate"
)

// semBenchTool is the refund tool of the benchmark; semBenchChecks adds its
// two provenance pointers and two CEL rules. The baseline catalog has the
// same schema without them, so the difference is what the checks cost.
const semBenchTool = `
upstreams:
  - url: https://api.example.com
catalog:
  tools:
    - name: issue_refund
      description: Refund part or all of an order to the original payment method.
      parameters:
        type: object
        properties:
          order_id: {type: string}
          customer_id: {type: string}
          amount_cents: {type: integer, minimum: 1}
          reason: {type: string, maxLength: 500}
        required: [order_id, customer_id, amount_cents, reason]
        additionalProperties: false
`

const semBenchChecks = `      provenance: [/order_id, /customer_id]
      rules:
        - expr: "args.amount_cents <= 100000"
          message: refunds above 1000.00 need a person
        - expr: "size(args.reason) > 0 && args.order_id.startsWith('ord_')"
          message: a refund needs a reason and an order id
`

// semBenchBody is a 20-message support conversation as an agent sends it:
// system prompt, user turns, assistant tool calls with their results (JSON,
// some of it escaped as Python's json.dumps writes it) and assistant text.
// The identifiers the final call uses appear only in later tool results.
func semBenchBody(b *testing.B) []byte {
	b.Helper()
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type tc struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	msg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	calls := func(id, name, args string) map[string]any {
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": []tc{{id, "function", fn{name, args}}}}
	}
	result := func(id, content string) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": id, "content": content}
	}
	msgs := []map[string]any{
		msg("system", "You are the support agent of an online kitchenware shop. Be brief and exact; never invent order numbers."),
		msg("user", "Hi, my name is Zoë Müller. One of the pans I ordered last month arrived with a cracked handle."),
		calls("call_1", "find_customer", `{"email":"zoe.mueller@example.org"}`),
		result("call_1", `{"customer":{"id":"cus_58213","name":"Zo\u00eb M\u00fcller","since":"2019-04-11","tier":"gold"}}`),
		msg("assistant", "Thanks Zoë, I found your account. Which order was it? I can list your recent ones."),
		msg("user", "Please list them, I don't have the number at hand."),
		calls("call_2", "list_orders", `{"customer_id":"cus_58213","limit":5}`),
		result("call_2", `{"orders":[{"id":"ord_90211","placed":"2025-02-27","total_cents":18950,"items":3},{"id":"ord_88710","placed":"2025-01-30","total_cents":4599,"items":1},{"id":"ord_87002","placed":"2024-12-12","total_cents":12900,"items":2},{"id":"ord_85531","placed":"2024-11-02","total_cents":2599,"items":1},{"id":"ord_83199","placed":"2024-09-18","total_cents":32900,"items":4}]}`),
		msg("assistant", "Here are your last five orders: ord_90211 (27 Feb), ord_88710 (30 Jan), ord_87002 (12 Dec), ord_85531 (2 Nov) and ord_83199 (18 Sep). Which one had the pan?"),
		msg("user", "The one from late January, I think. It was a single cast-iron skillet."),
		calls("call_3", "get_order", `{"order_id":"ord_88710"}`),
		result("call_3", `{"id":"ord_88710","status":"delivered","delivered":"2025-02-03","lines":[{"sku":"SKL-CI-28","name":"Cast-iron skillet 28 cm","qty":1,"price_cents":4599}],"payment":{"method":"card","last4":"4242"}}`),
		msg("assistant", "Found it: order ord_88710, a 28 cm cast-iron skillet for 45.99, delivered on 3 February. Do you have a photo of the damage?"),
		msg("user", "Yes, I sent it to your support address yesterday. Can you just refund it? I don't want a replacement."),
		calls("call_4", "get_ticket", `{"customer_id":"cus_58213","channel":"email"}`),
		result("call_4", `{"ticket":{"id":"tkt_3391","subject":"Cracked handle","attachments":1,"note":"Photo shows a clear crack at the handle rivet \u2014 damaged in transit."}}`),
		msg("assistant", "I see the photo on ticket tkt_3391; the crack is clear. I can refund the full 45.99 to the card ending 4242."),
		msg("user", "Yes please, the full amount."),
		msg("assistant", "One moment while I issue the refund."),
		msg("user", "Thanks!"),
	}
	if len(msgs) != 20 {
		b.Fatalf("conversation has %d messages, want 20", len(msgs))
	}
	body, err := json.Marshal(map[string]any{
		"model":    "gpt-4o-2024-08-06",
		"messages": msgs,
		"tools": []map[string]any{{"type": "function", "function": map[string]any{
			"name": "issue_refund", "description": "Refund part or all of an order to the original payment method.",
			"parameters": map[string]any{"type": "object"},
		}}},
		"tool_choice": "auto",
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// semBenchContext compiles a catalog and builds a request context from the
// conversation, the way the proxy does for one request.
func semBenchContext(b *testing.B, yaml string, req *neutral.Request) *validate.Context {
	b.Helper()
	cfg, err := catalog.Parse([]byte(yaml), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return &validate.Context{Effective: snap.Effective(req.Offered, req.Choice, true), Evidence: validate.NewCorpus(req.Vouching)}
}

// BenchmarkProvenanceAndRules20Messages measures validate.Check of a call
// with two provenance pointers and two CEL rules against the evidence of a
// 20-message conversation, next to the same Check without them. The
// "added" sub-benchmark times both in one run and reports the difference
// as added-ns/op (target: under 10 µs).
func BenchmarkProvenanceAndRules20Messages(b *testing.B) {
	body := semBenchBody(b)
	req, err := openaichat.API{}.NewCodec().DecodeRequest("", body)
	if err != nil {
		b.Fatal(err)
	}
	base := semBenchContext(b, semBenchTool, req)
	full := semBenchContext(b, semBenchTool+semBenchChecks, req)
	c := validate.ToolCall{ID: "call_5", Name: "issue_refund", Kind: validate.Function,
		Args: []byte(`{"order_id":"ord_88710","customer_id":"cus_58213","amount_cents":4599,"reason":"Cast-iron skillet arrived with a cracked handle (photo on tkt_3391)."}`)}
	for name, cx := range map[string]*validate.Context{"baseline": base, "provenance+rules": full} {
		if v := validate.Check(c, cx); !v.Valid() || len(v.Findings) != 0 {
			b.Fatalf("%s: the call must pass cleanly, got %+v", name, v.Findings)
		}
	}
	// A call whose identifier is invented must fail, or the benchmark would
	// time a check that vouches for anything.
	bad := c
	bad.Args = []byte(`{"order_id":"ord_88711","customer_id":"cus_58213","amount_cents":4599,"reason":"cracked handle"}`)
	if v := validate.Check(bad, full); v.Valid() {
		b.Fatalf("an invented order id passed")
	}

	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			validate.Check(c, base)
		}
	})
	b.Run("provenance+rules", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			validate.Check(c, full)
		}
	})
	b.Run("added", func(b *testing.B) {
		// Both loops in one run, so the two figures share the machine's
		// state; ns/op here is the pair together.
		start := time.Now()
		for i := 0; i < b.N; i++ {
			validate.Check(c, base)
		}
		baseD := time.Since(start)
		start = time.Now()
		for i := 0; i < b.N; i++ {
			validate.Check(c, full)
		}
		fullD := time.Since(start)
		n := float64(b.N)
		b.ReportMetric(float64(baseD.Nanoseconds())/n, "baseline-ns/op")
		b.ReportMetric(float64(fullD.Nanoseconds())/n, "full-ns/op")
		b.ReportMetric(float64((fullD-baseD).Nanoseconds())/n, "added-ns/op")
	})
	b.Run("parse_request", func(b *testing.B) {
		// For scale: reading the 20-message request and building its
		// evidence, which the proxy does once per request.
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for i := 0; i < b.N; i++ {
			req, err := openaichat.API{}.NewCodec().DecodeRequest("", body)
			if err != nil {
				b.Fatal(err)
			}
			// The proxy builds the corpus from the vouching texts.
			if validate.NewCorpus(req.Vouching) == nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSemantics groups the semantics benchmarks under one name, so
// `go test ./validate -bench Semantics` runs them.
func BenchmarkSemantics(b *testing.B) {
	b.Run("ProvenanceAndRules20Messages", BenchmarkProvenanceAndRules20Messages)
}
