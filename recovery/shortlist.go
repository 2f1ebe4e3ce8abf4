package recovery

import (
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/catalog"
)

// Shortlist returns the n tools most similar to an invented call, best first,
// so a large catalog does not drown the recovery prompt. The ranking is BM25
// over word tokens of each tool's name (weighted up) and description, with the
// query built from the invented name, its argument keys and the user's last
// message. Names are split on snake_case, kebab-case, dots and camelCase, and
// light stemming folds plurals, so "fetch_weathers" meets "get_weather". It is
// deterministic: ties break by name.
func Shortlist(tools []*catalog.Tool, name string, args []byte, userText string, n int) []*catalog.Tool {
	if n >= len(tools) {
		return tools
	}
	query := tokens(name)
	query = append(query, query...) // the invented name says the most
	query = append(query, argKeys(args)...)
	query = append(query, tokens(userText)...)

	type doc struct {
		t     *catalog.Tool
		terms map[string]int
		size  int
	}
	docs := make([]doc, len(tools))
	df := map[string]int{}
	total := 0
	for i, t := range tools {
		terms := map[string]int{}
		nameToks := tokens(t.Name)
		for _, w := range nameToks {
			terms[w] += 3
		}
		descToks := tokens(t.Description)
		for _, w := range descToks {
			terms[w]++
		}
		size := 3*len(nameToks) + len(descToks)
		docs[i] = doc{t: t, terms: terms, size: size}
		total += size
		for w := range terms {
			df[w]++
		}
	}
	avg := float64(total) / float64(len(docs))
	if avg == 0 {
		avg = 1
	}
	const k1, b = 1.2, 0.75
	scores := make([]float64, len(docs))
	nd := float64(len(docs))
	for i, d := range docs {
		var s float64
		for _, q := range query {
			tf := float64(d.terms[q])
			if tf == 0 {
				continue
			}
			idf := math.Log(1 + (nd-float64(df[q])+0.5)/(float64(df[q])+0.5))
			s += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(d.size)/avg))
		}
		scores[i] = s
	}
	idx := make([]int, len(docs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, c int) bool {
		if scores[idx[a]] != scores[idx[c]] {
			return scores[idx[a]] > scores[idx[c]]
		}
		return docs[idx[a]].t.Name < docs[idx[c]].t.Name
	})
	out := make([]*catalog.Tool, n)
	for i := 0; i < n; i++ {
		out[i] = docs[idx[i]].t
	}
	return out
}

// tokens splits text into lower-case word stems.
func tokens(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, stem(strings.ToLower(string(cur))))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			// camelCase: a capital after a lower-case letter starts a word.
			if unicode.IsUpper(r) && i > 0 && unicode.IsLower(rs[i-1]) {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
	}
	flush()
	return out
}

// stem folds the commonest English plural and verb endings.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "es") && strings.ContainsAny(w[len(w)-3:len(w)-2], "sxz"):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

// argKeys returns the tokens of the top-level keys of a JSON object, without
// decoding values (which may be large and are not needed).
func argKeys(args []byte) []string {
	var out []string
	depth := 0
	inStr := false
	esc := false
	start := -1
	for i, c := range args {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 1 && start >= 0 {
					// A key is a string followed by a colon.
					rest := args[i+1:]
					for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r') {
						rest = rest[1:]
					}
					if len(rest) > 0 && rest[0] == ':' {
						out = append(out, tokens(string(args[start:i]))...)
					}
				}
				start = -1
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			start = i + 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	return out
}
