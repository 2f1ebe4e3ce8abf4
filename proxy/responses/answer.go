package responses

import (
	"encoding/json"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
)

// turnItems is a turn in replayable form: the answer's output items, each
// exactly as the upstream sent it, and where each judged call sits.
type turnItems struct {
	items [][]byte
	// callAt maps a position in Turn.Calls to its index in items, which is
	// the call's output_index.
	callAt []int
}

// readTurn builds the neutral turn of a list of output items: the judged
// calls in output order and the visible text. Other items (reasoning,
// hosted tool calls, MCP) are not judged and stay where they are.
func readTurn(items [][]byte) *neutral.Turn {
	t := &neutral.Turn{}
	ti := &turnItems{items: items}
	var text strings.Builder
	for i, raw := range items {
		var it wireItem
		if json.Unmarshal(raw, &it) != nil {
			// An item of an unknown shape is not a call; it is replayed as is.
			continue
		}
		switch it.Type {
		case typeFunctionCall, typeCustomCall:
			t.Calls = append(t.Calls, callOf(&it))
			ti.callAt = append(ti.callAt, i)
		case "message":
			for _, p := range it.Content {
				if p.Type == "output_text" {
					text.WriteString(p.Text)
				}
			}
		}
	}
	t.Text = text.String()
	t.Raw = ti
	return t
}

// callOf is the call of a function_call or custom_tool_call item. Its
// arguments (input) must be a JSON string; anything else is the wrong
// shape, reported as such and never coerced.
func callOf(it *wireItem) neutral.ToolCall {
	c := neutral.ToolCall{ID: it.CallID, Name: it.Name, Kind: neutral.Function}
	field := it.Arguments
	if it.Type == typeCustomCall {
		c.Kind, field = neutral.Custom, it.Input
	}
	if s, ok := jsonx.Unquote(field); ok {
		c.Args = []byte(s)
	} else {
		c.Args, c.BadShape = field, true
	}
	return c
}

func (h *wireHead) usage() neutral.Usage {
	if h.Usage == nil {
		return neutral.Usage{}
	}
	return neutral.Usage{Input: h.Usage.InputTokens, Output: h.Usage.OutputTokens}
}

// stop translates the response's status: Responses has no stop reason of
// its own, only a status and, for an incomplete one, why.
func (h *wireHead) stop() neutral.Stop {
	switch h.Status {
	case "":
		return neutral.StopUnknown
	case "completed":
		return neutral.StopEnd
	case "incomplete":
		if h.IncompleteDetails != nil && h.IncompleteDetails.Reason == "max_output_tokens" {
			return neutral.StopMaxTokens
		}
	}
	return neutral.StopOther
}

// DecodeAnswer implements api.Codec. A response has one assistant turn.
func (c *codec) DecodeAnswer(body []byte) (*neutral.Answer, error) {
	if err := api.Readable(body, c.FoldedKey); err != nil {
		return nil, err
	}
	obj, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	items, err := jsonx.ParseArray(obj.Get("output"))
	if err != nil {
		return nil, ErrShape
	}
	var h wireHead
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, err
	}
	t := readTurn(items)
	t.ResponseID = h.ID
	t.Usage = h.usage()
	t.Stop = h.stop()
	return &neutral.Answer{Body: body, Choices: []*neutral.Turn{t}, Usage: t.Usage}, nil
}
