package validate

import "strings"

// Corpus is the text of a request that may vouch for identifiers: what the
// user wrote and what tools returned. Assistant text is never added, so a
// model cannot launder an invented value by saying it first.
type Corpus struct {
	text string
}

// NewCorpus joins the vouching texts of a request.
func NewCorpus(texts []string) *Corpus {
	return &Corpus{text: strings.Join(texts, "\n")}
}

// Seen reports whether token occurs as a whole token: the characters around
// the match must not continue a word, so "ord_1" is not vouched for by
// "ord_12" or "xord_1".
func (c *Corpus) Seen(token string) bool {
	if token == "" || c == nil {
		return false
	}
	s := c.text
	off := 0
	for {
		i := strings.Index(s[off:], token)
		if i < 0 {
			return false
		}
		start := off + i
		end := start + len(token)
		if (start == 0 || !wordByte(s[start-1]) || !wordByte(token[0])) &&
			(end == len(s) || !wordByte(s[end]) || !wordByte(token[len(token)-1])) {
			return true
		}
		off = start + 1
	}
}

// wordByte reports whether b continues an identifier. Bytes of multi-byte
// UTF-8 sequences count as word bytes, so letters of any script do.
func wordByte(b byte) bool {
	return b == '_' || b == '-' || b >= 0x80 ||
		('0' <= b && b <= '9') || ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z')
}
