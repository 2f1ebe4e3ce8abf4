// Package validate judges tool calls against the effective catalog of one
// request. It is pure: no I/O, no clocks, no logging. Everything it reports is a
// Finding with a closed Code, so callers branch on codes, never on messages.
package validate

// Code is the closed set of reasons a tool call is not acceptable (docs/checks.md).
type Code string

// Finding codes. The spelling is part of the wire contract: escalations,
// metrics labels and logs carry these strings.
const (
	// UnknownTool: the name matches no real tool at all. The only code that
	// counts as a hallucination.
	UnknownTool Code = "unknown_tool"
	// ToolNotOffered: a real catalog tool, but this request did not offer it
	// (or tool_choice excluded it).
	ToolNotOffered Code = "tool_not_offered"
	// ToolNotInCatalog: offered by the request, but the catalog lacks it and
	// catalog.unlisted is reject.
	ToolNotInCatalog Code = "tool_not_in_catalog"
	// MalformedArguments: the arguments are not JSON, not UTF-8, or not an object.
	MalformedArguments Code = "malformed_arguments"
	// SchemaViolation: the arguments break the tool's JSON Schema; Pointer and
	// Keyword say where and which rule.
	SchemaViolation Code = "schema_violation"
	// Provenance: a value at a provenance pointer never appeared in user
	// content or a tool result of this request.
	Provenance Code = "provenance"
	// ProvenanceUnverifiable: the history lives upstream, so provenance cannot
	// be checked. Counted; does not fail the call.
	ProvenanceUnverifiable Code = "provenance_unverifiable"
	// RuleViolation: a CEL rule of the tool returned false or failed.
	RuleViolation Code = "rule_violation"
	// ConfirmationRequired: a valid call to a policy: confirm tool. A person
	// says yes before it runs.
	ConfirmationRequired Code = "confirmation_required"
	// Truncated: the answer was cut off by the token limit inside a call.
	// Never re-asked and not a hallucination.
	Truncated Code = "truncated"
)

// Class groups codes by the ladder step that handles them.
type Class uint8

// Classes of findings.
const (
	// ClassNone does not make a call invalid.
	ClassNone Class = iota
	// ClassName: the tool name is wrong; handled by recovery.
	ClassName
	// ClassArgs: the arguments are wrong; handled by reprompt.
	ClassArgs
	// ClassFinal: escalated without asking the model again.
	ClassFinal
)

// Class reports which ladder step handles c.
func (c Code) Class() Class {
	switch c {
	case UnknownTool, ToolNotOffered, ToolNotInCatalog:
		return ClassName
	case MalformedArguments, SchemaViolation, Provenance, RuleViolation:
		return ClassArgs
	case Truncated, ConfirmationRequired:
		return ClassFinal
	default:
		return ClassNone
	}
}

// Finding is one reason a call is not acceptable.
type Finding struct {
	Code Code `json:"code"`
	// Pointer is the JSON pointer into the arguments ("" for the whole call).
	Pointer string `json:"pointer"`
	// Keyword is the JSON Schema keyword that failed, for schema_violation.
	Keyword string `json:"keyword"`
	// Message is safe for logs and sinks: it names pointers and keywords,
	// never argument values.
	Message string `json:"message"`
	// Detail is the full reason for the model, which may quote values. It is
	// sent upstream in a reprompt and never logged.
	Detail string `json:"-"`
	// Reason is an operator validator's own words for a refusal. The model
	// reads them (they are the Detail too) and the client's escalation
	// carries them; sinks and logs drop them, since they may quote the
	// operator's data.
	Reason string `json:"reason,omitempty"`
}

// Blocking reports whether f makes its call invalid.
func (f Finding) Blocking() bool { return f.Code.Class() != ClassNone }
