// Package lint finds catalog weaknesses that make models call the wrong
// tool: missing descriptions, descriptions too alike to tell apart, and
// checks that point at arguments the schema does not have.
package lint

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/catalog"
)

// SimilarityThreshold is the word-set overlap above which two descriptions
// are reported as confusable.
const SimilarityThreshold = 0.75

// Catalog returns human-readable warnings about the snapshot's catalog,
// in a stable order.
func Catalog(s *catalog.Snapshot) []string {
	var out []string
	names := append([]string(nil), s.Names...)
	sort.Strings(names)
	for _, n := range names {
		t := s.Tools[n]
		if strings.TrimSpace(t.Description) == "" {
			out = append(out, fmt.Sprintf("tool %s has no description; models pick tools by their descriptions", n))
		}
		props := schemaProperties(t.Parameters)
		for _, p := range t.Provenance {
			if !pointerInSchema(t.Parameters, p) {
				out = append(out, fmt.Sprintf("tool %s: provenance pointer %s is not a property of its schema", n, p))
			}
		}
		for _, r := range t.Rules {
			for _, ref := range r.ArgKeys {
				if props != nil && !props[ref] {
					out = append(out, fmt.Sprintf("tool %s: rule %q reads args.%s, which its schema does not define", n, r.Expr, ref))
				}
			}
		}
	}
	for i := 0; i < len(names); i++ {
		for j := i + 1; j < len(names); j++ {
			a, b := s.Tools[names[i]], s.Tools[names[j]]
			if a.Description == "" || b.Description == "" {
				continue
			}
			if sim := Similarity(a.Description, b.Description); sim >= SimilarityThreshold {
				out = append(out, fmt.Sprintf("tools %s and %s have near-identical descriptions (similarity %.2f); a model may confuse them", names[i], names[j], sim))
			}
		}
	}
	return out
}

var wordRE = regexp.MustCompile(`[a-z0-9]+`)

// Similarity is the Jaccard overlap of two texts' word sets, 0 to 1.
func Similarity(a, b string) float64 {
	wordsA := map[string]bool{}
	for _, w := range wordRE.FindAllString(strings.ToLower(a), -1) {
		wordsA[w] = true
	}
	wordsB := map[string]bool{}
	for _, w := range wordRE.FindAllString(strings.ToLower(b), -1) {
		wordsB[w] = true
	}
	if len(wordsA) == 0 || len(wordsB) == 0 {
		return 0
	}
	inter := 0
	for w := range wordsA {
		if wordsB[w] {
			inter++
		}
	}
	return float64(inter) / float64(len(wordsA)+len(wordsB)-inter)
}

type schemaNode struct {
	Properties map[string]json.RawMessage `json:"properties"`
	Items      json.RawMessage            `json:"items"`
}

// schemaProperties lists the top-level properties, or nil when the schema
// does not declare them (then nothing can be said).
func schemaProperties(schema []byte) map[string]bool {
	var n schemaNode
	if json.Unmarshal(schema, &n) != nil || n.Properties == nil {
		return nil
	}
	out := map[string]bool{}
	for k := range n.Properties {
		out[k] = true
	}
	return out
}

// pointerInSchema follows a JSON pointer through properties and items.
func pointerInSchema(schema []byte, ptr string) bool {
	if ptr == "" {
		return true
	}
	cur := schema
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var n schemaNode
		if json.Unmarshal(cur, &n) != nil {
			return false
		}
		if next, ok := n.Properties[tok]; ok {
			cur = next
			continue
		}
		if len(n.Items) > 0 && isIndex(tok) {
			cur = n.Items
			continue
		}
		return false
	}
	return true
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
