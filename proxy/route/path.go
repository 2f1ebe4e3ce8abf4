package route

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Path forms for the guard (route.go): the canonical form toolgate routes
// on, and the loose form the most lenient server could read a path as.

// pathByte marks the bytes a canonical path holds unescaped: RFC 3986
// pchar (unreserved, sub-delims, ":" and "@") and "/".
var pathByte = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/") {
		t[c] = true
	}
	return t
}()

func unreservedByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const upperHex = "0123456789ABCDEF"

// escapeAt decodes the escape at p[i] ("%41"), if there is one.
func escapeAt(p string, i int) (byte, bool) {
	if i+2 >= len(p) || p[i] != '%' {
		return 0, false
	}
	hi, ok1 := unhex(p[i+1])
	lo, ok2 := unhex(p[i+2])
	return hi<<4 | lo, ok1 && ok2
}

// CanonicalPath is the RFC 3986 §6.2.2 normal form of an escaped request
// path: escapes of unreserved characters decoded ("%73" is "s"), other
// escapes in upper case, and every byte a path may not hold raw escaped.
// Every server reads the result as the same resource as the input, so it is
// what toolgate routes on and, for a judged route, what it sends upstream.
// Slashes, dot segments and case are left alone: servers disagree on them,
// so the guard refuses them instead. A canonical path comes back as is.
func CanonicalPath(p string) string {
	i := 0
	for i < len(p) && p[i] != '%' && pathByte[p[i]] {
		i++
	}
	if i == len(p) {
		return p
	}
	b := make([]byte, 0, len(p)+8)
	b = append(b, p[:i]...)
	for ; i < len(p); i++ {
		c := p[i]
		if v, ok := escapeAt(p, i); ok {
			if unreservedByte(v) {
				b = append(b, v)
			} else {
				b = append(b, '%', upperHex[v>>4], upperHex[v&15])
			}
			i += 2
			continue
		}
		if c != '%' && pathByte[c] {
			b = append(b, c)
			continue
		}
		// A lone "%" is escaped too: it stands for itself.
		b = append(b, '%', upperHex[c>>4], upperHex[c&15])
	}
	return string(b)
}

// ---- loose form ----

// What it took to turn a path into its loose form; each maps to a refusal.
const (
	looseSeparator = 1 << iota
	looseDot
	looseSlashes
	looseTrailing
	looseParameter
	looseSpace
	looseEncoding
)

// looseReasons are the flags in the order their reason is reported.
var looseReasons = []struct {
	flag   int
	reason Reason
}{
	{looseSeparator, refuseSeparator}, {looseDot, refuseDotSegment}, {looseSlashes, refuseSlashes},
	{looseTrailing, refuseTrailingSlash}, {looseParameter, refuseParameter}, {looseSpace, refuseWhitespace},
	{looseEncoding, refuseEncoding},
}

func reasonOf(flags int) Reason {
	for _, r := range looseReasons {
		if flags&r.flag != 0 {
			return r.reason
		}
	}
	return refuseCase
}

// looseForm is a path as the most lenient server could read it: escapes
// decoded (repeatedly), backslashes as slashes, overlong UTF-8 and
// fullwidth forms as ASCII, anything after a decoded "?", "#" or NUL
// dropped, control characters removed, ";params" and surrounding spaces
// and trailing dots cut from each segment, dot segments resolved and empty
// segments dropped. Letter case is folded when it is compared (matchFold).
type looseForm struct {
	path  string
	flags int
	// above: a ".." climbed over the root, out of the upstream's base path.
	above bool
}

// looseForms holds a path's loose forms. Where servers read a path two
// ways, each way is a form: a decoded NUL ends the path or is deleted, and
// an empty segment (as sent, or left by cleaning) is merged away or kept,
// where a "{param}" may match it.
type looseForms struct {
	f [4]looseForm
	n int
}

func (l *looseForms) all() []looseForm { return l.f[:l.n] }

func (l *looseForms) add(p string, flags int) {
	f, dropped := resolveLoose(p, flags, false)
	l.f[l.n] = f
	l.n++
	if dropped {
		l.f[l.n], _ = resolveLoose(p, flags, true)
		l.n++
	}
}

// loosen returns the loose forms of p, a canonical path.
func loosen(p string) looseForms {
	if plainPath(p) {
		return looseForms{f: [4]looseForm{{path: p}}, n: 1}
	}
	var l looseForms
	dec, flags := decodeLoose(p)
	if nul := strings.IndexByte(dec, 0); nul >= 0 {
		l.add(dec[:nul], flags|looseSpace)
		l.add(strings.ReplaceAll(dec, "\x00", ""), flags|looseSpace)
		return l
	}
	l.add(dec, flags)
	return l
}

// plainPath reports a canonical path that is its own loose form, the
// common case, found without allocating: no escapes, no ";", no empty,
// dot or dot-ended segment.
func plainPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	if p == "/" {
		return true
	}
	if strings.IndexByte(p, '%') >= 0 || strings.IndexByte(p, ';') >= 0 {
		return false
	}
	for rest := p[1:]; ; {
		seg := rest
		i := strings.IndexByte(rest, '/')
		if i >= 0 {
			seg = rest[:i]
		}
		if seg == "" || seg[len(seg)-1] == '.' {
			return false
		}
		if i < 0 {
			return true
		}
		rest = rest[i+1:]
	}
}

// decodeLoose decodes every escape, up to three levels deep, and maps
// byte sequences lenient servers read as ASCII onto it.
func decodeLoose(p string) (string, int) {
	flags := 0
	for round := 0; round < 4 && strings.IndexByte(p, '%') >= 0; round++ {
		var b strings.Builder
		changed := false
		for i := 0; i < len(p); i++ {
			v, ok := escapeAt(p, i)
			if !ok {
				b.WriteByte(p[i])
				continue
			}
			changed = true
			switch {
			case round > 0:
				flags |= looseEncoding
			case v == '/' || v == '\\' || v == '?' || v == '#':
				flags |= looseSeparator
			default:
				flags |= looseEncoding
			}
			b.WriteByte(v)
			i += 2
		}
		p = b.String()
		if !changed {
			break
		}
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		c := p[i]
		if c == '\\' {
			flags |= looseSeparator
			b.WriteByte('/')
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b.WriteByte(c)
			i++
			continue
		}
		if a, n := asciiLookalike(p[i:]); n > 0 {
			flags |= looseEncoding
			if a == '\\' {
				a = '/'
			}
			b.WriteByte(a)
			i += n
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), flags
}

// asciiLookalike reads an overlong UTF-8 encoding of an ASCII character or
// a fullwidth form (U+FF01 to U+FF5E) at the start of s: decoders that are
// lenient or normalise (NFKC) read them as the ASCII character.
func asciiLookalike(s string) (byte, int) {
	switch {
	case len(s) >= 2 && (s[0] == 0xC0 || s[0] == 0xC1) && s[1]&0xC0 == 0x80:
		return (s[0]&0x1F)<<6 | s[1]&0x3F, 2
	case len(s) >= 3 && s[0] == 0xE0 && s[1]&0xE0 == 0x80 && s[2]&0xC0 == 0x80:
		return (s[1]&0x3F)<<6 | s[2]&0x3F, 3
	case len(s) >= 4 && s[0] == 0xF0 && s[1]&0xF0 == 0x80 && s[2]&0xC0 == 0x80 && s[3]&0xC0 == 0x80:
		return (s[2]&0x3F)<<6 | s[3]&0x3F, 4
	}
	if r, n := utf8.DecodeRuneInString(s); r >= 0xFF01 && r <= 0xFF5E {
		return byte(r - 0xFF01 + 0x21), n
	}
	return 0, 0
}

// resolveLoose ends the path at a decoded "?" or "#", removes control
// characters, cleans each segment and resolves dot segments. Empty
// segments are dropped, or kept with keepEmpty; dropped reports any.
func resolveLoose(p string, flags int, keepEmpty bool) (f looseForm, dropped bool) {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p, flags = p[:i], flags|looseSeparator
	}
	if strings.IndexFunc(p, isControl) >= 0 {
		p, flags = strings.Map(func(r rune) rune {
			if isControl(r) {
				return -1
			}
			return r
		}, p), flags|looseSpace
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		if i == 0 && seg == "" {
			continue // the leading slash
		}
		if j := strings.IndexByte(seg, ';'); j >= 0 {
			seg, flags = seg[:j], flags|looseParameter
		}
		if t := strings.TrimSpace(seg); t != seg {
			seg, flags = t, flags|looseSpace
		}
		if t := strings.TrimRight(seg, "."); t != seg && t != "" {
			seg, flags = t, flags|looseDot
		}
		switch seg {
		case "":
			if i == len(segs)-1 {
				flags |= looseTrailing
			} else {
				flags |= looseSlashes
			}
			dropped = true
			if keepEmpty {
				out = append(out, "")
			}
		case ".":
			flags |= looseDot
		case "..":
			flags |= looseDot
			if len(out) == 0 {
				f.above = true
			} else {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	f.path, f.flags = "/"+strings.Join(out, "/"), flags
	return f, dropped
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7F }

// ---- folded matching ----

// foldRune maps r to the lower-case ASCII letter it folds to, if any: "K"
// and the Kelvin sign both give "k", "S" and the long s "ſ" give "s".
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return foldRune(f)
		}
	}
	return r
}

// foldPrefix reports whether s begins with lit (lower case) under folding,
// and the bytes of s that took.
func foldPrefix(s, lit string) (int, bool) {
	i := 0
	for j := 0; j < len(lit); j++ {
		if i >= len(s) {
			return 0, false
		}
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		if foldRune(r) != rune(lit[j]) {
			return 0, false
		}
		i += n
	}
	return i, true
}

// foldSuffix is foldPrefix from the end.
func foldSuffix(s, lit string) (int, bool) {
	i := len(s)
	for j := len(lit) - 1; j >= 0; j-- {
		if i <= 0 {
			return 0, false
		}
		r, n := rune(s[i-1]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeLastRuneInString(s[:i])
		}
		if foldRune(r) != rune(lit[j]) {
			return 0, false
		}
		i -= n
	}
	return len(s) - i, true
}

// patternSeg is one segment of a route pattern: a literal, or a "{param}"
// with the literal text around it ("{model}:generateContent"), folded.
type patternSeg struct {
	param          bool
	before, after  string
	exactB, exactA string // the same, as written, to spell the path to use
	name           string // "{model}"
}

func parsePattern(p string) []patternSeg {
	var segs []patternSeg
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s == "" {
			continue
		}
		i, j := strings.IndexByte(s, '{'), strings.IndexByte(s, '}')
		if i >= 0 && j > i {
			segs = append(segs, patternSeg{param: true, before: strings.ToLower(s[:i]), after: strings.ToLower(s[j+1:]),
				exactB: s[:i], exactA: s[j+1:], name: s[i : j+1]})
			continue
		}
		segs = append(segs, patternSeg{before: strings.ToLower(s), exactB: s})
	}
	return segs
}

// matchFold matches a loose path against a pattern under case folding.
// When spell is set it returns the path to use: the pattern as written,
// its parameters filled from the path.
func matchFold(path string, pat []patternSeg, spell bool) (string, bool) {
	rest := strings.TrimPrefix(path, "/")
	var b strings.Builder
	for k, ps := range pat {
		if rest == "" && k < len(pat) {
			return "", false
		}
		seg := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		n, ok := foldPrefix(seg, ps.before)
		if !ok {
			return "", false
		}
		if !ps.param {
			if n != len(seg) {
				return "", false
			}
			if spell {
				b.WriteString("/" + ps.exactB)
			}
			continue
		}
		m, ok := foldSuffix(seg[n:], ps.after)
		if !ok {
			return "", false
		}
		if spell {
			// A value that is no plain segment is named by its placeholder.
			v := seg[n : len(seg)-m]
			if v == "" || v == "." || v == ".." || url.PathEscape(v) != v {
				v = ps.name
			}
			b.WriteString("/" + ps.exactB + v + ps.exactA)
		}
	}
	if rest != "" {
		return "", false
	}
	return b.String(), true
}
