package schema

import (
	"encoding/json"
	"math/big"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// NewFast translates a compiled schema into the fast path, or
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
func NewFast(sch *jsonschema.Schema) *Fast {
	if sch == nil {
		return nil
	}
	b := builder{nodes: map[*jsonschema.Schema]*node{}, ok: true}
	root := b.build(sch)
	if !b.ok || b.cyclic() {
		return nil
	}
	return &Fast{root: root}
}

type builder struct {
	nodes map[*jsonschema.Schema]*node
	ok    bool
}

// build returns the node of s, building it once: references make the
// schema a graph, which the nodes mirror.
func (b *builder) build(s *jsonschema.Schema) *node {
	if n := b.nodes[s]; n != nil {
		return n
	}
	n := &node{minProperties: absent, maxProperties: absent, minItems: absent, maxItems: absent, minLength: absent, maxLength: absent}
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
		n.ref = b.build(s.Ref)
		n.refAlone = s.DraftVersion < 2019
	}
	if s.Not != nil {
		n.not = b.build(s.Not)
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

func (b *builder) nodeList(list []*jsonschema.Schema) []*node {
	if len(list) == 0 {
		return nil
	}
	out := make([]*node, len(list))
	for i, s := range list {
		out[i] = b.build(s)
	}
	return out
}

func (b *builder) anyKeywords(n *node, s *jsonschema.Schema) {
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			n.types |= kindNames[name]
		}
	}
	if s.Const != nil {
		n.hasConst, n.constant = true, *s.Const
		b.ok = b.ok && comparable(n.constant)
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

func (b *builder) objectKeywords(n *node, s *jsonschema.Schema) {
	n.minProperties, n.maxProperties = count(s.MinProperties), count(s.MaxProperties)
	n.required = s.Required
	if len(s.Properties) > 0 {
		n.properties = make(map[string]*node, len(s.Properties))
		for name, sub := range s.Properties {
			n.properties[name] = b.build(sub)
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case bool:
		n.noAdditional = !a
	case *jsonschema.Schema:
		n.additional = b.build(a)
	}
}

// arrayKeywords maps both spellings of positional items onto prefix and
// rest: prefixItems and items from 2020-12, items (one schema or a list)
// and additionalItems before, as the library reads them.
func (b *builder) arrayKeywords(n *node, s *jsonschema.Schema) {
	n.minItems, n.maxItems = count(s.MinItems), count(s.MaxItems)
	n.unique = s.UniqueItems
	if s.DraftVersion >= 2020 {
		n.prefix = b.nodeList(s.PrefixItems)
		if s.Items2020 != nil {
			n.rest = b.build(s.Items2020)
		}
		return
	}
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		n.rest = b.build(items)
		return // every item is evaluated: additionalItems has none left
	case []*jsonschema.Schema:
		n.prefix = b.nodeList(items)
		if n.prefix == nil {
			n.prefix = []*node{}
		}
	}
	switch a := s.AdditionalItems.(type) {
	case bool:
		n.noRest = !a
	case *jsonschema.Schema:
		n.rest = b.build(a)
	}
}

func (b *builder) stringKeywords(n *node, s *jsonschema.Schema) {
	n.minLength, n.maxLength = count(s.MinLength), count(s.MaxLength)
	n.pattern = s.Pattern
}

func (b *builder) numberKeywords(n *node, s *jsonschema.Schema) {
	for _, k := range []struct {
		keyword boundKeyword
		operand *big.Rat
	}{
		{boundMin, s.Minimum}, {boundMax, s.Maximum},
		{boundExclusiveMin, s.ExclusiveMinimum}, {boundExclusiveMax, s.ExclusiveMaximum},
		{boundMultipleOf, s.MultipleOf},
	} {
		if k.operand == nil {
			continue
		}
		d, ok := ratDecimal(k.operand)
		if !ok || k.keyword == boundMultipleOf && (d.isZero() || d.negative) {
			b.ok = false
			return
		}
		n.bounds = append(n.bounds, bound{keyword: k.keyword, operand: d})
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
func (b *builder) cyclic() bool {
	const (
		unseen = iota
		active
		done
	)
	state := make(map[*node]int, len(b.nodes))
	var visit func(n *node) bool
	visit = func(n *node) bool {
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
func (n *node) sameInstance() []*node {
	out := make([]*node, 0, 2+len(n.allOf)+len(n.anyOf)+len(n.oneOf))
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
