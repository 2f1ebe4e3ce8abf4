package openaichat

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// chopReader hands out its data in reads whose sizes the fuzzer picks, so
// events, lines, JSON strings and UTF-8 sequences get cut anywhere.
type chopReader struct {
	data   []byte
	sizes  []byte
	next   int
	wasNil bool
}

func (c *chopReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.next%len(c.sizes)] % 41)
		c.next++
	}
	// One empty read is legal; two in a row would only exercise the
	// Reader's no-progress guard.
	if n == 0 && c.wasNil {
		n = 1
	}
	c.wasNil = n == 0
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// refUnquote decodes a JSON string literal the way a fragment must be read:
// escapes are decoded and every other byte is kept as it is, so that a
// character split across two fragments is whole again once they are
// joined. jsonx fuzzes AppendEscapesDecoded against encoding/json.
func refUnquote(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	out, ok := jsonx.AppendEscapesDecoded(nil, lit[1:len(lit)-1])
	return string(out), ok
}

// refCall and refState reassemble calls from chunks independently of the
// Stream, with the fragment reading refUnquote defines.
type refCall struct {
	name     string
	args     []byte
	badShape bool
}

type refState struct {
	choices map[int][]*refCall
	// hold: the chunk applied last carried a call delta.
	hold bool
}

func (r *refState) apply(data []byte) {
	var ch struct {
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				ToolCalls []struct {
					Index    int `json:"index"`
					Function *struct {
						Name      *string         `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
					Custom *struct {
						Name  *string `json:"name"`
						Input *string `json:"input"`
					} `json:"custom"`
				} `json:"tool_calls"`
				FunctionCall *struct {
					Name      *string         `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function_call"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &ch) != nil {
		return
	}
	for _, c := range ch.Choices {
		if fc := c.Delta.FunctionCall; fc != nil {
			// The legacy form's one call, at index 0.
			r.hold = true
			calls := r.choices[c.Index]
			if len(calls) == 0 {
				calls = append(calls, &refCall{})
			}
			r.choices[c.Index] = calls
			rc := calls[0]
			if fc.Name != nil {
				rc.name += *fc.Name
			}
			if a := fc.Arguments; len(a) > 0 && string(a) != "null" {
				if s, ok := refUnquote(a); ok {
					rc.args = append(rc.args, s...)
				} else {
					rc.badShape = true
				}
			}
		}
		for _, tc := range c.Delta.ToolCalls {
			r.hold = true
			calls := r.choices[c.Index]
			for len(calls) <= tc.Index {
				calls = append(calls, &refCall{})
			}
			r.choices[c.Index] = calls
			rc := calls[tc.Index]
			switch {
			case tc.Function != nil:
				if tc.Function.Name != nil {
					rc.name += *tc.Function.Name
				}
				a := tc.Function.Arguments
				if len(a) == 0 || string(a) == "null" {
					break
				}
				if s, ok := refUnquote(a); ok {
					rc.args = append(rc.args, s...)
				} else {
					rc.badShape = true
				}
			case tc.Custom != nil:
				if tc.Custom.Name != nil {
					rc.name += *tc.Custom.Name
				}
				if tc.Custom.Input != nil {
					rc.args = append(rc.args, *tc.Custom.Input...)
				}
			}
		}
	}
}

// runFuzzStream feeds src to a new Stream as the proxy driver would and
// checks every step against the reference. It returns the stream and the
// events read, or ok=false when Feed refused an event (the driver then
// fails the stream and never asks for Turns).
// carries reports whether a chunk, read as the full decoder reads it,
// has anything for the client: text, a refusal, reasoning, a call, a
// finish or usage. A chunk Feed calls opening must have none of it.
func carries(data []byte) bool {
	var ch chunk
	if json.Unmarshal(data, &ch) != nil {
		return true
	}
	if ch.Usage != nil {
		return true
	}
	for _, c := range ch.Choices {
		d := c.Delta
		for _, p := range []*string{d.Content, d.Refusal, d.ReasoningContent} {
			if p != nil && *p != "" {
				return true
			}
		}
		if len(d.ToolCalls) > 0 || d.FunctionCall != nil || c.FinishReason != nil {
			return true
		}
	}
	return false
}

func runFuzzStream(t *testing.T, src io.Reader) (st api.Stream, evs []fed, ok bool) {
	st = API{}.NewCodec().NewStream()
	ref := &refState{choices: map[int][]*refCall{}}
	rd := sse.NewReader(src, 1<<16)
	for rd.Next() {
		ev := rd.Event()
		step, err := st.Feed(&ev)
		if err != nil {
			// Also exercise what the driver calls after a failure.
			_ = st.ErrorEvent(neutral.Failure{Code: neutral.CodeUpstream, Message: "x"}, nil, api.Sent{})
			return st, evs, false
		}
		ref.hold = false
		if !ev.Comment && len(ev.Data) > 0 && string(ev.Data) != "[DONE]" {
			ref.apply(ev.Data)
		}
		// The pipeline latches Hold, so the stream reports it of exactly
		// the chunks that carry a call delta, and of nothing else.
		if step.Hold != ref.hold {
			t.Fatalf("Hold = %v after %q, want %v", step.Hold, ev.Raw, ref.hold)
		}
		if step.Opening && carries(ev.Data) {
			t.Fatalf("Opening said of %q, which carries something", ev.Raw)
		}
		evs = append(evs, fed{raw: bytes.Clone(ev.Raw), data: bytes.Clone(ev.Data), step: step})
		if step.Done {
			break
		}
	}
	for i, turn := range st.Turns() {
		want := ref.choices[i]
		if len(turn.Calls) != len(want) {
			t.Fatalf("choice %d: %d calls, reference %d", i, len(turn.Calls), len(want))
		}
		for j, c := range turn.Calls {
			w := want[j]
			if !bytes.Equal(c.Args, w.args) {
				t.Fatalf("choice %d call %d: Args %q, but its fragments join to %q", i, j, c.Args, w.args)
			}
			if c.Name != w.name {
				t.Fatalf("choice %d call %d: Name %q, fragments join to %q", i, j, c.Name, w.name)
			}
			if w.badShape && !c.BadShape {
				t.Fatalf("choice %d call %d: a non-string arguments fragment was not flagged", i, j)
			}
		}
	}
	return st, evs, true
}

func FuzzChatStream(f *testing.F) {
	for _, name := range []string{"tool_call_stream.sse", "parallel_tool_calls_stream.sse", "tool_call_stream_include_usage.sse"} {
		b := readFixture(f, name)
		f.Add(b, []byte{})
		f.Add(b, []byte{1})
		f.Add(b, []byte{7, 0, 13, 40, 3})
		f.Add(bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")), []byte{5, 2})
	}
	split := chunkLine(callStart, "") + ": keep-alive\n\n\n" + chunkLine(argFrag("\"{\\\"city\\\":\\\"M\xc3\""), "") +
		chunkLine(argFrag(`"`+"\xbc"+`nchen \ud83d\ude00 \ud800x\"}"`), "") + chunkLine(`{}`, "tool_calls") + "data: [DONE]\n\n"
	f.Add([]byte(split), []byte{3, 1})
	f.Add([]byte(chunkLine(`{"content":"hi"}`, "")+chunkLine(callStart, "")+chunkLine(argFrag(`{"a":1}`), "length")), []byte{2})
	// The legacy form: delta.function_call, alone, cut inside a character,
	// with text before it, after tool_calls (refused) and with arguments
	// that are not a string.
	legacy := legacyStream(`"{"city":"M`+"Ã"+`"`, `"`+"¼"+`nchen"}"`)
	f.Add([]byte(legacy), []byte{})
	f.Add([]byte(legacy), []byte{3, 9, 1})
	f.Add([]byte(chunkLine(`{"content":"ok"}`, "")+legacy), []byte{11})
	f.Add([]byte(chunkLine(callStart, "")+legacy), []byte{})
	f.Add([]byte(legacyStream(`{"city":1}`, `null`)), []byte{4})

	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		checkFollowedAsWhole(t, data)
		st, evs, ok := runFuzzStream(t, &chopReader{data: data, sizes: sizes})
		whole, _, okWhole := runFuzzStream(t, bytes.NewReader(data))
		if ok != okWhole {
			t.Fatalf("how the input was cut changed whether it was readable: %v vs %v", ok, okWhole)
		}
		if !ok {
			return
		}
		a, b := st.Turns(), whole.Turns()
		if len(a) != len(b) {
			t.Fatalf("cut input gives %d turns, whole input %d", len(a), len(b))
		}
		for i := range a {
			if len(a[i].Calls) != len(b[i].Calls) || a[i].Text != b[i].Text {
				t.Fatalf("turn %d differs with the cut", i)
			}
		}

		// Encode must not panic whatever it is given to rewrite; errors
		// are allowed (the driver turns them into an error event).
		_, held := heldFrom(evs)
		actions := make([]neutral.Action, len(a))
		for i, turn := range a {
			act := neutral.Action{Kind: neutral.Replace,
				Calls: append([]neutral.ToolCall(nil), turn.Calls...), Changed: make([]bool, len(turn.Calls))}
			for j := range act.Calls {
				if j%2 == 0 {
					act.Calls[j] = neutral.ToolCall{ID: turn.Calls[j].ID, Name: "get_stock_price", Args: []byte(`{"ticker":"X"}`)}
					act.Changed[j] = true
				}
			}
			if i == 1 {
				esc := &neutral.Escalated{ID: "esc_f", Body: []byte(`{"id":"esc_f"}`), Text: "needs a person [toolgate:esc_f]"}
				act = neutral.Action{Kind: neutral.Respond, Text: esc.Text, Escalation: esc}
			}
			actions[i] = act
		}
		if out, err := st.Encode(held, actions, api.Sent{}); err == nil && len(held) > 0 && string(held[len(held)-1].Data) == "[DONE]" &&
			!bytes.HasSuffix(out, held[len(held)-1].Raw) {
			t.Fatalf("Encode lost the terminal event")
		}
	})
}

func BenchmarkChatStreamFeed(b *testing.B) {
	data := readFixture(b, "parallel_tool_calls_stream.sse")
	var evs []sse.Event
	rd := sse.NewReader(bytes.NewReader(data), 0)
	for rd.Next() {
		ev := rd.Event()
		evs = append(evs, sse.Event{Raw: bytes.Clone(ev.Raw), Data: bytes.Clone(ev.Data), Event: ev.Event, Comment: ev.Comment})
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		st := API{}.NewCodec().NewStream()
		for i := range evs {
			if _, err := st.Feed(&evs[i]); err != nil {
				b.Fatal(err)
			}
		}
		if turns := st.Turns(); len(turns) != 1 || len(turns[0].Calls) != 2 {
			b.Fatalf("turns %v", turns)
		}
	}
	b.ReportMetric(float64(len(evs)), "events/op")
}

// checkFollowedAsWhole feeds a stream twice: as it comes, where each chunk
// is read against the last and by the last one's plan, and with every
// chunk read whole. Each step, refusal and the turns must be the same.
func checkFollowedAsWhole(t *testing.T, data []byte) {
	t.Helper()
	followed, whole := API{}.NewCodec().NewStream(), API{}.NewCodec().NewStream()
	rd := sse.NewReader(bytes.NewReader(data), 1<<16)
	for rd.Next() {
		ev := rd.Event()
		step, err := followed.Feed(&ev)
		whole.(*stream).last = jsonx.Text{}
		wstep, werr := whole.Feed(&ev)
		if step != wstep || (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("%q: followed %+v, %v; read whole %+v, %v", ev.Raw, step, err, wstep, werr)
		}
		if err != nil || step.Done || step.UpstreamError {
			break
		}
	}
	a, b := followed.Turns(), whole.Turns()
	if len(a) != len(b) || followed.Usage() != whole.Usage() {
		t.Fatalf("followed: %d turns, usage %+v; whole: %d, %+v", len(a), followed.Usage(), len(b), whole.Usage())
	}
	for i := range a {
		if a[i].Text != b[i].Text || a[i].Stop != b[i].Stop || a[i].ResponseID != b[i].ResponseID || len(a[i].Calls) != len(b[i].Calls) {
			t.Fatalf("turn %d: followed %+v, whole %+v", i, a[i], b[i])
		}
		for j, c := range a[i].Calls {
			w := b[i].Calls[j]
			if c.ID != w.ID || c.Name != w.Name || !bytes.Equal(c.Args, w.Args) || c.Kind != w.Kind || c.BadShape != w.BadShape {
				t.Fatalf("turn %d call %d: followed %+v, whole %+v", i, j, c, w)
			}
		}
	}
}

// TestFollowedAsWhole runs checkFollowedAsWhole over the recordings and
// over chunks that change what the plan decided on: a call's type, an
// empty text, a finish reason, an id.
func TestFollowedAsWhole(t *testing.T) {
	for _, name := range []string{"tool_call_stream.sse", "parallel_tool_calls_stream.sse", "tool_call_stream_include_usage.sse"} {
		checkFollowedAsWhole(t, readFixture(t, name))
	}
	call := func(typ, args string) string {
		return `data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"` + typ + `","function":{"arguments":"` + args + `"}}]},"finish_reason":null}]}` + "\n\n"
	}
	text := func(id, content, finish string) string {
		return `data: {"id":"` + id + `","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":"` + finish + `"}]}` + "\n\n"
	}
	for _, stream := range []string{
		call("function", "{") + call("function", `\"a\"`) + call("functioN", ":1}") + "data: [DONE]\n\n",
		call("function", "{") + call("custom", "x") + "data: [DONE]\n\n",
		text("c", "", "") + text("c", "hi", "") + text("c", "", "") + text("d", "", "stop") + "data: [DONE]\n\n",
		text("c", "a", "length") + text("c", "a", "stop") + text("c", "a", "stop") + "data: [DONE]\n\n",
		text("c", "a", "") + strings.Replace(text("c", "a", ""), `"content"`, `"zontent"`, 1) + "data: [DONE]\n\n",
		call("function", "{") + call("function", "{") + call("functioN", "{") + "data: [DONE]\n\n",
	} {
		checkFollowedAsWhole(t, []byte(stream))
	}
}
