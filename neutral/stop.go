package neutral

// Stop is why the provider says an answer ended, in words common to every
// API. Codecs only translate the provider's reason; what follows from it
// (a call cut off by the token limit) is decided from the neutral value.
type Stop string

// Stop reasons. StopUnknown is an answer whose provider gave no reason
// (yet): a stream cut before its end, a choice with a null reason.
const (
	StopUnknown   Stop = ""
	StopEnd       Stop = "end"
	StopMaxTokens Stop = "max_tokens"
	StopToolCalls Stop = "tool_calls"
	StopOther     Stop = "other"
)

// Truncated reports an answer the token limit cut off while it held a
// call: the call's arguments may be incomplete, so it is never passed as
// valid. This is the one place the rule is written.
func (t *Turn) Truncated() bool {
	return t.Stop == StopMaxTokens && len(t.Calls) > 0
}
