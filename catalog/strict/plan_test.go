package strict

import (
	"crypto/sha256"
	"strconv"
	"testing"
)

const (
	fitSchema   = `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`
	unfitSchema = `{"type":"object","properties":{"a":{"type":"string","minLength":1}},"required":["a"]}`
)

func TestStrictMemoryIsBounded(t *testing.T) {
	m := NewMemory()
	first := Tool{Name: "first", Schema: []byte(fitSchema)}
	m.Refuse(OpenAI, first)
	for i := 0; i < maxRefused; i++ {
		m.Refuse(OpenAI, Tool{Name: "t" + strconv.Itoa(i), Schema: []byte(fitSchema)})
	}
	if len(m.refused) != maxRefused || len(m.order) != maxRefused {
		t.Errorf("refused holds %d (order %d), want %d", len(m.refused), len(m.order), maxRefused)
	}
	if m.isRefused(OpenAI, first.Name, sha256.Sum256(first.Schema)) {
		t.Error("the oldest refusal was kept past the bound")
	}
	for i := 0; i < maxFits+10; i++ {
		schema := []byte(`{"type":"object","title":"` + strconv.Itoa(i) + `"}`)
		m.fit(OpenAI, sha256.Sum256(schema), schema)
	}
	if len(m.fits) > maxFits {
		t.Errorf("fits holds %d, bound %d", len(m.fits), maxFits)
	}
}
