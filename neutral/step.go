package neutral

// Step is what one stream event says, as its codec read it. The codec
// reports; the pipeline decides what to hold and keeps the account of
// what went out.
type Step struct {
	// Hold: the event carries a tool call, or the start of one. The
	// pipeline holds it and, from it on, every later event until the
	// calls are judged; the codec says so of the call's events only.
	Hold bool
	// Done: the stream's terminal event ([DONE], message_stop,
	// response.completed). Nothing that follows is read.
	Done bool
	// Opening: the event opens the answer and carries nothing for the
	// user yet: no text, no call, no usage, no end (a role-only delta,
	// message_start, a ping before any content block, response.created).
	// Codecs only say so; the pipeline decides what to do with it.
	Opening bool
	// UpstreamError: the event is an error the upstream reports inside its
	// stream (a Chat chunk with an "error", an Anthropic or Responses
	// "error" event, a Gemini chunk that is Google's error envelope). The
	// answer ends with it; the event carries nothing else.
	UpstreamError bool
	// Seq is the event's sequence number, when Numbered: the API numbers
	// its events (Responses) and the client checks they follow each other.
	Seq      int64
	Numbered bool
	// Commits: the event gives the client an id that a re-query would
	// have to change (a stored Responses answer's id on a chained request).
	Commits bool
}

// HeldEvent is a copy of an event the pipeline held back.
type HeldEvent struct {
	Raw   []byte
	Event string
	Data  []byte
}
