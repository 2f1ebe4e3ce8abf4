// Package jsonx edits JSON documents without re-encoding what it does not
// touch. Upstream answers carry fields toolgate does not know (and future
// fields it cannot know); splicing raw byte spans keeps them exactly as sent,
// key order included. It is also the hot path's reader: ParseObject checks
// a document's grammar once, Split* then takes nested values apart without
// checking them again, and Decode, Unquote and Int read values the way
// encoding/json does, without its reflection.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
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
		key, ok := keyString(data[i:end])
		if !ok {
			return nil, ErrSyntax
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
// a fresh string was most of what splitting them allocated. They are found
// by length and first byte, which was several times cheaper than a map.
var knownKeys = func() (t [32][]string) {
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
		if len(k) >= len(t) {
			panic("jsonx: known key too long for the table: " + k)
		}
		t[len(k)] = append(t[len(k)], k)
	}
	return t
}()

// intern returns the known key equal to raw.
func intern(raw []byte) (string, bool) {
	if len(raw) == 0 || len(raw) >= len(knownKeys) {
		return "", false
	}
	for _, k := range knownKeys[len(raw)] {
		if k[0] == raw[0] && string(raw) == k {
			return k, true
		}
	}
	return "", false
}

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
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, ErrSyntax
	}
	i++
	out := make([][]byte, 0, 4)
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

// SplitObject is SplitObjectInto with a fresh slice.
func SplitObject(data []byte) (Object, error) {
	return SplitObjectInto(make(Object, 0, 8), data)
}

// SplitArray is SplitArrayInto with a fresh slice.
func SplitArray(data []byte) ([][]byte, error) {
	return SplitArrayInto(make([][]byte, 0, 4), data)
}

// SplitObjectInto is ParseObjectInto for a value taken from a document that
// ParseObject or ParseArray has already checked: it finds the members
// without checking the grammar a second time, which on nested values was
// most of the cost of reading a stream chunk. On anything else it may
// return wrong members, but never reads out of bounds.
func SplitObjectInto(dst Object, data []byte) (Object, error) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, ErrSyntax
	}
	obj := dst[:0]
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return obj, nil
	}
	for i < len(data) && data[i] == '"' {
		end := closingQuote(data, i)
		if end < 0 {
			return nil, ErrSyntax
		}
		key, ok := keyString(data[i : end+1])
		if !ok {
			return nil, ErrSyntax
		}
		i = skipWS(data, end+1)
		if i >= len(data) || data[i] != ':' {
			return nil, ErrSyntax
		}
		i = skipWS(data, i+1)
		vend, ok := skipChecked(data, i)
		if !ok {
			return nil, ErrSyntax
		}
		obj = append(obj, Field{Key: key, Value: data[i:vend]})
		var more bool
		if i, more, ok = afterItem(data, vend, '}'); ok && !more {
			return obj, nil
		}
		if !ok {
			break
		}
	}
	return nil, ErrSyntax
}

// SplitArrayInto is ParseArray for a checked value, reusing dst (see
// SplitObjectInto).
func SplitArrayInto(dst [][]byte, data []byte) ([][]byte, error) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, ErrSyntax
	}
	out := dst[:0]
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == ']' {
		return out, nil
	}
	for i < len(data) {
		end, ok := skipChecked(data, i)
		if !ok {
			return nil, ErrSyntax
		}
		out = append(out, data[i:end])
		var more bool
		if i, more, ok = afterItem(data, end, ']'); ok && !more {
			return out, nil
		}
		if !ok {
			break
		}
	}
	return nil, ErrSyntax
}

// afterItem reads what follows a member or element at i: a comma, after
// which more follows from the returned position, or the closing bracket.
func afterItem(d []byte, i int, close byte) (next int, more, ok bool) {
	i = skipWS(d, i)
	switch {
	case i < len(d) && d[i] == ',':
		return skipWS(d, i+1), true, true
	case i < len(d) && d[i] == close:
		return i + 1, false, true
	}
	return i, false, false
}

// keyString returns a quoted key as a string, interned when it is one of
// the APIs' keys.
func keyString(quoted []byte) (string, bool) {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return Unquote(quoted)
	}
	if k, ok := intern(raw); ok {
		return k, true
	}
	return string(raw), true
}

// skipChecked returns the end of the value at i in a checked document:
// strings are skipped by their closing quote and containers by counting
// brackets outside strings.
func skipChecked(d []byte, i int) (int, bool) {
	if i >= len(d) {
		return 0, false
	}
	switch d[i] {
	case '"':
		end := closingQuote(d, i)
		return end + 1, end >= 0
	case '{', '[':
		depth := 0
		for i < len(d) {
			switch d[i] {
			case '"':
				end := closingQuote(d, i)
				if end < 0 {
					return 0, false
				}
				i = end
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	default:
		j := i
		for j < len(d) {
			switch d[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, j > i
			}
			j++
		}
		return j, j > i
	}
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

// Unquote decodes a raw JSON string value. It reports false for anything
// that is not a string.
func Unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	content := raw[1 : len(raw)-1]
	if plainString(content) {
		return string(content), true
	}
	b, ok := AppendUnescaped(make([]byte, 0, len(content)), content)
	if !ok {
		return "", false
	}
	return string(b), true
}

// plainString reports whether s can be a JSON string's content as it
// stands: ASCII with no escapes, quotes or control characters.
func plainString(s []byte) bool {
	for _, c := range s {
		if c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// AppendUnescaped appends the decoded content of a JSON string (the bytes
// between its quotes) to dst exactly as encoding/json decodes it: escapes
// resolved, a surrogate pair joined, a lone surrogate or an invalid UTF-8
// byte turned into U+FFFD. It reports false for content no JSON string can
// have (a bare quote or control character, a bad escape); dst then holds
// what was decoded before it.
func AppendUnescaped(dst, s []byte) ([]byte, bool) {
	return appendUnescaped(dst, s, true)
}

// AppendEscapesDecoded is AppendUnescaped that keeps every byte outside an
// escape as it is, valid UTF-8 or not: for pieces of a string cut at any
// byte, such as streamed arguments, which are valid only once joined.
func AppendEscapesDecoded(dst, s []byte) ([]byte, bool) {
	return appendUnescaped(dst, s, false)
}

func appendUnescaped(dst, s []byte, coerce bool) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return dst, false
			}
			switch e := s[i+1]; e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := hex4(s[i+2:])
				if !ok {
					return dst, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if r2, ok := hex4(s[i+2:]); ok {
							if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
								dst = utf8.AppendRune(dst, d)
								i += 6
								continue
							}
						}
					}
					r = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default:
				return dst, false
			}
			i += 2
		case c == '"' || c < 0x20:
			return dst, false
		case c < utf8.RuneSelf:
			j := i + 1
			for j < len(s) && plainByte[s[j]] && s[j] < utf8.RuneSelf {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
		case !coerce:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
	}
	return dst, true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
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
		// Most string bytes need no decision: run over them with one
		// table load each before looking at the rare ones.
		for i < len(d) && plainByte[d[i]] {
			i++
		}
		if i >= len(d) {
			break
		}
		c := d[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return 0, ErrSyntax
		default: // a backslash
			if i+1 >= len(d) {
				return 0, ErrSyntax
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(d[i+2:]); !ok {
					return 0, ErrSyntax
				}
				i += 6
			default:
				return 0, ErrSyntax
			}
		}
	}
	return 0, ErrSyntax
}

// plainByte marks the bytes a JSON string holds as they are: not a quote,
// a backslash or a control character.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

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

// KeyFold finds object keys that equal one of its names when case is
// ignored but differ from it as written. encoding/json matches struct
// fields that way while JSON itself, and most clients, are case-sensitive;
// a document that relies on the difference would be read one way by
// toolgate and another by the agent, so callers refuse it.
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
		if MayFold(n) {
			k.plain = false
		}
	}
	return k
}

// In reports whether any object key anywhere in data folds onto one of the
// names without equalling it. It runs on every answer and every stream
// event, so it finds strings with IndexByte and looks at the bytes of a
// string only when a colon shows it is a key: text content, often most of
// a document, is skipped at memory speed.
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
	// Keys and most values are short: a plain loop finds their end before
	// IndexByte would have set up.
	for stop := min(j+16, len(d)); j < stop; j++ {
		switch d[j] {
		case '"':
			return j
		case '\\':
			j++
		}
	}
	if j >= len(d) {
		return -1
	}
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

// MayFold reports a key with an upper-case ASCII letter, a non-ASCII byte
// or an escape: the only keys that can fold onto a lower-case ASCII name
// they differ from, so a check for folded keys can pass every other key by.
func MayFold[T ~string | ~[]byte](key T) bool {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= 0x80 || c == '\\' || 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

func (k *KeyFold) folds(key []byte) bool {
	if k.plain && !MayFold(key) {
		return false
	}
	if bytes.IndexByte(key, '\\') >= 0 {
		// An escaped key is compared as decoders see it.
		var ok bool
		if key, ok = AppendUnescaped(nil, key); !ok {
			return false
		}
	}
	return k.foldsDecoded(key)
}

// Folds is In for one decoded key (an Object's Key): whether it folds onto
// one of the names without equalling it. A caller that knows where a
// document's protocol keys are checks just those, and leaves keys inside
// values it does not interpret (a call's arguments) to the validator.
func (k *KeyFold) Folds(key string) bool {
	if k.plain && !MayFold(key) {
		return false
	}
	return k.foldsDecoded([]byte(key))
}

func (k *KeyFold) foldsDecoded(key []byte) bool {
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
// the validator, so an adapter rendering one treats anything else as its
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
