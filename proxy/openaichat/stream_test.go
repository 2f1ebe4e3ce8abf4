package openaichat

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/api/apitest"
	"github.com/toolgate/toolgate/proxy/sse"
)

// The fixtures in testdata/ are copies of shared/fixtures/openai-chat: real
// wire captures, so what passes here is what api.openai.com sends.

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fed is one event after Feed: its raw bytes and what Feed said.
type fed struct {
	raw  []byte
	data []byte
	step neutral.Step
}

// feedStream runs a whole stream through sse.Reader and a new Stream, the
// way the proxy driver does, stopping at the terminal event or at the
// first Feed error, which it returns.
func feedStream(t testing.TB, data []byte) (api.Stream, []fed, error) {
	t.Helper()
	st := API{}.NewCodec().NewStream()
	rd := sse.NewReader(bytes.NewReader(data), 0)
	var out []fed
	for rd.Next() {
		ev := rd.Event()
		step, err := st.Feed(&ev)
		if err != nil {
			return st, out, err
		}
		out = append(out, fed{raw: bytes.Clone(ev.Raw), data: bytes.Clone(ev.Data), step: step})
		if step.Done {
			break
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("sse reader: %v", err)
	}
	return st, out, nil
}

func mustFeed(t testing.TB, data []byte) (api.Stream, []fed) {
	t.Helper()
	st, evs, err := feedStream(t, data)
	if err != nil {
		t.Fatalf("Feed: %v", err)
	}
	return st, evs
}

// chunkLine builds one "data:" event of a chat.completion.chunk for choice
// 0 with the given delta JSON and finish reason (empty: null).
func chunkLine(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-t","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + f + `}]}` + "\n\n"
}

// argFrag is a delta carrying one fragment of call 0's arguments; frag is
// the JSON string literal as it appears on the wire.
func argFrag(frag string) string {
	return `{"tool_calls":[{"index":0,"function":{"arguments":` + frag + `}}]}`
}

const callStart = `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":""}}]}`

func TestStreamFixturesMatchTheirTwins(t *testing.T) {
	cases := []struct {
		stream, twin string
		usage        neutral.Usage
	}{
		{"tool_call_stream.sse", "tool_call.json", neutral.Usage{}},
		{"parallel_tool_calls_stream.sse", "parallel_tool_calls.json", neutral.Usage{}},
		{"tool_call_stream_include_usage.sse", "tool_call.json", neutral.Usage{Input: 82, Output: 19}},
	}
	for _, c := range cases {
		t.Run(c.stream, func(t *testing.T) {
			st, evs := mustFeed(t, readFixture(t, c.stream))
			twin, err := API{}.NewCodec().DecodeAnswer(readFixture(t, c.twin))
			if err != nil {
				t.Fatal(err)
			}

			// Hold is said of exactly the events carrying a call delta (the
			// pipeline latches it from the first); Done only of the last
			// event, [DONE].
			for i, e := range evs {
				want := bytes.Contains(e.data, []byte(`"tool_calls":[`))
				if e.step.Hold != want {
					t.Errorf("event %d: Hold = %v, want %v", i, e.step.Hold, want)
				}
				if want := i == len(evs)-1; e.step.Done != want {
					t.Errorf("event %d: Done = %v, want %v", i, e.step.Done, want)
				}
			}
			if last := evs[len(evs)-1]; string(last.data) != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", last.raw)
			}

			turns := st.Turns()
			if len(turns) != 1 {
				t.Fatalf("%d turns, want 1", len(turns))
			}
			got, want := turns[0].Calls, twin.Choices[0].Calls
			if len(got) != len(want) {
				t.Fatalf("%d calls, want %d", len(got), len(want))
			}
			for i := range got {
				// Ids differ between a stream and its twin (separate
				// recordings); names and argument text must not.
				if got[i].Name != want[i].Name || string(got[i].Args) != string(want[i].Args) || got[i].Kind != neutral.Function {
					t.Errorf("call %d = %s(%s) kind %v, want %s(%s)", i, got[i].Name, got[i].Args, got[i].Kind, want[i].Name, want[i].Args)
				}
				if !strings.HasPrefix(got[i].ID, "call_") || got[i].BadShape {
					t.Errorf("call %d: id %q badShape %v", i, got[i].ID, got[i].BadShape)
				}
			}
			if turns[0].Truncated() {
				t.Error("a stream ending in finish_reason tool_calls is not truncated")
			}
			if st.Usage() != c.usage {
				t.Errorf("usage %+v, want %+v", st.Usage(), c.usage)
			}
			for i, e := range evs {
				if e.step.Commits || e.step.Numbered {
					t.Errorf("event %d: chat streams are never committed nor numbered: %+v", i, e.step)
				}
			}
		})
	}
}

func TestStreamTextFlowsUntilTheFirstToolCall(t *testing.T) {
	in := chunkLine(`{"role":"assistant","content":""}`, "") +
		chunkLine(`{"content":"Let me check. "}`, "") +
		": upstream comment\n\n" +
		"\n" +
		chunkLine(`{"content":"One moment."}`, "") +
		chunkLine(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":""}}]}`, "") +
		chunkLine(argFrag(`"{\"location\":\"Paris\"}"`), "") +
		chunkLine(`{}`, "tool_calls") +
		"data: [DONE]\n\n"
	st, evs := mustFeed(t, []byte(in))
	holds := ""
	for _, e := range evs {
		if e.step.Hold || (holds != "" && holds[len(holds)-1] == 'H') {
			holds += "H"
		} else {
			holds += "."
		}
	}
	if holds != ".....HHHH" {
		t.Fatalf("hold pattern %s, want .....HHHH", holds)
	}
	turn := st.Turns()[0]
	if turn.Text != "Let me check. One moment." {
		t.Errorf("text %q", turn.Text)
	}
	if len(turn.Calls) != 1 || string(turn.Calls[0].Args) != `{"location":"Paris"}` {
		t.Fatalf("calls %+v", turn.Calls)
	}
	// The replayed assistant message carries the text and the call as the
	// model sent them, so a re-query is an append-only extension.
	var msg struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	c, ok := turn.Raw.(*streamChoice)
	if !ok {
		t.Fatalf("Raw is %T", turn.Raw)
	}
	raw, err := c.message()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Role != "assistant" || msg.Content != "Let me check. One moment." || len(msg.ToolCalls) != 1 ||
		msg.ToolCalls[0].ID != "call_1" || msg.ToolCalls[0].Type != "function" ||
		msg.ToolCalls[0].Function.Name != "get_current_weather" || msg.ToolCalls[0].Function.Arguments != `{"location":"Paris"}` {
		t.Errorf("replayed message %s", raw)
	}
}

// An argument string may be cut inside a multi-byte character, both by the
// transport (covered in the proxy tests) and, by some servers, between two
// chunks. Each fragment must then be taken byte for byte: decoding a half
// character on its own would silently turn "München" into "M��nchen".
func TestStreamFragmentSplitInsideUTF8(t *testing.T) {
	for _, c := range []struct{ name, a, b string }{
		// Interpreted literals: \xc3 is the lead byte of ü, \xbc its
		// continuation byte.
		{"no escapes in the fragments", "\"M\xc3\"", "\"\xbcnchen\""},
		{"escapes in both fragments", "\"{\\\"city\\\":\\\"M\xc3\"", "\"\xbcnchen\\\"}\""},
		{"escape only in the first", "\"{\\\"city\\\":\\\"M\xc3\"", "\"\xbcnchen\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := chunkLine(callStart, "") + chunkLine(argFrag(c.a), "") + chunkLine(argFrag(c.b), "") + "data: [DONE]\n\n"
			st, _ := mustFeed(t, []byte(in))
			args := st.Turns()[0].Calls[0].Args
			want := decodeFragment(t, c.a) + decodeFragment(t, c.b)
			if string(args) != want {
				t.Fatalf("args %q, want %q", args, want)
			}
			if !utf8.Valid(args) || !bytes.Contains(args, []byte("München")) {
				t.Fatalf("args %q lost the split character", args)
			}
		})
	}
}

func decodeFragment(t testing.TB, lit string) string {
	t.Helper()
	s, ok := refUnquote([]byte(lit))
	if !ok {
		t.Fatalf("bad literal %q", lit)
	}
	return s
}

func TestStreamRejectsWhatItCannotRead(t *testing.T) {
	for _, c := range []struct{ name, event string }{
		{"not JSON", "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"\n\n"},
		// The full decoder matches keys as encoding/json does, ignoring case.
		{"provider error, key folded", `data: {"id":"x","choices":[],"Error":{"message":"overloaded"}}` + "\n\n"},
		{"provider error with choices", `data: {"error":{"message":"overloaded"},"choices":[{"index":0,"delta":{"content":"x"}}]}` + "\n\n"},
		{"choice index out of range", `data: {"id":"x","choices":[{"index":4096,"delta":{}}]}` + "\n\n"},
		{"negative choice index", `data: {"id":"x","choices":[{"index":-1,"delta":{}}]}` + "\n\n"},
		{"tool call index out of range", `data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":100000,"function":{"arguments":"x"}}]}}]}` + "\n\n"},
		{"negative tool call index", `data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"function":{"arguments":"x"}}]}}]}` + "\n\n"},
		{"choices not an array", `data: {"id":"x","choices":{"index":0}}` + "\n\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := feedStream(t, []byte(chunkLine(`{"content":"hi"}`, "")+c.event+"data: [DONE]\n\n"))
			if err == nil {
				t.Fatal("Feed accepted an unreadable event; the stream must fail instead of guessing")
			}
		})
	}
	// "error": null is what some compatible servers put on every chunk.
	if _, _, err := feedStream(t, []byte(`data: {"id":"x","choices":[],"error":null}`+"\n\ndata: [DONE]\n\n")); err != nil {
		t.Fatalf("error:null rejected: %v", err)
	}
}

// An error the upstream sends in the stream, in the shapes OpenAI and
// compatible servers use (an object; vLLM's with a numeric code; a bare
// string, as text-generation-inference sends), is reported as the
// upstream's error, not as an unreadable event; written out, it is the
// upstream's bytes and then [DONE].
func TestStreamUpstreamError(t *testing.T) {
	for _, e := range []string{
		`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
		`{"error":{"message":"overloaded","type":"BadRequestError","param":null,"code":400}}`,
		`{"error":"Input validation error","error_type":"validation"}`,
	} {
		ev := "data: " + e + "\n\n"
		st, fed, err := feedStream(t, []byte(chunkLine(`{"content":"hi"}`, "")+ev+"data: [DONE]\n\n"))
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		if len(fed) < 2 || !fed[1].step.UpstreamError || fed[1].step.Hold || fed[0].step.UpstreamError {
			t.Fatalf("%s: steps %+v", e, fed)
		}
		out := st.UpstreamError(neutral.HeldEvent{Raw: fed[1].raw, Data: fed[1].data}, api.Sent{Events: 1})
		if string(out) != ev+"data: [DONE]\n\n" {
			t.Errorf("written %q", out)
		}
	}
}

// Some compatible servers repeat the call's fields on every fragment, with
// an empty id and type after the first. An empty value must not erase the
// one already sent, whichever decoder reads the chunk: the second case adds
// a field the fast path does not know, so the full decoder reads it.
func TestStreamEmptyIDKeepsTheFirst(t *testing.T) {
	for name, extra := range map[string]string{"fast path": "", "full decoder": `,"reasoning_content":null`} {
		t.Run(name, func(t *testing.T) {
			frag := `{"tool_calls":[{"index":0,"id":"","function":{"arguments":"{\"location\":\"Paris\"}"}}]` + extra + `}`
			in := chunkLine(callStart, "") + chunkLine(frag, "") + chunkLine(`{}`, "tool_calls") + "data: [DONE]\n\n"
			st, _ := mustFeed(t, []byte(in))
			calls := st.Turns()[0].Calls
			if len(calls) != 1 || calls[0].ID != "call_1" || string(calls[0].Args) != `{"location":"Paris"}` {
				t.Fatalf("calls %+v, want call_1 with the joined arguments", calls)
			}
		})
	}
}

func TestStreamArgumentsOfTheWrongShape(t *testing.T) {
	in := chunkLine(callStart, "") + chunkLine(argFrag(`{"location":"Paris"}`), "") + chunkLine(`{}`, "tool_calls") + "data: [DONE]\n\n"
	st, _ := mustFeed(t, []byte(in))
	c := st.Turns()[0].Calls[0]
	if !c.BadShape {
		t.Fatalf("arguments sent as an object must be flagged, got %+v", c)
	}
	if len(c.Args) != 0 {
		t.Fatalf("a fragment of the wrong shape must not be coerced into the arguments, got %q", c.Args)
	}
}

func TestStreamTruncatedOnlyWithACall(t *testing.T) {
	cut := chunkLine(callStart, "") + chunkLine(argFrag(`"{\"loc"`), "") + chunkLine(`{}`, "length") + "data: [DONE]\n\n"
	st, _ := mustFeed(t, []byte(cut))
	if !st.Turns()[0].Truncated() {
		t.Error("finish_reason length inside a call must mark the turn truncated")
	}
	text := chunkLine(`{"content":"long text"}`, "") + chunkLine(`{}`, "length") + "data: [DONE]\n\n"
	st, _ = mustFeed(t, []byte(text))
	if st.Turns()[0].Truncated() {
		t.Error("a text answer cut by the token limit has no call to judge")
	}
}

func TestStreamSparseChoicesKeepPositions(t *testing.T) {
	in := `data: {"id":"x","choices":[{"index":2,"delta":{"content":"third"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"x","choices":[{"index":0,"delta":{"content":"first"},"finish_reason":null}]}` + "\n\n" +
		"data: [DONE]\n\n"
	st, _ := mustFeed(t, []byte(in))
	turns := st.Turns()
	if len(turns) != 3 || turns[0].Text != "first" || turns[1].Text != "" || turns[2].Text != "third" {
		t.Fatalf("turns %+v", turns)
	}
}

func TestStreamErrorEventIsReadByOpenAISDKs(t *testing.T) {
	st := API{}.NewCodec().NewStream()
	out := st.ErrorEvent(neutral.Failure{Status: 502, Code: neutral.CodeUpstream, Message: "cut \"short\"\nhere"}, nil, api.Sent{})
	rd := sse.NewReader(bytes.NewReader(out), 0)
	var datas []string
	for rd.Next() {
		datas = append(datas, string(rd.Event().Data))
	}
	if rd.Err() != nil || len(datas) != 2 || datas[1] != "[DONE]" {
		t.Fatalf("events %q (err %v), want an error event then [DONE]", datas, rd.Err())
	}
	var e struct {
		Error struct {
			Type, Code, Message string
		}
	}
	if err := json.Unmarshal([]byte(datas[0]), &e); err != nil {
		t.Fatal(err)
	}
	if e.Error.Code != "upstream_error" || e.Error.Message != "cut \"short\"\nhere" {
		t.Fatalf("error %+v", e.Error)
	}

	esc := &neutral.Escalated{ID: "esc_1", Code: "unknown_tool",
		Body: []byte(`{"id":"esc_1","codes":["unknown_tool"]}`), Text: "needs a person [toolgate:esc_1]"}
	out = st.ErrorEvent(neutral.Failure{Code: "unknown_tool", Message: "ignored"}, esc, api.Sent{})
	if !bytes.HasPrefix(out, []byte(`data: {"error":{"type":"tool_call_escalation","code":"unknown_tool"`)) ||
		!bytes.Contains(out, []byte(`"escalation":{"id":"esc_1"`)) || !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
		t.Fatalf("escalation event %s", out)
	}
}

// heldFrom returns the events the driver holds: everything from the first
// Hold on (the driver latches; Feed reports Hold only for chunks).
func heldFrom(evs []fed) (sent []byte, held []neutral.HeldEvent) {
	holding := false
	for _, e := range evs {
		holding = holding || e.step.Hold
		if !holding {
			sent = append(sent, e.raw...)
			continue
		}
		held = append(held, neutral.HeldEvent{Raw: e.raw, Data: e.data})
	}
	return sent, held
}

func substitute(calls []neutral.ToolCall, at int, name, args string) neutral.Action {
	act := neutral.Action{Kind: neutral.Replace, Calls: append([]neutral.ToolCall(nil), calls...), Changed: make([]bool, len(calls))}
	act.Calls[at] = neutral.ToolCall{ID: calls[at].ID, Name: name, Args: []byte(args), Kind: neutral.Function}
	act.Changed[at] = true
	return act
}

// reread parses what a client receives and returns the reassembled calls
// of choice 0 and the data of every event.
func reread(t *testing.T, out []byte) ([]neutral.ToolCall, []string) {
	t.Helper()
	st, evs := mustFeed(t, out)
	var datas []string
	for _, e := range evs {
		datas = append(datas, string(e.data))
	}
	turns := st.Turns()
	if len(turns) == 0 {
		return nil, datas
	}
	return turns[0].Calls, datas
}

func TestStreamRenderReplacesOnlyTheChangedCall(t *testing.T) {
	for _, name := range []string{"tool_call_stream.sse", "tool_call_stream_include_usage.sse"} {
		t.Run(name, func(t *testing.T) {
			st, evs := mustFeed(t, readFixture(t, name))
			calls := st.Turns()[0].Calls
			sent, held := heldFrom(evs)
			out, err := st.Encode(held, []neutral.Action{substitute(calls, 0, "get_stock_price", `{"ticker":"AAPL","exchange":"NASDAQ"}`)}, api.Sent{})
			if err != nil {
				t.Fatal(err)
			}
			got, datas := reread(t, append(sent, out...))
			if len(got) != 1 || got[0].ID != calls[0].ID || got[0].Name != "get_stock_price" ||
				string(got[0].Args) != `{"ticker":"AAPL","exchange":"NASDAQ"}` {
				t.Fatalf("client sees %+v", got)
			}
			// The whole call goes out in one chunk; the fragments of the
			// original are gone, the finish, usage and [DONE] stay.
			n := 0
			for _, d := range datas {
				if strings.Contains(d, `"tool_calls":[`) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d chunks carry tool_calls, want 1", n)
			}
			if !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
				t.Error("[DONE] lost")
			}
			if bytes.Contains(out, []byte("Boston")) {
				t.Error("a fragment of the replaced call reached the client")
			}
			if name == "tool_call_stream_include_usage.sse" && !bytes.Contains(out, []byte(`"prompt_tokens":82`)) {
				t.Error("the usage chunk was dropped")
			}
			finish := evs[len(evs)-2].raw
			if name == "tool_call_stream_include_usage.sse" {
				finish = evs[len(evs)-3].raw
			}
			if !bytes.Contains(out, finish) {
				t.Error("the finish chunk carries nothing that changed and must go out byte for byte")
			}
		})
	}
}

func TestStreamRenderParallelKeepsTheValidSibling(t *testing.T) {
	st, evs := mustFeed(t, readFixture(t, "parallel_tool_calls_stream.sse"))
	calls := st.Turns()[0].Calls
	sent, held := heldFrom(evs)
	out, err := st.Encode(held, []neutral.Action{substitute(calls, 1, "get_stock_price", `{"ticker":"MSFT","exchange":"NASDAQ"}`)}, api.Sent{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := reread(t, append(sent, out...))
	if len(got) != 2 {
		t.Fatalf("calls %+v", got)
	}
	if got[0].ID != calls[0].ID || got[0].Name != calls[0].Name || string(got[0].Args) != string(calls[0].Args) {
		t.Errorf("valid sibling changed: %+v", got[0])
	}
	if got[1].ID != calls[1].ID || string(got[1].Args) != `{"ticker":"MSFT","exchange":"NASDAQ"}` {
		t.Errorf("replaced call %+v", got[1])
	}
}

func TestStreamRenderMessageModeEscalation(t *testing.T) {
	pre := chunkLine(`{"role":"assistant","content":"Checking. "}`, "")
	in := pre + chunkLine(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"database_query","arguments":""}}]}`, "") +
		chunkLine(argFrag(`"{\"sql\":\"SELECT 1\"}"`), "") + chunkLine(`{}`, "tool_calls") + "data: [DONE]\n\n"
	st, evs := mustFeed(t, []byte(in))
	sent, held := heldFrom(evs)
	esc := &neutral.Escalated{ID: "esc_9", Code: "unknown_tool",
		Body: []byte(`{"id":"esc_9"}`), Text: "This step needs a person. [toolgate:esc_9]"}
	out, err := st.Encode(held, []neutral.Action{{Kind: neutral.Respond, Text: esc.Text, Escalation: esc}}, api.Sent{})
	if err != nil {
		t.Fatal(err)
	}
	all := append(sent, out...)
	st2, evs2 := mustFeed(t, all)
	turn := st2.Turns()[0]
	if len(turn.Calls) != 0 || bytes.Contains(out, []byte("database_query")) {
		t.Fatalf("the escalated call reached the client: %s", out)
	}
	if turn.Text != "Checking. This step needs a person. [toolgate:esc_9]" {
		t.Errorf("text %q", turn.Text)
	}
	var finish string
	for _, e := range evs2 {
		var c chunk
		if json.Unmarshal(e.data, &c) == nil && len(c.Choices) > 0 && c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if finish != "stop" {
		t.Errorf("finish_reason %q, want stop", finish)
	}
	if !bytes.Contains(out, []byte(`"toolgate_escalation":{"id":"esc_9"}`)) {
		t.Errorf("no toolgate_escalation in %s", out)
	}
}

// When the call opened the stream, the chunk that carried it also carried
// the role; replacing the call with text must keep it, or a client that
// builds the message from the first delta ends up with no role.
func TestStreamRenderMessageModeKeepsTheRole(t *testing.T) {
	st, evs := mustFeed(t, readFixture(t, "tool_call_stream.sse"))
	sent, held := heldFrom(evs)
	if len(sent) != 0 {
		t.Fatalf("the fixture's first chunk should already be held, %d bytes went out", len(sent))
	}
	esc := &neutral.Escalated{ID: "esc_r", Code: "confirmation_required",
		Body: []byte(`{"id":"esc_r"}`), Text: "A person must confirm this. [toolgate:esc_r]"}
	out, err := st.Encode(held, []neutral.Action{{Kind: neutral.Respond, Text: esc.Text, Escalation: esc}}, api.Sent{})
	if err != nil {
		t.Fatal(err)
	}
	first := events(t, out)[0]
	var role struct {
		Choices []struct {
			Delta struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(first.data, &role) != nil || len(role.Choices) != 1 {
		t.Fatalf("first chunk %s", first.raw)
	}
	if role.Choices[0].Delta.Role != "assistant" || role.Choices[0].Delta.Content != esc.Text {
		t.Fatalf("first chunk %s, want role assistant and the escalation text", first.raw)
	}
}

// events parses a rendered stream back into its events.
func events(t *testing.T, out []byte) []fed {
	t.Helper()
	var evs []fed
	rd := sse.NewReader(bytes.NewReader(out), 0)
	for rd.Next() {
		evs = append(evs, fed{raw: bytes.Clone(rd.Event().Raw), data: bytes.Clone(rd.Event().Data)})
	}
	if rd.Err() != nil || len(evs) == 0 {
		t.Fatalf("rendered stream unreadable (%v): %q", rd.Err(), out)
	}
	return evs
}

// Opening is said only of chunks that carry nothing for the user: the
// pipeline holds those, so a call-first answer can still be refused with a
// plain status. Anything that may carry something must not be called so.
func TestStreamOpeningChunks(t *testing.T) {
	const head = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",`
	choice := func(delta, rest string) string {
		return head + `"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":null` + rest + `}]}`
	}
	for _, tc := range []struct {
		name, data string
		opening    bool
	}{
		{"role and empty content", choice(`{"role":"assistant","content":""}`, ""), true},
		{"role and null content and refusal", choice(`{"role":"assistant","content":null,"refusal":null}`, ""), true},
		{"null reasoning", choice(`{"role":"assistant","content":"","reasoning_content":null}`, ""), true},
		{"no choices, no usage", head + `"choices":[]}`, true},
		{"empty delta", choice(`{}`, ""), true},
		{"text", choice(`{"role":"assistant","content":"Hi"}`, ""), false},
		{"a call", choice(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, ""), false},
		{"finish", head + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`, false},
		{"usage", head + `"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`, false},
		{"logprobs", head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":{"content":[]},"finish_reason":null}]}`, false},
		{"refusal text", choice(`{"role":"assistant","refusal":"No."}`, ""), false},
		{"reasoning text", choice(`{"role":"assistant","reasoning_content":"Hm."}`, ""), false},
		{"an unknown delta field", choice(`{"role":"assistant","audio":{"id":"a"}}`, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, evs, err := feedStream(t, []byte("data: "+tc.data+"\n\n"))
			if err != nil || len(evs) != 1 {
				t.Fatalf("%d events, err %v", len(evs), err)
			}
			if evs[0].step.Opening != tc.opening {
				t.Fatalf("Opening %v, want %v", evs[0].step.Opening, tc.opening)
			}
		})
	}
	t.Run("held by the pipeline once a call began", func(t *testing.T) {
		call := choice(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, "")
		in := "data: " + call + "\n\ndata: " + choice(`{}`, "") + "\n\n"
		run, err := apitest.Play(API{}.NewCodec().NewStream(), sse.NewReader(strings.NewReader(in), 0))
		if err != nil || len(run.Steps) != 2 || !run.Steps[0].Hold || len(run.Forwarded) != 0 || len(run.Held) != 2 {
			t.Fatalf("steps %+v forwarded %q held %d err %v", run.Steps, run.Forwarded, len(run.Held), err)
		}
	})
}

// TestStreamFollowingChunks: a chunk read against the one before it is
// judged as if read alone. One that differs from it only in a key, which
// folds onto a protocol key, is refused; one that differs only in its
// text reads as the text it carries, a byte that is not UTF-8 kept as
// sent (a character may be cut between fragments).
func TestStreamFollowingChunks(t *testing.T) {
	const head = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":`
	text := func(s string) string { return head + `{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n" }
	for _, folded := range []string{
		`data: {"id":"c1","object":"chat.completion.chunk","Choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}`,
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"Content":"b"},"finish_reason":null}]}`,
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"b"},"finish_Reason":null}]}`,
	} {
		_, fed, err := feedStream(t, []byte(text("a")+folded+"\n\ndata: [DONE]\n\n"))
		if !errors.Is(err, api.ErrFoldedKey) || len(fed) != 1 {
			t.Errorf("%s after its twin: %d fed, err %v, want the folded key refused", folded, len(fed), err)
		}
	}
	st, _, err := feedStream(t, []byte(text("a")+text("b")+text(`c\"d`)+text("")+text("\xff")+"data: [DONE]\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Turns()[0].Text; got != "abc\"d\xff" {
		t.Errorf("text %q", got)
	}
}
