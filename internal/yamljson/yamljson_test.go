package yamljson

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzConvert: whatever YAML the decoder reads, Convert never panics, and
// what it writes is one valid JSON value within MaxBytes.
func FuzzConvert(f *testing.F) {
	for _, s := range []string{
		"{b: 1, a: 2}", "[1, -2, 1.5, 0x10, 1_000, +7]", "12345678901234567890123", `"<a> & b"`,
		"a: &x {k: v}\nb: *x\n", "{1: a}", ".inf", "a: &x {k: v}\nb: {<<: *x}\n", "a: &a [*a]\n", "", "~",
		"2001-12-14", "!!binary aGVsbG8=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var n yaml.Node
		if yaml.Unmarshal([]byte(text), &n) != nil {
			return
		}
		out, err := Convert(&n)
		if err != nil {
			return
		}
		if !json.Valid(out) || len(out) > MaxBytes+64 {
			t.Fatalf("%q gave %d bytes, valid JSON %v: %.200s", text, len(out), json.Valid(out), out)
		}
	})
}

// TestConvertKeepsKeyOrder: a mapping's keys come out in the order the
// YAML wrote them, which is what a schema's author sees.
func TestConvertKeepsKeyOrder(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("{c: 1, a: [x, 2], b: {z: null}}"), &n); err != nil {
		t.Fatal(err)
	}
	out, err := Convert(&n)
	if err != nil || string(out) != `{"c":1,"a":["x",2],"b":{"z":null}}` {
		t.Fatalf("got %s, %v", out, err)
	}
	if _, err := Convert(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!int", Value: "1"}, {Kind: yaml.ScalarNode, Value: "a"}}}); err == nil || !strings.Contains(err.Error(), "not a string") {
		t.Errorf("an integer key: %v", err)
	}
}
