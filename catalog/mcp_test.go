package catalog

import (
	"encoding/json"
	"strings"
	"testing"
)

const mcpYAML = "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: orders, url: 'http://127.0.0.1:9400/mcp', path_prefix: /mcp/orders}]\n"

func mcpTwo(second string) string {
	return "upstreams: [{url: 'https://x'}]\nmcp_servers:\n  - {name: orders, url: 'http://a', path_prefix: /mcp/orders}\n  - " + second + "\n"
}

func TestParseRejectsMCP(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"no name", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{url: 'http://a', path_prefix: /m}]\n", []string{"mcp_servers[0].name", "line 2"}},
		{"duplicate name", mcpTwo("{name: orders, url: 'http://b', path_prefix: /mcp/b}"), []string{"mcp_servers[1].name", "mcp_servers[0]"}},
		{"bad url", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'ftp://a', path_prefix: /m}]\n", []string{"mcp_servers[0].url", "http"}},
		{"url with credentials", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://u:p@a', path_prefix: /m}]\n", []string{"mcp_servers[0].url", "credentials"}},
		{"no prefix", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a'}]\n", []string{"mcp_servers[0].path_prefix", "must be set"}},
		{"prefix of a model route", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /v1/messages}]\n", []string{"mcp_servers[0].path_prefix", "upstreams[0]"}},
		{"prefix of an upstream", "upstreams: [{url: 'https://x', path_prefix: /anthropic}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /anthropic}]\n", []string{"mcp_servers[0].path_prefix", "upstreams[0].path_prefix"}},
		{"prefix of an api_path", "upstreams: [{url: 'https://x', api_paths: {/x/chat: chat}}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /x/chat}]\n", []string{"mcp_servers[0].path_prefix", "api_paths"}},
		{"duplicate prefix", mcpTwo("{name: b, url: 'http://b', path_prefix: /mcp/orders}"), []string{"mcp_servers[1].path_prefix", "mcp_servers[0]"}},
		{"dot segment", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /mcp/../x}]\n", []string{"mcp_servers[0].path_prefix", "plain path"}},
		{"bad expose", mcpYAML + "catalog: {mcp: {expose: some}}\n", []string{"catalog.mcp.expose"}},
		{"unknown mcp key", mcpYAML + "catalog: {mcp: {hide: all}}\n", []string{"catalog.mcp.hide"}},
		{"entry of no server", mcpYAML + "catalog: {tools: [{name: billing/refund}]}\n", []string{"catalog.tools[0].name", "billing"}},
		{"bad max_streams", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, max_streams: -1}]\n", []string{"mcp_servers[0].max_streams"}},
		{"origin with a path", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, allowed_origins: ['https://app.example.com/x']}]\n", []string{"mcp_servers[0].allowed_origins[0]", "nothing after it"}},
		{"origin without a scheme", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, allowed_origins: [app.example.com]}]\n", []string{"mcp_servers[0].allowed_origins[0]", "must be an origin"}},
		{"wildcard origin", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, allowed_origins: ['https://*.example.com']}]\n", []string{"mcp_servers[0].allowed_origins[0]", "wildcards"}},
		{"host with a scheme", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, allowed_hosts: ['http://gate']}]\n", []string{"mcp_servers[0].allowed_hosts[0]", "host:port"}},
		{"host with a bad port", "upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, allowed_hosts: ['gate:99999']}]\n", []string{"mcp_servers[0].allowed_hosts[0]", "port"}},
		{"exposed with a key", "listen: 0.0.0.0:8080\nupstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, api_key_env: K}]\n", []string{"inbound_auth.tokens_env", "mcp_servers[0].api_key_env"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "config.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func compileMCP(t *testing.T, extra string, env map[string]string) *Snapshot {
	t.Helper()
	c, err := Parse([]byte(mcpYAML+extra), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := compile(c, "", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMCPDefaultsAndKeys(t *testing.T) {
	s := compileMCP(t, "", nil)
	m := s.Config.MCPServers[0]
	if m.ConnectTimeout.D() != DefaultConnectTimeout || m.IdleTimeout.D() != DefaultMCPIdleTimeout || m.MaxStreams != DefaultMCPMaxStreams ||
		s.Config.Catalog.MCP.Expose != ExposeAll || s.Config.Catalog.MCP.ConfirmTimeout.D() != DefaultMCPConfirmTimeout {
		t.Fatalf("defaults %+v %+v", m, s.Config.Catalog.MCP)
	}
	c, _ := Parse([]byte("upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, api_key_env: K}]\n"), "c.yaml")
	if _, err := compile(c, "", func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "mcp_servers[0].api_key_env") {
		t.Fatalf("a missing key: %v", err)
	}
	c, _ = Parse([]byte("upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, api_key_env: K}]\n"), "c.yaml")
	s, err := compile(c, "", func(string) (string, bool) { return " k1\n", true })
	if err != nil || s.Secrets.MCPKeys["a"] != "k1" {
		t.Fatalf("key %v %v", s.Secrets.MCPKeys, err)
	}
}

func listed(name, input string, destructive bool) MCPTool {
	return MCPTool{Name: name, InputSchema: json.RawMessage(input), Destructive: destructive,
		Raw: json.RawMessage(`{"name":"` + name + `","inputSchema":` + input + `}`)}
}

func TestMCPSet(t *testing.T) {
	entries := "catalog:\n  tools:\n    - name: orders/refund\n      policy: confirm\n      parameters: {type: object, properties: {amount: {maximum: 10}}}\n" +
		"      rules: [{expr: 'args.amount > 0', message: positive}]\n"
	tools := []MCPTool{listed("refund", `{"type":"object","required":["amount"]}`, false), listed("wipe", `{"type":"object"}`, true)}

	s := compileMCP(t, entries, nil)
	if len(s.Tools) != 0 || len(s.Names) != 0 || s.MCPTools["orders/refund"] == nil {
		t.Fatalf("a server/tool entry leaked into the model catalog: %v %v", s.Names, s.MCPTools)
	}
	set := s.MCPSet("orders", tools)
	refund, _, _ := set.Eff.Lookup("refund")
	if refund == nil || refund.Policy != PolicyConfirm || len(refund.Rules) != 1 || set.Input["refund"] == nil || set.Labels["refund"] != "orders/refund" {
		t.Fatalf("refund %+v input %v", refund, set.Input)
	}
	if w, _, _ := set.Eff.Lookup("wipe"); w == nil || w.Policy != PolicyExecute {
		t.Fatalf("wipe %+v", w)
	}

	s = compileMCP(t, entries+"  mcp: {expose: catalog, confirm_destructive: true}\n", nil)
	set = s.MCPSet("orders", tools)
	if _, st, _ := set.Eff.Lookup("wipe"); st != Unknown || !set.Hidden["wipe"] || strings.Join(set.Visible, ",") != "refund" {
		t.Fatalf("expose catalog: %v %v", set.Visible, set.Hidden)
	}
	s = compileMCP(t, "catalog: {mcp: {confirm_destructive: true}}\n", nil)
	if w, _, _ := s.MCPSet("orders", tools).Eff.Lookup("wipe"); w == nil || w.Policy != PolicyConfirm {
		t.Fatalf("destructiveHint did not make wipe a confirm tool: %+v", w)
	}

	v1 := s.MCPSet("orders", tools).Version
	if v2 := s.MCPSet("orders", []MCPTool{tools[1], tools[0]}).Version; v2 != v1 {
		t.Fatal("the version depends on the order of the list")
	}
	if v3 := s.MCPSet("orders", tools[:1]).Version; v3 == v1 {
		t.Fatal("a changed tool list kept its version")
	}
}

func TestMCPAllowedOriginsAndHosts(t *testing.T) {
	c, err := Parse([]byte("upstreams: [{url: 'https://x'}]\nmcp_servers: [{name: a, url: 'http://a', path_prefix: /m, "+
		"allowed_origins: ['https://app.example.com', 'http://[::1]:3000'], allowed_hosts: [gate.internal, 'gate.internal:8080', '[fd00::1]:80']}]\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := c.MCPServers[0]
	if len(m.AllowedOrigins) != 2 || m.AllowedOrigins[0] != "https://app.example.com" || len(m.AllowedHosts) != 3 {
		t.Fatalf("read %+v", m)
	}
}
