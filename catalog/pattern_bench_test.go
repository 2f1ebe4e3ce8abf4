package catalog

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// benchFixtureCalls are the two calls of the load workload's answer with
// their tools' schemas (testdata/bench-fixture, copied from the shared
// bench fixture), compiled and decoded ready to validate.
func benchFixtureCalls(b *testing.B) (schemas []*jsonschema.Schema, args []any) {
	b.Helper()
	var answer struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	data, err := os.ReadFile(filepath.Join("testdata", "bench-fixture", "answer.json"))
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		b.Fatal(err)
	}
	for _, c := range answer.Choices[0].Message.ToolCalls {
		text, err := os.ReadFile(filepath.Join("testdata", "bench-fixture", "schema-"+c.Function.Name+".json"))
		if err != nil {
			b.Fatal(err)
		}
		sch, err := compileSchema("https://toolgate.invalid/"+c.Function.Name+".json", text, schemaOptions{formats: FormatsAssert})
		if err != nil {
			b.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(c.Function.Arguments)))
		if err != nil {
			b.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			b.Fatalf("the fixture call must pass: %v", err)
		}
		schemas, args = append(schemas, sch), append(args, v)
	}
	return schemas, args
}

// BenchmarkFixturePatterns validates the workload's two calls with the
// RE2 fast path taken where it is safe (every pattern of these schemas)
// and with every pattern on regexp2, to show what the fast path saves.
func BenchmarkFixturePatterns(b *testing.B) {
	for _, fast := range []bool{true, false} {
		b.Run(engineName(fast), func(b *testing.B) {
			setFastPath(b, fast)
			schemas, args := benchFixtureCalls(b)
			b.ReportAllocs()
			for b.Loop() {
				for i, sch := range schemas {
					if err := ValidateSchema(sch, args[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkFixturePatternMatch matches only the fixture's pattern values,
// one engine at a time, where the difference is not diluted by the rest
// of validation.
func BenchmarkFixturePatternMatch(b *testing.B) {
	pairs := [][2]string{
		{`^[A-Za-z_]+/[A-Za-z_]+$`, "Europe/Berlin"},
		{`^[A-Z]{3}$`, "BER"}, {`^[A-Z]{3}$`, "SFO"}, {`^[A-Z]{3}$`, "EUR"},
		{`^[A-Z0-9]{2}$`, "LH"}, {`^[A-Z0-9]{2}$`, "UA"}, {`^[A-Z0-9]{2}$`, "LX"},
	}
	for _, fast := range []bool{true, false} {
		b.Run(engineName(fast), func(b *testing.B) {
			setFastPath(b, fast)
			res := make([]jsonschema.Regexp, len(pairs))
			for i, p := range pairs {
				re, err := compilePattern(p[0])
				if err != nil {
					b.Fatal(err)
				}
				res[i] = re
			}
			b.ReportAllocs()
			for b.Loop() {
				for i, re := range res {
					if !re.MatchString(pairs[i][1]) {
						b.Fatal("no match")
					}
				}
			}
		})
	}
}
