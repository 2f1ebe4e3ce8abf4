package responses

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/openaiwire"
)

// DecodeRequest implements api.Codec. The path says nothing on this API.
func (c *codec) DecodeRequest(_ string, body []byte) (*neutral.Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	info := requestInfo{store: w.Store == nil || *w.Store, conversation: !jsonx.IsNull(w.Conversation)}
	hasPrev := !jsonx.IsNull(w.PreviousResponseID)
	info.chain = hasPrev && info.store && !info.conversation
	req := &neutral.Request{
		Body:             body,
		Model:            w.Model,
		Stream:           w.Stream,
		Offered:          offered(nil, w.Tools, true),
		StructuredOutput: structuredFormat(w.Text),
		HistoryUpstream:  hasPrev || info.conversation,
		Stateful:         info.conversation,
		StoresAnswers:    info.store,
		History:          &neutral.History{},
	}
	choice, err := parseToolChoice(w.ToolChoice)
	if err != nil {
		return nil, err
	}
	req.Choice = choice
	if err := readInput(w.Input, req); err != nil {
		return nil, err
	}
	c.body, c.info = body, info
	return req, nil
}

// offered appends the tools toolgate judges to out: function tools, and
// custom tools, which take free text and are judged by name only. A
// namespace groups such tools (tool search loads them on demand): its
// members are offered under their own names, which is what a call to one
// carries (its namespace comes in a field of its own). Namespaces hold
// tools, not other namespaces, so nested reads only the outer level's.
// defer_loading changes when the model sees a tool's schema, not whether
// it is offered.
func offered(out []neutral.Offered, tools []wireTool, nested bool) []neutral.Offered {
	for _, t := range tools {
		switch t.Type {
		case "function":
			out = append(out, neutral.Offered{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		case "custom":
			out = append(out, neutral.Offered{Name: t.Name, Description: t.Description})
		case "namespace":
			if nested {
				out = offered(out, t.Tools, false)
			}
		}
	}
	return out
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

// readInput reads the input items into req: the texts that vouch for
// provenance (what the user wrote and what tools returned, never assistant
// or instructions text), the last user text for shortlist ranking, the
// calls and outputs of the history, and the tools the input offers. Tools
// come in input as well as in tools: an additional_tools item adds them
// from its place in the conversation on (tool search with deferred tools,
// and clients that send every tool that way), and a tool_search_output
// item carries the tools a client-run search loaded. A call to any of them
// is a call to an offered tool.
func readInput(input json.RawMessage, req *neutral.Request) error {
	if jsonx.IsNull(input) {
		return nil
	}
	if s, ok := jsonx.Unquote(input); ok {
		req.Vouching, req.UserText = []string{s}, s
		return nil
	}
	var items []inputItem
	if err := json.Unmarshal(input, &items); err != nil {
		return err
	}
	h := req.History
	for _, it := range items {
		switch {
		case (it.Type == "" || it.Type == "message") && it.Role == "user":
			t := openaiwire.ContentText(it.Content)
			req.Vouching = append(req.Vouching, t)
			req.UserText = t
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			req.Vouching = append(req.Vouching, openaiwire.ContentText(it.Output))
			h.AddResult(it.CallID, openaiwire.ResultText(it.Output), false, it.Output)
		case it.Type == "function_call":
			// arguments is a JSON string holding the argument JSON.
			args, _ := jsonx.Unquote(it.Arguments)
			h.AddCall(it.CallID, it.Name, []byte(args))
		case it.Type == "custom_tool_call":
			text, _ := jsonx.Unquote(it.Input)
			h.AddCall(it.CallID, it.Name, []byte(text))
		case it.Type == "additional_tools" || it.Type == "tool_search_output":
			var tools []wireTool
			if !jsonx.IsNull(it.Tools) {
				if err := json.Unmarshal(it.Tools, &tools); err != nil {
					return err
				}
			}
			req.Offered = offered(req.Offered, tools, true)
		}
	}
	return nil
}

// parseToolChoice reduces tool_choice to what narrows the tools. Choices of
// built-in tools (file_search, web_search_preview, mcp, …) force a tool that
// toolgate does not judge, so they leave the function tools as offered.
func parseToolChoice(raw json.RawMessage) (neutral.ToolChoice, error) {
	if c, ok := openaiwire.SimpleToolChoice(raw); ok {
		return c, nil
	}
	var c struct {
		Type  string     `json:"type"`
		Name  string     `json:"name"`
		Tools []wireTool `json:"tools"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return neutral.ToolChoice{}, err
	}
	switch c.Type {
	case "function", "custom":
		return neutral.ToolChoice{Kind: neutral.ChoiceNamed, Names: []string{c.Name}}, nil
	case "allowed_tools":
		names := []string{}
		for _, t := range c.Tools {
			if t.Type == "function" || t.Type == "custom" {
				names = append(names, t.Name)
			}
		}
		return neutral.ToolChoice{Kind: neutral.ChoiceAllowed, Names: names}, nil
	}
	return neutral.ToolChoice{Kind: neutral.ChoiceAuto}, nil
}

// InjectTool implements api.Codec: the tool is appended last to the
// request's tools as a flat function tool, and the codec's request becomes
// the injected one, which re-queries then start from.
func (c *codec) InjectTool(t neutral.Offered) ([]byte, error) {
	if c.body == nil {
		return nil, errNoRequest
	}
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
	out, err := jsonx.AppendToField(c.body, "tools", tool.Bytes())
	if err != nil {
		return nil, err
	}
	c.body = out
	return out, nil
}
