package catalog_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/catalog"
)

// reloadConfig writes a config with n tools shaped like a real catalog:
// every tool has an object schema with a few typed, constrained properties;
// every other tool names a provenance pointer and every third carries a CEL
// rule, so a reload pays for schema and rule compilation as it would in
// production.
func reloadConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:8080\nadmin_listen: 127.0.0.1:9091\n")
	b.WriteString("upstreams:\n  - name: openai\n    url: https://api.example.com\n")
	b.WriteString("catalog:\n  version: bench\n  tools:\n")
	for i := range n {
		fmt.Fprintf(&b, "    - name: tool_%02d\n", i)
		fmt.Fprintf(&b, "      description: Tool number %d looks up or changes one record of kind %d.\n", i, i%5)
		b.WriteString("      parameters:\n")
		b.WriteString("        type: object\n")
		b.WriteString("        properties:\n")
		b.WriteString("          record_id: {type: string, pattern: \"^rec_[0-9a-z]+$\", description: The record to act on.}\n")
		b.WriteString("          amount_cents: {type: integer, minimum: 0, maximum: 10000000}\n")
		b.WriteString("          currency: {type: string, enum: [usd, eur, gbp, jpy]}\n")
		b.WriteString("          tags: {type: array, items: {type: string, maxLength: 64}, maxItems: 16}\n")
		b.WriteString("          note: {type: string, maxLength: 2000}\n")
		b.WriteString("        required: [record_id]\n")
		b.WriteString("        additionalProperties: false\n")
		if i%2 == 0 {
			b.WriteString("      provenance: [/record_id]\n")
		}
		if i%3 == 0 {
			b.WriteString("      rules:\n")
			b.WriteString("        - expr: \"!has(args.amount_cents) || args.amount_cents <= 100000\"\n")
			b.WriteString("          message: amounts above 1000.00 need a person\n")
		}
	}
	return []byte(b.String())
}

// BenchmarkConfigReload measures what a reload costs before the swap:
// parsing and validating the file, then compiling every schema and rule.
func BenchmarkConfigReload(b *testing.B) {
	data := reloadConfig(20)
	dir := b.TempDir()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		cfg, err := catalog.Parse(data, "config.yaml")
		if err != nil {
			b.Fatal(err)
		}
		snap, err := catalog.Compile(cfg, dir)
		if err != nil {
			b.Fatal(err)
		}
		if len(snap.Tools) != 20 {
			b.Fatalf("compiled %d tools, want 20", len(snap.Tools))
		}
	}
}
