package gemini

import "github.com/toolgate/toolgate/neutral"

// stopOf translates a candidate's finish reason, already named (Vertex's
// numbers read). Gemini has no reason of its own for a function call: a
// call ends with STOP. Every other reason (SAFETY, RECITATION,
// MALFORMED_FUNCTION_CALL…) is StopOther.
func stopOf(finish string) neutral.Stop {
	switch finish {
	case "", "FINISH_REASON_UNSPECIFIED":
		return neutral.StopUnknown
	case "STOP":
		return neutral.StopEnd
	case "MAX_TOKENS":
		return neutral.StopMaxTokens
	}
	return neutral.StopOther
}
