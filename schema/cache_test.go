package schema

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestSchemaCache(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantErr string
	}{
		{"object", `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"true schema", `true`, ""},
		{"draft 7 declared", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, ""},
		{"does not compile", `{"type":5}`, "metaschema"},
		{"not JSON", `{"type":`, "not valid JSON"},
		{"trailing data", `{} {}`, "not valid JSON"},
		{"remote ref", `{"$ref":"https://example.com/x.json"}`, "external schema references"},
		{"file ref", `{"$ref":"file:///etc/hostname"}`, "external schema references"},
		{"relative ref", `{"$ref":"other.json"}`, "external schema references"},
		{"local ref", `{"$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s"}}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache(8, 1<<20, Options{})
			s1, err1 := c.Get([]byte(tt.text))
			s2, err2 := c.Get([]byte(tt.text))
			if tt.wantErr != "" {
				if err1 == nil || !strings.Contains(err1.Error(), tt.wantErr) {
					t.Fatalf("want error containing %q, got %v", tt.wantErr, err1)
				}
				if err2 != err1 {
					t.Error("error not cached")
				}
				return
			}
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if s1 != s2 {
				t.Error("same text compiled twice")
			}
		})
	}
}

func TestSchemaCacheIsBounded(t *testing.T) {
	t.Run("entries", func(t *testing.T) {
		c := NewCache(4, 1<<20, Options{})
		for i := 0; i < 10; i++ {
			if _, err := c.Get([]byte(fmt.Sprintf(`{"maxLength":%d}`, i))); err != nil {
				t.Fatal(err)
			}
			if c.Len() > 4 {
				t.Fatalf("%d entries", c.Len())
			}
		}
	})
	t.Run("bytes", func(t *testing.T) {
		c := NewCache(100, 64, Options{})
		for i := 0; i < 10; i++ {
			text := fmt.Sprintf(`{"description":"%030d"}`, i)
			if _, err := c.Get([]byte(text)); err != nil {
				t.Fatal(err)
			}
			if c.size > 64 {
				t.Fatalf("%d bytes", c.size)
			}
		}
	})
	t.Run("huge schema not kept", func(t *testing.T) {
		c := NewCache(4, 1<<30, Options{})
		text := `{"description":"` + strings.Repeat("x", CacheMaxKey) + `"}`
		if _, err := c.Get([]byte(text)); err != nil {
			t.Fatal(err)
		}
		if c.Len() != 0 {
			t.Error("huge schema cached")
		}
	})
}

func TestSchemaCacheConcurrent(t *testing.T) {
	c := NewCache(8, 1<<20, Options{})
	text := []byte(`{"type":"object","required":["x"]}`)
	var wg sync.WaitGroup
	got := make([]*jsonschema.Schema, 32)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = c.Get(text)
		}()
	}
	wg.Wait()
	for _, s := range got {
		if s == nil || s != got[0] {
			t.Fatal("concurrent misses compiled different schemas")
		}
	}
}
