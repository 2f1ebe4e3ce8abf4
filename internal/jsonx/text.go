package jsonx

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrNotUTF8 reports a document with a string that is not UTF-8.
var ErrNotUTF8 = errors.New("a string is not UTF-8")

// Text is a document read once into a tape: its grammar checked, the UTF-8
// of its strings checked, every value's place found, in one pass. Reading
// an answer by splitting it went over the bytes of a call's arguments once
// per level of nesting above them (answer, choice, message, calls, call,
// function), after a checked pass, a UTF-8 pass and a pass for folded
// keys; from the tape, each of those is a walk over a few nodes.
//
// Node indexes name values: 0 is the document's own value, -1 a value
// that is absent. An object's members are a name node then the value's
// nodes.
type Text struct {
	Data  []byte
	Nodes []Node
	// NotUTF8 reports a string with bytes that are not UTF-8. Such a text
	// is read all the same, as encoding/json reads it; Str then decodes
	// them as U+FFFD.
	NotUTF8 bool
	// valid: the last read accepted Data, so Follow may start from it.
	valid bool
	// followed: Follow read Data as its prev with at most string node
	// changed (-1: none) changed.
	followed bool
	changed  int
}

// texts pools tapes: a request reads its answer, or each event of its
// stream, and needs the nodes only until it has taken what it keeps.
var texts = sync.Pool{New: func() any { return new(Text) }}

// maxPooledNodes bounds the tapes kept for reuse, so one huge answer does
// not pin its nodes in the pool.
const maxPooledNodes = 1 << 14

// GetText returns an empty Text from the pool.
func GetText() *Text { return texts.Get().(*Text) }

// Release returns t to the pool; it must not be used after.
func (t *Text) Release() {
	if cap(t.Nodes) > maxPooledNodes {
		t.Nodes = nil
	}
	t.Data, t.Nodes, t.NotUTF8, t.valid, t.followed = nil, t.Nodes[:0], false, false, false
	texts.Put(t)
}

// Read reads data, exactly one JSON value with optional surrounding
// whitespace, into t. It reports false for anything encoding/json refuses
// and for nesting deeper than ParseObject reads; invalid UTF-8 in strings
// is accepted and reported in NotUTF8.
func (t *Text) Read(data []byte) bool {
	s := tapeScan{d: data, nodes: t.Nodes[:0], limit: maxDepth, utf8: true}
	ok := s.read()
	t.Data, t.Nodes, t.NotUTF8, t.valid, t.followed = data, s.nodes, s.notUTF8, ok, false
	return ok
}

// Kind is the kind of node i ('{', '[', '"', '0', 't', 'f', 'n'), or 0
// when it is absent.
func (t *Text) Kind(i int) byte {
	if i < 0 {
		return 0
	}
	return t.Nodes[i].Kind
}

// Null reports a value that is absent or null.
func (t *Text) Null(i int) bool { return i < 0 || t.Nodes[i].Kind == 'n' }

// Len counts an object's members or an array's elements.
func (t *Text) Len(i int) int { return int(t.Nodes[i].Len) }

// Next is the node after value i and all it holds: an array's next
// element, or an object's next name when i is a member's value.
func (t *Text) Next(i int) int { return int(t.Nodes[i].Next) }

// Raw is the value's text as written, a string with its quotes; nil when
// absent.
func (t *Text) Raw(i int) []byte {
	if i < 0 {
		return nil
	}
	n := &t.Nodes[i]
	if n.Kind == '"' {
		return t.Data[n.Start-1 : n.End+1]
	}
	return t.Data[n.Start:n.End]
}

// plain reports a string node whose text is its value: no escapes and
// nothing that decodes to U+FFFD.
func (t *Text) plain(n *Node) bool { return !n.Escaped && !t.NotUTF8 }

// Get is the node of key's value in the object at node obj, or -1 when
// obj is no object or has no such member. Of repeated names the last
// counts, as in Object.Get; names are compared decoded.
func (t *Text) Get(obj int, key string) int {
	if obj < 0 || t.Nodes[obj].Kind != '{' {
		return -1
	}
	found := -1
	for j, k := obj+1, 0; k < int(t.Nodes[obj].Len); k++ {
		// A name of another length, as written, is another name unless
		// it must be decoded to be compared.
		if n := &t.Nodes[j]; int(n.End-n.Start) == len(key) || !t.plain(n) {
			if t.Is(j, key) {
				found = j + 1
			}
		}
		j = int(t.Nodes[j+1].Next)
	}
	return found
}

// Members finds several members of the object at node obj in one walk:
// vals[k] becomes Get(obj, keys[k]). A chunk's reader wants four or five
// of an object's members, and a walk each was most of its reading. It is
// for a reader that must read an object as encoding/json does or leave it
// to it, so it reports false when the object
// gives one of keys twice (which repeat counts is a decoder's rule, and
// the values may differ in type), or has a name that differs from one of
// fold's names only in letter case, which encoding/json takes for that
// key; fold holds keys, and may hold more.
func (t *Text) Members(obj int, keys []string, fold *KeyFold, vals []int) bool {
	for k := range vals {
		vals[k] = -1
	}
	if obj < 0 || t.Nodes[obj].Kind != '{' {
		return true
	}
	var buf [32]byte
	for j, m := obj+1, 0; m < int(t.Nodes[obj].Len); m++ {
		name := t.Name(j, buf[:0])
		k := 0
		for k < len(keys) && string(name) != keys[k] {
			k++
		}
		switch {
		case k < len(keys) && vals[k] >= 0:
			return false
		case k < len(keys):
			vals[k] = j + 1
		case (!fold.plain || MayFold(name)) && fold.foldsDecoded(name):
			return false
		}
		j = int(t.Nodes[j+1].Next)
	}
	return true
}

// Repeats reports an object at node obj that gives a name twice, as
// decoded; an object of more than maxRepeatScan members counts as one, for
// a reader that reads a few members and leaves anything else to a
// decoder.
func (t *Text) Repeats(obj int) bool {
	n := int(t.Nodes[obj].Len)
	if n > maxRepeatScan {
		return true
	}
	var names [maxRepeatScan][]byte
	var bufs [maxRepeatScan][32]byte
	for j, m := obj+1, 0; m < n; m++ {
		names[m] = t.Name(j, bufs[m][:0])
		for _, before := range names[:m] {
			if string(before) == string(names[m]) {
				return true
			}
		}
		j = int(t.Nodes[j+1].Next)
	}
	return false
}

// maxRepeatScan bounds the objects Repeats compares name by name.
const maxRepeatScan = 8

// Name is the decoded value of string node i: its bytes in the text when
// it needs no decoding, else decoded into buf. It is for comparing a
// member's name, and holds nothing for a node that is no string.
func (t *Text) Name(i int, buf []byte) []byte {
	n := &t.Nodes[i]
	if n.Kind != '"' {
		return nil
	}
	if t.plain(n) {
		return t.Data[n.Start:n.End]
	}
	b, _ := t.AppendStr(buf, i)
	return b
}

// Is reports whether node i is a string whose value is s.
func (t *Text) Is(i int, s string) bool {
	if i < 0 {
		return false
	}
	if n := &t.Nodes[i]; t.plain(n) {
		return n.Kind == '"' && string(t.Data[n.Start:n.End]) == s
	}
	return t.isDecoded(i, s)
}

// isDecoded is Is for a string that must be decoded to be compared.
func (t *Text) isDecoded(i int, s string) bool {
	var buf [64]byte
	b, ok := t.AppendStr(buf[:0], i)
	return ok && string(b) == s
}

// Str decodes a string node; false for any other value.
func (t *Text) Str(i int) (string, bool) {
	if i < 0 || t.Nodes[i].Kind != '"' {
		return "", false
	}
	if n := &t.Nodes[i]; t.plain(n) {
		return string(t.Data[n.Start:n.End]), true
	}
	return Unquote(t.Raw(i))
}

// AppendStr appends a string node's decoded value to dst; false for any
// other value.
func (t *Text) AppendStr(dst []byte, i int) ([]byte, bool) {
	if i < 0 || t.Nodes[i].Kind != '"' {
		return dst, false
	}
	n := &t.Nodes[i]
	switch {
	case t.plain(n):
		return append(dst, t.Data[n.Start:n.End]...), true
	case !t.NotUTF8:
		return appendEscaped(dst, t.Data[n.Start:n.End]), true
	}
	return appendUnquoted(dst, t.Raw(i))
}

// appendEscaped decodes the content of a string the tape has checked, in
// a text that is UTF-8: every escape is one JSON defines, so runs between
// them are copied whole and each escape read without checking it again.
// A call's arguments are a JSON text escaped into a string, a backslash
// every few bytes, and decoding them was a sixth of judging an answer.
func appendEscaped(dst, s []byte) []byte {
	for {
		// The content of a checked string has no bare quote, so the next
		// stop of quoteOrEscape is a backslash.
		k := quoteOrEscape(s, 0)
		if k == len(s) {
			return append(dst, s...)
		}
		dst = append(dst, s[:k]...)
		s = s[k:]
		if s[1] != 'u' {
			dst = append(dst, unescapeByte[s[1]])
			s = s[2:]
			continue
		}
		r, _ := hex4(s[2:])
		s = s[6:]
		if utf16.IsSurrogate(r) {
			r2 := rune(-1)
			if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
				r2, _ = hex4(s[2:])
			}
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				r = d
				s = s[6:]
			} else {
				r = utf8.RuneError
			}
		}
		dst = utf8.AppendRune(dst, r)
	}
}

// AppendChecked appends the decoded content of a string (the bytes
// between its quotes) taken from a Text that read as UTF-8 (NotUTF8
// false), which has checked its escapes.
func AppendChecked(dst, s []byte) []byte { return appendEscaped(dst, s) }

// unescapeByte is the byte each one-letter escape stands for.
var unescapeByte = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// Bytes is a string node's decoded value in a new slice that holds it
// exactly; false for any other value.
func (t *Text) Bytes(i int) ([]byte, bool) {
	if i < 0 || t.Nodes[i].Kind != '"' {
		return nil, false
	}
	n := &t.Nodes[i]
	return t.AppendStr(make([]byte, 0, n.End-n.Start), i)
}

// InText is In for a read text: whether any object key of t folds onto
// one of the names without equalling it. It looks at the names alone,
// found on the tape, where In has to look for them in the bytes.
func (k *KeyFold) InText(t *Text) bool {
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Kind != '{' {
			continue
		}
		for j, m := i+1, 0; m < int(n.Len); m++ {
			name := &t.Nodes[j]
			if k.folds(t.Data[name.Start:name.End]) {
				return true
			}
			j = int(t.Nodes[j+1].Next)
		}
	}
	return false
}

// Readable reads data into t and holds it to what a document crossing
// toolgate must be: JSON (ErrSyntax), UTF-8 throughout (ErrNotUTF8), and
// without a key that folds onto one of fold's names (ErrFolded; fold may
// be nil). A document that is not JSON is still checked for the other
// two first, so the error is the one a check of each in turn would give.
func (t *Text) Readable(data []byte, fold *KeyFold) error {
	if !t.Read(data) {
		switch {
		case !utf8.Valid(data):
			return ErrNotUTF8
		case fold != nil && fold.In(data):
			return ErrFolded
		}
		return syntaxAt(data)
	}
	switch {
	case t.NotUTF8:
		return ErrNotUTF8
	case fold != nil && fold.InText(t):
		return ErrFolded
	}
	return nil
}

// ErrFolded reports a key that folds onto a protocol key.
var ErrFolded = errors.New("a key differs from a protocol key only in letter case")

// Unquoted is Unquote into a new byte slice, with no copy beyond the one
// it returns: false for anything that is not a string.
func Unquoted(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	body := raw[1 : len(raw)-1]
	if stringStop(body, 0) == len(body) && utf8.Valid(body) {
		return bytes.Clone(body), true
	}
	return appendUnquoted(make([]byte, 0, len(body)), raw)
}

// syntaxAt is the error of a document the tape refused: ErrSyntax with
// where jsontext stops reading it, when it does.
func syntaxAt(data []byte) error {
	r := newReader(data)
	defer r.release()
	if _, err := r.dec.ReadValue(); err != nil {
		return syntaxError(err)
	}
	if _, err := r.dec.ReadToken(); err != io.EOF && err != nil {
		return syntaxError(err)
	}
	return ErrSyntax
}
