package gemini

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// The request types are read under either spelling of each field (see
// keys.go): each one's UnmarshalJSON renames its own keys and decodes into
// a plain copy of itself.

type wireRequest struct {
	Contents         []wireContent `json:"contents"`
	Tools            []wireTool    `json:"tools"`
	ToolConfig       *wireToolConf `json:"toolConfig"`
	GenerationConfig *wireGenConf  `json:"generationConfig"`
	CachedContent    string        `json:"cachedContent"`
}

func (w *wireRequest) UnmarshalJSON(b []byte) error {
	type plain wireRequest
	return readEither(b, (*plain)(w))
}

type wireGenConf struct {
	ResponseMimeType   string          `json:"responseMimeType"`
	ResponseSchema     json.RawMessage `json:"responseSchema"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
}

func (w *wireGenConf) UnmarshalJSON(b []byte) error {
	type plain wireGenConf
	return readEither(b, (*plain)(w))
}

type wireToolConf struct {
	FunctionCallingConfig *wireCallConf `json:"functionCallingConfig"`
}

func (w *wireToolConf) UnmarshalJSON(b []byte) error {
	type plain wireToolConf
	return readEither(b, (*plain)(w))
}

// wireCallConf is functionCallingConfig; mode is its enum's name or
// number.
type wireCallConf struct {
	Mode                 json.RawMessage `json:"mode"`
	AllowedFunctionNames []string        `json:"allowedFunctionNames"`
}

func (w *wireCallConf) UnmarshalJSON(b []byte) error {
	type plain wireCallConf
	return readEither(b, (*plain)(w))
}

type wireTool struct {
	FunctionDeclarations []wireDecl `json:"functionDeclarations"`
}

func (w *wireTool) UnmarshalJSON(b []byte) error {
	type plain wireTool
	return readEither(b, (*plain)(w))
}

type wireDecl struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

func (w *wireDecl) UnmarshalJSON(b []byte) error {
	type plain wireDecl
	return readEither(b, (*plain)(w))
}

type wireContent struct {
	Role  string     `json:"role"`
	Parts []wirePart `json:"parts"`
}

// wirePart is one part of a request turn, read for the text that can vouch
// for provenance and for the calls and responses of the history.
type wirePart struct {
	Text             *string       `json:"text"`
	Thought          bool          `json:"thought"`
	FunctionCall     *wireCall     `json:"functionCall"`
	FunctionResponse *wireResponse `json:"functionResponse"`
}

func (w *wirePart) UnmarshalJSON(b []byte) error {
	type plain wirePart
	return readEither(b, (*plain)(w))
}

type wireCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type wireResponse struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// wireUsage is usageMetadata, of an answer.
type wireUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
}

func (w *wireUsage) UnmarshalJSON(b []byte) error {
	type plain wireUsage
	return readEither(b, (*plain)(w))
}

// readEither is unmarshalEitherSpelling for a value that may be null.
func readEither(b []byte, v any) error {
	if jsonx.IsNull(b) {
		return nil
	}
	return unmarshalEitherSpelling(b, v)
}
