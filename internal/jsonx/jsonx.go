// Package jsonx edits JSON documents without re-encoding what it does not
// touch. Upstream answers carry fields toolgate does not know (and future
// fields it cannot know); splicing raw byte spans keeps them exactly as sent,
// key order included. A document on the hot path is read once into a
// Text (text.go): its grammar, the UTF-8 of its strings and the place of
// every value in one pass, its keys checked for case folding on the tape.
// ParseObject and ParseArray check a document's grammar as they split it,
// Split* then take nested values apart without checking them again, and
// Decode, Unquote and Int read values the way encoding/json does, without
// its reflection.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// ErrSyntax reports input that is not the JSON shape asked for.
var ErrSyntax = errors.New("jsonx: malformed JSON")

// Field is one member of an object, its value as raw bytes.
type Field struct {
	Key   string
	Value []byte
}

// Object is an object's members in document order.
type Object []Field

// Get returns the raw value of key, or nil. Of repeated keys the last one
// counts, as in encoding/json and every mainstream decoder, so an edit reads
// the value clients see.
func (o Object) Get(key string) []byte {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].Key == key {
			return o[i].Value
		}
	}
	return nil
}

// Has reports whether key is present.
func (o Object) Has(key string) bool { return o.Get(key) != nil }

// Set replaces key's value in place, or appends the member. Of repeated
// keys the last one, the one decoders read, is replaced.
func (o Object) Set(key string, value []byte) Object {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].Key == key {
			o[i].Value = value
			return o
		}
	}
	return append(o, Field{Key: key, Value: value})
}

// Delete removes every member named key, so no repeated copy survives to be
// read instead. The receiver's members are left as they were.
func (o Object) Delete(key string) Object {
	for i := range o {
		if o[i].Key == key {
			out := append(o[:i:i], o[i+1:]...)
			return out.Delete(key)
		}
	}
	return o
}

// Append writes the object to dst, compactly between members and with each
// value's own bytes.
func (o Object) Append(dst []byte) []byte {
	dst = append(dst, '{')
	for i, f := range o {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, f.Key)
		dst = append(dst, ':')
		dst = append(dst, f.Value...)
	}
	return append(dst, '}')
}

// Bytes encodes the object.
func (o Object) Bytes() []byte { return o.Append(nil) }

// AppendArray writes elems as a JSON array.
func AppendArray(dst []byte, elems [][]byte) []byte {
	dst = append(dst, '[')
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
	}
	return append(dst, ']')
}

// AppendToField returns the JSON object body with elem appended last to
// its array field key; every other field keeps its bytes and place. A body
// that is not an object, or a field that is absent or not an array, is an
// error.
func AppendToField(body []byte, key string, elem []byte) ([]byte, error) {
	obj, err := ParseObject(body)
	if err != nil {
		return nil, err
	}
	elems, err := ParseArray(obj.Get(key))
	if err != nil {
		return nil, err
	}
	elems = append(append([][]byte(nil), elems...), elem)
	return obj.Set(key, AppendArray(nil, elems)).Bytes(), nil
}

// AppendString writes s as a JSON string, escaping as encoding/json does
// but without HTML escaping (the output is never embedded in HTML).
func AppendString(dst []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b := buf.Bytes()
	return append(dst, b[:len(b)-1]...)
}

// String returns s as a JSON string.
func String(s string) []byte { return AppendString(nil, s) }

// Marshal encodes v without HTML escaping.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil
}

// Int reads an integer as encoding/json reads one into an int64: absent
// or null is 0, and a fraction, an exponent or any other type is refused.
func Int(raw []byte) (int64, bool) {
	if IsNull(raw) {
		return 0, true
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// IsNull reports whether raw is absent or the literal null.
func IsNull(raw []byte) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// ErrNotObject reports a value that is not one JSON object.
var ErrNotObject = errors.New("jsonx: not a JSON object")

// Embeddable is a call's arguments as a JSON value to embed in a document:
// compacted when they are JSON, else as a string, so the document stays
// valid and nothing the model said is lost.
func Embeddable(args []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, args) == nil {
		return b.Bytes()
	}
	return String(string(args))
}

// CompactObject is one JSON object, compacted. Repaired calls have passed
// the validator, so a codec rendering one treats anything else as its
// own bug and fails the render instead of sending it.
func CompactObject(args []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, args); err != nil {
		return nil, err
	}
	if b.Len() == 0 || b.Bytes()[0] != '{' {
		return nil, ErrNotObject
	}
	return b.Bytes(), nil
}
