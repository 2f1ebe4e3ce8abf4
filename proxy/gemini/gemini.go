// Package gemini adapts the Google Gemini API (models/{model}:generateContent
// and :streamGenerateContent, under /v1beta/ and /v1/, and Vertex AI paths
// mapped to it) to toolgate's neutral pipeline: it reads requests and
// answers, writes re-queries in the shape the API accepts, and renders the
// client's answer by splicing only what changed into the upstream's bytes.
//
// Only functionCall parts become calls, judged against the request's
// functionDeclarations (OpenAPI-style `parameters` translated to the JSON
// Schema they mean, or `parametersJsonSchema` as is). Built-in tools
// (googleSearch, codeExecution, urlContext…) and their parts need no answer
// from the client and are never judged.
package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/geminischema"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/validate"
)

// Adapter is the Gemini adapter. It is stateless and shared.
type Adapter struct{}

var (
	_ api.Adapter      = Adapter{}
	_ api.RouteReader  = Adapter{}
	_ api.ToolInjector = Adapter{}
)

// ErrShape reports JSON that is not in the shape of the Gemini API.
var ErrShape = errors.New("gemini: not a Gemini API object")

// errFolded reports a key that differs from a Gemini key only by letter
// case: Go's decoder would read it as the key while a JavaScript client
// would not, so what toolgate judged and what the agent runs could differ.
var errFolded = errors.New("gemini: a key differs from a Gemini API key only in letter case")

// keys are the Gemini keys that carry calls, text and their framing.
var keys = jsonx.NewKeyFold(
	"candidates", "content", "parts", "functionCall", "name", "args", "id", "text", "thought",
	"thoughtSignature", "finishReason", "usageMetadata", "promptTokenCount", "candidatesTokenCount",
	"thoughtsTokenCount", "toolUsePromptTokenCount", "index", "role", "error", "promptFeedback",
	"responseId",
)

// FoldedKey implements api.KeyChecker: keys are checked at every level
// toolgate reads (the response, its usage, candidates, contents, parts and
// functionCall objects), never inside args, whose keys are the function's
// parameters and judged by its schema.
func (Adapter) FoldedKey(data []byte) bool {
	obj, err := jsonx.ParseObject(data)
	if err != nil {
		// Not an object: the parser refuses it.
		return false
	}
	if folded(obj) || folded(object(obj.Get("usageMetadata"))) {
		return true
	}
	cands, _ := array(obj.Get("candidates"))
	for _, raw := range cands {
		c := object(raw)
		content := object(c.Get("content"))
		if folded(c) || folded(content) {
			return true
		}
		parts, _ := array(content.Get("parts"))
		for _, p := range parts {
			po := object(p)
			if folded(po) || folded(object(po.Get("functionCall"))) {
				return true
			}
		}
	}
	return false
}

var _ api.KeyChecker = Adapter{}

// folded reports a key of o that folds onto a Gemini key.
func folded(o jsonx.Object) bool {
	for _, f := range o {
		if keys.Folds(f.Key) {
			return true
		}
	}
	return false
}

// object is raw as an object, or none when it is not one.
func object(raw []byte) jsonx.Object {
	o, err := jsonx.ParseObject(raw)
	if err != nil {
		return nil
	}
	return o
}

// Name implements api.Adapter.
func (Adapter) Name() string { return "gemini" }

// Verbs of the two routes; the model is named in the segment before them.
const (
	verbPlain  = ":generateContent"
	verbStream = ":streamGenerateContent"
)

type wireRequest struct {
	Contents         []wireContent `json:"contents"`
	Tools            []wireTool    `json:"tools"`
	ToolConfig       *wireToolConf `json:"toolConfig"`
	GenerationConfig *struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
	CachedContent string `json:"cachedContent"`
}

type wireToolConf struct {
	FunctionCallingConfig *struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames"`
	} `json:"functionCallingConfig"`
}

type wireTool struct {
	FunctionDeclarations []wireDecl `json:"functionDeclarations"`
}

type wireDecl struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
}

type wireContent struct {
	Role  string     `json:"role"`
	Parts []wirePart `json:"parts"`
}

// wirePart is one part of a request turn, read for the text that can vouch
// for provenance and for the calls and responses of the history.
type wirePart struct {
	Text         *string `json:"text"`
	Thought      bool    `json:"thought"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// request is the adapter's private view of a parsed request.
type request struct {
	stream bool
}

// ParseRequest implements api.Adapter. Without the path the model and the
// streaming verb are unknown; the pipeline calls ParseRequestAt.
func (a Adapter) ParseRequest(body []byte) (*api.Request, error) {
	return a.ParseRequestAt("", body)
}

// ParseRequestAt implements api.RouteReader: the path names the model
// (…/models/{model}:verb) and whether the answer is streamed.
func (Adapter) ParseRequestAt(path string, body []byte) (*api.Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	if bytes.TrimSpace(body)[0] != '{' {
		return nil, ErrShape
	}
	model, stream := route(path)
	req := &api.Request{Body: body, Model: model, Stream: stream, Private: &request{stream: stream},
		HistoryUpstream: w.CachedContent != ""}
	if g := w.GenerationConfig; g != nil {
		req.StructuredOutput = g.ResponseMimeType == "application/json" || !jsonx.IsNull(g.ResponseSchema) || !jsonx.IsNull(g.ResponseJSONSchema)
	}
	req.Offered = offeredTools(w.Tools)
	req.Choice = toolChoice(w.ToolConfig)
	req.History = history(w.Contents)
	var evidence []string
	for _, c := range w.Contents {
		if c.Role == "model" {
			// The model's own words never vouch for a value.
			continue
		}
		own, results := userText(c.Parts)
		evidence = append(evidence, own)
		evidence = append(evidence, results...)
		if own != "" {
			req.UserText = own
		}
	}
	req.Evidence = validate.NewCorpus(evidence)
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
func history(contents []wireContent) *validate.History {
	h := &validate.History{}
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
				h.AddResult(callKey(f.ID, f.Name, turn, seen[f.Name]), string(f.Response), isErrorResponse(f.Response))
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
// declaration without either takes no arguments. A schema that cannot be
// translated is offered as written: it then fails to compile, and calls of
// that function are findings instead of passing unjudged.
func offeredTools(tools []wireTool) []catalog.Offered {
	var out []catalog.Offered
	for _, t := range tools {
		for _, d := range t.FunctionDeclarations {
			params, err := geminischema.Declaration(d.Parameters, d.ParametersJSONSchema)
			if err != nil {
				params = d.Parameters
			}
			out = append(out, catalog.Offered{Name: d.Name, Description: d.Description, Parameters: params})
		}
	}
	return out
}

// toolChoice reads functionCallingConfig. ANY requires a call; VALIDATED
// leaves the model free like AUTO; allowedFunctionNames narrows either.
func toolChoice(tc *wireToolConf) catalog.ToolChoice {
	if tc == nil || tc.FunctionCallingConfig == nil {
		return catalog.ToolChoice{Kind: catalog.ChoiceAuto}
	}
	fc := tc.FunctionCallingConfig
	switch strings.ToUpper(fc.Mode) {
	case "NONE":
		return catalog.ToolChoice{Kind: catalog.ChoiceNone}
	case "ANY":
		if len(fc.AllowedFunctionNames) > 0 {
			return catalog.ToolChoice{Kind: catalog.ChoiceAllowed, Names: fc.AllowedFunctionNames}
		}
		return catalog.ToolChoice{Kind: catalog.ChoiceRequired}
	}
	if len(fc.AllowedFunctionNames) > 0 {
		return catalog.ToolChoice{Kind: catalog.ChoiceAllowed, Names: fc.AllowedFunctionNames}
	}
	return catalog.ToolChoice{Kind: catalog.ChoiceAuto}
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
