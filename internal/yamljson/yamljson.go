// Package yamljson writes a YAML value as JSON text, for the config's
// values that are JSON (tool schemas, tool files written in YAML).
package yamljson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// MaxBytes bounds the JSON one YAML value may expand to. YAML
// aliases can repeat a subtree exponentially ("billion laughs"), and this
// converter walks the node tree itself rather than through the decoder's
// own alias accounting.
const MaxBytes = 4 << 20

// Convert converts a YAML node tree to compact JSON, keeping the order
// of mapping keys. It refuses what JSON cannot say (non-string keys, merge
// keys, infinities), an alias that refers to its own ancestor, and a value
// that expands to more than MaxBytes.
func Convert(n *yaml.Node) ([]byte, error) {
	c := jsonWriter{active: map[*yaml.Node]bool{}}
	if err := c.write(n); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

type jsonWriter struct {
	buf bytes.Buffer
	// active holds the alias targets being expanded, to refuse an alias that
	// refers to its own ancestor instead of recursing forever.
	active map[*yaml.Node]bool
}

// jsonNumber is RFC 8259's number grammar. A YAML number already written
// this way is copied as is, which keeps integers beyond 2^53 exact.
var jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)

func (c *jsonWriter) write(n *yaml.Node) error {
	if c.buf.Len() > MaxBytes {
		return fmt.Errorf("value expands to more than %d bytes of JSON", MaxBytes)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			c.buf.WriteString("null")
			return nil
		}
		return c.write(n.Content[0])
	case yaml.AliasNode:
		if n.Alias == nil || c.active[n.Alias] {
			return fmt.Errorf("alias *%s at line %d refers to itself", n.Value, n.Line)
		}
		c.active[n.Alias] = true
		err := c.write(n.Alias)
		delete(c.active, n.Alias)
		return err
	case yaml.MappingNode:
		c.buf.WriteByte('{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			for k.Kind == yaml.AliasNode && k.Alias != nil {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				if k.ShortTag() == "!!merge" {
					return fmt.Errorf("merge key << at line %d is not supported in a JSON value", k.Line)
				}
				return fmt.Errorf("key %s at line %d is not a string; JSON object keys must be strings (quote it)", describeKey(k), k.Line)
			}
			if seen[k.Value] {
				return fmt.Errorf("key %q at line %d appears twice", k.Value, k.Line)
			}
			seen[k.Value] = true
			if i > 0 {
				c.buf.WriteByte(',')
			}
			c.writeString(k.Value)
			c.buf.WriteByte(':')
			if err := c.write(n.Content[i+1]); err != nil {
				return err
			}
		}
		c.buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		c.buf.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				c.buf.WriteByte(',')
			}
			if err := c.write(e); err != nil {
				return err
			}
		}
		c.buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return c.writeScalar(n)
	}
	return fmt.Errorf("unsupported YAML node at line %d", n.Line)
}

func (c *jsonWriter) writeScalar(n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		c.buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("%q at line %d is not a boolean", n.Value, n.Line)
		}
		c.buf.WriteString(strconv.FormatBool(b))
	case "!!int", "!!float":
		if jsonNumber.MatchString(n.Value) {
			c.buf.WriteString(n.Value)
			return nil
		}
		var x any
		if err := n.Decode(&x); err != nil {
			return fmt.Errorf("%q at line %d is not a number", n.Value, n.Line)
		}
		switch x := x.(type) {
		case int:
			c.buf.WriteString(strconv.Itoa(x))
		case int64:
			c.buf.WriteString(strconv.FormatInt(x, 10))
		case uint64:
			c.buf.WriteString(strconv.FormatUint(x, 10))
		case float64:
			if math.IsInf(x, 0) || math.IsNaN(x) {
				return fmt.Errorf("%s at line %d has no JSON equivalent", n.Value, n.Line)
			}
			c.buf.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
		default:
			return fmt.Errorf("%q at line %d is not a number", n.Value, n.Line)
		}
	default:
		// Strings, timestamps, binary and application tags all keep their
		// text: JSON has no richer type for them and the text is what the
		// operator wrote.
		c.writeString(n.Value)
	}
	return nil
}

// writeString JSON-quotes s without the HTML escaping of json.Marshal, so
// "<" in a description reaches prompts as "<" and not "\u003c".
func (c *jsonWriter) writeString(s string) {
	enc := json.NewEncoder(&c.buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	c.buf.Truncate(c.buf.Len() - 1)
}

func describeKey(k *yaml.Node) string {
	if k.Kind == yaml.ScalarNode {
		if k.ShortTag() == "!!null" && k.Value == "" {
			return "null"
		}
		return strconv.Quote(k.Value)
	}
	return KindWord(k)
}

// KindWord names a node's kind for messages.
func KindWord(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	return "a scalar"
}
