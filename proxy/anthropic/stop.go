package anthropic

import "github.com/toolgate/toolgate/neutral"

// stopOf translates a Messages stop_reason. Reasons this codec does not
// name (pause_turn, refusal, later ones) are StopOther.
func stopOf(reason string) neutral.Stop {
	switch reason {
	case "":
		return neutral.StopUnknown
	case "end_turn", "stop_sequence":
		return neutral.StopEnd
	case "max_tokens":
		return neutral.StopMaxTokens
	case "tool_use":
		return neutral.StopToolCalls
	}
	return neutral.StopOther
}
