package neutral

// Turn is one assistant answer (one choice) in neutral form.
type Turn struct {
	Calls []ToolCall
	// Text is the answer's visible text, read when a decision is expected.
	Text string
	// Stop is the provider's reason the answer ended; Truncated reads it.
	Stop Stop
	// Usage of the upstream call that produced this turn.
	Usage Usage
	// ResponseID is the provider's id of the answer, where it has one.
	ResponseID string
	// Raw is the codec's own form of the turn, replayed byte for byte in
	// re-queries. Nothing but the codec that made it looks inside.
	Raw any
}

// Usage counts the tokens of one upstream call.
type Usage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

// CallReply answers one call of a replayed turn.
type CallReply struct {
	CallID  string
	Content string
	IsError bool
}

// Round is one round of a re-query's history: a replayed assistant turn
// followed by a reply to each of its calls, in the turn's order.
type Round struct {
	Turn    *Turn
	Replies []CallReply
}

// QueryKind says why the upstream is asked; it labels metrics.
type QueryKind string

// Query kinds.
const (
	KindOriginal QueryKind = "original"
	KindRecovery QueryKind = "recovery"
	KindReprompt QueryKind = "reprompt"
)

// Query is one re-query: the original request with History appended.
type Query struct {
	Kind    QueryKind
	History []Round
	// Decision asks for a text answer: tool_choice none, no response_format.
	Decision bool
}
