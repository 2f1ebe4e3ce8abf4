// Package neutral holds the provider-neutral values that toolgate's
// pipeline works on and that every API codec translates to and from:
// requests, answers, turns, calls, stream steps, the Action decided for each
// choice and the classified failures written back. It imports nothing of
// toolgate's, so codecs can depend on it without seeing the catalog, the
// checks or the ladder.
package neutral

import "encoding/json"

// Kind is the type of a tool call as the API spells it.
type Kind uint8

// Call kinds. Only function calls are judged in full (docs/checks.md).
const (
	// Function calls name a function tool and carry JSON arguments.
	Function Kind = iota
	// Custom calls (OpenAI custom tools) carry free text; only the name is judged.
	Custom
	// Other calls (server tools, built-ins, MCP) pass untouched.
	Other
)

// ToolCall is one call in neutral form.
type ToolCall struct {
	ID   string
	Name string
	// Args is the argument JSON text exactly as the model produced it.
	Args []byte
	Kind Kind
	// BadShape is set by a codec when the call's arguments are not in the
	// wire shape the API defines (e.g. not a string where one is required).
	BadShape bool
}

// Offered is a function tool as a request declares it.
type Offered struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// ChoiceKind is the request's tool_choice, reduced to what narrows tools.
type ChoiceKind uint8

// Tool choices.
const (
	ChoiceAuto     ChoiceKind = iota // "auto", absent, or "required"/"any"
	ChoiceRequired                   // a call is required, any tool
	ChoiceNone                       // no tool may be called
	ChoiceNamed                      // exactly Names[0]
	ChoiceAllowed                    // one of Names
)

// ToolChoice is the request's tool_choice as it narrows the tools.
type ToolChoice struct {
	Kind  ChoiceKind
	Names []string
}
