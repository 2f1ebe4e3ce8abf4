package anthropic

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/jsonx"
)

type wireRequest struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	Tools        []wireTool      `json:"tools"`
	ToolChoice   json.RawMessage `json:"tool_choice"`
	OutputFormat json.RawMessage `json:"output_format"`
	OutputConfig *struct {
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
	Messages []wireMessage `json:"messages"`
}

type wireTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// isFunction reports a tool the client defines and runs itself: it has an
// input_schema and no Anthropic-defined type. Typed tools (bash_20250124,
// text_editor_…, web_search_…, code_execution_…, mcp_toolset…) have
// schemas toolgate does not know and are not judged (docs/checks.md).
func (t *wireTool) isFunction() bool {
	return !jsonx.IsNull(t.InputSchema) && (t.Type == "" || t.Type == "custom")
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// wirePart is one content block of a request message, read only for the
// text that can vouch for provenance.
type wirePart struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
	// Source is an object for documents but a plain string for search
	// results, so it is read only where it matters.
	Source json.RawMessage `json:"source"`
}

// historyPart is what the history reads of a content block: the calls of
// assistant turns and the results of user turns.
type historyPart struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type wireResponse struct {
	ID string `json:"id"`
	// Content is read block by block, so a block type added later, whatever
	// its fields, never makes the answer unreadable.
	Content    []json.RawMessage `json:"content"`
	StopReason string            `json:"stop_reason"`
	Usage      *wireUsage        `json:"usage"`
}

type wireUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

type wireBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Text  string          `json:"text"`
	Input json.RawMessage `json:"input"`
}

// content is an assistant turn's content array as JSON, replayed as is in a
// re-query: the upstream's own bytes for a plain answer, a rebuilt array for
// a stream.
type content []byte
