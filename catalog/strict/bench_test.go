package strict

import (
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
	for _, p := range Providers {
		b.Run(p.String(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				Check(p, []byte(benchStrictSchema))
			}
		})
	}
}
