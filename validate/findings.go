package validate

import "strconv"

// The constructors below are the one place each code's finding is made,
// so its wording stays the same wherever the code arises (the local
// checks, the ladder, the operator's validators, MCP). Message is safe
// for logs; Detail is what the model reads.

// Unknown is a call to a name that matches no real tool.
func Unknown(name string) Finding {
	return Finding{Code: UnknownTool, Message: "the tool does not exist",
		Detail: "no tool named " + strconv.Quote(name) + " exists"}
}

// NotOffered is a call to a catalog tool this request did not offer.
func NotOffered(name string) Finding {
	return Finding{Code: ToolNotOffered, Message: "the tool was not offered in this request",
		Detail: "the tool " + strconv.Quote(name) + " is not available in this request"}
}

// NotInCatalog is a call to a tool the catalog does not approve.
func NotInCatalog(name string) Finding {
	return Finding{Code: ToolNotInCatalog, Message: "the tool is not in the configured catalog",
		Detail: "the tool " + strconv.Quote(name) + " is not an approved tool"}
}

// Malformed is arguments that cannot be read as the tool's input at all.
func Malformed(msg, detail string) Finding {
	return Finding{Code: MalformedArguments, Message: msg, Detail: detail}
}

// SchemaError is arguments (or a result) a JSON Schema refuses, at pointer
// ("" for the whole value), by keyword ("" when no keyword is known).
func SchemaError(pointer, keyword, msg, detail string) Finding {
	return Finding{Code: SchemaViolation, Pointer: pointer, Keyword: keyword, Message: msg, Detail: detail}
}

// RuleBroken is a call a rule of the tool, or an operator's validator,
// does not allow.
func RuleBroken(pointer, keyword, msg, detail string) Finding {
	return Finding{Code: RuleViolation, Pointer: pointer, Keyword: keyword, Message: msg, Detail: detail}
}

// WithReason is f carrying an operator validator's own words for a refusal.
func (f Finding) WithReason(reason string) Finding {
	f.Reason = reason
	return f
}

// Unverifiable is a provenance pointer that cannot be checked because the
// conversation history is kept upstream.
func Unverifiable(pointer string) Finding {
	msg := displayPointer(pointer) + ": the conversation history is not in the request"
	return Finding{Code: ProvenanceUnverifiable, Pointer: pointer, Message: msg, Detail: msg}
}

// Unvouched is a value at a provenance pointer that nothing the user wrote
// or a tool returned contains; the detail quotes it for the model.
func Unvouched(pointer, value string) Finding {
	return Finding{Code: Provenance, Pointer: pointer,
		Message: displayPointer(pointer) + ": the value did not appear in user content or a tool result",
		Detail: displayPointer(pointer) + ": the value " + strconv.Quote(value) +
			" did not appear in anything the user wrote or a tool returned; use a value from the conversation or ask the user"}
}

// confirmMessage is the message of every confirmation_required finding.
const confirmMessage = "the tool requires confirmation by a person"

// NeedsConfirmation is a valid call to a confirm tool; why is the detail,
// the message itself when empty.
func NeedsConfirmation(why string) Finding {
	if why == "" {
		why = confirmMessage
	}
	return Finding{Code: ConfirmationRequired, Message: confirmMessage, Detail: why}
}

// TruncatedCall is a call in an answer the token limit cut off.
func TruncatedCall() Finding {
	const msg = "the answer was cut off by the token limit"
	return Finding{Code: Truncated, Message: msg, Detail: msg}
}
