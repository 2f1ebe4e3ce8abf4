package openaichat

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
)

// convo is a request whose conversation holds every role, an earlier call
// with its result, and both kinds of tool.
const convo = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"n":2,
"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}},
"messages":[
 {"role":"system","content":"be brief"},
 {"role":"user","content":"find order A-17"},
 {"role":"assistant","content":"looking","tool_calls":[
   {"id":"call_p","type":"function","function":{"name":"find_order","arguments":"{\"id\":\"A-17\"}"}},
   {"id":"call_bad","type":"function","function":{"name":"find_order","arguments":{"id":1}}}]},
 {"role":"tool","tool_call_id":"call_p","content":[{"type":"text","text":"order B-9"}]},
 {"role":"function","name":"legacy","content":"legacy says C-3"},
 {"role":"user","content":[{"type":"text","text":"and its price"},{"type":"image_url","image_url":{"url":"x"}}]}],
"tools":[
 {"type":"function","function":{"name":"find_order","description":"Find","parameters":{"type":"object"}}},
 {"type":"custom","custom":{"name":"grep","description":"Search"}},
 {"type":"web_search"},
 {"type":"function","function":null}],
"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"find_order"}},{"type":"custom","custom":{"name":"grep"}}]}}}`

func decode(t *testing.T, body string) (*codec, *neutral.Request) {
	t.Helper()
	c := API{}.NewCodec().(*codec)
	req, err := c.DecodeRequest("", []byte(body))
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	return c, req
}

func TestDecodeRequestReadsWhatThePipelineNeeds(t *testing.T) {
	_, req := decode(t, convo)
	if req.Model != "gpt-4o" || !req.Stream || !req.StructuredOutput || req.HistoryUpstream || req.Stateful {
		t.Errorf("request %+v", req)
	}
	if string(req.Body) != convo {
		t.Error("Body is not the request as sent")
	}
	want := []neutral.Offered{
		{Name: "find_order", Description: "Find", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "grep", Description: "Search"},
	}
	if !reflect.DeepEqual(req.Offered, want) {
		t.Errorf("offered %+v, want %+v", req.Offered, want)
	}
	if req.Choice.Kind != neutral.ChoiceAllowed || strings.Join(req.Choice.Names, ",") != "find_order,grep" {
		t.Errorf("choice %+v", req.Choice)
	}
	// What the user and the tools wrote vouches; what the system and the
	// assistant said does not.
	vouching := []string{"find order A-17", "order B-9\n", "legacy says C-3", "and its price\n"}
	if !reflect.DeepEqual(req.Vouching, vouching) {
		t.Errorf("vouching %q, want %q", req.Vouching, vouching)
	}
	if req.UserText != "and its price\n" {
		t.Errorf("user text %q", req.UserText)
	}
	// The call whose arguments are not a string is of the wrong shape and
	// is not history a rule could read.
	h := req.History
	if h == nil || len(h.Calls) != 1 || h.Calls[0].ID != "call_p" || h.Calls[0].Tool != "find_order" ||
		string(h.Calls[0].Args) != `{"id":"A-17"}` {
		t.Fatalf("history calls %+v", h)
	}
	if r, ok := h.Result("call_p"); !ok || r.Text != "order B-9" || r.IsError {
		t.Errorf("result %+v %v", r, ok)
	}
}

func TestDecodeRequestToolChoices(t *testing.T) {
	for _, tc := range []struct {
		choice string
		want   neutral.ToolChoice
	}{
		{``, neutral.ToolChoice{Kind: neutral.ChoiceAuto}},
		{`,"tool_choice":"none"`, neutral.ToolChoice{Kind: neutral.ChoiceNone}},
		{`,"tool_choice":"required"`, neutral.ToolChoice{Kind: neutral.ChoiceRequired}},
		{`,"tool_choice":{"type":"function","function":{"name":"f"}}`, neutral.ToolChoice{Kind: neutral.ChoiceNamed, Names: []string{"f"}}},
		{`,"tool_choice":{"type":"custom","custom":{"name":"g"}}`, neutral.ToolChoice{Kind: neutral.ChoiceNamed, Names: []string{"g"}}},
		{`,"tool_choice":{"type":"something_new"}`, neutral.ToolChoice{Kind: neutral.ChoiceAuto}},
	} {
		_, req := decode(t, `{"model":"m","messages":[],"response_format":{"type":"text"}`+tc.choice+`}`)
		if !reflect.DeepEqual(req.Choice, tc.want) {
			t.Errorf("%s: choice %+v, want %+v", tc.choice, req.Choice, tc.want)
		}
		if req.StructuredOutput {
			t.Errorf("%s: a text response_format asks for nothing structured", tc.choice)
		}
	}
}

func TestDecodeRequestRefusesFieldsOfTheWrongType(t *testing.T) {
	for _, body := range []string{
		`{"model":1}`,
		`{"stream":"yes"}`,
		`{"tools":{}}`,
		`{"tools":[{"type":"function","function":{"name":7}}]}`,
		`{"messages":{}}`,
		`{"messages":[{"role":3}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":5}]}]}`,
		`{"messages":[{"role":"tool","tool_call_id":5}]}`,
		`{"tool_choice":{"type":1}}`,
		`{"model":"m"`,
	} {
		if _, err := (API{}).NewCodec().DecodeRequest("", []byte(body)); err == nil {
			t.Errorf("%s: read, want an error", body)
		}
	}
}

// Each request gets its own codec, which keeps its own request: a second
// request decoded meanwhile does not change what the first re-queries.
func TestEachRequestHasItsOwnCodec(t *testing.T) {
	a, _ := decode(t, `{"model":"a","messages":[{"role":"user","content":"one"}]}`)
	b, _ := decode(t, `{"model":"b","messages":[{"role":"user","content":"two"}]}`)
	qa, err := a.ReQuery(nil, &neutral.Query{})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := b.ReQuery(nil, &neutral.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(qa, []byte(`"a"`)) || bytes.Contains(qa, []byte("two")) || !bytes.Contains(qb, []byte(`"b"`)) {
		t.Fatalf("re-queries %s and %s", qa, qb)
	}
}

var abstainTool = neutral.Offered{Name: "toolgate_no_suitable_tool", Description: "None fits.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"reason":{"type":"string"}}}`)}

// After InjectTool the codec's request is the injected one: the request
// the pipeline holds and every re-query offer the exit, last.
func TestInjectToolBecomesTheRequest(t *testing.T) {
	c, req := decode(t, string(readFixture(t, "request.json")))
	body, err := c.InjectTool(abstainTool)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(req.Body, body) {
		t.Error("the request the pipeline holds is not the injected one")
	}
	q, err := c.ReQuery(nil, &neutral.Query{Kind: neutral.KindReprompt})
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Tools []struct {
			Type     string
			Function struct{ Name, Description string }
		}
	}
	if err := json.Unmarshal(q, &sent); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range sent.Tools {
		names = append(names, tl.Type+":"+tl.Function.Name)
	}
	if strings.Join(names, ",") != "function:get_current_weather,function:get_stock_price,function:toolgate_no_suitable_tool" {
		t.Fatalf("re-query offers %v", names)
	}
	if _, err := (API{}).NewCodec().InjectTool(abstainTool); err == nil {
		t.Error("a codec that read no request injected into nothing")
	}
}

// Chat keeps the calls in the answer's order, so a call of the injected
// exit stays where the model put it and keeps its name and kind.
func TestInjectToolThenDecodeAnswerKeepsTheExitCall(t *testing.T) {
	c, _ := decode(t, string(readFixture(t, "request.json")))
	if _, err := c.InjectTool(abstainTool); err != nil {
		t.Fatal(err)
	}
	answer := `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
 {"id":"call_a","type":"function","function":{"name":"toolgate_no_suitable_tool","arguments":"{\"reason\":\"none\"}"}},
 {"id":"call_w","type":"function","function":{"name":"get_current_weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	a, err := c.DecodeAnswer([]byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	calls := a.Choices[0].Calls
	if len(calls) != 2 || calls[0].Name != abstainTool.Name || calls[0].ID != "call_a" || calls[0].Kind != neutral.Function ||
		string(calls[0].Args) != `{"reason":"none"}` || calls[1].Name != "get_current_weather" {
		t.Fatalf("calls %+v", calls)
	}
}

func TestDecodeAnswer(t *testing.T) {
	c := API{}.NewCodec()
	a, err := c.DecodeAnswer(readFixture(t, "parallel_tool_calls.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Choices) != 1 || a.Usage != (neutral.Usage{Input: 118, Output: 58}) {
		t.Fatalf("answer %+v", a)
	}
	turn := a.Choices[0]
	if turn.ResponseID != "chatcmpl-sWmflzdE1F8ResqEDusTpkr0cStY4" || turn.Usage != a.Usage || turn.Truncated() || len(turn.Calls) != 2 {
		t.Fatalf("turn %+v", turn)
	}
	cut := `{"choices":[{"message":{"content":"hi","tool_calls":[{"id":"c","type":"custom","custom":{"name":"g","input":"x"}},{"id":"d","type":"mcp","function":{"name":"m"}}]},"finish_reason":"length"},{"message":{"content":"text"},"finish_reason":"length"}]}`
	if a, err = c.DecodeAnswer([]byte(cut)); err != nil {
		t.Fatal(err)
	}
	one, two := a.Choices[0], a.Choices[1]
	if one.Text != "hi" || !one.Truncated() || two.Truncated() || two.Usage != (neutral.Usage{}) {
		t.Errorf("turns %+v %+v", one, two)
	}
	if one.Calls[0].Kind != neutral.Custom || one.Calls[0].Name != "g" || one.Calls[0].BadShape {
		t.Errorf("custom call %+v", one.Calls[0])
	}
	// A type Chat does not define is judged as a badly shaped function call.
	if one.Calls[1].Kind != neutral.Function || !one.Calls[1].BadShape || one.Calls[1].Name != "m" {
		t.Errorf("unknown type %+v", one.Calls[1])
	}
	for _, bad := range []string{`{}`, `{"choices":{}}`, `{"choices":[1]}`, `{"choices":[{"message":[]}]}`,
		`{"choices":[{"finish_reason":1}]}`, `{"choices":[],"usage":{"prompt_tokens":"x"}}`,
		`{"choices":[{"message":{"tool_calls":[{"id":1}]}}]}`, `not json`} {
		if _, err := c.DecodeAnswer([]byte(bad)); err == nil {
			t.Errorf("%s decoded, want an error", bad)
		}
	}
}

// A re-query replays each turn as the model sent it, whichever way it
// came (a plain answer, a stream, a skipped stream choice), follows it
// with the replies, and asks for one plain answer.
func TestReQueryReplaysTurns(t *testing.T) {
	c, _ := decode(t, convo)
	a, err := c.DecodeAnswer(readFixture(t, "tool_call.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := mustFeed(t, []byte(chunkLine(`{"role":"assistant","content":"Hm. "}`, "")+chunkLine(callStart, "")+
		chunkLine(argFrag(`"{\"location\":\"Paris\"}"`), "tool_calls")+"data: [DONE]\n\n"))
	streamed := st.Turns()[0]
	gap := &neutral.Turn{Raw: rawMessage(`{"role":"assistant","content":""}`)}
	q := &neutral.Query{Kind: neutral.KindRecovery, History: []neutral.Round{
		{Turn: a.Choices[0], Replies: []neutral.CallReply{{CallID: "call_1", Content: "bad \"args\""}}},
		{Turn: streamed, Replies: []neutral.CallReply{{CallID: "call_1", Content: "again"}}},
		{Turn: gap},
	}}
	body, err := c.ReQuery(a, q)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		N             *int            `json:"n"`
		Stream        *bool           `json:"stream"`
		StreamOptions json.RawMessage `json:"stream_options"`
		ToolChoice    json.RawMessage `json:"tool_choice"`
		Format        json.RawMessage `json:"response_format"`
		Messages      []json.RawMessage
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.N == nil || *sent.N != 1 || sent.Stream == nil || *sent.Stream || sent.StreamOptions != nil || sent.Format == nil || sent.ToolChoice == nil {
		t.Errorf("re-query fields n=%v stream=%v options=%s format=%s choice=%s", sent.N, sent.Stream, sent.StreamOptions, sent.Format, sent.ToolChoice)
	}
	msgs := sent.Messages
	if len(msgs) != 6+5 {
		t.Fatalf("%d messages, want 11", len(msgs))
	}
	plain, _ := a.Choices[0].Raw.(turnRef).message()
	if !bytes.Equal(msgs[6], plain) {
		t.Errorf("plain turn replayed as %s, want %s", msgs[6], plain)
	}
	if string(msgs[7]) != `{"role":"tool","tool_call_id":"call_1","content":"bad \"args\""}` {
		t.Errorf("reply %s", msgs[7])
	}
	wantStreamed := `{"role":"assistant","content":"Hm. ","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":"{\"location\":\"Paris\"}"}}]}`
	if string(msgs[8]) != wantStreamed || string(msgs[10]) != `{"role":"assistant","content":""}` {
		t.Errorf("streamed turn %s, gap %s", msgs[8], msgs[10])
	}
	if _, err := c.ReQuery(a, &neutral.Query{History: []neutral.Round{{Turn: &neutral.Turn{Raw: "foreign"}}}}); err == nil {
		t.Error("a turn of another codec was replayed")
	}
}

func TestReQueryForADecision(t *testing.T) {
	c, _ := decode(t, convo)
	body, err := c.ReQuery(nil, &neutral.Query{Kind: neutral.KindReprompt, Decision: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte(`"tool_choice":"none"`)) || bytes.Contains(body, []byte("response_format")) ||
		!bytes.Contains(body, []byte(`"tools":[`)) {
		t.Fatalf("decision re-query %s", body)
	}
}

func TestEncodeAnswer(t *testing.T) {
	c := API{}.NewCodec()
	orig := readFixture(t, "parallel_tool_calls.json")
	a, err := c.DecodeAnswer(orig)
	if err != nil {
		t.Fatal(err)
	}
	calls := a.Choices[0].Calls
	t.Run("keep", func(t *testing.T) {
		for _, acts := range [][]neutral.Action{{{}}, {{Kind: neutral.Replace, Calls: calls, Changed: []bool{false, false}}}} {
			out, err := c.EncodeAnswer(a, acts)
			if err != nil || !bytes.Contains(out, firstChoice(t, orig)) {
				t.Fatalf("kept choice rewritten (%v): %s", err, out)
			}
		}
	})
	t.Run("replace", func(t *testing.T) {
		act := substitute(calls, 1, "get_stock_price", `{"ticker":"MSFT","exchange":"NASDAQ"}`)
		out, err := c.EncodeAnswer(a, []neutral.Action{act})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.DecodeAnswer(out)
		if err != nil {
			t.Fatal(err)
		}
		gc := got.Choices[0].Calls
		if len(gc) != 2 || !reflect.DeepEqual(gc[0], calls[0]) || gc[1].ID != calls[1].ID || string(gc[1].Args) != `{"ticker":"MSFT","exchange":"NASDAQ"}` {
			t.Fatalf("calls %+v", gc)
		}
		if bytes.Contains(out, []byte("toolgate_escalation")) || !bytes.Contains(out, []byte(`"finish_reason":"tool_calls"`)) {
			t.Errorf("answer %s", out)
		}
	})
	t.Run("respond", func(t *testing.T) {
		out, err := c.EncodeAnswer(a, []neutral.Action{{Kind: neutral.Respond, Text: "No tool fits."}})
		if err != nil {
			t.Fatal(err)
		}
		got := choiceOf(t, out)
		if got.Message != `{"role":"assistant","content":"No tool fits.","refusal":null}` || got.Finish != "stop" || got.Escalation != nil {
			t.Errorf("abstained answer %s", out)
		}
	})
	t.Run("respond with an escalation", func(t *testing.T) {
		esc := &neutral.Escalated{ID: "esc_1", Code: "unknown_tool", Text: "A person must look. [toolgate:esc_1]", Body: []byte(`{"id":"esc_1"}`)}
		out, err := c.EncodeAnswer(a, []neutral.Action{{Kind: neutral.Respond, Text: esc.Text, Escalation: esc}})
		if err != nil {
			t.Fatal(err)
		}
		got := choiceOf(t, out)
		if !strings.Contains(got.Message, esc.Text) || got.Finish != "stop" || string(got.Escalation) != `{"id":"esc_1"}` {
			t.Errorf("escalated answer %s", out)
		}
	})
}

// firstChoice is the bytes of the answer's first choice.
func firstChoice(t *testing.T, body []byte) []byte {
	t.Helper()
	var a struct{ Choices []json.RawMessage }
	if err := json.Unmarshal(body, &a); err != nil || len(a.Choices) == 0 {
		t.Fatalf("answer %s: %v", body, err)
	}
	return a.Choices[0]
}

type encodedChoice struct {
	Message    string
	Finish     string
	Escalation json.RawMessage
}

func choiceOf(t *testing.T, body []byte) encodedChoice {
	t.Helper()
	var a struct {
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
		Escalation json.RawMessage `json:"toolgate_escalation"`
	}
	if err := json.Unmarshal(body, &a); err != nil || len(a.Choices) != 1 {
		t.Fatalf("answer %s: %v", body, err)
	}
	return encodedChoice{Message: string(a.Choices[0].Message), Finish: a.Choices[0].FinishReason, Escalation: a.Escalation}
}

// A stream whose every choice is kept, or replaced with nothing marked
// changed, goes out as the upstream sent it; so does a kept choice in a
// chunk that another choice's action rewrites.
func TestStreamEncodeKeepsUntouchedChoices(t *testing.T) {
	// The spaces are what a rewrite of the chunk would not keep.
	kept := `{"index":1, "delta":{"tool_calls":[{"index":0, "id":"call_k", "type":"function", "function":{"name":"g", "arguments":"{}"}}]}, "finish_reason":null}`
	in := `data: {"id":"x", "choices":[{"index":0, "delta":{"tool_calls":[{"index":0, "id":"call_r", "type":"function", "function":{"name":"f", "arguments":"{}"}}]}, "finish_reason":null}, ` +
		kept + "]}\n\ndata: [DONE]\n\n"
	st, evs := mustFeed(t, []byte(in))
	turns := st.Turns()
	_, held := heldFrom(evs)
	for _, acts := range [][]neutral.Action{{{}, {}}, {{Kind: neutral.Replace, Calls: turns[0].Calls, Changed: []bool{false}}, {}}} {
		out, err := st.Encode(held, acts, api.Sent{})
		if err != nil || string(out) != in {
			t.Fatalf("untouched stream rewritten (%v): %s", err, out)
		}
	}
	out, err := st.Encode(held, []neutral.Action{{Kind: neutral.Respond, Text: "No tool fits."}, {}}, api.Sent{})
	if err != nil || !bytes.Contains(out, []byte(kept)) || bytes.Contains(out, []byte("call_r")) {
		t.Fatalf("kept choice not byte for byte beside a rewritten one (%v): %s", err, out)
	}
}

// toolgate's own errors use OpenAI's envelope, as the proxy wrote them for
// this route before: a refusal is an invalid_request_error with its reason
// as the code, other failures are typed by their code.
func TestEncodeError(t *testing.T) {
	c := API{}.NewCodec()
	for _, tc := range []struct {
		f    neutral.Failure
		want string
	}{
		{neutral.Failure{Status: 404, Code: "unknown_path", Message: "toolgate refused this request", Refusal: true},
			`{"error":{"type":"invalid_request_error","code":"unknown_path","message":"toolgate refused this request","param":null}}`},
		{neutral.Failure{Status: 502, Code: neutral.CodeUpstream, Message: "the upstream \"failed\"", Retryable: true},
			`{"error":{"type":"upstream_error","code":"upstream_error","message":"the upstream \"failed\"","param":null}}`},
	} {
		if got := string(c.EncodeError(tc.f)); got != tc.want {
			t.Errorf("EncodeError = %s, want %s", got, tc.want)
		}
	}
	// In a stream, the same envelope is a data event followed by [DONE].
	got := string(c.NewStream().ErrorEvent(neutral.Failure{Code: neutral.CodeUpstreamTimeout, Message: "silent"}, nil, api.Sent{}))
	want := `data: {"error":{"type":"upstream_timeout","code":"upstream_timeout","message":"silent","param":null}}` + "\n\ndata: [DONE]\n\n"
	if got != want {
		t.Errorf("ErrorEvent = %q, want %q", got, want)
	}
}

func TestEncodeEscalationAndCallJSON(t *testing.T) {
	c := API{}.NewCodec()
	esc := &neutral.Escalated{ID: "esc_2", Code: "schema_violation", Text: "needs a person", Body: []byte(`{"id":"esc_2"}`)}
	want := `{"error":{"type":"tool_call_escalation","code":"schema_violation","message":"needs a person","param":null,"escalation":{"id":"esc_2"}}}`
	if got := string(c.EncodeEscalation(esc)); got != want {
		t.Errorf("EncodeEscalation = %s, want %s", got, want)
	}
	call := neutral.ToolCall{ID: "call_9", Name: "f", Args: []byte(`{"a":"\"x\""}`)}
	wantCall := `{"id":"call_9","type":"function","function":{"name":"f","arguments":"{\"a\":\"\\\"x\\\"\"}"}}`
	if got := string(c.CallJSON(call)); got != wantCall {
		t.Errorf("CallJSON = %s, want %s", got, wantCall)
	}
}
