package validate_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/validate"
)

// loadWays compiles one tool named "t" with schema the three ways a schema
// reaches toolgate: catalog.tools, catalog.files, and a request's tools.
// extra holds more catalog: keys, one per line.
func loadWays(t *testing.T, schema, extra string) map[string]*catalog.Effective {
	t.Helper()
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(schema)); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	schema = compact.String()
	head := "upstreams:\n  - url: https://api.example.com\ncatalog:\n"
	for _, l := range strings.Split(strings.TrimSpace(extra), "\n") {
		if l != "" {
			head += "  " + strings.TrimSpace(l) + "\n"
		}
	}
	offered := []catalog.Offered{{Name: "t", Parameters: json.RawMessage(schema)}}
	out := map[string]*catalog.Effective{}

	snap := compileTestSnapshot(t, head+"  tools:\n    - name: t\n      parameters: "+schema+"\n")
	out["catalog.tools"] = snap.Effective(offered, catalog.ToolChoice{}, true)

	dir := t.TempDir()
	file := `[{"type":"function","function":{"name":"t","parameters":` + schema + `}}]`
	if err := os.WriteFile(filepath.Join(dir, "tools.json"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := catalog.Parse([]byte(head+"  files: [tools.json]\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fsnap, err := catalog.Compile(cfg, dir)
	if err != nil {
		t.Fatalf("catalog.files: %v", err)
	}
	out["catalog.files"] = fsnap.Effective(offered, catalog.ToolChoice{}, true)

	rsnap := compileTestSnapshot(t, head)
	eff := rsnap.Effective(offered, catalog.ToolChoice{}, true)
	if tool, _, _ := eff.Lookup("t"); tool == nil || tool.SchemaError != nil {
		t.Fatalf("request tools: schema does not compile: %v", tool.SchemaError)
	}
	out["request tools"] = eff
	return out
}

// expectReport checks one call on every way of loading: no finding when
// ptr is "-", else one schema_violation at ptr with keyword kw.
func expectReport(t *testing.T, ways map[string]*catalog.Effective, args, ptr, kw string) {
	t.Helper()
	for way, eff := range ways {
		v := validate.Check(fnCall("t", args), &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil)})
		if ptr == "-" {
			if len(v.Findings) != 0 {
				t.Errorf("%s: %s: findings %+v, want none", way, args, v.Findings)
			}
			continue
		}
		if len(v.Findings) == 0 {
			t.Errorf("%s: %s passes, want %s at %q", way, args, kw, ptr)
			continue
		}
		hit := false
		for _, f := range v.Findings {
			if f.Code == validate.SchemaViolation && f.Pointer == ptr && f.Keyword == kw {
				hit = true
			}
		}
		if !hit {
			t.Errorf("%s: %s: findings %+v, want schema_violation %s at %q", way, args, v.Findings, kw, ptr)
		}
	}
}

// TestFormats: catalog.formats assert checks each format; annotate lets
// every value through; both on the three ways of loading a schema, and on
// a draft-07 schema too (which asserts formats by default).
func TestFormats(t *testing.T) {
	cases := []struct{ format, valid, invalid string }{
		{"date-time", "2026-03-01T09:30:00Z", "2026-13-45T09:30:00Z"},
		{"date", "2026-02-28", "2026-02-30"},
		{"email", "ana@example.com", "ana.example.com"},
		{"uuid", "3f2c1b9e-8d4a-4c6b-9e1f-2a7b5c8d0e4f", "3f2c1b9e-8d4a-4c6b-9e1f"},
		{"uri", "https://example.com/a?b=c", "not a uri"},
		{"ipv4", "192.168.0.1", "192.168.0.256"},
	}
	for _, draft := range []string{"", `"$schema":"http://json-schema.org/draft-07/schema#",`} {
		for _, c := range cases {
			schema := `{` + draft + `"type":"object","properties":{"v":{"type":"string","format":"` + c.format + `"}}}`
			name := c.format
			if draft != "" {
				name += " draft-07"
			}
			t.Run(name+" assert", func(t *testing.T) {
				ways := loadWays(t, schema, "")
				expectReport(t, ways, `{"v":"`+c.valid+`"}`, "-", "")
				expectReport(t, ways, `{"v":"`+c.invalid+`"}`, "/v", "format")
			})
			t.Run(name+" annotate", func(t *testing.T) {
				ways := loadWays(t, schema, "formats: annotate")
				expectReport(t, ways, `{"v":"`+c.valid+`"}`, "-", "")
				expectReport(t, ways, `{"v":"`+c.invalid+`"}`, "-", "")
			})
		}
	}
}

// TestFormatsRegexUnderAnnotate: draft-07 asserts format regex even under
// annotate (the schema library always checks it), as docs/checks.md says;
// 2020-12 does not.
func TestFormatsRegexUnderAnnotate(t *testing.T) {
	d7 := loadWays(t, `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"re":{"format":"regex"}}}`, "formats: annotate")
	expectReport(t, d7, `{"re":"^a(?=b)"}`, "-", "")
	expectReport(t, d7, `{"re":"(unclosed"}`, "/re", "format")
	d2020 := loadWays(t, `{"properties":{"re":{"format":"regex"}}}`, "formats: annotate")
	expectReport(t, d2020, `{"re":"(unclosed"}`, "-", "")
	assert := loadWays(t, `{"properties":{"re":{"format":"regex"}}}`, "")
	expectReport(t, assert, `{"re":"(?<=\\$)\\d+"}`, "-", "")
	expectReport(t, assert, `{"re":"(unclosed"}`, "/re", "format")
}

// TestZodEmailEveryWay: Zod's email pattern, lookaheads and all, compiles
// from catalog.tools, catalog.files and a request's tools and judges
// addresses as Zod does.
func TestZodEmailEveryWay(t *testing.T) {
	pattern := `^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$`
	ways := loadWays(t, `{"type":"object","properties":{"email":{"type":"string","pattern":"`+pattern+`"}},"required":["email"]}`, "")
	for _, ok := range []string{"a@b.co", "o'neil+x@mail.example.org"} {
		expectReport(t, ways, `{"email":"`+ok+`"}`, "-", "")
	}
	for _, bad := range []string{".a@b.co", "a..b@b.co", "a@b", "a@-b.co", "a.@b.co"} {
		expectReport(t, ways, `{"email":"`+bad+`"}`, "/email", "pattern")
	}
}

// TestNumbersExact: numbers are compared as written, never through
// float64: 1.0 is an integer, and integers beyond 2^53 or of 40 digits
// are exact against maximum, const, enum and multipleOf.
func TestNumbersExact(t *testing.T) {
	const big40 = "1234567890123456789012345678901234567890"
	cases := []struct {
		name, schema, args, ptr, kw string
	}{
		{"1.0 is an integer", `{"type":"integer"}`, `1.0`, "-", ""},
		{"1.5 is not", `{"type":"integer"}`, `1.5`, "/v", "type"},
		{"1e2 is an integer", `{"type":"integer"}`, `1e2`, "-", ""},
		{"2^53+1 above maximum 2^53", `{"maximum":9007199254740992}`, `9007199254740993`, "/v", "maximum"},
		{"2^53 at maximum 2^53", `{"maximum":9007199254740992}`, `9007199254740992`, "-", ""},
		{"2^53+1 const", `{"const":9007199254740993}`, `9007199254740993`, "-", ""},
		{"2^53 is not const 2^53+1", `{"const":9007199254740993}`, `9007199254740992`, "/v", "const"},
		{"40 digits in enum", `{"enum":[` + big40 + `]}`, big40, "-", ""},
		{"40 digits plus one not in enum", `{"enum":[` + big40 + `]}`, "1234567890123456789012345678901234567891", "/v", "enum"},
		{"40 digits multipleOf 10", `{"multipleOf":10}`, big40, "-", ""},
		{"40 digits plus one not multipleOf 10", `{"multipleOf":10}`, "1234567890123456789012345678901234567891", "/v", "multipleOf"},
		{"40 digits above maximum", `{"maximum":` + big40 + `}`, "1234567890123456789012345678901234567891", "/v", "maximum"},
		{"decimal multipleOf 0.01", `{"multipleOf":0.01}`, `19.99`, "-", ""},
		{"decimal not multipleOf 0.01", `{"multipleOf":0.01}`, `19.999`, "/v", "multipleOf"},
		{"exclusiveMinimum exact", `{"exclusiveMinimum":0.1}`, `0.1000000000000000000001`, "-", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ways := loadWays(t, `{"type":"object","properties":{"v":`+c.schema+`}}`, "")
			expectReport(t, ways, `{"v":`+c.args+`}`, c.ptr, c.kw)
		})
	}
}

// TestDialects: draft-07, 2019-09 and 2020-12 schemas as generators write
// them compile from every source and judge by their own draft's rules.
func TestDialects(t *testing.T) {
	cases := []struct {
		name, schema string
		calls        [][3]string // args, pointer ("-": passes), keyword
	}{
		{"draft-07 definitions and $ref", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"definitions":{"city":{"type":"string","minLength":2}},"properties":{"from":{"$ref":"#/definitions/city"}},"required":["from"]}`,
			[][3]string{{`{"from":"Oslo"}`, "-", ""}, {`{"from":"O"}`, "/from", "minLength"}}},
		{"draft-07 ignores $ref siblings", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"definitions":{"s":{"type":"string"}},"properties":{"v":{"$ref":"#/definitions/s","maxLength":2}}}`,
			[][3]string{{`{"v":"long"}`, "-", ""}, {`{"v":5}`, "/v", "type"}}},
		{"2020-12 applies $ref siblings", `{"$defs":{"s":{"type":"string"}},"type":"object","properties":{"v":{"$ref":"#/$defs/s","maxLength":2}}}`,
			[][3]string{{`{"v":"ok"}`, "-", ""}, {`{"v":"long"}`, "/v", "maxLength"}}},
		{"2019-09 $defs and $ref", `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object",
			"$defs":{"n":{"type":"integer","minimum":0}},"properties":{"n":{"$ref":"#/$defs/n"}},"unevaluatedProperties":false}`,
			[][3]string{{`{"n":3}`, "-", ""}, {`{"n":-1}`, "/n", "minimum"}, {`{"n":1,"x":1}`, "/x", "unevaluatedProperties"}}},
		{"recursive $ref", `{"type":"object","$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},
			"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name"],"additionalProperties":false}},
			"properties":{"tree":{"$ref":"#/$defs/node"}}}`,
			[][3]string{{`{"tree":{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}}`, "-", ""},
				{`{"tree":{"name":"a","children":[{"name":"b","children":[{"nam":"c"}]}]}}`, "/tree/children/0/children/0", "required"}}},
		{"$id-based $ref", `{"type":"object","$defs":{"addr":{"$id":"https://example.com/address","type":"object",
			"properties":{"zip":{"type":"string","pattern":"^\\d{5}$"}}}},"properties":{"home":{"$ref":"https://example.com/address"}}}`,
			[][3]string{{`{"home":{"zip":"12345"}}`, "-", ""}, {`{"home":{"zip":"1234"}}`, "/home/zip", "pattern"}}},
		{"$anchor", `{"type":"object","$defs":{"d":{"$anchor":"day","type":"string","format":"date"}},"properties":{"on":{"$ref":"#day"}}}`,
			[][3]string{{`{"on":"2026-02-28"}`, "-", ""}, {`{"on":"2026-02-30"}`, "/on", "format"}}},
		{"boolean subschemas", `{"type":"object","properties":{"any":true,"never":false},"additionalProperties":false}`,
			[][3]string{{`{"any":[1,{}]}`, "-", ""}, {`{"never":1}`, "/never", "false"}}},
		{"false under items", `{"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}}}`,
			[][3]string{{`{"pair":["a",1]}`, "-", ""}, {`{"pair":["a",1,2]}`, "/pair/2", "items"}}},
		{"nullable type list", `{"type":"object","properties":{"note":{"type":["string","null"]}},"required":["note"]}`,
			[][3]string{{`{"note":null}`, "-", ""}, {`{"note":"x"}`, "-", ""}, {`{"note":1}`, "/note", "type"}}},
		{"OpenAI strict mode", `{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":["string","null"],"enum":["c","f",null]},
			"days":{"type":"array","items":{"type":"object","properties":{"d":{"type":"integer"}},"required":["d"],"additionalProperties":false}}},
			"required":["city","unit","days"],"additionalProperties":false}`,
			[][3]string{{`{"city":"Oslo","unit":null,"days":[{"d":1}]}`, "-", ""}, {`{"city":"Oslo","days":[]}`, "", "required"},
				{`{"city":"Oslo","unit":"k","days":[]}`, "/unit", "enum"}, {`{"city":"Oslo","unit":"c","days":[{"d":1,"x":2}]}`, "/days/0", "additionalProperties"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ways := loadWays(t, c.schema, "")
			for _, call := range c.calls {
				expectReport(t, ways, call[0], call[1], call[2])
			}
		})
	}
}

// TestCheckPatternTimeout: a pattern that cannot be evaluated against a
// value in time is a blocking finding at that value, keyword pattern (or
// patternProperties for a key), and the report says why it is unvalidated.
func TestCheckPatternTimeout(t *testing.T) {
	hostile := strings.Repeat("a", 40) + "!"
	ways := loadWays(t, `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","pattern":"^(?=a)(a+)+$"}}},
		"patternProperties":{"^(?=x)(x+)+$":{"type":"string"}}}`, "")
	calls := []struct{ args, ptr, kw string }{
		{`{"tags":["aaa","` + hostile + `"]}`, "/tags/1", "pattern"},
		{`{"` + strings.Repeat("x", 40) + `!":1}`, "/" + strings.Repeat("x", 40) + "!", "patternProperties"},
	}
	for way, eff := range ways {
		for _, c := range calls {
			v := validate.Check(fnCall("t", c.args), &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil)})
			if v.Unvalidated != validate.PatternTimeout || v.Valid() || len(v.Findings) != 1 {
				t.Fatalf("%s: report %+v, want one blocking finding and unvalidated pattern_timeout", way, v)
			}
			f := v.Findings[0]
			if f.Code != validate.SchemaViolation || f.Pointer != c.ptr || f.Keyword != c.kw {
				t.Errorf("%s: finding %+v, want schema_violation %s at %s", way, f, c.kw, c.ptr)
			}
			if strings.Contains(f.Message, hostile) {
				t.Errorf("%s: the log-safe message quotes the value: %q", way, f.Message)
			}
		}
	}
}
