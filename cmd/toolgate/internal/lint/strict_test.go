package lint

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/catalog"
)

func TestStrictListsFitPerProvider(t *testing.T) {
	yaml := `upstreams: [{url: https://api.openai.com}]
catalog:
  strict: auto
  tools:
    - name: closed
      description: A closed object.
      parameters: {"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}
    - name: optional
      description: An optional field.
      parameters: {"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer","minimum":0}},"required":["a"],"additionalProperties":false}
`
	c, err := catalog.Parse([]byte(yaml), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := catalog.Compile(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(Strict(s), "\n")
	want := `strict subsets (catalog.strict: auto; auto marks the tools that fit):
  openai (chat, responses):
    fit: closed
    optional: /: property "b" is optional: every property must be required
  anthropic (messages):
    fit: closed
    optional: /properties/b: minimum is outside the subset
  gemini (gemini; the mode is set only when every offered declaration fits):
    fit: closed, optional`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
