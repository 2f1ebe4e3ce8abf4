package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// The fast path must give jsonschema v6's answer wherever it answers.
// These tests compile each schema once, as the catalog does, and judge
// every instance both ways: by the fast path alone, and by the library
// alone. A fast "valid" where the library finds the value invalid (or the
// reverse) is a bug in the fast path. When the fast path has no answer
// (undecided) the library decides, so only the count is kept.

// formatSettings are both settings of catalog.formats, by name.
var formatSettings = []struct {
	name string
	opt  Options
}{{"assert", Options{}}, {"annotate", Options{AnnotateFormats: true}}}

// differential compares the paths on one value, given decoded (v) and as
// JSON text (text, or nil to write v as JSON), and says what the fast path
// answered on the text. The fast path is judged two ways: over the text's
// tape whatever its root, and through Fast.ValidObject as validate.Check
// calls it. The findings of Validate (which the checks use) must be the
// library's own: the same instance pointers and keywords.
func differential(t testing.TB, sch *jsonschema.Schema, fast *Fast, v any, text []byte, what string) (onText ruling) {
	t.Helper()
	want := Validate(sch, v)
	if text == nil {
		var err error
		if text, err = json.Marshal(v); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	onText = tapeRuling(t, fast, text)
	sameRuling(t, onText, want, what+" (tape)")
	if ok, err := fast.ValidObject(text); ok && want != nil || err != nil {
		t.Fatalf("%s: ValidObject says %v (%v), jsonschema v6 says %v", what, ok, err, want)
	}
	if a, b := findingKeys(want), findingKeys(libraryValidate(sch, v)); !slices.Equal(a, b) {
		t.Fatalf("%s: findings %q, jsonschema v6 gives %q", what, a, b)
	}
	return onText
}

// libraryValidate is jsonschema v6 alone, its panics reported as Validate
// reports them.
func libraryValidate(sch *jsonschema.Schema, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = ErrUnjudgeable
			if pe, ok := r.(*PatternError); ok {
				err = pe
			}
		}
	}()
	return sch.Validate(v)
}

func sameRuling(t testing.TB, got ruling, want error, what string) {
	t.Helper()
	switch {
	case got == valid && want != nil:
		t.Fatalf("%s: fast path says valid, jsonschema v6 says %v", what, want)
	case got == invalid && want == nil:
		t.Fatalf("%s: fast path says invalid, jsonschema v6 says valid", what)
	}
}

// tapeRuling runs the fast path over text's tape, whatever its root.
// Text that is not UTF-8 (which ValidObject refuses) or nests deeper than
// a tape reads has no ruling.
func tapeRuling(t testing.TB, fast *Fast, text []byte) ruling {
	t.Helper()
	nodes, ok := jsonx.AppendTape(nil, text)
	if !ok || !utf8.Valid(text) {
		return undecided
	}
	return fast.root.check(&tape{text: string(text), nodes: nodes}, 0)
}

// findingKeys lists the leaves of a validation error as pointer and
// keyword, sorted: the library walks objects in map order.
func findingKeys(err error) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		if err != nil {
			return []string{err.Error()}
		}
		return nil
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		for _, c := range e.Causes {
			walk(c)
		}
		if len(e.Causes) == 0 {
			out = append(out, "/"+strings.Join(e.InstanceLocation, "/")+" "+strings.Join(e.ErrorKind.KeywordPath(), "/"))
		}
	}
	walk(ve)
	slices.Sort(out)
	return out
}

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
	} `json:"tests"`
}

// suiteGroups reads every file of the copied JSON Schema Test Suite.
func suiteGroups(t testing.TB) map[string][]suiteGroup {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "json-schema-test-suite", "draft2020-12", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no suite files: %v", err)
	}
	out := map[string][]suiteGroup{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var groups []suiteGroup
		if err := json.Unmarshal(data, &groups); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = groups
	}
	return out
}

func decodeInstance(t testing.TB, raw []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// suiteCounts tallies what the fast path took of the suite.
type suiteCounts struct {
	schemas, compiled, taken   int
	tests, onFast, unknown     int
	validOnFast, invalidOnFast int
}

// TestFastPathSuite runs the whole JSON Schema Test Suite (draft 2020-12)
// through both paths, under both settings of catalog.formats.
func TestFastPathSuite(t *testing.T) {
	groups := suiteGroups(t)
	for _, formats := range formatSettings {
		t.Run(formats.name, func(t *testing.T) {
			var c suiteCounts
			for _, name := range slices.Sorted(maps.Keys(groups)) {
				for gi, g := range groups[name] {
					c.schemas++
					sch, err := Compile("https://toolgate.invalid/suite.json", g.Schema, formats.opt)
					if err != nil {
						continue
					}
					c.compiled++
					fast := NewFast(sch)
					if fast == nil {
						continue
					}
					c.taken++
					for ti, tc := range g.Tests {
						what := fmt.Sprintf("%s #%d %q, test #%d %q", name, gi, g.Description, ti, tc.Description)
						c.count(differential(t, sch, fast, decodeInstance(t, tc.Data), tc.Data, what))
					}
				}
			}
			t.Logf("suite, formats %s: %d schemas, %d compile, fast path takes %d; of their %d tests it decides %d on the text (%d valid, %d invalid, %d left to the library)",
				formats.name, c.schemas, c.compiled, c.taken, c.tests, c.onFast, c.validOnFast, c.invalidOnFast, c.unknown)
			// The differential check means nothing if the fast path takes
			// nothing: most of the suite is the common keywords.
			if c.taken*2 < c.compiled || c.validOnFast == 0 || c.invalidOnFast == 0 {
				t.Fatalf("the fast path takes %d of %d compiled schemas (%d valid, %d invalid rulings)", c.taken, c.compiled, c.validOnFast, c.invalidOnFast)
			}
		})
	}
}

func (c *suiteCounts) count(v ruling) {
	c.tests++
	switch v {
	case valid:
		c.onFast++
		c.validOnFast++
	case invalid:
		c.onFast++
		c.invalidOnFast++
	default:
		c.unknown++
	}
}

// TestFastPathTakes names which keywords keep a schema on the library, so
// a change that silently widens or narrows the fast path shows here.
func TestFastPathTakes(t *testing.T) {
	cases := []struct {
		schema string
		takes  bool
	}{
		{`{"type":"object","properties":{"a":{"type":"string","minLength":1}},"required":["a"],"additionalProperties":false}`, true},
		{`{"title":"t","description":"d","default":1,"examples":[1],"$comment":"c","x-vendor":{"k":1},"type":"integer"}`, true},
		{`{"$defs":{"n":{"type":"number","multipleOf":0.01}},"properties":{"p":{"$ref":"#/$defs/n"}}}`, true},
		{`{"anyOf":[{"type":"string"},{"type":"null"}],"not":{"const":"x"},"allOf":[true],"oneOf":[{"enum":[1,"a"]},{"type":"string"}]}`, true},
		{`{"prefixItems":[{"type":"integer"}],"items":false,"uniqueItems":true,"minItems":1,"maxItems":3}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}],"additionalItems":false}`, true},
		{`{"type":"string","format":"date-time","pattern":"^2"}`, true},
		{`{"properties":{"next":{"$ref":"#"}}}`, true},
		{`{"patternProperties":{"^a":{}}}`, false},
		{`{"if":{"type":"string"},"then":{"minLength":1}}`, false},
		{`{"contains":{"type":"string"}}`, false},
		{`{"unevaluatedProperties":false}`, false},
		{`{"propertyNames":{"maxLength":3}}`, false},
		{`{"dependentRequired":{"a":["b"]}}`, false},
		{`{"$dynamicRef":"#x","$dynamicAnchor":"x"}`, false},
		// The compiler is not asked to assert content keywords: they
		// annotate, on both paths.
		{`{"properties":{"a":{"contentEncoding":"base64","contentMediaType":"application/json"}}}`, true},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, false},
		{`{"anyOf":[{"type":"string"},{"$ref":"#"}]}`, false},
	}
	for _, tc := range cases {
		sch, err := Compile("https://toolgate.invalid/t.json", []byte(tc.schema), Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		if got := NewFast(sch) != nil; got != tc.takes {
			t.Errorf("%s: fast path takes it = %v, want %v", tc.schema, got, tc.takes)
		}
	}
}

// TestFastPathNumbersBigRatRefuses: a number big.Rat does not read (an
// exponent beyond ±1e6) gets no ruling from the fast path, whose digits
// could compare it, since the library's answer is another: not an
// integer, equal to nothing.
func TestFastPathNumbersBigRatRefuses(t *testing.T) {
	for _, c := range []struct{ schema, num string }{
		{`{"type":"integer"}`, "1e1000001"},
		{`{"type":"integer"}`, "-25e-1000002"},
		{`{"enum":[1,"a"]}`, "1e1000001"},
		{`{"const":1}`, "10e1000001"},
		{`{"minimum":0}`, "1e1000001"},
		{`{"multipleOf":2}`, "4e-1000001"},
	} {
		sch, err := Compile("https://toolgate.invalid/t.json", []byte(c.schema), Options{})
		if err != nil {
			t.Fatal(err)
		}
		fast := NewFast(sch)
		if fast == nil {
			t.Fatalf("%s: the fast path does not take it", c.schema)
		}
		if got := tapeRuling(t, fast, []byte(c.num)); got != undecided {
			t.Errorf("%s, %s: fast path ruling on the text %d, want none", c.schema, c.num, got)
		}
	}
	// A schema holding such a number stays on the library.
	sch, err := Compile("https://toolgate.invalid/t.json", []byte(`{"enum":[1e1000001]}`), Options{})
	if err != nil || NewFast(sch) != nil {
		t.Errorf("a schema whose enum holds 1e1000001: err %v, fast path taken %v", err, NewFast(sch) != nil)
	}
	// Zero reads whatever its exponent, and is an integer.
	sch, err = Compile("https://toolgate.invalid/t.json", []byte(`{"type":"integer"}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	differential(t, sch, NewFast(sch), json.Number("0e1000001"), nil, "zero")
}
