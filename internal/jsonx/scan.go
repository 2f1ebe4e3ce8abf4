package jsonx

// The hot path's grammar check. ParseObject and ParseArray run on every
// answer and on every stream event, and jsontext's decoder made the Chat
// stream benchmark (BenchmarkChatStreamFeed, 40 events) 25 to 40% slower
// than this scanner (58 µs against 70 to 82 µs on a quiet machine), which
// the load harness showed as 40 to 75 µs more CPU per stream. So the
// documents are checked here in one pass, and jsontext reads only those
// this scanner refuses, to say where: both accept exactly the JSON
// encoding/json accepts (FuzzParseObject, FuzzParseArray).

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 10000

// skipString returns the end of the string starting at i, checking what
// JSON requires of a string: no raw control characters and only defined
// escapes.
func skipString(d []byte, i int) (int, error) {
	i++
	for i < len(d) {
		if i = stringStop(d, i); i >= len(d) {
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
