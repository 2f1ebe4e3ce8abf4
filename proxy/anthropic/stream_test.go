package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// fed is a stream run through Feed as the pipeline runs it: events before
// the first Hold go out at once, the rest are held.
type fed struct {
	st   api.Stream
	sent []byte
	held []neutral.HeldEvent
	// holdAt is the number of events read before the first held one.
	holdAt int
	done   bool
	steps  []neutral.Step
}

// feedAll runs stream through a stream of c, or of a codec that read no
// request when c is nil.
func feedAll(t *testing.T, c *codec, stream []byte) *fed {
	t.Helper()
	if c == nil {
		c = newCodec()
	}
	f := &fed{st: c.NewStream(), holdAt: -1}
	rd := sse.NewReader(bytes.NewReader(stream), 0)
	n := 0
	for rd.Next() {
		ev := rd.Event()
		step, err := f.st.Feed(&ev)
		if err != nil {
			t.Fatalf("event %d: %v", n, err)
		}
		f.steps = append(f.steps, step)
		if step.Hold && f.holdAt < 0 {
			f.holdAt = n
		}
		if f.holdAt >= 0 {
			f.held = append(f.held, neutral.HeldEvent{Raw: bytes.Clone(ev.Raw), Event: string(ev.Event), Data: bytes.Clone(ev.Data)})
		} else {
			f.sent = append(f.sent, ev.Raw...)
		}
		n++
		if step.Done {
			f.done = true
			break
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	return f
}

// sdkAccumulate reads a whole stream the way a client using the official
// Go SDK does, failing on anything the SDK refuses.
func sdkAccumulate(t *testing.T, stream []byte) sdk.Message {
	t.Helper()
	var msg sdk.Message
	rd := sse.NewReader(bytes.NewReader(stream), 0)
	for rd.Next() {
		ev := rd.Event()
		if len(ev.Data) == 0 {
			continue
		}
		var e sdk.MessageStreamEventUnion
		if err := e.UnmarshalJSON(ev.Data); err != nil {
			t.Fatalf("sdk: %v: %s", err, ev.Data)
		}
		if err := msg.Accumulate(e); err != nil {
			t.Fatalf("sdk accumulate: %v\n%s", err, stream)
		}
	}
	return msg
}

func TestStreamFixtureReplay(t *testing.T) {
	req, _ := mustDecode(t, string(fixture(t, "request.json")))
	for _, tc := range []struct{ sse, twin string }{
		{"tool_use_stream.sse", "tool_use.json"},
		{"parallel_tool_use_stream.sse", "parallel_tool_use.json"},
	} {
		stream := fixture(t, tc.sse)
		f := feedAll(t, req, stream)
		if !f.done {
			t.Fatalf("%s: message_stop not seen", tc.sse)
		}
		if !bytes.HasPrefix(f.held[0].Data, []byte(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use"`)) {
			t.Errorf("%s: hold began at %s", tc.sse, f.held[0].Data)
		}
		if !bytes.Contains(f.sent, []byte("text_delta")) || !bytes.Contains(f.sent, []byte("event: ping")) {
			t.Errorf("%s: text before the call was not sent at once", tc.sse)
		}
		turns := f.st.Turns()
		twin, _ := newCodec().DecodeAnswer(fixture(t, tc.twin))
		if len(turns) != 1 || len(turns[0].Calls) != len(twin.Choices[0].Calls) {
			t.Fatalf("%s: turns %+v", tc.sse, turns)
		}
		for i, c := range turns[0].Calls {
			w := twin.Choices[0].Calls[i]
			if c.Name != w.Name || c.Kind != neutral.Function || compact(t, c.Args) != compact(t, w.Args) || !strings.HasPrefix(c.ID, "toolu_") {
				t.Errorf("%s call %d: %+v, twin %+v", tc.sse, i, c, w)
			}
		}
		if turns[0].Text != twin.Choices[0].Text || turns[0].Truncated() {
			t.Errorf("%s: text %q", tc.sse, turns[0].Text)
		}
		if f.st.Usage() != twin.Usage || turns[0].Usage != twin.Usage {
			t.Errorf("%s: usage %+v, twin %+v", tc.sse, f.st.Usage(), twin.Usage)
		}
		for i, step := range f.steps {
			if step.Commits || step.Numbered {
				t.Errorf("event %d: a Messages stream is never committed nor numbered", i)
			}
		}
		// Every call is valid: encoding with no changes gives the held
		// bytes back exactly.
		var out []byte
		for _, acts := range [][]neutral.Action{nil, {{Kind: neutral.Keep}}, changed(turns[0].Calls, make([]bool, len(turns[0].Calls))...)} {
			var err error
			out, err = f.st.Encode(f.held, acts, api.Sent{})
			if err != nil || !bytes.Equal(out, joinHeld(f.held)) {
				t.Errorf("%s: encoding without changes differs (%v)", tc.sse, err)
			}
		}
		if !bytes.Equal(append(append([]byte(nil), f.sent...), out...), stream) {
			t.Errorf("%s: the client would not get the upstream's bytes", tc.sse)
		}
		// The rebuilt content replays the turn as the API accepts it.
		raw := turns[0].Raw.(content)
		var blocks []map[string]any
		if err := json.Unmarshal(raw, &blocks); err != nil || len(blocks) != len(turns[0].Calls)+1 {
			t.Fatalf("%s: raw %s", tc.sse, raw)
		}
		if blocks[0]["text"] != twin.Choices[0].Text || blocks[1]["type"] != "tool_use" {
			t.Errorf("%s: raw %s", tc.sse, raw)
		}
	}
}

// hallucinatedStream is the parallel stream with its first call renamed.
func hallucinatedStream(t *testing.T) []byte {
	b := fixture(t, "parallel_tool_use_stream.sse")
	out := bytes.Replace(b, []byte(`"name":"get_current_weather"`), []byte(`"name":"weather_lookup"`), 1)
	if bytes.Equal(out, b) {
		t.Fatal("fixture edit failed")
	}
	return out
}

func TestStreamRenderSubstitute(t *testing.T) {
	req, _ := mustDecode(t, string(fixture(t, "request.json")))
	f := feedAll(t, req, hallucinatedStream(t))
	calls := f.st.Turns()[0].Calls
	if calls[0].Name != "weather_lookup" {
		t.Fatalf("calls %+v", calls)
	}
	fixed := append([]neutral.ToolCall(nil), calls...)
	fixed[0] = neutral.ToolCall{ID: calls[0].ID, Name: "get_current_weather", Args: []byte(`{"location": "Boston, MA"}`)}
	out, err := f.st.Encode(f.held, changed(fixed, true, false), api.Sent{})
	if err != nil {
		t.Fatal(err)
	}
	// The second call's events, ping, message_delta and message_stop are
	// the upstream's bytes.
	for _, h := range f.held {
		if bytes.Contains(h.Data, []byte(`"index":1`)) {
			continue
		}
		if !bytes.Contains(out, h.Raw) {
			t.Errorf("unchanged event rewritten or lost: %s", h.Data)
		}
	}
	if bytes.Contains(out, []byte(`"partial_json":" \"Boston"`)) {
		t.Error("the original fragments of the replaced call were sent")
	}
	msg := sdkAccumulate(t, append(append([]byte(nil), f.sent...), out...))
	if len(msg.Content) != 3 || msg.StopReason != "tool_use" {
		t.Fatalf("client sees %s", msg.RawJSON())
	}
	b := msg.Content[1]
	if b.Type != "tool_use" || b.ID != calls[0].ID || b.Name != "get_current_weather" || string(b.Input) != `{"location":"Boston, MA"}` {
		t.Errorf("replaced call %+v input %s", b, b.Input)
	}
	b = msg.Content[2]
	if b.ID != calls[1].ID || b.Name != "get_stock_price" || compact(t, b.Input) != `{"ticker":"AAPL","exchange":"NASDAQ"}` {
		t.Errorf("sibling call %+v", b)
	}
}

func TestStreamRenderEscalatedAndAbstained(t *testing.T) {
	req, _ := mustDecode(t, string(fixture(t, "request.json")))
	esc := &neutral.Escalated{ID: "esc_7", Code: "unknown_tool", Body: []byte(`{"id":"esc_7"}`), Text: "Needs a person. [toolgate:esc_7]"}
	for _, final := range []neutral.Action{
		{Kind: neutral.Respond, Text: esc.Text, Escalation: esc},
		{Kind: neutral.Respond, Text: "No tool fits."},
	} {
		f := feedAll(t, req, hallucinatedStream(t))
		out, err := f.st.Encode(f.held, []neutral.Action{final}, api.Sent{})
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out, []byte("tool_use")) && !bytes.Contains(out, []byte(`"stop_reason":"end_turn"`)) {
			t.Errorf("rendered %s", out)
		}
		if !bytes.HasSuffix(out, []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")) {
			t.Errorf("message_stop not kept: %s", out)
		}
		msg := sdkAccumulate(t, append(append([]byte(nil), f.sent...), out...))
		if len(msg.Content) != 2 || msg.Content[1].Type != "text" || msg.StopReason != "end_turn" {
			t.Fatalf("client sees %s", msg.RawJSON())
		}
		want := final.Text
		if final.Escalation != nil {
			if !bytes.Contains(out, []byte(`"toolgate_escalation":{"id":"esc_7"}`)) {
				t.Error("escalation object missing from message_delta")
			}
		}
		if msg.Content[1].Text != want || msg.Usage.OutputTokens != 123 {
			t.Errorf("text %q usage %+v", msg.Content[1].Text, msg.Usage)
		}
	}
}

// mixedStream has thinking (with a signature), text, a server tool with its
// result, a tool_use, a second thinking block and another tool_use.
const mixedStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_mix","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":50,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"the weather."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3p"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Checking."}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: content_block_start
data: {"type":"content_block_start","index":3,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"boston\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":3}

event: content_block_start
data: {"type":"content_block_start","index":4,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://x","title":"x","encrypted_content":"e"}]}}

event: content_block_stop
data: {"type":"content_block_stop","index":4}

event: content_block_start
data: {"type":"content_block_start","index":5,"content_block":{"type":"tool_use","id":"toolu_W","name":"get_weather","input":{},"caller":{"type":"direct"}}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":5,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"Boston, MA\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":5}

event: content_block_start
data: {"type":"content_block_start","index":6,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":6,"delta":{"type":"thinking_delta","thinking":"Now stocks."}}

event: content_block_delta
data: {"type":"content_block_delta","index":6,"delta":{"type":"signature_delta","signature":"SIG2"}}

event: content_block_stop
data: {"type":"content_block_stop","index":6}

event: content_block_start
data: {"type":"content_block_start","index":7,"content_block":{"type":"tool_use","id":"toolu_S","name":"get_stock_price","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":7,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":7,"delta":{"type":"input_json_delta","partial_json":"{\"ticker\":\"AAPL\",\"exchange\":\"NASDAQ\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":7}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":99}}

event: message_stop
data: {"type":"message_stop"}

`

func TestStreamMixedBlocksAndThinkingReplay(t *testing.T) {
	req, _ := mustDecode(t, thinkingRequest)
	f := feedAll(t, req, []byte(mixedStream))
	if f.holdAt != 16 {
		t.Errorf("held from event %d, want the first tool_use start (16)", f.holdAt)
	}
	turn := f.st.Turns()[0]
	if len(turn.Calls) != 2 || turn.Calls[0].ID != "toolu_W" || turn.Calls[1].ID != "toolu_S" || turn.Text != "Checking." {
		t.Fatalf("turn %+v", turn)
	}
	if string(turn.Calls[0].Args) != `{"location": "Boston, MA"}` {
		t.Errorf("args %q, want the partial_json concatenation exactly", turn.Calls[0].Args)
	}
	if turn.Usage != (neutral.Usage{Input: 50, Output: 99}) {
		t.Errorf("usage %+v", turn.Usage)
	}
	// The rebuilt content is what the SDK assembles from the same stream.
	msg := sdkAccumulate(t, []byte(mixedStream))
	var want, got []json.RawMessage
	_ = json.Unmarshal([]byte(gjsonContent(t, msg.RawJSON())), &want)
	if err := json.Unmarshal(turn.Raw.(content), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("raw %s\nsdk %s", turn.Raw, gjsonContent(t, msg.RawJSON()))
	}
	for i := range want {
		if compact(t, got[i]) != compact(t, want[i]) {
			t.Errorf("block %d: %s, the SDK has %s", i, got[i], want[i])
		}
	}
	if !bytes.Contains(got[0], []byte(`"signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"`)) || !bytes.Contains(got[6], []byte(`"signature":"SIG2"`)) {
		t.Error("signatures lost")
	}
	// The re-query replays exactly that content, thinking first.
	q := &neutral.Query{Kind: neutral.KindReprompt, History: []neutral.Round{{Turn: turn, Replies: []neutral.CallReply{
		{CallID: "toolu_W", Content: "bad", IsError: true}, {CallID: "toolu_S", Content: "held"}}}}}
	out, err := req.ReQuery(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := jsonx.ParseObject(out)
	msgs, _ := jsonx.ParseArray(obj.Get("messages"))
	asst, _ := jsonx.ParseObject(msgs[1])
	if !bytes.Equal(asst.Get("content"), turn.Raw.(content)) {
		t.Error("the rebuilt content was not replayed as is")
	}
	if msg := anthCheckPairing(out); msg != "" {
		t.Error(msg)
	}

	// Substituting the first call keeps every other block, and indexes.
	fixed := append([]neutral.ToolCall(nil), turn.Calls...)
	fixed[0] = neutral.ToolCall{ID: "toolu_W", Name: "get_current_weather", Args: []byte(`{"location":"Boston, MA"}`)}
	rendered, err := f.st.Encode(f.held, changed(fixed, true, false), api.Sent{})
	if err != nil {
		t.Fatal(err)
	}
	client := sdkAccumulate(t, append(append([]byte(nil), f.sent...), rendered...))
	if len(client.Content) != 8 || client.Content[5].Name != "get_current_weather" || client.Content[5].ID != "toolu_W" ||
		client.Content[6].Signature != "SIG2" || client.Content[7].Name != "get_stock_price" {
		t.Errorf("client sees %s", client.RawJSON())
	}
	if !bytes.Contains(rendered, []byte(`"caller":{"type":"direct"}`)) {
		t.Error("unknown field of the replaced block lost")
	}
}

func gjsonContent(t *testing.T, raw string) string {
	t.Helper()
	obj, err := jsonx.ParseObject([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return string(obj.Get("content"))
}

func streamOf(events ...string) []byte {
	var b []byte
	for _, e := range events {
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(e), &head)
		b = sse.AppendEvent(b, head.Type, []byte(e))
	}
	return b
}

const (
	evStart    = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}`
	evToolHead = `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"ping_server","input":{}}}`
	evStop0    = `{"type":"content_block_stop","index":0}`
	evDelta    = `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}`
	evMsgStop  = `{"type":"message_stop"}`
)

func partial(s string) string {
	return `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + string(jsonx.String(s)) + `}}`
}

func TestStreamArguments(t *testing.T) {
	for _, tc := range []struct {
		name   string
		deltas []string
		want   string
	}{
		{"no delta", nil, `{}`},
		{"one empty delta", []string{""}, `{}`},
		{"fragments", []string{"", `{"a":`, ` 1}`}, `{"a": 1}`},
		{"cut off", []string{`{"a":`}, `{"a":`},
		{"not an object", []string{`[1]`}, `[1]`},
	} {
		ev := []string{evStart, evToolHead}
		for _, d := range tc.deltas {
			ev = append(ev, partial(d))
		}
		ev = append(ev, evStop0, evDelta, evMsgStop)
		f := feedAll(t, nil, streamOf(ev...))
		c := f.st.Turns()[0].Calls
		if len(c) != 1 || string(c[0].Args) != tc.want {
			t.Errorf("%s: args %q, want %q", tc.name, c[0].Args, tc.want)
		}
		// Whatever the arguments, the replay is something the API accepts.
		var blocks []struct {
			Input map[string]any `json:"input"`
		}
		if err := json.Unmarshal(f.st.Turns()[0].Raw.(content), &blocks); err != nil || len(blocks) != 1 || blocks[0].Input == nil {
			t.Errorf("%s: replay %s", tc.name, f.st.Turns()[0].Raw)
		}
	}
}

func TestStreamTruncatedAndTypedTools(t *testing.T) {
	trunc := strings.Replace(evDelta, `"tool_use"`, `"max_tokens"`, 1)
	f := feedAll(t, nil, streamOf(evStart, evToolHead, partial(`{"a`), evStop0, trunc, evMsgStop))
	if !f.st.Turns()[0].Truncated() {
		t.Error("max_tokens inside a call is not truncated")
	}
	req, _ := mustDecode(t, `{"model":"m","tools":[{"type":"bash_20250124","name":"bash"},{"name":"ping_server","input_schema":{"type":"object"}}],"messages":[]}`)
	bash := strings.Replace(evToolHead, "ping_server", "bash", 1)
	f = feedAll(t, req, streamOf(evStart, bash, partial(`{"command":"ls"}`), evStop0, evDelta, evMsgStop))
	if c := f.st.Turns()[0].Calls; len(c) != 1 || c[0].Kind != neutral.Other {
		t.Errorf("a call of the bash tool is judged: %+v", c)
	}
	f = feedAll(t, req, streamOf(evStart, evToolHead, evStop0, evDelta, evMsgStop))
	if c := f.st.Turns()[0].Calls; c[0].Kind != neutral.Function {
		t.Errorf("a function call is not judged: %+v", c)
	}
	// A plain answer classifies the same way when the request is known.
	body := `{"type":"message","content":[{"type":"tool_use","id":"toolu_b","name":"bash","input":{"command":"ls"}},{"type":"tool_use","id":"toolu_p","name":"ping_server","input":{}}],"stop_reason":"tool_use"}`
	resp, err := req.DecodeAnswer([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0].Calls; len(c) != 2 || c[0].Kind != neutral.Other || c[1].Kind != neutral.Function {
		t.Errorf("calls %+v", c)
	}
	// The bash call is still answered in a re-query, as the API requires.
	q := &neutral.Query{Kind: neutral.KindReprompt, History: []neutral.Round{{Turn: resp.Choices[0],
		Replies: []neutral.CallReply{{CallID: "toolu_b", Content: "held"}, {CallID: "toolu_p", Content: "bad", IsError: true}}}}}
	out, err := req.ReQuery(resp, q)
	if err != nil {
		t.Fatal(err)
	}
	if msg := anthCheckPairing(out); msg != "" {
		t.Error(msg)
	}
}

// An error event the upstream sends mid-call is the upstream's error, not
// an unreadable event, and is written out as it came.
func TestStreamUpstreamErrorEvent(t *testing.T) {
	errEv := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	in := streamOf(evStart, evToolHead, partial(`{"a`), errEv)
	st := newCodec().NewStream()
	rd := sse.NewReader(bytes.NewReader(in), 0)
	var steps []neutral.Step
	var last sse.Event
	for rd.Next() {
		last = rd.Event()
		step, err := st.Feed(&last)
		if err != nil {
			t.Fatalf("event %d: %v", len(steps), err)
		}
		steps = append(steps, step)
	}
	if len(steps) != 4 || !steps[3].UpstreamError || steps[1].UpstreamError {
		t.Fatalf("steps %+v", steps)
	}
	want := "event: error\ndata: " + errEv + "\n\n"
	for _, sent := range []api.Sent{{Events: 3}, {Events: 1, Held: 2}} {
		if got := string(st.UpstreamError(neutral.HeldEvent{Raw: last.Raw, Event: string(last.Event), Data: last.Data}, sent)); got != want {
			t.Errorf("sent %+v: written %q", sent, got)
		}
	}
}

func TestStreamRejectsUnreadableEvents(t *testing.T) {
	for name, events := range map[string][]string{
		"not JSON":              {evStart, `{"type":`},
		"delta before start":    {evStart, partial(`{}`)},
		"stop before start":     {evStart, evStop0},
		"index gap":             {evStart, strings.Replace(evToolHead, `"index":0`, `"index":2`, 1)},
		"duplicate start":       {evStart, evToolHead, evToolHead},
		"negative index":        {evStart, strings.Replace(evToolHead, `"index":0`, `"index":-1`, 1)},
		"no content block":      {evStart, `{"type":"content_block_start","index":0}`},
		"json into text":        {evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, partial("x")},
		"partial_json missing":  {evStart, evToolHead, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta"}}`},
		"message_delta garbage": {evStart, `{"type":"message_delta","delta":5}`},
	} {
		st := newCodec().NewStream()
		rd := sse.NewReader(bytes.NewReader(streamOf(events...)), 0)
		var err error
		for err == nil && rd.Next() {
			ev := rd.Event()
			_, err = st.Feed(&ev)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Pings, comments and event types added later are read and ignored.
	f := feedAll(t, nil, append([]byte(": keepalive\n\n"), streamOf(evStart, `{"type": "ping"}`, `{"type":"future_event","x":1}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"future_block"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"future_delta"}}`, evStop0, evDelta, evMsgStop)...))
	if !f.done || f.holdAt >= 0 || len(f.st.Turns()[0].Calls) != 0 {
		t.Errorf("stream with unknown events: done %v held at %d", f.done, f.holdAt)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	st := newCodec().NewStream()
	got := string(st.ErrorEvent(neutral.Failure{Status: 502, Code: neutral.CodeUpstream, Message: "the upstream went away"}, nil, api.Sent{}))
	want := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"code\":\"upstream_error\",\"message\":\"the upstream went away\"}}\n\n"
	if got != want {
		t.Errorf("got %q", got)
	}
	got = string(st.ErrorEvent(neutral.Failure{Status: 504, Code: neutral.CodeUpstreamTimeout, Message: "m"}, nil, api.Sent{}))
	if !strings.Contains(got, `"error":{"type":"timeout_error","code":"`+string(neutral.CodeUpstreamTimeout)+`"`) {
		t.Errorf("a timed-out stream's error event is not typed timeout_error: %q", got)
	}
	esc := &neutral.Escalated{ID: "esc_2", Code: "unknown_tool", Body: []byte(`{"id":"esc_2"}`), Text: "t"}
	got = string(st.ErrorEvent(neutral.Failure{Code: neutral.CodeInternal, Message: "not this"}, esc, api.Sent{}))
	want = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"tool_call_escalation\",\"code\":\"unknown_tool\",\"message\":\"t\",\"escalation\":{\"id\":\"esc_2\"}}}\n\n"
	if got != want {
		t.Errorf("got %q", got)
	}
}

// message_start and a ping open the message and carry nothing; once a
// content block has started, nothing is opening any more.
func TestStreamOpeningEvents(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
		"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	st := newCodec().NewStream()
	rd := sse.NewReader(strings.NewReader(stream), 0)
	var got []bool
	for rd.Next() {
		ev := rd.Event()
		step, err := st.Feed(&ev)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, step.Opening)
	}
	want := []bool{true, true, false, false, false, false, false, false}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Opening per event %v, want %v", got, want)
	}
}
