package catalog

import (
	"strings"
	"testing"
)

// The password and user of a URL the config refuses appear nowhere in the
// error, whichever field held the URL and however the problem quotes it.
func TestConfigErrorsLeaveOutUserinfo(t *testing.T) {
	const user, pass = "alice", "Pa55word-s3cret"
	withCreds := "http://" + user + ":" + pass + "@api.example.com/v1"
	cases := []struct{ name, yaml, path string }{
		{"upstream", "upstreams: [{url: '" + withCreds + "'}]\n", "upstreams[0].url"},
		{"mcp server", minimalYAML + "mcp_servers: [{name: orders, url: '" + withCreds + "', path_prefix: /mcp/orders}]\n", "mcp_servers[0].url"},
		{"validator", minimalYAML + "validators: [{name: audit, url: '" + withCreds + "'}]\n", "validators[0].url"},
		{"webhook sink", minimalYAML + "escalation: {sinks: {webhook: '" + withCreds + "'}}\n", "escalation.sinks.webhook"},
		{"notify", minimalYAML + "approvals: {notify: '" + withCreds + "'}\n", "approvals.notify"},
		{"redis store", minimalYAML + "approvals: {store: 'redis://" + user + ":" + pass + "@127.0.0.1:6379/0'}\n", "approvals.store"},
		{"redis store, no user", minimalYAML + "approvals: {store: 'redis://:" + pass + "@127.0.0.1:6379/0'}\n", "approvals.store"},
		{"no scheme", "upstreams: [{url: '" + user + ":" + pass + "@api.example.com'}]\n", "upstreams[0].url"},
		{"wrong type", "upstreams: [{url: https://api.openai.com, timeout: '" + withCreds + "'}]\n", ""},
		{"unknown key", minimalYAML + "upstream_url: '" + withCreds + "'\n", ""},
		{"quote in password", "upstreams: [{url: 'http://" + user + `:pa"` + pass + "@h.example.com'}]\n", "upstreams[0].url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), "config.yaml")
			if err == nil {
				t.Fatal("a URL with credentials was accepted")
			}
			msg := err.Error()
			if strings.Contains(msg, pass) || strings.Contains(msg, user) {
				t.Errorf("the error shows the credentials:\n%s", msg)
			}
			if !strings.Contains(msg, c.path) {
				t.Errorf("the error does not name %s:\n%s", c.path, msg)
			}
		})
	}
}

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
