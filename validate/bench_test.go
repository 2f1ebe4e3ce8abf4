package validate_test

import (
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/validate"
)

// provenanceConfig is one tool with two provenance pointers and two CEL
// rules: the most work Check does for a call that passes.
const provenanceConfig = `
upstreams:
  - url: https://api.example.com
catalog:
  tools:
    - name: issue_refund
      description: Refund part or all of an order.
      parameters:
        type: object
        properties:
          order_id: {type: string, pattern: "^ord_[0-9]+$"}
          customer_id: {type: string}
          amount_cents: {type: integer, minimum: 1}
          reason: {type: string, maxLength: 500}
        required: [order_id, customer_id, amount_cents, reason]
        additionalProperties: false
      provenance: [/order_id, /customer_id]
      rules:
        - expr: "args.amount_cents <= 100000"
          message: refunds above 1000.00 need a person
        - expr: "size(args.reason) > 0 && args.order_id.startsWith('ord_')"
          message: a refund needs a reason and an order id
`

// conversation is the vouching text of a 20-message support conversation:
// user turns in plain text and tool results as JSON, some of it escaped the
// way Python's json.dumps writes non-ASCII, so NewCorpus also decodes them.
// The identifiers the call uses appear only near the end, so Seen scans
// most of the corpus before it finds them.
func conversation() []string {
	texts := make([]string, 0, 20)
	for i := range 18 {
		if i%2 == 0 {
			texts = append(texts, fmt.Sprintf("Hi, this is about my order from last month, number %d in my list. "+
				"The parcel arrived late and one item was damaged; could you have a look at what happened and tell me "+
				"what my options are? I paid with the card ending %04d.", i, 1000+i))
			continue
		}
		texts = append(texts, fmt.Sprintf(`{"orders":[{"id":"ord_%d","status":"delivered","items":[{"sku":"sku_%d","name":"Caf\u00e9 mug","qty":2}],`+
			`"total_cents":%d,"carrier":"dhl","notes":"left at the front door \u2014 signed by neighbour"}],"page":%d}`, 5000+i, 70+i, 1999+i, i))
	}
	texts = append(texts,
		"The order is ord_918273 and my customer number is cus_4411. I'd like a refund for the broken mug please.",
		`{"id":"ord_918273","customer":"cus_4411","status":"delivered","total_cents":4599,"refundable_cents":4599}`,
	)
	return texts
}

// BenchmarkProvenanceRules measures Check on a valid call that goes through
// every stage: lookup, argument decoding, schema, two provenance lookups in
// the request's evidence and two CEL rules.
func BenchmarkProvenanceRules(b *testing.B) {
	cfg, err := catalog.Parse([]byte(provenanceConfig), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	eff := snap.Effective([]catalog.Offered{{Name: "issue_refund"}}, catalog.ToolChoice{Kind: catalog.ChoiceAuto}, true)
	cx := &validate.Context{Effective: eff, Evidence: validate.NewCorpus(conversation())}
	call := validate.ToolCall{ID: "call_1", Name: "issue_refund", Kind: validate.Function,
		Args: []byte(`{"order_id":"ord_918273","customer_id":"cus_4411","amount_cents":4599,"reason":"the mug arrived broken"}`)}
	if v := validate.Check(call, cx); len(v.Findings) != 0 {
		b.Fatalf("the benchmark call must pass, got %+v", v.Findings)
	}
	b.ReportAllocs()
	for b.Loop() {
		v := validate.Check(call, cx)
		if len(v.Findings) != 0 {
			b.Fatal(v.Findings)
		}
	}
}

// BenchmarkNewCorpus measures building the evidence of the same 20-message
// conversation, which every validated request with provenance pays once.
func BenchmarkNewCorpus(b *testing.B) {
	texts := conversation()
	b.ReportAllocs()
	for b.Loop() {
		if validate.NewCorpus(texts) == nil {
			b.Fatal("nil corpus")
		}
	}
}
