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
// message. Names are split on snake_case, kebab-case, dots and camelCase, light
// stemming folds plurals and verb synonyms fold onto one verb, so
// "fetch_weathers" meets "get_weather". A word of the invented name that no
// tool uses is read as a typo of the catalog word one or two edits away, and
// the character-trigram similarity of the whole names is added as a smaller
// second signal, which separates tools that share every word ("weather" is
// closer to get_weather than to get_weather_alerts). It is deterministic:
// ties break by name.
func Shortlist(tools []*catalog.Tool, name string, args []byte, userText string, n int) []*catalog.Tool {
	if n >= len(tools) {
		return tools
	}
	nameQuery := tokens(name)

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
	nameQuery = correctTypos(nameQuery, df)
	query := append(nameQuery, nameQuery...) // the invented name says the most
	query = append(query, argKeys(args)...)
	query = append(query, tokens(userText)...)

	avg := float64(total) / float64(len(docs))
	if avg == 0 {
		avg = 1
	}
	const k1, b = 1.2, 0.75
	queryGrams := trigrams(name)
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
		scores[i] = s + nameWeight*dice(queryGrams, trigrams(d.t.Name))
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

// nameWeight scales the trigram similarity of names (0 to 1) against BM25
// scores, where one shared rare word is worth about 5 to 10: enough to order
// tools that match the same words, or to find a name garbled beyond its
// words, but not to beat a tool that shares a real word the others lack.
const nameWeight = 4

// verbClass folds verbs that models use interchangeably in tool names onto
// one, so "fetch_weather", "retrieve_weather" and "get_weather" share their
// verb. Only clear synonyms fold: get and list stay apart, as do create and
// update, since telling those apart is what picks the right tool.
var verbClass = map[string]string{
	"fetch": "get", "retrieve": "get", "lookup": "get", "read": "get", "show": "get",
	"obtain": "get", "load": "get", "view": "get", "describe": "get",
	"find": "search", "seek": "search",
	"add": "create", "new": "create", "make": "create", "insert": "create",
	"edit": "update", "modify": "update", "change": "update", "patch": "update",
	"remove": "delete", "destroy": "delete", "erase": "delete", "del": "delete",
	"enumerate": "list",
}

// correctTypos replaces each word that no tool uses by the catalog word
// nearest to it, when that is a likely typo: one edit for short words, two
// for long ones. Ties go to the alphabetically first word, so the result
// does not depend on map order.
func correctTypos(words []string, vocab map[string]int) []string {
	var sorted []string
	done := map[string]string{} // a long invented name may repeat a word
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = w
		if vocab[w] > 0 || len(w) < 4 {
			continue
		}
		if c, ok := done[w]; ok {
			out[i] = c
			continue
		}
		if sorted == nil {
			sorted = make([]string, 0, len(vocab))
			for v := range vocab {
				sorted = append(sorted, v)
			}
			sort.Strings(sorted)
		}
		limit := 1
		if len(w) >= 8 {
			limit = 2
		}
		best, bestD := "", limit+1
		for _, v := range sorted {
			if d := editDistance(w, v, limit); d < bestD {
				best, bestD = v, d
			}
		}
		if best != "" {
			out[i] = best
		}
		done[w] = out[i]
	}
	return out
}

// editDistance is the optimal-string-alignment distance between a and b
// (insertions, deletions, substitutions and swaps of neighbours, the usual
// typos), or limit+1 when it exceeds limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	if prev[len(b)] > limit {
		return limit + 1
	}
	return prev[len(b)]
}

// trigrams returns the character trigrams of a name with case and
// separators removed, so getWeather, get_weather and get-weather agree.
func trigrams(name string) map[string]struct{} {
	var rs []rune
	for _, r := range name {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			rs = append(rs, unicode.ToLower(r))
		}
	}
	out := make(map[string]struct{}, len(rs))
	for i := 0; i+3 <= len(rs); i++ {
		out[string(rs[i:i+3])] = struct{}{}
	}
	return out
}

// dice is the Sørensen–Dice similarity of two trigram sets, from 0 to 1.
func dice(a, b map[string]struct{}) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	common := 0
	for g := range a {
		if _, ok := b[g]; ok {
			common++
		}
	}
	return 2 * float64(common) / float64(len(a)+len(b))
}

// tokens splits text into lower-case word stems, with verb synonyms folded.
func tokens(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			w := stem(strings.ToLower(string(cur)))
			if c, ok := verbClass[w]; ok {
				w = c
			}
			out = append(out, w)
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
