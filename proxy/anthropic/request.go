package anthropic

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// DecodeRequest implements api.Codec. The path says nothing on this route.
func (c *codec) DecodeRequest(_ string, body []byte) (*neutral.Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	if bytes.TrimSpace(body)[0] != '{' {
		return nil, ErrShape
	}
	req := &neutral.Request{Body: body, Model: w.Model, Stream: w.Stream,
		StructuredOutput: !jsonx.IsNull(w.OutputFormat) || (w.OutputConfig != nil && !jsonx.IsNull(w.OutputConfig.Format))}
	c.body, c.typed = body, nil
	for i := range w.Tools {
		t := &w.Tools[i]
		if t.isFunction() {
			req.Offered = append(req.Offered, neutral.Offered{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
			continue
		}
		if t.Name != "" {
			if c.typed == nil {
				c.typed = map[string]bool{}
			}
			c.typed[t.Name] = true
		}
	}
	choice, err := decodeToolChoice(w.ToolChoice)
	if err != nil {
		return nil, err
	}
	req.Choice = choice
	req.History = &neutral.History{}
	for _, m := range w.Messages {
		recordHistory(req.History, m.Role, m.Content)
		if m.Role != "user" {
			// Assistant text is the model's own and never vouches for a value.
			continue
		}
		req.AddUserTurn(userText(m.Content))
	}
	return req, nil
}

// recordHistory adds an assistant message's tool_use blocks, or a user
// message's tool_result blocks, to h; the API accepts them nowhere else.
// Content that is a plain string carries neither.
func recordHistory(h *neutral.History, role string, content json.RawMessage) {
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
			h.AddResult(p.ToolUseID, text, p.IsError, p.Content)
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

func decodeToolChoice(raw json.RawMessage) (neutral.ToolChoice, error) {
	if jsonx.IsNull(raw) {
		return neutral.ToolChoice{Kind: neutral.ChoiceAuto}, nil
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return neutral.ToolChoice{}, err
	}
	switch c.Type {
	case "any":
		return neutral.ToolChoice{Kind: neutral.ChoiceRequired}, nil
	case "tool":
		return neutral.ToolChoice{Kind: neutral.ChoiceNamed, Names: []string{c.Name}}, nil
	case "none":
		return neutral.ToolChoice{Kind: neutral.ChoiceNone}, nil
	}
	return neutral.ToolChoice{Kind: neutral.ChoiceAuto}, nil
}
