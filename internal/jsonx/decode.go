package jsonx

import (
	"encoding/json"
	"unicode/utf8"
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
	i := skipWS(data, 0)
	end, err := skipValue(data, i, 0)
	if err != nil || skipWS(data, end) != len(data) {
		return nil, false
	}
	return decodeChecked(data[i:end], 0)
}

func decodeChecked(v []byte, depth int) (any, bool) {
	if depth > decodeDepth {
		return nil, false
	}
	switch v[0] {
	case '{':
		obj, err := SplitObject(v)
		if err != nil {
			return nil, false
		}
		m := make(map[string]any, len(obj))
		for _, f := range obj {
			val, ok := decodeChecked(f.Value, depth+1)
			if !ok {
				return nil, false
			}
			key := f.Key
			if !utf8.ValidString(key) {
				b, _ := AppendUnescaped(nil, []byte(key))
				key = string(b)
			}
			m[key] = val
		}
		return m, true
	case '[':
		elems, err := SplitArray(v)
		if err != nil {
			return nil, false
		}
		a := make([]any, len(elems))
		for i, e := range elems {
			val, ok := decodeChecked(e, depth+1)
			if !ok {
				return nil, false
			}
			a[i] = val
		}
		return a, true
	case '"':
		s, ok := Unquote(v)
		return s, ok
	case 't':
		return true, true
	case 'f':
		return false, true
	case 'n':
		return nil, true
	default:
		return json.Number(v), true
	}
}
