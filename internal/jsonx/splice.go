package jsonx

import (
	"errors"
	"slices"
)

// Edit replaces body[Start:End] with Text; Start == End inserts.
type Edit struct {
	Start, End int
	Text       []byte
}

// ErrNotWithin reports a value that is not a slice of the body it is said
// to come from.
var ErrNotWithin = errors.New("jsonx: value is not within the body")

// Offset returns where sub, a slice the Split* functions took out of body,
// starts in body. Splitting never copies, so the two share an array and
// sub's capacity says how far before body's end it starts.
func Offset(body, sub []byte) (int, error) {
	off := cap(body) - cap(sub)
	if len(sub) == 0 || off < 0 || off+len(sub) > len(body) || &body[off] != &sub[0] {
		return 0, ErrNotWithin
	}
	return off, nil
}

// SetMember returns the edit that gives the object obj, a slice of body,
// the member key: value. A member already there has its value replaced in
// place; else the member is inserted just before the closing brace. Every
// other byte of body stays as it was, whitespace included.
func SetMember(body, obj []byte, key string, value []byte) (Edit, error) {
	members, err := SplitObject(obj)
	if err != nil {
		return Edit{}, err
	}
	if old := members.Get(key); old != nil {
		off, err := Offset(body, old)
		if err != nil {
			return Edit{}, err
		}
		return Edit{Start: off, End: off + len(old), Text: value}, nil
	}
	start, err := Offset(body, obj)
	if err != nil {
		return Edit{}, err
	}
	end := start + len(obj) - 1
	for end > start && body[end] != '}' {
		end--
	}
	text := AppendString(nil, key)
	text = append(append(text, ':'), value...)
	if len(members) > 0 {
		text = append([]byte{','}, text...)
	}
	return Edit{Start: end, End: end, Text: text}, nil
}

// Splice applies edits to body, which they must not overlap, into a new
// slice; body is left as it was.
func Splice(body []byte, edits []Edit) []byte {
	edits = slices.Clone(edits)
	slices.SortFunc(edits, func(a, b Edit) int { return a.Start - b.Start })
	n := len(body)
	for _, e := range edits {
		n += len(e.Text) - (e.End - e.Start)
	}
	out := make([]byte, 0, n)
	at := 0
	for _, e := range edits {
		out = append(out, body[at:e.Start]...)
		out = append(out, e.Text...)
		at = e.End
	}
	return append(out, body[at:]...)
}
