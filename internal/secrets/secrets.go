// Package secrets finds credentials of well-known shapes in text: cloud
// access keys, API keys with published prefixes, private-key blocks and
// bearer JWTs. It reads each string once, byte by byte, and looks closer
// only where a byte can begin one of the shapes, so a string that holds
// none costs one pass and no allocation.
package secrets

import (
	"bytes"
	"slices"
)

// Match is one credential found in a string: s[Start:End] is of Kind.
type Match struct {
	Start, End int
	Kind       string
}

// Kinds, as they appear in "[redacted:<kind>]".
const (
	KindAWS        = "aws_access_key"
	KindGitHub     = "github_token"
	KindSlack      = "slack_token"
	KindOpenAI     = "openai_key"
	KindAnthropic  = "anthropic_key"
	KindGoogle     = "google_api_key"
	KindStripe     = "stripe_key"
	KindPrivateKey = "private_key"
	KindJWT        = "jwt"
)

// first gives each byte a credential can begin with a bit, and second the
// bits of the first bytes each byte can follow: a byte pair rules out
// nearly every place in prose with two table reads ("es", "re" and "si"
// are common; "ey", "sk" and "xo" are not), before any prefix is compared.
var first, second = pairTables()

func pairTables() (f, s [256]uint8) {
	pairs := []struct {
		first byte
		next  string
	}{{'A', "KSI"}, {'g', "hi"}, {'x', "o"}, {'s', "k"}, {'r', "k"}, {'-', "-"}, {'e', "y"}}
	for n, p := range pairs {
		bit := uint8(1) << n
		f[p.first] |= bit
		for i := 0; i < len(p.next); i++ {
			s[p.next[i]] |= bit
		}
	}
	return f, s
}

// Contains reports whether s holds a credential.
func Contains(s []byte) bool {
	found := false
	scan(s, func(Match) bool { found = true; return false })
	return found
}

// Find lists the credentials in s, in order, none overlapping. A
// credential found once is found wherever else its text occurs in s, even
// where its surroundings alone would not have marked it (inside a longer
// word), so redacting never leaves a copy behind.
func Find(s []byte) []Match {
	var out []Match
	scan(s, func(m Match) bool { out = append(out, m); return true })
	if len(out) == 0 {
		return nil
	}
	return everyCopy(s, out)
}

// everyCopy adds the other occurrences of each match's text and merges
// what overlaps, in order.
func everyCopy(s []byte, found []Match) []Match {
	all := slices.Clone(found)
	for _, m := range found {
		secret := s[m.Start:m.End]
		for from := 0; ; {
			k := bytes.Index(s[from:], secret)
			if k < 0 {
				break
			}
			at := from + k
			if at != m.Start {
				all = append(all, Match{Start: at, End: at + len(secret), Kind: m.Kind})
			}
			from = at + 1
		}
	}
	slices.SortFunc(all, func(a, b Match) int { return a.Start - b.Start })
	out := all[:1]
	for _, m := range all[1:] {
		last := &out[len(out)-1]
		if m.Start < last.End {
			last.End = max(last.End, m.End)
			continue
		}
		out = append(out, m)
	}
	return out
}

// Redact returns s with each credential replaced by "[redacted:<kind>]"
// in a new slice, and the matches it replaced; s itself when there were
// none.
func Redact(s []byte) ([]byte, []Match) {
	ms := Find(s)
	if len(ms) == 0 {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	last := 0
	for _, m := range ms {
		b = append(b, s[last:m.Start]...)
		b = append(b, "[redacted:"...)
		b = append(b, m.Kind...)
		b = append(b, ']')
		last = m.End
	}
	return append(b, s[last:]...), ms
}

// scan calls fn for each credential until fn returns false.
func scan(s []byte, fn func(Match) bool) {
	for i := 0; i+1 < len(s); i++ {
		c := s[i]
		if first[c]&second[s[i+1]] == 0 || (i > 0 && wordByte(s[i-1]) && c != '-') {
			continue
		}
		end, kind := at(s, i)
		if end <= i {
			continue
		}
		if !fn(Match{Start: i, End: end, Kind: kind}) {
			return
		}
		i = end - 1
	}
}

// at reads the credential that begins at s[i], if any: its end and kind.
func at(s []byte, i int) (int, string) {
	rest := s[i:]
	switch s[i] {
	case 'A':
		if has(rest, "AKIA") || has(rest, "ASIA") {
			return exact(s, i+4, 16, upperDigit), KindAWS
		}
		if has(rest, "AIza") {
			return exact(s, i+4, 35, urlSafe), KindGoogle
		}
	case 'g':
		if has(rest, "github_pat_") {
			return atLeast(s, i+11, 22, word), KindGitHub
		}
		if len(rest) > 4 && rest[0] == 'g' && rest[1] == 'h' && bytes.IndexByte([]byte("pousr"), rest[2]) >= 0 && rest[3] == '_' {
			return atLeast(s, i+4, 36, alnum), KindGitHub
		}
	case 'x':
		if len(rest) > 5 && has(rest, "xox") && bytes.IndexByte([]byte("baprs"), rest[3]) >= 0 && rest[4] == '-' {
			return atLeast(s, i+5, 10, slackByte), KindSlack
		}
	case 's', 'r':
		if has(rest[1:], "k_live_") {
			return atLeast(s, i+8, 16, alnum), KindStripe
		}
		if has(rest, "sk-ant-") {
			return atLeast(s, i+7, 20, urlSafe), KindAnthropic
		}
		if has(rest, "sk-") {
			return atLeast(s, i+3, 20, urlSafe), KindOpenAI
		}
	case '-':
		return privateKey(s, i), KindPrivateKey
	case 'e':
		return jwt(s, i), KindJWT
	}
	return 0, ""
}

// exact is the end of exactly n bytes of class from j, not followed by
// another of the class; 0 when there are not.
func exact(s []byte, j, n int, class func(byte) bool) int {
	end := run(s, j, class)
	if end-j != n {
		return 0
	}
	return end
}

// atLeast is the end of the run of class from j when it is n bytes or
// more; 0 when it is shorter.
func atLeast(s []byte, j, n int, class func(byte) bool) int {
	end := run(s, j, class)
	if end-j < n {
		return 0
	}
	return end
}

func run(s []byte, j int, class func(byte) bool) int {
	for j < len(s) && class(s[j]) {
		j++
	}
	return j
}

const (
	pemBegin = "-----BEGIN "
	pemEnd   = "-----END "
	pemKey   = "PRIVATE KEY-----"
)

// privateKey is the end of a PEM private-key block that begins at s[i]: its
// END line, or the end of s when the block is cut off (a key's first lines
// are as secret as all of it).
func privateKey(s []byte, i int) int {
	rest := s[i:]
	if !has(rest, pemBegin) {
		return 0
	}
	line := rest[len(pemBegin):]
	if nl := bytes.IndexAny(line, "\r\n"); nl >= 0 {
		line = line[:nl]
	}
	if !bytes.HasSuffix(line, []byte(pemKey)) || len(line) > 64 {
		return 0
	}
	body := i + len(pemBegin) + len(line)
	e := bytes.Index(s[body:], []byte(pemEnd))
	if e < 0 {
		return len(s)
	}
	end := body + e + len(pemEnd)
	if k := bytes.Index(s[end:], []byte(pemKey)); k >= 0 && k <= 48 {
		return end + k + len(pemKey)
	}
	return end
}

// jwt is the end of a JWT (header.payload.signature, both JSON parts
// beginning "eyJ") that begins at s[i]; the signature may be empty.
func jwt(s []byte, i int) int {
	if !has(s[i:], "eyJ") {
		return 0
	}
	h := run(s, i+3, urlSafe)
	if h >= len(s) || s[h] != '.' || !has(s[h+1:], "eyJ") {
		return 0
	}
	p := run(s, h+4, urlSafe)
	if p >= len(s) || s[p] != '.' {
		return 0
	}
	return run(s, p+1, urlSafe)
}

func upperDigit(c byte) bool { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
func alnum(c byte) bool      { return upperDigit(c) || c >= 'a' && c <= 'z' }
func word(c byte) bool       { return alnum(c) || c == '_' }
func urlSafe(c byte) bool    { return word(c) || c == '-' }
func slackByte(c byte) bool  { return alnum(c) || c == '-' }

// wordByte says a byte continues a word: a credential's prefix inside a
// longer word ("task-…", "risk_live_…") is not one.
func wordByte(c byte) bool { return word(c) }

// has is bytes.HasPrefix for a constant prefix, without converting it.
func has(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}
