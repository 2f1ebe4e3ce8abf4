package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// startLogged starts the config at path with its log observed.
func startLogged(t *testing.T, path string) (*App, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	a, err := Start(path, Options{Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return a, logs
}

// A rejected reload's log line names every URL field the config refused
// for its credentials, and shows none of them.
func TestReloadLogLeavesOutURLCredentials(t *testing.T) {
	up := upstreamOK(t)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(configText(up.URL, "v1")), 0o644); err != nil {
		t.Fatal(err)
	}
	a, logs := startLogged(t, path)
	pw := map[string]string{
		"upstreams[0].url":         "upstreamPW1",
		"mcp_servers[0].url":       "mcpPW2",
		"validators[0].url":        "validatorPW3",
		"escalation.sinks.webhook": "webhookPW4",
		"approvals.notify":         "notifyPW5",
		"approvals.store":          "redisPW6",
	}
	u := func(field string) string { return "https://user-" + pw[field] + ":" + pw[field] + "@example.com/x" }
	bad := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n" +
		"upstreams: [{url: '" + u("upstreams[0].url") + "'}]\n" +
		"mcp_servers: [{name: orders, url: '" + u("mcp_servers[0].url") + "', path_prefix: /mcp/orders}]\n" +
		"validators: [{name: audit, url: '" + u("validators[0].url") + "'}]\n" +
		"escalation: {sinks: {webhook: '" + u("escalation.sinks.webhook") + "'}}\n" +
		"approvals: {notify: '" + u("approvals.notify") + "', store: 'redis://:" + pw["approvals.store"] + "@127.0.0.1:6379/0'}\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil {
		t.Fatal("URLs with credentials were accepted")
	}
	lines := logs.FilterMessageSnippet("config reload rejected").All()
	if len(lines) != 1 {
		t.Fatalf("%d reload-rejected log lines", len(lines))
	}
	var text strings.Builder
	for _, e := range logs.All() {
		text.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			text.WriteString(" " + k + "=")
			if s, ok := v.(string); ok {
				text.WriteString(s)
			}
		}
		text.WriteString("\n")
	}
	for field, secret := range pw {
		if !strings.Contains(text.String(), field) {
			t.Errorf("the reload log does not name %s:\n%s", field, text.String())
		}
		if strings.Contains(text.String(), secret) {
			t.Errorf("the reload log shows the password of %s:\n%s", field, text.String())
		}
	}
}
