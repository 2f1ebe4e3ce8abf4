package gemini

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/geminischema"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// DecodeRequest implements api.Codec: the path names the model
// (…/models/{model}:verb) and whether the answer is streamed.
func (c *codec) DecodeRequest(path string, body []byte) (*neutral.Request, error) {
	// The path says how the answer is framed even when the body cannot be
	// read: such a request is still forwarded, and its answer followed.
	c.body, c.path = body, path
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	if bytes.TrimSpace(body)[0] != '{' {
		return nil, ErrShape
	}
	model, stream := route(path)
	req := &neutral.Request{Body: body, Model: model, Stream: stream, HistoryUpstream: w.CachedContent != ""}
	if g := w.GenerationConfig; g != nil {
		req.StructuredOutput = g.ResponseMimeType == "application/json" || !jsonx.IsNull(g.ResponseSchema) || !jsonx.IsNull(g.ResponseJSONSchema)
	}
	req.Offered = offeredTools(w.Tools)
	req.Choice = toolChoice(w.ToolConfig)
	req.History = history(w.Contents)
	for _, t := range w.Contents {
		if t.Role == "model" {
			// The model's own words never vouch for a value.
			continue
		}
		req.AddUserTurn(userText(t.Parts))
	}
	return req, nil
}

// history records the conversation's function calls and their responses.
// A call carries an id only when the model sent one; Gemini itself pairs a
// functionResponse with the calls of the model turn before it by name, in
// order. So a call without an id is keyed by its model turn, its name and
// its place among that turn's calls of that name ("get_order#3.1": turn 3,
// the first get_order), and each response without an id takes the same
// key from the last model turn. A response whose object holds "error" and
// no "output" is an error result, as the API documents those keys.
func history(contents []wireContent) *neutral.History {
	h := &neutral.History{}
	turn := -1
	for i, c := range contents {
		seen := map[string]int{}
		if c.Role == "model" {
			turn = i
		}
		for _, p := range c.Parts {
			switch {
			case c.Role == "model" && p.FunctionCall != nil:
				f := p.FunctionCall
				seen[f.Name]++
				args := f.Args
				if len(args) == 0 || jsonx.IsNull(args) {
					args = json.RawMessage("{}")
				}
				h.AddCall(callKey(f.ID, f.Name, turn, seen[f.Name]), f.Name, args)
			case c.Role != "model" && p.FunctionResponse != nil && turn >= 0:
				f := p.FunctionResponse
				seen[f.Name]++
				h.AddResult(callKey(f.ID, f.Name, turn, seen[f.Name]), string(f.Response), isErrorResponse(f.Response), f.Response)
			}
		}
	}
	return h
}

func callKey(id, name string, turn, n int) string {
	if id != "" {
		return id
	}
	return name + "#" + strconv.Itoa(turn) + "." + strconv.Itoa(n)
}

func isErrorResponse(resp json.RawMessage) bool {
	var keys struct {
		Output json.RawMessage `json:"output"`
		Error  json.RawMessage `json:"error"`
	}
	return json.Unmarshal(resp, &keys) == nil && keys.Error != nil && keys.Output == nil
}

// route reads the model and the verb from a request path.
func route(path string) (model string, stream bool) {
	seg := path[strings.LastIndexByte(path, '/')+1:]
	if name, ok := strings.CutSuffix(seg, verbStream); ok {
		return name, true
	}
	name, _ := strings.CutSuffix(seg, verbPlain)
	return name, false
}

// offeredTools reads the function declarations. A declaration's schema is
// parametersJsonSchema as is, or parameters translated to JSON Schema; a
// declaration without either takes no arguments. Every form the API
// accepts translates; a schema that cannot be translated (one the API
// would refuse) is offered as written, and then fails to compile.
func offeredTools(tools []wireTool) []neutral.Offered {
	var out []neutral.Offered
	for _, t := range tools {
		for _, d := range t.FunctionDeclarations {
			params, err := geminischema.Declaration(d.Parameters, d.ParametersJSONSchema)
			if err != nil {
				params = d.Parameters
			}
			out = append(out, neutral.Offered{Name: d.Name, Description: d.Description, Parameters: params})
		}
	}
	return out
}

// toolChoice reads functionCallingConfig. ANY requires a call; VALIDATED
// leaves the model free like AUTO; allowedFunctionNames narrows either.
func toolChoice(tc *wireToolConf) neutral.ToolChoice {
	if tc == nil || tc.FunctionCallingConfig == nil {
		return neutral.ToolChoice{Kind: neutral.ChoiceAuto}
	}
	fc := tc.FunctionCallingConfig
	switch enumName(fc.Mode, modes) {
	case "NONE":
		return neutral.ToolChoice{Kind: neutral.ChoiceNone}
	case "ANY":
		if len(fc.AllowedFunctionNames) > 0 {
			return neutral.ToolChoice{Kind: neutral.ChoiceAllowed, Names: fc.AllowedFunctionNames}
		}
		return neutral.ToolChoice{Kind: neutral.ChoiceRequired}
	}
	if len(fc.AllowedFunctionNames) > 0 {
		return neutral.ToolChoice{Kind: neutral.ChoiceAllowed, Names: fc.AllowedFunctionNames}
	}
	return neutral.ToolChoice{Kind: neutral.ChoiceAuto}
}

// modes are functionCallingConfig.mode's names by number.
var modes = []string{"MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"}

// enumName reads a proto enum as proto JSON writes it: its name (read in
// any letter case, as toolgate always read the mode) or its number, which
// names[n] is the name of. A number beyond names is kept as its digits.
func enumName(raw []byte, names []string) string {
	if s, ok := jsonx.Unquote(raw); ok {
		return strings.ToUpper(s)
	}
	n, ok := jsonx.Int(raw)
	if !ok {
		return ""
	}
	if n >= 0 && n < int64(len(names)) {
		return names[n]
	}
	return strconv.FormatInt(n, 10)
}

// userText splits a user turn into the text the user wrote and the
// responses of the functions the client ran.
func userText(parts []wirePart) (own string, results []string) {
	var b []byte
	for _, p := range parts {
		switch {
		case p.FunctionResponse != nil:
			results = append(results, string(p.FunctionResponse.Response))
		case p.Text != nil && !p.Thought:
			b = append(b, *p.Text...)
			b = append(b, '\n')
		}
	}
	return string(b), results
}
