package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/schema"
)

// Kind is the type of a tool call as the API spells it.
type Kind = neutral.Kind

// Call kinds. Only function calls are judged in full (docs/checks.md).
const (
	Function = neutral.Function
	Custom   = neutral.Custom
	Other    = neutral.Other
)

// ToolCall is one call in neutral form; the checks take calls as the
// codecs decoded them.
type ToolCall = neutral.ToolCall

// Evidence answers provenance questions about the request's own history.
type Evidence interface {
	// Seen reports whether token occurred, as a whole token, in user content or
	// a tool result of the request.
	Seen(token string) bool
}

// Context is what Check needs beyond the call itself.
type Context struct {
	Effective *catalog.Effective
	// Evidence is nil when the request could not be read; provenance is then
	// unverifiable.
	Evidence Evidence
	// HistoryUpstream is set when earlier turns live at the provider
	// (previous_response_id, conversation), so provenance is unverifiable
	// and rules read history_complete as false.
	HistoryUpstream bool
	// History is the conversation's earlier calls, for rules; nil reads
	// as an empty history.
	History *History
	// Values are the request's context values by their catalog.context
	// name. A name the request did not send is absent, never "".
	Values map[string]string
}

// HistoryComplete reports whether the request carries the whole
// conversation: it was read, and no earlier turn lives upstream.
func (cx *Context) HistoryComplete() bool { return !cx.HistoryUpstream && cx.Evidence != nil }

// CallReport is the judgement of one call: the tool its name resolved to
// and every finding against it.
type CallReport struct {
	// Tool is the resolved tool, nil when the name is bad.
	Tool *catalog.Tool
	// Stripped is set when the name matched only after removing a configured
	// provider prefix.
	Stripped bool
	Findings []Finding
	// Unvalidated says why part of the arguments was not judged: "" when
	// all of it was.
	Unvalidated Unvalidated
}

// Unvalidated is the reason a call's arguments were not judged in full,
// spelled as the toolgate_unvalidated_total reason label.
type Unvalidated string

// Reasons a call is not judged in full.
const (
	// SchemaUncompilable: a request tool's schema does not compile (a remote
	// $ref, an invalid pattern); the call passes with only its object shape
	// checked.
	SchemaUncompilable Unvalidated = "schema_uncompilable"
	// PatternTimeout: a pattern could not be evaluated against a value
	// within its budget; the call gets a blocking schema finding, since
	// passing would let a long enough value skip the pattern.
	PatternTimeout Unvalidated = "pattern_timeout"
)

// Valid reports whether no finding blocks the call.
func (rep *CallReport) Valid() bool {
	for _, f := range rep.Findings {
		if f.Blocking() {
			return false
		}
	}
	return true
}

// Worst returns the class of the most severe blocking finding: final, then
// name, then arguments.
func (rep *CallReport) Worst() Class {
	worst := ClassNone
	for _, f := range rep.Findings {
		switch c := f.Code.Class(); {
		case c == ClassFinal:
			return ClassFinal
		case c == ClassName:
			worst = ClassName
		case c == ClassArgs && worst == ClassNone:
			worst = ClassArgs
		}
	}
	return worst
}

// Codes returns the distinct codes of the report's findings in first-seen order.
func (rep *CallReport) Codes() []Code {
	var out []Code
	for _, f := range rep.Findings {
		dup := false
		for _, c := range out {
			if c == f.Code {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, f.Code)
		}
	}
	return out
}

// maxArgBytes bounds the arguments of one call; larger ones are malformed.
const maxArgBytes = 8 << 20

// Check judges one call alone against cx: its rules see no other calls of
// its answer. Every problem is reported, not only the first, so a reprompt
// can name them all at once.
func Check(c ToolCall, cx *Context) CallReport {
	return CheckIn([]ToolCall{c}, 0, cx)
}

// CheckIn judges calls[i] against cx, the other calls of the same answer
// being what its rules read as `calls`. It is the local half of judging a
// call; the operator's validators (package judge) are the other.
func CheckIn(calls []ToolCall, i int, cx *Context) CallReport {
	c := calls[i]
	var rep CallReport
	if c.Kind == Other {
		return rep
	}
	tool, st, stripped := cx.Effective.Lookup(c.Name)
	rep.Stripped = stripped
	switch st {
	case catalog.Unknown:
		rep.Findings = append(rep.Findings, Unknown(c.Name))
		return rep
	case catalog.NotOffered:
		rep.Findings = append(rep.Findings, NotOffered(c.Name))
		return rep
	case catalog.NotInCatalog:
		rep.Findings = append(rep.Findings, NotInCatalog(c.Name))
		return rep
	}
	rep.Tool = tool
	if c.Kind == Custom {
		// Free text can only be meant for a tool without a JSON schema; a
		// tool with one takes JSON arguments, so a custom call to it is the
		// wrong shape rather than a call checked by name alone.
		if tool.Schema != nil || tool.SchemaError != nil {
			msg := "the tool takes JSON arguments, not free text"
			rep.Findings = append(rep.Findings, Malformed(msg, msg+"; call it as a function with a JSON object"))
		}
		return rep
	}
	if c.BadShape {
		msg := "the arguments are not in the shape the API defines"
		rep.Findings = append(rep.Findings, Malformed(msg, msg))
		return rep
	}
	held, settled := fastArgs(&rep, tool, c.Args)
	if settled {
		return rep
	}
	args, f := decodeArgs(c.Args)
	if f != nil {
		rep.Findings = append(rep.Findings, *f)
		return rep
	}
	if !held {
		checkSchema(&rep, tool, args)
	}
	if len(rep.Findings) == 0 {
		rep.Findings = checkProvenance(rep.Findings, tool, args, cx)
		rep.Findings = checkRules(rep.Findings, tool, args, calls, i, cx)
	}
	return rep
}

// fastArgs judges the arguments on their text by the schema's fast path.
// held reports that the schema holds for them; settled, that nothing is
// left to judge: the schema holds and the tool reads nothing of the
// arguments but its schema (no provenance pointers, no rules), so they
// are never decoded, or a pattern ran out of time, which is reported here
// so that one call costs at most one timeout. Anything else is left to
// the library (checkSchema).
func fastArgs(rep *CallReport, tool *catalog.Tool, raw []byte) (held, settled bool) {
	if len(raw) > maxArgBytes {
		return false, false
	}
	ok, err := tool.ArgsValid(raw)
	if err == nil {
		return ok, ok && len(tool.Provenance) == 0 && len(tool.Rules) == 0
	}
	var pe *schema.PatternError
	if !errors.As(err, &pe) {
		return false, false
	}
	args, f := decodeArgs(raw)
	if f != nil {
		return false, false
	}
	rep.Unvalidated = PatternTimeout
	rep.Findings = append(rep.Findings, patternFinding(pe, args))
	return false, true
}

// checkSchema judges decoded arguments the fast path did not find valid
// by the schema library, which words the findings.
func checkSchema(rep *CallReport, tool *catalog.Tool, args any) {
	err := tool.ValidateArgs(args)
	var pe *schema.PatternError
	switch {
	case errors.As(err, &pe):
		rep.Unvalidated = PatternTimeout
		rep.Findings = append(rep.Findings, patternFinding(pe, args))
	case err != nil:
		rep.Findings = appendSchemaFindings(rep.Findings, err)
	case tool.SchemaError != nil:
		// Only a request tool gets here (a catalog schema that does not
		// compile is a config error). Its author's client and model judge
		// it by a schema toolgate cannot read, and no re-ask can make the
		// model satisfy a schema nobody here can check: the call passes
		// with its object shape checked, counted as unvalidated.
		rep.Unvalidated = SchemaUncompilable
	}
}

// decodeArgs parses argument text into the value form the schema validator
// and CEL read. Numbers stay json.Number so no precision is lost.
func decodeArgs(raw []byte) (any, *Finding) {
	malformed := func(msg string) *Finding {
		f := Malformed(msg, msg)
		return &f
	}
	if len(raw) > maxArgBytes {
		return nil, malformed("the arguments exceed " + strconv.Itoa(maxArgBytes) + " bytes")
	}
	if !utf8.Valid(raw) {
		return nil, malformed("the arguments are not valid UTF-8")
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, malformed("the arguments are not a JSON object")
	}
	v, ok := jsonx.Decode(trimmed)
	if !ok {
		// encoding/json decides what jsonx declines (very deep nesting)
		// and words the error for what neither can read.
		var err error
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(trimmed)); err != nil {
			return nil, malformed("the arguments are not valid JSON: " + jsonErrorSummary(err))
		}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, malformed("the arguments are not a JSON object")
	}
	return v, nil
}

// jsonErrorSummary keeps the position of a JSON syntax error but never the
// offending text, which is model output.
func jsonErrorSummary(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "syntax error at byte " + strconv.FormatInt(se.Offset, 10)
	}
	return "unexpected end or trailing data"
}

var printer = message.NewPrinter(language.English)

// appendSchemaFindings walks the validation error tree to its leaves, so each
// finding names one instance location and one keyword.
func appendSchemaFindings(dst []Finding, err error) []Finding {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return append(dst, SchemaError("", "", "the arguments do not match the schema", err.Error()))
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		ptr := pointer(e.InstanceLocation)
		kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
		if kw == "" {
			kw = unnamedKeyword(e)
		}
		dst = append(dst, SchemaError(ptr, kw, safeMessage(ptr, kw, e.ErrorKind),
			displayPointer(ptr)+": "+e.ErrorKind.LocalizedString(printer)))
	}
	walk(ve)
	return dst
}

// unnamedKeyword names the keyword of the few error kinds whose keyword path
// is empty, so every schema finding says which rule failed. A false schema
// is named by the keyword that holds it where one does
// (unevaluatedProperties: false, items: false), else "false".
func unnamedKeyword(e *jsonschema.ValidationError) string {
	switch e.ErrorKind.(type) {
	case *kind.Not:
		return "not"
	case *kind.FalseSchema:
		at := e.SchemaURL[strings.LastIndexByte(e.SchemaURL, '/')+1:]
		switch at {
		case "unevaluatedProperties", "unevaluatedItems", "additionalProperties", "items", "additionalItems", "propertyNames", "contains":
			return at
		}
		return "false"
	}
	return ""
}

// safeMessage describes a schema failure without quoting argument values:
// sinks and logs may only carry pointers, keywords and schema facts.
func safeMessage(ptr, kw string, errKind jsonschema.ErrorKind) string {
	var detail string
	switch k := errKind.(type) {
	case *kind.Type:
		detail = "expected " + strings.Join(k.Want, " or ") + ", got " + k.Got
	case *kind.Required:
		detail = "missing " + strings.Join(quoteAll(k.Missing), ", ")
	case *kind.AdditionalProperties:
		detail = "unexpected " + strings.Join(quoteAll(k.Properties), ", ")
	default:
		detail = "value fails " + kw
	}
	return displayPointer(ptr) + ": " + detail
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strconv.Quote(v)
	}
	sort.Strings(out)
	return out
}

func displayPointer(p string) string {
	if p == "" {
		return "arguments"
	}
	return "arguments" + p
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// pointer turns a path of tokens into an RFC 6901 JSON pointer.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(t))
	}
	return b.String()
}

// checkRules runs the tool's CEL rules. A rule that cannot be evaluated
// (missing key, missing context value, cost limit) is a violation: an
// unchecked rule must not pass. Messages name the rule's own message and
// context names, never values.
func checkRules(dst []Finding, tool *catalog.Tool, args any, calls []ToolCall, self int, cx *Context) []Finding {
	if len(tool.Rules) == 0 {
		return dst
	}
	vars := &catalog.RuleVars{
		Tool:            tool.Name,
		Args:            catalog.CELValue(args),
		Calls:           siblingValues(calls, self),
		History:         cx.History.celEntries(),
		HistoryComplete: cx.HistoryComplete(),
		Context:         cx.Values,
	}
	for _, r := range tool.Rules {
		ok, err := r.EvalVars(context.Background(), vars)
		var missing *catalog.MissingContextError
		switch {
		case errors.As(err, &missing):
			msg := fmt.Sprintf("context value %q is missing, so the rule cannot hold: %s", missing.Key, r.Message)
			dst = append(dst, RuleBroken("", "rule", msg, msg))
		case err != nil:
			msg := fmt.Sprintf("rule could not be evaluated: %s", r.Message)
			dst = append(dst, RuleBroken("", "rule", msg, msg))
		case !ok:
			dst = append(dst, RuleBroken("", "rule", r.Message, r.Message))
		}
	}
	return dst
}

// siblingValues are the other judged calls of an answer as rules read
// them: {id, tool, args}, args parsed when they are JSON.
func siblingValues(calls []ToolCall, self int) []any {
	out := make([]any, 0, len(calls))
	for j, c := range calls {
		if j == self || c.Kind == Other {
			continue
		}
		out = append(out, map[string]any{"id": c.ID, "tool": c.Name, "args": catalog.CELValue(parseLoose(c.Args))})
	}
	return out
}

// patternFinding reports a pattern that ran out of time. The pointer is
// where the value (or, for patternProperties, the key) occurs in args.
func patternFinding(pe *schema.PatternError, args any) Finding {
	ptr, _, isKey := locateString(args, pe.Input, nil)
	kw := "pattern"
	if isKey {
		kw = "patternProperties"
	}
	p := pointer(ptr)
	msg := displayPointer(p) + ": the value could not be checked against the pattern in time"
	return SchemaError(p, kw, msg, msg+"; use a shorter, simpler value that matches "+strconv.Quote(pe.Pattern))
}

// locateString returns the path of the first string value equal to s in
// v, or else of the first object key equal to s (isKey true).
func locateString(v any, s string, path []string) (at []string, found, isKey bool) {
	switch x := v.(type) {
	case string:
		return path, x == s, false
	case []any:
		for i, e := range x {
			if p, ok, k := locateString(e, s, append(path, strconv.Itoa(i))); ok {
				return p, true, k
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, ok, kk := locateString(x[k], s, append(path, k)); ok {
				return p, true, kk
			}
		}
		for _, k := range keys {
			if k == s {
				return append(path, k), true, true
			}
		}
	}
	return nil, false, false
}
