// Package responses adapts the OpenAI Responses API (POST /v1/responses) to
// toolgate's neutral pipeline: it reads requests and answers, writes
// re-queries in the shapes the provider accepts (a stateless replay of the
// output items, or a chain on the bad response's id when the conversation is
// stored upstream), and renders the client's answer by splicing only what
// changed into the upstream's own bytes.
package responses

import (
	"encoding/json"
	"errors"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/validate"
)

// Adapter is the Responses adapter. It is stateless and shared.
type Adapter struct{}

var (
	_ api.Adapter      = Adapter{}
	_ api.ToolInjector = Adapter{}
)

// Name implements api.Adapter.
func (Adapter) Name() string { return "responses" }

// ErrShape reports an answer that is JSON but not a Responses object.
var ErrShape = errors.New("responses: the answer is not a response object")

// errForeignTurn reports a turn that this adapter did not build.
var errForeignTurn = errors.New("responses: turn from another adapter")

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
}

// requestInfo is the adapter's private view of a request.
type requestInfo struct {
	// store is the request's store flag; the API stores by default.
	store bool
	// chain is set when re-queries continue the stored conversation by
	// previous_response_id instead of replaying it.
	chain bool
	// conversation is set when the request names a conversation object.
	conversation bool
}

// ParseRequest implements api.Adapter.
func (Adapter) ParseRequest(body []byte) (*api.Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	info := &requestInfo{store: w.Store == nil || *w.Store, conversation: !jsonx.IsNull(w.Conversation)}
	hasPrev := !jsonx.IsNull(w.PreviousResponseID)
	info.chain = hasPrev && info.store && !info.conversation
	req := &api.Request{
		Body:             body,
		Model:            w.Model,
		Stream:           w.Stream,
		StructuredOutput: structuredFormat(w.Text),
		HistoryUpstream:  hasPrev || info.conversation,
		Stateful:         info.conversation,
		Private:          info,
	}
	for _, t := range w.Tools {
		switch t.Type {
		case "function":
			req.Offered = append(req.Offered, catalog.Offered{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		case "custom":
			// Custom tools take free text: judged by name only.
			req.Offered = append(req.Offered, catalog.Offered{Name: t.Name, Description: t.Description})
		}
	}
	choice, err := parseToolChoice(w.ToolChoice)
	if err != nil {
		return nil, err
	}
	req.Choice = choice
	req.History = &validate.History{}
	texts, last, err := evidenceTexts(w.Input, req.History)
	if err != nil {
		return nil, err
	}
	req.UserText = last
	req.Evidence = validate.NewCorpus(texts)
	return req, nil
}

// structuredFormat reports a text.format that asks for JSON output.
func structuredFormat(text json.RawMessage) bool {
	var t struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	}
	if jsonx.IsNull(text) || json.Unmarshal(text, &t) != nil || t.Format == nil {
		return false
	}
	return t.Format.Type == "json_schema" || t.Format.Type == "json_object"
}

// evidenceTexts collects the texts that vouch for provenance: what the user
// wrote and what tools returned, never assistant or instructions text. last
// is the last user text, for shortlist ranking. The items' calls and
// outputs go into h.
func evidenceTexts(input json.RawMessage, h *validate.History) (texts []string, last string, err error) {
	if jsonx.IsNull(input) {
		return nil, "", nil
	}
	if s, ok := jsonx.Unquote(input); ok {
		return []string{s}, s, nil
	}
	var items []inputItem
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, "", err
	}
	for _, it := range items {
		switch {
		case (it.Type == "" || it.Type == "message") && it.Role == "user":
			t := openaichat.ContentText(it.Content)
			texts = append(texts, t)
			last = t
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			texts = append(texts, openaichat.ContentText(it.Output))
			h.AddResult(it.CallID, openaichat.ResultText(it.Output), false)
		case it.Type == "function_call":
			// arguments is a JSON string holding the argument JSON.
			args, _ := jsonx.Unquote(it.Arguments)
			h.AddCall(it.CallID, it.Name, []byte(args))
		case it.Type == "custom_tool_call":
			text, _ := jsonx.Unquote(it.Input)
			h.AddCall(it.CallID, it.Name, []byte(text))
		}
	}
	return texts, last, nil
}

// parseToolChoice reduces tool_choice to what narrows the catalog. Choices of
// built-in tools (file_search, web_search_preview, mcp, …) force a tool that
// toolgate does not judge, so they leave the function tools as offered.
func parseToolChoice(raw json.RawMessage) (catalog.ToolChoice, error) {
	if c, ok := openaichat.SimpleToolChoice(raw); ok {
		return c, nil
	}
	var c struct {
		Type  string     `json:"type"`
		Name  string     `json:"name"`
		Tools []wireTool `json:"tools"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return catalog.ToolChoice{}, err
	}
	switch c.Type {
	case "function", "custom":
		return catalog.ToolChoice{Kind: catalog.ChoiceNamed, Names: []string{c.Name}}, nil
	case "allowed_tools":
		names := []string{}
		for _, t := range c.Tools {
			if t.Type == "function" || t.Type == "custom" {
				names = append(names, t.Name)
			}
		}
		return catalog.ToolChoice{Kind: catalog.ChoiceAllowed, Names: names}, nil
	}
	return catalog.ToolChoice{Kind: catalog.ChoiceAuto}, nil
}

// infoOf returns the adapter's view of req, reading the body again when the
// request came from elsewhere.
func infoOf(req *api.Request) (*requestInfo, error) {
	if req == nil {
		return nil, errors.New("responses: no request")
	}
	if info, ok := req.Private.(*requestInfo); ok && info != nil {
		return info, nil
	}
	r, err := Adapter{}.ParseRequest(req.Body)
	if err != nil {
		return nil, err
	}
	return r.Private.(*requestInfo), nil
}

// InjectTool implements api.ToolInjector: the tool is appended last to the
// request's tools as a flat function tool.
func (Adapter) InjectTool(req *api.Request, t catalog.Offered) ([]byte, error) {
	params := []byte(t.Parameters)
	if len(params) == 0 {
		params = []byte(`{"type":"object","properties":{}}`)
	}
	tool := jsonx.Object{
		{Key: "type", Value: []byte(`"function"`)},
		{Key: "name", Value: jsonx.String(t.Name)},
		{Key: "description", Value: jsonx.String(t.Description)},
		{Key: "parameters", Value: params},
		// The API makes function tools strict by default; toolgate checks
		// the arguments itself, so it asks for nothing stricter than the
		// client's own tools get.
		{Key: "strict", Value: []byte("false")},
	}
	return jsonx.AppendToField(req.Body, "tools", tool.Bytes())
}

// CallJSON implements api.Adapter: a function_call item (custom_tool_call
// for custom tools), the shape the client would have received.
func (Adapter) CallJSON(c validate.ToolCall) []byte {
	if c.Kind == validate.Custom {
		return jsonx.Object{
			{Key: "type", Value: []byte(`"custom_tool_call"`)},
			{Key: "call_id", Value: jsonx.String(c.ID)},
			{Key: "name", Value: jsonx.String(c.Name)},
			{Key: "input", Value: jsonx.String(string(c.Args))},
		}.Bytes()
	}
	return jsonx.Object{
		{Key: "type", Value: []byte(`"function_call"`)},
		{Key: "call_id", Value: jsonx.String(c.ID)},
		{Key: "name", Value: jsonx.String(c.Name)},
		{Key: "arguments", Value: jsonx.String(string(c.Args))},
	}.Bytes()
}
