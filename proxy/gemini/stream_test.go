package gemini

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// fed is a stream after every event of body was fed, as the pipeline
// feeds it: the events, whether the stream ended, and from which event on
// it asked to hold.
type fed struct {
	st     *stream
	events []sse.Event
	done   bool
	holdAt int
	err    error
}

// feedAll reads body as the pipeline does, SSE or (array) the JSON-array
// framing, through src so tests can split the reads.
func feedAll(t testing.TB, arrayFraming bool, src io.Reader) fed {
	t.Helper()
	var st api.Stream
	var rd api.EventReader
	cd := newCodec()
	if arrayFraming {
		if _, err := cd.DecodeRequest("/v1beta/models/m:streamGenerateContent", []byte(`{"contents":[]}`)); err != nil {
			t.Fatal(err)
		}
		var ok bool
		st, rd, ok = cd.NewFramedStream(http.Header{"Content-Type": {"application/json"}}, src)
		if !ok {
			t.Fatal("no framed stream for a JSON answer")
		}
	} else {
		st = cd.NewStream()
		rd = sse.NewReader(src, 1<<20)
	}
	f := fed{st: st.(*stream), holdAt: -1}
	// As the pipeline does, opening events are held until the first event
	// that carries something, and belong to the hold when that is a call.
	openAt := -1
	for !f.done && rd.Next() {
		ev := rd.Event()
		ev.Raw = bytes.Clone(ev.Raw)
		ev.Data = bytes.Clone(ev.Data)
		step, err := st.Feed(&ev)
		if err != nil {
			f.err = err
			return f
		}
		switch {
		case f.holdAt >= 0:
		case step.Hold:
			f.holdAt = len(f.events)
			if openAt >= 0 {
				f.holdAt = openAt
			}
		case step.Opening || ev.Comment:
			if openAt < 0 {
				openAt = len(f.events)
			}
		default:
			openAt = -1
		}
		f.events = append(f.events, ev)
		f.done = step.Done
	}
	if f.err == nil {
		f.err = rd.Err()
	}
	if !f.done && f.err == nil {
		f.done = st.Complete()
	}
	return f
}

// sent is the pipeline's account of what went out: every event before
// the held ones.
func (f fed) sent() api.Sent {
	if f.holdAt < 0 {
		return api.Sent{Events: len(f.events)}
	}
	return api.Sent{Events: f.holdAt, Held: len(f.events) - f.holdAt}
}

func (f fed) held() []neutral.HeldEvent {
	var out []neutral.HeldEvent
	for _, ev := range f.events[f.holdAt:] {
		out = append(out, neutral.HeldEvent{Raw: ev.Raw, Event: string(ev.Event), Data: ev.Data})
	}
	return out
}

// respond is the action that answers the only candidate with esc.
func respond(esc *neutral.Escalated) []neutral.Action {
	return []neutral.Action{{Kind: neutral.Respond, Text: esc.Text, Escalation: esc}}
}

// failXY is a failure whose code and message tests do not look at.
var failXY = neutral.Failure{Code: "x", Message: "y"}

func joinRaw(evs []sse.Event) []byte {
	var b []byte
	for _, ev := range evs {
		b = append(b, ev.Raw...)
	}
	return b
}

// The recorded streams of both framings are read whole, end complete, and
// replay byte for byte: the events' bytes are the stream's, and an Encode
// that changes nothing gives the held bytes back.
func TestStreamRecorded(t *testing.T) {
	for _, c := range []struct {
		file  string
		array bool
		calls string
		text  string
	}{
		{"sse_call_gemini-2.0-flash.sse", false, "get_capital", ""},
		{"sse_parallel_one_event_gemini-2.5-flash.sse", false, "add,multiply", ""},
		{"sse_parallel_split_events_gemini-3.1-pro.sse", false, "add,multiply", ""},
		{"sse_thought_then_call_gemini-2.5-flash.sse", false, "weather", ""},
		{"sse_vertex_parallel_gemini-2.5-flash.sse", false, "add,multiply", ""},
		{"sse_vertex_partial_args_gemini-3.1-pro.sse", false, "getWeather,getWeather", ""},
		{"array_thought_then_call_gemini-2.5-flash.json", true, "pelican_name_generator", ""},
		{"array_single_element_unsigned_call_gemini-2.5-flash.json", true, "pelican_name_generator", ""},
		{"array_call_with_id_gemini-3.6-flash.json", true, "add_person", ""},
	} {
		t.Run(c.file, func(t *testing.T) {
			body := readSample(t, "recorded/"+c.file)
			f := feedAll(t, c.array, iotest.OneByteReader(bytes.NewReader(body)))
			if f.err != nil || !f.done {
				t.Fatalf("err %v done %v", f.err, f.done)
			}
			if !bytes.Equal(joinRaw(f.events), body) {
				t.Fatal("the events do not carry the stream byte for byte")
			}
			turns := f.st.Turns()
			var names []string
			for _, call := range turns[0].Calls {
				names = append(names, call.Name)
			}
			if len(turns) != 1 || strings.Join(names, ",") != c.calls || turns[0].Text != c.text {
				t.Fatalf("calls %v text %q", names, turns[0].Text)
			}
			n := len(turns[0].Calls)
			for _, act := range []neutral.Action{
				{Kind: neutral.Keep},
				{Kind: neutral.Replace, Calls: turns[0].Calls, Changed: make([]bool, n)},
			} {
				out, err := f.st.Encode(f.held(), []neutral.Action{act}, f.sent())
				if err != nil || !bytes.Equal(joinRaw(f.events[f.holdAt:]), out) {
					t.Fatalf("unchanged encode (%+v) differs (%v):\n%s", act, err, out)
				}
			}
		})
	}
	// The text-only MAX_TOKENS stream flows whole.
	f := feedAll(t, false, bytes.NewReader(readSample(t, "recorded/sse_max_tokens_gemini-2.5-flash.sse")))
	if f.err != nil || !f.done || f.holdAt >= 0 || len(f.st.Turns()[0].Calls) != 0 {
		t.Errorf("max tokens: err %v done %v held from %d", f.err, f.done, f.holdAt)
	}
}

// A streamed turn replays every part as received, its signature included,
// and its usage is the last chunk's.
func TestStreamTurnKeepsSignatures(t *testing.T) {
	body := readSample(t, "recorded/sse_parallel_split_events_gemini-3.1-pro.sse")
	f := feedAll(t, false, bytes.NewReader(body))
	tn := f.st.Turns()[0]
	raw := tn.Raw.(*turn).content
	parts, err := contentParts(raw)
	if err != nil || len(parts) != 3 {
		t.Fatalf("replayed content %s", raw)
	}
	for _, p := range parts {
		if !bytes.Contains(body, p) {
			t.Errorf("part %s is not as received", p)
		}
	}
	if !bytes.Contains(parts[0], []byte(`"thoughtSignature": "EsINCr8NAb4+`)) || tn.Calls[0].ID != "8hd01vsf" || tn.Calls[1].ID != "k0srpqrc" {
		t.Errorf("signature or ids lost: %s %+v", parts[0], tn.Calls)
	}
	if f.st.Usage() != (neutral.Usage{Input: 157, Output: 32 + 438}) {
		t.Errorf("usage %+v", f.st.Usage())
	}
}

// textThenCallArray is a JSON-array stream in the recorded framing whose
// second element holds text and then a call; no recording has that shape.
const textThenCallArray = "[{\n  \"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Checking\"}],\"role\": \"model\"},\"index\": 0}]\n}\n,\r\n" +
	"{\n  \"candidates\": [{\"content\": {\"parts\": [{\"text\": \" the forecast.\"},{\"functionCall\": {\"name\": \"get_current_weather\",\"args\": {\"location\": \"Boston, MA\"}}}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0,\"finishMessage\": \"Model generated function call(s).\"}]\n}\n]"

// The text before a call in the same chunk is sent once whatever happens
// to the call: an escalated answer keeps it and adds the replacement.
func TestStreamTextAndCallInOneChunk(t *testing.T) {
	body := []byte(textThenCallArray)
	f := feedAll(t, true, bytes.NewReader(body))
	if f.holdAt != 1 {
		t.Fatalf("held from event %d; the first chunk is text only and flows", f.holdAt)
	}
	esc := &neutral.Escalated{ID: "esc_9", Body: []byte(`{"id":"esc_9"}`), Text: "A person decides. [toolgate:esc_9]"}
	out, err := f.st.Encode(f.held(), respond(esc), f.sent())
	if err != nil {
		t.Fatal(err)
	}
	whole := append(joinRaw(f.events[:1]), out...)
	var chunks []struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text         string          `json:"text"`
					FunctionCall json.RawMessage `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
		Escalation struct {
			ID string `json:"id"`
		} `json:"toolgate_escalation"`
	}
	if err := json.Unmarshal(whole, &chunks); err != nil {
		t.Fatalf("not one JSON array: %v\n%s", err, whole)
	}
	last := chunks[len(chunks)-1]
	parts := last.Candidates[0].Content.Parts
	if len(chunks) != 2 || len(parts) != 2 || parts[0].Text != " the forecast." || parts[1].Text != esc.Text ||
		parts[1].FunctionCall != nil || last.Candidates[0].FinishReason != "STOP" || last.Escalation.ID != "esc_9" {
		t.Errorf("rendered %s", whole)
	}
}

// A repaired call is rewritten in its chunk; its signature and id stay.
func TestStreamRenderRepairedCall(t *testing.T) {
	body := readSample(t, "recorded/sse_parallel_split_events_gemini-3.1-pro.sse")
	f := feedAll(t, false, bytes.NewReader(body))
	calls := f.st.Turns()[0].Calls
	fixed := neutral.ToolCall{ID: calls[0].ID, Name: "add", Args: []byte(`{"a":5,"b":6}`)}
	out, err := f.st.Encode(f.held(), []neutral.Action{{Kind: neutral.Replace, Calls: []neutral.ToolCall{fixed, calls[1]}, Changed: []bool{true, false}}}, f.sent())
	if err != nil {
		t.Fatal(err)
	}
	f2 := feedAll(t, false, bytes.NewReader(append(joinRaw(f.events[:f.holdAt]), out...)))
	got := f2.st.Turns()[0]
	if !f2.done || len(got.Calls) != 2 || string(got.Calls[0].Args) != string(fixed.Args) || got.Calls[0].ID != "8hd01vsf" ||
		!bytes.Contains(out, []byte(`"thoughtSignature":"EsINCr8NAb4+`)) {
		t.Errorf("rendered %s", out)
	}
}

func TestStreamErrorEvent(t *testing.T) {
	esc := &neutral.Escalated{ID: "esc_1", Code: "unknown_tool", Body: []byte(`{"id":"esc_1"}`), Text: "t"}
	s := newCodec().NewStream()
	ev := s.ErrorEvent(neutral.Failure{}, esc, api.Sent{})
	// The escalation's text comes first, as the model's, for the clients
	// that drop an error element; then the error element.
	say, errEv, ok := bytes.Cut(ev, []byte("\n\n"))
	if !ok || !bytes.HasPrefix(errEv, []byte(`data: {"error":{"code":422,`)) || !bytes.HasSuffix(errEv, []byte("\n\n")) ||
		string(say) != `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"\n\nt"}]},"index":0}],"toolgate_escalation":{"id":"esc_1"}}` {
		t.Errorf("SSE error %q", ev)
	}
	// In an array, both are elements.
	arrEsc := feedAll(t, true, strings.NewReader(textThenCallArray))
	tailEsc := arrEsc.st.ErrorEvent(neutral.Failure{}, esc, arrEsc.sent())
	var elems []map[string]any
	if err := json.Unmarshal(append(joinRaw(arrEsc.events[:1]), tailEsc...), &elems); err != nil || len(elems) != 3 ||
		elems[1]["candidates"] == nil || elems[2]["error"] == nil {
		t.Errorf("escalation in an array: %v %s", err, tailEsc)
	}
	// In the array framing the error closes the array, opening it first
	// when nothing went out.
	f := feedAll(t, true, strings.NewReader(textThenCallArray))
	tail := f.st.ErrorEvent(neutral.Failure{Code: neutral.CodeUpstreamTimeout, Message: "slow"}, nil, f.sent())
	var arr []map[string]any
	if err := json.Unmarshal(append(joinRaw(f.events[:1]), tail...), &arr); err != nil || len(arr) != 2 {
		t.Errorf("after a sent element: %v %s", err, tail)
	}
	if arr[1]["error"].(map[string]any)["code"] != 504.0 {
		t.Errorf("%v", arr[1])
	}
	held := feedAll(t, true, strings.NewReader(`[{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]}}]}`))
	if got := string(held.st.ErrorEvent(failXY, nil, held.sent())); !strings.HasPrefix(got, `[{"error":`) || !strings.HasSuffix(got, "]") {
		t.Errorf("with the opening bracket held: %s", got)
	}
}

// Google's error envelope inside a stream, as an SSE event or an array
// element, is the upstream's error; written out it is the upstream's bytes,
// and in an array whose opening bracket was held and dropped with a call,
// the element opens the array.
func TestStreamUpstreamError(t *testing.T) {
	errChunk := `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`
	text := `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"}}]}`
	call := `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}],"role":"model"}}]}`
	sseIn := "data: " + text + "\r\n\r\ndata: " + errChunk + "\r\n\r\n"
	f := feedAll(t, false, strings.NewReader(sseIn))
	if f.err != nil || len(f.events) != 2 {
		t.Fatalf("SSE: %v, %d events", f.err, len(f.events))
	}
	last := f.events[1]
	if got := f.st.UpstreamError(neutral.HeldEvent{Raw: last.Raw, Data: last.Data}, f.sent()); string(got) != "data: "+errChunk+"\r\n\r\n" {
		t.Errorf("SSE error written %q", got)
	}
	for _, c := range []struct {
		name, in, want string
		dropped        bool
	}{
		{"after text", "[" + text + "\n,\r\n" + errChunk, "\n,\r\n" + errChunk, false},
		{"first element", "[" + errChunk, "[" + errChunk, false},
		{"after a dropped call", "[" + call + "\n,\r\n" + errChunk, "\n[\r\n" + errChunk, true},
		{"after text and a dropped call", "[" + text + "\n,\r\n" + call + "\n,\r\n" + errChunk, "\n,\r\n" + errChunk, true},
	} {
		// The stream ends after the error: no closing bracket is read.
		f := feedAll(t, true, strings.NewReader(c.in+"\n]"))
		n := len(f.events)
		if n < 2 {
			t.Fatalf("%s: %d events, %v", c.name, n, f.err)
		}
		ev := f.events[n-2] // the last is the closing bracket
		step, err := newCodec().NewStream().Feed(&ev)
		if err != nil || !step.UpstreamError {
			t.Errorf("%s: step %+v, %v", c.name, step, err)
		}
		sent := f.sent()
		if sent.Held > 0 != c.dropped {
			t.Errorf("%s: sent %+v", c.name, sent)
		}
		if got := string(f.st.UpstreamError(neutral.HeldEvent{Raw: ev.Raw, Data: ev.Data}, sent)); got != c.want {
			t.Errorf("%s: written %q, want %q", c.name, got, c.want)
		}
	}
}

// Google's error envelope written into an SSE stream without data:
// framing, whole or as a one-element array, pretty-printed or not, is the
// upstream's error; other bytes without framing are not.
func TestStreamUnframedUpstreamError(t *testing.T) {
	text := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}],\"role\":\"model\"}}]}\n\n"
	for in, want := range map[string]bool{
		`{"error": {"code": 500,"message": "An internal error has occurred.","status": "INTERNAL"}}`:                                       true,
		"[{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"Quota exceeded.\",\n    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n]": true,
		`{"error": {"code": 500}, "candidates": []}`:                                                                                       false,
		`[{"error": {"code": 500}}, {"error": {"code": 500}}]`:                                                                             false,
		`{"Error": {"code": 500}}`: false,
		`retry: 10`:                false,
	} {
		f := feedAll(t, false, strings.NewReader(text+in+"\n\n"))
		if f.err != nil || len(f.events) != 2 {
			t.Fatalf("%q: %v, %d events", in, f.err, len(f.events))
		}
		ev := f.events[1]
		step, err := newCodec().NewStream().Feed(&ev)
		if err != nil || step.UpstreamError != want {
			t.Errorf("%q: step %+v, %v", in, step, err)
		}
	}
}

func TestStreamIncompleteAndBad(t *testing.T) {
	// An SSE stream cut before any finishReason is not complete.
	f := feedAll(t, false, strings.NewReader("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]}\n\n"))
	if f.done || f.err != nil {
		t.Errorf("done %v err %v", f.done, f.err)
	}
	// An array without its closing bracket fails.
	f = feedAll(t, true, strings.NewReader(`[{"candidates":[]}`))
	if f.err == nil {
		t.Error("an unclosed array was read as complete")
	}
	for _, chunk := range []string{
		`{"error":{"code":500},"candidates":[]}`, `[1]`, `{"candidates":[{"index":9}]}`, `{"candidates":[{"content":{"parts":[{"functionCall":{}}]}}]}`,
		`{"candidates":[{"content":{"Parts":[]}}]}`, `{"usageMetadata":[]}`,
	} {
		f := feedAll(t, false, strings.NewReader("data: "+chunk+"\n\n"))
		if f.err == nil {
			t.Errorf("%s was read", chunk)
		}
	}
	// A malformed call ends the stream without a call; the turn carries the
	// note.
	f = feedAll(t, false, strings.NewReader(`data: {"candidates":[{"content":{"parts":[]},"finishReason":"MALFORMED_FUNCTION_CALL"}]}`+"\n\n"))
	if !f.done || f.err != nil || strings.Join(newCodec().Notes(f.st.Turns()[0]), ",") != "gemini_malformed_function_call" {
		t.Errorf("malformed call: done %v err %v", f.done, f.err)
	}
	// A refused prompt has no candidate and is complete with its feedback.
	f = feedAll(t, false, strings.NewReader(`data: {"promptFeedback":{"blockReason":"SAFETY"}}`+"\n\n"))
	if !f.done || f.err != nil {
		t.Errorf("blocked prompt: done %v err %v", f.done, f.err)
	}
}

func TestArrayReaderShapes(t *testing.T) {
	for in, n := range map[string]int{
		`[]`:                       1,
		" \n[ ]\n":                 2,
		`[{"a":"]}\"["},{}]`:       3,
		"[{}\n,\r\n{\"b\":[1]}\n]": 3,
	} {
		rd := NewArrayReader(iotest.HalfReader(strings.NewReader(in)), 1<<10)
		var got []byte
		k := 0
		for rd.Next() {
			got = append(got, rd.Event().Raw...)
			k++
		}
		if rd.Err() != nil || k != n || !rd.Closed() || !strings.HasPrefix(in, string(got)) || strings.TrimSpace(in[len(got):]) != "" {
			t.Errorf("%q: %d events %q, err %v", in, k, got, rd.Err())
		}
	}
	for _, in := range []string{``, `{}`, `[1]`, `[{},]`, `[{}{}]`, `[{"a":}]`, `[{}`, `x[]`} {
		rd := NewArrayReader(strings.NewReader(in), 1<<10)
		for rd.Next() {
		}
		if rd.Err() == nil {
			t.Errorf("%q was read", in)
		}
	}
	rd := NewArrayReader(strings.NewReader(`[{"a":"`+strings.Repeat("x", 100)+`"}]`), 32)
	for rd.Next() {
	}
	if rd.Err() != ErrElementTooLarge {
		t.Errorf("over the limit: %v", rd.Err())
	}
}

// The keepalive is an empty event in the upstream's own line breaks: the
// Go SDK splits at the first blank line of either kind, so a mix would
// cut an event in two.
func TestStreamKeepaliveMatchesLineBreaks(t *testing.T) {
	for body, want := range map[string]string{
		"data: {}\r\n\r\n": "\r\n\r\n",
		"data: {}\n\n":     "\n\n",
		"data: {}\r\r":     "\r\r",
	} {
		f := feedAll(t, false, strings.NewReader(body))
		if got := string(f.st.Keepalive()); got != want {
			t.Errorf("%q: keepalive %q, want %q", body, got, want)
		}
	}
	f := feedAll(t, true, strings.NewReader("[{}\r\n]"))
	if got := string(f.st.Keepalive()); got != "\n\n" {
		t.Errorf("array keepalive %q", got)
	}
}

// Events toolgate writes into an SSE stream use the upstream's line
// breaks, so the Go SDK's splitter never meets a mix.
func TestStreamWrittenEventsMatchLineBreaks(t *testing.T) {
	body := readSample(t, "recorded/sse_parallel_one_event_gemini-2.5-flash.sse")
	f := feedAll(t, false, bytes.NewReader(body))
	esc := &neutral.Escalated{ID: "esc_1", Body: []byte(`{"id":"esc_1"}`), Text: "t"}
	out, err := f.st.Encode(f.held(), respond(esc), f.sent())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{out, f.st.ErrorEvent(failXY, nil, f.sent())} {
		if !bytes.HasSuffix(b, []byte("\r\n\r\n")) || bytes.Contains(bytes.ReplaceAll(b, []byte("\r\n"), nil), []byte("\n")) {
			t.Errorf("not CRLF throughout: %q", b)
		}
	}
	lf := feedAll(t, false, strings.NewReader("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\"}}]},\"finishReason\":\"STOP\"}]}\n\n"))
	if got := string(lf.st.ErrorEvent(failXY, nil, lf.sent())); !strings.HasSuffix(got, "}\n\n") || strings.Contains(got, "\r") {
		t.Errorf("LF stream error event %q", got)
	}
	// Multi-line data is written as one data line per line.
	if got := string(lf.st.appendEvent(nil, "", []byte("{\n}"))); got != "data: {\ndata: }\n\n" {
		t.Errorf("%q", got)
	}
}

// A chunk with nothing for the client yet opens the answer; when a call
// follows, the pipeline holds it too, and rendering and errors start the
// array themselves.
func TestStreamOpeningChunks(t *testing.T) {
	open := `{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"}}],"usageMetadata":{"promptTokenCount":5}}`
	call := `{"candidates":[{"content":{"parts":[{"text":"Sure."},{"functionCall":{"name":"f","args":{}}}],"role":"model"},"finishReason":"STOP"}]}`
	st := newCodec().NewStream()
	for i, c := range []struct {
		data          string
		hold, opening bool
	}{{open, false, true}, {call, true, false}} {
		step, err := st.Feed(&sse.Event{Raw: []byte("data: " + c.data + "\n\n"), Data: []byte(c.data)})
		if err != nil || step.Hold != c.hold || step.Opening != c.opening {
			t.Fatalf("chunk %d: %+v %v", i, step, err)
		}
	}
	f := feedAll(t, true, strings.NewReader("["+open+",\n"+call+"]"))
	if f.holdAt != 0 {
		t.Fatalf("held from %d, want the opening chunk", f.holdAt)
	}
	esc := &neutral.Escalated{ID: "esc_o", Body: []byte(`{"id":"esc_o"}`), Text: "A person decides."}
	out, err := f.st.Encode(f.held(), respond(esc), f.sent())
	if err != nil {
		t.Fatal(err)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(out, &elems); err != nil || !bytes.Contains(out, []byte(`"Sure."`)) || !bytes.Contains(out, []byte(esc.Text)) || bytes.Contains(out, []byte("functionCall")) {
		t.Errorf("rendered %s (%v)", out, err)
	}
	if got := string(f.st.ErrorEvent(failXY, nil, f.sent())); !strings.HasPrefix(got, "[") {
		t.Errorf("error with the bracket held: %s", got)
	}
	// Released by text, the opening chunk carried the bracket out.
	f = feedAll(t, true, strings.NewReader("["+open+",\n"+`{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]}`+"]"))
	if got := string(f.st.ErrorEvent(failXY, nil, f.sent())); !strings.HasPrefix(got, ",") {
		t.Errorf("error after the bracket went out: %s", got)
	}
}
