package anthropic

import (
	"strings"
	"testing"
)

func TestStrictToolsAndMarks(t *testing.T) {
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[` +
		`{"type":"web_search_20250305","name":"web_search"},` +
		`{"name":"a","input_schema":{"type":"object"}},` +
		`{"name":"b","input_schema":{"type":"object"},"strict":true}]}`
	c := &codec{}
	if _, err := c.DecodeRequest("", []byte(body)); err != nil {
		t.Fatal(err)
	}
	tools := c.StrictTools()
	if len(tools) != 2 || tools[0].Name != "a" || tools[0].Client || !tools[1].Client {
		t.Fatalf("tools %+v", tools)
	}
	out, err := c.MarkStrict([]string{"a", "b", "web_search"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(body, `"input_schema":{"type":"object"}},`, `"input_schema":{"type":"object"},"strict":true},`, 1)
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	_, tool := c.UpstreamError([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"tools.1.custom.input_schema: not supported"}}`))
	if tool != "a" {
		t.Errorf("UpstreamError named %q, want a", tool)
	}
}
