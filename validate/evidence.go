package validate

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Corpus is the text of a request that may vouch for identifiers: what the
// user wrote and what tools returned. Assistant text is never added, so a
// model cannot launder an invented value by saying it first.
type Corpus struct {
	texts []string
	once  sync.Once
	text  string
}

// NewCorpus keeps the vouching texts of a request. They are joined and
// searched only when a provenance check first asks: most requests call no
// tool with provenance pointers, and they should not pay for it.
func NewCorpus(texts []string) *Corpus {
	return &Corpus{texts: texts}
}

func (c *Corpus) build() {
	parts := make([]string, 0, len(c.texts))
	for _, t := range c.texts {
		parts = append(parts, t)
		parts = appendJSONStrings(parts, t)
	}
	c.text = strings.Join(parts, "\n")
	c.texts = nil
}

// appendJSONStrings adds the decoded strings of a text that is JSON. Tool
// results are often JSON whose encoder escaped characters (Python's
// json.dumps writes "José" as "Jos\u00e9"), so the raw text does not contain
// the value the tool actually returned. Without a backslash nothing was
// escaped and the raw text already holds every string as it is.
func appendJSONStrings(dst []string, text string) []string {
	t := strings.TrimSpace(text)
	if t == "" || (t[0] != '{' && t[0] != '[') || !strings.Contains(t, `\`) {
		return dst
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return dst
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			dst = append(dst, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			// Sorted, so a token spanning two pieces matches or not the
			// same way on every run.
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				dst = append(dst, k)
				walk(v[k])
			}
		}
	}
	walk(v)
	return dst
}

// Seen reports whether token occurs as a whole token: the characters around
// the match must not continue a word, so "ord_1" is not vouched for by
// "ord_12" or "xord_1".
func (c *Corpus) Seen(token string) bool {
	if token == "" || c == nil {
		return false
	}
	c.once.Do(c.build)
	first, _ := utf8.DecodeRuneInString(token)
	last, _ := utf8.DecodeLastRuneInString(token)
	s := c.text
	off := 0
	for {
		i := strings.Index(s[off:], token)
		if i < 0 {
			return false
		}
		start := off + i
		end := start + len(token)
		before, _ := utf8.DecodeLastRuneInString(s[:start])
		after, _ := utf8.DecodeRuneInString(s[end:])
		if (start == 0 || !wordRune(before) || !wordRune(first)) &&
			(end == len(s) || !wordRune(after) || !wordRune(last)) {
			return true
		}
		off = start + 1
	}
}

// wordRune reports whether r continues an identifier. Letters, digits and
// combining marks of any script do; punctuation, spaces and symbols of any
// script (curly quotes, em dashes, no-break spaces, CJK brackets) do not.
func wordRune(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}
