package anthropic

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// feedFull is Feed as it was before events were read from a tape: the
// folded-key scan of the bytes, then the decoder for every event. It is
// the reference the tape reading is held to.
func (s *stream) feedFull(ev *sse.Event) (neutral.Step, error) {
	if s.done || ev.Comment || len(ev.Data) == 0 {
		return neutral.Step{Done: s.done}, nil
	}
	if api.ProtocolKeys.In(ev.Data) {
		return neutral.Step{}, api.ErrFoldedKey
	}
	return s.decodeFeed(ev)
}

// compareTape feeds the events of data to a stream by Feed and to another
// by feedFull, and fails where their steps, refusals or what they
// assembled differ.
func compareTape(t *testing.T, data []byte) {
	c := newCodec()
	c.typed = map[string]bool{"bash": true}
	got, want := c.NewStream().(*stream), c.NewStream().(*stream)
	rd := sse.NewReader(bytes.NewReader(data), 1<<16)
	for rd.Next() {
		ev := rd.Event()
		gs, gerr := got.Feed(&ev)
		ws, werr := want.feedFull(&ev)
		if gs != ws || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("event %q: step %+v error %v, the decoder's %+v %v", ev.Data, gs, gerr, ws, werr)
		}
		for _, sentinel := range []error{api.ErrFoldedKey, api.ErrNotUTF8, ErrStream, jsonx.ErrSyntax} {
			if errors.Is(gerr, sentinel) != errors.Is(werr, sentinel) {
				t.Fatalf("event %q: error %v, the decoder's %v", ev.Data, gerr, werr)
			}
		}
		if gerr != nil {
			break
		}
	}
	sameStream(t, got, want)
}

// sameStream fails where two streams hold different messages.
func sameStream(t *testing.T, got, want *stream) {
	t.Helper()
	if got.id != want.id || got.usage != want.usage || got.stop != want.stop || got.done != want.done ||
		got.calls != want.calls || len(got.blocks) != len(want.blocks) {
		t.Fatalf("message: id %q/%q usage %+v/%+v stop %q/%q done %v/%v calls %d/%d blocks %d/%d",
			got.id, want.id, got.usage, want.usage, got.stop, want.stop, got.done, want.done,
			got.calls, want.calls, len(got.blocks), len(want.blocks))
	}
	for i, b := range got.blocks {
		if w := want.blocks[i]; !sameBlock(b, w) {
			t.Fatalf("block %d: %+v, the decoder's %+v", i, b, w)
		}
	}
	g, w := got.Turns()[0], want.Turns()[0]
	if g.ResponseID != w.ResponseID || g.Text != w.Text || g.Stop != w.Stop || g.Usage != w.Usage ||
		!sameCalls(g.Calls, w.Calls) || !bytes.Equal(g.Raw.(content), w.Raw.(content)) {
		t.Fatalf("turn %+v, the decoder's %+v", g, w)
	}
}

func sameBlock(b, w *streamBlock) bool {
	if b.typ != w.typ || b.id != w.id || b.name != w.name || b.call != w.call || b.sawInput != w.sawInput ||
		!bytes.Equal(b.start, w.start) || !bytes.Equal(b.startInput, w.startInput) || !bytes.Equal(b.input, w.input) ||
		!bytes.Equal(b.text, w.text) || !bytes.Equal(b.thinking, w.thinking) || !bytes.Equal(b.signature, w.signature) ||
		len(b.citations) != len(w.citations) {
		return false
	}
	for i := range b.citations {
		if !bytes.Equal(b.citations[i], w.citations[i]) {
			return false
		}
	}
	return true
}

func sameCalls(a, b []neutral.ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.ID != y.ID || x.Name != y.Name || x.Kind != y.Kind || x.BadShape != y.BadShape || !bytes.Equal(x.Args, y.Args) {
			return false
		}
	}
	return true
}

// recordings are the recorded Messages answers of testdata whose names
// end in ext: byte for byte the shared fixture set's (testdata/README.md).
func recordings(t testing.TB, ext string) [][]byte {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join("testdata", "*."+ext))
	if len(names) == 0 {
		t.Fatalf("no testdata/*.%s", ext)
	}
	out := make([][]byte, len(names))
	for i, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// followCases are streams whose events follow each other as Follow reads
// them: the same bytes but for one string, a key or a value.
var followCases = [][]string{
	{evStart, evToolHead, partial(`{"a":`), partial(`"b"}`), partial(""), partial(`\"é\u00e9`), evStop0, evDelta, evMsgStop},
	{evStart, evToolHead, partial("x"), strings.Replace(partial("y"), "partial_json", "Partial_json", 1)},
	{evStart, evToolHead, partial("x"), strings.Replace(partial("y"), `"index"`, `"Index"`, 1)},
	{evStart, evToolHead, partial("x"), strings.Replace(partial("y"), `"delta"`, `"dElta"`, 1)},
	{evStart, evToolHead, partial("x"), strings.Replace(partial("y"), "partial_json", "partial_jsoN", 1)},
	{evStart, evToolHead, partial("x"), strings.Replace(partial("y"), "partial_json", "partial_josn", 1)},
	{evStart, evToolHead, partial("x"), strings.Replace(partial("x"), "input_json_delta", "text_delta", 1)},
	{evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		textDelta("a"), textDelta("b\\n"), textDelta("\xff"), textDelta("c"), textDelta(`\ud800`), evStop0, evMsgStop},
	{evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","Thinking":"x"}}`},
	{evStart, evToolHead, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"},"usage":null}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"},"usage":nul}`},
	{`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":3,"output_tokens":null,"cache_read_input_tokens":2}}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":4,"output_tokens":9}}`},
	{evStart, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
	{evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"bash","input":{"a" : [1]}}}`,
		evStop0, `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"u","name":"b\u0061sh","input":"s"}}`},
}

func textDelta(s string) string {
	return `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + s + `"}}`
}

func streamSeeds(t testing.TB) [][]byte {
	seeds := recordings(t, "sse")
	seeds = append(seeds, []byte(mixedStream))
	for _, events := range append(decodeCases, followCases...) {
		seeds = append(seeds, streamOf(events...))
	}
	return seeds
}

// TestStreamTapeMatchesDecoder: the events read from their tapes leave
// the stream as the decoder leaves it, event by event.
func TestStreamTapeMatchesDecoder(t *testing.T) {
	for _, data := range streamSeeds(t) {
		compareTape(t, data)
	}
}

// FuzzStreamTape holds Feed, which reads the common events from a tape,
// to the decoder reading every event: the same steps, the same refusals,
// the same message assembled.
func FuzzStreamTape(f *testing.F) {
	for _, data := range streamSeeds(f) {
		f.Add(data)
	}
	f.Fuzz(compareTape)
}

// TestStreamTapeReadsRecordings: the recorded events are read from their
// tapes, none of them left to the decoder.
func TestStreamTapeReadsRecordings(t *testing.T) {
	for _, data := range append(recordings(t, "sse"), []byte(mixedStream)) {
		st := newCodec().NewStream().(*stream)
		rd := sse.NewReader(bytes.NewReader(data), 1<<16)
		for rd.Next() {
			ev := rd.Event()
			tx := readText(t, ev.Data)
			if _, ok := st.feedTape(tx, ev.Event); !ok {
				t.Fatalf("event %s left to the decoder", ev.Data)
			}
		}
		if !st.done {
			t.Fatal("the stream did not end")
		}
	}
}

// TestStreamFollowingEvents: an event read against the one before it is
// judged as if read alone. One that differs from it only in a key that
// folds onto a protocol key is refused as such; one that folds onto a
// key only the stream reads is unreadable; one that differs in its
// fragment reads as the fragment it carries.
func TestStreamFollowingEvents(t *testing.T) {
	const withCitation = `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"","citation":null}}`
	for _, tc := range []struct {
		prev, ev string
		want     error
	}{
		{partial("x"), strings.Replace(partial("y"), "partial_json", "Partial_json", 1), api.ErrFoldedKey},
		{partial("x"), strings.Replace(partial("x"), `"index"`, `"Index"`, 1), api.ErrFoldedKey},
		{partial("x"), strings.Replace(partial("x"), `"type":"content`, `"tYpe":"content`, 1), api.ErrFoldedKey},
		{partial("x"), strings.Replace(partial("x"), `"delta"`, `"DELTA"`, 1), api.ErrFoldedKey},
		{withCitation, strings.Replace(withCitation, "citation", "Citation", 1), ErrStream},
	} {
		st := newCodec().NewStream()
		var err error
		for _, e := range []string{evStart, evToolHead, tc.prev, tc.ev} {
			if err != nil {
				t.Fatalf("%s: %v before the folded key", tc.ev, err)
			}
			_, err = st.Feed(&sse.Event{Event: []byte("content_block_delta"), Data: []byte(e)})
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s after its twin: %v, want %v", tc.ev, err, tc.want)
		}
	}
	st := newCodec().NewStream()
	for _, e := range []string{evStart, evToolHead, partial(`{"a":`), partial(`"b\"c"`), partial(""), partial("}")} {
		if _, err := st.Feed(&sse.Event{Event: []byte("content_block_delta"), Data: []byte(e)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := string(st.Turns()[0].Calls[0].Args); got != `{"a":"b\"c"}` {
		t.Errorf("args %s", got)
	}
}

// readText is data read into a tape, which must accept it.
func readText(t *testing.T, data []byte) *jsonx.Text {
	t.Helper()
	tx := new(jsonx.Text)
	if !tx.Read(data) {
		t.Fatalf("%s is not JSON", data)
	}
	return tx
}

// compareAnswer reads body by DecodeAnswer and by decodeAnswer, the
// encoding/json reading, and fails where the answers or refusals differ.
func compareAnswer(t *testing.T, body []byte) {
	c := newCodec()
	c.typed = map[string]bool{"bash": true}
	got, err := c.DecodeAnswer(body)
	want, werr := c.decodeAnswer(body)
	for _, sentinel := range []error{api.ErrNotUTF8, api.ErrFoldedKey, ErrShape} {
		if errors.Is(err, sentinel) != errors.Is(werr, sentinel) {
			t.Fatalf("%q: DecodeAnswer error %v, encoding/json's %v", body, err, werr)
		}
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: DecodeAnswer error %v, encoding/json's %v", body, err, werr)
	}
	if err != nil {
		return
	}
	if got.Usage != want.Usage || len(got.Choices) != 1 || len(want.Choices) != 1 || !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("%q: usage %v, %d choices; encoding/json reads %v, %d", body, got.Usage, len(got.Choices), want.Usage, len(want.Choices))
	}
	g, w := got.Choices[0], want.Choices[0]
	if g.ResponseID != w.ResponseID || g.Text != w.Text || g.Stop != w.Stop || g.Usage != w.Usage ||
		!sameCalls(g.Calls, w.Calls) || !bytes.Equal(g.Raw.(content), w.Raw.(content)) {
		t.Fatalf("%q: turn %+v, encoding/json reads %+v", body, g, w)
	}
}

// answerCases are answers at the edges of what answerTape reads.
var answerCases = []string{
	`{"id":"m","content":[],"stop_reason":null,"usage":null}`,
	`{"id":"m","content":null}`, `{"id":"m"}`, `null`, `[]`, `{"content":{}}`, `{"content":"x"}`,
	`{"id":5,"content":[]}`, `{"id":"a","id":"b","content":[]}`, `{"content":[],"content":[{"type":"text","text":"x"}]}`,
	`{"content":[null,5]}`, `{"content":[null,{"type":"text","text":"a"},{"text":"b"},{"type":null,"text":5}]}`,
	`{"content":[{"type":"text","text":"a\u00e9\ud800\"\\"},{"type":"text","text":null},{"type":"text","text":"\ud83d\ude00"}]}`,
	`{"content":[{"type":"tool_use","id":"t","name":"bash","input":{"a" : [1, {}]}},{"type":"tool_use","name":"f"}]}`,
	`{"content":[{"type":"tool_use","id":"t","name":"f","input":null},{"type":"tool_use","id":null,"name":"f","input":"s"}]}`,
	`{"content":[{"type":"tool_use","id":7,"name":"f"}]}`, `{"content":[{"type":"text","type":"tool_use","id":"x"}]}`,
	`{"content":[{"type":"thinking","thinking":"x","signature":5},{"type":5}]}`,
	`{"content":[],"usage":{"input_tokens":3,"output_tokens":null,"cache_read_input_tokens":2}}`,
	`{"content":[],"usage":{"input_tokens":1.0}}`, `{"content":[],"usage":{"input_tokens":"1"}}`, `{"content":[],"usage":5}`,
	`{"content":[],"usage":{"output_tokens":-0,"Input_tokens":4}}`, `{"content":[],"usage":{"input_tokens":1,"input_tokens":2}}`,
	`{"content":[],"usage":{"input_tokens":99999999999999999999}}`, `{"content":[],"usage":{"input_\u0074okens":9}}`,
	`{"content":[],"stop_reason":"tool_use"}`, `{"content":[],"stop_reason":7}`, `{"content":[],"stop_reason":"refusal","x":{"Content":1}}`,
	`{"content":[],"Content":[]}`, "{\"content\":[],\"id\":\"\xff\"}", `{"content":[{"type":"text","text":"a"}`, `{"conte`,
	"{\"content\":[{\"type\":\"text\",\"text\":\"\\u212aelvin\"}],\"\u212a\":1}",
}

func answerSeeds(t testing.TB) [][]byte {
	seeds := recordings(t, "json")
	for _, s := range answerCases {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// TestDecodeAnswerTapeMatchesDecoder: an answer read from its tape is the
// answer encoding/json reads, and one refused is refused alike.
func TestDecodeAnswerTapeMatchesDecoder(t *testing.T) {
	for _, body := range answerSeeds(t) {
		compareAnswer(t, body)
	}
}

// FuzzDecodeAnswerTape holds DecodeAnswer to decodeAnswer, the reading
// made with encoding/json: the same answer, or the same refusal.
func FuzzDecodeAnswerTape(f *testing.F) {
	for _, body := range answerSeeds(f) {
		f.Add(body)
	}
	f.Fuzz(compareAnswer)
}

// TestDecodeAnswerTapeReadsRecordings: the recorded answers are read from
// their tapes, not left to encoding/json.
func TestDecodeAnswerTapeReadsRecordings(t *testing.T) {
	for _, name := range []string{"tool_use.json", "parallel_tool_use.json"} {
		body := fixture(t, name)
		a, ok := newCodec().answerTape(readText(t, body), body)
		if !ok {
			t.Fatalf("%s left to encoding/json", name)
		}
		if len(a.Choices[0].Calls) == 0 {
			t.Fatalf("%s: no calls", name)
		}
	}
}
