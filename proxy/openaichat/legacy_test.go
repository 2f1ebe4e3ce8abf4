package openaichat

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// Chat Completions' legacy form: functions offered, function_call asked
// for and answered. It is judged like tool_calls and written back in its
// own shape.

const legacyRequest = `{"model":"gpt-4o","messages":[
 {"role":"user","content":"weather in Boston?"},
 {"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
 {"role":"function","name":"get_weather","content":"Paris: 20C"},
 {"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}},
 {"role":"function","name":"get_weather","content":"Rome: 25C"},
 {"role":"user","content":"and Boston"}],
"functions":[{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},
 {"name":"get_time"}],
"function_call":"auto"}`

const legacyAnswer = `{"id":"chatcmpl-l","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
	`"function_call":{"name":"get_weather","arguments":"{\"city\":\"Boston\"}"}},"finish_reason":"function_call"}],` +
	`"usage":{"prompt_tokens":9,"completion_tokens":3}}`

func TestLegacyRequestOffersFunctions(t *testing.T) {
	c, req := decode(t, legacyRequest)
	if !c.legacy {
		t.Fatal("a request with functions is not read as legacy")
	}
	var names []string
	for _, o := range req.Offered {
		names = append(names, o.Name)
	}
	if !reflect.DeepEqual(names, []string{"get_weather", "get_time"}) || string(req.Offered[0].Parameters) != `{"type":"object","properties":{"city":{"type":"string"}}}` {
		t.Errorf("offered %+v", req.Offered)
	}
	if req.Choice.Kind != neutral.ChoiceAuto {
		t.Errorf("choice %+v", req.Choice)
	}
	// Each earlier legacy call is recorded with the function message that
	// answered it, though neither has an id.
	h := req.History
	if len(h.Calls) != 2 || h.Calls[0].Tool != "get_weather" || string(h.Calls[1].Args) != `{"city":"Rome"}` || h.Calls[0].ID == h.Calls[1].ID {
		t.Fatalf("history calls %+v", h.Calls)
	}
	for i, want := range []string{"Paris: 20C", "Rome: 25C"} {
		if r, ok := h.Result(h.Calls[i].ID); !ok || r.Text != want {
			t.Errorf("result of call %d = %+v, %v; want %q", i, r, ok, want)
		}
	}
}

func TestLegacyFunctionCallNarrows(t *testing.T) {
	for _, c := range []struct {
		fc   string
		want neutral.ToolChoice
	}{
		{`"none"`, neutral.ToolChoice{Kind: neutral.ChoiceNone}},
		{`"auto"`, neutral.ToolChoice{Kind: neutral.ChoiceAuto}},
		{`null`, neutral.ToolChoice{Kind: neutral.ChoiceAuto}},
		{`{"name":"get_time"}`, neutral.ToolChoice{Kind: neutral.ChoiceNamed, Names: []string{"get_time"}}},
	} {
		body := `{"model":"m","messages":[],"functions":[{"name":"get_time"}],"function_call":` + c.fc + `}`
		_, req := decode(t, body)
		if !reflect.DeepEqual(req.Choice, c.want) {
			t.Errorf("function_call %s: choice %+v, want %+v", c.fc, req.Choice, c.want)
		}
	}
	bads := []string{`"required"`, `{"name":""}`, `{}`, `3`, `["auto"]`}
	for _, bad := range bads {
		body := `{"model":"m","messages":[],"functions":[{"name":"get_time"}],"function_call":` + bad + `}`
		if _, err := (API{}).NewCodec().DecodeRequest("", []byte(body)); err == nil {
			t.Errorf("function_call %s was read", bad)
		}
	}
	if _, err := (API{}).NewCodec().DecodeRequest("", []byte(`{"model":"m","messages":[],"functions":{"name":"x"}}`)); err == nil {
		t.Error("functions that are not an array were read")
	}
}

// A request offering tools in both forms cannot be judged: it is refused,
// and so is any call of its answer, whole or streamed.
func TestLegacyMixedRequestIsRefused(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[],"functions":[{"name":"a"}],"tools":[{"type":"function","function":{"name":"b"}}]}`,
		`{"model":"m","messages":[],"functions":[{"name":"a"}],"tool_choice":"auto"}`,
		`{"model":"m","messages":[],"function_call":"auto","tools":[]}`,
	} {
		cd := API{}.NewCodec()
		if _, err := cd.DecodeRequest("", []byte(body)); !errors.Is(err, api.ErrTwoForms) {
			t.Errorf("%s: DecodeRequest = %v, want ErrTwoForms", body, err)
		}
		if _, err := cd.DecodeAnswer([]byte(legacyAnswer)); !errors.Is(err, api.ErrTwoForms) {
			t.Errorf("%s: its answer's call was read: %v", body, err)
		}
		if _, err := cd.DecodeAnswer([]byte(`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)); err != nil {
			t.Errorf("%s: a text answer, which carries no call, was refused: %v", body, err)
		}
		st := cd.NewStream()
		ev := eventOf(chunkLine(`{"function_call":{"name":"a","arguments":""}}`, ""))
		if _, err := st.Feed(&ev); !errors.Is(err, api.ErrTwoForms) {
			t.Errorf("%s: its stream's call was read: %v", body, err)
		}
		st = cd.NewStream()
		ev = eventOf(chunkLine(`{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"b","arguments":""}}]}`, ""))
		if _, err := st.Feed(&ev); !errors.Is(err, api.ErrTwoForms) {
			t.Errorf("%s: its stream's tool call was read: %v", body, err)
		}
	}
}

func TestLegacyAnswerIsACall(t *testing.T) {
	c, _ := decode(t, legacyRequest)
	a, err := c.DecodeAnswer([]byte(legacyAnswer))
	if err != nil {
		t.Fatal(err)
	}
	turn := a.Choices[0]
	want := []neutral.ToolCall{{ID: legacyCallID, Name: "get_weather", Args: []byte(`{"city":"Boston"}`), Kind: neutral.Function}}
	if !reflect.DeepEqual(turn.Calls, want) || turn.Stop != neutral.StopToolCalls {
		t.Errorf("turn calls %+v stop %v", turn.Calls, turn.Stop)
	}
	// Arguments that are not a string are the wrong shape, never coerced.
	bad := strings.Replace(legacyAnswer, `"arguments":"{\"city\":\"Boston\"}"`, `"arguments":{"city":"Boston"}`, 1)
	a, err = c.DecodeAnswer([]byte(bad))
	if err != nil || !a.Choices[0].Calls[0].BadShape {
		t.Errorf("object arguments: %+v, %v", a, err)
	}
	// An empty tool_calls beside it takes nothing away; a call in both
	// forms is refused.
	empty := strings.Replace(legacyAnswer, `"content":null,`, `"content":null,"tool_calls":[],`, 1)
	if a, err := c.DecodeAnswer([]byte(empty)); err != nil || len(a.Choices[0].Calls) != 1 {
		t.Errorf("with tool_calls []: %+v, %v", a, err)
	}
	both := strings.Replace(legacyAnswer, `"content":null,`, `"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"get_time","arguments":"{}"}}],`, 1)
	if _, err := c.DecodeAnswer([]byte(both)); !errors.Is(err, api.ErrTwoForms) {
		t.Errorf("calls in both forms: %v, want ErrTwoForms", err)
	}
	// A key the agent's SDK would not read as function_call is refused, not
	// read as one.
	if _, err := c.DecodeAnswer([]byte(strings.Replace(legacyAnswer, `"function_call"`, `"Function_call"`, 1))); !errors.Is(err, api.ErrFoldedKey) {
		t.Errorf("a folded function_call: %v, want ErrFoldedKey", err)
	}
	if _, err := c.DecodeAnswer([]byte(strings.Replace(legacyAnswer, `"function_call":{`, `"function_call":[{`, 1))); err == nil {
		t.Error("a function_call that is not an object was read")
	}
}

func TestLegacyEncodeAnswerKeepsTheShape(t *testing.T) {
	c, _ := decode(t, legacyRequest)
	a, err := c.DecodeAnswer([]byte(legacyAnswer))
	if err != nil {
		t.Fatal(err)
	}
	act := substitute(a.Choices[0].Calls, 0, "get_weather", `{"city":"Boston, MA"}`)
	out, err := c.EncodeAnswer(a, []neutral.Action{act})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Choices []struct {
			Message map[string]json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	msg := got.Choices[0].Message
	if _, ok := msg["tool_calls"]; ok {
		t.Errorf("a repaired legacy call came back as tool_calls: %s", out)
	}
	if string(msg["function_call"]) != `{"name":"get_weather","arguments":"{\"city\":\"Boston, MA\"}"}` {
		t.Errorf("function_call %s", msg["function_call"])
	}
	if bytes.Contains(out, []byte(`"id":"`+legacyCallID)) {
		t.Errorf("the synthetic id reached the wire: %s", out)
	}
	// Unchanged, it is the upstream's bytes.
	keep, err := c.EncodeAnswer(a, []neutral.Action{{Kind: neutral.Keep}})
	if err != nil || !sameJSONBytes(keep, []byte(legacyAnswer)) {
		t.Errorf("kept: %s, %v", keep, err)
	}
	if got := string(c.CallJSON(act.Calls[0])); got != `{"name":"get_weather","arguments":"{\"city\":\"Boston, MA\"}"}` {
		t.Errorf("CallJSON %s", got)
	}
}

func sameJSONBytes(a, b []byte) bool {
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

// A re-query replays the legacy call and answers it with a function
// message naming the function; functions stay as sent, and a decision is
// asked for with function_call none.
func TestLegacyReQuery(t *testing.T) {
	c, _ := decode(t, legacyRequest)
	a, err := c.DecodeAnswer([]byte(legacyAnswer))
	if err != nil {
		t.Fatal(err)
	}
	for _, decision := range []bool{false, true} {
		q := &neutral.Query{Kind: neutral.KindReprompt, Decision: decision, History: []neutral.Round{{Turn: a.Choices[0],
			Replies: []neutral.CallReply{{CallID: legacyCallID, Content: "bad city", IsError: true}}}}}
		body, err := c.ReQuery(a, q)
		if err != nil {
			t.Fatal(err)
		}
		var rq map[string]json.RawMessage
		if err := json.Unmarshal(body, &rq); err != nil {
			t.Fatal(err)
		}
		var orig map[string]json.RawMessage
		_ = json.Unmarshal([]byte(legacyRequest), &orig)
		if !bytes.Equal(rq["functions"], orig["functions"]) {
			t.Errorf("functions changed: %s", rq["functions"])
		}
		if _, ok := rq["tools"]; ok {
			t.Error("a legacy re-query offers tools")
		}
		if _, ok := rq["tool_choice"]; ok {
			t.Error("a legacy re-query sets tool_choice")
		}
		wantFC := `"auto"`
		if decision {
			wantFC = `"none"`
		}
		if string(rq["function_call"]) != wantFC {
			t.Errorf("decision %v: function_call %s, want %s", decision, rq["function_call"], wantFC)
		}
		var msgs []json.RawMessage
		_ = json.Unmarshal(rq["messages"], &msgs)
		tail := msgs[len(msgs)-2:]
		if !sameJSONBytes(tail[0], []byte(`{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{\"city\":\"Boston\"}"}}`)) {
			t.Errorf("replayed %s", tail[0])
		}
		if !sameJSONBytes(tail[1], []byte(`{"role":"function","name":"get_weather","content":"bad city"}`)) {
			t.Errorf("answered by %s", tail[1])
		}
	}
}

func TestLegacyInjectToolIsAFunction(t *testing.T) {
	c, _ := decode(t, legacyRequest)
	body, err := c.InjectTool(neutral.Offered{Name: "no_tool_fits", Description: "d", Parameters: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["tools"]; ok {
		t.Fatalf("the exit went into tools beside functions: %s", body)
	}
	var fns []struct{ Name string }
	_ = json.Unmarshal(got["functions"], &fns)
	if len(fns) != 3 || fns[2].Name != "no_tool_fits" {
		t.Errorf("functions %s", got["functions"])
	}
}

// legacyStream is a streamed legacy call: the name in the first delta, the
// arguments in fragments, finish_reason function_call.
func legacyStream(args ...string) string {
	s := chunkLine(`{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":""}}`, "")
	for _, a := range args {
		s += chunkLine(`{"function_call":{"arguments":`+a+`}}`, "")
	}
	return s + chunkLine(`{}`, "function_call") + "data: [DONE]\n\n"
}

func TestLegacyStreamIsHeldAndAssembled(t *testing.T) {
	st, evs := mustFeed(t, []byte(legacyStream(`"{\"ci"`, `"ty\":\"Bos"`, `"ton\"}"`)))
	if !evs[0].step.Hold {
		t.Error("the first function_call delta is not held")
	}
	// The fast reader reads them, the same as the full decoder does.
	fast := API{}.NewCodec().NewStream()
	for _, line := range []string{chunkLine(`{"role":"assistant","function_call":{"name":"f","arguments":""}}`, ""), chunkLine(`{"function_call":{"arguments":"{}"}}`, "")} {
		ev := eventOf(line)
		if _, err := fast.Feed(&ev); err != nil || !fast.(*stream).plan.ok {
			t.Errorf("%s was left to the full decoder (%v)", line, err)
		}
	}
	turns := st.Turns()
	want := []neutral.ToolCall{{ID: legacyCallID, Name: "get_weather", Args: []byte(`{"city":"Boston"}`), Kind: neutral.Function}}
	if len(turns) != 1 || !reflect.DeepEqual(turns[0].Calls, want) || turns[0].Stop != neutral.StopToolCalls {
		t.Fatalf("turns %+v", turns[0])
	}
	// Replayed in a re-query, it is the message the model sent.
	msg, err := turns[0].Raw.(replayed).message()
	if err != nil || !sameJSONBytes(msg, []byte(`{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{\"city\":\"Boston\"}"}}`)) {
		t.Errorf("replayed %s, %v", msg, err)
	}
	if !turns[0].Raw.(replayed).legacyCall() {
		t.Error("a streamed legacy turn is not replayed as one")
	}
	// A folded function_call in a stream is refused too.
	folded := strings.Replace(legacyStream(`"{}"`), `"function_call":{"name"`, `"Function_Call":{"name"`, 1)
	if _, _, err := feedStream(t, []byte(folded)); !errors.Is(err, api.ErrFoldedKey) {
		t.Errorf("a folded delta.function_call: %v, want ErrFoldedKey", err)
	}
	// A null function_call beside text is read by the fast reader as the
	// full decoder reads it: as nothing.
	nulls := chunkLine(`{"content":"Let","function_call":null}`, "") + chunkLine(`{"content":" me","function_call":null}`, "") +
		chunkLine(`{"function_call":null}`, "stop") + "data: [DONE]\n\n"
	st, evs = mustFeed(t, []byte(nulls))
	if turns := st.Turns(); len(turns) != 1 || turns[0].Text != "Let me" || len(turns[0].Calls) != 0 || evs[0].step.Hold {
		t.Errorf("null function_call deltas: %+v", turns)
	}
	if !st.(*stream).plan.ok {
		t.Error("a null function_call sent the chunk to the full decoder")
	}
	checkFollowedAsWhole(t, []byte(nulls))
	// Read against the last chunk or whole, the same.
	checkFollowedAsWhole(t, []byte(legacyStream(`"{\"ci"`, `"ty\":\"Bos"`, `"ton\"}"`)))
	checkFollowedAsWhole(t, []byte(chunkLine(`{"content":"Let me see."}`, "")+legacyStream(`"{}"`)))
}

func TestLegacyStreamRefusesBothForms(t *testing.T) {
	tc := func(name string) string {
		return chunkLine(`{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"`+name+`","arguments":""}}]}`, "")
	}
	fc := chunkLine(`{"function_call":{"name":"get_weather","arguments":""}}`, "")
	for _, s := range []string{
		tc("a") + fc,
		fc + tc("a"),
		fc + tc("a") + tc("b"),
		chunkLine(`{"function_call":{"name":"x"},"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"a"}}]}`, ""),
	} {
		if _, _, err := feedStream(t, []byte(s+"data: [DONE]\n\n")); !errors.Is(err, api.ErrTwoForms) {
			t.Errorf("%s: %v, want ErrTwoForms", s, err)
		}
		checkFollowedAsWhole(t, []byte(s+"data: [DONE]\n\n"))
	}
}

func TestLegacyStreamEncode(t *testing.T) {
	_, evs := mustFeed(t, []byte(legacyStream(`"{\"city\""`, `":\"Bost\"}"`)))
	st, _ := mustFeed(t, []byte(legacyStream(`"{\"city\""`, `":\"Bost\"}"`)))
	_, held := heldFrom(evs)
	calls := st.Turns()[0].Calls

	// Kept: the upstream's bytes.
	out, err := st.Encode(held, []neutral.Action{{Kind: neutral.Keep}}, api.Sent{})
	var raw []byte
	for _, h := range held {
		raw = append(raw, h.Raw...)
	}
	if err != nil || !bytes.Equal(out, raw) {
		t.Errorf("kept: %s, %v", out, err)
	}

	// Replaced: the whole call in the first function_call delta, in that
	// shape, with no id, and no other fragment.
	out, err = st.Encode(held, []neutral.Action{substitute(calls, 0, "get_weather", `{"city":"Boston, MA"}`)}, api.Sent{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("tool_calls")) || bytes.Contains(out, []byte(`"id":"`+legacyCallID)) {
		t.Errorf("the repaired call left the legacy shape: %s", out)
	}
	got, datas := reread(t, out)
	if len(got) != 1 || got[0].Name != "get_weather" || string(got[0].Args) != `{"city":"Boston, MA"}` {
		t.Errorf("reread %+v from %q", got, datas)
	}
	if n := bytes.Count(out, []byte(`"function_call":{`)); n != 1 {
		t.Errorf("%d function_call deltas, want 1: %s", n, out)
	}
	if !bytes.Contains(out, []byte(`"finish_reason":"function_call"`)) || !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
		t.Errorf("the stream's end was lost: %s", out)
	}

	// Answered with text: no function_call is left.
	out, err = st.Encode(held, []neutral.Action{{Kind: neutral.Respond, Text: "needs a person"}}, api.Sent{})
	if err != nil || bytes.Contains(out, []byte("function_call\":{")) || !bytes.Contains(out, []byte("needs a person")) {
		t.Errorf("responded: %s, %v", out, err)
	}
}

// eventOf is the one event of an SSE text.
func eventOf(text string) sse.Event {
	rd := sse.NewReader(strings.NewReader(text), 0)
	rd.Next()
	return rd.Event()
}
