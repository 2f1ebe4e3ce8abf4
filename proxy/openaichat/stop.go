package openaichat

import "github.com/toolgate/toolgate/neutral"

// stopOf translates a choice's finish_reason. Reasons this codec does not
// name (content_filter, later ones) are StopOther.
func stopOf(reason string) neutral.Stop {
	switch reason {
	case "":
		return neutral.StopUnknown
	case "stop":
		return neutral.StopEnd
	case "length":
		return neutral.StopMaxTokens
	case "tool_calls", "function_call":
		return neutral.StopToolCalls
	}
	return neutral.StopOther
}
