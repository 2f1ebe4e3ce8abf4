package catalog

import (
	"encoding/json"
	"sync"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// The fast path over argument text. Decoding arguments into maps, strings
// and numbers costs more allocations than judging them, and a tool without
// provenance pointers or rules needs the decoded value for nothing else.
// So such a call is read once into a tape of nodes (jsonx.AppendTape) and
// judged on it by the same fastNodes; only a call the fast path does not
// find valid is decoded and given to the library, as before.

// tape is one argument text being judged: the text as a string (one copy,
// so that every string and number in it is a substring, not an
// allocation) and its nodes.
type tape struct {
	text  string
	nodes []jsonx.Node
}

var tapePool = sync.Pool{New: func() any { return new([]jsonx.Node) }}

// maxPooledNodes keeps one huge argument from pinning its tape's memory.
const maxPooledNodes = 1 << 12

// ArgsValid judges argument text by the fast path alone. It reports true
// only when the text is valid UTF-8 holding one JSON object that the tool's
// schema accepts, exactly when decoding it and ValidateArgs would find no
// fault. False means no verdict: decode the arguments and validate them.
// A pattern that runs out of time is returned as a *PatternError, which
// the caller reports rather than meeting it again on the full path.
func (t *Tool) ArgsValid(raw []byte) (ok bool, err error) {
	if t.fast == nil || !utf8.Valid(raw) {
		return false, nil
	}
	buf := tapePool.Get().(*[]jsonx.Node)
	defer func() {
		if cap(*buf) <= maxPooledNodes {
			*buf = (*buf)[:0]
			tapePool.Put(buf)
		}
	}()
	nodes, parsed := jsonx.AppendTape((*buf)[:0], raw)
	*buf = nodes
	if !parsed || nodes[0].Kind != '{' {
		return false, nil
	}
	defer func() {
		// A pattern over its budget is reported; any other failure is
		// left to the full path, which reports it as ValidateSchema does.
		if r := recover(); r != nil {
			ok, err = false, nil
			if pe, isPattern := r.(*PatternError); isPattern {
				err = pe
			}
		}
	}()
	tp := &tape{text: string(raw), nodes: nodes}
	return t.fast.root.checkTape(tp, 0) == verdictValid, nil
}

// kind returns the JSON type of node i.
func (tp *tape) kind(i int32) jsonKind {
	switch tp.nodes[i].Kind {
	case '{':
		return kindObject
	case '[':
		return kindArray
	case '"':
		return kindString
	case '0':
		return kindNumber
	case 'n':
		return kindNull
	}
	return kindBoolean
}

// raw returns node i's text (a string's without quotes or unescaping).
func (tp *tape) raw(i int32) string {
	n := &tp.nodes[i]
	return tp.text[n.Start:n.End]
}

// str returns the string node i decodes to: its text when it has no
// escapes, else a decoded copy.
func (tp *tape) str(i int32) (string, bool) {
	if !tp.nodes[i].Escaped {
		return tp.raw(i), true
	}
	b, ok := jsonx.AppendUnescaped(nil, []byte(tp.raw(i)))
	return string(b), ok
}

// checkTape is check over node i.
func (n *fastNode) checkTape(tp *tape, i int32) verdict {
	if n.boolean != nil {
		if *n.boolean {
			return verdictValid
		}
		return verdictInvalid
	}
	k := tp.kind(i)
	r := n.checkAnyTape(tp, i, k)
	if r == verdictInvalid {
		return r
	}
	if n.ref != nil {
		if n.refAlone {
			return r.and(n.ref.checkTape(tp, i))
		}
		if r = r.and(n.ref.checkTape(tp, i)); r == verdictInvalid {
			return r
		}
	}
	switch k {
	case kindObject:
		r = r.and(n.checkObjectTape(tp, i))
	case kindArray:
		r = r.and(n.checkArrayTape(tp, i))
	case kindString:
		if s, ok := tp.str(i); ok {
			r = r.and(n.checkString(s))
		} else {
			r = verdictUnknown
		}
	case kindNumber:
		r = r.and(n.checkNumber(tp.raw(i)))
	}
	if r == verdictInvalid {
		return r
	}
	return r.and(n.checkApplicatorsTape(tp, i))
}

func (n *fastNode) checkAnyTape(tp *tape, i int32, k jsonKind) verdict {
	if n.types != 0 && n.types&k == 0 {
		if r := typeMismatch(n.types, k, tp.raw(i)); r != verdictValid {
			return r
		}
	}
	r := verdictValid
	if n.hasConst {
		if r = r.and(equalTapeVerdict(tp, i, n.constVal)); r == verdictInvalid {
			return r
		}
	}
	if n.enum != nil {
		if n.enumKinds&k == 0 {
			return verdictInvalid
		}
		e := verdictInvalid
		for _, v := range n.enum {
			if e = anyOf(e, equalTapeVerdict(tp, i, v)); e == verdictValid {
				break
			}
		}
		if r = r.and(e); r == verdictInvalid {
			return r
		}
	}
	if n.format != nil {
		v, ok := tp.scalar(i, k)
		if !ok {
			return verdictUnknown.and(r)
		}
		if n.format.Validate(v) != nil {
			return verdictInvalid
		}
	}
	return r
}

// scalar returns node i as the decoded value a format checker is given.
// Objects and arrays are not handed over: no format checks one, but the
// fast path does not assume it.
func (tp *tape) scalar(i int32, k jsonKind) (any, bool) {
	switch k {
	case kindString:
		return tp.str(i)
	case kindNumber:
		return json.Number(tp.raw(i)), true
	case kindNull:
		return nil, true
	case kindBoolean:
		return tp.nodes[i].Kind == 't', true
	}
	return nil, false
}

// anyOf combines the verdicts of alternatives of which one must hold.
func anyOf(v, w verdict) verdict {
	switch {
	case v == verdictValid || w == verdictValid:
		return verdictValid
	case v == verdictUnknown || w == verdictUnknown:
		return verdictUnknown
	}
	return verdictInvalid
}

// plainNames reports whether the object at i has no escaped name and no
// name twice, so its names are its raw texts and it means what its
// decoded map would. Otherwise the fast path leaves it to the library.
func (tp *tape) plainNames(i int32) bool {
	if tp.nodes[i].Len > maxUniqueScan {
		return false
	}
	for a, m := i+1, int32(0); m < tp.nodes[i].Len; a, m = tp.nodes[a+1].Next, m+1 {
		if tp.nodes[a].Escaped {
			return false
		}
		name := tp.raw(a)
		for b := i + 1; b < a; b = tp.nodes[b+1].Next {
			if tp.raw(b) == name {
				return false
			}
		}
	}
	return true
}

// lookup returns the value index of the member called name, or -1.
func (tp *tape) lookup(i int32, name string) int32 {
	for a, m := i+1, int32(0); m < tp.nodes[i].Len; a, m = tp.nodes[a+1].Next, m+1 {
		if tp.raw(a) == name {
			return a + 1
		}
	}
	return -1
}

func (n *fastNode) checkObjectTape(tp *tape, i int32) verdict {
	if !tp.plainNames(i) {
		return verdictUnknown
	}
	size := int(tp.nodes[i].Len)
	if n.minProps != absent && size < n.minProps || n.maxProps != absent && size > n.maxProps {
		return verdictInvalid
	}
	for _, name := range n.required {
		if tp.lookup(i, name) < 0 {
			return verdictInvalid
		}
	}
	r := verdictValid
	for a, m := i+1, int32(0); m < tp.nodes[i].Len; a, m = tp.nodes[a+1].Next, m+1 {
		sub, ok := n.props[tp.raw(a)]
		switch {
		case ok:
		case n.addlFalse:
			return verdictInvalid
		case n.addl != nil:
			sub = n.addl
		default:
			continue
		}
		if r = r.and(sub.checkTape(tp, a+1)); r == verdictInvalid {
			return r
		}
	}
	return r
}

func (n *fastNode) checkArrayTape(tp *tape, i int32) verdict {
	size := int(tp.nodes[i].Len)
	if n.minItems != absent && size < n.minItems || n.maxItems != absent && size > n.maxItems {
		return verdictInvalid
	}
	r := verdictValid
	if n.unique && size > 1 {
		if r = tp.uniqueVerdict(i); r == verdictInvalid {
			return r
		}
	}
	done := min(len(n.prefix), size)
	e := i + 1
	for k := range done {
		if r = r.and(n.prefix[k].checkTape(tp, e)); r == verdictInvalid {
			return r
		}
		e = tp.nodes[e].Next
	}
	if n.restFalse && done < size {
		return verdictInvalid
	}
	if n.rest != nil {
		for range size - done {
			if r = r.and(n.rest.checkTape(tp, e)); r == verdictInvalid {
				return r
			}
			e = tp.nodes[e].Next
		}
	}
	return r
}

func (tp *tape) uniqueVerdict(i int32) verdict {
	if tp.nodes[i].Len > maxUniqueScan {
		return verdictUnknown
	}
	r := verdictValid
	for a, m := i+1, int32(0); m < tp.nodes[i].Len; a, m = tp.nodes[a].Next, m+1 {
		for b := i + 1; b < a; b = tp.nodes[b].Next {
			switch eq, ok := tp.equalNodes(a, b); {
			case !ok:
				r = verdictUnknown
			case eq:
				return verdictInvalid
			}
		}
	}
	return r
}

func (n *fastNode) checkApplicatorsTape(tp *tape, i int32) verdict {
	r := verdictValid
	if n.not != nil {
		switch n.not.checkTape(tp, i) {
		case verdictValid:
			return verdictInvalid
		case verdictUnknown:
			r = verdictUnknown
		}
	}
	for _, s := range n.allOf {
		if r = r.and(s.checkTape(tp, i)); r == verdictInvalid {
			return r
		}
	}
	if len(n.anyOf) > 0 {
		a := verdictInvalid
		for _, s := range n.anyOf {
			if a = anyOf(a, s.checkTape(tp, i)); a == verdictValid {
				break
			}
		}
		if r = r.and(a); r == verdictInvalid {
			return r
		}
	}
	if len(n.oneOf) > 0 {
		valid, unknown := 0, false
		for _, s := range n.oneOf {
			switch s.checkTape(tp, i) {
			case verdictValid:
				valid++
			case verdictUnknown:
				unknown = true
			}
		}
		r = r.and(oneOfVerdict(valid, unknown))
	}
	return r
}

// equalTapeVerdict is valid when node i equals the schema constant c.
func equalTapeVerdict(tp *tape, i int32, c any) verdict {
	switch eq, ok := tp.equalValue(i, c); {
	case !ok:
		return verdictUnknown
	case eq:
		return verdictValid
	}
	return verdictInvalid
}

// equalValue compares node i with a decoded value as equal does.
func (tp *tape) equalValue(i int32, c any) (eq, ok bool) {
	k := tp.kind(i)
	if kindOf(c) != k {
		return false, kindOf(c) != 0
	}
	switch k {
	case kindObject:
		obj := c.(map[string]any)
		if !tp.plainNames(i) {
			return false, false
		}
		if int(tp.nodes[i].Len) != len(obj) {
			return false, true
		}
		for a, m := i+1, int32(0); m < tp.nodes[i].Len; a, m = tp.nodes[a+1].Next, m+1 {
			v, has := obj[tp.raw(a)]
			if !has {
				return false, true
			}
			if eq, ok := tp.equalValue(a+1, v); !eq || !ok {
				return eq, ok
			}
		}
		return true, true
	case kindArray:
		arr := c.([]any)
		if int(tp.nodes[i].Len) != len(arr) {
			return false, true
		}
		e := i + 1
		for _, v := range arr {
			if eq, ok := tp.equalValue(e, v); !eq || !ok {
				return eq, ok
			}
			e = tp.nodes[e].Next
		}
		return true, true
	case kindString:
		s, ok := tp.str(i)
		return ok && s == c.(string), ok
	case kindNumber:
		return equalNumbers(tp.raw(i), string(c.(json.Number)))
	case kindBoolean:
		return (tp.nodes[i].Kind == 't') == c.(bool), true
	}
	return true, true // null
}

// equalNodes compares two nodes of the tape as equal does.
func (tp *tape) equalNodes(a, b int32) (eq, ok bool) {
	k := tp.kind(a)
	if k != tp.kind(b) {
		return false, true
	}
	switch k {
	case kindObject:
		if !tp.plainNames(a) || !tp.plainNames(b) {
			return false, false
		}
		if tp.nodes[a].Len != tp.nodes[b].Len {
			return false, true
		}
		for x, m := a+1, int32(0); m < tp.nodes[a].Len; x, m = tp.nodes[x+1].Next, m+1 {
			y := tp.lookup(b, tp.raw(x))
			if y < 0 {
				return false, true
			}
			if eq, ok := tp.equalNodes(x+1, y); !eq || !ok {
				return eq, ok
			}
		}
		return true, true
	case kindArray:
		if tp.nodes[a].Len != tp.nodes[b].Len {
			return false, true
		}
		x, y := a+1, b+1
		for range tp.nodes[a].Len {
			if eq, ok := tp.equalNodes(x, y); !eq || !ok {
				return eq, ok
			}
			x, y = tp.nodes[x].Next, tp.nodes[y].Next
		}
		return true, true
	case kindString:
		s, ok1 := tp.str(a)
		t, ok2 := tp.str(b)
		return ok1 && ok2 && s == t, ok1 && ok2
	case kindNumber:
		return equalNumbers(tp.raw(a), tp.raw(b))
	case kindBoolean:
		return tp.nodes[a].Kind == tp.nodes[b].Kind, true
	}
	return true, true // null
}
