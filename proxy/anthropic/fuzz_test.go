package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// chunked hands out its data in pieces whose sizes come from splits, so a
// fuzzer controls where reads end: inside a line, an event, a UTF-8 rune.
type chunked struct {
	data   []byte
	splits []byte
	n      int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	size := len(c.data)
	if len(c.splits) > 0 {
		size = int(c.splits[c.n%len(c.splits)]) + 1
		c.n++
	}
	size = min(size, len(p), len(c.data))
	copy(p, c.data[:size])
	c.data = c.data[size:]
	return size, nil
}

// oracle works out independently, from the events the stream accepted,
// what each call's arguments must be: the concatenated partial_json of its
// block, or the start's input when nothing was concatenated.
type oracle struct {
	indexOf map[int]int // block index -> call position
	starts  [][]byte
	concat  [][]byte
}

func (o *oracle) accept(ev *sse.Event) {
	if ev.Comment || len(ev.Data) == 0 {
		return
	}
	var e struct {
		Type         string          `json:"type"`
		Index        *int            `json:"index"`
		ContentBlock json.RawMessage `json:"content_block"`
		Delta        json.RawMessage `json:"delta"`
	}
	if json.Unmarshal(ev.Data, &e) != nil || e.Index == nil {
		return
	}
	typ := e.Type
	if typ == "" {
		typ = string(ev.Event)
	}
	switch typ {
	case "content_block_start":
		var cb struct {
			Type  string          `json:"type"`
			Input json.RawMessage `json:"input"`
		}
		if json.Unmarshal(e.ContentBlock, &cb) == nil && cb.Type == "tool_use" {
			o.indexOf[*e.Index] = len(o.concat)
			o.concat = append(o.concat, nil)
			o.starts = append(o.starts, cb.Input)
		}
	case "content_block_delta":
		var d struct {
			Type        string  `json:"type"`
			PartialJSON *string `json:"partial_json"`
		}
		k, ok := o.indexOf[*e.Index]
		if ok && json.Unmarshal(e.Delta, &d) == nil && d.Type == "input_json_delta" && d.PartialJSON != nil {
			o.concat[k] = append(o.concat[k], *d.PartialJSON...)
		}
	}
}

func (o *oracle) want(k int) []byte {
	if len(o.concat[k]) > 0 {
		return o.concat[k]
	}
	if len(o.starts[k]) > 0 {
		return o.starts[k]
	}
	return []byte("{}")
}

func FuzzAnthropicStream(f *testing.F) {
	for _, name := range []string{"tool_use_stream.sse", "parallel_tool_use_stream.sse"} {
		b := fixture(f, name)
		f.Add(b, []byte{0})
		f.Add(b, []byte{7, 200, 3, 1})
	}
	f.Add([]byte(mixedStream), []byte{13, 255, 2})
	f.Add(streamOf(evStart, evToolHead, partial(""), partial(`{"a":`), partial(`"\u00e9"}`), evStop0, evDelta, evMsgStop), []byte{5})
	f.Add(streamOf(evStart, evToolHead, evStop0, evDelta, evMsgStop), []byte{})
	f.Add([]byte("event: content_block_start\ndata: {\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}\r\n\r\n"), []byte{1})

	body := string(fixture(f, "request.json"))
	f.Fuzz(func(t *testing.T, data, splits []byte) {
		c, _ := mustDecode(t, body)
		fuzzBody(t, c, data, splits)
	})
}

// fuzzBody feeds data, read in pieces cut by splits, through a stream as
// the pipeline does, then checks what the stream assembled.
func fuzzBody(t *testing.T, c *codec, data, splits []byte) {
	st := c.NewStream()
	o := &oracle{indexOf: map[int]int{}}
	rd := sse.NewReader(&chunked{data: data, splits: splits}, 1<<16)
	var held []neutral.HeldEvent
	holding := false
	for rd.Next() {
		ev := rd.Event()
		step, err := st.Feed(&ev)
		if err != nil {
			break
		}
		o.accept(&ev)
		if step.Hold {
			holding = true
		}
		if holding {
			held = append(held, neutral.HeldEvent{Raw: bytes.Clone(ev.Raw), Event: string(ev.Event), Data: bytes.Clone(ev.Data)})
		}
		if step.Done {
			break
		}
	}
	turns := st.Turns()
	if len(turns) != 1 {
		t.Fatalf("%d turns", len(turns))
	}
	calls := turns[0].Calls
	if len(calls) != len(o.concat) {
		t.Fatalf("%d calls, %d tool_use blocks accepted", len(calls), len(o.concat))
	}
	for k, c := range calls {
		if !bytes.Equal(c.Args, o.want(k)) {
			t.Fatalf("call %d args %q, the stream sent %q", k, c.Args, o.want(k))
		}
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(turns[0].Raw.(content), &raw); err != nil {
		t.Fatalf("replay content is not a JSON array: %v", err)
	}
	// Encoding must never panic, whatever was held.
	esc := &neutral.Escalated{ID: "esc_f", Code: "unknown_tool", Body: []byte(`{"id":"esc_f"}`), Text: "x"}
	finals := [][]neutral.Action{
		nil,
		changed(calls, make([]bool, len(calls))...),
		{{Kind: neutral.Respond, Text: "none fits"}},
		{{Kind: neutral.Respond, Text: esc.Text, Escalation: esc}},
	}
	if len(calls) > 0 {
		fixed := append([]neutral.ToolCall(nil), calls...)
		fixed[0] = neutral.ToolCall{ID: calls[0].ID, Name: "get_current_weather", Args: []byte(`{"location":"Boston"}`)}
		marks := make([]bool, len(calls))
		marks[0] = true
		finals = append(finals, changed(fixed, marks...))
	}
	for i, fs := range finals {
		out, err := st.Encode(held, fs, api.Sent{})
		// Nothing changed: what the client gets is what was held.
		if i <= 1 && (err != nil || !bytes.Equal(out, joinHeld(held))) {
			t.Fatalf("encoding without changes differs (%v)", err)
		}
	}
	_ = st.ErrorEvent(neutral.Failure{Code: neutral.CodeUpstream, Message: "x"}, nil, api.Sent{})
	_ = st.Usage()
}
