package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// maxBlocks bounds the content blocks one streamed message may declare,
// checked before anything grows.
const maxBlocks = 4096

// ErrStream reports an event that cannot be read.
var ErrStream = errors.New("anthropic: unreadable stream event")

// streamEvent is the union of the Messages stream events' fields.
type streamEvent struct {
	Type    string `json:"type"`
	Index   *int   `json:"index"`
	Message *struct {
		ID    string     `json:"id"`
		Usage *wireUsage `json:"usage"`
	} `json:"message"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        json.RawMessage `json:"delta"`
	Usage        *struct {
		InputTokens  *int64 `json:"input_tokens"`
		OutputTokens *int64 `json:"output_tokens"`
	} `json:"usage"`
}

type blockDelta struct {
	Type        string          `json:"type"`
	Text        *string         `json:"text"`
	Thinking    *string         `json:"thinking"`
	Signature   *string         `json:"signature"`
	PartialJSON *string         `json:"partial_json"`
	Citation    json.RawMessage `json:"citation"`
}

// streamBlock accumulates one content block.
type streamBlock struct {
	typ string
	// start is the content_block object of content_block_start, the base
	// the block is rebuilt on so fields toolgate does not know survive.
	start     []byte
	id, name  string
	text      []byte
	thinking  []byte
	signature []byte
	citations [][]byte
	input     []byte
	// sawInput is set once any input_json_delta arrived, even an empty one.
	sawInput bool
	// call is the block's position in the turn's calls, or -1.
	call int
}

// stream follows one Messages stream.
type stream struct {
	typed   map[string]bool
	id      string
	blocks  []*streamBlock
	calls   int
	stop    string
	usage   recovery.Usage
	holding bool
	done    bool
}

// NewStream implements api.Adapter.
func (Adapter) NewStream(req *api.Request) api.Stream {
	return &stream{typed: typedNames(req)}
}

func errStream(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrStream, fmt.Sprintf(format, args...))
}

// block returns the started block an event addresses.
func (s *stream) block(e *streamEvent) (*streamBlock, error) {
	if e.Index == nil || *e.Index < 0 || *e.Index >= len(s.blocks) {
		return nil, errStream("%s for a content block that was not started", e.Type)
	}
	return s.blocks[*e.Index], nil
}

// Feed implements api.Stream.
func (s *stream) Feed(ev *sse.Event) (api.Step, error) {
	if s.done || ev.Comment || len(ev.Data) == 0 {
		return api.Step{Hold: s.holding, Done: s.done}, nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(ev.Data, &head); err != nil {
		return api.Step{}, errStream("%v", err)
	}
	typ := head.Type
	if typ == "" {
		typ = string(ev.Event)
	}
	var e streamEvent
	switch typ {
	case "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta":
		// Only the events read below must have their known shape; an event
		// type added later, whatever its fields, passes unread.
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return api.Step{}, errStream("%s: %v", typ, err)
		}
		e.Type = typ
	}
	switch typ {
	case "message_start":
		if e.Message != nil {
			s.id = e.Message.ID
			if u := e.Message.Usage; u != nil {
				s.usage = recovery.Usage{Input: u.InputTokens, Output: u.OutputTokens}
			}
		}
	case "content_block_start":
		if err := s.startBlock(&e); err != nil {
			return api.Step{}, err
		}
	case "content_block_delta":
		b, err := s.block(&e)
		if err != nil {
			return api.Step{}, err
		}
		if err := b.apply(e.Delta); err != nil {
			return api.Step{}, err
		}
	case "content_block_stop":
		if _, err := s.block(&e); err != nil {
			return api.Step{}, err
		}
	case "message_delta":
		var d struct {
			StopReason *string `json:"stop_reason"`
		}
		if len(e.Delta) > 0 {
			if err := json.Unmarshal(e.Delta, &d); err != nil {
				return api.Step{}, errStream("message_delta: %v", err)
			}
		}
		if d.StopReason != nil {
			s.stop = *d.StopReason
		}
		// Usage here is cumulative for the whole message, so it replaces.
		if u := e.Usage; u != nil {
			if u.OutputTokens != nil {
				s.usage.Output = *u.OutputTokens
			}
			if u.InputTokens != nil {
				s.usage.Input = *u.InputTokens
			}
		}
	case "message_stop":
		s.done = true
	case "error":
		return api.Step{}, errStream("the upstream sent an error event")
	}
	// ping and event types added later need nothing. Before any content
	// block, message_start and ping open the message and carry nothing
	// for the user yet.
	opening := (typ == "message_start" || typ == "ping") && len(s.blocks) == 0
	return api.Step{Hold: s.holding, Done: s.done, Opening: opening}, nil
}

func (s *stream) startBlock(e *streamEvent) error {
	// Blocks start in index order with no gaps, as the SDKs require; a
	// stream that does otherwise cannot be rendered with contiguous indexes.
	if e.Index == nil || *e.Index != len(s.blocks) {
		return errStream("content_block_start out of order")
	}
	if len(s.blocks) >= maxBlocks {
		return errStream("more than %d content blocks", maxBlocks)
	}
	var head struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Name      string `json:"name"`
		Text      string `json:"text"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	if _, err := jsonx.ParseObject(e.ContentBlock); err != nil {
		return errStream("content_block_start without a content block")
	}
	if err := json.Unmarshal(e.ContentBlock, &head); err != nil {
		return errStream("content_block_start: %v", err)
	}
	// Deltas add to what the start carried, as the SDKs assemble it.
	b := &streamBlock{typ: head.Type, start: bytes.Clone(e.ContentBlock), id: head.ID, name: head.Name, call: -1,
		text: []byte(head.Text), thinking: []byte(head.Thinking), signature: []byte(head.Signature)}
	if head.Type == "tool_use" {
		b.call = s.calls
		s.calls++
		// From the first tool call on, everything is held until the calls
		// are judged.
		s.holding = true
	}
	s.blocks = append(s.blocks, b)
	return nil
}

// apply adds one content_block_delta to the block.
func (b *streamBlock) apply(raw json.RawMessage) error {
	var d blockDelta
	if err := json.Unmarshal(raw, &d); err != nil {
		return errStream("content_block_delta: %v", err)
	}
	switch d.Type {
	case "text_delta":
		if d.Text != nil {
			b.text = append(b.text, *d.Text...)
		}
	case "thinking_delta":
		if d.Thinking != nil {
			b.thinking = append(b.thinking, *d.Thinking...)
		}
	case "signature_delta":
		if d.Signature != nil {
			b.signature = append(b.signature, *d.Signature...)
		}
	case "citations_delta":
		if !jsonx.IsNull(d.Citation) {
			b.citations = append(b.citations, bytes.Clone(d.Citation))
		}
	case "input_json_delta":
		if b.typ == "text" || b.typ == "thinking" || b.typ == "redacted_thinking" {
			return errStream("input_json_delta for a %s block", b.typ)
		}
		if d.PartialJSON == nil {
			return errStream("input_json_delta without partial_json")
		}
		b.sawInput = true
		b.input = append(b.input, *d.PartialJSON...)
	}
	return nil
}

// args is a tool_use block's arguments: the concatenated partial_json,
// exactly. Only when that is empty does the start's input stand (the API
// streams a tool without parameters as input {} and one empty fragment,
// and the SDKs then hand the client that {}).
func (b *streamBlock) args() []byte {
	if len(b.input) > 0 {
		return b.input
	}
	var head struct {
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(b.start, &head) == nil && len(head.Input) > 0 {
		return head.Input
	}
	return []byte("{}")
}

// Usage implements api.Stream.
func (s *stream) Usage() recovery.Usage { return s.usage }

// Committed implements api.Stream: a message id is not a stored state a
// re-query would have to extend.
func (s *stream) Committed() bool { return false }

// Turns implements api.Stream: a message is always one turn.
func (s *stream) Turns() []*recovery.Turn {
	t := &recovery.Turn{ResponseID: s.id, Usage: s.usage}
	var text []byte
	for _, b := range s.blocks {
		switch b.typ {
		case "text":
			text = append(text, b.text...)
		case "tool_use":
			t.Calls = append(t.Calls, callOf(b.id, b.name, b.args(), s.typed))
		}
	}
	t.Text = string(text)
	t.Truncated = s.stop == "max_tokens" && len(t.Calls) > 0
	t.Raw = s.content()
	return []*recovery.Turn{t}
}

// content rebuilds the assistant content the stream carried, so a re-query
// replays what the model said: each block is its content_block_start object
// with the deltas applied, as the SDKs assemble it. Thinking blocks keep
// their signatures. Two things the API would refuse are adjusted: an empty
// text block is left out, and a tool_use whose streamed input is not a
// JSON object is replayed with input {} (its tool_result then tells the
// model what was wrong with what it really sent).
func (s *stream) content() content {
	out := make([][]byte, 0, len(s.blocks))
	for _, b := range s.blocks {
		obj, err := jsonx.ParseObject(b.start)
		if err != nil {
			continue
		}
		obj = append(jsonx.Object(nil), obj...)
		switch b.typ {
		case "text":
			if len(b.text) == 0 {
				continue
			}
			obj = obj.Set("text", jsonx.String(string(b.text)))
			if len(b.citations) > 0 {
				obj = obj.Set("citations", jsonx.AppendArray(nil, b.citations))
			}
		case "thinking":
			obj = obj.Set("thinking", jsonx.String(string(b.thinking)))
			obj = obj.Set("signature", jsonx.String(string(b.signature)))
		default:
			if b.typ == "tool_use" || b.sawInput {
				input := b.args()
				if !isObject(input) {
					input = []byte("{}")
				}
				obj = obj.Set("input", input)
			}
		}
		out = append(out, obj.Bytes())
	}
	return content(jsonx.AppendArray(nil, out))
}

// isObject reports whether b is one valid JSON object.
func isObject(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// ErrorEvent implements api.Stream: an `error` event, which the Anthropic
// SDKs raise as an API error. The stream needs no terminator after it.
func (s *stream) ErrorEvent(code, message string, esc *api.Escalated) []byte {
	var body []byte
	if esc != nil {
		body = errorEnvelope(esc)
	} else {
		body = jsonx.Object{
			{Key: "type", Value: []byte(`"error"`)},
			{Key: "error", Value: jsonx.Object{
				{Key: "type", Value: jsonx.String(code)},
				{Key: "message", Value: jsonx.String(message)},
			}.Bytes()},
		}.Bytes()
	}
	return sse.AppendEvent(nil, "error", body)
}

// Render implements api.Stream. Held events that carry nothing that changed
// go out as the upstream sent them. A replaced call is sent whole: its
// content_block_start with the new name and input {}, one input_json_delta
// with the new arguments, and its own content_block_stop; its original
// fragments are dropped. An escalated or abstained answer loses every held
// content block to one text block at the first held index, and its
// message_delta says end_turn. Indexes stay contiguous either way.
func (s *stream) Render(held []api.HeldEvent, finals []api.Final) ([]byte, error) {
	if len(finals) == 0 {
		return joinHeld(held), nil
	}
	f := finals[0]
	text, esc, replace := f.Replacement()
	var out []byte
	first := -1 // index of the first held block start, in replace mode
	wrote := false
	writeText := func(index int) {
		wrote = true
		out = appendTextBlock(out, index, text)
	}
	for _, ev := range held {
		if len(ev.Data) == 0 {
			out = append(out, ev.Raw...)
			continue
		}
		var e streamEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			// Feed read every held event, so this does not happen; the
			// event goes out as it came.
			out = append(out, ev.Raw...)
			continue
		}
		typ := e.Type
		if typ == "" {
			typ = ev.Event
		}
		switch typ {
		case "content_block_start", "content_block_delta", "content_block_stop":
			if e.Index == nil || *e.Index < 0 || *e.Index >= len(s.blocks) {
				out = append(out, ev.Raw...)
				continue
			}
			idx := *e.Index
			if replace {
				if typ == "content_block_start" && first < 0 {
					first = idx
				}
				if first < 0 || idx < first {
					// A block begun before the hold was already partly sent.
					out = append(out, ev.Raw...)
					continue
				}
				if !wrote {
					writeText(first)
				}
				continue
			}
			b := s.blocks[idx]
			if !f.ChangedAt(b.call) {
				out = append(out, ev.Raw...)
				continue
			}
			switch typ {
			case "content_block_start":
				ev2, err := rewriteStart(ev, f.Result.Calls[b.call])
				if err != nil {
					return nil, err
				}
				out = append(out, ev2...)
			case "content_block_stop":
				out = append(out, ev.Raw...)
			}
			// The original fragments of a replaced call are dropped.
		case "message_delta":
			if !replace {
				out = append(out, ev.Raw...)
				continue
			}
			if !wrote {
				at := first
				if at < 0 {
					at = len(s.blocks)
				}
				writeText(at)
			}
			data, err := endTurn(ev.Data, esc)
			if err != nil {
				return nil, err
			}
			out = sse.AppendEvent(out, eventName(ev, typ), data)
		default:
			out = append(out, ev.Raw...)
		}
	}
	return out, nil
}

// eventName is the SSE event name to write a rewritten event under.
func eventName(ev api.HeldEvent, typ string) string {
	if ev.Event != "" {
		return ev.Event
	}
	return typ
}

// rewriteStart writes a replaced call's content_block_start, keeping every
// other field of the event and of its block (id, caller…), and the single
// delta that carries its arguments.
func rewriteStart(ev api.HeldEvent, c validate.ToolCall) ([]byte, error) {
	obj, err := jsonx.ParseObject(ev.Data)
	if err != nil {
		return nil, err
	}
	obj = append(jsonx.Object(nil), obj...)
	cb, err := jsonx.ParseObject(obj.Get("content_block"))
	if err != nil {
		return nil, err
	}
	cb = append(jsonx.Object(nil), cb...)
	cb = cb.Set("name", jsonx.String(c.Name)).Set("input", []byte("{}"))
	obj = obj.Set("content_block", cb.Bytes())
	args, err := objectJSON(c.Args)
	if err != nil {
		return nil, err
	}
	out := sse.AppendEvent(nil, eventName(ev, "content_block_start"), obj.Bytes())
	delta := jsonx.Object{
		{Key: "type", Value: []byte(`"content_block_delta"`)},
		{Key: "index", Value: obj.Get("index")},
		{Key: "delta", Value: jsonx.Object{
			{Key: "type", Value: []byte(`"input_json_delta"`)},
			{Key: "partial_json", Value: jsonx.String(string(args))},
		}.Bytes()},
	}
	return sse.AppendEvent(out, "content_block_delta", delta.Bytes()), nil
}

// endTurn rewrites a message_delta for an answer that became text: the
// stop reason is end_turn, usage and unknown fields stay, and an escalation
// rides along in toolgate_escalation.
func endTurn(data []byte, esc []byte) ([]byte, error) {
	obj, err := jsonx.ParseObject(data)
	if err != nil {
		return nil, err
	}
	obj = append(jsonx.Object(nil), obj...)
	delta, err := jsonx.ParseObject(obj.Get("delta"))
	if err != nil {
		delta = nil
	}
	delta = append(jsonx.Object(nil), delta...)
	delta = delta.Set("stop_reason", []byte(`"end_turn"`))
	if delta.Has("stop_sequence") {
		delta = delta.Set("stop_sequence", []byte("null"))
	}
	obj = obj.Set("delta", delta.Bytes())
	if esc != nil {
		obj = obj.Set("toolgate_escalation", esc)
	}
	return obj.Bytes(), nil
}

// appendTextBlock writes one whole text block at index.
func appendTextBlock(out []byte, index int, text string) []byte {
	idx := []byte(strconv.Itoa(index))
	out = sse.AppendEvent(out, "content_block_start", jsonx.Object{
		{Key: "type", Value: []byte(`"content_block_start"`)},
		{Key: "index", Value: idx},
		{Key: "content_block", Value: []byte(`{"type":"text","text":""}`)},
	}.Bytes())
	out = sse.AppendEvent(out, "content_block_delta", jsonx.Object{
		{Key: "type", Value: []byte(`"content_block_delta"`)},
		{Key: "index", Value: idx},
		{Key: "delta", Value: jsonx.Object{
			{Key: "type", Value: []byte(`"text_delta"`)},
			{Key: "text", Value: jsonx.String(text)},
		}.Bytes()},
	}.Bytes())
	return sse.AppendEvent(out, "content_block_stop", jsonx.Object{
		{Key: "type", Value: []byte(`"content_block_stop"`)},
		{Key: "index", Value: idx},
	}.Bytes())
}

func joinHeld(held []api.HeldEvent) []byte {
	var out []byte
	for _, h := range held {
		out = append(out, h.Raw...)
	}
	return out
}
