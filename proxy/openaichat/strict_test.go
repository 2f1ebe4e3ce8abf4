package openaichat

import (
	"strings"
	"testing"
)

func TestStrictToolsAndMarks(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[` +
		`{"type":"custom","custom":{"name":"free"}},` +
		`{"type":"function","function":{"name":"a","parameters":{"type":"object"}}},` +
		`{"type":"function","function":{"name":"b","parameters":{"type":"object"},"strict":false}},` +
		`{"type":"function","function":{"name":"c","strict":null}}]}`
	c := &codec{}
	if _, err := c.DecodeRequest("", []byte(body)); err != nil {
		t.Fatal(err)
	}
	tools := c.StrictTools()
	if len(tools) != 3 || tools[0].Name != "a" || tools[0].Client || !tools[1].Client || tools[2].Client || tools[2].Schema != nil {
		t.Fatalf("tools %+v", tools)
	}
	out, err := c.MarkStrict([]string{"a", "b", "c", "free"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(body, `{"type":"object"}}},`, `{"type":"object"},"strict":true}},`, 1),
		`"strict":null`, `"strict":true`, 1)
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	if string(c.req.Body) != want {
		t.Error("the codec's request is not the marked one; re-queries would lose the marks")
	}
	msg, tool := c.UpstreamError([]byte(`{"error":{"message":"Invalid schema for function 'a': x","type":"invalid_request_error","param":"tools[1].function.parameters","code":"invalid_function_parameters"}}`))
	if tool != "a" || !strings.Contains(msg, "Invalid schema") {
		t.Errorf("UpstreamError: %q, %q", msg, tool)
	}
}
