package gemini

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// Google's parsers read a field under its JSON name (functionCall) or its
// proto name (function_call), and the Python SDK reads answers the same
// way; clients send both (the Python SDK writes a declaration's
// parameters_json_schema as is, llm-gemini writes history as
// function_call). So the codec reads every field it interprets under
// either spelling. An object that holds both spellings of one field is
// refused: Google's parser refuses it, and clients would disagree on
// which one they read.

// snakeOf is the proto spelling of a camelCase JSON name.
func snakeOf(camel string) string {
	b := make([]byte, 0, len(camel)+4)
	for i := 0; i < len(camel); i++ {
		c := camel[i]
		if 'A' <= c && c <= 'Z' {
			b = append(b, '_', c+'a'-'A')
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

// camelOf is the JSON name of a proto field name; a key without an
// underscore is its own.
func camelOf(key string) string {
	b := make([]byte, 0, len(key))
	up := false
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '_' && i > 0 && i+1 < len(key):
			up = true
			continue
		case up && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		up = false
		b = append(b, c)
	}
	return string(b)
}

// get is the value of the field named camel, under either spelling.
func get(o jsonx.Object, camel string) []byte {
	if v := o.Get(camel); v != nil {
		return v
	}
	if s := snakeOf(camel); s != camel {
		return o.Get(s)
	}
	return nil
}

// has reports the field named camel under either spelling.
func has(o jsonx.Object, camel string) bool { return get(o, camel) != nil }

// spelling is the key under which o holds the field named camel (camel
// when it holds none), so an edit keeps the sender's spelling.
func spelling(o jsonx.Object, camel string) string {
	if !o.Has(camel) {
		if s := snakeOf(camel); o.Has(s) {
			return s
		}
	}
	return camel
}

// errBothSpellings reports an object that holds one field under both its
// names.
var errBothSpellings = errors.New("gemini: a field is spelled both in camelCase and in snake_case")

// twoSpellings reports an object that holds some field under both names.
func twoSpellings(o jsonx.Object) bool {
	for _, f := range o {
		if c := camelOf(f.Key); c != f.Key && o.Has(c) {
			return true
		}
	}
	return false
}

// unmarshalEitherSpelling decodes one object into v, whose json tags are
// the camelCase names, with every snake_case key read as its camelCase
// name. Only this object's own keys are renamed: what its members hold is
// decoded by their own types.
func unmarshalEitherSpelling(data []byte, v any) error {
	if bytes.IndexByte(data, '_') < 0 {
		// No key here or below can be a proto name.
		return json.Unmarshal(data, v)
	}
	o, err := jsonx.ParseObject(data)
	if err != nil {
		return err
	}
	if twoSpellings(o) {
		return errBothSpellings
	}
	renamed := false
	for _, f := range o {
		if camelOf(f.Key) != f.Key {
			renamed = true
			break
		}
	}
	if !renamed {
		return json.Unmarshal(data, v)
	}
	o = append(jsonx.Object(nil), o...)
	for i := range o {
		o[i].Key = camelOf(o[i].Key)
	}
	return json.Unmarshal(o.Bytes(), v)
}
