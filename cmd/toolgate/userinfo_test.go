package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// credentialedConfig is a config whose every URL field carries a user and
// password; pw lists each field with its password.
func credentialedConfig() (yaml string, pw map[string]string) {
	pw = map[string]string{
		"upstreams[0].url":         "upstreamPW1",
		"mcp_servers[0].url":       "mcpPW2",
		"validators[0].url":        "validatorPW3",
		"escalation.sinks.webhook": "webhookPW4",
		"approvals.notify":         "notifyPW5",
		"approvals.store":          "redisPW6",
	}
	u := func(field string) string { return "https://user-" + pw[field] + ":" + pw[field] + "@example.com/x" }
	yaml = "upstreams: [{url: '" + u("upstreams[0].url") + "'}]\n" +
		"mcp_servers: [{name: orders, url: '" + u("mcp_servers[0].url") + "', path_prefix: /mcp/orders}]\n" +
		"validators: [{name: audit, url: '" + u("validators[0].url") + "'}]\n" +
		"escalation: {sinks: {webhook: '" + u("escalation.sinks.webhook") + "'}}\n" +
		"approvals: {notify: '" + u("approvals.notify") + "', store: 'redis://:" + pw["approvals.store"] + "@127.0.0.1:6379/0'}\n"
	return yaml, pw
}

func TestCheckLeavesOutURLCredentials(t *testing.T) {
	yaml, pw := credentialedConfig()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check", "--config", path}, &out, &errb); code != 1 {
		t.Fatalf("check of URLs with credentials: code %d\n%s%s", code, out.String(), errb.String())
	}
	all := out.String() + errb.String()
	for field, secret := range pw {
		if !strings.Contains(all, field) {
			t.Errorf("check does not name %s:\n%s", field, all)
		}
		if strings.Contains(all, secret) {
			t.Errorf("check shows the password of %s:\n%s", field, all)
		}
	}
}
