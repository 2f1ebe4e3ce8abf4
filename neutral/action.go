package neutral

// ActionKind is what happens to one choice of an answer.
type ActionKind uint8

// Actions. A whole answer refused in error mode is not an action on a
// choice: the pipeline writes the codec's error body instead.
const (
	// Keep: the choice goes out as the upstream sent it.
	Keep ActionKind = iota
	// Replace: the calls marked in Changed are replaced by Calls.
	Replace
	// Respond: the choice becomes a text answer, Text (an abstention, or
	// an escalation in message mode when Escalation is set).
	Respond
)

// Action is the pipeline's decision for one choice; codecs encode it in
// their wire shape and never derive it again.
type Action struct {
	Kind ActionKind
	// Calls are the choice's final calls, position for position with the
	// turn's calls and with the same ids (Replace).
	Calls []ToolCall
	// Changed marks the positions of Calls that were replaced (Replace).
	Changed []bool
	// Text is what the user reads (Respond).
	Text string
	// Escalation is set when the choice responds with an escalation message.
	Escalation *Escalated
	// ReQueries are the re-query answers that led here, oldest first: a
	// conversation stored upstream continues from the last of them.
	ReQueries []*Turn
}

// ChangedAt reports whether the call at position j was replaced.
func (a *Action) ChangedAt(j int) bool {
	return a.Kind == Replace && j >= 0 && j < len(a.Changed) && j < len(a.Calls) && a.Changed[j]
}

// Touched reports whether the choice differs from what the upstream sent.
func (a *Action) Touched() bool { return a.Kind != Keep }

// Escalated is an escalation as a codec writes it (docs/escalations.md).
type Escalated struct {
	// ID is the escalation's id (esc_…).
	ID string
	// Code is its primary code, the error's top-level "code".
	Code string
	// Text is the sentence a person reads, and the error mode's message.
	Text string
	// Body is the escalation object as JSON, embedded as it is.
	Body []byte
	// Codes are every code of the escalation, Code first.
	Codes []string
	// CatalogVersion is the catalog the call was judged against.
	CatalogVersion string
	// Findings are the escalated call's findings, for an API whose
	// refusal lists them one by one (MCP's error result).
	Findings []Finding
	// Available, when set, are the tools that may be called instead: the
	// refusal of a call to a tool that does not exist lists them (MCP).
	Available []string
	// Advice is what the caller should do next, for an API whose refusal
	// says it; empty leaves the API's own.
	Advice string
	// Approval is the approval ticket (docs/approvals.md) as JSON, when the call
	// is held for a person's yes.
	Approval []byte
}
