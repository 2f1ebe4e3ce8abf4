package catalog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/schema"
)

// firstDialectPattern is the first pattern of the schema engine's ECMA-262
// dialect cases (Zod's email pattern).
func firstDialectPattern(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "schema", "testdata", "ecma262-patterns.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Pattern string `json:"pattern"`
	}
	if err := json.Unmarshal(data, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("dialect cases: %v", err)
	}
	return cases[0].Pattern
}

// TestCatalogSchemaErrors: in the config catalog a schema toolgate cannot
// compile stays a config error the operator can fix, while every valid
// ECMA-262 pattern (Zod's email one among them) compiles.
func TestCatalogSchemaErrors(t *testing.T) {
	zodEmail := firstDialectPattern(t)
	quoted, _ := json.Marshal(zodEmail)
	cases := []struct {
		name, params, wantErr string
	}{
		{"zod email pattern", `{"type":"object","properties":{"email":{"type":"string","pattern":` + string(quoted) + `}}}`, ""},
		{"lookbehind", `{"type":"object","properties":{"v":{"type":"string","pattern":"(?<=\\$)\\d+"}}}`, ""},
		{"invalid regex", `{"type":"object","properties":{"v":{"type":"string","pattern":"(unclosed"}}}`, "schema does not compile"},
		{".NET inline flags", `{"type":"object","properties":{"v":{"type":"string","pattern":"(?i)abc"}}}`, "not ECMA-262"},
		{"remote $ref", `{"$ref":"https://schemas.example.com/order.json"}`, "external schema references"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			yaml := "upstreams:\n  - url: https://api.example.com\ncatalog:\n  tools:\n    - name: t\n      parameters: " + c.params + "\n"
			cfg, err := Parse([]byte(yaml), "config.yaml")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(cfg, t.TempDir())
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

// TestCatalogFormatsSetting: catalog.formats takes assert or annotate, and
// anything else is a config error at that field.
func TestCatalogFormatsSetting(t *testing.T) {
	for _, v := range []string{"assert", "annotate"} {
		if _, err := Parse([]byte("upstreams:\n  - url: https://api.example.com\ncatalog:\n  formats: "+v+"\n"), "config.yaml"); err != nil {
			t.Errorf("formats %s: %v", v, err)
		}
	}
	_, err := Parse([]byte("upstreams:\n  - url: https://api.example.com\ncatalog:\n  formats: strict\n"), "config.yaml")
	if err == nil || !strings.Contains(err.Error(), "catalog.formats") {
		t.Errorf("formats strict: err = %v, want one naming catalog.formats", err)
	}
}

// TestReportSchemaErrorOnce: an uncompilable request schema is reported
// once per text, across requests and even when the cache does not keep
// it (a schema over the cache's key limit); a compiled one never.
func TestReportSchemaErrorOnce(t *testing.T) {
	snap := &Snapshot{schemas: schema.NewCache(8, 1<<20, schema.Options{})}
	huge := `{"description":"` + strings.Repeat("x", schema.CacheMaxKey) + `","$ref":"https://example.com/x.json"}`
	for _, text := range []string{`{"$ref":"https://example.com/once.json"}`, huge} {
		var firsts int
		var hash string
		for range 3 {
			var tool Tool
			snap.requestTool(&tool, Offered{Name: "t", Parameters: []byte(text)})
			h, first := tool.ReportSchemaError()
			if h == "" || (hash != "" && h != hash) {
				t.Fatalf("hash %q, then %q", hash, h)
			}
			hash = h
			if first {
				firsts++
			}
		}
		if firsts != 1 {
			t.Errorf("reported %d times, want once", firsts)
		}
	}
	var ok Tool
	snap.requestTool(&ok, Offered{Name: "t", Parameters: []byte(`{"type":"object"}`)})
	if h, first := ok.ReportSchemaError(); h != "" || first {
		t.Errorf("a compiled schema reports %q, %v", h, first)
	}
}
