package catalog

import "testing"

// BenchmarkFixtureValidation validates the load workload's two calls (the
// fixture answer's arguments, decoded) against their tools' schemas, the
// way Tool.ValidateArgs does: by the fast path, and by jsonschema v6 alone
// for comparison. Decoding the arguments is not included.
func BenchmarkFixtureValidation(b *testing.B) {
	schemas, args := benchFixtureCalls(b)
	fast := make([]*fastSchema, len(schemas))
	for i, sch := range schemas {
		if fast[i] = newFastSchema(sch); fast[i] == nil {
			b.Fatalf("the fast path does not take schema %d", i)
		}
	}
	for _, name := range []string{"fast_path", "library"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for i, sch := range schemas {
					f := fast[i]
					if name == "library" {
						f = nil
					}
					if err := validateWith(sch, f, args[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
