package gemini

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// Vertex AI can stream a call's arguments (toolConfig.functionCallingConfig
// .streamFunctionCallArguments): the call then arrives as functionCall
// fragments, the first with its name and "willContinue": true, the next
// with partialArgs (each a JSON path, RFC 9535, and one value: a string
// goes on across fragments while its "willContinue" says so), the last
// without willContinue. No fragment holds args. The agent runs the
// arguments the fragments build, so the codec assembles them and judges
// that call; the fragments themselves pass to the client as sent.

// errPartial reports streamed arguments the codec cannot assemble into one
// call; such an answer is refused, never passed unjudged.
var errPartial = errors.New("gemini: streamed call arguments cannot be assembled")

func partialErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errPartial, fmt.Sprintf(format, args...))
}

// fragment reports whether a functionCall object is part of a call whose
// arguments are streamed, and whether more of it follows.
func fragment(fc jsonx.Object) (streamed, more bool) {
	more = string(get(fc, "willContinue")) == "true"
	return more || has(fc, "partialArgs"), more
}

// assembly gathers one call's fragments.
type assembly struct {
	part jsonx.Object // the first fragment's part
	fc   jsonx.Object // its functionCall
	args *argNode
}

// assembler follows the parts of one candidate in order, across chunks.
type assembler struct {
	open *assembly
}

// add reads one part. It returns the part to judge in its place: the part
// itself (any part that is not a call, even between fragments), nil for a
// fragment while its call is still open, and the whole call, as one part
// with args, once its last fragment arrived. An open call keeps slices of
// raw, so raw must stay as it is while the call is open: a stream passes
// its own copy of each part, never an event's bytes.
func (a *assembler) add(raw []byte) ([]byte, error) {
	p, err := jsonx.ParseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: a part is not an object", ErrShape)
	}
	fcRaw := get(p, "functionCall")
	if fcRaw == nil {
		// Text or a thought between fragments is its own part; the call
		// goes on with the next functionCall part.
		return raw, nil
	}
	fc, err := jsonx.ParseObject(fcRaw)
	if err != nil {
		return nil, fmt.Errorf("%w: functionCall is not an object", ErrShape)
	}
	streamed, more := fragment(fc)
	if a.open == nil && !streamed {
		return raw, nil
	}
	if a.open == nil {
		if fc.Has("args") {
			return nil, partialErr("a streamed call carries args")
		}
		a.open = &assembly{part: p, fc: fc, args: &argNode{}}
	} else if err := a.open.follow(p, fc); err != nil {
		return nil, err
	}
	if err := a.open.partialArgs(get(fc, "partialArgs")); err != nil {
		return nil, err
	}
	if more {
		return nil, nil
	}
	whole := a.open.whole()
	a.open = nil
	return whole, nil
}

// follow checks a fragment that continues the call: it may not name
// another function or carry args of its own.
func (s *assembly) follow(p, fc jsonx.Object) error {
	if n := fc.Get("name"); n != nil && string(n) != string(s.fc.Get("name")) {
		if s.fc.Get("name") != nil {
			return partialErr("a fragment names another function")
		}
		s.fc = append(s.fc, jsonx.Field{Key: "name", Value: n})
	}
	if id := fc.Get("id"); id != nil && string(id) != string(s.fc.Get("id")) {
		if s.fc.Get("id") != nil {
			return partialErr("a fragment carries another id")
		}
		s.fc = append(s.fc, jsonx.Field{Key: "id", Value: id})
	}
	if fc.Has("args") {
		return partialErr("a fragment carries args")
	}
	if sig := get(p, "thoughtSignature"); sig != nil && !has(s.part, "thoughtSignature") {
		s.part = append(append(jsonx.Object(nil), s.part...), jsonx.Field{Key: "thoughtSignature", Value: sig})
	}
	return nil
}

// partialArgs adds one fragment's values.
func (s *assembly) partialArgs(raw []byte) error {
	if jsonx.IsNull(raw) {
		return nil
	}
	if s.fc.Has("args") {
		return partialErr("a call carries both args and partialArgs")
	}
	list, err := jsonx.ParseArray(raw)
	if err != nil {
		return partialErr("partialArgs is not an array")
	}
	for _, e := range list {
		pa, err := jsonx.ParseObject(e)
		if err != nil {
			return partialErr("a partial argument is not an object")
		}
		path, ok := jsonx.Unquote(get(pa, "jsonPath"))
		if !ok {
			return partialErr("a partial argument without a jsonPath")
		}
		steps, err := parsePath(path)
		if err != nil {
			return err
		}
		kind, value, err := partialValue(pa)
		if err != nil {
			return err
		}
		if err := s.args.set(steps, kind, value); err != nil {
			return err
		}
	}
	return nil
}

// whole is the assembled call as one part: the first fragment's part,
// its functionCall holding the name, id and the arguments built.
func (s *assembly) whole() []byte {
	fc := jsonx.Object{}
	for _, k := range []string{"id", "name"} {
		if v := s.fc.Get(k); v != nil {
			fc = append(fc, jsonx.Field{Key: k, Value: v})
		}
	}
	args := []byte("{}")
	if s.args.kind != 0 {
		args = s.args.json()
	}
	fc = append(fc, jsonx.Field{Key: "args", Value: args})
	key := spelling(s.part, "functionCall")
	return append(jsonx.Object(nil), s.part...).Set(key, fc.Bytes()).Bytes()
}

// partialValue reads the one value a partial argument holds.
func partialValue(pa jsonx.Object) (kind byte, value []byte, err error) {
	n := 0
	if v := get(pa, "stringValue"); v != nil {
		s, ok := jsonx.Unquote(v)
		if !ok {
			return 0, nil, partialErr("stringValue is not a string")
		}
		// An empty string adds nothing to a value begun, and is the
		// empty string where none was.
		kind, value, n = 's', []byte(s), n+1
		if s == "" {
			value = nil
		}
	}
	if v := get(pa, "numberValue"); v != nil {
		if _, ok := jsonx.Int(v); !ok && !isNumber(v) {
			return 0, nil, partialErr("numberValue is not a number")
		}
		kind, value, n = 'v', v, n+1
	}
	if v := get(pa, "boolValue"); v != nil {
		if string(v) != "true" && string(v) != "false" {
			return 0, nil, partialErr("boolValue is not a boolean")
		}
		kind, value, n = 'v', v, n+1
	}
	if get(pa, "nullValue") != nil {
		kind, value, n = 'v', []byte("null"), n+1
	}
	if n > 1 {
		return 0, nil, partialErr("a partial argument holds %d values", n)
	}
	if n == 0 {
		// A fragment that only closes its path adds nothing.
		return 's', nil, nil
	}
	return kind, value, nil
}

// isNumber reports a JSON number.
func isNumber(v []byte) bool {
	if len(v) == 0 || !(v[0] == '-' || '0' <= v[0] && v[0] <= '9') {
		return false
	}
	_, err := strconv.ParseFloat(string(v), 64)
	return err == nil
}

// step is one step of a JSON path: a member name, or an array index when
// key is empty and index is not negative.
type step struct {
	key   string
	index int
}

// maxPathSteps bounds a path's depth.
const maxPathSteps = 64

// parsePath reads the singular JSON paths the fragments use: $ then
// .name, ['name'], ["name"] or [n] steps.
func parsePath(path string) ([]step, error) {
	rest, ok := strings.CutPrefix(path, "$")
	if !ok {
		return nil, partialErr("jsonPath %q does not start at $", path)
	}
	var steps []step
	for rest != "" {
		if len(steps) == maxPathSteps {
			return nil, partialErr("jsonPath nested deeper than %d", maxPathSteps)
		}
		var st step
		var err error
		switch rest[0] {
		case '.':
			st, rest, err = dotStep(rest[1:])
		case '[':
			st, rest, err = bracketStep(rest[1:])
		default:
			err = partialErr("jsonPath %q is not a singular path", path)
		}
		if err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	return steps, nil
}

func dotStep(s string) (step, string, error) {
	end := strings.IndexAny(s, ".[")
	if end < 0 {
		end = len(s)
	}
	if end == 0 {
		return step{}, "", partialErr("an empty member name in a jsonPath")
	}
	return step{key: s[:end], index: -1}, s[end:], nil
}

func bracketStep(s string) (step, string, error) {
	if s != "" && (s[0] == '\'' || s[0] == '"') {
		q := s[0]
		var name []byte
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && i+1 < len(s):
				i++
				name = append(name, s[i])
			case c == q:
				if i+1 >= len(s) || s[i+1] != ']' {
					return step{}, "", partialErr("a jsonPath name is not closed")
				}
				return step{key: string(name), index: -1}, s[i+2:], nil
			default:
				name = append(name, c)
			}
		}
		return step{}, "", partialErr("a jsonPath name is not closed")
	}
	end := strings.IndexByte(s, ']')
	if end <= 0 {
		return step{}, "", partialErr("a jsonPath index is not closed")
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil || n < 0 || n > 1<<16 {
		return step{}, "", partialErr("a jsonPath index %q", s[:end])
	}
	return step{index: n}, s[end+1:], nil
}

// argNode is one value of the arguments being built: an object, an array,
// a string (which fragments extend) or another scalar.
type argNode struct {
	kind  byte // 0 not yet known, 'o', 'a', 's', 'v'
	keys  []string
	obj   map[string]*argNode
	arr   []*argNode
	value []byte
}

// set writes value at the path below n.
func (n *argNode) set(steps []step, kind byte, value []byte) error {
	for _, st := range steps {
		next, err := n.child(st)
		if err != nil {
			return err
		}
		n = next
	}
	switch {
	case n.kind == 0:
		n.kind, n.value = kind, append([]byte(nil), value...)
	case n.kind == 's' && kind == 's':
		n.value = append(n.value, value...)
	case kind == 's' && value == nil:
		// A closing fragment of a value already whole.
	default:
		return partialErr("a path is given two values")
	}
	return nil
}

// child is the node one step below n, created as the step's container.
func (n *argNode) child(st step) (*argNode, error) {
	if st.index < 0 {
		if n.kind == 0 {
			n.kind, n.obj = 'o', map[string]*argNode{}
		}
		if n.kind != 'o' {
			return nil, partialErr("a path names a member of a non-object")
		}
		c := n.obj[st.key]
		if c == nil {
			c = &argNode{}
			n.obj[st.key] = c
			n.keys = append(n.keys, st.key)
		}
		return c, nil
	}
	if n.kind == 0 {
		n.kind = 'a'
	}
	if n.kind != 'a' {
		return nil, partialErr("a path indexes a non-array")
	}
	if st.index > len(n.arr) {
		return nil, partialErr("a path skips an array element")
	}
	if st.index == len(n.arr) {
		n.arr = append(n.arr, &argNode{})
	}
	return n.arr[st.index], nil
}

// json writes the value; the root is always an object, {} when no
// fragment gave a value.
func (n *argNode) json() []byte {
	switch n.kind {
	case 'a':
		elems := make([][]byte, len(n.arr))
		for i, e := range n.arr {
			elems[i] = e.json()
		}
		return jsonx.AppendArray(nil, elems)
	case 's':
		return jsonx.String(string(n.value))
	case 'v':
		return n.value
	case 'o':
		o := make(jsonx.Object, 0, len(n.keys))
		for _, k := range n.keys {
			o = append(o, jsonx.Field{Key: k, Value: n.obj[k].json()})
		}
		return o.Bytes()
	}
	return []byte("null")
}

// assemble is a candidate's parts with each streamed call as one part
// (the parts themselves when none is streamed). A call still open when the
// parts end cannot be judged and is refused.
func assemble(parts [][]byte) ([][]byte, error) {
	var a assembler
	out := make([][]byte, 0, len(parts))
	for _, raw := range parts {
		p, err := a.add(raw)
		if err != nil {
			return nil, err
		}
		if p != nil {
			out = append(out, p)
		}
	}
	if a.open != nil {
		return nil, partialErr("the answer ends inside a streamed call")
	}
	return out, nil
}

// assembledContent is a content object whose parts are parts; the
// content as sent when they are its own. A re-query replays the assembled
// call: the API takes a call with its args, not the fragments.
func assembledContent(content []byte, sent, parts [][]byte) []byte {
	if len(sent) == len(parts) {
		return content
	}
	c, err := jsonx.ParseObject(content)
	if err != nil {
		return content
	}
	return append(jsonx.Object(nil), c...).Set("parts", jsonx.AppendArray(nil, parts)).Bytes()
}

// callPart reads a functionCall part for spliceCalls: whether it begins a
// call (a fragment that continues one does not) and whether it is part of
// a call whose arguments are streamed. open says whether a streamed call
// was open before it, and is updated.
func callPart(fc jsonx.Object, open *bool) (begins, streamed bool) {
	streamed, more := fragment(fc)
	begins = !*open
	if *open {
		streamed = true
	}
	*open = more
	return begins, streamed
}
