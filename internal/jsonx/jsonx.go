// Package jsonx edits JSON documents without re-encoding what it does not
// touch. Upstream answers carry fields toolgate does not know (and future
// fields it cannot know); splicing raw byte spans keeps them exactly as sent,
// key order included.
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

// ParseObject splits a JSON object into its members. Values alias data.
func ParseObject(data []byte) (Object, error) {
	return ParseObjectInto(make(Object, 0, 8), data)
}

// ParseObjectInto is ParseObject reusing dst, so a caller
// parsing many small objects can reuse one slice. The result aliases dst.
func ParseObjectInto(dst Object, data []byte) (Object, error) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, ErrSyntax
	}
	i++
	obj := dst[:0]
	for {
		i = skipWS(data, i)
		if i < len(data) && data[i] == '}' && len(obj) == 0 {
			i++
			break
		}
		if i >= len(data) || data[i] != '"' {
			return nil, ErrSyntax
		}
		end, err := skipString(data, i)
		if err != nil {
			return nil, err
		}
		var key string
		if raw := data[i+1 : end-1]; bytes.IndexByte(raw, '\\') < 0 {
			var ok bool
			if key, ok = knownKeys[string(raw)]; !ok {
				key = string(raw)
			}
		} else {
			k, ok := Unquote(data[i:end])
			if !ok {
				return nil, ErrSyntax
			}
			key = k
		}
		i = skipWS(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, ErrSyntax
		}
		i = skipWS(data, i+1)
		vend, err := skipValue(data, i, 0)
		if err != nil {
			return nil, err
		}
		obj = append(obj, Field{Key: key, Value: data[i:vend]})
		i = skipWS(data, vend)
		if i < len(data) && data[i] == ',' {
			i++
			continue
		}
		if i < len(data) && data[i] == '}' {
			i++
			break
		}
		return nil, ErrSyntax
	}
	if skipWS(data, i) != len(data) {
		return nil, ErrSyntax
	}
	return obj, nil
}

// knownKeys interns the keys of the model APIs' answers and chunks: a
// stream repeats the same dozen keys in every event, and converting each to
// a fresh string was most of what splitting them allocated. (A map index
// with a converted []byte does not allocate.)
var knownKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"id", "object", "created", "model", "system_fingerprint", "service_tier", "obfuscation",
		"choices", "index", "delta", "message", "role", "content", "refusal", "annotations",
		"tool_calls", "type", "function", "name", "arguments", "custom", "input",
		"finish_reason", "logprobs", "usage", "prompt_tokens", "completion_tokens", "total_tokens",
		"prompt_tokens_details", "completion_tokens_details", "reasoning_content",
		"event", "text", "partial_json", "content_block", "stop_reason", "stop_sequence",
		"input_tokens", "output_tokens", "sequence_number", "item_id", "output_index",
		"item", "output", "call_id", "status", "response", "signature", "thinking",
	} {
		m[k] = k
	}
	return m
}()

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

// ParseArray splits a JSON array into its elements. Elements alias data.
func ParseArray(data []byte) ([][]byte, error) {
	return ParseArrayInto(make([][]byte, 0, 4), data)
}

// ParseArrayInto is ParseArray reusing dst.
func ParseArrayInto(dst [][]byte, data []byte) ([][]byte, error) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, ErrSyntax
	}
	i++
	out := dst[:0]
	for {
		i = skipWS(data, i)
		if i < len(data) && data[i] == ']' && len(out) == 0 {
			i++
			break
		}
		end, err := skipValue(data, i, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, data[i:end])
		i = skipWS(data, end)
		if i < len(data) && data[i] == ',' {
			i++
			continue
		}
		if i < len(data) && data[i] == ']' {
			i++
			break
		}
		return nil, ErrSyntax
	}
	if skipWS(data, i) != len(data) {
		return nil, ErrSyntax
	}
	return out, nil
}

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

// Unquote decodes a raw JSON string value. It reports false for anything
// that is not a string.
func Unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if plainString(raw[1 : len(raw)-1]) {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// plainString reports whether s can be a JSON string's content as it
// stands: no escapes, no quotes and no control characters, which all need
// the full decoder (to decode, or to be refused).
func plainString(s []byte) bool {
	for _, c := range s {
		if c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
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

func skipWS(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 10000

// skipString returns the end of the string starting at i, checking what
// JSON requires of a string: no raw control characters and only defined
// escapes.
func skipString(d []byte, i int) (int, error) {
	i++
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return 0, ErrSyntax
		case c == '\\':
			if i+1 >= len(d) {
				return 0, ErrSyntax
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || !isHex4(d[i+2:i+6]) {
					return 0, ErrSyntax
				}
				i += 6
			default:
				return 0, ErrSyntax
			}
		default:
			i++
		}
	}
	return 0, ErrSyntax
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// validNumber reports whether b is a JSON number (RFC 8259 §6).
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(b)
}

// skipValue returns the end of the value starting at i, checking it against
// the JSON grammar on the way, so a document ParseObject accepts is valid
// JSON (invalid UTF-8 inside strings aside, which encoding/json accepts too).
func skipValue(d []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, ErrSyntax
	}
	if i >= len(d) {
		return 0, ErrSyntax
	}
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		open, close := d[i], byte('}')
		if open == '[' {
			close = ']'
		}
		i = skipWS(d, i+1)
		if i < len(d) && d[i] == close {
			return i + 1, nil
		}
		for {
			if open == '{' {
				if i >= len(d) || d[i] != '"' {
					return 0, ErrSyntax
				}
				end, err := skipString(d, i)
				if err != nil {
					return 0, err
				}
				i = skipWS(d, end)
				if i >= len(d) || d[i] != ':' {
					return 0, ErrSyntax
				}
				i = skipWS(d, i+1)
			}
			end, err := skipValue(d, i, depth+1)
			if err != nil {
				return 0, err
			}
			i = skipWS(d, end)
			if i >= len(d) {
				return 0, ErrSyntax
			}
			if d[i] == ',' {
				i = skipWS(d, i+1)
				continue
			}
			if d[i] == close {
				return i + 1, nil
			}
			return 0, ErrSyntax
		}
	default:
		j := i
		for j < len(d) {
			c := d[j]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			j++
		}
		if j == i {
			return 0, ErrSyntax
		}
		switch lit := d[i:j]; {
		case string(lit) == "true", string(lit) == "false", string(lit) == "null":
		case validNumber(lit):
		default:
			return 0, ErrSyntax
		}
		return j, nil
	}
}

// FoldedKey reports whether any object key anywhere in data equals one of
// names when case is ignored but differs from it as written. encoding/json
// matches struct fields that way while JSON itself, and most clients, are
// case-sensitive; a document that relies on the difference would be read
// one way by toolgate and another by the agent, so callers refuse it.
// Callers that check many documents against the same names prepare them
// once with NewKeyFold.
func FoldedKey(data []byte, names ...string) bool {
	return NewKeyFold(names...).In(data)
}

// KeyFold is a prepared set of names for FoldedKey.
type KeyFold struct {
	names [][]byte
	// plain: no name has an upper-case or non-ASCII letter, so a key
	// without one either can only fold onto a name it equals.
	plain bool
}

// NewKeyFold prepares names for KeyFold.In.
func NewKeyFold(names ...string) *KeyFold {
	k := &KeyFold{names: make([][]byte, len(names)), plain: true}
	for i, n := range names {
		k.names[i] = []byte(n)
		if oddKey([]byte(n)) {
			k.plain = false
		}
	}
	return k
}

// In is FoldedKey for the prepared names. It runs on every answer and
// every stream event, so it finds strings with IndexByte and looks at the
// bytes of a string only when a colon shows it is a key: text content,
// often most of a document, is skipped at memory speed.
func (k *KeyFold) In(data []byte) bool {
	i := 0
	for {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return false
		}
		start := i + q
		end := closingQuote(data, start)
		if end < 0 {
			return false
		}
		i = end + 1
		if c := skipWS(data, i); c < len(data) && data[c] == ':' && k.folds(data[start+1:end]) {
			return true
		}
	}
}

// closingQuote returns the index of the quote that ends the string opening
// at start, or -1. A quote ends it when an even number of backslashes
// precede it.
func closingQuote(d []byte, start int) int {
	j := start + 1
	for {
		e := bytes.IndexByte(d[j:], '"')
		if e < 0 {
			return -1
		}
		j += e
		n := 0
		for b := j - 1; b > start && d[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j
		}
		j++
	}
}

// oddKey reports a key with an upper-case ASCII letter, a non-ASCII byte
// or an escape: the only keys that can fold onto a plain name they differ
// from.
func oddKey(key []byte) bool {
	for _, c := range key {
		if c >= 0x80 || c == '\\' || 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

func (k *KeyFold) folds(key []byte) bool {
	if k.plain && !oddKey(key) {
		return false
	}
	if bytes.IndexByte(key, '\\') >= 0 {
		// An escaped key is compared as decoders see it.
		s, ok := Unquote(append(append([]byte{'"'}, key...), '"'))
		if !ok {
			return false
		}
		key = []byte(s)
	}
	for _, n := range k.names {
		// Only a non-ASCII key can fold onto a name of another length
		// (the Kelvin sign is three bytes and folds onto "k").
		if len(key) != len(n) && isASCII(key) {
			continue
		}
		if !bytes.Equal(key, n) && bytes.EqualFold(key, n) {
			return true
		}
	}
	return false
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
