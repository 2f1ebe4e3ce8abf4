package schema

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// patternTimeout bounds one match of a pattern that needs the backtracking
// engine. regexp2 checks its deadline against a clock that ticks every
// 100ms, so a match stops between this and about 100ms later.
const patternTimeout = 100 * time.Millisecond

// patternFastPath lets patterns that mean the same in RE2 run on Go's
// regexp, which never backtracks and is several times faster. Benchmarks
// turn it off to measure the other engine on the same schemas.
var patternFastPath = true

// ecmaOptions compile a pattern as JSON Schema asks (ECMA-262 with the "u"
// flag, which is also what Ajv does). A pattern that the "u" grammar refuses
// but the web-compatible grammar of ECMA-262 Annex B accepts (for example
// `\-` outside a class, or `[\w-.]`) is compiled with the latter, as
// `new RegExp(p)` would.
var (
	ecmaUnicode = regexp2.ECMAScript | regexp2.Unicode
	ecmaLegacy  = regexp2.ECMAScript
)

// compilePattern is the RegexpEngine of every schema compiler.
func compilePattern(p string) (jsonschema.Regexp, error) {
	re2Source, fast, err := scanPattern(p)
	if err != nil {
		return nil, err
	}
	backtracking, err := regexp2.Compile(p, ecmaUnicode)
	if err != nil {
		var legacyErr error
		if backtracking, legacyErr = regexp2.Compile(p, ecmaLegacy); legacyErr != nil {
			return nil, err
		}
	}
	if fast && patternFastPath {
		if re, err := regexp.Compile(re2Source); err == nil {
			return &fastPattern{src: p, re: re}, nil
		}
	}
	backtracking.MatchTimeout = patternTimeout
	return &ecmaPattern{src: p, re: backtracking}, nil
}

// fastPattern is a pattern whose every construct means the same in RE2.
type fastPattern struct {
	src string
	re  *regexp.Regexp
}

func (p *fastPattern) MatchString(s string) bool { return p.re.MatchString(s) }
func (p *fastPattern) String() string            { return p.src }

// ecmaPattern runs on regexp2 in ECMAScript mode, with a match timeout.
type ecmaPattern struct {
	src string
	re  *regexp2.Regexp
}

// MatchString cannot return an error through jsonschema's interface, and
// answering false would make a value that was never judged look invalid
// for the wrong reason, while answering true would let a long enough value
// skip the pattern. So a match over budget panics with a *PatternError,
// which Validate and Fast.ValidObject recover: it also stops the rest of
// the validation, so one call costs at most one timeout.
func (p *ecmaPattern) MatchString(s string) bool {
	ok, err := p.re.MatchString(s)
	if err != nil {
		panic(&PatternError{Pattern: p.src, Input: s, Err: err})
	}
	return ok
}

func (p *ecmaPattern) String() string { return p.src }

// errNotECMA names a group syntax that regexp2 takes from .NET but ECMA-262
// has not: compiling it would judge values by a dialect the schema's author
// never wrote for.
var errNotECMA = errors.New("not ECMA-262 regular expression syntax")

// ecmaSpace is ECMA-262's \s (WhiteSpace and LineTerminator) as RE2 class
// items: RE2's own \s lacks \v and every non-ASCII space.
const ecmaSpace = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// ecmaDot is ECMA-262's "." without the s flag: anything but a line
// terminator (RE2's "." only excludes \n).
const ecmaDot = `[^\n\r\x{2028}\x{2029}]`

// scanPattern reads p once. It refuses group syntax that is not ECMA-262
// (regexp2 would otherwise accept .NET's), and, when every construct of p
// means the same in RE2 once \s and "." are spelled out, returns that RE2
// spelling and fast=true. Anything it is unsure of (lookaround, back
// references, \u, \p, \c, class subtleties, literal braces) is left to
// regexp2.
func scanPattern(p string) (re2Source string, fast bool, err error) {
	var b strings.Builder
	fast = true
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			if i+1 >= len(p) {
				return "", false, nil // regexp2 reports it
			}
			n, ok := escapeRE2(p[i+1:], inClass, &b)
			fast = fast && ok
			i += n
		case inClass:
			switch {
			case c == ']':
				inClass = false
			case c == '[':
				fast = false // RE2 reads [: as a POSIX class
			case c == '-' && i+1 < len(p) && p[i+1] == '\\':
				fast = false // a range ending in an escape may be a class escape
			}
			b.WriteByte(c)
		case c == '[':
			inClass = true
			b.WriteByte(c)
			rest := p[i+1:]
			if strings.HasPrefix(rest, "^") {
				rest = rest[1:]
			}
			if strings.HasPrefix(rest, "]") {
				fast = false // ECMA: empty class; RE2: a literal ]
			}
		case c == '(':
			n, ok, gerr := groupStart(p[i+1:])
			if gerr != nil {
				return "", false, gerr
			}
			fast = fast && ok
			b.WriteString(p[i : i+1+n])
			i += n
		case c == '.':
			b.WriteString(ecmaDot)
		case c == '{':
			n := quantifierLen(p[i:])
			if n == 0 {
				fast = false // a literal brace: Annex B only
				b.WriteByte(c)
				continue
			}
			b.WriteString(p[i : i+n])
			i += n - 1
		case c == '}' || c == ']':
			fast = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), fast, nil
}

// escapeRE2 copies the escape at the start of rest (the text after the
// backslash) to b in RE2 form. It returns how many bytes it used and whether
// RE2 reads the escape exactly as ECMA-262 does.
func escapeRE2(rest string, inClass bool, b *strings.Builder) (int, bool) {
	c := rest[0]
	switch {
	case strings.IndexByte("dDwWtnrfv", c) >= 0:
		b.WriteByte('\\')
		b.WriteByte(c)
		return 1, true
	case c == 'b' || c == 'B':
		b.WriteByte('\\')
		b.WriteByte(c)
		return 1, !inClass // [\b] is a backspace in ECMA-262
	case c == 's':
		if inClass {
			b.WriteString(ecmaSpace)
		} else {
			b.WriteString("[" + ecmaSpace + "]")
		}
		return 1, true
	case c == 'S' && !inClass:
		b.WriteString("[^" + ecmaSpace + "]")
		return 1, true
	case c == 'x' && len(rest) >= 3 && isHex(rest[1]) && isHex(rest[2]):
		b.WriteString(`\x`)
		b.WriteString(rest[1:3])
		return 3, true
	case strings.IndexByte(`^$\.*+?()[]{}|/-`, c) >= 0:
		b.WriteByte('\\')
		b.WriteByte(c)
		return 1, true
	}
	b.WriteByte('\\')
	b.WriteByte(c)
	return 1, false
}

// groupStart reads what follows "(" in rest. A capturing group and (?:
// are the same in RE2; lookaround and modifiers are ECMA-262 but left to
// regexp2; named groups are kept for regexp2 too since RE2's names must be
// word characters only. Other "(?" forms are .NET or Perl syntax and
// refused.
func groupStart(rest string) (n int, fast bool, err error) {
	if !strings.HasPrefix(rest, "?") {
		return 0, true, nil
	}
	switch {
	case strings.HasPrefix(rest, "?:"):
		return 2, true, nil
	case strings.HasPrefix(rest, "?="), strings.HasPrefix(rest, "?!"),
		strings.HasPrefix(rest, "?<="), strings.HasPrefix(rest, "?<!"):
		return 0, false, nil
	case strings.HasPrefix(rest, "?<"):
		if end := strings.IndexByte(rest, '>'); end > 2 {
			return 0, false, nil
		}
	case isModifier(rest[1:]):
		return 0, false, nil
	}
	form := rest
	if len(form) > 3 {
		form = form[:3]
	}
	return 0, false, fmt.Errorf("%w: (%s", errNotECMA, form)
}

// isModifier reports whether s starts an ECMA-262 modifiers group, "i-s:"
// and the like: only i, m and s, then a colon (a bare "(?i)" is not ECMA).
func isModifier(s string) bool {
	i := 0
	for i < len(s) && strings.IndexByte("ims-", s[i]) >= 0 {
		i++
	}
	return i > 0 && i < len(s) && s[i] == ':' && s[:i] != "-"
}

// quantifierLen returns the length of a {n}, {n,} or {n,m} quantifier at
// the start of s, or 0 when the brace is a literal.
func quantifierLen(s string) int {
	i := 1
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if digits() == 0 {
		return 0
	}
	if i < len(s) && s[i] == ',' {
		i++
		digits()
	}
	if i < len(s) && s[i] == '}' {
		return i + 1
	}
	return 0
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
