package secrets

import "strings"

// userinfoMask stands where a URL's userinfo was.
const userinfoMask = "***"

// WithoutUserinfo returns text with the userinfo of every URL in it
// masked: "http://user:pass@host" reads "http://***@host", and a URL
// written without its scheme's slashes ("user:pass@host") loses what
// precedes the "@". Every config problem goes through it when it is
// rendered, whichever field, decoder message or quoted value carried the
// URL, so a password the config refuses never reaches the terminal or the
// log that prints the refusal.
func WithoutUserinfo(text string) string {
	if !strings.Contains(text, "@") {
		return text
	}
	var b strings.Builder
	for rest := text; rest != ""; {
		// A word runs to the next space; quotes and backquotes stay in
		// it, since a quoted URL's userinfo may itself hold a quote.
		i := strings.IndexAny(rest, " \t\n\r")
		if i < 0 {
			i = len(rest)
		}
		b.WriteString(maskWord(rest[:i]))
		if i < len(rest) {
			b.WriteByte(rest[i])
			i++
		}
		rest = rest[i:]
	}
	return b.String()
}

// maskWord masks the userinfo of the URL in one space-free word, if any.
func maskWord(w string) string {
	start := 0
	if i := strings.Index(w, "://"); i >= 0 {
		start = i + 3
	} else if i := strings.IndexAny(w, "\"'`("); i >= 0 && i < strings.IndexByte(w, ':') {
		start = i + 1
	}
	// The authority ends at the path, query or fragment; the userinfo at
	// its last "@".
	end := len(w)
	if i := strings.IndexAny(w[start:], "/?#"); i >= 0 {
		end = start + i
	}
	at := strings.LastIndexByte(w[start:end], '@')
	if at < 0 {
		return w
	}
	if !strings.Contains(w, "://") && !strings.Contains(w[start:start+at], ":") {
		// An address like ops@example.com names nobody's password.
		return w
	}
	return w[:start] + userinfoMask + w[start+at:]
}
