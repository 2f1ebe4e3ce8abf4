package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const minimalYAML = "upstreams: [{url: https://api.openai.com}]\n"

func intp(v int) *int           { return &v }
func floatp(v float64) *float64 { return &v }

func TestParseMinimalGetsEveryDefault(t *testing.T) {
	c, err := Parse([]byte(minimalYAML), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Mode:        ModeEnforce,
		Listen:      "127.0.0.1:8080",
		AdminListen: "127.0.0.1:9091",
		Upstreams: []Upstream{{
			Name:             "upstream0",
			URL:              "https://api.openai.com",
			APIKeyMode:       "if_missing",
			ConnectTimeout:   Duration(10 * time.Second),
			FirstByteTimeout: Duration(120 * time.Second),
			IdleTimeout:      Duration(60 * time.Second),
		}},
		Catalog: Catalog{Mode: "intersect", Unlisted: "allow", Formats: "assert", Strict: "off", MCP: MCPPolicy{Expose: "all", ConfirmTimeout: Duration(2 * time.Minute)}, Results: ResultsPolicy{Secrets: "redact"}, Pins: Pins{OnDrift: "block"}},
		Recovery: Recovery{
			Strategy:            "decision",
			MaxAttempts:         intp(1),
			ConfidenceThreshold: floatp(0.8),
			Shortlist:           intp(20),
			Deadline:            Duration(60 * time.Second),
		},
		Reprompt:   Reprompt{MaxAttempts: intp(1)},
		Abstain:    Abstain{ToolName: "toolgate_no_suitable_tool"},
		Truncated:  "escalate",
		Escalation: Escalation{Mode: "error", ReplayWindow: durationOf(60 * time.Second)},
		Limits:     Limits{MaxRequestBytes: 67108864, MaxResponseBytes: 67108864},
		Approvals:  Approvals{Store: "memory", TTL: Duration(15 * time.Minute), NotifyFormat: "json"},
		Tracing:    Tracing{Protocol: "http/protobuf", SampleRatio: floatp(1)},
		Log:        Log{Level: "info", Format: "json"},
		Shutdown:   Shutdown{Grace: Duration(25 * time.Second)},
	}
	c.src = nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestSetDefaultsKeepsExplicitValues(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(*Config) bool
	}{
		{"zero recovery attempts", "recovery: {max_attempts: 0}", func(c *Config) bool { return *c.Recovery.MaxAttempts == 0 }},
		{"zero reprompt attempts", "reprompt: {max_attempts: 0}", func(c *Config) bool { return *c.Reprompt.MaxAttempts == 0 }},
		{"zero confidence", "recovery: {confidence_threshold: 0}", func(c *Config) bool { return *c.Recovery.ConfidenceThreshold == 0 }},
		{"execute tool substitutable by default", "catalog: {tools: [{name: a}]}", func(c *Config) bool {
			return c.Catalog.Tools[0].Policy == PolicyExecute && *c.Catalog.Tools[0].Substitutable
		}},
		{"confirm tool not substitutable by default", "catalog: {tools: [{name: a, policy: confirm}]}", func(c *Config) bool {
			return !*c.Catalog.Tools[0].Substitutable
		}},
		{"explicit substitutable false", "catalog: {tools: [{name: a, substitutable: false}]}", func(c *Config) bool {
			return !*c.Catalog.Tools[0].Substitutable
		}},
		{"upstream names by index", "upstreams: [{url: 'https://a'}, {url: 'https://b', path_prefix: /b}, {name: c, url: 'https://c', path_prefix: /c}]", func(c *Config) bool {
			return c.Upstreams[0].Name == "upstream0" && c.Upstreams[1].Name == "upstream1" && c.Upstreams[2].Name == "c"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := tt.yaml + "\n"
			if !strings.Contains(y, "upstreams") {
				y += minimalYAML
			}
			c, err := Parse([]byte(y), "c.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("value not kept: %+v", c)
			}
			before := *c
			c.SetDefaults()
			if !reflect.DeepEqual(before, *c) {
				t.Error("SetDefaults is not idempotent")
			}
		})
	}
}

func TestParseFullConfig(t *testing.T) {
	data, err := os.ReadFile("testdata/full/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u := c.Upstreams
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"mode", c.Mode, ModeShadow},
		{"listen", c.Listen, "0.0.0.0:8181"},
		{"admin_listen", c.AdminListen, "127.0.0.1:9191"},
		{"inbound_auth", c.InboundAuth.TokensEnv, "TG_TEST_TOKENS"},
		{"upstream names", []string{u[0].Name, u[1].Name}, []string{"openai", "anthropic"}},
		{"api_paths", u[0].APIPaths, map[string]string{"/openai/deployments/{d}/chat/completions": "chat", "/v2/messages": "messages"}},
		{"api_key_env", u[0].APIKeyEnv, "TG_TEST_OPENAI_KEY"},
		{"api_key_mode", u[0].APIKeyMode, "replace"},
		{"connect_timeout", u[0].ConnectTimeout.D(), 5 * time.Second},
		{"first_byte_timeout", u[0].FirstByteTimeout.D(), 90 * time.Second},
		{"idle_timeout", u[0].IdleTimeout.D(), 30 * time.Second},
		{"path_prefix", u[1].PathPrefix, "/anthropic"},
		{"catalog version", c.Catalog.Version, "v7"},
		{"catalog mode", c.Catalog.Mode, "config"},
		{"unlisted", c.Catalog.Unlisted, "reject"},
		{"strip_prefixes", c.Catalog.StripPrefixes, []string{"default_api:", "functions."}},
		{"files", c.Catalog.Files, []string{"tools_chat.json", "tools_responses.json", "tools_anthropic.yaml"}},
		{"tool origin", c.Catalog.Tools[0].Origin, "config.yaml:30"},
		{"tool parameters", string(c.Catalog.Tools[0].Parameters),
			`{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer","minimum":1}},"required":["order_id","amount_cents"],"additionalProperties":false}`},
		{"tool policy", c.Catalog.Tools[0].Policy, "confirm"},
		{"tool substitutable", *c.Catalog.Tools[0].Substitutable, true},
		{"tool provenance", c.Catalog.Tools[0].Provenance, []string{"/order_id"}},
		{"tool rules", c.Catalog.Tools[0].Rules, []RuleConfig{{Expr: "args.amount_cents <= 100000", Message: "refunds above 1000.00 need a person"}}},
		{"strategy", c.Recovery.Strategy, "correction"},
		{"max_attempts", *c.Recovery.MaxAttempts, 0},
		{"confidence", *c.Recovery.ConfidenceThreshold, 0.5},
		{"shortlist", *c.Recovery.Shortlist, 5},
		{"prompt_file", c.Recovery.PromptFile, "prompt.txt"},
		{"deadline", c.Recovery.Deadline.D(), 30 * time.Second},
		{"reprompt", *c.Reprompt.MaxAttempts, 2},
		{"abstain", c.Abstain, Abstain{Enabled: true, ToolName: "no_tool_fits"}},
		{"truncated", c.Truncated, "pass"},
		{"escalation", c.Escalation, Escalation{Mode: "message", Redact: []string{"/card_number", "/a~1b"}, Sinks: Sinks{
			File: "/tmp/toolgate-escalations.jsonl", Webhook: "https://hooks.example.com/toolgate", WebhookSecretEnv: "TG_TEST_WEBHOOK_SECRET"},
			ReplayWindow: durationOf(30 * time.Second)}},
		{"limits", c.Limits, Limits{MaxRequestBytes: 1 << 20, MaxResponseBytes: 2 << 20}},
		{"log", c.Log, Log{Level: "debug", Format: "console"}},
		{"shutdown", c.Shutdown.Grace.D(), 10 * time.Second},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if !reflect.DeepEqual(ck.got, ck.want) {
				t.Errorf("got %#v, want %#v", ck.got, ck.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// want are substrings the error must contain.
		want []string
	}{
		{"unknown top-level key", minimalYAML + "modes: enforce\n", []string{"modes", "line 2", "unknown field"}},
		{"unknown nested key", "upstreams:\n  - url: https://x\n    timeout: 5s\n", []string{"upstreams[0].timeout", "line 3"}},
		{"wrong type", minimalYAML + "recovery:\n  shortlist: many\n", []string{"recovery.shortlist", "line 3", "expected an integer"}},
		{"fraction for an integer", minimalYAML + "recovery: {max_attempts: 1.5}\n", []string{"recovery.max_attempts", "line 2", "expected an integer"}},
		{"list for a string", minimalYAML + "log: {level: [a]}\n", []string{"log.level", "line 2", "expected a string, got a list"}},
		{"bad duration", "upstreams: [{url: https://x, connect_timeout: soon}]\n", []string{"upstreams[0].connect_timeout", "line 1", "invalid duration"}},
		{"duration without unit", minimalYAML + "shutdown: {grace: 10}\n", []string{"shutdown.grace", "invalid duration"}},
		{"negative duration", minimalYAML + "recovery:\n  deadline: -5s\n", []string{"recovery.deadline", "line 3", "negative"}},
		{"malformed URL", "upstreams: [{url: 'http://[::1'}]\n", []string{"upstreams[0].url", "not a valid URL"}},
		{"relative URL", "upstreams: [{url: api.openai.com/v1}]\n", []string{"upstreams[0].url", "absolute"}},
		{"URL with query", "upstreams: [{url: 'https://x/?a=b'}]\n", []string{"upstreams[0].url", "query"}},
		{"URL with fragment", "upstreams: [{url: 'https://x/#a'}]\n", []string{"upstreams[0].url", "fragment"}},
		{"URL without host", "upstreams: [{url: 'https:///v1'}]\n", []string{"upstreams[0].url", "no host"}},
		{"URL with credentials", "upstreams: [{url: 'https://u:p@x'}]\n", []string{"upstreams[0].url", "credentials"}},
		{"no upstream", "mode: enforce\n", []string{"upstreams", "at least one"}},
		{"path_prefix without slash", "upstreams: [{url: 'https://x', path_prefix: a}]\n", []string{"upstreams[0].path_prefix", "start with"}},
		{"path_prefix with trailing slash", "upstreams: [{url: 'https://x', path_prefix: /a/}]\n", []string{"upstreams[0].path_prefix", "end with"}},
		{"duplicate upstream names", "upstreams: [{name: a, url: 'https://x'}, {name: a, url: 'https://y', path_prefix: /y}]\n", []string{"upstreams[1].name", "upstreams[0]"}},
		{"duplicate prefixes", "upstreams: [{url: 'https://x'}, {url: 'https://y'}]\n", []string{"upstreams[1].path_prefix"}},
		{"api_paths bad kind", "upstreams: [{url: 'https://x', api_paths: {/a: chats}}]\n", []string{`upstreams[0].api_paths["/a"]`, "chats", "chat, messages, responses"}},
		{"api_paths relative key", "upstreams: [{url: 'https://x', api_paths: {a: chat}}]\n", []string{"upstreams[0].api_paths.a", "start with"}},
		{"api_paths empty param", "upstreams: [{url: 'https://x', api_paths: {'/a/{}/b': chat}}]\n", []string{"parameter name"}},
		{"api_paths escape", "upstreams: [{url: 'https://x', api_paths: {'/a/b%20c': chat}}]\n", []string{`upstreams[0].api_paths["/a/b%20c"]`, "only letters"}},
		{"api_paths dot segment", "upstreams: [{url: 'https://x', api_paths: {'/a/../b': chat}}]\n", []string{"segments ending"}},
		{"api_paths empty segment", "upstreams: [{url: 'https://x', api_paths: {'/a//b': chat}}]\n", []string{"empty segments"}},
		{"path_prefix with a space", "upstreams: [{url: 'https://x', path_prefix: '/a b'}]\n", []string{"upstreams[0].path_prefix", "only letters"}},
		{"path_prefix with a parameter", "upstreams: [{url: 'https://x', path_prefix: '/a;v=1'}]\n", []string{"upstreams[0].path_prefix", "only letters"}},
		{"bad mode", minimalYAML + "mode: loud\n", []string{"mode", "line 2", `"loud" is not one of enforce, shadow`}},
		{"bad api_key_mode", "upstreams: [{url: 'https://x', api_key_mode: always}]\n", []string{"upstreams[0].api_key_mode"}},
		{"bad catalog mode", minimalYAML + "catalog: {mode: both}\n", []string{"catalog.mode"}},
		{"bad unlisted", minimalYAML + "catalog: {unlisted: maybe}\n", []string{"catalog.unlisted"}},
		{"bad strategy", minimalYAML + "recovery: {strategy: guess}\n", []string{"recovery.strategy"}},
		{"bad truncated", minimalYAML + "truncated: drop\n", []string{"truncated"}},
		{"bad escalation mode", minimalYAML + "escalation: {mode: email}\n", []string{"escalation.mode"}},
		{"bad log level", minimalYAML + "log: {level: loud}\n", []string{"log.level"}},
		{"bad log format", minimalYAML + "log: {format: xml}\n", []string{"log.format"}},
		{"bad policy", minimalYAML + "catalog: {tools: [{name: a, policy: ask}]}\n", []string{"catalog.tools[0].policy"}},
		{"listen without port", minimalYAML + "listen: localhost\n", []string{"listen", "host:port"}},
		{"admin_listen bad port", minimalYAML + "admin_listen: 'localhost:http'\n", []string{"admin_listen", "port"}},
		{"attempts above limit", minimalYAML + "reprompt: {max_attempts: 11}\n", []string{"reprompt.max_attempts", "between 0 and 10"}},
		{"negative attempts", minimalYAML + "recovery: {max_attempts: -1}\n", []string{"recovery.max_attempts"}},
		{"confidence above 1", minimalYAML + "recovery: {confidence_threshold: 1.5}\n", []string{"recovery.confidence_threshold"}},
		{"shortlist zero", minimalYAML + "recovery: {shortlist: 0}\n", []string{"recovery.shortlist", "at least 1"}},
		{"negative limit", minimalYAML + "limits: {max_request_bytes: -1}\n", []string{"limits.max_request_bytes"}},
		{"empty tool name", minimalYAML + "catalog: {tools: [{description: x}]}\n", []string{"catalog.tools[0].name", "empty"}},
		{"invalid tool name", minimalYAML + "catalog: {tools: [{name: 'a b'}]}\n", []string{"catalog.tools[0].name", "not a valid tool name"}},
		{"duplicate tool names", minimalYAML + "catalog:\n  tools:\n    - name: a\n    - name: a\n", []string{"catalog.tools[1].name", "line 5", "catalog.tools[0]"}},
		{"bad provenance pointer", minimalYAML + "catalog: {tools: [{name: a, provenance: [order_id]}]}\n", []string{"catalog.tools[0].provenance[0]", "JSON pointer"}},
		{"bad tilde in pointer", minimalYAML + "catalog: {tools: [{name: a, provenance: ['/a~2']}]}\n", []string{"catalog.tools[0].provenance[0]", "~"}},
		{"empty rule", minimalYAML + "catalog: {tools: [{name: a, rules: [{message: m}]}]}\n", []string{"catalog.tools[0].rules[0].expr"}},
		{"parameters not an object", minimalYAML + "catalog: {tools: [{name: a, parameters: [1]}]}\n", []string{"catalog.tools[0].parameters", "object"}},
		{"non-string key in parameters", minimalYAML + "catalog:\n  tools:\n    - name: a\n      parameters:\n        1: x\n", []string{"catalog.tools[0].parameters", "not a string"}},
		{"bad redact pointer", minimalYAML + "escalation: {redact: [card]}\n", []string{"escalation.redact[0]"}},
		{"empty strip prefix", minimalYAML + "catalog: {strip_prefixes: ['']}\n", []string{"catalog.strip_prefixes[0]"}},
		{"config mode without tools", minimalYAML + "catalog: {mode: config}\n", []string{"catalog.mode", "needs a catalog"}},
		{"abstain name taken", minimalYAML + "abstain: {enabled: true, tool_name: a}\ncatalog: {tools: [{name: a}]}\n", []string{"abstain.tool_name"}},
		{"bad webhook", minimalYAML + "escalation: {sinks: {webhook: 'hooks.example.com'}}\n", []string{"escalation.sinks.webhook"}},
		{"exposed key without inbound auth", "listen: 0.0.0.0:8080\nupstreams: [{url: 'https://x', api_key_env: KEY}]\n",
			[]string{"inbound_auth.tokens_env", "loopback", "upstreams[0].api_key_env"}},
		{"empty host is exposed", "listen: ':8080'\nupstreams: [{url: 'https://x', api_key_env: KEY}]\n", []string{"inbound_auth.tokens_env"}},
		{"two documents", minimalYAML + "---\nmode: shadow\n", []string{"one YAML document"}},
		{"syntax error", "upstreams: [\n", []string{"invalid config"}},
		{"top level list", "- a\n", []string{"line 1", "expected a mapping"}},
		{"key set twice", "upstreams: [{url: 'https://x'}]\nmode: enforce\nmode: shadow\n", []string{"mode", "line 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "config.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *ConfigError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"minimal", minimalYAML},
		{"loopback with key", "listen: 127.0.0.2:8080\nupstreams: [{url: 'https://x', api_key_env: KEY}]\n"},
		{"localhost with key", "listen: localhost:8080\nupstreams: [{url: 'https://x', api_key_env: KEY}]\n"},
		{"ipv6 loopback with key", "listen: '[::1]:8080'\nupstreams: [{url: 'https://x', api_key_env: KEY}]\n"},
		{"exposed with inbound auth", "listen: 0.0.0.0:8080\ninbound_auth: {tokens_env: T}\nupstreams: [{url: 'https://x', api_key_env: KEY}]\n"},
		{"exposed without key", "listen: 0.0.0.0:8080\n" + minimalYAML},
		{"base path in URL", "upstreams: [{url: 'http://localhost:4000/v1'}]\n"},
		{"chi params in api_paths", "upstreams: [{url: 'https://x', api_paths: {'/openai/deployments/{d}/chat/completions': chat}}]\n"},
		{"empty pointer", minimalYAML + "catalog: {tools: [{name: a, provenance: ['', '/a~0b/~1c']}]}\n"},
		{"comments only and upstream", "# comment\n" + minimalYAML + "# end\n"},
		{"null sections", minimalYAML + "catalog:\nrecovery:\n"},
		{"yaml anchors", "upstreams:\n  - &u {url: 'https://x'}\ncatalog:\n  tools:\n    - {name: a, parameters: &p {type: object}}\n    - {name: b, parameters: *p}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.yaml), "config.yaml"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseReportsAllProblemsTogether(t *testing.T) {
	y := `mode: loud
upstreams:
  - url: ftp://x
    colour: blue
    idle_timeout: 5
recovery:
  max_attempts: 99
catalog:
  tools:
    - name: a
      provenance: [nope]
`
	_, err := Parse([]byte(y), "config.yaml")
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want *ConfigError, got %v", err)
	}
	wantPaths := []string{"mode", "upstreams[0].url", "upstreams[0].colour", "upstreams[0].idle_timeout", "recovery.max_attempts", "catalog.tools[0].provenance[0]"}
	var got []string
	for _, p := range ce.Problems {
		got = append(got, p.Path)
		if p.Line == 0 {
			t.Errorf("problem without line: %v", p)
		}
	}
	if !reflect.DeepEqual(got, wantPaths) {
		t.Errorf("problem paths (in file order)\n got %q\nwant %q", got, wantPaths)
	}
	if n := strings.Count(err.Error(), "\n"); n != len(wantPaths) {
		t.Errorf("want one line per problem, got %d lines:\n%v", n, err)
	}
}

func TestJSONValueFromYAML(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"key order kept", "{b: 1, a: 2, c: 3}", `{"b":1,"a":2,"c":3}`},
		{"ints and floats", "[1, -2, 1.5, 1e3, 0x10, 1_000, +7]", `[1,-2,1.5,1e3,16,1000,7]`},
		{"big integer kept exact", "12345678901234567890123", `12345678901234567890123`},
		{"strings", `[abc, "1", '2', "yes", no, ""]`, `["abc","1","2","yes","no",""]`},
		{"bools and null", "[true, false, null, ~]", `[true,false,null,null]`},
		{"html kept", `"<a> & b"`, `"<a> & b"`},
		{"nested block", "type: object\nproperties:\n  x:\n    type: [string, 'null']\n", `{"type":"object","properties":{"x":{"type":["string","null"]}}}`},
		{"alias", "a: &x {k: v}\nb: *x\n", `{"a":{"k":"v"},"b":{"k":"v"}}`},
		{"timestamp stays text", "2001-12-14", `"2001-12-14"`},
		{"escapes", `"line\nbreak \"q\""`, `"line\nbreak \"q\""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v struct {
				V JSONValue `yaml:"v"`
			}
			if err := yamlUnmarshalStrict("v:\n"+indent(tt.yaml), &v); err != nil {
				t.Fatal(err)
			}
			if string(v.V) != tt.want {
				t.Errorf("got %s, want %s", v.V, tt.want)
			}
		})
	}
	bad := []struct {
		name string
		yaml string
		want string
	}{
		{"int key", "{1: a}", "not a string"},
		{"bool key", "{true: a}", "not a string"},
		{"null key", "{~: a}", "not a string"},
		{"list key", "{[a]: b}", "not a string"},
		{"infinity", ".inf", "no JSON equivalent"},
		{"nan", ".nan", "no JSON equivalent"},
		{"merge key", "a: &x {k: v}\nb: {<<: *x}\n", "merge key"},
		{"duplicate key in nested", "a:\n  k: 1\n  k: 2\n", "twice"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var v struct {
				V JSONValue `yaml:"v"`
			}
			err := yamlUnmarshalStrict("v:\n"+indent(tt.yaml), &v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("want error containing %q, got %v (value %s)", tt.want, err, v.V)
			}
		})
	}
}

func TestJSONValueAliasBombIsBounded(t *testing.T) {
	y := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := 0; i < 12; i++ {
		name := string(rune('b' + i))
		y += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	var v struct {
		V JSONValue `yaml:"v"`
	}
	err := yamlUnmarshalStrict("v:\n"+indent(y), &v)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("want size error, got %v", err)
	}
}

func TestLoadUsesConfigFolder(t *testing.T) {
	setFullEnv(t)
	dir := t.TempDir()
	for _, f := range []string{"config.yaml", "tools_chat.json", "tools_responses.json", "tools_anthropic.yaml", "prompt.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata/full", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Prompt, "[AVAILABLE_TOOLS_CATALOG]") {
		t.Errorf("prompt not read: %q", s.Prompt)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}

func setFullEnv(t *testing.T) {
	t.Helper()
	t.Setenv("TG_TEST_TOKENS", " tok1, ,tok2 ,")
	t.Setenv("TG_TEST_OPENAI_KEY", "sk-test\n")
	t.Setenv("TG_TEST_WEBHOOK_SECRET", "whsec")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(minimalYAML))
	f.Add([]byte(""))
	f.Add([]byte("- a\n"))
	f.Add([]byte("catalog: {tools: [{name: a, parameters: {type: object, 1: x}}]}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("upstreams: [{url: 'https://x', api_paths: {'/a/{d}': chat}, connect_timeout: -1s}]\n"))
	if data, err := os.ReadFile("testdata/full/config.yaml"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err == nil && c == nil {
			t.Fatal("nil config without error")
		}
		if err != nil {
			_ = err.Error()
		}
	})
}

func durationOf(d time.Duration) *Duration {
	v := Duration(d)
	return &v
}

func TestReplayWindow(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml string
		want time.Duration
	}{
		"default": {minimalYAML, DefaultReplayWindow},
		"off":     {minimalYAML + "escalation: {replay_window: 0s}\n", 0},
		"set":     {minimalYAML + "escalation: {replay_window: 5m}\n", 5 * time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "config.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Escalation.ReplayWindow.D(); got != tc.want {
				t.Errorf("replay_window = %s, want %s", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"-1s", "2h"} {
		_, err := Parse([]byte(minimalYAML+"escalation: {replay_window: "+bad+"}\n"), "config.yaml")
		if err == nil || !strings.Contains(err.Error(), "escalation.replay_window") {
			t.Errorf("replay_window %s: err = %v", bad, err)
		}
	}
}
