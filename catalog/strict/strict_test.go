package strict

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// generatedSchemas are the parameter schemas the generators agents use
// emit (testdata/strict, see its README), by case name.
func generatedSchemas(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	var cases []struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", "strict", "generated.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, c := range cases {
		out[c.Name] = c.Schema
	}
	for _, name := range []string{"create_ticket", "invite", "pay", "openai_pydantic_strict"} {
		var c struct {
			Schema json.RawMessage `json:"schema"`
		}
		b, err := os.ReadFile(filepath.Join("testdata", "strict", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		out["pydantic_"+name] = c.Schema
	}
	return out
}

// TestCheckStrictGeneratedSchemas judges what Zod, TypeBox, Valibot,
// Pydantic and the OpenAI SDKs' strict helpers emit. The helpers' output
// (zodFunction, and the Pydantic schema as openai-python's
// to_strict_json_schema makes it) must fit OpenAI's subset; a plain
// generator's schema with an optional field or an open object must not,
// and the reason must name the first keyword or shape that keeps it out.
func TestCheckStrictGeneratedSchemas(t *testing.T) {
	schemas := generatedSchemas(t)
	// want is the reason per provider (openai, anthropic, gemini); ""
	// means the schema fits.
	want := map[string][3]string{
		"openai_zodfunction_contact":      {"", "/properties/age: minimum is outside", `/properties/email: format "email"`},
		"openai_zodfunction_booking":      {"", "/properties/note/anyOf/0: maxLength is outside", `/properties/guest: format "email"`},
		"pydantic_openai_pydantic_strict": {"", "/properties/title: maxLength is outside", "/properties/title: maxLength is outside"},
		"zod3_contact":                    {"", "/properties/age: minimum is outside", `/properties/email: format "email"`},
		"zod3_contact_email_pattern":      {"", "/properties/email: pattern uses a lookaround", "/properties/email: pattern is outside"},
		"zod4_booking":                    {"/properties/pay: oneOf is outside", "/properties/note/anyOf/0: maxLength", "/properties/guest: pattern is outside"},
		"typebox_contact":                 {"/: additionalProperties must be false", "/: additionalProperties must be false", `/properties/email: format "email"`},
		"valibot_contact":                 {"/: additionalProperties must be false", "/: additionalProperties must be false", `/properties/email: format "email"`},
		"ai_zodschema_zod4_booking":       {"", "/properties/guest: pattern uses a lookaround", "/properties/guest: pattern is outside"},
		"pydantic_create_ticket":          {"/: additionalProperties must be false", "/: additionalProperties must be false", "/properties/assignee: default is outside"},
		"pydantic_pay":                    {"/: additionalProperties must be false", "/: additionalProperties must be false", "/properties/amount_cents: exclusiveMinimum"},
	}
	for name, reasons := range want {
		schema, ok := schemas[name]
		if !ok {
			t.Fatalf("no generated schema %q", name)
		}
		for i, p := range Providers {
			f := Check(p, schema)
			if reasons[i] == "" {
				if !f.OK {
					t.Errorf("%s for %s: unfit (%s), want it to fit", name, p, f.Reason)
				}
				continue
			}
			if f.OK || !strings.HasPrefix(f.Reason, reasons[i]) {
				t.Errorf("%s for %s: ok=%v %q, want unfit %q…", name, p, f.OK, f.Reason, reasons[i])
			}
		}
	}
}

func TestCheckStrictRules(t *testing.T) {
	closed := func(props, required string) string {
		return `{"type":"object","properties":{` + props + `},"required":[` + required + `],"additionalProperties":false}`
	}
	nested := `{"type":"string"}`
	for i := 0; i < 11; i++ {
		nested = closed(`"a":`+nested, `"a"`)
	}
	enum := make([]string, 1001)
	for i := range enum {
		enum[i] = strconv.Quote("v" + strconv.Itoa(i))
	}
	cases := []struct {
		name, schema string
		want         [3]string // openai, anthropic, gemini; "" fits
	}{
		{"optional field", closed(`"a":{"type":"string"},"b":{"type":"integer"}`, `"a"`),
			[3]string{`/: property "b" is optional`, "", ""}},
		{"nullable instead of optional", closed(`"a":{"type":["string","null"]}`, `"a"`), [3]string{"", "", ""}},
		{"open object", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
			[3]string{"/: additionalProperties must be false", "/: additionalProperties must be false", ""}},
		{"nested open object", closed(`"o":{"type":"object","properties":{},"additionalProperties":true}`, `"o"`),
			[3]string{"/properties/o: additionalProperties must be false", "/properties/o: additionalProperties must be false", ""}},
		{"no parameters", `null`, [3]string{"/: no parameters", "/: no parameters", "/: no parameters"}},
		{"root not an object", `{"type":"string"}`, [3]string{"/: the root must be type object", "/: the root must be type object", "/: the root must be type object"}},
		{"root anyOf", `{"type":"object","anyOf":[` + closed(``, ``) + `],"properties":{},"required":[],"additionalProperties":false}`,
			[3]string{"/: anyOf at the root", "", ""}},
		{"minItems 2", closed(`"a":{"type":"array","items":{"type":"string"},"minItems":2}`, `"a"`),
			[3]string{"", "/properties/a: minItems other than 0 or 1", ""}},
		{"recursive", `{"type":"object","properties":{"n":{"$ref":"#/$defs/N"}},"required":["n"],"additionalProperties":false,"$defs":{"N":` +
			closed(`"next":{"anyOf":[{"$ref":"#/$defs/N"},{"type":"null"}]}`, `"next"`) + `}}`,
			[3]string{"", "/$defs/N: a recursive schema", ""}},
		{"external ref", closed(`"a":{"$ref":"https://example.com/a.json"}`, `"a"`),
			[3]string{`/properties/a: $ref "https://example.com/a.json" is not local`, `/properties/a: $ref "https://example.com/a.json" is not local`, `/properties/a: $ref "https://example.com/a.json" is not local`}},
		{"boolean subschema", closed(`"a":true`, `"a"`),
			[3]string{"/properties/a: a boolean", "/properties/a: a boolean", "/properties/a: a boolean"}},
		{"untyped", closed(`"a":{"description":"anything"}`, `"a"`),
			[3]string{"/properties/a: a schema without a type", "/properties/a: a schema without a type", "/properties/a: a schema without a type"}},
		{"enum of objects", closed(`"a":{"enum":[{"x":1}]}`, `"a"`), [3]string{"", "/properties/a: enum with an object", ""}},
		{"uri format", closed(`"a":{"type":"string","format":"uri"}`, `"a"`),
			[3]string{`/properties/a: format "uri" is outside`, "", `/properties/a: format "uri" is outside`}},
		{"$schema below the root", closed(`"a":{"$schema":"x","type":"string"}`, `"a"`),
			[3]string{"/properties/a: $schema is outside", "/properties/a: $schema is outside", "/properties/a: $schema is outside"}},
		{"too deep", nested, [3]string{"/properties/a/properties/a/properties/a/properties/a/properties/a/properties/a/properties/a/properties/a/properties/a/properties/a: more than 10 levels", "", ""}},
		{"too many enum values", closed(`"a":{"type":"string","enum":[`+strings.Join(enum, ",")+`]}`, `"a"`),
			[3]string{"/: more than 1000 enum values", "", ""}},
		{"word boundary", closed(`"a":{"type":"string","pattern":"\\bx"}`, `"a"`),
			[3]string{"", "/properties/a: pattern uses a word boundary", "/properties/a: pattern is outside"}},
		{"allOf with ref", `{"type":"object","properties":{"a":{"allOf":[{"$ref":"#/$defs/A"}]}},"required":["a"],"additionalProperties":false,"$defs":{"A":{"type":"string"}}}`,
			[3]string{"/properties/a: allOf is outside", "/properties/a/allOf: allOf with $ref", "/properties/a: allOf is outside"}},
		{"gemini schema for extra properties", `{"type":"object","properties":{},"additionalProperties":{"type":"string"}}`,
			[3]string{"/: additionalProperties must be false", "/: additionalProperties must be false", ""}},
		{"not JSON", `{"type":`, [3]string{"/: not a JSON object", "/: not a JSON object", "/: not a JSON object"}},
	}
	for _, c := range cases {
		for i, p := range Providers {
			f := Check(p, []byte(c.schema))
			if c.want[i] == "" {
				if !f.OK {
					t.Errorf("%s for %s: unfit (%s), want it to fit", c.name, p, f.Reason)
				}
				continue
			}
			if f.OK || !strings.HasPrefix(f.Reason, c.want[i]) {
				t.Errorf("%s for %s: ok=%v %q, want unfit %q…", c.name, p, f.OK, f.Reason, c.want[i])
			}
		}
	}
}

func TestCheckStrictCountsWhatAnthropicLimits(t *testing.T) {
	f := Check(Anthropic, []byte(`{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"anyOf":[{"type":"string"},{"type":"integer"}]},"c":{"type":"string"}},"required":["a"],"additionalProperties":false}`))
	if !f.OK || f.Optional != 2 || f.Unions != 2 {
		t.Errorf("got %+v, want fit with 2 optional properties and 2 unions", f)
	}
}

// FuzzCheckStrict: no schema text makes the check panic or loop, and its
// verdict does not depend on anything but the text.
func FuzzCheckStrict(f *testing.F) {
	for _, s := range []string{fitSchema, unfitSchema, `null`, `{}`, `{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`,
		`{"type":"object","properties":{"a":{"type":["string","null"],"pattern":"(?<=x)\\1"}},"additionalProperties":{"type":"integer"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		for _, p := range Providers {
			a, b := Check(p, schema), Check(p, schema)
			if a != b {
				t.Fatalf("%s: %+v then %+v", p, a, b)
			}
			if a.OK == (a.Reason != "") {
				t.Fatalf("%s: ok=%v with reason %q", p, a.OK, a.Reason)
			}
		}
	})
}
