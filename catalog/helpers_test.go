package catalog

import (
	"bytes"
	"strings"

	"go.yaml.in/yaml/v3"
)

func yamlUnmarshalStrict(s string, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader([]byte(s)))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// indent nests a YAML snippet one level, under a key.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
