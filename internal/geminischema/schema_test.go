package geminischema

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compile builds the translated schema with the validator toolgate uses.
func compile(t *testing.T, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://s.json")
	if err != nil {
		t.Fatalf("%s does not compile: %v", schema, err)
	}
	return s
}

func valid(t *testing.T, s *jsonschema.Schema, instance string) bool {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(instance))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(v) == nil
}

// Each keyword of the Gemini Schema becomes what it means in JSON Schema:
// the translation is compared as written, and the result is checked to
// accept and refuse what the Gemini keyword accepts and refuses.
func TestToJSONSchemaPerKeyword(t *testing.T) {
	cases := []struct {
		name     string
		in, want string
		accept   []string
		refuse   []string
	}{
		{"type upper case", `{"type":"STRING"}`, `{"type":"string"}`, []string{`"a"`}, []string{`1`}},
		{"type lower case", `{"type":"integer"}`, `{"type":"integer"}`, []string{`3`}, []string{`3.5`}},
		{"type unspecified", `{"type":"TYPE_UNSPECIFIED"}`, `{}`, []string{`1`, `"a"`}, nil},
		{"type NULL", `{"type":"NULL"}`, `{"type":"null"}`, []string{`null`}, []string{`0`}},
		{"nullable", `{"type":"NUMBER","nullable":true}`, `{"type":["number","null"]}`, []string{`1.5`, `null`}, []string{`"x"`}},
		{"nullable false", `{"type":"BOOLEAN","nullable":false}`, `{"type":"boolean"}`, []string{`true`}, []string{`null`}},
		{"nullable enum", `{"type":"STRING","enum":["a","b"],"nullable":true}`, `{"type":["string","null"],"enum":["a","b",null]}`, []string{`"a"`, `null`}, []string{`"c"`}},
		{"nullable anyOf", `{"anyOf":[{"type":"STRING"}],"nullable":true}`, `{"anyOf":[{"type":"string"},{"type":"null"}]}`, []string{`"a"`, `null`}, []string{`1`}},
		{"format", `{"type":"STRING","format":"date-time"}`, `{"type":"string","format":"date-time"}`, []string{`"2025-01-02T03:04:05Z"`}, nil},
		{"enum", `{"type":"STRING","format":"enum","enum":["x","y"]}`, `{"type":"string","format":"enum","enum":["x","y"]}`, []string{`"x"`}, []string{`"z"`}},
		{"anyOf", `{"anyOf":[{"type":"INTEGER"},{"type":"BOOLEAN"}]}`, `{"anyOf":[{"type":"integer"},{"type":"boolean"}]}`, []string{`1`, `false`}, []string{`"1"`}},
		{"propertyOrdering", `{"type":"OBJECT","propertyOrdering":["b","a"]}`, `{"type":"object"}`, []string{`{}`}, nil},
		{"items", `{"type":"ARRAY","items":{"type":"INTEGER"}}`, `{"type":"array","items":{"type":"integer"}}`, []string{`[1,2]`}, []string{`[1,"2"]`}},
		{"properties", `{"type":"OBJECT","properties":{"a":{"type":"STRING"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, []string{`{"a":"x"}`, `{}`}, []string{`{"a":1}`}},
		{"required", `{"type":"OBJECT","properties":{"a":{"type":"STRING"}},"required":["a"]}`, `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, []string{`{"a":"x"}`}, []string{`{}`}},
		{"minimum maximum", `{"type":"NUMBER","minimum":0.5,"maximum":1e2}`, `{"type":"number","minimum":0.5,"maximum":1e2}`, []string{`0.5`, `100`}, []string{`0.4`, `100.1`}},
		{"minItems maxItems", `{"type":"ARRAY","minItems":"1","maxItems":2}`, `{"type":"array","minItems":1,"maxItems":2}`, []string{`[1]`, `[1,2]`}, []string{`[]`, `[1,2,3]`}},
		{"minLength maxLength", `{"type":"STRING","minLength":"2","maxLength":"3"}`, `{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"abc"`}, []string{`"a"`, `"abcd"`}},
		{"minProperties maxProperties", `{"type":"OBJECT","minProperties":1,"maxProperties":"1"}`, `{"type":"object","minProperties":1,"maxProperties":1}`, []string{`{"a":1}`}, []string{`{}`, `{"a":1,"b":2}`}},
		{"pattern", `{"type":"STRING","pattern":"^[A-Z]{2}$"}`, `{"type":"string","pattern":"^[A-Z]{2}$"}`, []string{`"AB"`}, []string{`"abc"`}},
		{"description title default", `{"type":"STRING","description":"d","title":"t","default":"x"}`, `{"type":"string","description":"d","title":"t","default":"x"}`, []string{`"y"`}, nil},
		{"example", `{"type":"INTEGER","example":7}`, `{"type":"integer","examples":[7]}`, []string{`1`}, nil},
		{"null limit dropped", `{"type":"ARRAY","minItems":null}`, `{"type":"array"}`, []string{`[]`}, nil},
		{"type by number", `{"type":6,"properties":{"location":{"type":1}},"required":["location"]}`, `{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`, []string{`{"location":"New York"}`}, []string{`{"location":123}`, `{}`}},
		{"every type number", `{"anyOf":[{"type":0},{"type":2},{"type":3},{"type":4},{"type":5},{"type":7}]}`, `{"anyOf":[{},{"type":"number"},{"type":"integer"},{"type":"boolean"},{"type":"array"},{"type":"null"}]}`, []string{`1.5`}, nil},
		{"type mixed case", `{"type":"Object","properties":{"n":{"type":"iNtEgEr"}}}`, `{"type":"object","properties":{"n":{"type":"integer"}}}`, []string{`{"n":1}`}, []string{`{"n":"1"}`}},
		{"snake_case keywords", `{"type":"ARRAY","min_items":"1","max_items":2,"items":{"any_of":[{"type":"STRING","min_length":2,"max_length":"3"}]},"property_ordering":["a"]}`, `{"type":"array","minItems":1,"maxItems":2,"items":{"anyOf":[{"type":"string","minLength":2,"maxLength":3}]}}`, []string{`["ab"]`}, []string{`[]`, `["a"]`, `["ab","ab","ab"]`}},
		{"snake_case object limits", `{"type":"OBJECT","min_properties":1,"max_properties":"1"}`, `{"type":"object","minProperties":1,"maxProperties":1}`, []string{`{"a":1}`}, []string{`{}`}},
		{"integer enum", `{"type":"INTEGER","enum":["1","2"]}`, `{"type":"integer","enum":["1","2",1,2]}`, []string{`1`, `2`}, []string{`3`, `"1"`}},
		{"enum of numbers on a string", `{"type":"STRING","enum":[1,true]}`, `{"type":"string","enum":[1,true,"1","true"]}`, []string{`"1"`, `"true"`}, []string{`1`, `"2"`}},
		{"Vertex defs and ref", `{"type":"OBJECT","properties":{"pet":{"ref":"#/defs/Pet"}},"defs":{"Pet":{"type":"OBJECT","properties":{"name":{"type":"STRING"}},"required":["name"]}}}`, `{"type":"object","properties":{"pet":{"$ref":"#/$defs/Pet"}},"$defs":{"Pet":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`, []string{`{"pet":{"name":"Rex"}}`}, []string{`{"pet":{}}`, `{"pet":{"name":1}}`}},
		{"Vertex additionalProperties", `{"type":"OBJECT","additionalProperties":{"type":"INTEGER"},"properties":{"a":{"type":"STRING"}}}`, `{"type":"object","additionalProperties":{"type":"integer"},"properties":{"a":{"type":"string"}}}`, []string{`{"a":"x","b":1}`}, []string{`{"b":"x"}`}},
		{"additionalProperties false", `{"type":"OBJECT","additional_properties":false}`, `{"type":"object","additionalProperties":false}`, []string{`{}`}, []string{`{"b":1}`}},
		{"bounds as strings", `{"type":"NUMBER","minimum":"0.5","maximum":"1e2"}`, `{"type":"number","minimum":0.5,"maximum":1e2}`, []string{`0.5`}, []string{`0.4`, `101`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ToJSONSchema([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
			s := compile(t, got)
			for _, a := range c.accept {
				if !valid(t, s, a) {
					t.Errorf("%s refuses %s", got, a)
				}
			}
			for _, r := range c.refuse {
				if valid(t, s, r) {
					t.Errorf("%s accepts %s", got, r)
				}
			}
		})
	}
}

// Nested schemas are translated at every depth, numbers byte for byte.
func TestToJSONSchemaNested(t *testing.T) {
	in := `{"type":"OBJECT","properties":{"xs":{"type":"ARRAY","items":{"type":"OBJECT","properties":{"n":{"type":"NUMBER","minimum":1.000000000000000000001,"nullable":true}},"required":["n"]}}}}`
	want := `{"type":"object","properties":{"xs":{"type":"array","items":{"type":"object","properties":{"n":{"type":["number","null"],"minimum":1.000000000000000000001}},"required":["n"]}}}}`
	got, err := ToJSONSchema([]byte(in))
	if err != nil || string(got) != want {
		t.Fatalf("got %s, %v\nwant %s", got, err, want)
	}
}

func TestToJSONSchemaRefuses(t *testing.T) {
	for _, in := range []string{
		`[]`, `"OBJECT"`, `{"type":"MAP"}`, `{"type":8}`, `{"type":-1}`, `{"type":true}`, `{"minItems":1,"min_items":1}`, `{"minimum":"x"}`, `{"ref":1}`, `{"defs":[]}`, `{"additionalProperties":"x"}`, `{"nullable":"yes"}`, `{"minItems":-1}`,
		`{"minLength":"x"}`, `{"items":[{"type":"STRING"}]}`, `{"anyOf":{}}`, `{"properties":[]}`,
		`{"properties":{"a":"STRING"}}`, strings.Repeat(`{"items":`, 70) + `{}` + strings.Repeat(`}`, 70),
	} {
		if out, err := ToJSONSchema([]byte(in)); !errors.Is(err, ErrSchema) {
			t.Errorf("%s: got %s, %v; want ErrSchema", in, out, err)
		}
	}
}

func TestDeclaration(t *testing.T) {
	js := []byte(`{"type":"object","additionalProperties":false}`)
	if got, _ := Declaration([]byte(`{"type":"OBJECT"}`), js); !bytes.Equal(got, js) {
		t.Errorf("parametersJsonSchema not taken as is: %s", got)
	}
	if got, _ := Declaration([]byte(`{"type":"OBJECT"}`), nil); string(got) != `{"type":"object"}` {
		t.Errorf("parameters not translated: %s", got)
	}
	got, _ := Declaration(nil, nil)
	s := compile(t, got)
	if !valid(t, s, `{}`) || valid(t, s, `{"a":1}`) {
		t.Errorf("a declaration without parameters takes no arguments: %s", got)
	}
}

// recordedSchemas are the OpenAPI-style parameters of the recorded
// requests in proxy/gemini/testdata/recorded.
func recordedSchemas(f *testing.F) [][]byte {
	names, err := filepath.Glob(filepath.Join("..", "..", "proxy", "gemini", "testdata", "recorded", "*.request.json"))
	if err != nil || len(names) == 0 {
		f.Fatalf("no recorded requests: %v", err)
	}
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		var req struct {
			Tools []struct {
				Decls []struct {
					Parameters json.RawMessage `json:"parameters"`
				} `json:"functionDeclarations"`
			} `json:"tools"`
		}
		_ = json.Unmarshal(b, &req)
		for _, tool := range req.Tools {
			for _, d := range tool.Decls {
				if d.Parameters != nil {
					out = append(out, d.Parameters)
				}
			}
		}
	}
	return out
}

func FuzzToJSONSchema(f *testing.F) {
	for _, s := range recordedSchemas(f) {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"OBJECT","properties":{"a":{"type":"STRING","nullable":true,"enum":["x"]}},"minItems":"2"}`))
	f.Add([]byte(`{"anyOf":[{"type":"INTEGER"}],"nullable":true,"example":{"a":[1]}}`))
	f.Add([]byte(`{"type":6,"properties":{"location":{"type":1,"enum":[1,"2"]}},"min_items":"1","any_of":[{"type":3}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := ToJSONSchema(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%s translated to invalid JSON %s", in, out)
		}
	})
}
