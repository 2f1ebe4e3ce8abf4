package catalog

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// A YAML syntax error names the line to fix, not the line where the
// enclosing block began.
func TestSyntaxErrorLine(t *testing.T) {
	example, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(example), "\n")
	at := -1
	for i, l := range lines {
		if strings.Contains(l, "amount_cents: {type: integer") {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatal("config.yaml has no amount_cents property line")
	}
	dedent := func(n int) string {
		c := append([]string(nil), lines...)
		c[at] = strings.Repeat(" ", n) + strings.TrimLeft(c[at], " ")
		return strings.Join(c, "")
	}
	for _, c := range []struct {
		name, yaml string
		line       int
	}{
		{"key indented less than its siblings", "a: 1\nb:\n  c: 1\n d: 2\n", 4},
		{"deep in the example config, one space less", dedent(9), at + 1},
		{"deep in the example config, back to column 1", dedent(1), at + 1},
		{"tab indentation", "a:\n\tb: 1\n", 2},
		{"unclosed flow mapping", "a: {b: 1\nc: 2\n", 0},
	} {
		_, err := Parse([]byte(c.yaml), "c.yaml")
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 1 {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if c.line != 0 && ce.Problems[0].Line != c.line {
			t.Errorf("%s: reported at line %d, want %d (%v)", c.name, ce.Problems[0].Line, c.line, err)
		}
	}
}

// The last line without a newline is found too.
func TestSyntaxErrorLastLine(t *testing.T) {
	_, err := Parse([]byte("a: 1\nb:\n  c: 1\n d: 2"), "c.yaml")
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Problems[0].Line != 4 {
		t.Errorf("got %v, want line 4", err)
	}
}
