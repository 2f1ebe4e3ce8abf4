package responses

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/validate"
)

func TestDecodeRequestFixture(t *testing.T) {
	_, req := mustDecode(t, string(fixture(t, "request.json")))
	if req.Model != "gpt-4o-2024-08-06" || !req.Stream {
		t.Errorf("model %q stream %v", req.Model, req.Stream)
	}
	if len(req.Offered) != 2 || req.Offered[0].Name != "get_current_weather" || req.Offered[1].Name != "get_stock_price" {
		t.Fatalf("offered %+v", req.Offered)
	}
	if !bytes.Contains(req.Offered[0].Parameters, []byte(`"location"`)) {
		t.Errorf("parameters not kept: %s", req.Offered[0].Parameters)
	}
	if req.Choice.Kind != neutral.ChoiceAuto || req.StructuredOutput || req.HistoryUpstream || req.Stateful {
		t.Errorf("request flags %+v", req)
	}
	if !strings.HasPrefix(req.UserText, "What's the weather like in Boston") {
		t.Errorf("user text %q", req.UserText)
	}
	if ev := validate.NewCorpus(req.Vouching); !ev.Seen("AAPL") || !ev.Seen("NASDAQ") {
		t.Error("the user's string input does not vouch for its values")
	}
}

func TestDecodeRequestTools(t *testing.T) {
	_, req := mustDecode(t, `{"model":"m","input":"hi","tools":[
		{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true},
		{"type":"custom","name":"code_exec","description":"runs code","format":{"type":"text"}},
		{"type":"web_search"},{"type":"file_search","vector_store_ids":["vs_1"]},
		{"type":"mcp","server_label":"x","server_url":"https://example.com"},{"type":"code_interpreter","container":{"type":"auto"}},
		{"type":"image_generation"},{"type":"local_shell"},{"type":"computer_use_preview","display_width":1,"display_height":1,"environment":"browser"}]}`)
	if len(req.Offered) != 2 {
		t.Fatalf("offered %+v", req.Offered)
	}
	if req.Offered[0].Name != "f" || string(req.Offered[0].Parameters) != `{"type":"object"}` {
		t.Errorf("function tool %+v", req.Offered[0])
	}
	if req.Offered[1].Name != "code_exec" || req.Offered[1].Parameters != nil {
		t.Errorf("custom tool %+v", req.Offered[1])
	}
}

// Every place a request offers a tool is read: top-level functions with
// defer_loading, a namespace's members (top level and in input), an
// additional_tools input item (tool search, and clients that send every
// tool that way) and the tools a client-run tool search loaded. The
// tool_search tool itself, hosted tools and MCP servers are not function
// tools; a namespace inside a namespace is not a form the API takes.
func TestDecodeRequestDeferredTools(t *testing.T) {
	_, req := mustDecode(t, `{"model":"gpt-5.6","tools":[
		{"type":"function","name":"get_weather","defer_loading":true,"parameters":{"type":"object"}},
		{"type":"namespace","name":"crm","description":"CRM tools.","tools":[
			{"type":"function","name":"list_open_orders","defer_loading":true,"parameters":{"type":"object","required":["customer_id"]}},
			{"type":"custom","name":"crm_query"},
			{"type":"namespace","name":"inner","tools":[{"type":"function","name":"not_a_form_the_api_takes"}]}]},
		{"type":"tool_search"},{"type":"mcp","server_label":"x","defer_loading":true}],
	"input":[
		{"type":"additional_tools","role":"developer","tools":[
			{"type":"function","name":"lookup_refund_policy","defer_loading":true,"parameters":{"type":"object","properties":{"category":{"type":"string"}}}},
			{"type":"namespace","name":"orders","tools":[{"type":"function","name":"get_order_status","parameters":{"type":"object"}}]},
			{"type":"web_search"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"refunds?"}]},
		{"type":"tool_search_call","call_id":"ts_1","execution":"client","status":"completed","arguments":{"paths":["billing"]}},
		{"type":"mcp_list_tools","id":"mcpl_1","server_label":"x","tools":"not the shape of offered tools"},
		{"type":"tool_search_output","call_id":"ts_1","execution":"client","status":"completed","tools":[
			{"type":"function","name":"issue_refund","parameters":{"type":"object","required":["order_id"]}}]}]}`)
	var names []string
	for _, o := range req.Offered {
		names = append(names, o.Name)
	}
	want := "get_weather,list_open_orders,crm_query,lookup_refund_policy,get_order_status,issue_refund"
	if strings.Join(names, ",") != want {
		t.Fatalf("offered %v, want %s", names, want)
	}
	if p := string(req.Offered[3].Parameters); p != `{"type":"object","properties":{"category":{"type":"string"}}}` {
		t.Errorf("lookup_refund_policy's schema %s", p)
	}
	if strings.TrimSpace(req.UserText) != "refunds?" {
		t.Errorf("user text %q", req.UserText)
	}
}

func TestDecodeRequestToolChoice(t *testing.T) {
	cases := []struct {
		choice string
		kind   neutral.ChoiceKind
		names  []string
	}{
		{`"auto"`, neutral.ChoiceAuto, nil},
		{`null`, neutral.ChoiceAuto, nil},
		{`"none"`, neutral.ChoiceNone, nil},
		{`"required"`, neutral.ChoiceRequired, nil},
		{`{"type":"function","name":"f"}`, neutral.ChoiceNamed, []string{"f"}},
		{`{"type":"custom","name":"code_exec"}`, neutral.ChoiceNamed, []string{"code_exec"}},
		{`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"f"},{"type":"web_search"},{"type":"custom","name":"c"}]}`,
			neutral.ChoiceAllowed, []string{"f", "c"}},
		{`{"type":"allowed_tools","mode":"auto","tools":[]}`, neutral.ChoiceAllowed, []string{}},
		{`{"type":"file_search"}`, neutral.ChoiceAuto, nil},
		{`{"type":"web_search_preview"}`, neutral.ChoiceAuto, nil},
		{`{"type":"mcp","server_label":"x"}`, neutral.ChoiceAuto, nil},
	}
	for _, c := range cases {
		_, req := mustDecode(t, `{"model":"m","input":"hi","tool_choice":`+c.choice+`}`)
		if req.Choice.Kind != c.kind || strings.Join(req.Choice.Names, ",") != strings.Join(c.names, ",") {
			t.Errorf("%s: got %+v", c.choice, req.Choice)
		}
	}
	if _, err := (API{}).NewCodec().DecodeRequest("", []byte(`{"tool_choice":{"type":5}}`)); err == nil {
		t.Error("an unreadable tool_choice was accepted")
	}
}

func TestDecodeRequestVouchingAndState(t *testing.T) {
	_, req := mustDecode(t, `{"model":"m","instructions":"Use order ord_instr.",
		"input":[
			{"role":"developer","content":"dev says ord_dev"},
			{"role":"user","content":[{"type":"input_text","text":"refund ord_user1"},{"type":"input_image","image_url":"https://x"}]},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"assistant says ord_asst"}]},
			{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"id\":\"ord_args\"}"},
			{"type":"function_call_output","call_id":"c1","output":"{\"order\":\"ord_tool\"}"},
			{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"input_text","text":"ord_custom"}]},
			{"type":"message","role":"user","content":"and ord_user2 too"}
		]}`)
	vouching := validate.NewCorpus(req.Vouching)
	for _, s := range []string{"ord_user1", "ord_tool", "ord_custom", "ord_user2"} {
		if !vouching.Seen(s) {
			t.Errorf("%s should be vouched for", s)
		}
	}
	for _, s := range []string{"ord_instr", "ord_dev", "ord_asst", "ord_args"} {
		if vouching.Seen(s) {
			t.Errorf("%s must not be vouched for", s)
		}
	}
	if req.UserText != "and ord_user2 too" {
		t.Errorf("user text %q", req.UserText)
	}

	states := []struct {
		body                     string
		history, stateful, chain bool
		structured, store        bool
	}{
		{`{"input":"x"}`, false, false, false, false, true},
		{`{"input":"x","previous_response_id":"resp_1"}`, true, false, true, false, true},
		{`{"input":"x","previous_response_id":null}`, false, false, false, false, true},
		{`{"input":"x","previous_response_id":"resp_1","store":false}`, true, false, false, false, false},
		{`{"input":"x","conversation":"conv_1"}`, true, true, false, false, true},
		{`{"input":"x","conversation":{"id":"conv_1"}}`, true, true, false, false, true},
		{`{"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{}}}}`, false, false, false, true, true},
		{`{"input":"x","text":{"format":{"type":"json_object"}}}`, false, false, false, true, true},
		{`{"input":"x","text":{"format":{"type":"text"},"verbosity":"low"}}`, false, false, false, false, true},
	}
	for _, s := range states {
		c, req := mustDecode(t, s.body)
		info := c.info
		if req.HistoryUpstream != s.history || req.Stateful != s.stateful || info.chain != s.chain ||
			req.StructuredOutput != s.structured || info.store != s.store {
			t.Errorf("%s: history %v stateful %v chain %v structured %v store %v", s.body,
				req.HistoryUpstream, req.Stateful, info.chain, req.StructuredOutput, info.store)
		}
	}
}

func TestDecodeAnswerFixture(t *testing.T) {
	body := fixture(t, "function_call.json")
	resp := mustDecodeAnswer(t, string(body))
	if len(resp.Choices) != 1 {
		t.Fatalf("%d turns", len(resp.Choices))
	}
	turn := resp.Choices[0]
	if turn.ResponseID != "resp_791e558e08baa7196b50ac2f86702824c1c099724caf4941" || turn.Truncated() {
		t.Errorf("turn %+v", turn)
	}
	if len(turn.Calls) != 1 {
		t.Fatalf("calls %+v", turn.Calls)
	}
	c := turn.Calls[0]
	if c.ID != "call_rGsNrfSthSdddxH5jMTF7eBS" || c.Name != "get_current_weather" || c.Kind != neutral.Function ||
		string(c.Args) != `{"location":"Boston, MA","unit":"celsius"}` || c.BadShape {
		t.Errorf("call %+v (%s)", c, c.Args)
	}
	if resp.Usage != (neutral.Usage{Input: 291, Output: 23}) {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestDecodeAnswerMixedItems(t *testing.T) {
	resp := mustDecodeAnswer(t, responseOf("resp_1", itemReasoning, itemMessage, itemSearch, itemCall, itemCustom))
	turn := resp.Choices[0]
	if len(turn.Calls) != 2 || turn.Calls[0].Name != "get_weather" || turn.Calls[1].Kind != neutral.Custom ||
		string(turn.Calls[1].Args) != "print(1)" || turn.Calls[1].ID != "call_03" {
		t.Fatalf("calls %+v", turn.Calls)
	}
	if turn.Text != "Let me check that." {
		t.Errorf("text %q", turn.Text)
	}
	ti := turn.Raw.(*turnItems)
	if len(ti.items) != 5 || ti.callAt[0] != 3 || ti.callAt[1] != 4 || string(ti.items[0]) != itemReasoning {
		t.Errorf("raw %+v", ti.callAt)
	}

	bad := mustDecodeAnswer(t, responseOf("resp_2", `{"id":"fc_9","type":"function_call","call_id":"c9","name":"f","arguments":{"a":1}}`))
	if c := bad.Choices[0].Calls[0]; !c.BadShape || string(c.Args) != `{"a":1}` {
		t.Errorf("object arguments: %+v", c)
	}

	cut := strings.Replace(responseOf("resp_3", itemCall), `"status":"completed","error":null,"incomplete_details":null`,
		`"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"}`, 1)
	if !mustDecodeAnswer(t, cut).Choices[0].Truncated() {
		t.Error("a call cut off by max_output_tokens is not truncated")
	}
	textOnly := strings.Replace(responseOf("resp_4", itemMessage), `"status":"completed","error":null,"incomplete_details":null`,
		`"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"}`, 1)
	if mustDecodeAnswer(t, textOnly).Choices[0].Truncated() {
		t.Error("cut-off text without a call is not a truncated call")
	}
	for _, b := range []string{`{"object":"list","data":[]}`, `[]`, `{"output":null}`} {
		if _, err := (API{}).NewCodec().DecodeAnswer([]byte(b)); err == nil {
			t.Errorf("%s was read as a response", b)
		}
	}
}

func TestEncodeAnswerUnchangedIsIdentity(t *testing.T) {
	req := codecFor(t, string(fixture(t, "request.json")))
	body := fixture(t, "function_call.json")
	resp := mustDecodeAnswer(t, string(body))
	turn := resp.Choices[0]
	for _, act := range []neutral.Action{{Kind: neutral.Keep}, replaced(turn, nil)} {
		out, err := req.EncodeAnswer(resp, []neutral.Action{act})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, body) {
			t.Errorf("an answer with nothing changed was rewritten:\n%s", out)
		}
	}
	if out, err := req.EncodeAnswer(resp, nil); err != nil || !bytes.Equal(out, body) {
		t.Errorf("an answer without actions was rewritten: %v\n%s", err, out)
	}
}

func TestEncodeAnswerSubstitutionKeepsIDsAndPositions(t *testing.T) {
	req := codecFor(t, `{"model":"m","input":"weather in Boston?","tools":[{"type":"function","name":"get_weather","parameters":{}}]}`)
	body := responseOf("resp_1", itemReasoning, itemMessage, itemBadCall, itemCall)
	resp := mustDecodeAnswer(t, body)
	turn := resp.Choices[0]
	res := replaced(turn, map[int]neutral.ToolCall{
		0: {Name: "get_weather", Args: []byte(`{"location":"Paris"}`), Kind: neutral.Function}})
	out, err := req.EncodeAnswer(resp, []neutral.Action{res})
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := jsonx.ParseObject(out)
	items, _ := jsonx.ParseArray(obj.Get("output"))
	if len(items) != 4 {
		t.Fatalf("output %s", obj.Get("output"))
	}
	for i, want := range []string{itemReasoning, itemMessage, "", itemCall} {
		if want != "" && string(items[i]) != want {
			t.Errorf("item %d changed: %s", i, items[i])
		}
	}
	want := `{"id":"fc_02","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"}","call_id":"call_02","name":"get_weather"}`
	if string(items[2]) != want {
		t.Errorf("repaired item\n got %s\nwant %s", items[2], want)
	}
	if string(obj.Get("id")) != `"resp_1"` || string(obj.Get("usage")) != `{"input_tokens":10,"output_tokens":5,"total_tokens":15}` {
		t.Errorf("the response around the output changed: %s", out)
	}
	// Everything outside the output is the upstream's bytes.
	orig, _ := jsonx.ParseObject([]byte(body))
	if !bytes.Equal(orig.Delete("output").Bytes(), obj.Delete("output").Bytes()) {
		t.Error("fields outside the output were rewritten")
	}
}

func TestEncodeAnswerCustomCallRepair(t *testing.T) {
	req := codecFor(t, `{"model":"m","input":"x"}`)
	resp := mustDecodeAnswer(t, responseOf("resp_1", itemCustom))
	res := replaced(resp.Choices[0], map[int]neutral.ToolCall{
		0: {Name: "python", Args: []byte("print(2)"), Kind: neutral.Custom}})
	out, err := req.EncodeAnswer(resp, []neutral.Action{res})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`{"id":"ctc_01","type":"custom_tool_call","status":"completed","call_id":"call_03","name":"python","input":"print(2)"}`)) {
		t.Errorf("custom call not repaired in place: %s", out)
	}
}

func TestEncodeAnswerEscalationAndAbstainMessage(t *testing.T) {
	req := codecFor(t, `{"model":"m","input":"x"}`)
	body := strings.Replace(responseOf("resp_1", itemReasoning, itemMessage, itemBadCall), `"metadata":{}`, `"metadata":{},"output_text":"Let me check that."`, 1)
	resp := mustDecodeAnswer(t, body)
	esc := escalated("This step needs a person: no tool fits. [toolgate:esc_0123456789abcdef01234567]")
	out, err := req.EncodeAnswer(resp, []neutral.Action{escalating(esc)})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID         string            `json:"id"`
		Status     string            `json:"status"`
		Output     []json.RawMessage `json:"output"`
		OutputText string            `json:"output_text"`
		Escalation json.RawMessage   `json:"toolgate_escalation"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	wantItem := `{"type":"message","id":"msg_toolgate_0123456789abcdef01234567","status":"completed","role":"assistant","content":[{"type":"output_text","text":` +
		string(jsonx.String(esc.Text)) + `,"annotations":[]}]}`
	if len(got.Output) != 1 || string(got.Output[0]) != wantItem {
		t.Errorf("output %s", got.Output)
	}
	if got.ID != "resp_1" || got.Status != "completed" || got.OutputText != esc.Text || string(got.Escalation) != string(esc.Body) {
		t.Errorf("escalated answer %s", out)
	}

	cut := strings.Replace(responseOf("resp_2", itemCall), `"status":"completed","error":null,"incomplete_details":null`,
		`"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"}`, 1)
	resp = mustDecodeAnswer(t, cut)
	out, err = req.EncodeAnswer(resp, []neutral.Action{abstaining("No tool can book trains.")})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"text":"No tool can book trains."`)) || bytes.Contains(out, []byte("toolgate_escalation")) ||
		!bytes.Contains(out, []byte(`"status":"completed","error":null,"incomplete_details":null`)) {
		t.Errorf("abstained answer %s", out)
	}
}

// A chained request's repair continues the stored conversation: the client
// gets the last re-query's response id, and the repaired call the call_id
// and item id the upstream stored for it.
func TestEncodeAnswerChainedTakesRequeryIDs(t *testing.T) {
	req := codecFor(t, `{"model":"m","previous_response_id":"resp_0","input":[{"type":"function_call_output","call_id":"c0","output":"ok"}]}`)
	resp := mustDecodeAnswer(t, responseOf("resp_1", itemReasoning, itemBadCall, itemCall))
	turn := resp.Choices[0]
	requery := mustDecodeAnswer(t, responseOf("resp_2",
		`{"id":"fc_22","type":"function_call","status":"completed","arguments":"{\"location\":\"Oslo\"}","call_id":"call_22","name":"get_weather"}`)).Choices[0]
	res := replaced(turn, map[int]neutral.ToolCall{
		0: {Name: "get_weather", Args: []byte(`{"location":"Oslo"}`), Kind: neutral.Function}}, requery)
	out, err := req.EncodeAnswer(resp, []neutral.Action{res})
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := jsonx.ParseObject(out)
	items, _ := jsonx.ParseArray(obj.Get("output"))
	if string(obj.Get("id")) != `"resp_2"` {
		t.Errorf("id %s, want the re-query's", obj.Get("id"))
	}
	want := `{"id":"fc_22","type":"function_call","status":"completed","arguments":"{\"location\":\"Oslo\"}","call_id":"call_22","name":"get_weather"}`
	if string(items[1]) != want || string(items[0]) != itemReasoning || string(items[2]) != itemCall {
		t.Errorf("output %s", obj.Get("output"))
	}

	// A stored request that does not chain was replayed whole, and its
	// re-query's answer is stored too: the client continues from there as
	// well, or its previous_response_id and item_reference would name the
	// stored bad call.
	plain := codecFor(t, `{"model":"m","input":"x"}`)
	out, err = plain.EncodeAnswer(resp, []neutral.Action{res})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"id":"resp_2"`)) || !bytes.Contains(out, []byte(want)) {
		t.Errorf("stored answer %s", out)
	}

	// With store false nothing was stored: the original ids stay, since
	// the re-query was a replay the client never sees.
	unstored := codecFor(t, `{"model":"m","input":"x","store":false}`)
	out, err = unstored.EncodeAnswer(resp, []neutral.Action{res})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"id":"resp_1"`)) || !bytes.Contains(out, []byte(`"call_id":"call_02","name":"get_weather"`)) {
		t.Errorf("unstored answer %s", out)
	}
}

func TestEncodeEscalationAndCallJSON(t *testing.T) {
	esc := escalated("needs a person")
	var env struct {
		Error struct {
			Type, Code, Message string
			Escalation          json.RawMessage
		}
	}
	c := API{}.NewCodec()
	if err := json.Unmarshal(c.EncodeEscalation(esc), &env); err != nil {
		t.Fatal(err)
	}
	if env.Error.Type != "tool_call_escalation" || env.Error.Code != "unknown_tool" || string(env.Error.Escalation) != string(esc.Body) {
		t.Errorf("error body %+v", env)
	}
	got := string(c.CallJSON(neutral.ToolCall{ID: "call_1", Name: "refund", Args: []byte(`{"a":1}`)}))
	if got != `{"type":"function_call","call_id":"call_1","name":"refund","arguments":"{\"a\":1}"}` {
		t.Errorf("CallJSON %s", got)
	}
	got = string(c.CallJSON(neutral.ToolCall{ID: "call_2", Name: "sh", Args: []byte(`ls`), Kind: neutral.Custom}))
	if got != `{"type":"custom_tool_call","call_id":"call_2","name":"sh","input":"ls"}` {
		t.Errorf("CallJSON custom %s", got)
	}
}

func TestInjectTool(t *testing.T) {
	req := codecFor(t, `{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{}}],"stream":true}`)
	out, err := req.InjectTool(neutral.Offered{Name: "no_tool", Description: "d", Parameters: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{}},{"type":"function","name":"no_tool","description":"d","parameters":{"type":"object"},"strict":false}],"stream":true}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	_, again := mustDecode(t, string(out))
	if len(again.Offered) != 2 || again.Offered[1].Name != "no_tool" {
		t.Errorf("the injected tool is not offered: %+v", again.Offered)
	}
}

// turnOf wraps a response's only turn.
func turnOf(t *testing.T, body string) *neutral.Turn {
	t.Helper()
	return mustDecodeAnswer(t, body).Choices[0]
}

func decodeInput(t *testing.T, body []byte) (jsonx.Object, [][]byte) {
	t.Helper()
	obj, err := jsonx.ParseObject(body)
	if err != nil {
		t.Fatalf("re-query is not JSON: %v\n%s", err, body)
	}
	items, err := jsonx.ParseArray(obj.Get("input"))
	if err != nil {
		t.Fatalf("input: %v", err)
	}
	return obj, items
}

func TestReQueryStatelessReplaysItems(t *testing.T) {
	reqBody := `{"model":"gpt-5","instructions":"Be brief.","input":"Weather in Boston?","store":false,` +
		`"include":["reasoning.encrypted_content"],"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],` +
		`"tool_choice":"auto","text":{"format":{"type":"text"},"verbosity":"low"},"stream":true,"stream_options":{"include_obfuscation":false}}`
	req := codecFor(t, reqBody)
	turn := turnOf(t, responseOf("resp_1", itemReasoning, itemMessage, itemBadCall, itemCall))
	q := &neutral.Query{Kind: neutral.KindRecovery, Decision: true, History: []neutral.Round{{Turn: turn, Replies: []neutral.CallReply{
		{CallID: "call_02", Content: "database_query does not exist", IsError: true},
		{CallID: "call_01", Content: "held"},
	}}}}
	out, err := req.ReQuery(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	obj, items := decodeInput(t, out)
	want := []string{
		`{"role":"user","content":"Weather in Boston?"}`,
		itemReasoning, itemMessage, itemBadCall, itemCall,
		`{"type":"function_call_output","call_id":"call_02","output":"database_query does not exist"}`,
		`{"type":"function_call_output","call_id":"call_01","output":"held"}`,
	}
	if len(items) != len(want) {
		t.Fatalf("input has %d items:\n%s", len(items), obj.Get("input"))
	}
	for i := range want {
		if string(items[i]) != want[i] {
			t.Errorf("input item %d\n got %s\nwant %s", i, items[i], want[i])
		}
	}
	orig, _ := jsonx.ParseObject([]byte(reqBody))
	for _, k := range []string{"model", "instructions", "store", "include", "tools"} {
		if !bytes.Equal(orig.Get(k), obj.Get(k)) {
			t.Errorf("%s changed: %s", k, obj.Get(k))
		}
	}
	if string(obj.Get("stream")) != "false" || obj.Has("stream_options") || obj.Has("previous_response_id") {
		t.Errorf("stream fields: %s", out)
	}
	if string(obj.Get("tool_choice")) != `"none"` || string(obj.Get("text")) != `{"verbosity":"low"}` {
		t.Errorf("decision fields: tool_choice %s text %s", obj.Get("tool_choice"), obj.Get("text"))
	}

	// A reprompt keeps tool_choice and text; a second exchange is appended
	// after the first one's outputs; custom calls get custom outputs.
	req2 := codecFor(t, `{"model":"m","input":[{"role":"user","content":"go"}],"tool_choice":"required","text":{"format":{"type":"json_object"}}}`)
	t1 := turnOf(t, responseOf("resp_1", itemCustom))
	t2 := turnOf(t, responseOf("resp_2", itemCall))
	q2 := &neutral.Query{Kind: neutral.KindReprompt, History: []neutral.Round{
		{Turn: t1, Replies: []neutral.CallReply{{CallID: "call_03", Content: "bad", IsError: true}}},
		{Turn: t2, Replies: []neutral.CallReply{{CallID: "call_01", Content: "still bad", IsError: true}}},
	}}
	out, err = req2.ReQuery(nil, q2)
	if err != nil {
		t.Fatal(err)
	}
	obj, items = decodeInput(t, out)
	want = []string{`{"role":"user","content":"go"}`, itemCustom,
		`{"type":"custom_tool_call_output","call_id":"call_03","output":"bad"}`, itemCall,
		`{"type":"function_call_output","call_id":"call_01","output":"still bad"}`}
	for i := range want {
		if i >= len(items) || string(items[i]) != want[i] {
			t.Fatalf("input %s", obj.Get("input"))
		}
	}
	if string(obj.Get("tool_choice")) != `"required"` || string(obj.Get("text")) != `{"format":{"type":"json_object"}}` || obj.Has("stream") {
		t.Errorf("reprompt changed fields it must keep: %s", out)
	}
}

// With store false and no encrypted reasoning, the reasoning item points at
// nothing the provider kept: it is left out and the items it led to lose
// their ids, which the provider would otherwise pair with it.
func TestReQueryStoreFalseBareReasoning(t *testing.T) {
	req := codecFor(t, `{"model":"m","input":"x","store":false}`)
	turn := turnOf(t, responseOf("resp_1", itemReasoningBare, itemBadCall))
	q := &neutral.Query{History: []neutral.Round{{Turn: turn, Replies: []neutral.CallReply{{CallID: "call_02", Content: "no"}}}}}
	out, err := req.ReQuery(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	_, items := decodeInput(t, out)
	if len(items) != 3 || bytes.Contains(items[1], []byte(`"id"`)) || !bytes.Contains(items[1], []byte(`"call_id":"call_02"`)) {
		t.Errorf("input %q", items)
	}
	// Stored: the same items replay byte for byte.
	stored := codecFor(t, `{"model":"m","input":"x"}`)
	out, _ = stored.ReQuery(nil, q)
	_, items = decodeInput(t, out)
	if len(items) != 4 || string(items[1]) != itemReasoningBare || string(items[2]) != itemBadCall {
		t.Errorf("stored input %q", items)
	}
}

func TestReQueryChained(t *testing.T) {
	reqBody := `{"model":"m","previous_response_id":"resp_0","instructions":"Be brief.",` +
		`"input":[{"type":"function_call_output","call_id":"call_prev","output":"42"}],"tools":[{"type":"function","name":"get_weather"}],"stream":true}`
	req := codecFor(t, reqBody)
	t1 := turnOf(t, responseOf("resp_1", itemReasoning, itemBadCall, itemCall))
	q := &neutral.Query{Kind: neutral.KindRecovery, History: []neutral.Round{{Turn: t1, Replies: []neutral.CallReply{
		{CallID: "call_02", Content: "unknown tool"}, {CallID: "call_01", Content: "held"}}}}}
	out, err := req.ReQuery(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","previous_response_id":"resp_1","instructions":"Be brief.","input":[` +
		`{"type":"function_call_output","call_id":"call_02","output":"unknown tool"},` +
		`{"type":"function_call_output","call_id":"call_01","output":"held"}],` +
		`"tools":[{"type":"function","name":"get_weather"}],"stream":false}`
	if string(out) != want {
		t.Errorf("chained re-query\n got %s\nwant %s", out, want)
	}

	// A chain of exchanges continues from the last answer with its outputs.
	t2 := turnOf(t, responseOf("resp_2", `{"id":"fc_5","type":"function_call","call_id":"call_05","name":"get_weather","arguments":"{}"}`))
	q.History = append(q.History, neutral.Round{Turn: t2, Replies: []neutral.CallReply{{CallID: "call_05", Content: "location is required"}}})
	out, err = req.ReQuery(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	obj, items := decodeInput(t, out)
	if string(obj.Get("previous_response_id")) != `"resp_2"` || len(items) != 1 ||
		string(items[0]) != `{"type":"function_call_output","call_id":"call_05","output":"location is required"}` {
		t.Errorf("second chained re-query %s", out)
	}

	// store false: nothing is stored upstream, so the replay is stateless
	// and the client's own previous_response_id stays.
	unstored := codecFor(t, strings.Replace(reqBody, `"stream":true`, `"stream":true,"store":false`, 1))
	out, err = unstored.ReQuery(nil, &neutral.Query{History: q.History[:1]})
	if err != nil {
		t.Fatal(err)
	}
	obj, items = decodeInput(t, out)
	if string(obj.Get("previous_response_id")) != `"resp_0"` || len(items) != 6 || string(items[1]) != itemReasoning {
		t.Errorf("unstored re-query %s", out)
	}
}

func TestReQueryRefusals(t *testing.T) {
	turn := turnOf(t, responseOf("resp_1", itemBadCall))
	q := &neutral.Query{History: []neutral.Round{{Turn: turn, Replies: []neutral.CallReply{{CallID: "call_02", Content: "x"}}}}}
	conv := codecFor(t, `{"model":"m","input":"x","conversation":"conv_1"}`)
	if _, err := conv.ReQuery(nil, q); err == nil {
		t.Error("a conversation request was re-queried")
	}
	foreign := &neutral.Query{History: []neutral.Round{{Turn: &neutral.Turn{Raw: "chat"}}}}
	if _, err := codecFor(t, `{"input":"x"}`).ReQuery(nil, foreign); err == nil {
		t.Error("a turn of another codec was replayed")
	}
	unread := API{}.NewCodec()
	if _, err := unread.DecodeRequest("", []byte("not json")); err == nil {
		t.Error("an unreadable request was decoded")
	}
	if _, err := unread.ReQuery(nil, q); err == nil {
		t.Error("an unreadable request was re-queried")
	}
}
