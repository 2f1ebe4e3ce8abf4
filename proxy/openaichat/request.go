package openaichat

import (
	"encoding/json"
	"strconv"

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
	if err := c.readFunctions(top); err != nil {
		return nil, err
	}
	req.History = &neutral.History{}
	if err := readMessages(req, top.Get("messages")); err != nil {
		return nil, err
	}
	return req, nil
}

// readFunctions reads the legacy form: functions are offered tools, and
// function_call narrows them as tool_choice does. Mixed with tools or
// tool_choice the two forms disagree on what is offered, and the provider
// refuses such a request too.
func (c *codec) readFunctions(top jsonx.Object) error {
	fns, choice := top.Get("functions"), top.Get("function_call")
	if jsonx.IsNull(fns) && jsonx.IsNull(choice) {
		return nil
	}
	if !jsonx.IsNull(top.Get("tools")) || !jsonx.IsNull(top.Get("tool_choice")) {
		c.mixed = true
		return ErrTwoForms
	}
	c.legacy = true
	req := &c.req
	if !jsonx.IsNull(fns) {
		defs, err := jsonx.SplitArray(fns)
		if err != nil {
			return errField("functions")
		}
		for _, def := range defs {
			o, err := offeredTool(def, true)
			if err != nil {
				return errField("functions")
			}
			req.Offered = append(req.Offered, o)
		}
	}
	var err error
	req.Choice, err = parseFunctionCall(choice)
	return err
}

// parseFunctionCall reads a request's function_call: "none", "auto" or
// {"name": …}.
func parseFunctionCall(raw []byte) (neutral.ToolChoice, error) {
	if jsonx.IsNull(raw) {
		return neutral.ToolChoice{Kind: neutral.ChoiceAuto}, nil
	}
	if s, ok := jsonx.Unquote(raw); ok {
		switch s {
		case "none":
			return neutral.ToolChoice{Kind: neutral.ChoiceNone}, nil
		case "auto":
			return neutral.ToolChoice{Kind: neutral.ChoiceAuto}, nil
		}
		return neutral.ToolChoice{}, errField("function_call")
	}
	obj, err := jsonx.SplitObject(raw)
	if err != nil {
		return neutral.ToolChoice{}, errField("function_call")
	}
	name, err := optString(obj.Get("name"))
	if err != nil || name == "" {
		return neutral.ToolChoice{}, errField("function_call")
	}
	return neutral.ToolChoice{Kind: neutral.ChoiceNamed, Names: []string{name}}, nil
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
	// legacy counts the conversation's legacy calls, which have no ids.
	legacy := 0
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
		if err := recordLegacy(req.History, role, obj, &legacy); err != nil {
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
		h.AddResult(id, openaiwire.ResultText(msg.Get("content")), false, msg.Get("content"))
	}
	return nil
}

// recordLegacy adds an assistant message's legacy function_call, or a
// function message's result, to h. A legacy call has no id: each gets one
// of its own by its place in the conversation, and a function message
// answers the call before it, as the provider pairs them.
func recordLegacy(h *neutral.History, role string, msg jsonx.Object, n *int) error {
	switch role {
	case "assistant":
		raw := msg.Get("function_call")
		if jsonx.IsNull(raw) {
			return nil
		}
		fc, err := readFunctionCall(raw)
		if err != nil {
			return errField("function_call")
		}
		*n++
		if c := neutralCall(fc); !c.BadShape {
			h.AddCall(pastLegacyID(*n), c.Name, c.Args)
		}
	case "function":
		if *n > 0 {
			h.AddResult(pastLegacyID(*n), openaiwire.ResultText(msg.Get("content")), false, msg.Get("content"))
		}
	}
	return nil
}

// pastLegacyID is the id the conversation's nth legacy call is recorded by.
func pastLegacyID(n int) string { return legacyCallID + "_" + strconv.Itoa(n) }

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
// A legacy request gets it as one more of its functions: tools beside
// functions would be refused.
func (c *codec) InjectTool(t neutral.Offered) ([]byte, error) {
	fn := jsonx.Object{
		{Key: "name", Value: jsonx.String(t.Name)},
		{Key: "description", Value: jsonx.String(t.Description)},
		{Key: "parameters", Value: t.Parameters},
	}
	field, def := "tools", jsonx.Object{{Key: "type", Value: []byte(`"function"`)}, {Key: "function", Value: fn.Bytes()}}.Bytes()
	if c.legacy {
		field, def = "functions", fn.Bytes()
	}
	body, err := jsonx.AppendToField(c.req.Body, field, def)
	if err != nil {
		return nil, err
	}
	c.req.Body = body
	return body, nil
}
