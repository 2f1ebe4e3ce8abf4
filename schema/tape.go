package schema

import (
	"encoding/json"
	"sync"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// The walker. Decoding arguments into maps, strings and numbers costs more
// allocations than judging them, so the fast path judges the argument
// text itself: it is read once into a tape of nodes (jsonx.AppendTape) and
// walked here; only a value the fast path does not find valid is decoded
// and given to the library.

// tape is one argument text being judged: the text as a string (so that
// every string and number in it is a substring, not an allocation) and its
// nodes.
type tape struct {
	text  string
	nodes []jsonx.Node
}

var tapePool = sync.Pool{New: func() any { return new([]jsonx.Node) }}

// maxPooledNodes keeps one huge argument from pinning its tape's memory.
const maxPooledNodes = 1 << 12

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

// check decides node i against n, in the library's order of keywords.
func (n *node) check(tp *tape, i int32) ruling {
	if n.boolean != nil {
		if *n.boolean {
			return valid
		}
		return invalid
	}
	k := tp.kind(i)
	r := n.checkAny(tp, i, k)
	if r == invalid {
		return r
	}
	if n.ref != nil {
		if n.refAlone {
			return r.and(n.ref.check(tp, i))
		}
		if r = r.and(n.ref.check(tp, i)); r == invalid {
			return r
		}
	}
	switch k {
	case kindObject:
		r = r.and(n.checkObject(tp, i))
	case kindArray:
		r = r.and(n.checkArray(tp, i))
	case kindString:
		if s, ok := tp.str(i); ok {
			r = r.and(n.checkString(s))
		} else {
			r = undecided
		}
	case kindNumber:
		r = r.and(n.checkNumber(tp.raw(i)))
	}
	if r == invalid {
		return r
	}
	return r.and(n.checkApplicators(tp, i))
}

// checkAny holds the keywords that apply to every type: type, const, enum
// and format.
func (n *node) checkAny(tp *tape, i int32, k jsonKind) ruling {
	if n.types != 0 && n.types&k == 0 {
		if r := typeMismatch(n.types, k, tp.raw(i)); r != valid {
			return r
		}
	}
	r := valid
	if n.hasConst {
		if r = r.and(tp.equalRuling(i, n.constant)); r == invalid {
			return r
		}
	}
	if n.enum != nil {
		if n.enumKinds&k == 0 {
			return invalid
		}
		inEnum := invalid
		for _, member := range n.enum {
			if inEnum = inEnum.or(tp.equalRuling(i, member)); inEnum == valid {
				break
			}
		}
		if r = r.and(inEnum); r == invalid {
			return r
		}
	}
	if n.format != nil {
		v, ok := tp.scalar(i, k)
		if !ok {
			return undecided.and(r)
		}
		if n.format.Validate(v) != nil {
			return invalid
		}
	}
	return r
}

// typeMismatch decides a value whose kind is not among types: only an
// integral number passes, where integer is allowed. num is the number's
// text, read only when k is a number.
func typeMismatch(types, k jsonKind, num string) ruling {
	if types&kindInteger == 0 || k != kindNumber {
		return invalid
	}
	d, ok := parseDecimal(num)
	switch {
	case !ok:
		return undecided
	case !d.isInt():
		return invalid
	}
	return valid
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

func (n *node) checkObject(tp *tape, i int32) ruling {
	if !tp.plainNames(i) {
		return undecided
	}
	size := int(tp.nodes[i].Len)
	if n.minProperties != absent && size < n.minProperties || n.maxProperties != absent && size > n.maxProperties {
		return invalid
	}
	for _, name := range n.required {
		if tp.lookup(i, name) < 0 {
			return invalid
		}
	}
	r := valid
	for a, m := i+1, int32(0); m < tp.nodes[i].Len; a, m = tp.nodes[a+1].Next, m+1 {
		sub, ok := n.properties[tp.raw(a)]
		switch {
		case ok:
		case n.noAdditional:
			return invalid
		case n.additional != nil:
			sub = n.additional
		default:
			continue
		}
		if r = r.and(sub.check(tp, a+1)); r == invalid {
			return r
		}
	}
	return r
}

func (n *node) checkArray(tp *tape, i int32) ruling {
	size := int(tp.nodes[i].Len)
	if n.minItems != absent && size < n.minItems || n.maxItems != absent && size > n.maxItems {
		return invalid
	}
	r := valid
	if n.unique && size > 1 {
		if r = tp.uniqueRuling(i); r == invalid {
			return r
		}
	}
	done := min(len(n.prefix), size)
	item := i + 1
	for k := range done {
		if r = r.and(n.prefix[k].check(tp, item)); r == invalid {
			return r
		}
		item = tp.nodes[item].Next
	}
	if n.noRest && done < size {
		return invalid
	}
	if n.rest != nil {
		for range size - done {
			if r = r.and(n.rest.check(tp, item)); r == invalid {
				return r
			}
			item = tp.nodes[item].Next
		}
	}
	return r
}

func (tp *tape) uniqueRuling(i int32) ruling {
	if tp.nodes[i].Len > maxUniqueScan {
		return undecided
	}
	r := valid
	for a, m := i+1, int32(0); m < tp.nodes[i].Len; a, m = tp.nodes[a].Next, m+1 {
		for b := i + 1; b < a; b = tp.nodes[b].Next {
			switch eq, ok := tp.equalNodes(a, b); {
			case !ok:
				r = undecided
			case eq:
				return invalid
			}
		}
	}
	return r
}

// checkString counts length in code points, as JSON Schema does.
func (n *node) checkString(s string) ruling {
	if n.minLength != absent || n.maxLength != absent {
		l := utf8.RuneCountInString(s)
		if n.minLength != absent && l < n.minLength || n.maxLength != absent && l > n.maxLength {
			return invalid
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		return invalid
	}
	return valid
}

// checkNumber judges a number given as its JSON text.
func (n *node) checkNumber(num string) ruling {
	if len(n.bounds) == 0 {
		return valid
	}
	d, ok := parseDecimal(num)
	if !ok {
		return undecided
	}
	r := valid
	for i := range n.bounds {
		b := &n.bounds[i]
		var fails bool
		switch c := d.cmp(&b.operand); b.keyword {
		case boundMin:
			fails = c < 0
		case boundMax:
			fails = c > 0
		case boundExclusiveMin:
			fails = c <= 0
		case boundExclusiveMax:
			fails = c >= 0
		case boundMultipleOf:
			yes, known := d.multipleOf(&b.operand)
			if !known {
				r = undecided
				continue
			}
			fails = !yes
		}
		if fails {
			return invalid
		}
	}
	return r
}

// checkApplicators holds not, allOf, anyOf and oneOf.
func (n *node) checkApplicators(tp *tape, i int32) ruling {
	r := valid
	if n.not != nil {
		switch n.not.check(tp, i) {
		case valid:
			return invalid
		case undecided:
			r = undecided
		}
	}
	for _, s := range n.allOf {
		if r = r.and(s.check(tp, i)); r == invalid {
			return r
		}
	}
	if len(n.anyOf) > 0 {
		some := invalid
		for _, s := range n.anyOf {
			if some = some.or(s.check(tp, i)); some == valid {
				break
			}
		}
		if r = r.and(some); r == invalid {
			return r
		}
	}
	if len(n.oneOf) > 0 {
		held, someUndecided := 0, false
		for _, s := range n.oneOf {
			switch s.check(tp, i) {
			case valid:
				held++
			case undecided:
				someUndecided = true
			}
		}
		r = r.and(oneOfRuling(held, someUndecided))
	}
	return r
}

// equalRuling is valid when node i equals the schema constant c.
func (tp *tape) equalRuling(i int32, c any) ruling {
	switch eq, ok := tp.equalValue(i, c); {
	case !ok:
		return undecided
	case eq:
		return valid
	}
	return invalid
}

// equalValue compares node i with a decoded schema constant as the
// library does: numbers by value, objects regardless of member order. ok
// is false when a number is beyond exact comparison here.
func (tp *tape) equalValue(i int32, c any) (eq, ok bool) {
	k := tp.kind(i)
	if kindOf(c) != k {
		return false, kindOf(c) != 0
	}
	switch k {
	case kindObject:
		return tp.equalObject(i, c.(map[string]any))
	case kindArray:
		arr := c.([]any)
		if int(tp.nodes[i].Len) != len(arr) {
			return false, true
		}
		item := i + 1
		for _, v := range arr {
			if eq, ok := tp.equalValue(item, v); !eq || !ok {
				return eq, ok
			}
			item = tp.nodes[item].Next
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

func (tp *tape) equalObject(i int32, obj map[string]any) (eq, ok bool) {
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
}

// equalNodes compares two nodes of the tape as equalValue does.
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
