package schema

import (
	"testing"
)

// BenchmarkFixtureValidation validates the load workload's two calls
// against their tools' schemas (testdata/bench-fixture), the validation
// alone, two ways:
//   - text: Fast.ValidObject on the argument text, as validate.Check
//     judges every call to a tool whose schema the fast path takes;
//   - library: jsonschema v6 alone on the decoded arguments, as for a
//     call the fast path does not find valid, and as before the fast path.
func BenchmarkFixtureValidation(b *testing.B) {
	schemas, args := benchFixtureCalls(b)
	raw := benchFixtureArgs(b)
	fast := make([]*Fast, len(schemas))
	for i, sch := range schemas {
		if fast[i] = NewFast(sch); fast[i] == nil {
			b.Fatalf("the fast path does not take schema %d", i)
		}
	}
	b.Run("text", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, processCPU())
		for b.Loop() {
			for i, f := range fast {
				if ok, err := f.ValidObject(raw[i]); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b, processCPU())
		for b.Loop() {
			for i, sch := range schemas {
				if err := Validate(sch, args[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
