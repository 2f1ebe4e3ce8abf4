package anthropic

import (
	"bytes"
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
//
// One pass reads the answer into a tape, checking its grammar and its
// UTF-8; its keys are checked on the tape and the answer is read from it
// (answerTape). An answer that is not JSON, or not in the shape
// answerTape reads, is decoded by decodeAnswer, which says why it refuses
// one.
func (c *codec) DecodeAnswer(body []byte) (*neutral.Answer, error) {
	tx := jsonx.GetText()
	defer tx.Release()
	if !tx.Read(body) {
		return c.decodeAnswer(body)
	}
	switch {
	case tx.NotUTF8:
		return nil, api.ErrNotUTF8
	case api.ProtocolKeys.InText(tx):
		return nil, api.ErrFoldedKey
	}
	if a, ok := c.answerTape(tx, body); ok {
		return a, nil
	}
	return c.decodeAnswer(body)
}

// decodeAnswer is DecodeAnswer by encoding/json, the reference answerTape
// is held to.
func (c *codec) decodeAnswer(body []byte) (*neutral.Answer, error) {
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

// answerKeys are the members of an answer that answerTape reads.
var answerKeys = []string{"id", "content", "stop_reason", "usage"}

// answerTape reads an answer from its tape as decodeAnswer does; false,
// for decodeAnswer to read it, when it is not in the shape it reads: a
// member of another type, or a member it reads given twice.
func (c *codec) answerTape(tx *jsonx.Text, body []byte) (*neutral.Answer, bool) {
	var at [4]int
	if tx.Kind(0) != '{' || !members(tx, 0, answerKeys, at[:]) {
		return nil, false
	}
	id, blocks, stop, u := at[0], at[1], at[2], at[3]
	if tx.Kind(blocks) != '[' || !allStrings(tx, []int{id, stop}) {
		return nil, false
	}
	a := &neutral.Answer{Body: body}
	if !tx.Null(u) {
		n, ok := tapeTokens(tx, u)
		if !ok {
			return nil, false
		}
		a.Usage = neutral.Usage{Input: n.in, Output: n.out}
	}
	t := &neutral.Turn{Usage: a.Usage, Raw: content(tx.Raw(blocks))}
	if !c.tapeBlocks(tx, blocks, t) {
		return nil, false
	}
	t.ResponseID, _ = tx.Str(id)
	reason, _ := tx.Str(stop)
	t.Stop = stopOf(reason)
	a.Choices = []*neutral.Turn{t}
	return a, true
}

// tapeBlocks reads the text and the calls of the content array at node
// blocks into t. Only text and tool_use blocks are read, so a block type
// added later, whatever its fields, never makes the answer unreadable.
func (c *codec) tapeBlocks(tx *jsonx.Text, blocks int, t *neutral.Turn) bool {
	var text []byte
	for k, e := 0, blocks+1; k < tx.Len(blocks); k, e = k+1, tx.Next(e) {
		if tx.Null(e) {
			continue
		}
		var at [len(blockKeys)]int
		if tx.Kind(e) != '{' || !members(tx, e, blockKeys[:], at[:]) {
			return false
		}
		typ, ok := tapeType(tx, at[0])
		if !ok {
			return false
		}
		if typ != "text" && typ != "tool_use" {
			continue
		}
		if !allStrings(tx, at[bID:bThinking]) {
			return false
		}
		if typ == "text" {
			text, _ = tx.AppendStr(text, at[bText])
			continue
		}
		id, _ := tx.Str(at[bID])
		name, _ := tx.Str(at[bName])
		// A copy, as encoding/json makes of a json.RawMessage.
		t.Calls = append(t.Calls, c.callOf(id, name, bytes.Clone(tx.Raw(at[bInput]))))
	}
	t.Text = string(text)
	return true
}
