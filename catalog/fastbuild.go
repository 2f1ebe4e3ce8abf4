package catalog

import (
	"encoding/json"
	"math/big"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// newFastSchema translates a compiled schema into the fast path, or
// returns nil when any of its subschemas uses a keyword the fast path does
// not implement (if/then/else, patternProperties, propertyNames,
// dependencies, contains, unevaluated*, content*, $dynamicRef,
// $recursiveRef, vocabulary extensions), holds a value it cannot compare
// exactly, or can reach itself without moving into the instance (the
// library reports such a cycle as an error when it meets it). Such a
// schema is validated by the library alone.
//
// Keywords the library compiles to nothing (title, description, default,
// examples, $comment, unknown keywords) are no-ops on both paths.
func newFastSchema(sch *jsonschema.Schema) *fastSchema {
	if sch == nil {
		return nil
	}
	b := fastBuilder{nodes: map[*jsonschema.Schema]*fastNode{}, ok: true}
	root := b.node(sch)
	if !b.ok || b.cyclic() {
		return nil
	}
	return &fastSchema{root: root}
}

type fastBuilder struct {
	nodes map[*jsonschema.Schema]*fastNode
	ok    bool
}

// node returns the fastNode of s, building it once: references make the
// schema a graph, which the nodes mirror.
func (b *fastBuilder) node(s *jsonschema.Schema) *fastNode {
	if n := b.nodes[s]; n != nil {
		return n
	}
	n := &fastNode{minProps: absent, maxProps: absent, minItems: absent, maxItems: absent, minLen: absent, maxLen: absent}
	b.nodes[s] = n
	if s.Bool != nil {
		v := *s.Bool
		n.boolean = &v
		return n
	}
	if unsupportedKeywords(s) {
		b.ok = false
		return n
	}
	b.anyKeywords(n, s)
	b.objectKeywords(n, s)
	b.arrayKeywords(n, s)
	b.stringKeywords(n, s)
	b.numberKeywords(n, s)
	if s.Ref != nil {
		n.ref = b.node(s.Ref)
		n.refAlone = s.DraftVersion < 2019
	}
	if s.Not != nil {
		n.not = b.node(s.Not)
	}
	n.allOf, n.anyOf, n.oneOf = b.nodeList(s.AllOf), b.nodeList(s.AnyOf), b.nodeList(s.OneOf)
	return n
}

// unsupportedKeywords reports whether s uses a keyword the fast path
// leaves to the library.
func unsupportedKeywords(s *jsonschema.Schema) bool {
	return s.RecursiveRef != nil || s.DynamicRef != nil ||
		s.If != nil || s.Then != nil || s.Else != nil ||
		s.PropertyNames != nil || len(s.PatternProperties) > 0 ||
		len(s.Dependencies) > 0 || len(s.DependentRequired) > 0 || len(s.DependentSchemas) > 0 ||
		s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil ||
		s.Contains != nil || s.MinContains != nil || s.MaxContains != nil ||
		s.ContentEncoding != nil || s.ContentMediaType != nil || s.ContentSchema != nil ||
		len(s.Extensions) > 0
}

func (b *fastBuilder) nodeList(list []*jsonschema.Schema) []*fastNode {
	if len(list) == 0 {
		return nil
	}
	out := make([]*fastNode, len(list))
	for i, s := range list {
		out[i] = b.node(s)
	}
	return out
}

func (b *fastBuilder) anyKeywords(n *fastNode, s *jsonschema.Schema) {
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			n.types |= kindNames[name]
		}
	}
	if s.Const != nil {
		n.hasConst, n.constVal = true, *s.Const
		b.ok = b.ok && comparable(n.constVal)
	}
	if s.Enum != nil {
		n.enum = s.Enum.Values
		if n.enum == nil {
			n.enum = []any{}
		}
		for _, e := range n.enum {
			n.enumKinds |= kindOf(e)
			b.ok = b.ok && comparable(e)
		}
	}
	n.format = s.Format
}

// comparable reports whether every part of a schema constant is a type
// that equal compares exactly.
func comparable(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if !comparable(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !comparable(e) {
				return false
			}
		}
		return true
	case json.Number:
		_, ok := parseDecimal(string(v))
		return ok
	}
	return kindOf(v) != 0
}

func (b *fastBuilder) objectKeywords(n *fastNode, s *jsonschema.Schema) {
	n.minProps, n.maxProps = count(s.MinProperties), count(s.MaxProperties)
	n.required = s.Required
	if len(s.Properties) > 0 {
		n.props = make(map[string]*fastNode, len(s.Properties))
		for name, sub := range s.Properties {
			n.props[name] = b.node(sub)
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case bool:
		n.addlFalse = !a
	case *jsonschema.Schema:
		n.addl = b.node(a)
	}
}

// arrayKeywords maps both spellings of positional items onto prefix and
// rest: prefixItems and items from 2020-12, items (one schema or a list)
// and additionalItems before, as the library reads them.
func (b *fastBuilder) arrayKeywords(n *fastNode, s *jsonschema.Schema) {
	n.minItems, n.maxItems = count(s.MinItems), count(s.MaxItems)
	n.unique = s.UniqueItems
	if s.DraftVersion >= 2020 {
		n.prefix = b.nodeList(s.PrefixItems)
		if s.Items2020 != nil {
			n.rest = b.node(s.Items2020)
		}
		return
	}
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		n.rest = b.node(items)
		return // every item is evaluated: additionalItems has none left
	case []*jsonschema.Schema:
		n.prefix = b.nodeList(items)
		if n.prefix == nil {
			n.prefix = []*fastNode{}
		}
	}
	switch a := s.AdditionalItems.(type) {
	case bool:
		n.restFalse = !a
	case *jsonschema.Schema:
		n.rest = b.node(a)
	}
}

func (b *fastBuilder) stringKeywords(n *fastNode, s *jsonschema.Schema) {
	n.minLen, n.maxLen = count(s.MinLength), count(s.MaxLength)
	n.pattern = s.Pattern
}

func (b *fastBuilder) numberKeywords(n *fastNode, s *jsonschema.Schema) {
	for _, k := range []struct {
		kw boundKind
		r  *big.Rat
	}{
		{boundMin, s.Minimum}, {boundMax, s.Maximum},
		{boundExclusiveMin, s.ExclusiveMinimum}, {boundExclusiveMax, s.ExclusiveMaximum},
		{boundMultipleOf, s.MultipleOf},
	} {
		if k.r == nil {
			continue
		}
		d, ok := ratDecimal(k.r)
		if !ok || k.kw == boundMultipleOf && (d.isZero() || d.neg) {
			b.ok = false
			return
		}
		n.bounds = append(n.bounds, bound{kw: k.kw, val: d})
	}
}

func count(p *int) int {
	if p == nil {
		return absent
	}
	return *p
}

// cyclic reports whether some node can reach itself through keywords that
// judge the same instance ($ref, allOf, anyOf, oneOf, not).
func (b *fastBuilder) cyclic() bool {
	const (
		unseen = iota
		active
		done
	)
	state := make(map[*fastNode]int, len(b.nodes))
	var visit func(n *fastNode) bool
	visit = func(n *fastNode) bool {
		switch state[n] {
		case active:
			return true
		case done:
			return false
		}
		state[n] = active
		for _, m := range n.sameInstance() {
			if visit(m) {
				return true
			}
		}
		state[n] = done
		return false
	}
	for _, n := range b.nodes {
		if visit(n) {
			return true
		}
	}
	return false
}

// sameInstance lists the nodes n applies to the value n itself judges.
func (n *fastNode) sameInstance() []*fastNode {
	out := make([]*fastNode, 0, 2+len(n.allOf)+len(n.anyOf)+len(n.oneOf))
	if n.ref != nil {
		out = append(out, n.ref)
	}
	if n.not != nil {
		out = append(out, n.not)
	}
	out = append(out, n.allOf...)
	out = append(out, n.anyOf...)
	return append(out, n.oneOf...)
}
