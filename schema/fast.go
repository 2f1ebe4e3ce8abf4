package schema

import (
	"encoding/json"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fast path. jsonschema v6 builds a tree of per-keyword validators for
// every value it checks and collects an error tree as it goes: on the load
// workload's two calls that is 271 allocations and most of the time spent
// judging them. Most tool schemas use a handful of keywords, so each
// compiled schema that uses only those is also translated into a tree of
// nodes, which decide valid or invalid over the argument text's tape
// (tape.go) without allocating.
//
// The translation reads the library's compiled schema, not the JSON text,
// so references are resolved, drafts read and formats and patterns chosen
// by the library itself, and the fast path calls the very format checkers
// and pattern engines the library would. What it does itself is the
// control flow of each keyword and the exact comparisons of numbers.
//
// The library stays the reference. A call the fast path finds valid is
// valid; any other call is decoded and validated again by the library,
// which words the findings. fast_test.go holds the fast path to the
// library's answer on the JSON Schema Test Suite and on generated schemas.

// ruling is the fast path's answer: valid, invalid, or undecided when it
// meets a value it does not judge itself (a number beyond its exact
// arithmetic, a large array to check for uniqueness).
type ruling int8

const (
	valid ruling = iota
	invalid
	undecided
)

// and combines the rulings of two checks that must both hold.
func (r ruling) and(other ruling) ruling { return max(r, other) }

// or combines the rulings of alternatives of which one must hold.
func (r ruling) or(other ruling) ruling {
	switch {
	case r == valid || other == valid:
		return valid
	case r == undecided || other == undecided:
		return undecided
	}
	return invalid
}

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

// kindOf returns the kind of a decoded schema constant, 0 for a Go type
// the library never decodes to (the fast path then leaves the schema to
// the library).
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

// node is one compiled schema.
type node struct {
	// boolean is set for the schemas true and false.
	boolean *bool
	types   jsonKind

	hasConst  bool
	constant  any
	enum      []any
	enumKinds jsonKind
	format    *jsonschema.Format

	ref *node
	// refAlone is set for drafts before 2019-09, where $ref ends the
	// schema: the library checks type, const, enum and format, then
	// answers with the reference's ruling alone.
	refAlone bool

	minProperties, maxProperties int
	required                     []string
	properties                   map[string]*node
	// noAdditional and additional are additionalProperties: false, or a
	// schema.
	noAdditional bool
	additional   *node

	minItems, maxItems int
	unique             bool
	// prefix are the positional item schemas (prefixItems, or items as an
	// array before 2020-12); rest judges the items after them (items, or
	// additionalItems), and noRest forbids any.
	prefix []*node
	rest   *node
	noRest bool

	minLength, maxLength int
	pattern              jsonschema.Regexp

	bounds []bound

	not                 *node
	allOf, anyOf, oneOf []*node
}

// bound is one numeric keyword with its operand.
type bound struct {
	keyword boundKeyword
	operand decimal
}

type boundKeyword uint8

const (
	boundMin boundKeyword = iota
	boundMax
	boundExclusiveMin
	boundExclusiveMax
	boundMultipleOf
)

// Fast is the fast path of one compiled schema (see NewFast).
type Fast struct {
	root *node
}

// maxUniqueScan is the longest array whose uniqueness the fast path checks
// itself, pair by pair, and the most members of an object whose names it
// compares; the library takes larger ones.
const maxUniqueScan = 64

// oneOfRuling decides oneOf from how many alternatives held and whether
// any was undecided.
func oneOfRuling(held int, someUndecided bool) ruling {
	switch {
	case held > 1:
		return invalid
	case someUndecided:
		return undecided
	case held == 1:
		return valid
	}
	return invalid
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
