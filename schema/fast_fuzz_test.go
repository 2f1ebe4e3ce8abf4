package schema

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FuzzFastSchema is the fast path's differential fuzz target. Each input
// is a schema and an instance as JSON text (seeded with every schema and
// test of the JSON Schema Test Suite, the shared recordings' tool schemas
// and the load workload's calls) and a byte string from which it generates
// a second schema over the keywords the fast path implements, and
// instances for both. Every instance is judged by the fast path and by
// jsonschema v6 under both settings of catalog.formats; any difference
// fails. The seeds run in every `go test`.
func FuzzFastSchema(f *testing.F) {
	i := 0
	groups := suiteGroups(f)
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		for _, g := range groups[name] {
			for _, tc := range g.Tests {
				f.Add([]byte(g.Schema), []byte(tc.Data), seedBytes(i))
				i++
			}
		}
	}
	for _, s := range seedSchemas(f) {
		f.Add(s, []byte(`{}`), seedBytes(i))
		i++
	}
	for _, c := range fixtureSeedCalls(f) {
		f.Add(c[0], c[1], seedBytes(i))
		i++
	}
	f.Fuzz(func(t *testing.T, schema, instance, gen []byte) {
		g := &genSource{b: gen}
		generated := []byte(genRootSchema(g))
		var values []instanceCase
		if v, ok := decodeJSON(instance); ok {
			values = append(values, instanceCase{v, instance})
		}
		for range 4 {
			values = append(values, instanceCase{v: genValue(g, 0)})
		}
		for _, formats := range formatSettings {
			fuzzOne(t, schema, values, formats.name, formats.opt)
			fuzzOne(t, generated, values, formats.name, formats.opt)
		}
	})
}

// instanceCase is an instance decoded, and as text when it came as text.
type instanceCase struct {
	v    any
	text []byte
}

// fuzzOne judges each value against schema, when the fast path takes it.
func fuzzOne(t *testing.T, schema []byte, values []instanceCase, formats string, opt Options) {
	if len(schema) > 1<<14 {
		return
	}
	sch, err := Compile("https://toolgate.invalid/fuzz.json", schema, opt)
	if err != nil {
		return
	}
	fast := NewFast(sch)
	if fast == nil {
		return
	}
	for _, c := range values {
		differential(t, sch, fast, c.v, c.text, "schema "+string(schema)+", formats "+formats+", instance "+jsonText(c.v))
	}
}

func decodeJSON(b []byte) (any, bool) {
	if !json.Valid(b) || len(b) > 1<<14 {
		return nil, false
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return v, err == nil
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

// seedBytes spreads a seed's index over 48 bytes, so each seed also
// generates a different schema.
func seedBytes(i int) []byte {
	out := make([]byte, 48)
	x := uint64(i)*6364136223846793005 + 1442695040888963407
	for j := range out {
		x = x*6364136223846793005 + 1442695040888963407
		out[j] = byte(x >> 56)
	}
	return out
}

// seedSchemas are the shared recordings' tool schemas (testdata/fastpath-seeds).
func seedSchemas(f *testing.F) [][]byte {
	data, err := os.ReadFile(filepath.Join("testdata", "fastpath-seeds", "schemas.json"))
	if err != nil {
		f.Fatal(err)
	}
	var list []struct {
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		f.Fatal(err)
	}
	out := make([][]byte, len(list))
	for i, s := range list {
		out[i] = s.Schema
	}
	return out
}

// fixtureSeedCalls pairs the load workload's schemas with its calls'
// arguments (testdata/bench-fixture).
func fixtureSeedCalls(f *testing.F) [][2][]byte {
	var answer struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	data, err := os.ReadFile(filepath.Join("testdata", "bench-fixture", "answer.json"))
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		f.Fatal(err)
	}
	var out [][2][]byte
	for _, c := range answer.Choices[0].Message.ToolCalls {
		text, err := os.ReadFile(filepath.Join("testdata", "bench-fixture", "schema-"+c.Function.Name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, [2][]byte{text, []byte(c.Function.Arguments)})
	}
	return out
}

// genSource hands out the fuzzer's bytes; past the end it gives zeros.
type genSource struct {
	b []byte
	i int
}

func (g *genSource) pick(n int) int {
	if g.i >= len(g.b) {
		return 0
	}
	c := g.b[g.i]
	g.i++
	return int(c) % n
}

func (g *genSource) from(list []string) string { return list[g.pick(len(list))] }

// Pools the generator draws from: numbers written in every JSON form
// (exponents, trailing zeros, negative zero, beyond 64 bits), strings
// with multi-byte code points and near-misses of the formats, patterns
// for both regexp engines.
var (
	genNumbers = []string{"0", "-0", "1", "-1", "2", "3", "1.0", "1.5", "2.5", "-2.5", "0.1", "0.3", "1e2", "1E-2",
		"10", "100", "2.0e0", "12345678901234567890123", "0.0000001", "-1e-7", "9007199254740993", "1e308", "4.0e-1", "1e400",
		"1e1000001", "-1.5e-1000002", "0e1000001", "0.0e-2000000"}
	genPositive = []string{"1", "2", "0.5", "0.1", "0.01", "3", "1.5", "1e-2", "1e2", "0.3", "7", "2.0",
		"12345678901234567890123", "1e-30", "0.0001"}
	genCounts  = []string{"0", "1", "2", "3", "2.0"}
	genStrings = []string{"", "a", "ab", "abc", "b", "é", "日本", "😀", "a😀", "2024-01-02", "2024-02-30",
		"2024-01-02T03:04:05Z", "2024-01-02T03:04:05+01:00", "03:04:05Z", "a@b.co", "a..b@c", "192.168.0.1",
		"::1", "123e4567-e89b-12d3-a456-426614174000", "example.com", "http://x.y/z", "P1D", "/a/b", "^a$", "[", "x y", "\u0000"}
	genPatterns = []string{"^a", "b$", "^[a-c]*$", `\\d`, "^.{2}$", "é", `^\\w+$`, "(?=a)", `\\p{L}`, "^[^a]*$", "a|b", `\\s`, "^$"}
	genFormats  = []string{"date", "date-time", "time", "email", "ipv4", "ipv6", "hostname", "uri", "uuid", "regex",
		"duration", "json-pointer", "unknown-format"}
	genNames = []string{"a", "b", "c", "d"}
	genTypes = []string{"null", "boolean", "number", "integer", "string", "array", "object"}
	genKeys  = []string{"type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum", "const",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
		"minItems", "maxItems", "minProperties", "maxProperties", "uniqueItems", "pattern", "format",
		"anyOf", "oneOf", "allOf", "not", "$ref", "title", "x-vendor", "additionalItems"}
	genDrafts = []string{"", "", "https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema",
		"http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-04/schema#"}
)

// genRootSchema writes a schema with a draft and one definition that
// "$ref" can name.
func genRootSchema(g *genSource) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{"d":`)
	b.WriteString(genSchema(g, 1))
	b.WriteString(`},"definitions":{"d":`)
	b.WriteString(genSchema(g, 1))
	b.WriteString("}")
	if d := g.from(genDrafts); d != "" {
		b.WriteString(`,"$schema":` + strconv.Quote(d))
	}
	genKeywords(g, &b, 0)
	b.WriteString("}")
	return b.String()
}

const genDepth = 3

func genSchema(g *genSource, depth int) string {
	switch c := g.pick(12); {
	case c == 0:
		return "true"
	case c == 1:
		return "false"
	}
	var b strings.Builder
	b.WriteString(`{"title":"t"`)
	genKeywords(g, &b, depth)
	b.WriteString("}")
	return b.String()
}

// genKeywords appends one to four keywords to an open object.
func genKeywords(g *genSource, b *strings.Builder, depth int) {
	used := map[string]bool{}
	for range 1 + g.pick(4) {
		kw := g.from(genKeys)
		if used[kw] || depth >= genDepth && takesSchemas(kw) {
			continue
		}
		used[kw] = true
		b.WriteString("," + strconv.Quote(kw) + ":")
		b.WriteString(genKeyword(g, kw, depth))
	}
}

func takesSchemas(kw string) bool {
	switch kw {
	case "properties", "additionalProperties", "items", "prefixItems", "anyOf", "oneOf", "allOf", "not", "additionalItems":
		return true
	}
	return false
}

func genKeyword(g *genSource, kw string, depth int) string {
	switch kw {
	case "type":
		if g.pick(3) == 0 {
			return genList(g, 1+g.pick(3), func() string { return strconv.Quote(g.from(genTypes)) })
		}
		return strconv.Quote(g.from(genTypes))
	case "properties":
		var parts []string
		for _, n := range genNames[:1+g.pick(len(genNames))] {
			parts = append(parts, strconv.Quote(n)+":"+genSchema(g, depth+1))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case "required":
		return genList(g, 1+g.pick(3), func() string { return strconv.Quote(g.from(genNames)) })
	case "additionalProperties", "items", "additionalItems":
		if kw != "additionalProperties" && g.pick(4) == 0 {
			return genList(g, 1+g.pick(3), func() string { return genSchema(g, depth+1) })
		}
		return genSchema(g, depth+1)
	case "prefixItems", "anyOf", "oneOf", "allOf":
		return genList(g, 1+g.pick(3), func() string { return genSchema(g, depth+1) })
	case "not":
		return genSchema(g, depth+1)
	case "enum":
		return genList(g, 1+g.pick(4), func() string { return jsonText(genValue(g, 2)) })
	case "const":
		return jsonText(genValue(g, 1))
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		return g.from(genNumbers)
	case "multipleOf":
		return g.from(genPositive)
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
		return g.from(genCounts)
	case "uniqueItems":
		return strconv.FormatBool(g.pick(3) != 0)
	case "pattern":
		return `"` + g.from(genPatterns) + `"`
	case "format":
		return strconv.Quote(g.from(genFormats))
	case "$ref":
		return strconv.Quote([]string{"#", "#/$defs/d", "#/definitions/d"}[g.pick(3)])
	}
	return `{"k":1}`
}

func genList(g *genSource, n int, item func() string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = item()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// genValue generates a decoded instance, numbers as json.Number in the
// pool's spellings.
func genValue(g *genSource, depth int) any {
	c := g.pick(8)
	if depth >= genDepth {
		c %= 5
	}
	switch c {
	case 0:
		return nil
	case 1:
		return g.pick(2) == 0
	case 2:
		return json.Number(g.from(genNumbers))
	case 3, 4:
		return g.from(genStrings)
	case 5:
		arr := make([]any, g.pick(4))
		for i := range arr {
			arr[i] = genValue(g, depth+1)
		}
		return arr
	}
	obj := map[string]any{}
	for range g.pick(5) {
		obj[g.from(genNames)] = genValue(g, depth+1)
	}
	return obj
}

// TestGeneratedSchemasReachFastPath keeps the fuzz target meaningful: the
// generator must write schemas that compile and that the fast path takes,
// with instances it finds valid and invalid.
func TestGeneratedSchemasReachFastPath(t *testing.T) {
	var compiled, taken int
	var seen [3]int
	for i := range 500 {
		g := &genSource{b: seedBytes(i)}
		sch, err := Compile("https://toolgate.invalid/gen.json", []byte(genRootSchema(g)), Options{})
		if err != nil {
			continue
		}
		compiled++
		fast := NewFast(sch)
		if fast == nil {
			continue
		}
		taken++
		for range 4 {
			seen[differential(t, sch, fast, genValue(g, 0), nil, "generated")]++
		}
	}
	t.Logf("500 generated schemas: %d compile, the fast path takes %d; rulings valid %d, invalid %d, undecided %d",
		compiled, taken, seen[valid], seen[invalid], seen[undecided])
	if taken < 100 || seen[valid] < 50 || seen[invalid] < 50 {
		t.Fatalf("the generator reaches the fast path too rarely: %d taken, rulings %v", taken, seen)
	}
}
