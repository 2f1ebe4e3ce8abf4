package jsonx

import "unicode/utf8"

// Node is one value of a document read by AppendTape. An object's node is
// followed by its members, each a name (a string node) then the value's
// nodes; an array's by its elements' nodes.
type Node struct {
	// Kind is '{', '[', '"', '0' (a number), 't', 'f' or 'n'.
	Kind byte
	// Escaped marks a string with at least one escape.
	Escaped bool
	// Start and End delimit the value's text in the document; a string's
	// without its quotes.
	Start, End int32
	// Len counts an object's members or an array's elements.
	Len int32
	// Next is the index of the node after this value and all it holds.
	Next int32
}

// tapeDepth is the deepest nesting AppendTape reads, as Decode.
const tapeDepth = decodeDepth

// AppendTape reads data, which must be exactly one JSON value with
// optional surrounding whitespace, into nodes appended to dst, in one pass
// and without allocating beyond dst's growth. It reports false for
// anything encoding/json refuses, for nesting deeper than Decode reads,
// and for documents of 2 GiB or more. It accepts invalid UTF-8 inside
// strings as encoding/json does; callers that refuse it check first.
// Repeated names are kept: it is for the caller to notice them.
func AppendTape(dst []Node, data []byte) ([]Node, bool) {
	s := tapeScan{d: data, nodes: dst, limit: tapeDepth}
	ok := s.read()
	return s.nodes, ok
}

// tapeScan is one pass over a document: the grammar, each value's place
// and, when asked, the UTF-8 of every string, which is all of a JSON
// text's UTF-8 that can be wrong (outside strings, a byte above 0x7F is a
// grammar error).
type tapeScan struct {
	d     []byte
	nodes []Node
	limit int
	// utf8 asks for strings to be checked; notUTF8 records one that is not.
	utf8, notUTF8 bool
}

func (s *tapeScan) read() bool {
	if int64(len(s.d)) >= 1<<31 {
		return false
	}
	i, ok := s.value(skipWS(s.d, 0), 0)
	return ok && skipWS(s.d, i) == len(s.d)
}

// value reads the value at d[i:].
func (s *tapeScan) value(i, depth int) (int, bool) {
	d := s.d
	if i >= len(d) {
		return i, false
	}
	switch c := d[i]; c {
	case '"':
		return s.str(i)
	case '{', '[':
		if depth >= s.limit {
			return i, false
		}
		return s.container(i, depth)
	}
	j := i
	for j < len(d) && !isDelim(d[j]) {
		j++
	}
	lit := d[i:j]
	kind := byte('0')
	switch {
	case string(lit) == "true", string(lit) == "false", string(lit) == "null":
		kind = lit[0]
	case !validNumber(lit):
		return i, false
	}
	s.nodes = append(s.nodes, Node{Kind: kind, Start: int32(i), End: int32(j), Next: int32(len(s.nodes) + 1)})
	return j, true
}

// str reads the string opening at d[i], checking what JSON requires of
// one (no raw control characters, only defined escapes) and, when asked,
// its UTF-8, in the same pass that finds its end and its escapes.
func (s *tapeScan) str(i int) (int, bool) {
	d := s.d
	start, escaped := i+1, false
	for i++; ; {
		if s.utf8 {
			i = stringStopHigh(d, i)
		} else {
			i = stringStop(d, i)
		}
		if i >= len(d) {
			return i, false
		}
		switch c := d[i]; {
		case c == '"':
			s.nodes = append(s.nodes, Node{Kind: '"', Escaped: escaped, Start: int32(start), End: int32(i), Next: int32(len(s.nodes) + 1)})
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			// The one-letter escapes of an argument string (\" most of
			// all) come every few bytes: they are passed here, in line.
			if i+1 < len(d) && simpleEscape[d[i+1]] {
				i += 2
			} else if n := escapeLen(d[i:]); n > 0 {
				i += n
			} else {
				return i, false
			}
			escaped = true
		default: // a byte above 0x7F, when checking UTF-8
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				s.notUTF8 = true
			}
			i += size
		}
	}
}

// simpleEscape marks the letters of the two-byte escapes.
var simpleEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// escapeLen is the length of the escape at the start of b, or 0 for one
// JSON does not define.
func escapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if _, ok := hex4(b[2:]); ok {
			return 6
		}
	}
	return 0
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// container reads the object or array opening at d[i].
func (s *tapeScan) container(i, depth int) (int, bool) {
	d := s.d
	open, closer := d[i], byte('}')
	if open == '[' {
		closer = ']'
	}
	at := len(s.nodes)
	s.nodes = append(s.nodes, Node{Kind: open, Start: int32(i)})
	i = skipWS(d, i+1)
	count := int32(0)
	if i < len(d) && d[i] == closer {
		return s.close(at, count, i), true
	}
	for {
		var ok bool
		if open == '{' {
			if i >= len(d) || d[i] != '"' {
				return i, false
			}
			if i, ok = s.str(i); !ok {
				return i, false
			}
			if i = skipWS(d, i); i >= len(d) || d[i] != ':' {
				return i, false
			}
			i = skipWS(d, i+1)
		}
		if i, ok = s.value(i, depth+1); !ok {
			return i, false
		}
		count++
		if i = skipWS(d, i); i >= len(d) {
			return i, false
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case closer:
			return s.close(at, count, i), true
		default:
			return i, false
		}
	}
}

// close completes the container node at, whose closing bracket is at end,
// and returns the position after it.
func (s *tapeScan) close(at int, count int32, end int) int {
	n := &s.nodes[at]
	n.Len, n.End, n.Next = count, int32(end+1), int32(len(s.nodes))
	return end + 1
}
