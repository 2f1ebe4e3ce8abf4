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
