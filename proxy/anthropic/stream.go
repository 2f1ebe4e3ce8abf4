package anthropic

import (
	"bytes"
	"encoding/json"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// maxBlocks bounds the content blocks one streamed message may declare,
// checked before anything grows.
const maxBlocks = 4096

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
	// startInput is the start's input as sent (within start), or nil.
	startInput []byte
	input      []byte
	// sawInput is set once any input_json_delta arrived, even an empty one.
	sawInput bool
	// call is the block's position in the turn's calls, or -1.
	call int
}

// stream follows one Messages stream.
type stream struct {
	api.SSEStream

	c   *codec
	dec decoder
	ev  event
	// last is the last event whose keys passed, for the next to be read
	// against (jsonx.Text.Follow).
	last   jsonx.Text
	id     string
	blocks []*streamBlock
	calls  int
	stop   string
	usage  neutral.Usage
	done   bool
}

// NewStream implements api.Codec.
func (c *codec) NewStream() api.Stream {
	return &stream{c: c}
}

// block returns the started block an event addresses.
func (s *stream) block(e *event) (*streamBlock, error) {
	if !e.hasIndex || e.index < 0 || e.index >= len(s.blocks) {
		return nil, errStream("%s for a content block that was not started", e.typ)
	}
	return s.blocks[e.index], nil
}

// Feed implements api.Stream. One pass reads the event into a tape, most
// of it taken from the last event's (a delta differs from the one before
// it in its fragment alone); its keys are checked there, and the common
// events are read from it (feedTape). Anything else is decoded.
func (s *stream) Feed(ev *sse.Event) (neutral.Step, error) {
	if s.done || ev.Comment || len(ev.Data) == 0 {
		return neutral.Step{Done: s.done}, nil
	}
	tx := jsonx.GetText()
	defer tx.Release()
	read, _, err := api.ReadEvent(tx, &s.last, ev.Data)
	if err != nil {
		return neutral.Step{}, err
	}
	// Not JSON goes to the decoder, which says what is wrong.
	if read {
		s.last.Keep(tx)
		if step, ok := s.feedTape(tx, ev.Event); ok {
			return step, nil
		}
	}
	return s.decodeFeed(ev)
}

// decodeFeed reads an event whose keys passed with the decoder, which
// reads any event and says why it refuses one.
func (s *stream) decodeFeed(ev *sse.Event) (neutral.Step, error) {
	e := &s.ev
	if err := s.dec.decode(ev.Data, ev.Event, e); err != nil {
		return neutral.Step{}, err
	}
	if e.typ == "error" {
		// The upstream's own error (overloaded_error and the like), which
		// the SDKs raise with its type and message.
		s.done = true
		return neutral.Step{UpstreamError: true}, nil
	}
	if err := s.apply(e); err != nil {
		return neutral.Step{}, err
	}
	return s.stepAfter(e.typ), nil
}

// stepAfter is the step of an event of type typ once applied. ping and
// event types added later need nothing. Before any content block,
// message_start and ping open the message and carry nothing for the user
// yet.
func (s *stream) stepAfter(typ string) neutral.Step {
	opening := (typ == "message_start" || typ == "ping") && len(s.blocks) == 0
	// A tool_use block's start is where its call begins.
	call := typ == "content_block_start" && s.blocks[len(s.blocks)-1].call >= 0
	return neutral.Step{Hold: call, Done: s.done, Opening: opening}
}

// apply takes what one decoded event says into the stream.
func (s *stream) apply(e *event) error {
	switch e.typ {
	case "message_start":
		if e.message {
			s.id = e.msgID
			if e.msgUsage != nil {
				s.usage = e.msgUsage.usage()
			}
		}
	case "content_block_start":
		return s.startBlock(e)
	case "content_block_delta":
		b, err := s.block(e)
		if err != nil {
			return err
		}
		d, err := s.dec.blockDelta(e.delta)
		if err != nil {
			return err
		}
		return b.apply(&d)
	case "content_block_stop":
		_, err := s.block(e)
		return err
	case "message_delta":
		stop, set, err := stopReason(e.delta)
		if err != nil {
			return err
		}
		if set {
			s.stop = stop
		}
		// Usage here is cumulative for the whole message, so it replaces.
		if e.usage.hasOut {
			s.usage.Output = e.usage.out
		}
		if e.usage.hasIn {
			s.usage.Input = e.usage.in
		}
	case "message_stop":
		s.done = true
	}
	return nil
}

func (s *stream) startBlock(e *event) error {
	// Blocks start in index order with no gaps, as the SDKs require; a
	// stream that does otherwise cannot be rendered with contiguous indexes.
	if !e.hasIndex || e.index != len(s.blocks) {
		return errStream("content_block_start out of order")
	}
	if len(s.blocks) >= maxBlocks {
		return errStream("more than %d content blocks", maxBlocks)
	}
	b, err := newBlock(bytes.Clone(e.block))
	if err != nil {
		return err
	}
	if b.typ == "tool_use" {
		b.call = s.calls
		s.calls++
	}
	s.blocks = append(s.blocks, b)
	return nil
}

// newBlock reads a content_block_start's block. Deltas add to what the
// start carried, as the SDKs assemble it.
func newBlock(start []byte) (*streamBlock, error) {
	obj, err := jsonx.SplitObject(start)
	if err != nil {
		return nil, errStream("content_block_start without a content block")
	}
	b := &streamBlock{start: start, call: -1}
	for _, f := range obj {
		var dst *string
		var buf *[]byte
		switch f.Key {
		case "type":
			dst = &b.typ
		case "id":
			dst = &b.id
		case "name":
			dst = &b.name
		case "text":
			buf = &b.text
		case "thinking":
			buf = &b.thinking
		case "signature":
			buf = &b.signature
		case "input":
			b.startInput = f.Value
			continue
		default:
			if err := folded(f.Key); err != nil {
				return nil, errStream("content_block_start: %v", err)
			}
			continue
		}
		v, ok := stringOf(f.Value)
		if f.Key == "type" {
			v, ok = typeOf(f.Value)
		}
		if !ok {
			return nil, errStream("content_block_start: %s is not a string", f.Key)
		}
		if dst != nil {
			*dst = v
		} else {
			*buf = []byte(v)
		}
	}
	return b, nil
}

// apply adds one content_block_delta to the block.
func (b *streamBlock) apply(d *blockDelta) error {
	var ok = true
	switch d.typ {
	case "text_delta":
		b.text, ok = jsonx.AppendUnescaped(b.text, d.text)
	case "thinking_delta":
		b.thinking, ok = jsonx.AppendUnescaped(b.thinking, d.thinking)
	case "signature_delta":
		b.signature, ok = jsonx.AppendUnescaped(b.signature, d.signature)
	case "citations_delta":
		if !jsonx.IsNull(d.citation) {
			b.citations = append(b.citations, bytes.Clone(d.citation))
		}
	case "input_json_delta":
		if b.typ == "text" || b.typ == "thinking" || b.typ == "redacted_thinking" {
			return errStream("input_json_delta for a %s block", b.typ)
		}
		if !d.hasPartial {
			return errStream("input_json_delta without partial_json")
		}
		b.sawInput = true
		b.input, ok = jsonx.AppendUnescaped(b.input, d.partial)
	}
	if !ok {
		return errStream("content_block_delta: a string that JSON cannot hold")
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
	if len(b.startInput) > 0 {
		return b.startInput
	}
	return []byte("{}")
}

// Usage implements api.Stream.
func (s *stream) Usage() neutral.Usage { return s.usage }

// Turns implements api.Stream: a message is always one turn. Calls of the
// abstain exit are function calls like any other once InjectTool offered
// it, since the stream reads the codec's tools when asked.
func (s *stream) Turns() []*neutral.Turn {
	t := &neutral.Turn{ResponseID: s.id, Usage: s.usage}
	var text []byte
	for _, b := range s.blocks {
		switch b.typ {
		case "text":
			text = append(text, b.text...)
		case "tool_use":
			t.Calls = append(t.Calls, s.c.callOf(b.id, b.name, b.args()))
		}
	}
	t.Text = string(text)
	t.Stop = stopOf(s.stop)
	t.Raw = s.content()
	return []*neutral.Turn{t}
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
