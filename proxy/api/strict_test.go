package api

import "testing"

func TestToolNamed(t *testing.T) {
	names := []string{"web_search", "", "get_order"}
	for _, c := range []struct{ text, want string }{
		{"tools[2].function.parameters Invalid schema", "get_order"},
		{"tools.0.custom.input_schema: For 'strict' tools, additionalProperties must be false", "web_search"},
		{"tools[1].type: server tool", ""},
		{"tools[9].function", ""},
		{"Invalid schema for function 'get_order': In context=()", "get_order"},
		{`function "web_search" is not allowed`, "web_search"},
		{"prompt is too long", ""},
		{"tools[", ""},
	} {
		if got := ToolNamed(c.text, names); got != c.want {
			t.Errorf("ToolNamed(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
