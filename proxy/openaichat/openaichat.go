// Package openaichat adapts OpenAI Chat Completions (POST /v1/chat/completions)
// to toolgate's neutral pipeline: it reads requests and answers, writes
// re-queries in the shape the provider accepts, and renders the client's
// answer by splicing only what changed into the upstream's own bytes.
package openaichat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// Adapter is the Chat Completions adapter. It is stateless and shared.
type Adapter struct{}

var _ api.Adapter = Adapter{}

// Name implements api.Adapter.
func (Adapter) Name() string { return "chat" }

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

// ParseRequest implements api.Adapter. The request is split with jsonx,
// which checks the grammar in the same pass, instead of being decoded by
// reflection: it runs before the upstream call, so its cost is added to
// the time to the first byte of every answer. Keys are matched as written,
// as the provider matches them. A field of the wrong type makes the
// request unreadable, as a struct decoder would. Only the top level is
// checked against the grammar; the values inside it are then split with
// jsonx.Split*, which does not check the same bytes again.
func (Adapter) ParseRequest(body []byte) (*api.Request, error) {
	top, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	req := &api.Request{Body: body}
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
	if err := offered(req, top.Get("tools")); err != nil {
		return nil, err
	}
	if req.Choice, err = parseToolChoice(top.Get("tool_choice")); err != nil {
		return nil, err
	}
	var texts []string
	req.History = &validate.History{}
	if raw := top.Get("messages"); !jsonx.IsNull(raw) {
		msgs, err := jsonx.SplitArray(raw)
		if err != nil {
			return nil, errField("messages")
		}
		for _, m := range msgs {
			obj, err := jsonx.SplitObject(m)
			if err != nil {
				return nil, errField("messages")
			}
			role, err := optString(obj.Get("role"))
			if err != nil {
				return nil, err
			}
			if err := recordHistory(req.History, role, obj); err != nil {
				return nil, err
			}
			if role != "user" && role != "tool" && role != "function" {
				continue
			}
			t := ContentText(obj.Get("content"))
			texts = append(texts, t)
			if role == "user" {
				req.UserText = t
			}
		}
	}
	req.Evidence = validate.NewCorpus(texts)
	return req, nil
}

// recordHistory adds an assistant message's tool calls, or a tool
// message's result, to h. Chat results carry no error flag.
func recordHistory(h *validate.History, role string, msg jsonx.Object) error {
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
		h.AddResult(id, ResultText(msg.Get("content")), false)
	}
	return nil
}

// ResultText is a tool result's text: the string itself, or the text
// parts joined by newlines. The Responses adapter shares it.
func ResultText(raw json.RawMessage) string {
	t := ContentText(raw)
	if _, isString := jsonx.Unquote(raw); !isString {
		t = strings.TrimSuffix(t, "\n")
	}
	return t
}

// offered reads the request's function and custom tools.
func offered(req *api.Request, raw []byte) error {
	if jsonx.IsNull(raw) {
		return nil
	}
	tools, err := jsonx.SplitArray(raw)
	if err != nil {
		return errField("tools")
	}
	for _, t := range tools {
		obj, err := jsonx.SplitObject(t)
		if err != nil {
			return errField("tools")
		}
		typ, err := optString(obj.Get("type"))
		if err != nil {
			return err
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
		fn, err := jsonx.SplitObject(def)
		if err != nil {
			return errField("tools")
		}
		o := catalog.Offered{}
		if o.Name, err = optString(fn.Get("name")); err != nil {
			return err
		}
		if o.Description, err = optString(fn.Get("description")); err != nil {
			return err
		}
		if key == "function" {
			if p := fn.Get("parameters"); !jsonx.IsNull(p) {
				o.Parameters = p
			}
		}
		req.Offered = append(req.Offered, o)
	}
	return nil
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

// isTextFormat reports a response_format of type text, which asks for
// nothing structured.
func isTextFormat(raw []byte) bool {
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &f) == nil && f.Type == "text"
}

// ContentText flattens an OpenAI content value (a string or a list of
// parts) into its text. Only text parts count; images and files carry no
// text toolgate can read. The Responses adapter shares it.
func ContentText(raw json.RawMessage) string {
	if s, ok := jsonx.Unquote(raw); ok {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var out []byte
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text...)
			out = append(out, '\n')
		}
	}
	return string(out)
}

// SimpleToolChoice reads a tool_choice that is absent, null or one of the
// strings both OpenAI APIs share ("none", "required", "auto"); ok is false
// for an object, which each API spells its own way.
func SimpleToolChoice(raw []byte) (c catalog.ToolChoice, ok bool) {
	if jsonx.IsNull(raw) {
		return catalog.ToolChoice{Kind: catalog.ChoiceAuto}, true
	}
	s, isString := jsonx.Unquote(raw)
	if !isString {
		return c, false
	}
	switch s {
	case "none":
		return catalog.ToolChoice{Kind: catalog.ChoiceNone}, true
	case "required":
		return catalog.ToolChoice{Kind: catalog.ChoiceRequired}, true
	}
	return catalog.ToolChoice{Kind: catalog.ChoiceAuto}, true
}

func parseToolChoice(raw json.RawMessage) (catalog.ToolChoice, error) {
	if c, ok := SimpleToolChoice(raw); ok {
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
		return catalog.ToolChoice{}, err
	}
	switch {
	case c.Type == "function" && c.Function != nil:
		return catalog.ToolChoice{Kind: catalog.ChoiceNamed, Names: []string{c.Function.Name}}, nil
	case c.Type == "custom" && c.Custom != nil:
		return catalog.ToolChoice{Kind: catalog.ChoiceNamed, Names: []string{c.Custom.Name}}, nil
	case c.Type == "allowed_tools" && c.AllowedTools != nil:
		names := []string{}
		for _, t := range c.AllowedTools.Tools {
			if t.Function != nil {
				names = append(names, t.Function.Name)
			} else if t.Custom != nil {
				names = append(names, t.Custom.Name)
			}
		}
		return catalog.ToolChoice{Kind: catalog.ChoiceAllowed, Names: names}, nil
	}
	return catalog.ToolChoice{Kind: catalog.ChoiceAuto}, nil
}

type wireResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Message struct {
			Content   json.RawMessage `json:"content"`
			ToolCalls []wireCall      `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

type wireCall struct {
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function *wireFunction `json:"function"`
	Custom   *wireCustom   `json:"custom"`
}

type wireFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type wireCustom struct {
	Name string `json:"name"`
}

// ErrShape reports an answer that is JSON but not a chat completion.
var ErrShape = errors.New("openaichat: the answer is not a chat completion")

// turnRef is the adapter's handle on one choice of an answer, for replay.
type turnRef struct {
	body   []byte
	choice int
}

// ParseResponse implements api.Adapter.
func (Adapter) ParseResponse(body []byte) (*api.Response, error) {
	// The answer is split with jsonx, which checks the JSON grammar in the
	// same pass; only the tool calls are decoded into structs. The rest of
	// an answer (usage details, logprobs, annotations) is not needed, and
	// reflection over it was the largest cost of the plain path. Values
	// inside the checked top level are split without a second check.
	top, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	rawChoices := top.Get("choices")
	if jsonx.IsNull(rawChoices) {
		return nil, ErrShape
	}
	choices, err := jsonx.SplitArray(rawChoices)
	if err != nil {
		return nil, ErrShape
	}
	id, _ := jsonx.Unquote(top.Get("id"))
	resp := &api.Response{Body: body, Choices: make([]*recovery.Turn, len(choices))}
	if u := top.Get("usage"); !jsonx.IsNull(u) {
		var ok bool
		if resp.Usage, ok = readUsage(u); !ok {
			return nil, ErrShape
		}
	}
	for i, raw := range choices {
		c, err := jsonx.SplitObject(raw)
		if err != nil {
			return nil, ErrShape
		}
		t := &recovery.Turn{ResponseID: id, Raw: turnRef{body: body, choice: i}}
		if m := c.Get("message"); !jsonx.IsNull(m) {
			msg, err := jsonx.SplitObject(m)
			if err != nil {
				return nil, ErrShape
			}
			t.Text, _ = jsonx.Unquote(msg.Get("content"))
			if tcs := msg.Get("tool_calls"); !jsonx.IsNull(tcs) {
				elems, err := jsonx.SplitArray(tcs)
				if err != nil {
					return nil, ErrShape
				}
				for _, e := range elems {
					tc, err := readCall(e)
					if err != nil {
						return nil, err
					}
					t.Calls = append(t.Calls, neutralCall(tc))
				}
			}
		}
		finish := ""
		if fr := c.Get("finish_reason"); !jsonx.IsNull(fr) {
			var ok bool
			if finish, ok = jsonx.Unquote(fr); !ok {
				return nil, ErrShape
			}
		}
		t.Truncated = finish == "length" && len(t.Calls) > 0
		if i == 0 {
			t.Usage = resp.Usage
		}
		resp.Choices[i] = t
	}
	return resp, nil
}

// readUsage reads the token counts of a usage object taken from a checked
// answer or chunk.
func readUsage(raw []byte) (recovery.Usage, bool) {
	obj, err := jsonx.SplitObject(raw)
	if err != nil {
		return recovery.Usage{}, false
	}
	in, ok1 := jsonx.Int(obj.Get("prompt_tokens"))
	out, ok2 := jsonx.Int(obj.Get("completion_tokens"))
	return recovery.Usage{Input: in, Output: out}, ok1 && ok2
}

// readCall reads one tool call of a checked answer into its wire form. A
// field of the wrong type makes the answer unreadable, as a struct decoder
// would.
func readCall(raw []byte) (wireCall, error) {
	var tc wireCall
	obj, err := jsonx.SplitObject(raw)
	if err != nil {
		if jsonx.IsNull(raw) {
			return tc, nil
		}
		return tc, ErrShape
	}
	if tc.ID, err = optString(obj.Get("id")); err != nil {
		return tc, ErrShape
	}
	if tc.Type, err = optString(obj.Get("type")); err != nil {
		return tc, ErrShape
	}
	if fn := obj.Get("function"); !jsonx.IsNull(fn) {
		fo, err := jsonx.SplitObject(fn)
		if err != nil {
			return tc, ErrShape
		}
		tc.Function = &wireFunction{}
		if tc.Function.Name, err = optString(fo.Get("name")); err != nil {
			return tc, ErrShape
		}
		tc.Function.Arguments = fo.Get("arguments")
	}
	if cu := obj.Get("custom"); !jsonx.IsNull(cu) {
		co, err := jsonx.SplitObject(cu)
		if err != nil {
			return tc, ErrShape
		}
		tc.Custom = &wireCustom{}
		if tc.Custom.Name, err = optString(co.Get("name")); err != nil {
			return tc, ErrShape
		}
	}
	return tc, nil
}

func neutralCall(tc wireCall) validate.ToolCall {
	c := validate.ToolCall{ID: tc.ID}
	switch {
	case tc.Type == "custom" && tc.Custom != nil:
		c.Kind, c.Name = validate.Custom, tc.Custom.Name
	case (tc.Type == "function" || tc.Type == "") && tc.Function != nil:
		c.Kind, c.Name = validate.Function, tc.Function.Name
		if s, ok := jsonx.Unquote(tc.Function.Arguments); ok {
			c.Args = []byte(s)
		} else {
			// Arguments must be a JSON string; anything else is the wrong
			// shape, reported as such and never coerced.
			c.Args = tc.Function.Arguments
			c.BadShape = true
		}
	default:
		// Chat Completions defines only function and custom calls; anything
		// else is a call the agent could not dispatch, so it is judged as a
		// badly shaped function call instead of being waved through.
		c.Kind, c.BadShape = validate.Function, true
		if tc.Function != nil {
			c.Name = tc.Function.Name
		} else if tc.Custom != nil {
			c.Name = tc.Custom.Name
		}
	}
	return c
}

// messageOf returns the raw assistant message of one choice.
func messageOf(ref turnRef) ([]byte, error) {
	obj, err := jsonx.ParseObject(ref.body)
	if err != nil {
		return nil, err
	}
	choices, err := jsonx.ParseArray(obj.Get("choices"))
	if err != nil || ref.choice >= len(choices) {
		return nil, ErrShape
	}
	c, err := jsonx.ParseObject(choices[ref.choice])
	if err != nil {
		return nil, err
	}
	msg := c.Get("message")
	if msg == nil {
		return nil, ErrShape
	}
	return msg, nil
}

// FollowUp implements api.Adapter. The original request is kept byte for
// byte except for the fields a re-query must change, and the new messages
// are appended after the client's own.
func (Adapter) FollowUp(req *api.Request, _ *api.Response, q *recovery.Query) ([]byte, error) {
	obj, err := jsonx.ParseObject(req.Body)
	if err != nil {
		return nil, err
	}
	msgs, err := jsonx.ParseArray(obj.Get("messages"))
	if err != nil {
		return nil, fmt.Errorf("openaichat: messages: %w", err)
	}
	for _, ex := range q.History {
		var m []byte
		switch ref := ex.Turn.Raw.(type) {
		case turnRef:
			if m, err = messageOf(ref); err != nil {
				return nil, err
			}
		case rawMessage:
			m = ref
		case *streamChoice:
			m = ref.message()
		default:
			return nil, errors.New("openaichat: turn from another adapter")
		}
		msgs = append(msgs, m)
		for _, r := range ex.Replies {
			reply := jsonx.Object{
				{Key: "role", Value: []byte(`"tool"`)},
				{Key: "tool_call_id", Value: jsonx.String(r.CallID)},
				{Key: "content", Value: jsonx.String(r.Content)},
			}
			msgs = append(msgs, reply.Bytes())
		}
	}
	obj = obj.Set("messages", jsonx.AppendArray(nil, msgs))
	if obj.Has("n") {
		obj = obj.Set("n", []byte("1"))
	}
	if obj.Has("stream") {
		obj = obj.Set("stream", []byte("false"))
	}
	obj = obj.Delete("stream_options")
	if q.Decision {
		obj = obj.Set("tool_choice", []byte(`"none"`))
		obj = obj.Delete("response_format")
		// parallel_tool_calls is only allowed alongside tools; tools stay, so
		// it may stay too.
	}
	return obj.Bytes(), nil
}

// InjectTool implements api.ToolInjector.
func (Adapter) InjectTool(req *api.Request, t catalog.Offered) ([]byte, error) {
	fn := jsonx.Object{
		{Key: "name", Value: jsonx.String(t.Name)},
		{Key: "description", Value: jsonx.String(t.Description)},
		{Key: "parameters", Value: t.Parameters},
	}
	tool := jsonx.Object{{Key: "type", Value: []byte(`"function"`)}, {Key: "function", Value: fn.Bytes()}}
	return jsonx.AppendToField(req.Body, "tools", tool.Bytes())
}

var _ api.ToolInjector = Adapter{}

// CallJSON implements api.Adapter.
func (Adapter) CallJSON(c validate.ToolCall) []byte {
	fn := jsonx.Object{
		{Key: "name", Value: jsonx.String(c.Name)},
		{Key: "arguments", Value: jsonx.String(string(c.Args))},
	}
	call := jsonx.Object{
		{Key: "id", Value: jsonx.String(c.ID)},
		{Key: "type", Value: []byte(`"function"`)},
		{Key: "function", Value: fn.Bytes()},
	}
	return call.Bytes()
}

// ErrorBody implements api.Adapter.
func (Adapter) ErrorBody(e *api.Escalated) []byte {
	return ErrorEnvelope(e)
}

// ErrorEnvelope is the OpenAI-style error object carrying an escalation,
// shared with the Responses adapter.
func ErrorEnvelope(e *api.Escalated) []byte {
	inner := jsonx.Object{
		{Key: "type", Value: []byte(`"tool_call_escalation"`)},
		{Key: "code", Value: jsonx.String(e.Escalation.Code())},
		{Key: "message", Value: jsonx.String(e.Text)},
		{Key: "param", Value: []byte("null")},
		{Key: "escalation", Value: e.Body},
	}
	return jsonx.Object{{Key: "error", Value: inner.Bytes()}}.Bytes()
}

// Render implements api.Adapter.
func (Adapter) Render(_ *api.Request, resp *api.Response, finals []api.Final) ([]byte, error) {
	obj, err := jsonx.ParseObject(resp.Body)
	if err != nil {
		return nil, err
	}
	choices, err := jsonx.ParseArray(obj.Get("choices"))
	if err != nil {
		return nil, err
	}
	choices = append([][]byte(nil), choices...)
	var escalation []byte
	for i, f := range finals {
		if i >= len(choices) {
			break
		}
		c, err := jsonx.ParseObject(choices[i])
		if err != nil {
			return nil, err
		}
		switch {
		case f.Escalated != nil:
			c = c.Set("message", textMessage(f.Escalated.Text))
			c = c.Set("finish_reason", []byte(`"stop"`))
			if escalation == nil {
				escalation = f.Escalated.Body
			}
		case f.Result != nil && f.Result.Outcome == recovery.Abstained:
			c = c.Set("message", textMessage(f.Result.AbstainReason))
			c = c.Set("finish_reason", []byte(`"stop"`))
		case f.Result != nil && f.Result.AnyChanged():
			msg, err := jsonx.ParseObject(c.Get("message"))
			if err != nil {
				return nil, err
			}
			calls, err := jsonx.ParseArray(msg.Get("tool_calls"))
			if err != nil {
				return nil, err
			}
			calls = append([][]byte(nil), calls...)
			for j, changed := range f.Result.Changed {
				if !changed || j >= len(calls) {
					continue
				}
				call, err := jsonx.ParseObject(calls[j])
				if err != nil {
					return nil, err
				}
				nc := f.Result.Calls[j]
				fn := jsonx.Object{
					{Key: "name", Value: jsonx.String(nc.Name)},
					{Key: "arguments", Value: jsonx.String(string(nc.Args))},
				}
				if old, err := jsonx.ParseObject(call.Get("function")); err == nil {
					fn = old.Set("name", jsonx.String(nc.Name)).Set("arguments", jsonx.String(string(nc.Args)))
				}
				calls[j] = call.Set("type", []byte(`"function"`)).Set("function", fn.Bytes()).Bytes()
			}
			msg = msg.Set("tool_calls", jsonx.AppendArray(nil, calls))
			c = c.Set("message", msg.Bytes())
		default:
			continue
		}
		choices[i] = c.Bytes()
	}
	obj = obj.Set("choices", jsonx.AppendArray(nil, choices))
	if escalation != nil {
		obj = obj.Set("toolgate_escalation", escalation)
	}
	return obj.Bytes(), nil
}

func textMessage(text string) []byte {
	return jsonx.Object{
		{Key: "role", Value: []byte(`"assistant"`)},
		{Key: "content", Value: jsonx.String(text)},
		{Key: "refusal", Value: []byte("null")},
	}.Bytes()
}
