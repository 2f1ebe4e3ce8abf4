package jsonx

import "bytes"

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
	if int64(len(data)) >= 1<<31 {
		return dst, false
	}
	i := skipWS(data, 0)
	dst, i, ok := appendNode(dst, data, i, 0)
	if !ok || skipWS(data, i) != len(data) {
		return dst, false
	}
	return dst, true
}

// appendNode reads the value at d[i:].
func appendNode(dst []Node, d []byte, i, depth int) ([]Node, int, bool) {
	if i >= len(d) {
		return dst, i, false
	}
	switch c := d[i]; c {
	case '"':
		end, err := skipString(d, i)
		if err != nil {
			return dst, i, false
		}
		n := Node{Kind: '"', Start: int32(i + 1), End: int32(end - 1), Next: int32(len(dst) + 1)}
		n.Escaped = bytes.IndexByte(d[i+1:end-1], '\\') >= 0
		return append(dst, n), end, true
	case '{', '[':
		if depth >= tapeDepth {
			return dst, i, false
		}
		return appendContainer(dst, d, i, depth)
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
		return dst, i, false
	}
	return append(dst, Node{Kind: kind, Start: int32(i), End: int32(j), Next: int32(len(dst) + 1)}), j, true
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// appendContainer reads the object or array opening at d[i].
func appendContainer(dst []Node, d []byte, i, depth int) ([]Node, int, bool) {
	open, closer := d[i], byte('}')
	if open == '[' {
		closer = ']'
	}
	at := len(dst)
	dst = append(dst, Node{Kind: open, Start: int32(i)})
	i = skipWS(d, i+1)
	count := int32(0)
	if i < len(d) && d[i] == closer {
		return closeNode(dst, at, count, i), i + 1, true
	}
	for {
		var ok bool
		if open == '{' {
			if i >= len(d) || d[i] != '"' {
				return dst, i, false
			}
			if dst, i, ok = appendNode(dst, d, i, depth+1); !ok {
				return dst, i, false
			}
			if i = skipWS(d, i); i >= len(d) || d[i] != ':' {
				return dst, i, false
			}
			i = skipWS(d, i+1)
		}
		if dst, i, ok = appendNode(dst, d, i, depth+1); !ok {
			return dst, i, false
		}
		count++
		if i = skipWS(d, i); i >= len(d) {
			return dst, i, false
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case closer:
			return closeNode(dst, at, count, i), i + 1, true
		default:
			return dst, i, false
		}
	}
}

func closeNode(dst []Node, at int, count int32, end int) []Node {
	dst[at].Len, dst[at].End, dst[at].Next = count, int32(end+1), int32(len(dst))
	return dst
}
