package schema

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
	for _, c := range benchFixtureAnswer(b) {
		text, err := os.ReadFile(filepath.Join("testdata", "bench-fixture", "schema-"+c.name+".json"))
		if err != nil {
			b.Fatal(err)
		}
		sch, err := Compile("https://toolgate.invalid/"+c.name+".json", text, Options{})
		if err != nil {
			b.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.args))
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

// benchFixtureArgs are the argument texts of the workload's two calls.
func benchFixtureArgs(b *testing.B) [][]byte {
	var out [][]byte
	for _, c := range benchFixtureAnswer(b) {
		out = append(out, c.args)
	}
	return out
}

type fixtureCall struct {
	name string
	args []byte
}

// benchFixtureAnswer reads the tool calls of the workload's answer.
func benchFixtureAnswer(b *testing.B) []fixtureCall {
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
	var out []fixtureCall
	for _, c := range answer.Choices[0].Message.ToolCalls {
		out = append(out, fixtureCall{c.Function.Name, []byte(c.Function.Arguments)})
	}
	return out
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
			start := processCPU()
			for b.Loop() {
				for i, sch := range schemas {
					if err := Validate(sch, args[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportCPU(b, start)
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
