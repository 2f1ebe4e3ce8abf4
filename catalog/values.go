package catalog

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/yamljson"
)

// nodeError reports a problem with one YAML node in the form the yaml
// decoder collects (a *yaml.TypeError), so decoding goes on and every
// problem in the file is listed together. Parse maps the line and column
// back to a field path.
func nodeError(n *yaml.Node, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d column %d: %s", n.Line, n.Column, msg)}}
}

// UnmarshalYAML reads a Go duration string such as "10s" or "1m30s". A bare
// number is refused: "10" could mean seconds or milliseconds, and guessing
// wrong turns a timeout into something else entirely.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return nodeError(n, "expected a duration such as \"10s\", got %s", yamljson.KindWord(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return nodeError(n, "invalid duration %q: use a number with a unit, such as \"10s\" or \"1m30s\"", n.Value)
	}
	if v < 0 {
		return nodeError(n, "duration %q must not be negative", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration back in the form UnmarshalYAML reads.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String formats the duration as Go does ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML converts any YAML value into compact JSON text, keeping the
// order of mapping keys so that a schema reaches the compiler, the version
// hash and recovery prompts exactly as the operator wrote it.
func (v *JSONValue) UnmarshalYAML(n *yaml.Node) error {
	out, err := yamljson.Convert(n)
	if err != nil {
		return nodeError(n, "%v", err)
	}
	*v = JSONValue(out)
	return nil
}

// MarshalJSON emits the value as the JSON it holds rather than as the base64
// that encoding/json would produce for a byte slice.
func (v JSONValue) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	return v, nil
}
