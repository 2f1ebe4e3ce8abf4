package neutral

// Step is what a stream event means for the pipeline.
type Step struct {
	// Hold: a tool call has begun; this event and every later one must be
	// held until the calls are judged.
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
}

// HeldEvent is a copy of an event the pipeline held back.
type HeldEvent struct {
	Raw   []byte
	Event string
	Data  []byte
}
