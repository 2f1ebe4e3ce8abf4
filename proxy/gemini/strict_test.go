package gemini

import (
	"strings"
	"testing"
)

func TestStrictMode(t *testing.T) {
	decl := `"tools":[{"functionDeclarations":[{"name":"a","parameters":{"type":"OBJECT","properties":{"x":{"type":"STRING","nullable":true}},"required":["x"]}}]}]`
	for _, c := range []struct {
		name, body, want string
		client           bool
	}{
		{"no config", `{"contents":[],` + decl + `}`, `{"contents":[],` + decl + `,"toolConfig":{"functionCallingConfig":{"mode":"VALIDATED"}}}`, false},
		{"config without calling config", `{"contents":[],` + decl + `,"toolConfig":{}}`, `{"contents":[],` + decl + `,"toolConfig":{"functionCallingConfig":{"mode":"VALIDATED"}}}`, false},
		{"snake case", `{"contents":[],` + decl + `,"tool_config":{"retrieval_config":{}}}`, `{"contents":[],` + decl + `,"tool_config":{"retrieval_config":{},"function_calling_config":{"mode":"VALIDATED"}}}`, false},
		{"names without mode", `{"contents":[],` + decl + `,"toolConfig":{"functionCallingConfig":{"allowedFunctionNames":["a"]}}}`, `{"contents":[],` + decl + `,"toolConfig":{"functionCallingConfig":{"allowedFunctionNames":["a"],"mode":"VALIDATED"}}}`, false},
		{"client mode", `{"contents":[],` + decl + `,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`, "", true},
	} {
		cd := &codec{}
		if _, err := cd.DecodeRequest("/v1beta/models/m:generateContent", []byte(c.body)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tools := cd.StrictTools()
		if len(tools) != 1 || tools[0].Client != c.client {
			t.Fatalf("%s: tools %+v", c.name, tools)
		}
		// The OpenAPI form is handed over as the JSON Schema it means.
		if string(tools[0].Schema) == "" || !strings.Contains(string(tools[0].Schema), `"null"`) {
			t.Errorf("%s: schema %s", c.name, tools[0].Schema)
		}
		if c.client {
			continue
		}
		out, err := cd.MarkStrict([]string{"a"})
		if err != nil || string(out) != c.want {
			t.Errorf("%s: got %s (%v)\nwant %s", c.name, out, err, c.want)
		}
	}
}
