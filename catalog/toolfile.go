package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/geminischema"
	"github.com/toolgate/toolgate/internal/yamljson"
)

// readToolFile reads a tool file from path; label is the name the config
// gave it, used in origins and messages.
func readToolFile(path, label string) ([]ToolConfig, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parseToolFile(data, label)
}

// fileTool is the union of the tool shapes the model APIs use, so one decode
// reads any of them:
//
//	OpenAI Chat:      {"type":"function","function":{"name","description","parameters"}}
//	OpenAI Responses: {"type":"function","name","description","parameters"}
//	Anthropic:        {"name","description","input_schema"}
//	Gemini:           {"functionDeclarations":[{"name","description","parameters" | "parametersJsonSchema"}]}
//
// Other fields (strict, cache_control…) are ignored: the file is usually a
// copy of what an agent already sends.
type fileTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	InputSchema json.RawMessage `json:"input_schema"`
	Function    *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// parseToolFile reads a JSON or YAML tool list, bare or as the "tools" of
// an object (so a captured request body works as is). Entries of other tool
// types (web search, custom, server tools) are skipped: only function tools
// are judged.
func parseToolFile(data []byte, label string) ([]ToolConfig, error) {
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		var n yaml.Node
		if err := yaml.Unmarshal(data, &n); err != nil {
			return nil, fmt.Errorf("%s is neither JSON nor YAML: %v", label, err)
		}
		j, err := yamljson.Convert(&n)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", label, err)
		}
		data = j
	}
	var items []json.RawMessage
	switch {
	case len(data) > 0 && data[0] == '[':
		if err := json.Unmarshal(data, &items); err != nil {
			return nil, fmt.Errorf("%s: %v", label, err)
		}
	case len(data) > 0 && data[0] == '{':
		var obj struct {
			Tools *[]json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			return nil, fmt.Errorf("%s: %v", label, err)
		}
		if obj.Tools == nil {
			return nil, fmt.Errorf("%s: expected a list of tools or an object with a \"tools\" list", label)
		}
		items = *obj.Tools
	default:
		return nil, fmt.Errorf("%s: expected a list of tools or an object with a \"tools\" list", label)
	}

	var out []ToolConfig
	for i, raw := range items {
		origin := fmt.Sprintf("%s[%d]", label, i)
		if decls, ok, err := geminiTools(raw, origin); ok || err != nil {
			if err != nil {
				return nil, err
			}
			out = append(out, decls...)
			continue
		}
		t, ok, err := decodeFileTool(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", origin, err)
		}
		if !ok {
			continue
		}
		t.Origin = origin
		out = append(out, t)
	}
	return out, nil
}

var errNotATool = errors.New("not a tool in OpenAI Chat, OpenAI Responses, Anthropic or Gemini format")

// decodeFileTool reads one entry; ok is false for a tool of another type.
func decodeFileTool(raw json.RawMessage) (t ToolConfig, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return t, false, errNotATool
	}
	var ft fileTool
	if err := json.Unmarshal(raw, &ft); err != nil {
		return t, false, err
	}
	switch {
	case ft.Function != nil:
		if ft.Type != "" && ft.Type != "function" {
			return t, false, fmt.Errorf("has a \"function\" but type %q", ft.Type)
		}
		t = ToolConfig{Name: ft.Function.Name, Description: ft.Function.Description, Parameters: JSONValue(ft.Function.Parameters)}
	case ft.Type == "function":
		t = ToolConfig{Name: ft.Name, Description: ft.Description, Parameters: JSONValue(ft.Parameters)}
	case len(ft.InputSchema) > 0 && (ft.Type == "" || ft.Type == "custom"):
		// Anthropic client tools may carry type "custom"; OpenAI's custom
		// tools have no input_schema and are skipped below.
		t = ToolConfig{Name: ft.Name, Description: ft.Description, Parameters: JSONValue(ft.InputSchema)}
	case ft.Type != "":
		return t, false, nil
	case ft.Name != "":
		// toolgate's own shape, as in config.yaml: name, description and
		// an optional parameters schema.
		t = ToolConfig{Name: ft.Name, Description: ft.Description, Parameters: JSONValue(ft.Parameters)}
	default:
		return t, false, errNotATool
	}
	if t.Name == "" {
		return t, false, errors.New("tool has no name")
	}
	return t, true, nil
}

// geminiBuiltins are the keys of Gemini's built-in tools, which hold no
// function toolgate judges.
var geminiBuiltins = map[string]bool{
	"googleSearch": true, "googleSearchRetrieval": true, "codeExecution": true, "urlContext": true,
	"retrieval": true, "fileSearch": true, "googleMaps": true, "computerUse": true, "enterpriseWebSearch": true,
}

// geminiDecl is one function declaration of a Gemini tool file. Google's
// parsers take each field under its JSON name or its proto name, and tool
// lists written from the Python SDK use the latter, so both are read; one
// declaration holding both spellings of a field is refused.
type geminiDecl struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
	ParametersSnake      json.RawMessage `json:"parameters_json_schema"`
}

// geminiTools reads a Gemini tool entry, whose functionDeclarations (or
// function_declarations) hold any number of functions. ok is false for an
// entry of another shape; a Gemini tool without declarations (googleSearch,
// code_execution…) is read and holds none. OpenAPI-style parameters become
// the JSON Schema they mean; parametersJsonSchema is taken as is.
func geminiTools(raw json.RawMessage, origin string) (out []ToolConfig, ok bool, err error) {
	var gt struct {
		FunctionDeclarations *[]geminiDecl `json:"functionDeclarations"`
		Snake                *[]geminiDecl `json:"function_declarations"`
	}
	if json.Unmarshal(raw, &gt) != nil {
		return nil, false, nil
	}
	if gt.FunctionDeclarations != nil && gt.Snake != nil {
		return nil, true, fmt.Errorf("%s: both functionDeclarations and function_declarations", origin)
	}
	if gt.FunctionDeclarations == nil {
		gt.FunctionDeclarations = gt.Snake
	}
	if gt.FunctionDeclarations == nil {
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(raw, &keys)
		for k := range keys {
			if geminiBuiltins[camelKey(k)] {
				return nil, true, nil
			}
		}
		return nil, false, nil
	}
	for j, d := range *gt.FunctionDeclarations {
		at := fmt.Sprintf("%s.functionDeclarations[%d]", origin, j)
		if d.Name == "" {
			return nil, true, fmt.Errorf("%s: tool has no name", at)
		}
		if d.ParametersJSONSchema != nil && d.ParametersSnake != nil {
			return nil, true, fmt.Errorf("%s: both parametersJsonSchema and parameters_json_schema", at)
		}
		if d.ParametersJSONSchema == nil {
			d.ParametersJSONSchema = d.ParametersSnake
		}
		params, err := geminischema.Declaration(d.Parameters, d.ParametersJSONSchema)
		if err != nil {
			return nil, true, fmt.Errorf("%s: parameters: %v", at, err)
		}
		out = append(out, ToolConfig{Name: d.Name, Description: d.Description, Parameters: JSONValue(params), Origin: at})
	}
	return out, true, nil
}

// camelKey is the JSON name of a proto field name (code_execution is
// codeExecution); a name without an underscore is its own.
func camelKey(k string) string {
	if !strings.Contains(k, "_") {
		return k
	}
	parts := strings.Split(k, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}
