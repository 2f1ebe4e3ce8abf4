package anthropic

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// refStream reads events with encoding/json the way the stream read them
// before its one-pass decoder: a head decode for the type, a decode of the
// whole event into a union of the read events' fields, and one more of the
// delta. The one-pass decoder must accept and refuse the same events and
// assemble the same message, except where a key differs from a key it
// reads only in letter case, which it refuses.
type refStream struct {
	id     string
	usage  neutral.Usage
	stop   string
	blocks []*refBlock
	done   bool
}

type refBlock struct {
	typ, id, name              string
	text, thinking, sig, input []byte
	startInput                 json.RawMessage
	citations                  int
	sawInput                   bool
}

type refEvent struct {
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

func (s *refStream) feed(ev *sse.Event) bool {
	if s.done || ev.Comment || len(ev.Data) == 0 {
		return true
	}
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(ev.Data, &head) != nil {
		return false
	}
	typ := head.Type
	if typ == "" {
		typ = string(ev.Event)
	}
	var e refEvent
	if readEvent(typ) && json.Unmarshal(ev.Data, &e) != nil {
		return false
	}
	switch typ {
	case "message_start":
		if e.Message != nil {
			s.id = e.Message.ID
			if u := e.Message.Usage; u != nil {
				s.usage = neutral.Usage{Input: u.InputTokens, Output: u.OutputTokens}
			}
		}
	case "content_block_start":
		return s.start(&e)
	case "content_block_delta":
		if e.Index == nil || *e.Index < 0 || *e.Index >= len(s.blocks) {
			return false
		}
		return s.blocks[*e.Index].apply(e.Delta)
	case "content_block_stop":
		return e.Index != nil && *e.Index >= 0 && *e.Index < len(s.blocks)
	case "message_delta":
		var d struct {
			StopReason *string `json:"stop_reason"`
		}
		if len(e.Delta) > 0 && json.Unmarshal(e.Delta, &d) != nil {
			return false
		}
		if d.StopReason != nil {
			s.stop = *d.StopReason
		}
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
		return false
	}
	return true
}

func (s *refStream) start(e *refEvent) bool {
	if e.Index == nil || *e.Index != len(s.blocks) || len(s.blocks) >= maxBlocks {
		return false
	}
	var head struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Input     json.RawMessage `json:"input"`
	}
	if _, err := jsonx.ParseObject(e.ContentBlock); err != nil || json.Unmarshal(e.ContentBlock, &head) != nil {
		return false
	}
	s.blocks = append(s.blocks, &refBlock{typ: head.Type, id: head.ID, name: head.Name, text: []byte(head.Text),
		thinking: []byte(head.Thinking), sig: []byte(head.Signature), startInput: head.Input})
	return true
}

func (b *refBlock) apply(raw json.RawMessage) bool {
	var d struct {
		Type        string          `json:"type"`
		Text        *string         `json:"text"`
		Thinking    *string         `json:"thinking"`
		Signature   *string         `json:"signature"`
		PartialJSON *string         `json:"partial_json"`
		Citation    json.RawMessage `json:"citation"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return false
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
			b.sig = append(b.sig, *d.Signature...)
		}
	case "citations_delta":
		if !jsonx.IsNull(d.Citation) {
			b.citations++
		}
	case "input_json_delta":
		if b.typ == "text" || b.typ == "thinking" || b.typ == "redacted_thinking" || d.PartialJSON == nil {
			return false
		}
		b.sawInput = true
		b.input = append(b.input, *d.PartialJSON...)
	}
	return true
}

// compareDecoders feeds the same events to a stream and to the reference
// and fails where they differ.
func compareDecoders(t *testing.T, data []byte) {
	st := newCodec().NewStream().(*stream)
	ref := &refStream{}
	rd := sse.NewReader(bytes.NewReader(data), 1<<16)
	for rd.Next() {
		ev := rd.Event()
		_, err := st.Feed(&ev)
		want := ref.feed(&ev)
		if err != nil && want && (eventKeys.In(ev.Data) || api.ProtocolKeys.In(ev.Data)) {
			// A folded key is refused, where encoding/json read it as the
			// key or, for a protocol key the stream does not read, not at
			// all.
			return
		}
		if (err == nil) != want {
			t.Fatalf("event %q: stream error %v, reference accepts %v", ev.Data, err, want)
		}
		if err != nil {
			return
		}
	}
	if st.id != ref.id || st.usage != ref.usage || st.stop != ref.stop || st.done != ref.done || len(st.blocks) != len(ref.blocks) {
		t.Fatalf("message: id %q/%q usage %+v/%+v stop %q/%q done %v/%v blocks %d/%d",
			st.id, ref.id, st.usage, ref.usage, st.stop, ref.stop, st.done, ref.done, len(st.blocks), len(ref.blocks))
	}
	for i, b := range st.blocks {
		r := ref.blocks[i]
		if b.typ != r.typ || b.id != r.id || b.name != r.name || !bytes.Equal(b.text, r.text) || !bytes.Equal(b.thinking, r.thinking) ||
			!bytes.Equal(b.signature, r.sig) || !bytes.Equal(b.input, r.input) || b.sawInput != r.sawInput ||
			len(b.citations) != r.citations || !bytes.Equal(b.startInput, r.startInput) {
			t.Fatalf("block %d: %+v, reference %+v", i, b, r)
		}
	}
}

// decodeCases are events at the edges of what the decoder reads.
var decodeCases = [][]string{
	{"\t"}, {" \r"},
	{`null`, " null\t", `{"type":"message_start","message":null}`, `{"type":"message_start","message":{"id":null,"usage":null}}`},
	{evStart, `{"type":"message_start","message":{"id":"b"},"message":null}`, `{"type":"message_stop","x":[1,{"y":2}]}`},
	{evStart, `{"type":"message_delta","delta":null,"usage":{"input_tokens":null,"output_tokens":3}}`},
	{`{"type":"message_start","message":{"id":"m","Content":[]}}`},
	{evStart, `{"type":"message_delta","delta":{"stop_reason":null,"stop_sequence":5}}`},
	{evStart, `{"type":"message_delta","delta":{"stop_reason":"a","stop_reason":null}}`},
	{evStart, `{"type":"message_delta","usage":{"output_tokens":1.5}}`},
	{evStart, `{"type":"message_delta","usage":{"output_tokens":"7"}}`},
	{evStart, `{"type":"message_delta","usage":5}`},
	{evStart, `{"type":"message_delta","delta":[]}`},
	{evStart, `{"type":"future","index":"x","delta":5,"usage":[]}`},
	{evStart, `{"type":5}`},
	{evStart, evToolHead, `{"typ\u0065":"content_block_delta","ind\u0065x":0,"d\u0065lta":{"typ\u0065":"input_json_delta","partial_json":"{}"}}`},
	{evStart, `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":-0}}`, `{"type":"message_stop"}`},
	{evStart, `{"type":"message_delta","usage":{"output_tokens":99999999999999999999}}`},
	{evStart, "\ufeff{\"type\":\"message_stop\"}"},
	{evStart, `[]`},
	{evStart, `{"type":"ping","type":7}`},
	{evStart, `{"type":"content_block_stop","index":0,"delta":5}`},
	{evStart, evToolHead, `{"type":"content_block_delta","index":0}`},
	{evStart, evToolHead, `{"type":"content_block_delta","index":0,"delta":null}`},
	{evStart, evToolHead, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","thinking":5}}`},
	{evStart, evToolHead, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"a","partial_json":null}}`},
	{evStart, evToolHead, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\ud800\u00e9\"\\"}}`},
	{evStart, evToolHead, `{"type":"content_block_delta","index":0.0,"delta":{"type":"input_json_delta","partial_json":""}}`},
	{evStart, evToolHead, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"","stop_reason":5}}`},
	{evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":7}}`},
	{evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","input":null}}`, evStop0, evDelta},
	{evStart, `{"type":"content_block_start","index":0,"content_block":[]}`},
	{evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"a\u0000b"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":null}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"a":1}}}`},
	{"{\"type\":\"message_start\",\"message\":{\"id\":\"\xff\xfe\"}}"},
}

func TestStreamDecoderMatchesEncodingJSON(t *testing.T) {
	for _, events := range decodeCases {
		compareDecoders(t, streamOf(events...))
	}
	for _, name := range []string{"tool_use_stream.sse", "parallel_tool_use_stream.sse"} {
		compareDecoders(t, fixture(t, name))
	}
	compareDecoders(t, []byte(mixedStream))
}

// A key the stream reads, in another letter case, is refused: encoding/json
// took it for the key, the agent's SDK does not.
func TestStreamRefusesFoldedKeys(t *testing.T) {
	for _, ev := range []string{
		`{"TYPE":"message_stop"}`,
		`{"type":"content_block_delta","Index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","Partial_json":"{}"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","Thinking":"x"}}`,
		`{"type":"message_delta","delta":{"Stop_reason":"end_turn"}}`,
		`{"type":"message_delta","usage":{"Output_tokens":3}}`,
		`{"type":"message_start","message":{"ID":"msg_2"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","NAME":"x","input":{}}}`,
	} {
		st := newCodec().NewStream()
		var err error
		for _, e := range []string{evStart, evToolHead, ev} {
			if err != nil {
				break
			}
			_, err = st.Feed(&sse.Event{Event: []byte("x"), Data: []byte(e)})
		}
		if err == nil || !strings.Contains(err.Error(), "letter case") {
			t.Errorf("%s: %v", ev, err)
		}
	}
}

func FuzzStreamDecoder(f *testing.F) {
	for _, events := range decodeCases {
		f.Add(streamOf(events...))
	}
	f.Add(fixture(f, "parallel_tool_use_stream.sse"))
	f.Add([]byte(mixedStream))
	f.Fuzz(compareDecoders)
}

// A delta event is read in one pass with no allocation of its own: the
// reflection decoder it replaced took several per event.
func TestStreamDeltaDecodesWithoutAllocating(t *testing.T) {
	st := newCodec().NewStream()
	for _, e := range []string{evStart, evToolHead, partial(`{"a":1}`)} {
		if _, err := st.Feed(&sse.Event{Event: []byte("x"), Data: []byte(e)}); err != nil {
			t.Fatal(err)
		}
	}
	ev := sse.Event{Event: []byte("content_block_delta"), Data: []byte(partial(""))}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := st.Feed(&ev); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per content_block_delta", allocs)
	}
}
