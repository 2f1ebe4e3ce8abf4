package catalog

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fast path. jsonschema v6 builds a tree of per-keyword validators for
// every value it checks and collects an error tree as it goes: on the load
// workload's two calls that is 271 allocations and most of the time spent
// judging them. Most tool schemas use a handful of keywords, so each
// compiled schema that uses only those is also translated into a tree of
// fastNodes, which decide valid or invalid over the decoded arguments
// without allocating.
//
// The translation reads the library's compiled schema, not the JSON text,
// so references are resolved, drafts read and formats and patterns chosen
// by the library itself, and the fast path calls the very format checkers
// and pattern engines the library would. What it does itself is the
// control flow of each keyword and the exact comparisons of numbers.
//
// The library stays the reference. A call the fast path finds valid is
// valid; any other call is validated again by the library, which words the
// findings. fastschema_test.go holds the fast path to the library's
// verdict on the JSON Schema Test Suite and on generated schemas.

// verdict is the fast path's answer: valid, invalid, or unknown when it
// meets a value it does not judge itself (a number beyond its exact
// arithmetic, a large array to check for uniqueness).
type verdict int8

const (
	verdictValid verdict = iota
	verdictInvalid
	verdictUnknown
)

// and combines the verdicts of two checks that must both hold.
func (v verdict) and(w verdict) verdict { return max(v, w) }

// jsonKind is a set of JSON types, as the type keyword names them.
type jsonKind uint8

const (
	kindNull jsonKind = 1 << iota
	kindBoolean
	kindNumber
	kindInteger
	kindString
	kindArray
	kindObject
)

var kindNames = map[string]jsonKind{
	"null": kindNull, "boolean": kindBoolean, "number": kindNumber, "integer": kindInteger,
	"string": kindString, "array": kindArray, "object": kindObject,
}

// kindOf returns the kind of a decoded value, 0 for a Go type the
// arguments never hold (the library then decides).
func kindOf(v any) jsonKind {
	switch v.(type) {
	case nil:
		return kindNull
	case bool:
		return kindBoolean
	case json.Number:
		return kindNumber
	case string:
		return kindString
	case []any:
		return kindArray
	case map[string]any:
		return kindObject
	}
	return 0
}

// absent marks an unset count bound.
const absent = -1

// fastNode is one compiled schema.
type fastNode struct {
	// boolean is set for the schemas true and false.
	boolean *bool
	types   jsonKind

	hasConst  bool
	constVal  any
	enum      []any
	enumKinds jsonKind
	format    *jsonschema.Format

	ref *fastNode
	// refAlone is set for drafts before 2019-09, where $ref ends the
	// schema: the library checks type, const, enum and format, then
	// answers with the reference's verdict alone.
	refAlone bool

	minProps, maxProps int
	required           []string
	props              map[string]*fastNode
	// addlFalse and addl are additionalProperties: false, or a schema.
	addlFalse bool
	addl      *fastNode

	minItems, maxItems int
	unique             bool
	// prefix are the positional item schemas (prefixItems, or items as an
	// array before 2020-12); rest judges the items after them (items, or
	// additionalItems), and restFalse forbids any.
	prefix    []*fastNode
	rest      *fastNode
	restFalse bool

	minLen, maxLen int
	pattern        jsonschema.Regexp

	bounds []bound

	not                 *fastNode
	allOf, anyOf, oneOf []*fastNode
}

// bound is one numeric keyword with its operand.
type bound struct {
	kw  boundKind
	val decimal
}

type boundKind uint8

const (
	boundMin boundKind = iota
	boundMax
	boundExclusiveMin
	boundExclusiveMax
	boundMultipleOf
)

// fastSchema is the fast path of one compiled schema.
type fastSchema struct {
	root *fastNode
}

// check decides v against the schema.
func (f *fastSchema) check(v any) verdict { return f.root.check(v) }

// check decides v against n, in the library's order of keywords.
func (n *fastNode) check(v any) verdict {
	if n.boolean != nil {
		if *n.boolean {
			return verdictValid
		}
		return verdictInvalid
	}
	k := kindOf(v)
	if k == 0 {
		return verdictUnknown
	}
	r := n.checkAny(v, k)
	if r == verdictInvalid {
		return r
	}
	if n.ref != nil {
		if n.refAlone {
			return r.and(n.ref.check(v))
		}
		if r = r.and(n.ref.check(v)); r == verdictInvalid {
			return r
		}
	}
	switch k {
	case kindObject:
		r = r.and(n.checkObject(v.(map[string]any)))
	case kindArray:
		r = r.and(n.checkArray(v.([]any)))
	case kindString:
		r = r.and(n.checkString(v.(string)))
	case kindNumber:
		r = r.and(n.checkNumber(string(v.(json.Number))))
	}
	if r == verdictInvalid {
		return r
	}
	return r.and(n.checkApplicators(v))
}

// checkAny holds the keywords that apply to every type: type, const, enum
// and format.
func (n *fastNode) checkAny(v any, k jsonKind) verdict {
	if n.types != 0 && n.types&k == 0 {
		num, _ := v.(json.Number)
		if r := typeMismatch(n.types, k, string(num)); r != verdictValid {
			return r
		}
	}
	r := verdictValid
	if n.hasConst {
		if r = r.and(equalVerdict(v, n.constVal)); r == verdictInvalid {
			return r
		}
	}
	if n.enum != nil {
		if r = r.and(n.checkEnum(v, k)); r == verdictInvalid {
			return r
		}
	}
	if n.format != nil && n.format.Validate(v) != nil {
		return verdictInvalid
	}
	return r
}

// typeMismatch decides a value whose kind is not among types: only an
// integral number passes, where integer is allowed. num is the number's
// text, read only when k is a number.
func typeMismatch(types, k jsonKind, num string) verdict {
	if types&kindInteger == 0 || k != kindNumber {
		return verdictInvalid
	}
	d, ok := parseDecimal(num)
	switch {
	case !ok:
		return verdictUnknown
	case !d.isInt():
		return verdictInvalid
	}
	return verdictValid
}

func (n *fastNode) checkEnum(v any, k jsonKind) verdict {
	if n.enumKinds&k == 0 {
		return verdictInvalid
	}
	r := verdictInvalid
	for _, e := range n.enum {
		switch eq, ok := equal(v, e); {
		case !ok:
			r = verdictUnknown
		case eq:
			return verdictValid
		}
	}
	return r
}

// equalVerdict is equal as a verdict: valid when a equals b.
func equalVerdict(a, b any) verdict {
	switch eq, ok := equal(a, b); {
	case !ok:
		return verdictUnknown
	case eq:
		return verdictValid
	}
	return verdictInvalid
}

func (n *fastNode) checkObject(obj map[string]any) verdict {
	if n.minProps != absent && len(obj) < n.minProps {
		return verdictInvalid
	}
	if n.maxProps != absent && len(obj) > n.maxProps {
		return verdictInvalid
	}
	for _, name := range n.required {
		if _, ok := obj[name]; !ok {
			return verdictInvalid
		}
	}
	r := verdictValid
	for name, val := range obj {
		sub, ok := n.props[name]
		switch {
		case ok:
		case n.addlFalse:
			return verdictInvalid
		case n.addl != nil:
			sub = n.addl
		default:
			continue
		}
		if r = r.and(sub.check(val)); r == verdictInvalid {
			return r
		}
	}
	return r
}

// maxUniqueScan is the longest array whose uniqueness the fast path checks
// itself, pair by pair; the library hashes longer ones.
const maxUniqueScan = 64

func (n *fastNode) checkArray(arr []any) verdict {
	if n.minItems != absent && len(arr) < n.minItems {
		return verdictInvalid
	}
	if n.maxItems != absent && len(arr) > n.maxItems {
		return verdictInvalid
	}
	r := verdictValid
	if n.unique && len(arr) > 1 {
		if r = uniqueVerdict(arr); r == verdictInvalid {
			return r
		}
	}
	done := min(len(n.prefix), len(arr))
	for i, item := range arr[:done] {
		if r = r.and(n.prefix[i].check(item)); r == verdictInvalid {
			return r
		}
	}
	if n.restFalse && done < len(arr) {
		return verdictInvalid
	}
	if n.rest != nil {
		for _, item := range arr[done:] {
			if r = r.and(n.rest.check(item)); r == verdictInvalid {
				return r
			}
		}
	}
	return r
}

func uniqueVerdict(arr []any) verdict {
	if len(arr) > maxUniqueScan {
		return verdictUnknown
	}
	r := verdictValid
	for i := 1; i < len(arr); i++ {
		for j := 0; j < i; j++ {
			switch eq, ok := equal(arr[i], arr[j]); {
			case !ok:
				r = verdictUnknown
			case eq:
				return verdictInvalid
			}
		}
	}
	return r
}

// checkString counts length in code points, as JSON Schema does.
func (n *fastNode) checkString(s string) verdict {
	if n.minLen != absent || n.maxLen != absent {
		l := utf8.RuneCountInString(s)
		if n.minLen != absent && l < n.minLen || n.maxLen != absent && l > n.maxLen {
			return verdictInvalid
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		return verdictInvalid
	}
	return verdictValid
}

// checkNumber judges a number given as its JSON text.
func (n *fastNode) checkNumber(num string) verdict {
	if len(n.bounds) == 0 {
		return verdictValid
	}
	d, ok := parseDecimal(num)
	if !ok {
		return verdictUnknown
	}
	r := verdictValid
	for i := range n.bounds {
		b := &n.bounds[i]
		var fails bool
		switch c := d.cmp(&b.val); b.kw {
		case boundMin:
			fails = c < 0
		case boundMax:
			fails = c > 0
		case boundExclusiveMin:
			fails = c <= 0
		case boundExclusiveMax:
			fails = c >= 0
		case boundMultipleOf:
			yes, known := d.multipleOf(&b.val)
			if !known {
				r = verdictUnknown
				continue
			}
			fails = !yes
		}
		if fails {
			return verdictInvalid
		}
	}
	return r
}

// checkApplicators holds not, allOf, anyOf and oneOf.
func (n *fastNode) checkApplicators(v any) verdict {
	r := verdictValid
	if n.not != nil {
		switch n.not.check(v) {
		case verdictValid:
			return verdictInvalid
		case verdictUnknown:
			r = verdictUnknown
		}
	}
	for _, s := range n.allOf {
		if r = r.and(s.check(v)); r == verdictInvalid {
			return r
		}
	}
	if len(n.anyOf) > 0 {
		r = r.and(anyVerdict(n.anyOf, v))
		if r == verdictInvalid {
			return r
		}
	}
	if len(n.oneOf) > 0 {
		r = r.and(oneVerdict(n.oneOf, v))
	}
	return r
}

func anyVerdict(subs []*fastNode, v any) verdict {
	r := verdictInvalid
	for _, s := range subs {
		switch s.check(v) {
		case verdictValid:
			return verdictValid
		case verdictUnknown:
			r = verdictUnknown
		}
	}
	return r
}

func oneVerdict(subs []*fastNode, v any) verdict {
	valid, unknown := 0, false
	for _, s := range subs {
		switch s.check(v) {
		case verdictValid:
			valid++
		case verdictUnknown:
			unknown = true
		}
	}
	return oneOfVerdict(valid, unknown)
}

// oneOfVerdict decides oneOf from how many alternatives held and whether
// any had no verdict.
func oneOfVerdict(valid int, unknown bool) verdict {
	switch {
	case valid > 1:
		return verdictInvalid
	case unknown:
		return verdictUnknown
	case valid == 1:
		return verdictValid
	}
	return verdictInvalid
}

// equal compares two decoded values as the library does: numbers by
// value, objects regardless of member order. ok is false when a number
// is beyond exact comparison here, or a value is of a Go type arguments
// never hold.
func equal(a, b any) (eq, ok bool) {
	switch a := a.(type) {
	case map[string]any:
		return equalObjects(a, b)
	case []any:
		bb, isArr := b.([]any)
		if !isArr || len(a) != len(bb) {
			return false, kindOf(b) != 0
		}
		for i := range a {
			if eq, ok := equal(a[i], bb[i]); !eq || !ok {
				return eq, ok
			}
		}
		return true, true
	case json.Number:
		bn, isNum := b.(json.Number)
		if !isNum {
			return false, kindOf(b) != 0
		}
		return equalNumbers(string(a), string(bn))
	case nil:
		return b == nil, kindOf(b) != 0
	case bool:
		bb, isBool := b.(bool)
		return isBool && a == bb, kindOf(b) != 0
	case string:
		bs, isStr := b.(string)
		return isStr && a == bs, kindOf(b) != 0
	}
	return false, false
}

func equalObjects(a map[string]any, b any) (eq, ok bool) {
	bm, isObj := b.(map[string]any)
	if !isObj || len(a) != len(bm) {
		return false, kindOf(b) != 0
	}
	for k, av := range a {
		bv, has := bm[k]
		if !has {
			return false, true
		}
		if eq, ok := equal(av, bv); !eq || !ok {
			return eq, ok
		}
	}
	return true, true
}

// equalNumbers compares two numbers given as JSON text by value.
func equalNumbers(a, b string) (eq, ok bool) {
	x, ok1 := parseDecimal(a)
	y, ok2 := parseDecimal(b)
	if !ok1 || !ok2 {
		return false, false
	}
	return x.cmp(&y) == 0, true
}
