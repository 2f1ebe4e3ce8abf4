package jsonx

import (
	"bytes"
	"encoding/json"
)

// The splitters below, and KeyFold.In, which shares their string scanning,
// are the part of reading left hand-written: they take apart values of a
// document jsontext has already checked, by quotes and brackets alone.
// Splitting with jsontext checks every nested value again: walking a
// stream event down to a call's arguments (BenchmarkSplitDelta) took
// 3.8 µs instead of 1.8 µs, and judging the benchmark stream
// (BenchmarkStreamFilterWorkload in proxy/openaichat) 448 µs instead of
// 357 µs; CPU time per op, medians of 5 runs on a loaded 2-core machine.

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

// closingQuote returns the index of the quote that ends the string opening
// at start, or -1.
func closingQuote(d []byte, start int) int {
	for j := start + 1; ; j += 2 {
		if j = quoteOrEscape(d, j); j >= len(d) {
			return -1
		}
		if d[j] == '"' {
			return j
		}
		// A backslash: the byte after it is escaped, whatever it is.
	}
}

// SameText reports whether two JSON texts are the same once their
// insignificant whitespace is removed: the same call written twice, not
// two values that merely decode alike (key order and escapes count).
// Invalid JSON is the same only as its identical bytes.
func SameText(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
