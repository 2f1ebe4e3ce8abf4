package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// compileYAML parses y and compiles it in a folder holding files, with env
// as the whole environment.
func compileYAML(t *testing.T, y string, files map[string]string, env map[string]string) (*Snapshot, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Parse([]byte(y), "config.yaml")
	if err != nil {
		return nil, err
	}
	return compile(c, dir, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func mustCompileYAML(t *testing.T, y string) *Snapshot {
	t.Helper()
	s, err := compileYAML(t, y, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCompileFullConfig(t *testing.T) {
	setFullEnv(t)
	s, err := Load("testdata/full/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"get_current_weather", "get_order", "get_stock_price", "issue_refund", "search_docs"}
	if !reflect.DeepEqual(s.Names, wantNames) {
		t.Errorf("names: got %v, want %v", s.Names, wantNames)
	}
	if len(s.Tools) != len(wantNames) {
		t.Errorf("tools map has %d entries", len(s.Tools))
	}
	for _, n := range wantNames {
		if tool := s.Tools[n]; tool == nil || tool.Schema == nil || tool.FromRequest {
			t.Errorf("tool %s: %+v", n, tool)
		}
	}
	refund := s.Tools["issue_refund"]
	if refund.Policy != PolicyConfirm || !refund.Substitutable || len(refund.Rules) != 1 || !reflect.DeepEqual(refund.Provenance, []string{"/order_id"}) {
		t.Errorf("issue_refund: %+v", refund)
	}
	if w := s.Tools["get_current_weather"]; w.Policy != PolicyExecute || !w.Substitutable || w.Description != "Get the current weather in a given location" {
		t.Errorf("file tool: %+v", w)
	}
	if s.Version != "v7" {
		t.Errorf("version %q", s.Version)
	}
	wantSecrets := Secrets{
		UpstreamKeys:  map[string]string{"openai": "sk-test"},
		InboundTokens: []string{"tok1", "tok2"},
		WebhookSecret: "whsec",
	}
	if !reflect.DeepEqual(s.Secrets, wantSecrets) {
		t.Errorf("secrets: got %+v", s.Secrets)
	}
	if !strings.HasPrefix(s.Prompt, "The tool [HALLUCINATED_TOOL_NAME]") {
		t.Errorf("prompt %q", s.Prompt)
	}
}

func TestToolFileFormats(t *testing.T) {
	const schema = `{"type":"object","properties":{"q":{"type":"string"}}}`
	tests := []struct {
		name    string
		content string
		want    []ToolConfig
	}{
		{"openai chat", `[{"type":"function","function":{"name":"a","description":"d","parameters":` + schema + `,"strict":true}}]`,
			[]ToolConfig{{Name: "a", Description: "d", Parameters: JSONValue(schema), Origin: "f[0]"}}},
		{"openai responses", `[{"type":"function","name":"a","description":"d","parameters":` + schema + `}]`,
			[]ToolConfig{{Name: "a", Description: "d", Parameters: JSONValue(schema), Origin: "f[0]"}}},
		{"anthropic", `[{"name":"a","description":"d","input_schema":` + schema + `,"cache_control":{"type":"ephemeral"}}]`,
			[]ToolConfig{{Name: "a", Description: "d", Parameters: JSONValue(schema), Origin: "f[0]"}}},
		{"anthropic custom type", `[{"type":"custom","name":"a","input_schema":` + schema + `}]`,
			[]ToolConfig{{Name: "a", Parameters: JSONValue(schema), Origin: "f[0]"}}},
		{"object with tools", `{"model":"m","tools":[{"name":"a","input_schema":` + schema + `}]}`,
			[]ToolConfig{{Name: "a", Parameters: JSONValue(schema), Origin: "f[0]"}}},
		{"yaml", "- name: a\n  description: d\n  input_schema:\n    type: object\n    properties:\n      q: {type: string}\n",
			[]ToolConfig{{Name: "a", Description: "d", Parameters: JSONValue(schema), Origin: "f[0]"}}},
		{"toolgate shape", `[{"name":"a","parameters":` + schema + `}, {"name":"b"}]`,
			[]ToolConfig{{Name: "a", Parameters: JSONValue(schema), Origin: "f[0]"}, {Name: "b", Origin: "f[1]"}}},
		{"other tool types skipped", `[{"type":"web_search_preview"},{"type":"custom","name":"c","custom":{}},{"type":"function","name":"a"}]`,
			[]ToolConfig{{Name: "a", Origin: "f[2]"}}},
		{"empty list", `[]`, nil},
		{"gemini", `{"tools":[{"functionDeclarations":[{"name":"a","description":"d","parameters":{"type":"OBJECT","properties":{"q":{"type":"STRING"}},"propertyOrdering":["q"]}},{"name":"b","parametersJsonSchema":` + schema + `},{"name":"c"}]},{"googleSearch":{}}]}`,
			[]ToolConfig{
				{Name: "a", Description: "d", Parameters: JSONValue(schema), Origin: "f[0].functionDeclarations[0]"},
				{Name: "b", Parameters: JSONValue(schema), Origin: "f[0].functionDeclarations[1]"},
				{Name: "c", Parameters: JSONValue(`{"type":"object","properties":{},"additionalProperties":false}`), Origin: "f[0].functionDeclarations[2]"},
			}},
		// As the Python SDK writes them: proto field names.
		{"gemini snake_case", `{"tools":[{"function_declarations":[{"name":"b","parameters_json_schema":` + schema + `}]},{"code_execution":{}}]}`,
			[]ToolConfig{{Name: "b", Parameters: JSONValue(schema), Origin: "f[0].functionDeclarations[0]"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseToolFile([]byte(tt.content), "f")
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i].Parameters != nil {
					got[i].Parameters = JSONValue(compactJSON(got[i].Parameters))
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	bad := []struct {
		name    string
		content string
		want    string
	}{
		{"scalar", `42`, "expected a list"},
		{"object without tools", `{"a":1}`, "expected a list"},
		{"entry not an object", `[1]`, "f[0]: not a tool"},
		{"entry without name", `[{"type":"function","function":{"description":"x"}}]`, "f[0]: tool has no name"},
		{"function with other type", `[{"type":"custom","function":{"name":"a"}}]`, "f[0]"},
		{"neither json nor yaml", "a: [\n", "neither JSON nor YAML"},
		{"empty object entry", `[{}]`, "not a tool"},
		{"gemini without name", `[{"functionDeclarations":[{"description":"x"}]}]`, "f[0].functionDeclarations[0]: tool has no name"},
		{"gemini both spellings", `[{"functionDeclarations":[{"name":"a"}],"function_declarations":[{"name":"b"}]}]`, "both functionDeclarations and function_declarations"},
		{"gemini both schema spellings", `[{"functionDeclarations":[{"name":"a","parametersJsonSchema":{},"parameters_json_schema":{}}]}]`, "both parametersJsonSchema and parameters_json_schema"},
		{"gemini bad schema", `[{"functionDeclarations":[{"name":"a","parameters":{"type":"MAP"}}]}]`, "f[0].functionDeclarations[0]: parameters"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseToolFile([]byte(tt.content), "f")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("want error containing %q, got %v", tt.want, err)
			}
		})
	}
}

func TestCompileRejects(t *testing.T) {
	const up = "upstreams: [{url: 'https://x'}]\n"
	const toolA = `[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}}]`
	tests := []struct {
		name  string
		yaml  string
		files map[string]string
		env   map[string]string
		want  []string
	}{
		{"duplicate config and file", up + "catalog:\n  tools:\n    - name: a\n  files: [tools.json]\n",
			map[string]string{"tools.json": toolA}, nil,
			[]string{"catalog.files[0]", `tool "a"`, "tools.json[0]", "config.yaml:4"}},
		{"duplicate across files", up + "catalog: {files: [one.json, two.json]}\n",
			map[string]string{"one.json": toolA, "two.json": toolA}, nil,
			[]string{"catalog.files[1]", "two.json[0]", "one.json[0]"}},
		{"schema does not compile", up + "catalog:\n  tools:\n    - name: a\n      parameters: {type: object, properties: {n: {type: 5}}}\n", nil, nil,
			[]string{"catalog.tools[0].parameters", "line 5", `tool "a"`, "does not compile"}},
		{"schema in file does not compile", up + "catalog: {files: [t.json]}\n",
			map[string]string{"t.json": `[{"name":"b","input_schema":{"type":"object","minimum":"x"}}]`}, nil,
			[]string{"catalog.files[0]", `tool "b"`, "t.json[0]", "does not compile"}},
		{"external ref refused", up + "catalog: {tools: [{name: a, parameters: {$ref: 'https://example.com/s.json'}}]}\n", nil, nil,
			[]string{"catalog.tools[0].parameters", "external schema references"}},
		{"file ref refused", up + "catalog: {tools: [{name: a, parameters: {$ref: 'file:///etc/passwd'}}]}\n", nil, nil,
			[]string{"catalog.tools[0].parameters", "external schema references"}},
		{"bad CEL", up + "catalog: {tools: [{name: a, rules: [{expr: 'args.n <'}]}]}\n", nil, nil,
			[]string{"catalog.tools[0].rules[0].expr", `tool "a"`, "args.n <", "Syntax error"}},
		{"non-bool CEL", up + "catalog: {tools: [{name: a, rules: [{expr: 'args.n + 1'}]}]}\n", nil, nil,
			[]string{"catalog.tools[0].rules[0].expr", "must be a bool expression"}},
		{"dyn CEL", up + "catalog: {tools: [{name: a, rules: [{expr: 'args.flag'}]}]}\n", nil, nil,
			[]string{"catalog.tools[0].rules[0].expr", "dyn", "== true"}},
		{"undeclared CEL variable", up + "catalog: {tools: [{name: a, rules: [{expr: 'amount < 5'}]}]}\n", nil, nil,
			[]string{"catalog.tools[0].rules[0].expr", "undeclared reference"}},
		{"missing api key env", "upstreams: [{url: 'https://x', api_key_env: NOPE}]\n", nil, nil,
			[]string{"upstreams[0].api_key_env", "NOPE", "not set"}},
		{"tokens env without tokens", up + "inbound_auth: {tokens_env: TOK}\n", nil, map[string]string{"TOK": " , ,"},
			[]string{"inbound_auth.tokens_env", "no tokens"}},
		{"tokens env unset", up + "inbound_auth: {tokens_env: TOK}\n", nil, nil,
			[]string{"inbound_auth.tokens_env", "no tokens"}},
		{"webhook secret missing", up + "escalation: {sinks: {webhook: 'https://h', webhook_secret_env: WH}}\n", nil, nil,
			[]string{"escalation.sinks.webhook_secret_env", "WH"}},
		{"prompt file missing", up + "recovery: {prompt_file: nope.txt}\n", nil, nil,
			[]string{"recovery.prompt_file", "nope.txt"}},
		{"prompt file empty", up + "recovery: {prompt_file: p.txt}\n", map[string]string{"p.txt": "\n  \n"}, nil,
			[]string{"recovery.prompt_file", "empty"}},
		{"prompt file is a device", up + "recovery: {prompt_file: /dev/zero}\n", nil, nil,
			[]string{"recovery.prompt_file", "/dev/zero", "not a regular file"}},
		{"tool file is a directory", up + "catalog: {files: [/]}\n", nil, nil,
			[]string{"catalog.files[0]", "not a regular file"}},
		{"tool file missing", up + "catalog: {files: [gone.json]}\n", nil, nil,
			[]string{"catalog.files[0]", "gone.json"}},
		{"invalid tool name in file", up + "catalog: {files: [t.json]}\n", map[string]string{"t.json": `[{"name":"a b"}]`}, nil,
			[]string{"catalog.files[0]", "t.json[0]", "name"}},
		{"config mode with empty files", up + "catalog: {mode: config, files: [t.json]}\n", map[string]string{"t.json": `[]`}, nil,
			[]string{"catalog.files", "no function tools"}},
		{"abstain name in file", up + "abstain: {enabled: true}\ncatalog: {files: [t.json]}\n",
			map[string]string{"t.json": `[{"name":"toolgate_no_suitable_tool"}]`}, nil,
			[]string{"catalog.files[0]", "abstain.tool_name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compileYAML(t, tt.yaml, tt.files, tt.env)
			if err == nil {
				t.Fatal("accepted")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *ConfigError: %v", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if strings.Count(err.Error(), "\n") != len(ce.Problems) {
				t.Errorf("a problem spans several lines:\n%v", err)
			}
		})
	}
}

func TestCompileReportsAllProblemsTogether(t *testing.T) {
	y := `upstreams: [{url: 'https://x', api_key_env: NOPE}]
catalog:
  tools:
    - name: a
      parameters: {type: 7}
    - name: b
      rules: [{expr: "args.x +"}]
`
	_, err := compileYAML(t, y, nil, nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
}

func TestCompileValidatesConfigBuiltInCode(t *testing.T) {
	if _, err := Compile(&Config{}, ""); err == nil || !strings.Contains(err.Error(), "upstreams") {
		t.Errorf("want the missing upstream reported, got %v", err)
	}
	s, err := Compile(&Config{Upstreams: []Upstream{{URL: "https://x"}}, Catalog: Catalog{Tools: []ToolConfig{{Name: "a"}}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if tool := s.Tools["a"]; tool == nil || tool.Schema != nil || tool.Policy != PolicyExecute {
		t.Errorf("tool without parameters: %+v", tool)
	}
	if _, err := Compile(nil, ""); err == nil {
		t.Error("nil config accepted")
	}
}

func TestCatalogVersion(t *testing.T) {
	const up = "upstreams: [{url: 'https://x'}]\n"
	const tools = "catalog:\n  tools:\n    - name: a\n      description: first\n      parameters: {type: object, properties: {n: {type: integer}}}\n    - name: b\n"
	base := mustCompileYAML(t, up+tools).Version

	// Pinned so that an accidental change to the encoding, which would
	// split every dashboard at the next deploy, fails here.
	if base != "77183036a5ff" {
		t.Errorf("version of the reference catalog is %s, was 77183036a5ff", base)
	}
	tests := []struct {
		name string
		yaml string
		same bool
		want string
	}{
		{"same input", up + tools, true, ""},
		{"tools in another order", up + "catalog:\n  tools:\n    - name: b\n    - name: a\n      description: first\n      parameters: {type: object, properties: {n: {type: integer}}}\n", true, ""},
		{"block style parameters", up + "catalog:\n  tools:\n    - name: a\n      description: first\n      parameters:\n        type: object\n        properties:\n          n:\n            type: integer\n    - name: b\n", true, ""},
		{"explicit defaults", up + strings.Replace(tools, "- name: b\n", "- name: b\n      policy: execute\n      substitutable: true\n", 1), true, ""},
		{"changed description", up + strings.Replace(tools, "first", "second", 1), false, ""},
		{"changed schema", up + strings.Replace(tools, "integer", "number", 1), false, ""},
		{"changed policy", up + strings.Replace(tools, "- name: b\n", "- name: b\n      policy: confirm\n", 1), false, ""},
		{"added rule", up + strings.Replace(tools, "- name: b\n", "- name: b\n      rules: [{expr: 'true'}]\n", 1), false, ""},
		{"added provenance", up + strings.Replace(tools, "- name: b\n", "- name: b\n      provenance: [/x]\n", 1), false, ""},
		{"explicit version wins", up + tools + "  version: release-42\n", false, "release-42"},
		{"empty catalog", up, false, "request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustCompileYAML(t, tt.yaml).Version
			switch {
			case tt.want != "" && v != tt.want:
				t.Errorf("version %q, want %q", v, tt.want)
			case tt.same && v != base:
				t.Errorf("version %q, want %q", v, base)
			case !tt.same && v == base:
				t.Errorf("version did not change: %q", v)
			case tt.want == "" && len(v) != 12:
				t.Errorf("version %q is not 12 hex digits", v)
			}
		})
	}
}

func TestCompiledToolParametersAreCompact(t *testing.T) {
	s := mustCompileYAML(t, "upstreams: [{url: 'https://x'}]\ncatalog:\n  tools:\n    - name: a\n      parameters:\n        type: object\n        required: [x]\n")
	got := string(s.Tools["a"].Parameters)
	if got != `{"type":"object","required":["x"]}` {
		t.Errorf("parameters %s", got)
	}
	if !json.Valid(s.Tools["a"].Parameters) {
		t.Error("invalid JSON")
	}
}
