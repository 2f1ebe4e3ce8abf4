package catalog

import (
	"testing"
)

// BenchmarkFixtureValidation validates the load workload's two calls
// against their tools' schemas (testdata/bench-fixture), the validation
// alone, three ways:
//   - text: Tool.ArgsValid on the argument text, as validate.Check judges
//     a call to a tool without provenance or rules (the fixture's);
//   - decoded: Tool.ValidateArgs's fast path on the decoded arguments, as
//     for a tool whose rules need them decoded anyway;
//   - library: jsonschema v6 alone on the decoded arguments, as before the
//     fast path.
func BenchmarkFixtureValidation(b *testing.B) {
	schemas, args := benchFixtureCalls(b)
	raw := benchFixtureArgs(b)
	tools := make([]*Tool, len(schemas))
	for i, sch := range schemas {
		tools[i] = &Tool{Schema: sch, fast: newFastSchema(sch)}
		if tools[i].fast == nil {
			b.Fatalf("the fast path does not take schema %d", i)
		}
	}
	b.Run("text", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, processCPU())
		for b.Loop() {
			for i, t := range tools {
				if ok, err := t.ArgsValid(raw[i]); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, processCPU())
		for b.Loop() {
			for i, t := range tools {
				if err := t.ValidateArgs(args[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, processCPU())
		for b.Loop() {
			for i, sch := range schemas {
				if err := ValidateSchema(sch, args[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
