// Package anthropic adapts the Anthropic Messages API (POST /v1/messages) to
// toolgate's neutral pipeline: it reads requests and answers, writes
// re-queries in the shape the API accepts, and renders the client's answer by
// splicing only what changed into the upstream's own bytes.
//
// Only `tool_use` blocks become calls. Server tools (`server_tool_use`),
// MCP calls (`mcp_tool_use`) and their result blocks live inside the
// assistant turn itself, need no answer from the client and are never
// judged; they are replayed and forwarded exactly as sent.
package anthropic

import (
	"bytes"
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

// Adapter is the Messages adapter. It is stateless and shared.
type Adapter struct{}

var _ api.Adapter = Adapter{}

// ErrShape reports JSON that is not in the shape of the Messages API.
var ErrShape = errors.New("anthropic: not a Messages API object")

// Name implements api.Adapter.
func (Adapter) Name() string { return "messages" }

type wireRequest struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	Tools        []wireTool      `json:"tools"`
	ToolChoice   json.RawMessage `json:"tool_choice"`
	OutputFormat json.RawMessage `json:"output_format"`
	OutputConfig *struct {
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
	Messages []wireMessage `json:"messages"`
}

type wireTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// isFunction reports a tool the client defines and runs itself: it has an
// input_schema and no Anthropic-defined type. Typed tools (bash_20250124,
// text_editor_…, web_search_…, code_execution_…, mcp_toolset…) have
// schemas toolgate does not know and are not judged (SPEC §3).
func (t *wireTool) isFunction() bool {
	return !jsonx.IsNull(t.InputSchema) && (t.Type == "" || t.Type == "custom")
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// wirePart is one content block of a request message, read only for the
// text that can vouch for provenance.
type wirePart struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
	// Source is an object for documents but a plain string for search
	// results, so it is read only where it matters.
	Source json.RawMessage `json:"source"`
}

// request is the adapter's private view of a parsed request.
type request struct {
	// typed names the Anthropic-defined tools of the request. Some of them
	// (bash, the text editor, computer use, memory) are run by the client,
	// so their calls arrive as ordinary tool_use blocks; they are recorded
	// as validate.Other so that they are answered in re-queries but never
	// judged.
	typed map[string]bool
}

// ParseRequest implements api.Adapter.
func (Adapter) ParseRequest(body []byte) (*api.Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	if bytes.TrimSpace(body)[0] != '{' {
		return nil, ErrShape
	}
	priv := &request{}
	req := &api.Request{Body: body, Model: w.Model, Stream: w.Stream, Private: priv,
		StructuredOutput: !jsonx.IsNull(w.OutputFormat) || (w.OutputConfig != nil && !jsonx.IsNull(w.OutputConfig.Format))}
	for i := range w.Tools {
		t := &w.Tools[i]
		if t.isFunction() {
			req.Offered = append(req.Offered, catalog.Offered{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
			continue
		}
		if t.Name != "" {
			if priv.typed == nil {
				priv.typed = map[string]bool{}
			}
			priv.typed[t.Name] = true
		}
	}
	choice, err := parseToolChoice(w.ToolChoice)
	if err != nil {
		return nil, err
	}
	req.Choice = choice
	var evidence []string
	req.History = &validate.History{}
	for _, m := range w.Messages {
		recordHistory(req.History, m.Role, m.Content)
		if m.Role != "user" {
			// Assistant text is the model's own and never vouches for a value.
			continue
		}
		own, results := userText(m.Content)
		evidence = append(evidence, own)
		evidence = append(evidence, results...)
		// The last message a person wrote ranks the shortlist; a turn that
		// only carries tool results says nothing new about the intent.
		if own != "" {
			req.UserText = own
		}
	}
	req.Evidence = validate.NewCorpus(evidence)
	return req, nil
}

// historyPart is what the history reads of a content block: the calls of
// assistant turns and the results of user turns.
type historyPart struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// recordHistory adds an assistant message's tool_use blocks, or a user
// message's tool_result blocks, to h; the API accepts them nowhere else.
// Content that is a plain string carries neither.
func recordHistory(h *validate.History, role string, content json.RawMessage) {
	var parts []historyPart
	if json.Unmarshal(content, &parts) != nil {
		return
	}
	for _, p := range parts {
		switch {
		case p.Type == "tool_use" && role == "assistant":
			h.AddCall(p.ID, p.Name, p.Input)
		case p.Type == "tool_result" && role == "user":
			text := nestedText(p.Content, 0)
			if _, isString := jsonx.Unquote(p.Content); !isString {
				// Blocks are joined by newlines; the last one ends none.
				text = strings.TrimSuffix(text, "\n")
			}
			h.AddResult(p.ToolUseID, text, p.IsError)
		}
	}
}

// userText splits a user message's content into the text the user wrote
// and the text of its tool results.
func userText(raw json.RawMessage) (own string, results []string) {
	if s, ok := jsonx.Unquote(raw); ok {
		return s, nil
	}
	var parts []wirePart
	if json.Unmarshal(raw, &parts) != nil {
		return "", nil
	}
	var b []byte
	for _, p := range parts {
		if p.Type == "tool_result" {
			results = append(results, nestedText(p.Content, 0))
			continue
		}
		if t := partText(&p, 0); t != "" {
			b = append(b, t...)
			b = append(b, '\n')
		}
	}
	return string(b), results
}

// maxNesting bounds how deep nested content is read for text.
const maxNesting = 8

// partText is the readable text of one content block: a text block, a
// plain-text document, or the content of a search result.
func partText(p *wirePart, depth int) string {
	switch {
	case p.Type == "text":
		return p.Text
	case p.Type == "document":
		var src struct {
			Type    string          `json:"type"`
			Data    string          `json:"data"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(p.Source, &src) != nil {
			return ""
		}
		switch src.Type {
		case "text":
			return src.Data
		case "content":
			return nestedText(src.Content, depth+1)
		}
		return ""
	case len(p.Content) > 0:
		return nestedText(p.Content, depth+1)
	}
	return ""
}

// nestedText flattens content that is a string or an array of blocks.
func nestedText(raw json.RawMessage, depth int) string {
	if s, ok := jsonx.Unquote(raw); ok {
		return s
	}
	if depth > maxNesting {
		return ""
	}
	var parts []wirePart
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b []byte
	for i := range parts {
		if t := partText(&parts[i], depth); t != "" {
			b = append(b, t...)
			b = append(b, '\n')
		}
	}
	return string(b)
}

func parseToolChoice(raw json.RawMessage) (catalog.ToolChoice, error) {
	if jsonx.IsNull(raw) {
		return catalog.ToolChoice{Kind: catalog.ChoiceAuto}, nil
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return catalog.ToolChoice{}, err
	}
	switch c.Type {
	case "any":
		return catalog.ToolChoice{Kind: catalog.ChoiceRequired}, nil
	case "tool":
		return catalog.ToolChoice{Kind: catalog.ChoiceNamed, Names: []string{c.Name}}, nil
	case "none":
		return catalog.ToolChoice{Kind: catalog.ChoiceNone}, nil
	}
	return catalog.ToolChoice{Kind: catalog.ChoiceAuto}, nil
}

// typedNames returns the request's Anthropic-defined tool names, if known.
func typedNames(req *api.Request) map[string]bool {
	if req == nil {
		return nil
	}
	if p, ok := req.Private.(*request); ok {
		return p.typed
	}
	return nil
}

type wireResponse struct {
	ID string `json:"id"`
	// Content is read block by block, so a block type added later, whatever
	// its fields, never makes the answer unreadable.
	Content    []json.RawMessage `json:"content"`
	StopReason string            `json:"stop_reason"`
	Usage      *wireUsage        `json:"usage"`
}

type wireUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

type wireBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Text  string          `json:"text"`
	Input json.RawMessage `json:"input"`
}

// content is an assistant turn's content array as JSON, replayed as is in a
// re-query: the upstream's own bytes for a plain answer, a rebuilt array for
// a stream.
type content []byte

// ParseResponse implements api.Adapter. Every tool_use block is judged as a
// function call: the answer alone cannot tell a call of an Anthropic-defined
// client tool (bash, the text editor, computer use, memory) from one of a
// function tool; only the request can, see ParseResponseFor.
func (Adapter) ParseResponse(body []byte) (*api.Response, error) {
	return parseResponse(body, nil)
}

// ParseResponseFor is ParseResponse knowing the request the answer is for:
// tool_use blocks calling one of the request's Anthropic-defined tools are
// recorded as validate.Other, so they are answered in re-queries but never
// judged, as streams already do. It implements api.ResponseParser.
func (Adapter) ParseResponseFor(req *api.Request, body []byte) (*api.Response, error) {
	return parseResponse(body, typedNames(req))
}

var _ api.ResponseParser = Adapter{}

var _ api.PlainErrorer = Adapter{}

func parseResponse(body []byte, typed map[string]bool) (*api.Response, error) {
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	if w.Content == nil {
		return nil, ErrShape
	}
	obj, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	resp := &api.Response{Body: body}
	if w.Usage != nil {
		resp.Usage = recovery.Usage{Input: w.Usage.InputTokens, Output: w.Usage.OutputTokens}
	}
	t := &recovery.Turn{ResponseID: w.ID, Usage: resp.Usage, Raw: content(obj.Get("content"))}
	var text []byte
	for _, raw := range w.Content {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, err
		}
		switch head.Type {
		case "text", "tool_use":
			var b wireBlock
			if err := json.Unmarshal(raw, &b); err != nil {
				return nil, err
			}
			if b.Type == "text" {
				text = append(text, b.Text...)
			} else {
				t.Calls = append(t.Calls, callOf(b.ID, b.Name, b.Input, typed))
			}
		}
	}
	t.Text = string(text)
	t.Truncated = w.StopReason == "max_tokens" && len(t.Calls) > 0
	resp.Choices = []*recovery.Turn{t}
	return resp, nil
}

// callOf is one tool_use block in neutral form. Its arguments are the input
// exactly as sent; whatever they are, the validator judges them.
func callOf(id, name string, input []byte, typed map[string]bool) validate.ToolCall {
	c := validate.ToolCall{ID: id, Name: name, Args: input, Kind: validate.Function}
	if typed[name] {
		c.Kind = validate.Other
	}
	return c
}

// FollowUp implements api.Adapter. The original request stays byte for byte
// except for the fields a re-query must change; each replayed assistant turn
// is followed by one user turn that opens with a tool_result for every
// tool_use of that turn, in order, as the API requires.
func (Adapter) FollowUp(req *api.Request, _ *api.Response, q *recovery.Query) ([]byte, error) {
	obj, err := jsonx.ParseObject(req.Body)
	if err != nil {
		return nil, err
	}
	msgs, err := jsonx.ParseArray(obj.Get("messages"))
	if err != nil {
		return nil, fmt.Errorf("anthropic: messages: %w", err)
	}
	msgs = append([][]byte(nil), msgs...)
	for _, ex := range q.History {
		c, ok := ex.Turn.Raw.(content)
		if !ok {
			return nil, errors.New("anthropic: turn from another adapter")
		}
		if len(ex.Replies) == 0 {
			// A user turn needs content; a turn without calls is never
			// replayed by the ladder.
			return nil, errors.New("anthropic: replayed turn has no calls to answer")
		}
		msgs = append(msgs, jsonx.Object{
			{Key: "role", Value: []byte(`"assistant"`)},
			{Key: "content", Value: c},
		}.Bytes())
		results := make([][]byte, len(ex.Replies))
		for i, r := range ex.Replies {
			res := jsonx.Object{
				{Key: "type", Value: []byte(`"tool_result"`)},
				{Key: "tool_use_id", Value: jsonx.String(r.CallID)},
				{Key: "content", Value: jsonx.String(r.Content)},
			}
			if r.IsError {
				res = append(res, jsonx.Field{Key: "is_error", Value: []byte("true")})
			}
			results[i] = res.Bytes()
		}
		msgs = append(msgs, jsonx.Object{
			{Key: "role", Value: []byte(`"user"`)},
			{Key: "content", Value: jsonx.AppendArray(nil, results)},
		}.Bytes())
	}
	obj = obj.Set("messages", jsonx.AppendArray(nil, msgs))
	if obj.Has("stream") {
		obj = obj.Set("stream", []byte("false"))
	}
	if q.Decision {
		// The decision is asked for as text. With extended thinking on, the
		// API refuses a forced tool_choice ("any" or "tool") but accepts
		// "none", so this is valid whatever the request's thinking setting.
		// Tools stay as sent: removing them would break the prompt cache and
		// make the tool_use blocks being replayed refer to nothing.
		obj = obj.Set("tool_choice", []byte(`{"type":"none"}`))
		obj = obj.Delete("output_format")
		if oc, err := jsonx.ParseObject(obj.Get("output_config")); err == nil && oc.Has("format") {
			oc = oc.Delete("format")
			if len(oc) == 0 {
				obj = obj.Delete("output_config")
			} else {
				obj = obj.Set("output_config", oc.Bytes())
			}
		}
	}
	return obj.Bytes(), nil
}

// InjectTool implements api.ToolInjector: the tool is appended last to the
// request's tools as a custom tool. Last, so a cache_control breakpoint on
// the client's own last tool still covers the same prefix.
func (Adapter) InjectTool(req *api.Request, t catalog.Offered) ([]byte, error) {
	tool := jsonx.Object{
		{Key: "name", Value: jsonx.String(t.Name)},
		{Key: "description", Value: jsonx.String(t.Description)},
		{Key: "input_schema", Value: t.Parameters},
	}
	return jsonx.AppendToField(req.Body, "tools", tool.Bytes())
}

var _ api.ToolInjector = Adapter{}

// CallJSON implements api.Adapter: a tool_use block.
func (Adapter) CallJSON(c validate.ToolCall) []byte {
	return jsonx.Object{
		{Key: "type", Value: []byte(`"tool_use"`)},
		{Key: "id", Value: jsonx.String(c.ID)},
		{Key: "name", Value: jsonx.String(c.Name)},
		{Key: "input", Value: jsonx.Embeddable(c.Args)},
	}.Bytes()
}

// ErrorBody implements api.Adapter: the Anthropic error envelope carrying
// the escalation (SPEC §5).
func (Adapter) ErrorBody(e *api.Escalated) []byte {
	return errorEnvelope(e)
}

func errorEnvelope(e *api.Escalated) []byte {
	inner := jsonx.Object{
		{Key: "type", Value: []byte(`"tool_call_escalation"`)},
		{Key: "code", Value: jsonx.String(e.Escalation.Code())},
		{Key: "message", Value: jsonx.String(e.Text)},
		{Key: "escalation", Value: e.Body},
	}
	return jsonx.Object{
		{Key: "type", Value: []byte(`"error"`)},
		{Key: "error", Value: inner.Bytes()},
	}.Bytes()
}

// PlainError implements api.PlainErrorer with Anthropic's error envelope.
func (Adapter) PlainError(_ int, code, msg string) []byte {
	inner := jsonx.Object{
		{Key: "type", Value: []byte(`"invalid_request_error"`)},
		{Key: "code", Value: jsonx.String(code)},
		{Key: "message", Value: jsonx.String(msg)},
	}
	return jsonx.Object{
		{Key: "type", Value: []byte(`"error"`)},
		{Key: "error", Value: inner.Bytes()},
	}.Bytes()
}

func textBlock(text string) []byte {
	return jsonx.Object{
		{Key: "type", Value: []byte(`"text"`)},
		{Key: "text", Value: jsonx.String(text)},
	}.Bytes()
}

// Render implements api.Adapter. Calls are matched to tool_use blocks by
// order, the same order ParseResponse read them in, so a replaced call keeps
// its id and its place among text and thinking blocks.
func (Adapter) Render(_ *api.Request, resp *api.Response, finals []api.Final) ([]byte, error) {
	if len(finals) == 0 {
		return resp.Body, nil
	}
	f := finals[0]
	obj, err := jsonx.ParseObject(resp.Body)
	if err != nil {
		return nil, err
	}
	if text, esc, ok := f.Replacement(); ok {
		obj = obj.Set("content", jsonx.AppendArray(nil, [][]byte{textBlock(text)}))
		obj = obj.Set("stop_reason", []byte(`"end_turn"`))
		if obj.Has("stop_sequence") {
			obj = obj.Set("stop_sequence", []byte("null"))
		}
		if esc != nil {
			obj = obj.Set("toolgate_escalation", esc)
		}
		return obj.Bytes(), nil
	}
	if f.Result == nil || !f.Result.AnyChanged() {
		// Nothing to splice: the upstream's bytes are the answer.
		return resp.Body, nil
	}
	blocks, err := jsonx.ParseArray(obj.Get("content"))
	if err != nil {
		return nil, err
	}
	blocks = append([][]byte(nil), blocks...)
	j := -1
	for i, raw := range blocks {
		b, err := jsonx.ParseObject(raw)
		if err != nil {
			return nil, err
		}
		if typ, _ := jsonx.Unquote(b.Get("type")); typ != "tool_use" {
			continue
		}
		j++
		if !f.ChangedAt(j) {
			continue
		}
		nc := f.Result.Calls[j]
		input, err := objectJSON(nc.Args)
		if err != nil {
			return nil, err
		}
		blocks[i] = b.Set("name", jsonx.String(nc.Name)).Set("input", input).Bytes()
	}
	obj = obj.Set("content", jsonx.AppendArray(nil, blocks))
	return obj.Bytes(), nil
}

// objectJSON is a repaired call's arguments, compacted. Repaired calls have
// passed the validator, so anything but a JSON object is a toolgate bug and
// fails the render instead of reaching the client.
func objectJSON(args []byte) ([]byte, error) {
	b, err := jsonx.CompactObject(args)
	if err != nil {
		return nil, fmt.Errorf("anthropic: repaired arguments: %w", err)
	}
	return b, nil
}
