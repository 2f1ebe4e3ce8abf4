package jsonx

import (
	"encoding/json"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// decodeDepth is the deepest nesting Decode handles itself. Deeper values
// are left to encoding/json, whose own limit then decides.
const decodeDepth = 64

// Decode decodes a JSON value the way encoding/json decodes into an any
// with UseNumber: objects as map[string]any (of repeated keys the last
// wins), arrays as []any, numbers as json.Number, strings with invalid
// UTF-8 coerced to U+FFFD, booleans and nil. It reports false for input
// encoding/json would refuse, and for nesting deeper than decodeDepth,
// which the caller leaves to encoding/json. Reflection made decoding tool
// arguments a third of validating them.
func Decode(data []byte) (any, bool) {
	r := newReader(data)
	defer r.release()
	v, ok := decodeValue(&r.dec, 0)
	if !ok {
		return nil, false
	}
	if _, err := r.dec.ReadToken(); err != io.EOF {
		return nil, false
	}
	return v, true
}

func decodeValue(d *jsontext.Decoder, depth int) (any, bool) {
	tok, err := d.ReadToken()
	if err != nil {
		return nil, false
	}
	switch tok.Kind() {
	case '{':
		return decodeObject(d, depth)
	case '[':
		return decodeArray(d, depth)
	case '"':
		return tok.String(), true
	case '0':
		return json.Number(tok.String()), true
	case 't':
		return true, true
	case 'f':
		return false, true
	}
	return nil, true
}

// decodeObject decodes the members of an object whose '{' was read.
func decodeObject(d *jsontext.Decoder, depth int) (any, bool) {
	if depth >= decodeDepth {
		return nil, false
	}
	m := make(map[string]any)
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return nil, false
		}
		// The token is valid only until the next read.
		key := name.String()
		v, ok := decodeValue(d, depth+1)
		if !ok {
			return nil, false
		}
		m[key] = v
	}
	_, err := d.ReadToken()
	return m, err == nil
}

// decodeArray decodes the elements of an array whose '[' was read.
func decodeArray(d *jsontext.Decoder, depth int) (any, bool) {
	if depth >= decodeDepth {
		return nil, false
	}
	a := []any{}
	for d.PeekKind() != ']' {
		v, ok := decodeValue(d, depth+1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
	}
	_, err := d.ReadToken()
	return a, err == nil
}
