package responses

import (
	"strings"
	"testing"
)

func TestStrictToolsAndMarks(t *testing.T) {
	body := `{"model":"m","input":"x","tools":[{"type":"web_search"},` +
		`{"type":"function","name":"a","parameters":{"type":"object"},"strict":null},` +
		`{"type":"function","name":"b","parameters":{"type":"object"},"strict":false},` +
		`{"type":"function","name":"c","parameters":{"type":"object"}}]}`
	c := &codec{}
	if _, err := c.DecodeRequest("", []byte(body)); err != nil {
		t.Fatal(err)
	}
	tools := c.StrictTools()
	if len(tools) != 3 || tools[0].Client || !tools[1].Client || tools[2].Client {
		t.Fatalf("tools %+v", tools)
	}
	out, err := c.MarkStrict([]string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(body, `"strict":null`, `"strict":true`, 1)
	want = strings.Replace(want, `"name":"c","parameters":{"type":"object"}}`, `"name":"c","parameters":{"type":"object"},"strict":true}`, 1)
	if string(out) != want || string(c.body) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	if _, tool := c.UpstreamError([]byte(`{"error":{"message":"Invalid schema for function 'c'","param":"tools[3].parameters"}}`)); tool != "c" {
		t.Errorf("UpstreamError named %q, want c", tool)
	}
}
