package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonical returns the canonical text of a JSON value, so that two bodies
// a person would call the same request get the same digest: object members
// sorted by name (UTF-16 code units, as RFC 8785), no insignificant
// whitespace, strings re-escaped one way. Numbers stay as written: "1" and
// "1.0" differ, because reading them as floats would merge integers above
// 2^53 that an upstream keeps apart, and a client resending its own request
// writes its numbers the same way again.
//
// Duplicate member names, invalid UTF-8 and lone surrogates are refused:
// parsers disagree on what such a body means, so no digest can stand for
// it.
func Canonical(v []byte) ([]byte, error) {
	d := jsontext.NewDecoder(bytes.NewReader(v), jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false))
	var out bytes.Buffer
	out.Grow(len(v))
	if err := canonValue(d, &out); err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, errors.New("approval: canonical JSON: more than one value")
	}
	return out.Bytes(), nil
}

func canonValue(d *jsontext.Decoder, out *bytes.Buffer) error {
	tok, err := d.ReadToken()
	if err != nil {
		return fmt.Errorf("approval: canonical JSON: %w", err)
	}
	switch tok.Kind() {
	case '{':
		return canonObject(d, out)
	case '[':
		out.WriteByte('[')
		for i := 0; d.PeekKind() != ']'; i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := canonValue(d, out); err != nil {
				return err
			}
		}
		_, err := d.ReadToken()
		out.WriteByte(']')
		return err
	case '"':
		writeString(out, tok.String())
	default: // numbers as written; true, false, null
		out.WriteString(tok.String())
	}
	return nil
}

type member struct {
	name  string
	key   []uint16
	value []byte
}

func canonObject(d *jsontext.Decoder, out *bytes.Buffer) error {
	var ms []member
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return fmt.Errorf("approval: canonical JSON: %w", err)
		}
		name := tok.String() // the token is void after the next read
		var v bytes.Buffer
		if err := canonValue(d, &v); err != nil {
			return err
		}
		ms = append(ms, member{name: name, key: utf16.Encode([]rune(name)), value: v.Bytes()})
	}
	if _, err := d.ReadToken(); err != nil {
		return fmt.Errorf("approval: canonical JSON: %w", err)
	}
	slices.SortFunc(ms, func(a, b member) int { return slices.Compare(a.key, b.key) })
	out.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			out.WriteByte(',')
		}
		writeString(out, m.name)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

// writeString escapes only what JSON requires, the RFC 8785 way: the
// quote, the backslash and control characters, with the short escapes
// where they exist.
func writeString(out *bytes.Buffer, s string) {
	const hexdig = "0123456789abcdef"
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out.WriteByte('\\')
			out.WriteByte(c)
		case c == '\b':
			out.WriteString(`\b`)
		case c == '\t':
			out.WriteString(`\t`)
		case c == '\n':
			out.WriteString(`\n`)
		case c == '\f':
			out.WriteString(`\f`)
		case c == '\r':
			out.WriteString(`\r`)
		case c < 0x20:
			out.WriteString(`\u00`)
			out.WriteByte(hexdig[c>>4])
			out.WriteByte(hexdig[c&0xf])
		default:
			out.WriteByte(c)
		}
	}
	out.WriteByte('"')
}

// Digest is "sha256:" and the lower-case hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// RequestDigest is the digest of a request body's canonical text: the same
// for every JSON-equal body.
func RequestDigest(body []byte) (string, error) {
	c, err := Canonical(body)
	if err != nil {
		return "", err
	}
	return Digest(c), nil
}

// CanonicalCall is the canonical text of one call: the object
// {"arguments":…,"name":…}, with absent or null arguments as {}.
func CanonicalCall(name string, args []byte) ([]byte, error) {
	a := []byte("{}")
	if t := bytes.TrimSpace(args); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		c, err := Canonical(t)
		if err != nil {
			return nil, err
		}
		a = c
	}
	var out bytes.Buffer
	out.WriteString(`{"arguments":`)
	out.Write(a)
	out.WriteString(`,"name":`)
	writeString(&out, strings.ToValidUTF8(name, "\uFFFD"))
	out.WriteByte('}')
	return out.Bytes(), nil
}

// CallDigest is the digest of a call's name and canonical arguments.
func CallDigest(name string, args []byte) (string, error) {
	c, err := CanonicalCall(name, args)
	if err != nil {
		return "", err
	}
	return Digest(c), nil
}
