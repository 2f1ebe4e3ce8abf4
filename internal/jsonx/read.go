package jsonx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// readOptions read JSON as encoding/json reads it, which is how the agents
// behind toolgate read it: repeated names are kept (Object.Get then picks
// the last, as they do), and invalid UTF-8 and lone surrogate escapes are
// accepted and decoded as U+FFFD. Refusing text that is not UTF-8 is the
// callers' decision, taken before they read (the pipeline refuses such an
// answer, the validator such arguments).
var readOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// reader is a jsontext decoder over the caller's bytes. Given a
// bytes.Buffer, jsontext parses in place, so the raw values it returns
// alias the document instead of a copy of it.
type reader struct {
	in  bytes.Buffer
	dec jsontext.Decoder
}

// readers hold decoders reset onto an empty buffer: a decoder reads its
// bytes.Buffer only when first asked for a token, so filling the buffer is
// all a new document needs, and resetting once, on release, also drops the
// decoder's reference to the document it read.
var readers = sync.Pool{New: func() any {
	r := new(reader)
	r.dec.Reset(&r.in, readOptions...)
	return r
}}

func newReader(data []byte) *reader {
	r := readers.Get().(*reader)
	r.in = *bytes.NewBuffer(data)
	return r
}

func (r *reader) release() {
	r.in = bytes.Buffer{}
	r.dec.Reset(&r.in, readOptions...)
	readers.Put(r)
}

// open reads the delimiter that must begin the document.
func (r *reader) open(kind jsontext.Kind) error {
	tok, err := r.dec.ReadToken()
	if err != nil {
		return syntaxError(err)
	}
	if tok.Kind() != kind {
		return fmt.Errorf("%w: %v where %v was expected", ErrSyntax, tok.Kind(), kind)
	}
	return nil
}

// close reads the delimiter that ends the document and checks that
// nothing but whitespace follows it.
func (r *reader) close() error {
	if _, err := r.dec.ReadToken(); err != nil {
		return syntaxError(err)
	}
	if _, err := r.dec.ReadToken(); err != io.EOF {
		if err == nil {
			return fmt.Errorf("%w: a second value after the first", ErrSyntax)
		}
		return syntaxError(err)
	}
	return nil
}

// syntaxError is ErrSyntax with where jsontext stopped. jsontext's own
// message is left out: it can quote the document's names and text, which
// callers log.
func syntaxError(err error) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		return fmt.Errorf("%w at byte %d", ErrSyntax, se.ByteOffset)
	}
	return ErrSyntax
}

// ParseObject splits a JSON object into its members. Values alias data.
func ParseObject(data []byte) (Object, error) {
	return ParseObjectInto(make(Object, 0, 8), data)
}

// ParseObjectInto is ParseObject reusing dst, so a caller
// parsing many small objects can reuse one slice. The result aliases dst.
func ParseObjectInto(dst Object, data []byte) (Object, error) {
	if obj, ok := scanObject(dst, data); ok {
		return obj, nil
	}
	return readObject(dst, data)
}

// scanObject is ParseObjectInto by the scanner (scan.go); ok is false for
// a document it refuses.
func scanObject(dst Object, data []byte) (Object, bool) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	obj := dst[:0]
	for i = skipWS(data, i+1); ; {
		if i < len(data) && data[i] == '}' && len(obj) == 0 {
			i++
			break
		}
		if i >= len(data) || data[i] != '"' {
			return nil, false
		}
		end, err := skipString(data, i)
		if err != nil {
			return nil, false
		}
		key, ok := keyString(data[i:end])
		if i = skipWS(data, end); !ok || i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipWS(data, i+1)
		vend, err := skipValue(data, i, 0)
		if err != nil {
			return nil, false
		}
		obj = append(obj, Field{Key: key, Value: data[i:vend]})
		i = skipWS(data, vend)
		if i < len(data) && data[i] == ',' {
			i = skipWS(data, i+1)
			continue
		}
		if i >= len(data) || data[i] != '}' {
			return nil, false
		}
		i++
		break
	}
	return obj, skipWS(data, i) == len(data)
}

// readObject is ParseObjectInto by jsontext, which says where a
// document is malformed.
func readObject(dst Object, data []byte) (Object, error) {
	r := newReader(data)
	defer r.release()
	if err := r.open('{'); err != nil {
		return nil, err
	}
	obj := dst[:0]
	for r.dec.PeekKind() != '}' {
		name, err := r.dec.ReadValue()
		if err != nil {
			return nil, syntaxError(err)
		}
		value, err := r.dec.ReadValue()
		if err != nil {
			return nil, syntaxError(err)
		}
		// jsontext has checked the name, so it decodes.
		key, _ := keyString(name)
		obj = append(obj, Field{Key: key, Value: value})
	}
	if err := r.close(); err != nil {
		return nil, err
	}
	return obj, nil
}

// ParseArray splits a JSON array into its elements. Elements alias data.
func ParseArray(data []byte) ([][]byte, error) {
	return parseArrayInto(make([][]byte, 0, 4), data)
}

// parseArrayInto is ParseArray reusing dst.
func parseArrayInto(dst [][]byte, data []byte) ([][]byte, error) {
	if out, ok := scanArray(dst, data); ok {
		return out, nil
	}
	return readArray(dst, data)
}

// scanArray is parseArrayInto by the scanner; ok is false for a document
// it refuses.
func scanArray(dst [][]byte, data []byte) ([][]byte, bool) {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		return nil, false
	}
	out := dst[:0]
	for i = skipWS(data, i+1); ; {
		if i < len(data) && data[i] == ']' && len(out) == 0 {
			i++
			break
		}
		end, err := skipValue(data, i, 0)
		if err != nil {
			return nil, false
		}
		out = append(out, data[i:end])
		i = skipWS(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipWS(data, i+1)
			continue
		}
		if i >= len(data) || data[i] != ']' {
			return nil, false
		}
		i++
		break
	}
	return out, skipWS(data, i) == len(data)
}

// readArray is parseArrayInto by jsontext, which says where a document
// is malformed.
func readArray(dst [][]byte, data []byte) ([][]byte, error) {
	r := newReader(data)
	defer r.release()
	if err := r.open('['); err != nil {
		return nil, err
	}
	out := dst[:0]
	for r.dec.PeekKind() != ']' {
		v, err := r.dec.ReadValue()
		if err != nil {
			return nil, syntaxError(err)
		}
		out = append(out, v)
	}
	if err := r.close(); err != nil {
		return nil, err
	}
	return out, nil
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

// keyString returns a quoted key as a string, interned when it is one of
// the APIs' keys.
func keyString(quoted []byte) (string, bool) {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return Unquote(quoted)
	}
	if len(raw) > 0 && len(raw) < len(knownKeys) {
		for _, k := range knownKeys[len(raw)] {
			if k[0] == raw[0] && string(raw) == k {
				return k, true
			}
		}
	}
	return string(raw), true
}

// Unquote decodes a raw JSON string value. It reports false for anything
// that is not a string.
func Unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	// Most strings are short: decoded on the stack, the string is the only
	// allocation.
	var buf [128]byte
	b, ok := appendUnquoted(buf[:0], raw)
	if !ok {
		return "", false
	}
	return string(b), true
}

// appendUnquoted appends the decoded JSON string literal quoted to dst.
// jsontext decodes invalid UTF-8 and lone surrogates as encoding/json does,
// to U+FFFD, and reports them with the same kind of error as a literal
// that is no string at all; the grammar check, which allows them, tells
// the two apart on that rare path. It checks a copy: the check's pooled
// decoder would otherwise keep quoted, so that no caller could decode
// from a buffer on its stack.
func appendUnquoted(dst, quoted []byte) ([]byte, bool) {
	out, err := jsontext.AppendUnquote(dst, quoted)
	if err != nil && !jsontext.Value(bytes.Clone(quoted)).IsValid(readOptions...) {
		return out, false
	}
	return out, true
}

// AppendUnquoted appends the decoded JSON string literal quoted (its
// quotes included) to dst, as Unquote decodes it, without a copy of it.
func AppendUnquoted(dst, quoted []byte) ([]byte, bool) { return appendUnquoted(dst, quoted) }

// AppendUnescaped appends the decoded content of a JSON string (the bytes
// between its quotes) to dst exactly as encoding/json decodes it: escapes
// resolved, a surrogate pair joined, a lone surrogate or an invalid UTF-8
// byte turned into U+FFFD. It reports false for content no JSON string can
// have (a bare quote or control character, a bad escape); dst then holds
// what was decoded before it.
func AppendUnescaped(dst, s []byte) ([]byte, bool) {
	var buf [256]byte
	quoted := append(append(append(buf[:0], '"'), s...), '"')
	return appendUnquoted(dst, quoted)
}

// AppendEscapesDecoded is AppendUnescaped that keeps every byte outside an
// escape as it is, valid UTF-8 or not: for pieces of a string cut at any
// byte, such as streamed arguments, which are valid only once joined.
func AppendEscapesDecoded(dst, s []byte) ([]byte, bool) {
	if utf8.Valid(s) {
		return AppendUnescaped(dst, s)
	}
	// An escape is ASCII, so cutting at the invalid bytes never cuts one.
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			r, size := utf8.DecodeRune(s[n:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			n += size
		}
		var ok bool
		if dst, ok = AppendUnescaped(dst, s[:n]); !ok {
			return dst, false
		}
		s = s[n:]
		if len(s) > 0 {
			dst = append(dst, s[0])
			s = s[1:]
		}
	}
	return dst, true
}
