package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/api/apitest"
	"github.com/toolgate/toolgate/proxy/sse"
)

func newStream(t testing.TB, reqBody string) api.Stream {
	t.Helper()
	return codecFor(t, reqBody).NewStream()
}

const plainReq = `{"model":"m","input":"x","stream":true}`
const chainReq = `{"model":"m","input":"x","stream":true,"previous_response_id":"resp_0"}`
const unstoredReq = `{"model":"m","input":"x","stream":true,"store":false}`

func TestStreamFixturesPassUnchanged(t *testing.T) {
	for _, name := range []string{"function_call_stream.sse", "parallel_function_calls_stream.sse"} {
		t.Run(name, func(t *testing.T) {
			data := fixture(t, name)
			st := newStream(t, string(fixture(t, "request.json")))
			f, err := feed(t, st, data)
			if err != nil || !f.done {
				t.Fatalf("feed: %v (done %v)", err, f.done)
			}
			if len(f.forwarded) != 0 {
				t.Errorf("an answer that starts with a call sent %q before the hold", f.forwarded)
			}
			if !bytes.Equal(joinHeld(f.held), data) {
				t.Error("forwarded and held bytes are not the upstream's stream")
			}
			turns := st.Turns()
			if len(turns) != 1 {
				t.Fatalf("%d turns", len(turns))
			}
			turn := turns[0]
			want := mustDecodeAnswer(t, string(fixture(t, "function_call.json"))).Choices[0]
			if len(turn.Calls) == 0 || turn.Calls[0].Name != want.Calls[0].Name || string(turn.Calls[0].Args) != string(want.Calls[0].Args) {
				t.Errorf("calls %+v", turn.Calls)
			}
			if name == "parallel_function_calls_stream.sse" {
				if len(turn.Calls) != 2 || turn.Calls[1].ID != "call_v5eBoaPzoxZCYCdEz6DQMvE5" || string(turn.Calls[1].Args) != `{"ticker":"AAPL","exchange":"NASDAQ"}` {
					t.Errorf("second call %+v", turn.Calls)
				}
				if st.Usage() != (neutral.Usage{Input: 318, Output: 52}) {
					t.Errorf("usage %+v", st.Usage())
				}
			}
			if turn.Truncated() || f.sent.Committed {
				t.Errorf("truncated %v committed %v", turn.Truncated(), f.sent.Committed)
			}
			out, err := st.Encode(f.held, []neutral.Action{{Kind: neutral.Keep}}, f.sent)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, joinHeld(f.held)) {
				t.Errorf("Encode with nothing changed rewrote the stream:\n%s", out)
			}
			if again, err := newStream(t, plainReq).Encode(f.held, []neutral.Action{replaced(turn, nil)}, f.sent); err != nil || !bytes.Equal(again, out) {
				t.Errorf("a replacement of nothing rewrote the stream: %v\n%s", err, again)
			}
			checkClientStream(t, out)
		})
	}
}

// Text and reasoning flow at once; the kept-back status events go out in
// front of the first of them.
func TestStreamTextFlowsBeforeHold(t *testing.T) {
	data := streamOf(t, "resp_1", []string{itemReasoning, itemMessage, itemCall}, 5)
	for _, c := range []struct {
		req       string
		committed bool
	}{{plainReq, true}, {chainReq, true}, {`{"input":"x","previous_response_id":"resp_0","store":false}`, false}, {`{"input":"x","store":false}`, false}} {
		st := newStream(t, c.req)
		f, err := feed(t, st, data)
		if err != nil {
			t.Fatal(err)
		}
		evs := readEvents(t, f.forwarded)
		if len(evs) < 4 || evs[0].str("type") != "response.created" || evs[1].str("type") != "response.in_progress" ||
			evs[2].str("type") != "response.output_item.added" {
			t.Fatalf("forwarded %s", f.forwarded)
		}
		var text string
		for _, e := range evs {
			if e.str("type") == "response.output_text.delta" {
				text += e.str("delta")
			}
		}
		if text != "Let me check that." {
			t.Errorf("text sent before the hold: %q", text)
		}
		if !bytes.Equal(append(append([]byte(nil), f.forwarded...), joinHeld(f.held)...), data) {
			t.Error("forwarded + held is not the upstream's stream")
		}
		if f.sent.Committed != c.committed {
			t.Errorf("%s: committed %v", c.req, f.sent.Committed)
		}
		turn := st.Turns()[0]
		ti := turn.Raw.(*turnItems)
		if turn.Text != "Let me check that." || len(ti.items) != 3 || string(ti.items[0]) != itemReasoning ||
			string(ti.items[1]) != itemMessage || string(ti.items[2]) != itemCall || turn.ResponseID != "resp_1" {
			t.Errorf("turn %+v items %q", turn, ti.items)
		}
	}
}

// A stream with no call at all is never held, and its kept-back status
// events reach the client with the first output.
func TestStreamWithoutCallsIsNotHeld(t *testing.T) {
	data := streamOf(t, "resp_1", []string{itemMessage, itemSearch}, 4)
	st := newStream(t, chainReq)
	f, err := feed(t, st, data)
	if err != nil || len(f.held) != 0 || !f.done {
		t.Fatalf("err %v held %d", err, len(f.held))
	}
	if !bytes.Equal(f.forwarded, data) {
		t.Error("the stream was not forwarded as sent")
	}
	if len(st.Turns()[0].Calls) != 0 {
		t.Error("calls in a stream without calls")
	}
	// An answer with an empty output releases them with the terminal event.
	empty := streamOf(t, "resp_2", nil, 4)
	st = newStream(t, plainReq)
	if f, err = feed(t, st, empty); err != nil || !bytes.Equal(f.forwarded, empty) {
		t.Errorf("empty answer: %v %q", err, f.forwarded)
	}
}

func TestStreamEncodeSubstitution(t *testing.T) {
	data := streamOf(t, "resp_1", []string{itemReasoning, itemMessage, itemBadCall, itemCall}, 3)
	st := newStream(t, plainReq)
	f, err := feed(t, st, data)
	if err != nil {
		t.Fatal(err)
	}
	turn := st.Turns()[0]
	res := replaced(turn, map[int]neutral.ToolCall{
		0: {Name: "get_weather", Args: []byte(`{"location":"Paris, FR"}`), Kind: neutral.Function}})
	out, err := st.Encode(f.held, []neutral.Action{res}, f.sent)
	if err != nil {
		t.Fatal(err)
	}
	client := append(append([]byte(nil), f.forwarded...), out...)
	final := checkClientStream(t, client)
	var output []json.RawMessage
	_ = json.Unmarshal(final["output"], &output)
	want := `{"id":"fc_02","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris, FR\"}","call_id":"call_02","name":"get_weather"}`
	if len(output) != 4 || string(output[2]) != want || string(output[3]) != itemCall || string(output[0]) != itemReasoning {
		t.Errorf("final output %s", final["output"])
	}
	if string(final["id"]) != `"resp_1"` {
		t.Errorf("id %s", final["id"])
	}
	evs := readEvents(t, out)
	var deltas int
	for _, e := range evs {
		if e.int("output_index") == 2 && e.str("type") == "response.function_call_arguments.delta" {
			deltas++
			if e.str("item_id") != "fc_02" || e.str("delta") != `{"location":"Paris, FR"}` {
				t.Errorf("delta %s", e.raw)
			}
		}
		if e.str("type") == "response.output_item.added" && e.int("output_index") == 2 {
			var it wireItem
			_ = json.Unmarshal(e.data["item"], &it)
			if it.ID != "fc_02" || it.CallID != "call_02" || it.Name != "get_weather" || string(it.Arguments) != `""` {
				t.Errorf("added %s", e.raw)
			}
		}
	}
	if deltas != 1 {
		t.Errorf("%d deltas for the repaired call, want 1", deltas)
	}
}

// A chained stream whose answer starts with the call kept the stored id
// unseen, so it is repaired and the client gets the re-query's id in every
// status event, and the repaired call the ids stored for it.
func TestStreamEncodeChained(t *testing.T) {
	data := strings.ReplaceAll(string(fixture(t, "parallel_function_calls_stream.sse")), `"get_stock_price"`, `"stock_quote"`)
	st := newStream(t, `{"model":"m","input":"x","stream":true,"previous_response_id":"resp_0"}`)
	f, err := feed(t, st, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if f.sent.Committed || len(f.forwarded) != 0 {
		t.Fatalf("committed %v forwarded %q", f.sent.Committed, f.forwarded)
	}
	turn := st.Turns()[0]
	requery := turnOf(t, responseOf("resp_9",
		`{"id":"fc_99","type":"function_call","status":"completed","arguments":"{\"ticker\":\"AAPL\",\"exchange\":\"NASDAQ\"}","call_id":"call_99","name":"get_stock_price"}`))
	res := replaced(turn, map[int]neutral.ToolCall{
		1: {Name: "get_stock_price", Args: []byte(`{"ticker":"AAPL","exchange":"NASDAQ"}`)}}, requery)
	out, err := st.Encode(f.held, []neutral.Action{res}, f.sent)
	if err != nil {
		t.Fatal(err)
	}
	final := checkClientStream(t, out)
	if string(final["id"]) != `"resp_9"` {
		t.Errorf("final id %s", final["id"])
	}
	for _, e := range readEvents(t, out) {
		if r := e.data["response"]; r != nil && !bytes.Contains(r, []byte(`"id":"resp_9"`)) {
			t.Errorf("%s keeps the original id", e.str("type"))
		}
		if e.int("output_index") == 1 && e.data["item_id"] != nil && e.str("item_id") != "fc_99" {
			t.Errorf("%s item_id %s", e.str("type"), e.data["item_id"])
		}
	}
	if !bytes.Contains(final["output"], []byte(`"call_id":"call_99","name":"get_stock_price"`)) ||
		!bytes.Contains(final["output"], []byte(`"call_id":"call_OdOQw4SG8nfnL5Ofa6qD8mJ7"`)) {
		t.Errorf("final output %s", final["output"])
	}
}

// A stored request that does not chain takes the re-query's ids too, while
// the client has seen none of the original's; with store false, or once
// the response id went out, the original ids stay.
func TestStreamEncodeStoredTakesRequeryIDs(t *testing.T) {
	data := strings.ReplaceAll(string(fixture(t, "parallel_function_calls_stream.sse")), `"get_stock_price"`, `"stock_quote"`)
	for _, c := range []struct {
		req    string
		sentID bool
		want   string
	}{
		{plainReq, false, "resp_9"},
		{unstoredReq, false, ""},
		{plainReq, true, ""},
	} {
		st := newStream(t, c.req)
		f, err := feed(t, st, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		turn := st.Turns()[0]
		requery := turnOf(t, responseOf("resp_9",
			`{"id":"fc_99","type":"function_call","status":"completed","arguments":"{\"ticker\":\"AAPL\",\"exchange\":\"NASDAQ\"}","call_id":"call_99","name":"get_stock_price"}`))
		res := replaced(turn, map[int]neutral.ToolCall{
			1: {Name: "get_stock_price", Args: []byte(`{"ticker":"AAPL","exchange":"NASDAQ"}`)}}, requery)
		sent := f.sent
		if c.sentID {
			sent.Events = 1
		}
		out, err := st.Encode(f.held, []neutral.Action{res}, sent)
		if err != nil {
			t.Fatal(err)
		}
		final := checkClientStream(t, out)
		callID := bytes.Contains(final["output"], []byte(`"call_id":"call_99"`))
		if c.want != "" && (string(final["id"]) != `"`+c.want+`"` || !callID) {
			t.Errorf("%s: final id %s, output %s; want the re-query's ids", c.req, final["id"], final["output"])
		}
		if c.want == "" && (string(final["id"]) == `"resp_9"` || callID) {
			t.Errorf("%s (id sent %v): final id %s, output %s; want the original ids", c.req, c.sentID, final["id"], final["output"])
		}
	}
}

func TestStreamEncodeEscalationMessage(t *testing.T) {
	data := streamOf(t, "resp_1", []string{itemMessage, itemBadCall, itemReasoning, itemCall}, 4)
	st := newStream(t, plainReq)
	f, err := feed(t, st, data)
	if err != nil {
		t.Fatal(err)
	}
	esc := escalated("This step needs a person. [toolgate:esc_0123456789abcdef01234567]")
	out, err := st.Encode(f.held, []neutral.Action{escalating(esc)}, f.sent)
	if err != nil {
		t.Fatal(err)
	}
	client := append(append([]byte(nil), f.forwarded...), out...)
	final := checkClientStream(t, client)
	var output []json.RawMessage
	_ = json.Unmarshal(final["output"], &output)
	if len(output) != 2 || string(output[0]) != itemMessage || !bytes.Contains(output[1], []byte(`"id":"msg_toolgate_0123456789abcdef01234567"`)) ||
		!bytes.Contains(output[1], jsonx.String(esc.Text)) {
		t.Errorf("final output %s", final["output"])
	}
	if string(final["toolgate_escalation"]) != string(esc.Body) || string(final["status"]) != `"completed"` {
		t.Errorf("final %s", final["toolgate_escalation"])
	}
	for _, e := range readEvents(t, out) {
		if idx := e.int("output_index"); idx > 1 || bytes.Contains(e.raw, []byte("fc_0")) && e.str("type") != "response.completed" {
			t.Errorf("a replaced item's event went out: %s", e.raw)
		}
	}

	// Abstention after a truncated answer: the incomplete terminal event
	// becomes a completed one.
	cut := strings.Replace(string(streamOf(t, "resp_2", []string{itemCall}, 4)), `"status":"completed","error":null,"incomplete_details":null`,
		`"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"}`, 1)
	cut = strings.ReplaceAll(cut, "response.completed", "response.incomplete")
	st = newStream(t, plainReq)
	if f, err = feed(t, st, []byte(cut)); err != nil {
		t.Fatal(err)
	}
	if !st.Turns()[0].Truncated() {
		t.Error("not truncated")
	}
	out, err = st.Encode(f.held, []neutral.Action{abstaining("Nothing fits.")}, f.sent)
	if err != nil {
		t.Fatal(err)
	}
	final = checkClientStream(t, out)
	if string(final["status"]) != `"completed"` || bytes.Contains(out, []byte("response.incomplete")) || !bytes.Contains(final["output"], []byte("Nothing fits.")) {
		t.Errorf("abstained stream %s", out)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	data := streamOf(t, "resp_1", []string{itemMessage, itemBadCall}, 4)
	st := newStream(t, plainReq)
	f, err := feed(t, st, data)
	if err != nil {
		t.Fatal(err)
	}
	sent := readEvents(t, f.forwarded)
	esc := escalated("needs a person")
	ev := readEvents(t, st.ErrorEvent(neutral.Failure{Code: neutral.CodeUpstream, Message: "unused"}, esc, f.sent))
	if len(ev) != 1 || ev[0].name != "error" || ev[0].str("type") != "error" || ev[0].str("code") != "tool_call_escalation" ||
		ev[0].int("sequence_number") != len(sent) || string(ev[0].data["param"]) != "null" || ev[0].str("message") != esc.Text {
		t.Fatalf("escalation event %s (after %d events)", ev[0].raw, len(sent))
	}
	var inner struct {
		Type, Code string
		Escalation json.RawMessage
	}
	_ = json.Unmarshal(ev[0].data["error"], &inner)
	if inner.Type != "tool_call_escalation" || inner.Code != "unknown_tool" || string(inner.Escalation) != string(esc.Body) {
		t.Errorf("inner error %s", ev[0].data["error"])
	}
	other := readEvents(t, newStream(t, plainReq).ErrorEvent(neutral.Failure{Code: neutral.CodeUpstreamTimeout, Message: "silence"}, nil, api.Sent{}))
	if other[0].str("code") != "upstream_timeout" || other[0].str("message") != "silence" || other[0].int("sequence_number") != 0 ||
		string(other[0].data["error"]) != `{"type":"upstream_timeout","code":"upstream_timeout","message":"silence","param":null}` {
		t.Errorf("failure event %s", other[0].raw)
	}

	// The upstream's own error event is the upstream's error, not an
	// unreadable event: written out as it came, or, when the held call
	// before it was dropped, numbered after the last event the client got.
	errEv := "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null,\"sequence_number\":99}\n\n"
	for _, c := range []struct {
		items   []string
		dropped bool
	}{{[]string{itemMessage}, false}, {[]string{itemMessage, itemCall}, true}} {
		up := string(streamOf(t, "resp_2", c.items, 4))
		up = up[:strings.Index(up, "event: response.completed")] + errEv
		st = newStream(t, plainReq)
		f, err = feed(t, st, []byte(up))
		if err != nil || (len(f.held) > 0) != c.dropped {
			t.Fatalf("error event: %v, %d held", err, len(f.held))
		}
		if (f.sent.Held > 0) != c.dropped {
			t.Fatalf("sent %+v, dropped %v", f.sent, c.dropped)
		}
		out := st.UpstreamError(neutral.HeldEvent{Raw: []byte(errEv), Event: "error", Data: []byte(errEv[len("event: error\ndata: ") : len(errEv)-2])}, f.sent)
		if !c.dropped {
			if string(out) != errEv {
				t.Errorf("upstream error written %q", out)
			}
			continue
		}
		ev = readEvents(t, out)
		if ev[0].str("code") != "server_error" || ev[0].str("message") != "boom" || ev[0].int("sequence_number") != len(readEvents(t, f.forwarded)) {
			t.Errorf("upstream error after %d dropped events: %s", len(f.held), ev[0].raw)
		}
	}
}

func TestStreamUnreadable(t *testing.T) {
	good := string(fixture(t, "function_call_stream.sse"))
	cases := map[string]string{
		"deltas disagree with done": strings.Replace(good, `"delta":"Boston"`, `"delta":"Denver"`, 1),
		"item done disagrees": strings.Replace(good, `"arguments":"{\"location\":\"Boston, MA\",\"unit\":\"celsius\"}","call_id"`,
			`"arguments":"{\"location\":\"Austin, TX\",\"unit\":\"celsius\"}","call_id"`, 1),
		"final output disagrees": strings.Replace(good, `"output":[{"id":"fc_bd818319478da6bd0c621de49f145fda9988c79fc35526f7","type":"function_call","status":"completed","arguments":"{\"location\":\"Boston, MA\"`,
			`"output":[{"id":"fc_bd818319478da6bd0c621de49f145fda9988c79fc35526f7","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"`, 1),
		"delta for no call":   strings.Replace(good, `"output_index":0,"delta":"{"`, `"output_index":7,"delta":"{"`, 1),
		"index out of bounds": strings.Replace(good, `"sequence_number":2,"output_index":0`, `"sequence_number":2,"output_index":99999999`, 1),
		"not json":            strings.Replace(good, `data: {"type":"response.in_progress"`, `data: {"type":"response.in_progress`, 1),
		"name changes":        strings.Replace(good, `"name":"get_current_weather","output_index":0,"arguments"`, `"name":"other","output_index":0,"arguments"`, 1),
	}
	for name, data := range cases {
		if data == good {
			t.Fatalf("%s: the fixture edit did not apply", name)
		}
		st := newStream(t, plainReq)
		if _, err := feed(t, st, []byte(data)); !errors.Is(err, ErrStream) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A stream may skip the deltas and give the arguments only when done.
func TestStreamArgumentsOnlyWhenDone(t *testing.T) {
	// A stream for a request the pipeline could not read still works.
	if st := (API{}).NewCodec().NewStream(); len(st.Turns()) != 1 {
		t.Error("a stream without a request")
	}
	var kept []string
	for _, ev := range strings.SplitAfter(string(fixture(t, "function_call_stream.sse")), "\n\n") {
		if !strings.Contains(ev, "function_call_arguments.delta") {
			kept = append(kept, ev)
		}
	}
	st := newStream(t, plainReq)
	if _, err := feed(t, st, []byte(strings.Join(kept, ""))); err != nil {
		t.Fatal(err)
	}
	if c := st.Turns()[0].Calls[0]; string(c.Args) != `{"location":"Boston, MA","unit":"celsius"}` {
		t.Errorf("args %s", c.Args)
	}
}

// FuzzResponsesStream feeds arbitrary bytes, cut at random points, through
// the SSE reader into the stream, then asks it for everything the pipeline
// would: nothing may panic.
func FuzzResponsesStream(f *testing.F) {
	// Seeds are kept tiny on purpose: the fuzzer minimizes every new input
	// it finds, and minimizing takes a number of runs that grows with the
	// square of the input's size, during which nothing else is fuzzed. The
	// recorded fixtures and full streams are covered by the tests above.
	ev := func(typ, rest string) string {
		return `data: {"type":"` + typ + `",` + rest + "}\n\n"
	}
	call := `"item":{"type":"function_call","id":"f","call_id":"c","name":"n","arguments":%s}`
	f.Add([]byte(ev("response.created", `"sequence_number":0,"response":{"id":"r"}`)+
		ev("response.output_item.added", `"sequence_number":1,"output_index":0,`+fmt.Sprintf(call, `""`))+
		ev("response.function_call_arguments.delta", `"sequence_number":2,"output_index":0,"delta":"{}"`)+
		ev("response.output_item.done", `"sequence_number":3,"output_index":0,`+fmt.Sprintf(call, `"{}"`))+
		ev("response.completed", `"sequence_number":4,"response":{"id":"r","output":[]}`)), int64(0))
	f.Add([]byte(ev("response.output_item.added", `"output_index":0,"item":{"type":"message"}`)+
		ev("response.output_text.delta", `"output_index":0,"delta":"hi"`)+
		ev("response.output_item.added", `"output_index":1,"item":{"type":"custom_tool_call","call_id":"c","name":"n"}`)+
		ev("response.custom_tool_call_input.delta", `"output_index":1,"delta":"x"`)+
		ev("response.incomplete", `"response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`)), int64(3))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"code\":\"x\"}\n\n"), int64(5))

	// What does not depend on the input is prepared once: every new input
	// the fuzzer finds is minimized by running it thousands of times.
	codecs := []*codec{codecFor(f, plainReq), codecFor(f, chainReq)}
	requery := mustDecodeAnswer(f, responseOf("resp_9", itemCall)).Choices[0]
	f.Fuzz(func(t *testing.T, data []byte, seed int64) {
		// The seed picks the request, the decision and how the input is cut.
		c := codecs[seed&1]
		st := c.NewStream()
		rd := sse.NewReader(&choppy{data: data, state: uint64(seed) | 1}, 1<<16)
		p := &apitest.Run{}
		for rd.Next() {
			ev := rd.Event()
			step, err := p.Feed(st, &ev)
			if err != nil || step.Done {
				break
			}
		}
		held := p.Held
		if !p.Holding {
			held = nil
		}
		turns := st.Turns()
		_ = st.Usage()
		if len(turns) == 0 {
			return
		}
		turn := turns[0]
		var act neutral.Action
		switch (seed >> 1) & 3 {
		case 0:
			repl := map[int]neutral.ToolCall{}
			for i := range turn.Calls {
				if i%2 == 0 {
					repl[i] = neutral.ToolCall{Name: "fixed", Args: []byte(`{"a":1}`), Kind: turn.Calls[i].Kind}
				}
			}
			act = replaced(turn, repl, requery)
		case 1:
			act = escalating(escalated("esc"))
		case 2:
			act = abstaining("none")
		default:
			_, _ = c.ReQuery(nil, &neutral.Query{Decision: true, History: []neutral.Round{{Turn: turn}}})
			_ = st.ErrorEvent(neutral.Failure{Code: neutral.CodeUpstream, Message: "cut"}, nil, p.Sent())
			return
		}
		_, _ = st.Encode(held, []neutral.Action{act}, p.Sent())
	})
}

// choppy returns its data in pieces of pseudo-random length (xorshift).
type choppy struct {
	data  []byte
	state uint64
}

func (c *choppy) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	c.state ^= c.state << 13
	c.state ^= c.state >> 7
	c.state ^= c.state << 17
	n := 1 + int(c.state%64)
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// A server that sends the output only in the terminal event still has its
// calls judged: the terminal event starts the hold, and a repair rewrites
// its output.
func TestStreamOutputOnlyInTerminalEvent(t *testing.T) {
	data := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"output\":[]}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[" +
		itemMessage + "," + itemBadCall + "]}}\n\n"
	st := newStream(t, plainReq)
	f, err := feed(t, st, []byte(data))
	if err != nil || len(f.forwarded) != 0 || len(f.held) != 2 {
		t.Fatalf("err %v forwarded %q held %d", err, f.forwarded, len(f.held))
	}
	turn := st.Turns()[0]
	if len(turn.Calls) != 1 || turn.Calls[0].Name != "database_query" || string(turn.Calls[0].Args) != `{"sql":"SELECT 1"}` {
		t.Fatalf("calls %+v", turn.Calls)
	}
	res := replaced(turn, map[int]neutral.ToolCall{0: {Name: "get_weather", Args: []byte(`{"location":"Oslo"}`)}})
	out, err := st.Encode(f.held, []neutral.Action{res}, f.sent)
	if err != nil {
		t.Fatal(err)
	}
	evs := readEvents(t, out)
	if len(evs) != 2 || evs[0].int("sequence_number") != 0 || evs[1].int("sequence_number") != 1 ||
		!bytes.Contains(evs[1].data["response"], []byte(`"call_id":"call_02","name":"get_weather"`)) ||
		!bytes.Contains(evs[1].data["response"], []byte(itemMessage)) {
		t.Errorf("rendered %s", out)
	}
}

// A chained stream escalated after a decision continues from the
// decision's stored answer: every response the client reads carries its id.
// After a re-query that still called, the original id stays.
func TestStreamEscalationChainedID(t *testing.T) {
	data := fixture(t, "function_call_stream.sse")
	decision := turnOf(t, responseOf("resp_7", itemMessage))
	again := turnOf(t, responseOf("resp_8", itemBadCall))
	for _, c := range []struct {
		requery *neutral.Turn
		id      string
	}{{decision, "resp_7"}, {again, ""}} {
		st := newStream(t, chainReq)
		f, err := feed(t, st, data)
		if err != nil {
			t.Fatal(err)
		}
		out, err := st.Encode(f.held, []neutral.Action{escalating(escalated("needs a person"), c.requery)}, f.sent)
		if err != nil {
			t.Fatal(err)
		}
		final := checkClientStream(t, out)
		for _, e := range readEvents(t, out) {
			r := e.data["response"]
			if r == nil {
				continue
			}
			if has := bytes.Contains(r, []byte(`"id":"resp_7"`)); has != (c.id != "") {
				t.Errorf("after %s: %s carries %s", c.requery.ResponseID, e.str("type"), r)
			}
		}
		if !bytes.Contains(final["output"], []byte("needs a person")) {
			t.Errorf("final output %s", final["output"])
		}
	}
}
