package schema

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// dialectCase is one ECMA-262 behaviour with a string that must match and
// one that must not.
type dialectCase struct {
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
	Valid   string `json:"valid"`
	Invalid string `json:"invalid"`
}

func dialectCases(t testing.TB) []dialectCase {
	t.Helper()
	data, err := os.ReadFile("testdata/ecma262-patterns.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []dialectCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// engineName names a benchmark or subtest by the engines it allows.
func engineName(fast bool) string {
	if fast {
		return "fast_path"
	}
	return "regexp2"
}

// setFastPath turns the RE2 fast path on or off until tb ends.
func setFastPath(tb testing.TB, on bool) {
	prev := patternFastPath
	patternFastPath = on
	tb.Cleanup(func() { patternFastPath = prev })
}

// withFastPath runs f with the RE2 fast path allowed and with regexp2 alone.
func withFastPath(t *testing.T, f func(t *testing.T)) {
	for _, on := range []bool{true, false} {
		t.Run(engineName(on), func(t *testing.T) {
			setFastPath(t, on)
			f(t)
		})
	}
}

// TestPatternECMA262Dialect: every case of the dialect table compiles as
// a schema pattern and as a patternProperties key, and judges its two
// strings as ECMA-262 does, whichever engine runs it.
func TestPatternECMA262Dialect(t *testing.T) {
	for _, c := range dialectCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			withFastPath(t, func(t *testing.T) {
				props, _ := json.Marshal(map[string]any{
					"type":       "object",
					"properties": map[string]any{"v": map[string]any{"type": "string", "pattern": c.Pattern}},
				})
				keys, _ := json.Marshal(map[string]any{
					"type":              "object",
					"patternProperties": map[string]any{c.Pattern: map[string]any{"type": "integer"}},
				})
				opt := Options{}
				sch, err := Compile("https://toolgate.invalid/p.json", props, opt)
				if err != nil {
					t.Fatalf("does not compile: %v", err)
				}
				ksch, err := Compile("https://toolgate.invalid/k.json", keys, opt)
				if err != nil {
					t.Fatalf("does not compile as a patternProperties key: %v", err)
				}
				if err := sch.Validate(map[string]any{"v": c.Valid}); err != nil {
					t.Errorf("pattern: %q must match: %v", c.Valid, err)
				}
				if err := sch.Validate(map[string]any{"v": c.Invalid}); err == nil {
					t.Errorf("pattern: %q must not match", c.Invalid)
				}
				if err := ksch.Validate(map[string]any{c.Valid: "not an integer"}); err == nil {
					t.Errorf("patternProperties: key %q must match and so be checked", c.Valid)
				}
				if err := ksch.Validate(map[string]any{c.Invalid: "not an integer"}); err != nil {
					t.Errorf("patternProperties: key %q must not match: %v", c.Invalid, err)
				}
			})
		})
	}
}

// TestPatternRefusesOtherDialects: group syntax regexp2 takes from .NET or
// Perl is not ECMA-262 and does not compile; ECMA-262 errors do not either.
func TestPatternRefusesOtherDialects(t *testing.T) {
	for _, p := range []string{`(?i)abc`, `(?x) a b`, `(?#note)a`, `(?>a+)b`, `(?'n'a)`, `(?(1)a|b)`, `(?P<n>a)`, `(?n:a)`, `(unclosed`, `a**`, `[z-a]`, `\1(a`} {
		t.Run(p, func(t *testing.T) {
			if _, err := compilePattern(p); err == nil {
				t.Errorf("%q compiled", p)
			}
		})
	}
	for _, p := range []string{`(?i:a)`, `(?-i:a)`, `(?i-s:a)`, `(?<n>a)\k<n>`, `(?<=a)b`, `(?<!a)b`, `(?=a)`, `(?!a)`} {
		t.Run(p, func(t *testing.T) {
			if _, err := compilePattern(p); err != nil {
				t.Errorf("%q: %v", p, err)
			}
		})
	}
}

// TestPatternFastPathOnlyWhenSafe: constructs whose meaning differs in RE2
// never take the fast path; plain ones do.
func TestPatternFastPathOnlyWhenSafe(t *testing.T) {
	fast := []string{`^[A-Z]{3}$`, `^[A-Za-z_]+/[A-Za-z_]+$`, `^rec_[0-9a-z]+$`, `^\d{4}-\d{2}$`, `\s+`, `^a.b$`, `^(?:x|y)*?$`, `^\w+@\w+\.\w{2,}$`, `a\-b\/c`, ``}
	slow := []string{`(?=a)`, `(?<=a)b`, `\1(a)`, `\cJ`, `\u00e9`, `\p{L}`, `[]`, `[^]`, `x{`, `a}`, `]`, `[\S]`, `[\b]`, `[[:alpha:]]`, `(?<n>a)`, `(?i:a)`, `[a-\x7a]`}
	for _, p := range fast {
		re, err := compilePattern(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if _, ok := re.(*fastPattern); !ok {
			t.Errorf("%q does not take the fast path", p)
		}
	}
	for _, p := range slow {
		re, err := compilePattern(p)
		if err != nil {
			continue // refused by regexp2: fine, it is not fast either
		}
		if _, ok := re.(*fastPattern); ok {
			t.Errorf("%q takes the fast path", p)
		}
	}
}

// TestPatternTimeout: a catastrophically backtracking pattern on a hostile
// value stops at the match budget with a *PatternError instead of running
// for ever. No timing is asserted: without the budget the match below
// needs about 2^40 steps and the test would not end. (The lookahead keeps
// the pattern off the RE2 fast path, which would never backtrack.)
func TestPatternTimeout(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"v":{"type":"array","items":{"type":"string","pattern":"^(?=a)(a+)+$"}}}}`)
	sch, err := Compile("https://toolgate.invalid/t.json", schema, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hostile := strings.Repeat("a", 40) + "!"
	err = Validate(sch, map[string]any{"v": []any{"aaa", hostile, hostile}})
	var pe *PatternError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *PatternError", err)
	}
	if pe.Pattern != "^(?=a)(a+)+$" || pe.Input != hostile {
		t.Errorf("PatternError = %+v", pe)
	}
	if err := Validate(sch, map[string]any{"v": []any{"aaaa"}}); err != nil {
		t.Errorf("a short value fails: %v", err)
	}
	if err := Validate(sch, map[string]any{"v": []any{"aab"}}); err == nil {
		t.Error("a value that does not match passes")
	}
	// The fast path over the text stops at the same budget, and the value
	// it reports is its own, not the caller's buffer.
	text := []byte(`{"v":["aaa","` + hostile + `","` + hostile + `"]}`)
	ok, err := NewFast(sch).ValidObject(text)
	if pe = nil; ok || !errors.As(err, &pe) || pe.Input != hostile {
		t.Fatalf("fast path: %v, %v, want a *PatternError on the hostile value", ok, err)
	}
	clear(text)
	if pe.Input != hostile {
		t.Errorf("the reported value changed with the caller's buffer: %q", pe.Input)
	}
}

// FuzzPatternFastPath: wherever the fast path is taken, RE2 and regexp2
// in ECMAScript mode agree on every input. The seeds are the dialect
// table and the fast-path list.
func FuzzPatternFastPath(f *testing.F) {
	for _, c := range dialectCases(f) {
		f.Add(c.Pattern, c.Valid)
		f.Add(c.Pattern, c.Invalid)
	}
	for _, p := range []string{`^[A-Z]{3}$`, `\s+`, `^a.b$`, `^[\s\d]+$`, `\S\W\D`, `\bx\B`, `[^\s]`, `^\x41\t$`} {
		f.Add(p, "A\u00a0\u2028 x\r\n\ufeff")
	}
	f.Fuzz(func(t *testing.T, pattern, input string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(input) || len(pattern) > 200 {
			return
		}
		re, err := compilePattern(pattern)
		if err != nil {
			return
		}
		fp, ok := re.(*fastPattern)
		if !ok {
			return
		}
		bt, err := regexp2.Compile(pattern, ecmaUnicode)
		if err != nil {
			if bt, err = regexp2.Compile(pattern, ecmaLegacy); err != nil {
				t.Fatalf("fast path for a pattern regexp2 refuses: %q", pattern)
			}
		}
		bt.MatchTimeout = patternTimeout
		want, err := bt.MatchString(input)
		if err != nil {
			return
		}
		if got := fp.MatchString(input); got != want {
			t.Fatalf("pattern %q on %q: RE2 says %v, regexp2 %v (RE2 form %q)", pattern, input, got, want, fp.re.String())
		}
	})
}

// TestFixturePatternsTakeTheFastPath: every pattern of the load workload's
// schemas runs on RE2, so judging that answer never pays for the
// backtracking engine where RE2 gives the same answer.
func TestFixturePatternsTakeTheFastPath(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "bench-fixture", "schema-*.json"))
	if err != nil || len(files) != 2 {
		t.Fatalf("fixture schemas %v (%v), want 2", files, err)
	}
	var patterns []string
	var collect func(v any)
	collect = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if p, ok := e.(string); ok && k == "pattern" {
					patterns = append(patterns, p)
				}
				collect(e)
			}
		case []any:
			for _, e := range v {
				collect(e)
			}
		}
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(text, &doc); err != nil {
			t.Fatal(err)
		}
		collect(doc)
	}
	if len(patterns) != 5 {
		t.Fatalf("found %d patterns in the fixture schemas, want 5: %q", len(patterns), patterns)
	}
	for _, p := range patterns {
		re, err := compilePattern(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if _, ok := re.(*fastPattern); !ok {
			t.Errorf("%q does not take the fast path", p)
		}
	}
}
