package responses

import "encoding/json"

// Output item types that carry a call toolgate judges.
const (
	typeFunctionCall = "function_call"
	typeCustomCall   = "custom_tool_call"
)

// isCallType reports an output item type whose calls are judged.
func isCallType(t string) bool { return t == typeFunctionCall || t == typeCustomCall }

// wireRequest is what toolgate reads of a request.
type wireRequest struct {
	Model              string          `json:"model"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	Tools              []wireTool      `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Text               json.RawMessage `json:"text"`
	Input              json.RawMessage `json:"input"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
}

// wireTool is one entry of tools. Responses function tools are flat (no
// nested "function" object); built-in tools only have a type here.
type wireTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Tools are a namespace's members.
	Tools []wireTool `json:"tools"`
}

// inputItem is what toolgate reads of one input item. Only user messages and
// tool outputs vouch for provenance.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
	// The fields below are read for the history: calls and their outputs,
	// paired by call_id.
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	// Tools are what an additional_tools or tool_search_output item
	// offers; read only for those, since other items (mcp_list_tools) have
	// a tools field of their own.
	Tools json.RawMessage `json:"tools"`
}

// wireItem is what toolgate reads of one output item.
type wireItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// wireHead is the part of a response object outside its output.
type wireHead struct {
	ID                string `json:"id"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Usage *wireUsage `json:"usage"`
}

// wireUsage is a response's token counts.
type wireUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}
