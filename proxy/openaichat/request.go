package openaichat

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/openaiwire"
)

// DecodeRequest implements api.Codec. The request is split with jsonx,
// which checks the grammar in the same pass, instead of being decoded by
// reflection: it runs before the upstream call, so its cost is added to
// the time to the first byte of every answer. Keys are matched as written,
// as the provider matches them. A field of the wrong type makes the
// request unreadable, as a struct decoder would. Only the top level is
// checked against the grammar; the values inside it are then split with
// jsonx.Split*, which does not check the same bytes again.
func (c *codec) DecodeRequest(_ string, body []byte) (*neutral.Request, error) {
	top, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	c.req = neutral.Request{Body: body}
	req := &c.req
	if req.Model, err = optString(top.Get("model")); err != nil {
		return nil, err
	}
	switch v := string(top.Get("stream")); v {
	case "", "null", "false":
	case "true":
		req.Stream = true
	default:
		return nil, errField("stream")
	}
	if rf := top.Get("response_format"); !jsonx.IsNull(rf) {
		req.StructuredOutput = !isTextFormat(rf)
	}
	if req.Offered, err = offered(top.Get("tools")); err != nil {
		return nil, err
	}
	if req.Choice, err = parseToolChoice(top.Get("tool_choice")); err != nil {
		return nil, err
	}
	req.History = &neutral.History{}
	if err := readMessages(req, top.Get("messages")); err != nil {
		return nil, err
	}
	return req, nil
}

// readMessages records the conversation's calls and results in
// req.History and keeps what the user and the tools wrote: those texts
// may vouch for identifiers, what the assistant said may not.
func readMessages(req *neutral.Request, raw []byte) error {
	if jsonx.IsNull(raw) {
		return nil
	}
	msgs, err := jsonx.SplitArray(raw)
	if err != nil {
		return errField("messages")
	}
	for _, m := range msgs {
		obj, err := jsonx.SplitObject(m)
		if err != nil {
			return errField("messages")
		}
		role, err := optString(obj.Get("role"))
		if err != nil {
			return err
		}
		if err := recordHistory(req.History, role, obj); err != nil {
			return err
		}
		if role != "user" && role != "tool" && role != "function" {
			continue
		}
		t := openaiwire.ContentText(obj.Get("content"))
		req.Vouching = append(req.Vouching, t)
		if role == "user" {
			req.UserText = t
		}
	}
	return nil
}

// recordHistory adds an assistant message's tool calls, or a tool
// message's result, to h. Chat results carry no error flag.
func recordHistory(h *neutral.History, role string, msg jsonx.Object) error {
	switch role {
	case "assistant":
		raw := msg.Get("tool_calls")
		if jsonx.IsNull(raw) {
			return nil
		}
		calls, err := jsonx.SplitArray(raw)
		if err != nil {
			return errField("tool_calls")
		}
		for _, rc := range calls {
			wc, err := readCall(rc)
			if err != nil {
				return errField("tool_calls")
			}
			if c := neutralCall(wc); !c.BadShape {
				h.AddCall(c.ID, c.Name, c.Args)
			}
		}
	case "tool":
		id, err := optString(msg.Get("tool_call_id"))
		if err != nil {
			return err
		}
		h.AddResult(id, openaiwire.ResultText(msg.Get("content")), false)
	}
	return nil
}

// offered reads the request's function and custom tools.
func offered(raw []byte) ([]neutral.Offered, error) {
	if jsonx.IsNull(raw) {
		return nil, nil
	}
	tools, err := jsonx.SplitArray(raw)
	if err != nil {
		return nil, errField("tools")
	}
	var out []neutral.Offered
	for _, t := range tools {
		obj, err := jsonx.SplitObject(t)
		if err != nil {
			return nil, errField("tools")
		}
		typ, err := optString(obj.Get("type"))
		if err != nil {
			return nil, err
		}
		key := "function"
		switch typ {
		case "function", "":
		case "custom":
			key = "custom"
		default:
			continue
		}
		def := obj.Get(key)
		if jsonx.IsNull(def) {
			continue
		}
		o, err := offeredTool(def, key == "function")
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// offeredTool reads one tool's definition; only function tools have
// parameters.
func offeredTool(def []byte, function bool) (neutral.Offered, error) {
	var o neutral.Offered
	fn, err := jsonx.SplitObject(def)
	if err != nil {
		return o, errField("tools")
	}
	if o.Name, err = optString(fn.Get("name")); err != nil {
		return o, err
	}
	if o.Description, err = optString(fn.Get("description")); err != nil {
		return o, err
	}
	if function {
		if p := fn.Get("parameters"); !jsonx.IsNull(p) {
			o.Parameters = p
		}
	}
	return o, nil
}

// isTextFormat reports a response_format of type text, which asks for
// nothing structured.
func isTextFormat(raw []byte) bool {
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &f) == nil && f.Type == "text"
}

// parseToolChoice reads tool_choice: the strings both OpenAI APIs share,
// or Chat's own objects (a named function or custom tool, allowed_tools).
func parseToolChoice(raw json.RawMessage) (neutral.ToolChoice, error) {
	if c, ok := openaiwire.SimpleToolChoice(raw); ok {
		return c, nil
	}
	var c struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
		Custom *struct {
			Name string `json:"name"`
		} `json:"custom"`
		AllowedTools *struct {
			Tools []wireTool `json:"tools"`
		} `json:"allowed_tools"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return neutral.ToolChoice{}, err
	}
	switch {
	case c.Type == "function" && c.Function != nil:
		return neutral.ToolChoice{Kind: neutral.ChoiceNamed, Names: []string{c.Function.Name}}, nil
	case c.Type == "custom" && c.Custom != nil:
		return neutral.ToolChoice{Kind: neutral.ChoiceNamed, Names: []string{c.Custom.Name}}, nil
	case c.Type == "allowed_tools" && c.AllowedTools != nil:
		names := []string{}
		for _, t := range c.AllowedTools.Tools {
			if t.Function != nil {
				names = append(names, t.Function.Name)
			} else if t.Custom != nil {
				names = append(names, t.Custom.Name)
			}
		}
		return neutral.ToolChoice{Kind: neutral.ChoiceAllowed, Names: names}, nil
	}
	return neutral.ToolChoice{Kind: neutral.ChoiceAuto}, nil
}

// InjectTool implements api.Codec. The injected body becomes the codec's
// request, so every re-query offers the tools the upstream saw first.
func (c *codec) InjectTool(t neutral.Offered) ([]byte, error) {
	fn := jsonx.Object{
		{Key: "name", Value: jsonx.String(t.Name)},
		{Key: "description", Value: jsonx.String(t.Description)},
		{Key: "parameters", Value: t.Parameters},
	}
	tool := jsonx.Object{{Key: "type", Value: []byte(`"function"`)}, {Key: "function", Value: fn.Bytes()}}
	body, err := jsonx.AppendToField(c.req.Body, "tools", tool.Bytes())
	if err != nil {
		return nil, err
	}
	c.req.Body = body
	return body, nil
}
