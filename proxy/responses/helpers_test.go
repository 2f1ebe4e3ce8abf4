package responses

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/api/apitest"
	"github.com/toolgate/toolgate/proxy/sse"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mustDecode is a codec that has read the request body.
func mustDecode(t testing.TB, body string) (*codec, *neutral.Request) {
	t.Helper()
	c := API{}.NewCodec().(*codec)
	req, err := c.DecodeRequest("", []byte(body))
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	return c, req
}

// codecFor is a codec that has read the request body.
func codecFor(t testing.TB, body string) *codec {
	t.Helper()
	c, _ := mustDecode(t, body)
	return c
}

func mustDecodeAnswer(t testing.TB, body string) *neutral.Answer {
	t.Helper()
	resp, err := API{}.NewCodec().DecodeAnswer([]byte(body))
	if err != nil {
		t.Fatalf("DecodeAnswer: %v", err)
	}
	return resp
}

// fed is what a stream run through the pipeline's rules produced: the bytes
// the client got at once and the events held back.
type fed struct {
	forwarded []byte
	held      []neutral.HeldEvent
	done      bool
	// sent is the pipeline's account of what the client got.
	sent api.Sent
}

// feed plays the pipeline: it reads the stream, feeds every event and
// forwards or holds it by the pipeline's rules (apitest), up to the
// terminal event or the upstream's error.
func feed(t testing.TB, st api.Stream, data []byte) (fed, error) {
	t.Helper()
	run := &apitest.Run{}
	err := run.Play(st, sse.NewReader(bytes.NewReader(data), 0))
	return fed{forwarded: run.Forwarded, held: run.Held, done: run.Done, sent: run.Sent()}, err
}

func joinHeld(held []neutral.HeldEvent) []byte {
	var out []byte
	for _, h := range held {
		out = append(out, h.Raw...)
	}
	return out
}

// clientEvent is one event as a client reads it.
type clientEvent struct {
	name string
	data map[string]json.RawMessage
	raw  []byte
}

func (e clientEvent) str(key string) string {
	s, _ := jsonx.Unquote(e.data[key])
	return s
}

func (e clientEvent) int(key string) int {
	n, err := strconv.Atoi(string(e.data[key]))
	if err != nil {
		return -1
	}
	return n
}

func readEvents(t testing.TB, b []byte) []clientEvent {
	t.Helper()
	var out []clientEvent
	rd := sse.NewReader(bytes.NewReader(b), 0)
	for rd.Next() {
		ev := rd.Event()
		if ev.Comment || len(ev.Data) == 0 {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("client cannot read event %q: %v", ev.Data, err)
		}
		out = append(out, clientEvent{name: string(ev.Event), data: m, raw: append([]byte(nil), ev.Data...)})
	}
	if rd.Err() != nil {
		t.Fatal(rd.Err())
	}
	return out
}

// checkClientStream checks what a client received as a whole: sequence
// numbers 0,1,2,… without a gap; every event line equal to its type; each
// call's deltas adding up to its done arguments; and the terminal event's
// output equal to the items the output_item.done events carried. It
// returns the terminal response.
func checkClientStream(t testing.TB, b []byte) map[string]json.RawMessage {
	t.Helper()
	evs := readEvents(t, b)
	items := map[int]json.RawMessage{}
	args := map[int]string{}
	var final map[string]json.RawMessage
	for i, e := range evs {
		if got := e.int("sequence_number"); got != i {
			t.Errorf("event %d (%s) has sequence_number %d", i, e.str("type"), got)
		}
		if e.name != "" && e.name != e.str("type") {
			t.Errorf("event %d: event line %q, type %q", i, e.name, e.str("type"))
		}
		idx := e.int("output_index")
		switch e.str("type") {
		case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			args[idx] += e.str("delta")
		case "response.function_call_arguments.done":
			if args[idx] != e.str("arguments") {
				t.Errorf("call %d: deltas %q, done %q", idx, args[idx], e.str("arguments"))
			}
		case "response.output_item.added":
			var it wireItem
			_ = json.Unmarshal(e.data["item"], &it)
			if it.Type == "function_call" && it.Arguments != nil && string(it.Arguments) != `""` {
				t.Errorf("call %d added with arguments %s", idx, it.Arguments)
			}
		case "response.output_item.done":
			items[idx] = e.data["item"]
			var it wireItem
			_ = json.Unmarshal(e.data["item"], &it)
			if it.Type == "function_call" {
				a, _ := jsonx.Unquote(it.Arguments)
				if a != args[idx] {
					t.Errorf("call %d: deltas %q, item %q", idx, args[idx], a)
				}
			}
		case "response.completed", "response.incomplete", "response.failed":
			if err := json.Unmarshal(e.data["response"], &final); err != nil {
				t.Fatal(err)
			}
			if i != len(evs)-1 {
				t.Errorf("terminal event at %d of %d", i, len(evs))
			}
		}
	}
	if final == nil {
		t.Fatal("no terminal event")
	}
	var out []json.RawMessage
	_ = json.Unmarshal(final["output"], &out)
	if len(out) != len(items) {
		t.Fatalf("final output has %d items, the stream %d", len(out), len(items))
	}
	for i, it := range out {
		if !jsonEqual(it, items[i]) {
			t.Errorf("final output item %d:\n%s\nstreamed:\n%s", i, it, items[i])
		}
	}
	return final
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// streamOf writes a Responses stream for a response whose output is items,
// the way the API streams each item type. Arguments and text arrive in
// pieces of n bytes.
func streamOf(t testing.TB, respID string, items []string, n int) []byte {
	t.Helper()
	var out []byte
	seq := 0
	emit := func(typ string, fields ...jsonx.Field) {
		o := jsonx.Object{{Key: "type", Value: jsonx.String(typ)}, {Key: "sequence_number", Value: []byte(strconv.Itoa(seq))}}
		seq++
		out = sse.AppendEvent(out, typ, append(o, fields...).Bytes())
	}
	f := func(k string, v []byte) jsonx.Field { return jsonx.Field{Key: k, Value: v} }
	num := func(i int) []byte { return []byte(strconv.Itoa(i)) }
	head := func(status string, output []byte) []byte {
		return jsonx.Object{
			f("id", jsonx.String(respID)), f("object", []byte(`"response"`)), f("created_at", []byte("1741294030")),
			f("status", jsonx.String(status)), f("error", []byte("null")), f("incomplete_details", []byte("null")),
			f("model", []byte(`"gpt-5"`)), f("output", output), f("store", []byte("true")),
			f("usage", []byte(`{"input_tokens":100,"output_tokens":20,"total_tokens":120}`)),
		}.Bytes()
	}
	pieces := func(s string) []string {
		var ps []string
		for len(s) > n {
			ps = append(ps, s[:n])
			s = s[n:]
		}
		return append(ps, s)
	}
	emit("response.created", f("response", head("in_progress", []byte("[]"))))
	emit("response.in_progress", f("response", head("in_progress", []byte("[]"))))
	raws := make([][]byte, len(items))
	for i, s := range items {
		raw := []byte(s)
		raws[i] = raw
		o, err := jsonx.ParseObject(raw)
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		var it wireItem
		_ = json.Unmarshal(raw, &it)
		id := jsonx.String(it.ID)
		switch it.Type {
		case "function_call", "custom_tool_call":
			field, delta, done := "arguments", "response.function_call_arguments.delta", "response.function_call_arguments.done"
			if it.Type == "custom_tool_call" {
				field, delta, done = "input", "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done"
			}
			full, _ := jsonx.Unquote(o.Get(field))
			added := append(jsonx.Object(nil), o...).Set("status", []byte(`"in_progress"`)).Set(field, []byte(`""`))
			emit("response.output_item.added", f("output_index", num(i)), f("item", added.Bytes()))
			for _, p := range pieces(full) {
				emit(delta, f("item_id", id), f("output_index", num(i)), f("delta", jsonx.String(p)))
			}
			emit(done, f("item_id", id), f("output_index", num(i)), f(field, jsonx.String(full)))
		case "message":
			added := append(jsonx.Object(nil), o...).Set("status", []byte(`"in_progress"`)).Set("content", []byte("[]"))
			emit("response.output_item.added", f("output_index", num(i)), f("item", added.Bytes()))
			for c, p := range it.Content {
				part := []byte(`{"type":"output_text","annotations":[],"text":""}`)
				emit("response.content_part.added", f("item_id", id), f("output_index", num(i)), f("content_index", num(c)), f("part", part))
				for _, d := range pieces(p.Text) {
					emit("response.output_text.delta", f("item_id", id), f("output_index", num(i)), f("content_index", num(c)),
						f("delta", jsonx.String(d)), f("logprobs", []byte("[]")))
				}
				emit("response.output_text.done", f("item_id", id), f("output_index", num(i)), f("content_index", num(c)),
					f("text", jsonx.String(p.Text)), f("logprobs", []byte("[]")))
				full := jsonx.Object{f("type", []byte(`"output_text"`)), f("annotations", []byte("[]")), f("text", jsonx.String(p.Text))}
				emit("response.content_part.done", f("item_id", id), f("output_index", num(i)), f("content_index", num(c)), f("part", full.Bytes()))
			}
		case "reasoning":
			added := append(jsonx.Object(nil), o...).Set("summary", []byte("[]"))
			emit("response.output_item.added", f("output_index", num(i)), f("item", added.Bytes()))
		default:
			emit("response.output_item.added", f("output_index", num(i)), f("item", raw))
		}
		emit("response.output_item.done", f("output_index", num(i)), f("item", raw))
	}
	emit("response.completed", f("response", head("completed", jsonx.AppendArray(nil, raws))))
	return out
}

// responseOf is a non-streaming response whose output is items.
func responseOf(id string, items ...string) string {
	out := make([][]byte, len(items))
	for i, s := range items {
		out[i] = []byte(s)
	}
	return `{"id":"` + id + `","object":"response","created_at":1741294021,"status":"completed","error":null,` +
		`"incomplete_details":null,"model":"gpt-5","output":` + string(jsonx.AppendArray(nil, out)) +
		`,"store":true,"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15},"metadata":{}}`
}

// replaced is the action that replaces the calls at the given positions of
// turn, after the re-query answers requery.
func replaced(turn *neutral.Turn, repl map[int]neutral.ToolCall, requery ...*neutral.Turn) neutral.Action {
	a := neutral.Action{Kind: neutral.Replace, ReQueries: requery}
	a.Calls = append([]neutral.ToolCall(nil), turn.Calls...)
	a.Changed = make([]bool, len(turn.Calls))
	for p, c := range repl {
		c.ID = turn.Calls[p].ID
		a.Calls[p], a.Changed[p] = c, true
	}
	return a
}

func escalated(text string) *neutral.Escalated {
	return &neutral.Escalated{
		ID:   "esc_0123456789abcdef01234567",
		Code: "unknown_tool",
		Body: []byte(`{"id":"esc_0123456789abcdef01234567","codes":["unknown_tool"]}`),
		Text: text,
	}
}

// escalating is the message-mode action that answers with esc.
func escalating(esc *neutral.Escalated, requery ...*neutral.Turn) neutral.Action {
	return neutral.Action{Kind: neutral.Respond, Text: esc.Text, Escalation: esc, ReQueries: requery}
}

// abstaining is the action that answers with the abstention's reason.
func abstaining(reason string) neutral.Action {
	return neutral.Action{Kind: neutral.Respond, Text: reason}
}

// Output items used across the tests.
const (
	itemReasoning     = `{"id":"rs_01","type":"reasoning","summary":[{"type":"summary_text","text":"Need the weather."}],"encrypted_content":"gAAAAABo-ENCRYPTED=="}`
	itemReasoningBare = `{"id":"rs_01","type":"reasoning","summary":[]}`
	itemMessage       = `{"id":"msg_01","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me check that.","annotations":[]}]}`
	itemCall          = `{"id":"fc_01","type":"function_call","status":"completed","arguments":"{\"location\":\"Boston, MA\"}","call_id":"call_01","name":"get_weather"}`
	itemBadCall       = `{"id":"fc_02","type":"function_call","status":"completed","arguments":"{\"sql\":\"SELECT 1\"}","call_id":"call_02","name":"database_query"}`
	itemSearch        = `{"id":"ws_01","type":"web_search_call","status":"completed","action":{"type":"search","query":"weather"}}`
	itemCustom        = `{"id":"ctc_01","type":"custom_tool_call","status":"completed","call_id":"call_03","name":"code_exec","input":"print(1)"}`
)
