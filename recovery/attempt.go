package recovery

import "github.com/toolgate/toolgate/validate"

// CallAttempt is the escalation attempt of one judged call, the arguments
// structured when they are a JSON object and raw as well, as the ladder
// records its own. Sinks redact both.
func CallAttempt(c validate.ToolCall, fs []validate.Finding) Attempt {
	return callAttempt("call", c, fs)
}
