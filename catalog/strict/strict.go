// Package strict is strict mode's analysis (docs/strict.md): whether a
// tool's parameter schema lies inside a provider's strict subset of JSON
// Schema, and which of a request's tools to mark, remembering what an
// upstream refused. It reads schemas as JSON text and knows nothing of
// the config; catalog keeps one Memory per snapshot.
package strict

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// Provider names one provider's strict subset of JSON Schema: the
// schemas it can constrain decoding to (docs/strict.md, "What fits"). The subsets are the
// providers' documented ones, read from their references:
//
//   - OpenAI (Chat Completions and Responses, `strict: true` on a function):
//     https://platform.openai.com/docs/guides/structured-outputs#supported-schemas
//     and https://platform.openai.com/docs/guides/function-calling#strict-mode
//   - Anthropic (strict tool use, `strict: true` on a tool):
//     https://platform.claude.com/docs/en/agents-and-tools/tool-use/strict-tool-use
//     and https://platform.claude.com/docs/en/build-with-claude/structured-outputs#json-schema-limitations
//   - Gemini (functionCallingConfig.mode VALIDATED):
//     https://ai.google.dev/gemini-api/docs/function-calling#function_calling_modes
//     and https://ai.google.dev/gemini-api/docs/structured-output#json-schema-support
//
// Where a reference is silent on a keyword the check leaves the schema
// out: a tool wrongly left unmarked costs nothing, a tool wrongly marked
// costs a refused request (which toolgate then sends again unmarked).
type Provider uint8

// The strict subsets.
const (
	OpenAI Provider = iota
	Anthropic
	Gemini
)

// Providers are all subsets, in the order reports list them.
var Providers = []Provider{OpenAI, Anthropic, Gemini}

func (p Provider) String() string {
	switch p {
	case Anthropic:
		return "anthropic"
	case Gemini:
		return "gemini"
	}
	return "openai"
}

// Fit is what the check finds of one schema: whether it lies inside a
// provider's strict subset, and if not, the first keyword or shape that
// keeps it out, as "pointer: what".
type Fit struct {
	OK     bool
	Reason string
	// Optional and Unions count what Anthropic limits per request: the
	// properties not required, and the schemas that are unions (anyOf or
	// a type list).
	Optional int
	Unions   int
}

// Limits of the providers' documents. OpenAI's hold per schema, Anthropic's
// per request across every strict tool.
const (
	openAIMaxProperties  = 5000
	openAIMaxDepth       = 10
	openAIMaxEnumValues  = 1000
	openAIMaxStringChars = 120000
	openAIBigEnum        = 250
	openAIBigEnumChars   = 15000

	anthropicMaxStrictTools = 20
	anthropicMaxOptional    = 24
	anthropicMaxUnions      = 16
)

// keywords are the keywords each subset accepts anywhere in a
// schema; $schema is accepted at the root only.
var keywords = [...]map[string]bool{
	OpenAI: set("type", "properties", "required", "additionalProperties", "items", "enum", "const",
		"anyOf", "$ref", "$defs", "definitions", "description", "title", "pattern", "format",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
		// Not in the documented list, but OpenAI's own strict helpers
		// (zodFunction in the openai package) send them with strict: true
		// and the API takes them.
		"minLength", "maxLength"),
	Anthropic: set("type", "properties", "required", "additionalProperties", "items", "enum", "const",
		"anyOf", "allOf", "$ref", "$defs", "definitions", "description", "title", "default", "pattern", "format", "minItems"),
	Gemini: set("type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum",
		"anyOf", "$ref", "$defs", "$id", "$anchor", "description", "title", "format", "minimum", "maximum",
		"minItems", "maxItems", "propertyOrdering"),
}

// formats are the string formats each subset constrains.
var formats = [...]map[string]bool{
	OpenAI:    set("date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"),
	Anthropic: set("date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"),
	Gemini:    set("date-time", "date", "time", "enum", "int32", "int64", "float", "double"),
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Check judges one function's parameter schema, as the request
// declares it, against p's strict subset. It never changes the schema:
// a schema outside the subset is reported, not made to fit.
func Check(p Provider, schema []byte) Fit {
	if jsonx.IsNull(schema) {
		return Fit{Reason: "/: no parameters schema"}
	}
	root, err := jsonx.ParseObject(schema)
	if err != nil {
		return Fit{Reason: "/: not a JSON object"}
	}
	w := &walk{provider: p, root: root, refs: map[string][]string{}}
	if !w.rootShape(root) {
		return Fit{Reason: w.reason}
	}
	if !w.schema(root, "", "", 1) || !w.limits() {
		return Fit{Reason: w.reason}
	}
	return Fit{OK: true, Optional: w.optional, Unions: w.unions}
}

// walk is one schema's check: where it failed and the totals the
// providers limit.
type walk struct {
	provider Provider
	root     jsonx.Object
	reason   string
	// refs are the local references each definition ("" for the root)
	// makes, for Anthropic's rule against recursive schemas.
	refs                          map[string][]string
	properties, enums, characters int
	optional, unions              int
	bigEnumChars, bigEnumAt       string
}

func (w *walk) fail(ptr, format string, args ...any) bool {
	if ptr == "" {
		ptr = "/"
	}
	w.reason = ptr + ": " + fmt.Sprintf(format, args...)
	return false
}

// rootShape holds the root to what every provider asks of function
// parameters: an object, and for OpenAI not a union.
func (w *walk) rootShape(root jsonx.Object) bool {
	if string(root.Get("type")) != `"object"` {
		return w.fail("", "the root must be type object")
	}
	if w.provider == OpenAI && root.Has("anyOf") {
		return w.fail("", "anyOf at the root")
	}
	return true
}

// schema checks one schema object at ptr; definition names the one it
// belongs to ("" for the root's own tree).
func (w *walk) schema(s jsonx.Object, ptr, definition string, depth int) bool {
	for _, f := range s {
		if !keywords[w.provider][f.Key] && (f.Key != "$schema" || ptr != "") {
			return w.fail(ptr, "%s is outside the subset", f.Key)
		}
	}
	if !s.Has("type") && !s.Has("anyOf") && !s.Has("$ref") && !s.Has("enum") && !s.Has("const") && !s.Has("allOf") {
		return w.fail(ptr, "a schema without a type")
	}
	if !w.typeList(s, ptr) || !w.values(s, ptr) || !w.ref(s, ptr, definition) {
		return false
	}
	if !w.object(s, ptr, definition, depth) {
		return false
	}
	if items := s.Get("items"); items != nil {
		if !w.sub(items, ptr+"/items", definition, depth) {
			return false
		}
	}
	if !w.array(s, ptr) {
		return false
	}
	for _, key := range []string{"anyOf", "allOf", "prefixItems"} {
		if !w.list(s, key, ptr, definition, depth) {
			return false
		}
	}
	return w.defs(s, ptr, depth)
}

// sub checks a nested schema; boolean schemas are outside every subset.
func (w *walk) sub(raw []byte, ptr, definition string, depth int) bool {
	obj, err := jsonx.SplitObject(raw)
	if err != nil {
		return w.fail(ptr, "a boolean or malformed schema")
	}
	return w.schema(obj, ptr, definition, depth)
}

// list checks each schema of an anyOf, allOf or prefixItems.
func (w *walk) list(s jsonx.Object, key, ptr, definition string, depth int) bool {
	raw := s.Get(key)
	if raw == nil {
		return true
	}
	elements, err := jsonx.SplitArray(raw)
	if err != nil || len(elements) == 0 {
		return w.fail(ptr, "%s must be a non-empty array", key)
	}
	if key == "anyOf" {
		w.unions++
	}
	if key == "allOf" && w.provider == Anthropic && strings.Contains(string(raw), `"$ref"`) {
		return w.fail(ptr+"/allOf", "allOf with $ref")
	}
	for i, e := range elements {
		if !w.sub(e, ptr+"/"+key+"/"+strconv.Itoa(i), definition, depth) {
			return false
		}
	}
	return true
}

// typeList reads type: one name, or a list of them (a union).
func (w *walk) typeList(s jsonx.Object, ptr string) bool {
	raw := s.Get("type")
	if raw == nil {
		return true
	}
	if raw[0] != '[' {
		if _, ok := jsonx.Unquote(raw); !ok {
			return w.fail(ptr, "type must be a name")
		}
		return true
	}
	names, err := jsonx.SplitArray(raw)
	if err != nil || len(names) == 0 {
		return w.fail(ptr, "type must be a name or a list of names")
	}
	if len(names) > 1 {
		w.unions++
	}
	return true
}

// values checks enum, const, format, pattern.
func (w *walk) values(s jsonx.Object, ptr string) bool {
	if raw := s.Get("enum"); raw != nil {
		if !w.enum(raw, ptr) {
			return false
		}
	}
	if raw := s.Get("const"); raw != nil {
		w.characters += len(raw)
	}
	if raw := s.Get("format"); raw != nil {
		f, _ := jsonx.Unquote(raw)
		if !formats[w.provider][f] {
			return w.fail(ptr, "format %q is outside the subset", f)
		}
	}
	if raw := s.Get("pattern"); raw != nil && w.provider == Anthropic {
		pat, _ := jsonx.Unquote(raw)
		if what := unsupportedRegex(pat); what != "" {
			return w.fail(ptr, "pattern uses %s", what)
		}
	}
	return true
}

// enum counts an enum's values for OpenAI's limits and holds Anthropic's
// enums to primitive values.
func (w *walk) enum(raw []byte, ptr string) bool {
	members, err := jsonx.SplitArray(raw)
	if err != nil || len(members) == 0 {
		return w.fail(ptr, "enum must be a non-empty array")
	}
	total := 0
	for _, v := range members {
		if v[0] == '{' || v[0] == '[' {
			if w.provider == Anthropic {
				return w.fail(ptr, "enum with an object or array value")
			}
		}
		total += len(v)
	}
	w.enums += len(members)
	w.characters += total
	if len(members) > openAIBigEnum && total > openAIBigEnumChars && w.bigEnumAt == "" {
		w.bigEnumAt = ptr
	}
	return true
}

// unsupportedRegex names the first regex feature Anthropic's grammar
// cannot express: backreferences, lookaround, word boundaries.
func unsupportedRegex(p string) string {
	for i := 0; i+1 < len(p); i++ {
		if p[i] != '\\' && p[i] != '(' {
			continue
		}
		if p[i] == '\\' {
			switch c := p[i+1]; {
			case c >= '1' && c <= '9', c == 'k':
				return "a backreference"
			case c == 'b' || c == 'B':
				return "a word boundary"
			}
			i++
			continue
		}
		if strings.HasPrefix(p[i:], "(?=") || strings.HasPrefix(p[i:], "(?!") ||
			strings.HasPrefix(p[i:], "(?<=") || strings.HasPrefix(p[i:], "(?<!") {
			return "a lookaround"
		}
	}
	return ""
}

// ref checks a $ref: local only, and recorded for the recursion check.
func (w *walk) ref(s jsonx.Object, ptr, definition string) bool {
	raw := s.Get("$ref")
	if raw == nil {
		return true
	}
	target, _ := jsonx.Unquote(raw)
	if target != "#" && !strings.HasPrefix(target, "#/") {
		return w.fail(ptr, "$ref %q is not local", target)
	}
	w.refs[definition] = append(w.refs[definition], refTarget(target))
	return true
}

// refTarget is the definition a local reference lands in: "" for the
// root, else "$defs/Name".
func refTarget(r string) string {
	parts := strings.SplitN(strings.TrimPrefix(r, "#/"), "/", 3)
	if r == "#" || len(parts) < 2 {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

// object checks an object schema's properties, required and
// additionalProperties.
func (w *walk) object(s jsonx.Object, ptr, definition string, depth int) bool {
	properties := s.Get("properties")
	isObject := properties != nil || typeNames(s.Get("type"))["object"]
	if !isObject {
		return true
	}
	if w.provider == OpenAI && depth > openAIMaxDepth {
		return w.fail(ptr, "more than %d levels of nesting", openAIMaxDepth)
	}
	if !w.closed(s, ptr, definition, depth) {
		return false
	}
	var members jsonx.Object
	if properties != nil {
		var err error
		if members, err = jsonx.SplitObject(properties); err != nil {
			return w.fail(ptr, "properties must be an object")
		}
	}
	required := map[string]bool{}
	if raw := s.Get("required"); raw != nil {
		names, err := jsonx.SplitArray(raw)
		if err != nil {
			return w.fail(ptr, "required must be an array")
		}
		for _, n := range names {
			name, _ := jsonx.Unquote(n)
			required[name] = true
		}
	}
	for _, m := range members {
		w.properties++
		w.characters += len(m.Key)
		if !required[m.Key] {
			if w.provider == OpenAI {
				return w.fail(ptr, "property %q is optional: every property must be required", m.Key)
			}
			w.optional++
		}
		if !w.sub(m.Value, ptr+"/properties/"+escapePointer(m.Key), definition, depth+1) {
			return false
		}
	}
	return true
}

// closed holds additionalProperties to what the subset asks: false on
// every object for OpenAI and Anthropic; anything, checked as a schema
// when it is one, for Gemini.
func (w *walk) closed(s jsonx.Object, ptr, definition string, depth int) bool {
	additional := s.Get("additionalProperties")
	if w.provider == Gemini {
		if additional != nil && additional[0] == '{' {
			return w.sub(additional, ptr+"/additionalProperties", definition, depth+1)
		}
		return true
	}
	if string(additional) != "false" {
		return w.fail(ptr, "additionalProperties must be false")
	}
	return true
}

// array checks the array limits a subset allows.
func (w *walk) array(s jsonx.Object, ptr string) bool {
	if w.provider != Anthropic {
		return true
	}
	if raw := s.Get("minItems"); raw != nil {
		if n, ok := jsonx.Int(raw); !ok || n > 1 {
			return w.fail(ptr, "minItems other than 0 or 1")
		}
	}
	return true
}

// defs checks the definitions a schema carries ($defs, definitions).
func (w *walk) defs(s jsonx.Object, ptr string, depth int) bool {
	for _, key := range []string{"$defs", "definitions"} {
		raw := s.Get(key)
		if raw == nil {
			continue
		}
		members, err := jsonx.SplitObject(raw)
		if err != nil {
			return w.fail(ptr, "%s must be an object", key)
		}
		for _, m := range members {
			w.characters += len(m.Key)
			if !w.sub(m.Value, ptr+"/"+key+"/"+escapePointer(m.Key), key+"/"+m.Key, depth) {
				return false
			}
		}
	}
	return true
}

// limits holds the totals to OpenAI's per-schema limits and rules out
// recursion for Anthropic, once the whole schema is walked.
func (w *walk) limits() bool {
	switch w.provider {
	case OpenAI:
		switch {
		case w.properties > openAIMaxProperties:
			return w.fail("", "more than %d properties", openAIMaxProperties)
		case w.enums > openAIMaxEnumValues:
			return w.fail("", "more than %d enum values", openAIMaxEnumValues)
		case w.characters > openAIMaxStringChars:
			return w.fail("", "names and enum values longer than %d characters together", openAIMaxStringChars)
		case w.bigEnumAt != "":
			return w.fail(w.bigEnumAt, "an enum of more than %d values longer than %d characters", openAIBigEnum, openAIBigEnumChars)
		}
	case Anthropic:
		if at := w.cycle(); at != "" {
			return w.fail(at, "a recursive schema")
		}
	}
	return true
}

// cycle finds a definition that reaches itself through $ref, and names
// it, or returns "".
func (w *walk) cycle() string {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]uint8{}
	var visit func(name string) (string, bool)
	visit = func(name string) (string, bool) {
		switch state[name] {
		case visiting:
			return name, true
		case done:
			return "", false
		}
		state[name] = visiting
		for _, target := range w.refs[name] {
			if at, ok := visit(target); ok {
				return at, true
			}
		}
		state[name] = done
		return "", false
	}
	names := make([]string, 0, len(w.refs))
	for n := range w.refs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if at, ok := visit(n); ok {
			return "/" + at
		}
	}
	return ""
}

// typeNames reads type as a set of names.
func typeNames(raw []byte) map[string]bool {
	out := map[string]bool{}
	if raw == nil {
		return out
	}
	if raw[0] != '[' {
		n, _ := jsonx.Unquote(raw)
		out[n] = true
		return out
	}
	names, _ := jsonx.SplitArray(raw)
	for _, r := range names {
		n, _ := jsonx.Unquote(r)
		out[n] = true
	}
	return out
}

// escapePointer escapes one JSON pointer token.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
