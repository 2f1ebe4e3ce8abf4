package openaichat

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
)

// ErrShape reports an answer that is JSON but not a chat completion.
var ErrShape = errors.New("openaichat: the answer is not a chat completion")

// ErrStream reports a chunk that cannot be read.
var ErrStream = errors.New("openaichat: unreadable stream chunk")

// ErrTwoForms reports a message, or a request, that uses both the current
// form (tools, tool_calls) and the legacy one (functions, function_call):
// the two disagree on what was offered and called, so it cannot be judged
// as either and is refused rather than passed.
var ErrTwoForms = fmt.Errorf("openaichat: tools or tool_calls beside the legacy functions or function_call: %w", api.ErrTwoForms)

// errStreamTwoForms is ErrTwoForms met in a stream's chunk.
var errStreamTwoForms = fmt.Errorf("%w: %w", ErrStream, ErrTwoForms)

// legacyCallID is the id of a legacy call (function_call), which has none
// on the wire: the pipeline keys its bookkeeping by call id, and the
// codec never writes this one out.
const legacyCallID = "function_call"

// wireTool is one entry of a request's tools, as allowed_tools lists them.
type wireTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
	Custom *struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"custom"`
}

// wireCall is one tool call of a message, in a request or an answer.
type wireCall struct {
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function *wireFunction `json:"function"`
	Custom   *wireCustom   `json:"custom"`
}

type wireFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// decoded holds Arguments decoded, when read from a tape that has
	// checked them (decodedOK).
	decoded   []byte
	decodedOK bool
}

type wireCustom struct {
	Name string `json:"name"`
}

// chunk is a chat.completion.chunk as the full stream decoder reads it.
type chunk struct {
	ID      string        `json:"id"`
	Choices []chunkChoice `json:"choices"`
	Usage   *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type chunkChoice struct {
	Index int `json:"index"`
	Delta struct {
		Content          *string     `json:"content"`
		Refusal          *string     `json:"refusal"`
		ReasoningContent *string     `json:"reasoning_content"`
		ToolCalls        []deltaCall `json:"tool_calls"`
		FunctionCall     *struct {
			Name      *string         `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function_call"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type deltaCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
	Custom *struct {
		Name  *string `json:"name"`
		Input *string `json:"input"`
	} `json:"custom"`
}

// errField reports a request field of the wrong type.
func errField(name string) error {
	return fmt.Errorf("openaichat: request field %s has the wrong type", name)
}

// optString reads an optional string: absent or null is "".
func optString(raw []byte) (string, error) {
	if jsonx.IsNull(raw) {
		return "", nil
	}
	s, ok := jsonx.Unquote(raw)
	if !ok {
		return "", errField("of a string")
	}
	return s, nil
}
