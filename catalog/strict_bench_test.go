package catalog

import (
	"strconv"
	"testing"
)

// benchStrictSchema is a schema of the size agents send: a few typed
// fields, an enum, a nested object and an array of objects.
const benchStrictSchema = `{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ord_[a-z0-9]+$"},` +
	`"amount_cents":{"type":"integer","minimum":1},"currency":{"type":"string","enum":["EUR","USD","GBP"]},` +
	`"address":{"type":"object","properties":{"street":{"type":"string"},"zip":{"type":["string","null"]}},"required":["street","zip"],"additionalProperties":false},` +
	`"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}},"required":["sku","qty"],"additionalProperties":false}}},` +
	`"required":["order_id","amount_cents","currency","address","items"],"additionalProperties":false}`

// BenchmarkCheckStrict is the check of one schema not seen before.
func BenchmarkCheckStrict(b *testing.B) {
	for _, p := range StrictProviders {
		b.Run(p.String(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				CheckStrict(p, []byte(benchStrictSchema))
			}
		})
	}
}

// BenchmarkPlanStrict is what a request with ten tools pays once their
// schemas are known: the plan, from the snapshot's cache.
func BenchmarkPlanStrict(b *testing.B) {
	c, err := Parse([]byte(minimalYAML+"catalog:\n  strict: auto\n"), "config.yaml")
	if err != nil {
		b.Fatal(err)
	}
	s, err := Compile(c, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tools := make([]StrictTool, 10)
	for i := range tools {
		tools[i] = StrictTool{Name: "t" + strconv.Itoa(i), Schema: []byte(benchStrictSchema)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.PlanStrict(StrictOpenAI, tools, false)
	}
}
