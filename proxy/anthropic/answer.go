package anthropic

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
)

// DecodeAnswer implements api.Codec, for the first answer and for the
// answers to re-queries alike. tool_use blocks calling one of the
// request's Anthropic-defined tools are recorded as neutral.Other, so they
// are answered in re-queries but never judged; every other tool_use block,
// the abstain exit included once InjectTool offered it, is a function call.
func (c *codec) DecodeAnswer(body []byte) (*neutral.Answer, error) {
	if err := api.Readable(body, c.FoldedKey); err != nil {
		return nil, err
	}
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
	a := &neutral.Answer{Body: body}
	if w.Usage != nil {
		a.Usage = neutral.Usage{Input: w.Usage.InputTokens, Output: w.Usage.OutputTokens}
	}
	t := &neutral.Turn{ResponseID: w.ID, Usage: a.Usage, Raw: content(obj.Get("content"))}
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
				t.Calls = append(t.Calls, c.callOf(b.ID, b.Name, b.Input))
			}
		}
	}
	t.Text = string(text)
	t.Stop = stopOf(w.StopReason)
	a.Choices = []*neutral.Turn{t}
	return a, nil
}
