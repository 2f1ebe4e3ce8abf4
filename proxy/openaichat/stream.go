package openaichat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// Bounds on what a stream may declare, checked before anything grows.
const (
	maxChoices = 128
	maxCalls   = 128
)

var doneData = []byte("[DONE]")

// streamCall accumulates one call's deltas.
type streamCall struct {
	id, typ, name string
	args          []byte
	badShape      bool
}

// identify records the call's id and type. Servers that repeat them on
// every fragment send them empty after the first, which must not erase
// them: a call without its id can be neither run nor repaired.
func (c *streamCall) identify(id, typ string) {
	if id != "" {
		c.id = id
	}
	if typ != "" {
		c.typ = typ
	}
}

type streamChoice struct {
	content   []byte
	reasoning []byte
	refusal   []byte
	hasText   bool
	calls     []*streamCall
	finish    string
	// legacy: the choice's one call came as delta.function_call.
	legacy bool
}

// call returns the choice's call at index i, growing the list to it.
func (c *streamChoice) call(i int) *streamCall {
	for len(c.calls) <= i {
		c.calls = append(c.calls, &streamCall{})
	}
	return c.calls[i]
}

// stream follows one Chat Completions stream.
type stream struct {
	api.SSEStream

	scratch scratch
	// last is the last chunk read whole, for the next to be read against
	// (jsonx.Text.Follow).
	last    jsonx.Text
	plan    chunkPlan
	id      string
	choices map[int]*streamChoice
	usage   neutral.Usage
	// call: the event being fed carries a call delta.
	call bool
	// mixed: the request offered tools in both forms (codec.mixed).
	mixed bool
}

func (s *stream) choice(i int) (*streamChoice, error) {
	if i < 0 || i >= maxChoices {
		return nil, fmt.Errorf("%w: choice index %d", ErrStream, i)
	}
	c := s.choices[i]
	if c == nil {
		c = &streamChoice{}
		s.choices[i] = c
	}
	return c, nil
}

// Feed implements api.Stream. The common chunks take feedText's path;
// anything else is decoded whole.
func (s *stream) Feed(ev *sse.Event) (neutral.Step, error) {
	if ev.Comment || len(ev.Data) == 0 {
		return neutral.Step{}, nil
	}
	if bytes.Equal(ev.Data, doneData) {
		return neutral.Step{Done: true}, nil
	}
	s.call = false
	// One pass reads the chunk into a tape; its keys are checked against
	// the protocol keys there, and the common chunks are read from it.
	tx := jsonx.GetText()
	defer tx.Release()
	read, sameKeys, err := api.ReadEvent(tx, &s.last, ev.Data)
	if err != nil {
		return neutral.Step{}, err
	}
	if read {
		ok, opening, err := s.feedText(tx, sameKeys)
		// Its keys passed: the next chunk, mostly this one's bytes, is
		// read against it.
		s.last.Keep(tx)
		if ok || err != nil {
			return s.step(opening, err)
		}
	}
	var ch chunk
	if err := json.Unmarshal(ev.Data, &ch); err != nil {
		return neutral.Step{}, fmt.Errorf("%w: %v", ErrStream, err)
	}
	if len(ch.Error) > 0 && !jsonx.IsNull(ch.Error) {
		return upstreamError(ev.Data, len(ch.Choices))
	}
	if s.id == "" {
		s.id = ch.ID
	}
	if ch.Usage != nil {
		s.usage = neutral.Usage{Input: ch.Usage.PromptTokens, Output: ch.Usage.CompletionTokens}
	}
	for i := range ch.Choices {
		if err := s.feedChoice(&ch.Choices[i]); err != nil {
			return neutral.Step{}, err
		}
	}
	return s.step(false, nil)
}

// step is the Step of a chunk read without error: a call delta answering
// a request that offered tools in both forms is refused.
func (s *stream) step(opening bool, err error) (neutral.Step, error) {
	if s.call && s.mixed && err == nil {
		return neutral.Step{}, errStreamTwoForms
	}
	return neutral.Step{Hold: s.call, Opening: opening}, err
}

// upstreamError reads a chunk with an "error", the upstream's own error,
// which the SDKs raise. The key must be spelt exactly: encoding/json also
// matches "Error", which no SDK reads as an error. A chunk that also
// carries choices says two things at once, and its choices would reach a
// client that reads them unjudged.
func upstreamError(data []byte, choices int) (neutral.Step, error) {
	obj, err := jsonx.ParseObject(data)
	switch {
	case err != nil:
		return neutral.Step{}, fmt.Errorf("%w: %v", ErrStream, err)
	case jsonx.IsNull(obj.Get("error")):
		return neutral.Step{}, fmt.Errorf("%w: an error key in another letter case", ErrStream)
	case choices > 0:
		return neutral.Step{}, fmt.Errorf("%w: an error chunk that also carries choices", ErrStream)
	}
	return neutral.Step{UpstreamError: true}, nil
}

// feedChoice applies one fully decoded choice of a chunk.
func (s *stream) feedChoice(cc *chunkChoice) error {
	c, err := s.choice(cc.Index)
	if err != nil {
		return err
	}
	if cc.Delta.Content != nil {
		c.content = append(c.content, *cc.Delta.Content...)
		c.hasText = true
	}
	if cc.Delta.ReasoningContent != nil {
		c.reasoning = append(c.reasoning, *cc.Delta.ReasoningContent...)
	}
	if cc.Delta.Refusal != nil {
		c.refusal = append(c.refusal, *cc.Delta.Refusal...)
	}
	if len(cc.Delta.ToolCalls) > 0 && c.legacy {
		return errStreamTwoForms
	}
	for _, dc := range cc.Delta.ToolCalls {
		if dc.Index < 0 || dc.Index >= maxCalls {
			return fmt.Errorf("%w: tool call index %d", ErrStream, dc.Index)
		}
		feedCall(c.call(dc.Index), &dc)
		s.call = true
	}
	if fc := cc.Delta.FunctionCall; fc != nil {
		if len(c.calls) > 0 && !c.legacy {
			return errStreamTwoForms
		}
		c.legacy = true
		feedCall(c.call(0), &deltaCall{Function: fc})
		s.call = true
	}
	if cc.FinishReason != nil {
		c.finish = *cc.FinishReason
	}
	return nil
}

// feedCall adds one fully decoded call delta to sc.
func feedCall(sc *streamCall, dc *deltaCall) {
	sc.identify(dc.ID, dc.Type)
	switch {
	case dc.Function != nil:
		if dc.Function.Name != nil {
			sc.name += *dc.Function.Name
		}
		if a := dc.Function.Arguments; len(a) > 0 && !jsonx.IsNull(a) {
			if s, ok := unquoteFragment(a); ok {
				sc.args = append(sc.args, s...)
			} else {
				sc.badShape = true
			}
		}
	case dc.Custom != nil:
		if dc.Custom.Name != nil {
			sc.name += *dc.Custom.Name
		}
		if dc.Custom.Input != nil {
			sc.args = append(sc.args, *dc.Custom.Input...)
		}
	}
}

// unquoteFragment reads one arguments fragment, a JSON string. Only its
// escapes are decoded; every other byte is kept as sent, because a server
// may cut the arguments inside a multi-byte character and the halves are
// valid only once the fragments are joined. Decoding a fragment whole (as
// encoding/json does) would silently turn each half into U+FFFD.
func unquoteFragment(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	out, ok := jsonx.AppendEscapesDecoded(nil, raw[1:len(raw)-1])
	return string(out), ok
}

// appendFragment appends a JSON string fragment the grammar check already
// accepted, decoded as unquoteFragment does; nil appends nothing.
func appendFragment(dst, raw []byte) []byte {
	if len(raw) < 2 {
		return dst
	}
	out, _ := jsonx.AppendEscapesDecoded(dst, raw[1:len(raw)-1])
	return out
}

// Usage implements api.Stream.
func (s *stream) Usage() neutral.Usage { return s.usage }

func (s *stream) order() []int {
	idx := make([]int, 0, len(s.choices))
	for i := range s.choices {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return idx
}

// Turns implements api.Stream. Choices are returned by index; a missing
// index in between gets an empty turn so positions stay aligned.
func (s *stream) Turns() []*neutral.Turn {
	idx := s.order()
	if len(idx) == 0 {
		return nil
	}
	out := make([]*neutral.Turn, idx[len(idx)-1]+1)
	for i := range out {
		out[i] = &neutral.Turn{ResponseID: s.id, Raw: rawMessage([]byte(`{"role":"assistant","content":""}`))}
	}
	for _, i := range idx {
		c := s.choices[i]
		t := out[i]
		t.Text = string(c.content)
		for _, sc := range c.calls {
			call := neutral.ToolCall{ID: sc.id, Name: sc.name, Args: sc.args, Kind: neutral.Function, BadShape: sc.badShape}
			if c.legacy {
				call.ID = legacyCallID
			}
			switch sc.typ {
			case "", "function":
			case "custom":
				call.Kind = neutral.Custom
			default:
				call.Kind = neutral.Other
			}
			t.Calls = append(t.Calls, call)
		}
		t.Stop = stopOf(c.finish)
		// The message is rebuilt only if a re-query needs it.
		t.Raw = c
	}
	if len(out) > 0 {
		out[0].Usage = s.usage
	}
	return out
}

// message rebuilds the assistant message the stream carried, so a re-query
// replays exactly what the model said.
func (c *streamChoice) message() ([]byte, error) {
	m := jsonx.Object{{Key: "role", Value: []byte(`"assistant"`)}}
	if c.hasText {
		m = m.Set("content", jsonx.String(string(c.content)))
	} else {
		m = m.Set("content", []byte("null"))
	}
	if len(c.reasoning) > 0 {
		m = m.Set("reasoning_content", jsonx.String(string(c.reasoning)))
	}
	if len(c.refusal) > 0 {
		m = m.Set("refusal", jsonx.String(string(c.refusal)))
	}
	if c.legacy {
		fc := c.calls[0]
		m = m.Set("function_call", jsonx.Object{{Key: "name", Value: jsonx.String(fc.name)}, {Key: "arguments", Value: jsonx.String(string(fc.args))}}.Bytes())
	} else if len(c.calls) > 0 {
		calls := make([][]byte, len(c.calls))
		for i, sc := range c.calls {
			calls[i] = sc.wire()
		}
		m = m.Set("tool_calls", jsonx.AppendArray(nil, calls))
	}
	return m.Bytes(), nil
}

func (c *streamChoice) legacyCall() bool { return c.legacy }

// wire is the assembled call in the message shape, as the model sent it.
func (sc *streamCall) wire() []byte {
	typ := sc.typ
	if typ == "" {
		typ = "function"
	}
	var body []byte
	if typ == "custom" {
		body = jsonx.Object{{Key: "name", Value: jsonx.String(sc.name)}, {Key: "input", Value: jsonx.String(string(sc.args))}}.Bytes()
	} else {
		body = jsonx.Object{{Key: "name", Value: jsonx.String(sc.name)}, {Key: "arguments", Value: jsonx.String(string(sc.args))}}.Bytes()
	}
	return jsonx.Object{
		{Key: "id", Value: jsonx.String(sc.id)},
		{Key: "type", Value: jsonx.String(typ)},
		{Key: typ, Value: body},
	}.Bytes()
}
