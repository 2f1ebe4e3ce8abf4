package secrets

import (
	"strings"
	"testing"
)

func TestWithoutUserinfo(t *testing.T) {
	for in, want := range map[string]string{
		`"http://u:p@h/x" must not carry credentials`: `"http://***@h/x" must not carry credentials`,
		"redis://:p@h:6379/0":                         "redis://***@h:6379/0",
		"http://u@h":                                  "http://***@h",
		"http://h/a@b":                                "http://h/a@b",
		`"u:p@h" must be an absolute http:// URL`:     `"***@h" must be an absolute http:// URL`,
		"mail ops@example.com about it":               "mail ops@example.com about it",
		"no url here":                                 "no url here",
		"http://u:p@a and https://v:q@b":              "http://***@a and https://***@b",
		"http://u:a@b@h":                              "http://***@h",
	} {
		if got := WithoutUserinfo(in); got != want {
			t.Errorf("WithoutUserinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzWithoutUserinfo: whatever the text, masking never panics, keeps
// every byte of a text without "@", and a URL's password built into the
// text never survives it.
func FuzzWithoutUserinfo(f *testing.F) {
	for _, s := range []string{"http://u:p@h/x", `"u:p@h" x`, "a@b", "://@", "x://a@b@c/d?e#f", "\"http://u:pa\\\"ss@h\"", ""} {
		f.Add(s, "s3cret")
	}
	f.Fuzz(func(t *testing.T, text, pass string) {
		out := WithoutUserinfo(text)
		if !strings.Contains(text, "@") && out != text {
			t.Fatalf("text without @ changed: %q -> %q", text, out)
		}
		if pass == "" || strings.ContainsAny(pass, " \t\n\r/?#@") {
			return
		}
		for _, quote := range []string{"", `"`, "`"} {
			msg := text + " " + quote + "https://user:" + pass + "@host.example/p" + quote + " " + text
			if got := WithoutUserinfo(msg); strings.Contains(got, "user:"+pass+"@") {
				t.Fatalf("the password survived: %q -> %q", msg, got)
			}
		}
	})
}
