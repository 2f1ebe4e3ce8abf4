package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/catalog/strict"
)

// TestStrictCorpusAsGeneratedNow: the pinned generators of test/node-schemas,
// run now, still emit schemas that the strict check judges as it judges the
// copy in catalog/strict/testdata/strict; the openai package's zodFunction output
// fits OpenAI's subset, as its own strict helper must.
func TestStrictCorpusAsGeneratedNow(t *testing.T) {
	node := needNodeIn(t, "node-schemas", "zod", "zod-to-json-schema", "zod4", "@sinclair/typebox",
		"valibot", "@valibot/to-json-schema", "openai", "ai")
	type corpus []struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	var now, stored corpus
	if err := json.Unmarshal(runNodeIn(t, node, "node-schemas", "gen.mjs", 60*time.Second), &now); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "catalog", "strict", "testdata", "strict", "generated.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	byName := map[string]json.RawMessage{}
	for _, c := range stored {
		byName[c.Name] = c.Schema
	}
	helpers := 0
	for _, c := range now {
		old, ok := byName[c.Name]
		if !ok {
			t.Errorf("%s: not in catalog/strict/testdata/strict/generated.json; copy the generator's output there", c.Name)
			continue
		}
		for _, p := range strict.Providers {
			if got, want := strict.Check(p, c.Schema), strict.Check(p, old); got != want {
				t.Errorf("%s for %s: judged %+v now, %+v in the stored copy", c.Name, p, got, want)
			}
		}
		if strings.HasPrefix(c.Name, "openai_zodfunction_") {
			helpers++
			if f := strict.Check(strict.OpenAI, c.Schema); !f.OK {
				t.Errorf("%s: OpenAI's own strict helper's output judged unfit: %s", c.Name, f.Reason)
			}
		}
	}
	if helpers == 0 {
		t.Error("the corpus has no zodFunction output")
	}
}
