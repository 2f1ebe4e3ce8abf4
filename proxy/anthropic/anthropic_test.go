package anthropic

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/validate"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compact(t testing.TB, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return buf.String()
}

func newCodec() *codec { return API{}.NewCodec().(*codec) }

// mustDecode is a new codec that has read body as its request.
func mustDecode(t testing.TB, body string) (*codec, *neutral.Request) {
	t.Helper()
	c := newCodec()
	req, err := c.DecodeRequest("", []byte(body))
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	return c, req
}

// vouched reports whether the request's vouching texts vouch for tok.
func vouched(req *neutral.Request, tok string) bool {
	return validate.NewCorpus(req.Vouching).Seen(tok)
}

// changed is the action that replaces the calls marked in which by calls.
func changed(calls []neutral.ToolCall, which ...bool) []neutral.Action {
	return []neutral.Action{{Kind: neutral.Replace, Calls: calls, Changed: which}}
}

func TestParseRequestFixture(t *testing.T) {
	_, req := mustDecode(t, string(fixture(t, "request.json")))
	if req.Model != "claude-sonnet-4-5-20250929" || !req.Stream {
		t.Fatalf("model %q stream %v", req.Model, req.Stream)
	}
	if len(req.Offered) != 2 || req.Offered[0].Name != "get_current_weather" || req.Offered[1].Name != "get_stock_price" {
		t.Fatalf("offered %+v", req.Offered)
	}
	if !strings.Contains(string(req.Offered[0].Parameters), `"location"`) || req.Offered[0].Description == "" {
		t.Fatalf("offered[0] %+v", req.Offered[0])
	}
	if req.Choice.Kind != neutral.ChoiceAuto || req.StructuredOutput {
		t.Fatalf("choice %+v structured %v", req.Choice, req.StructuredOutput)
	}
	if !vouched(req, "AAPL") || !vouched(req, "NASDAQ") {
		t.Fatal("user text does not vouch for AAPL / NASDAQ")
	}
	if !strings.Contains(req.UserText, "weather like in Boston") {
		t.Fatalf("user text %q", req.UserText)
	}
}

func TestParseRequestToolsAndChoice(t *testing.T) {
	body := `{"model":"m","max_tokens":10,
	 "tools":[
	  {"name":"fn","description":"d","input_schema":{"type":"object"}},
	  {"type":"custom","name":"fn2","input_schema":{"type":"object"}},
	  {"type":"web_search_20250305","name":"web_search","max_uses":3},
	  {"type":"bash_20250124","name":"bash"},
	  {"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},
	  {"type":"code_execution_20250825","name":"code_execution"}
	 ],
	 "messages":[{"role":"user","content":"hi"}]}`
	c, req := mustDecode(t, body)
	var names []string
	for _, o := range req.Offered {
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != "fn,fn2" {
		t.Fatalf("offered %v, want only the function tools", names)
	}
	typed := c.typed
	for _, n := range []string{"web_search", "bash", "str_replace_based_edit_tool", "code_execution"} {
		if !typed[n] {
			t.Errorf("%s not recorded as an Anthropic-defined tool", n)
		}
	}
	for _, tc := range []struct {
		choice string
		kind   neutral.ChoiceKind
		names  []string
	}{
		{`{"type":"auto"}`, neutral.ChoiceAuto, nil},
		{`{"type":"any","disable_parallel_tool_use":true}`, neutral.ChoiceRequired, nil},
		{`{"type":"tool","name":"fn"}`, neutral.ChoiceNamed, []string{"fn"}},
		{`{"type":"none"}`, neutral.ChoiceNone, nil},
		{`null`, neutral.ChoiceAuto, nil},
	} {
		_, r := mustDecode(t, `{"model":"m","tool_choice":`+tc.choice+`,"messages":[]}`)
		if r.Choice.Kind != tc.kind || strings.Join(r.Choice.Names, ",") != strings.Join(tc.names, ",") {
			t.Errorf("tool_choice %s: got %+v", tc.choice, r.Choice)
		}
	}
	if _, err := newCodec().DecodeRequest("", []byte(`{"model":"m","tool_choice":"auto"}`)); err == nil {
		t.Error("a tool_choice that is not an object was accepted")
	}
	for _, bad := range []string{``, `[]`, `null`, `{"messages":5}`, `{"stream":"yes"}`} {
		if _, err := newCodec().DecodeRequest("", []byte(bad)); err == nil {
			t.Errorf("DecodeRequest(%q) succeeded", bad)
		}
	}
}

// Tool search: a deferred tool (defer_loading) is an offered tool like any
// other; the search tools themselves are server tools, and the tools a
// search returns are referenced by name from tools, so nothing else offers
// one.
func TestParseRequestDeferredTools(t *testing.T) {
	body := `{"model":"claude-sonnet-4-5","max_tokens":10,
	 "tools":[
	  {"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"},
	  {"type":"tool_search_tool_bm25_20251119","name":"tool_search_tool_bm25"},
	  {"name":"lookup_refund_policy","description":"d","input_schema":{"type":"object","properties":{"category":{"type":"string"}}},"defer_loading":true},
	  {"name":"get_weather","input_schema":{"type":"object"}}
	 ],
	 "messages":[{"role":"user","content":"refunds?"}]}`
	_, req := mustDecode(t, body)
	var names []string
	for _, o := range req.Offered {
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != "lookup_refund_policy,get_weather" {
		t.Fatalf("offered %v", names)
	}
}

func TestParseRequestStructuredOutput(t *testing.T) {
	for body, want := range map[string]bool{
		`{"messages":[]}`: false,
		`{"messages":[],"output_format":{"type":"json_schema","schema":{}}}`:            true,
		`{"messages":[],"output_config":{"format":{"type":"json_schema","schema":{}}}}`: true,
		`{"messages":[],"output_config":{"effort":"low"}}`:                              false,
		`{"messages":[],"output_format":null}`:                                          false,
	} {
		if _, req := mustDecode(t, body); req.StructuredOutput != want {
			t.Errorf("%s: structured output %v, want %v", body, req.StructuredOutput, want)
		}
	}
}

func TestParseRequestEvidence(t *testing.T) {
	body := `{"model":"m","messages":[
	  {"role":"user","content":[{"type":"text","text":"refund order ord_771"}]},
	  {"role":"assistant","content":[{"type":"text","text":"customer cus_assistant"},{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}]},
	  {"role":"user","content":[
	     {"type":"tool_result","tool_use_id":"toolu_1","content":"invoice inv_string"},
	     {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"invoice inv_block"}],"is_error":false},
	     {"type":"tool_result","tool_use_id":"toolu_3","content":[{"type":"search_result","source":"s","title":"t","content":[{"type":"text","text":"deep ref_nested"}]}]}
	  ]},
	  {"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc doc_42"}},{"type":"text","text":"latest question"}]}
	]}`
	_, req := mustDecode(t, body)
	for _, tok := range []string{"ord_771", "inv_string", "inv_block", "ref_nested", "doc_42"} {
		if !vouched(req, tok) {
			t.Errorf("%s not vouched for", tok)
		}
	}
	if vouched(req, "cus_assistant") {
		t.Error("assistant text vouched for a value")
	}
	if !strings.Contains(req.UserText, "latest question") || strings.Contains(req.UserText, "inv_") {
		t.Errorf("user text %q", req.UserText)
	}
	// A final turn of tool results alone leaves the last written text.
	_, req = mustDecode(t, `{"messages":[{"role":"user","content":"first ask"},
	  {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x","input":{}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"r"}]}]}`)
	if req.UserText != "first ask" {
		t.Errorf("user text %q, want the last text a person wrote", req.UserText)
	}
}

func TestParseResponseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file  string
		names []string
		in    int64
		out   int64
	}{
		{"tool_use.json", []string{"get_current_weather"}, 412, 71},
		{"parallel_tool_use.json", []string{"get_current_weather", "get_stock_price"}, 431, 123},
	} {
		body := fixture(t, tc.file)
		resp, err := newCodec().DecodeAnswer(body)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 {
			t.Fatalf("%s: %d turns", tc.file, len(resp.Choices))
		}
		turn := resp.Choices[0]
		if len(turn.Calls) != len(tc.names) {
			t.Fatalf("%s: calls %+v", tc.file, turn.Calls)
		}
		var w struct {
			Content []struct {
				ID    string          `json:"id"`
				Input json.RawMessage `json:"input"`
			} `json:"content"`
		}
		_ = json.Unmarshal(body, &w)
		for i, c := range turn.Calls {
			blk := w.Content[i+1]
			if c.Name != tc.names[i] || c.ID != blk.ID || c.Kind != neutral.Function {
				t.Errorf("%s call %d: %+v", tc.file, i, c)
			}
			if !bytes.Equal(c.Args, blk.Input) {
				t.Errorf("%s call %d args not the input bytes exactly: %q", tc.file, i, c.Args)
			}
		}
		if !strings.HasPrefix(turn.Text, "I'll") || turn.Truncated() {
			t.Errorf("%s: text %q truncated %v", tc.file, turn.Text, turn.Truncated())
		}
		if resp.Usage != (neutral.Usage{Input: tc.in, Output: tc.out}) || turn.Usage != resp.Usage {
			t.Errorf("%s: usage %+v", tc.file, resp.Usage)
		}
		// Every call of the fixtures is valid: encoding the answer kept,
		// or with nothing replaced, is the upstream's body, byte for byte.
		for _, acts := range [][]neutral.Action{nil, {{Kind: neutral.Keep}}, changed(turn.Calls, make([]bool, len(turn.Calls))...)} {
			out, err := newCodec().EncodeAnswer(resp, acts)
			if err != nil || !bytes.Equal(out, body) {
				t.Errorf("%s: encoding a valid answer changed it (%v)", tc.file, err)
			}
		}
	}
}

// mixedResponse has every kind of block a Messages answer may carry.
const mixedResponse = `{"id":"msg_mixed","type":"message","role":"assistant","model":"m","content":[
 {"type":"thinking","thinking":"Let me think.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxx+/sig=="},
 {"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
 {"type":"text","text":"Searching first."},
 {"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"weather"}},
 {"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://x","title":"x","encrypted_content":"abc"}]},
 {"type":"mcp_tool_use","id":"mcptoolu_1","name":"echo","server_name":"srv","input":{}},
 {"type":"mcp_tool_result","tool_use_id":"mcptoolu_1","is_error":false,"content":[{"type":"text","text":"ok"}]},
 {"type":"text","text":" Now the tools."},
 {"type":"tool_use","id":"toolu_A","name":"get_weather","input":{"location":"Boston, MA"},"caller":{"type":"direct"}},
 {"type":"thinking","thinking":"And the stock.","signature":"SIG2=="},
 {"type":"tool_use","id":"toolu_B","name":"get_stock_price","input":{"ticker":"AAPL","exchange":"NASDAQ"}}
],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":20,"server_tool_use":{"web_search_requests":1}}}`

func TestParseResponseMixedBlocks(t *testing.T) {
	resp, err := newCodec().DecodeAnswer([]byte(mixedResponse))
	if err != nil {
		t.Fatal(err)
	}
	turn := resp.Choices[0]
	if len(turn.Calls) != 2 || turn.Calls[0].ID != "toolu_A" || turn.Calls[1].ID != "toolu_B" {
		t.Fatalf("calls %+v: only tool_use blocks are calls", turn.Calls)
	}
	if turn.Text != "Searching first. Now the tools." {
		t.Errorf("text %q", turn.Text)
	}
	raw, _ := turn.Raw.(content)
	obj, _ := jsonx.ParseObject([]byte(mixedResponse))
	if !bytes.Equal(raw, obj.Get("content")) {
		t.Error("Raw is not the content array byte for byte")
	}

	trunc := strings.Replace(mixedResponse, `"stop_reason":"tool_use"`, `"stop_reason":"max_tokens"`, 1)
	resp, _ = newCodec().DecodeAnswer([]byte(trunc))
	if !resp.Choices[0].Truncated() {
		t.Error("max_tokens with a tool_use is not truncated")
	}
	resp, _ = newCodec().DecodeAnswer([]byte(`{"type":"message","content":[{"type":"text","text":"x"}],"stop_reason":"max_tokens"}`))
	if resp.Choices[0].Truncated() {
		t.Error("max_tokens without a call is truncated")
	}
	future := `{"type":"message","content":[{"type":"future_block","text":{"a":1},"name":5},{"type":"tool_use","id":"t","name":"n","input":{}}],"stop_reason":"tool_use"}`
	if resp, err := newCodec().DecodeAnswer([]byte(future)); err != nil || len(resp.Choices[0].Calls) != 1 {
		t.Errorf("an unknown block type made the answer unreadable: %v", err)
	}
	pause := `{"type":"message","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}}],"stop_reason":"pause_turn"}`
	resp, err = newCodec().DecodeAnswer([]byte(pause))
	if err != nil || len(resp.Choices[0].Calls) != 0 {
		t.Errorf("pause_turn: %v %+v", err, resp)
	}
	for _, bad := range []string{`{}`, `[]`, `{"content":{}}`, `{"content":[1]}`, `nope`} {
		if _, err := newCodec().DecodeAnswer([]byte(bad)); err == nil {
			t.Errorf("DecodeAnswer(%s) succeeded", bad)
		}
	}
}

// thinkingRequest has thinking on, a system prompt, a structured output and a
// history, all of which a re-query must keep as sent.
const thinkingRequest = `{
  "model": "claude-sonnet-4-5",
  "max_tokens": 2048,
  "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
  "thinking": {"type": "enabled", "budget_tokens": 1024},
  "tools": [
    {"name": "get_current_weather", "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}},
    {"name": "get_stock_price", "input_schema": {"type": "object"}},
    {"type": "web_search_20250305", "name": "web_search"}
  ],
  "tool_choice": {"type": "auto"},
  "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": {"type": "object"}}},
  "output_format": {"type": "json_schema", "schema": {"type": "object"}},
  "messages": [
    {"role": "user", "content": "Weather in Boston and AAPL please"}
  ],
  "stream": true,
  "metadata": {"user_id": "u1"}
}`

func TestFollowUpDecision(t *testing.T) {
	c, _ := mustDecode(t, thinkingRequest)
	resp, err := c.DecodeAnswer([]byte(mixedResponse))
	if err != nil {
		t.Fatal(err)
	}
	turn := resp.Choices[0]
	q := &neutral.Query{Kind: neutral.KindRecovery, Decision: true, History: []neutral.Round{{
		Turn: turn,
		Replies: []neutral.CallReply{
			{CallID: "toolu_A", Content: "no tool named get_weather; decide", IsError: true},
			{CallID: "toolu_B", Content: "Not executed: held"},
		},
	}}}
	out, err := c.ReQuery(resp, q)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := jsonx.ParseObject([]byte(thinkingRequest))
	got, err := jsonx.ParseObject(out)
	if err != nil {
		t.Fatalf("re-query is not an object: %v", err)
	}
	for _, f := range orig {
		switch f.Key {
		case "messages", "stream", "tool_choice", "output_format", "output_config":
			continue
		}
		if !bytes.Equal(got.Get(f.Key), f.Value) {
			t.Errorf("%s changed: %s", f.Key, got.Get(f.Key))
		}
	}
	if string(got.Get("stream")) != "false" || string(got.Get("tool_choice")) != `{"type":"none"}` {
		t.Errorf("stream %s tool_choice %s", got.Get("stream"), got.Get("tool_choice"))
	}
	if got.Has("output_format") || compact(t, got.Get("output_config")) != `{"effort":"high"}` {
		t.Errorf("structured output left: %s %s", got.Get("output_format"), got.Get("output_config"))
	}
	msgs, _ := jsonx.ParseArray(got.Get("messages"))
	origMsgs, _ := jsonx.ParseArray(orig.Get("messages"))
	if len(msgs) != 3 || !bytes.Equal(msgs[0], origMsgs[0]) {
		t.Fatalf("messages %d", len(msgs))
	}
	asst, _ := jsonx.ParseObject(msgs[1])
	wantContent, _ := jsonx.ParseObject([]byte(mixedResponse))
	if string(asst.Get("role")) != `"assistant"` || !bytes.Equal(asst.Get("content"), wantContent.Get("content")) {
		t.Errorf("assistant turn not replayed byte for byte:\n%s", asst.Get("content"))
	}
	if !bytes.Contains(asst.Get("content"), []byte(`"signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxx+/sig=="`)) {
		t.Error("thinking signature lost")
	}
	var user struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			Content   string `json:"content"`
			IsError   *bool  `json:"is_error"`
		} `json:"content"`
	}
	if err := json.Unmarshal(msgs[2], &user); err != nil {
		t.Fatal(err)
	}
	if user.Role != "user" || len(user.Content) != 2 {
		t.Fatalf("user turn %s", msgs[2])
	}
	if c := user.Content[0]; c.Type != "tool_result" || c.ToolUseID != "toolu_A" || c.IsError == nil || !*c.IsError || !strings.Contains(c.Content, "decide") {
		t.Errorf("first result %+v", c)
	}
	if c := user.Content[1]; c.Type != "tool_result" || c.ToolUseID != "toolu_B" || c.IsError != nil {
		t.Errorf("second result %+v", c)
	}
	if msg := anthCheckPairing(out); msg != "" {
		t.Errorf("the API would reject the re-query: %s", msg)
	}
}

func TestFollowUpRepromptChain(t *testing.T) {
	body := strings.Replace(string(fixture(t, "request.json")), `"type": "auto"`, `"type": "any"`, 1)
	c, _ := mustDecode(t, body)
	first, _ := c.DecodeAnswer(fixture(t, "parallel_tool_use.json"))
	second, _ := newCodec().DecodeAnswer([]byte(`{"type":"message","content":[{"type":"tool_use","id":"toolu_2nd","name":"get_stock_price","input":{"ticker":"AAPL"}}],"stop_reason":"tool_use"}`))
	q := &neutral.Query{Kind: neutral.KindReprompt, History: []neutral.Round{
		{Turn: first.Choices[0], Replies: []neutral.CallReply{
			{CallID: "toolu_01WVn2RNagKZ58sFy76HJ3zr", Content: "held"},
			{CallID: "toolu_01CJq9uUwkuHSAbZdYmM6J4t", Content: "bad", IsError: true}}},
		{Turn: second.Choices[0], Replies: []neutral.CallReply{{CallID: "toolu_2nd", Content: "still bad", IsError: true}}},
	}}
	out, err := c.ReQuery(first, q)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := jsonx.ParseObject(out)
	orig, _ := jsonx.ParseObject([]byte(body))
	if !bytes.Equal(got.Get("tool_choice"), orig.Get("tool_choice")) || !bytes.Contains(orig.Get("tool_choice"), []byte("any")) {
		t.Errorf("a reprompt changed tool_choice: %s", got.Get("tool_choice"))
	}
	msgs, _ := jsonx.ParseArray(got.Get("messages"))
	if len(msgs) != 5 {
		t.Fatalf("%d messages", len(msgs))
	}
	if msg := anthCheckPairing(out); msg != "" {
		t.Errorf("the API would reject the re-query: %s", msg)
	}
	// A turn from another codec, or one without replies, is refused.
	if _, err := c.ReQuery(nil, &neutral.Query{History: []neutral.Round{{Turn: &neutral.Turn{Raw: "x"}, Replies: []neutral.CallReply{{}}}}}); err == nil {
		t.Error("foreign turn accepted")
	}
	if _, err := c.ReQuery(nil, &neutral.Query{History: []neutral.Round{{Turn: first.Choices[0]}}}); err == nil {
		t.Error("turn without replies accepted")
	}
}

// anthCheckPairing plays the Messages API's referee for tool use: every
// assistant turn with tool_use blocks must be followed by a user turn whose
// first blocks are tool_results answering each of them, and no tool_result
// may answer anything else. It returns the problem, or "".
func anthCheckPairing(body []byte) string {
	var r struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "body: " + err.Error()
	}
	type blk struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		ToolUseID string `json:"tool_use_id"`
	}
	blocks := func(raw json.RawMessage) []blk {
		var bs []blk
		_ = json.Unmarshal(raw, &bs)
		return bs
	}
	for i, m := range r.Messages {
		if m.Role != "assistant" {
			continue
		}
		var ids []string
		for _, b := range blocks(m.Content) {
			if b.Type == "tool_use" {
				ids = append(ids, b.ID)
			}
		}
		var results []string
		if i+1 < len(r.Messages) && r.Messages[i+1].Role == "user" {
			for _, b := range blocks(r.Messages[i+1].Content) {
				if b.Type != "tool_result" {
					break
				}
				results = append(results, b.ToolUseID)
			}
		}
		if len(ids) > 0 && strings.Join(ids, ",") != strings.Join(results, ",") {
			return "tool_use ids " + strings.Join(ids, ",") + " answered by " + strings.Join(results, ",")
		}
	}
	return ""
}

// hallucinated is the parallel fixture with its first call renamed to a
// tool that does not exist.
func hallucinated(t *testing.T) []byte {
	b := fixture(t, "parallel_tool_use.json")
	out := bytes.Replace(b, []byte(`"name": "get_current_weather"`), []byte(`"name": "weather_lookup"`), 1)
	if bytes.Equal(out, b) {
		t.Fatal("fixture edit failed")
	}
	return out
}

func TestRenderSubstitute(t *testing.T) {
	body := hallucinated(t)
	resp, err := newCodec().DecodeAnswer(body)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Choices[0].Calls
	if calls[0].Name != "weather_lookup" {
		t.Fatalf("calls %+v", calls)
	}
	fixed := append([]neutral.ToolCall(nil), calls...)
	fixed[0] = neutral.ToolCall{ID: calls[0].ID, Name: "get_current_weather", Args: []byte(`{ "location": "Boston, MA" }`), Kind: neutral.Function}
	out, err := newCodec().EncodeAnswer(resp, changed(fixed, true, false))
	if err != nil {
		t.Fatal(err)
	}
	var got, orig struct {
		ID         string            `json:"id"`
		Content    []json.RawMessage `json:"content"`
		StopReason string            `json:"stop_reason"`
		Usage      json.RawMessage   `json:"usage"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("render is not JSON: %v", err)
	}
	_ = json.Unmarshal(body, &orig)
	if got.ID != orig.ID || got.StopReason != "tool_use" || compact(t, got.Usage) != compact(t, orig.Usage) || len(got.Content) != 3 {
		t.Fatalf("render %s", out)
	}
	if !bytes.Equal(got.Content[0], orig.Content[0]) || !bytes.Equal(got.Content[2], orig.Content[2]) {
		t.Error("blocks that did not change were rewritten")
	}
	if compact(t, got.Content[1]) != `{"type":"tool_use","id":"toolu_01WVn2RNagKZ58sFy76HJ3zr","name":"get_current_weather","input":{"location":"Boston, MA"}}` {
		t.Errorf("replaced block %s", got.Content[1])
	}
}

func TestRenderSubstituteAmongMixedBlocks(t *testing.T) {
	resp, _ := newCodec().DecodeAnswer([]byte(mixedResponse))
	calls := resp.Choices[0].Calls
	fixed := append([]neutral.ToolCall(nil), calls...)
	fixed[0] = neutral.ToolCall{ID: "toolu_A", Name: "get_current_weather", Args: []byte(`{"location":"Boston, MA"}`)}
	out, err := newCodec().EncodeAnswer(resp, changed(fixed, true, false))
	if err != nil {
		t.Fatal(err)
	}
	var got, orig struct {
		Content []json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(out, &got)
	_ = json.Unmarshal([]byte(mixedResponse), &orig)
	if len(got.Content) != len(orig.Content) {
		t.Fatalf("%d blocks", len(got.Content))
	}
	for i := range orig.Content {
		if i == 8 {
			if compact(t, got.Content[i]) != `{"type":"tool_use","id":"toolu_A","name":"get_current_weather","input":{"location":"Boston, MA"},"caller":{"type":"direct"}}` {
				t.Errorf("replaced block %s", got.Content[i])
			}
			continue
		}
		if !bytes.Equal(got.Content[i], orig.Content[i]) {
			t.Errorf("block %d changed: %s", i, got.Content[i])
		}
	}
}

func TestRenderEscalatedAndAbstained(t *testing.T) {
	body := hallucinated(t)
	resp, _ := newCodec().DecodeAnswer(body)
	esc := &neutral.Escalated{ID: "esc_1", Code: "unknown_tool",
		Body: []byte(`{"id":"esc_1","codes":["unknown_tool"]}`), Text: "This step needs a person. [toolgate:esc_1]"}
	out, err := newCodec().EncodeAnswer(resp, []neutral.Action{{Kind: neutral.Respond, Text: esc.Text, Escalation: esc}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID         string          `json:"id"`
		Content    json.RawMessage `json:"content"`
		StopReason string          `json:"stop_reason"`
		Escalation json.RawMessage `json:"toolgate_escalation"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "msg_01yYBjvFBnUZSNTDPM6oQ2Nc" || got.StopReason != "end_turn" ||
		string(got.Content) != `[{"type":"text","text":"This step needs a person. [toolgate:esc_1]"}]` ||
		string(got.Escalation) != `{"id":"esc_1","codes":["unknown_tool"]}` {
		t.Errorf("escalated render %s", out)
	}
	out, err = newCodec().EncodeAnswer(resp, []neutral.Action{{Kind: neutral.Respond, Text: "No tool fits."}})
	if err != nil {
		t.Fatal(err)
	}
	got.Escalation = nil
	_ = json.Unmarshal(out, &got)
	if got.StopReason != "end_turn" || string(got.Content) != `[{"type":"text","text":"No tool fits."}]` || got.Escalation != nil {
		t.Errorf("abstained render %s", out)
	}
}

func TestErrorBodyAndCallJSON(t *testing.T) {
	esc := &neutral.Escalated{ID: "esc_9", Code: "schema_violation",
		Body: []byte(`{"id":"esc_9"}`), Text: "needs a person [toolgate:esc_9]"}
	got := string(newCodec().EncodeEscalation(esc))
	want := `{"type":"error","error":{"type":"tool_call_escalation","code":"schema_violation","message":"needs a person [toolgate:esc_9]","escalation":{"id":"esc_9"}}}`
	if got != want {
		t.Errorf("error body\n%s\nwant\n%s", got, want)
	}
	call := newCodec().CallJSON(neutral.ToolCall{ID: "toolu_1", Name: "issue_refund", Args: []byte(`{ "amount": 5 }`)})
	if string(call) != `{"type":"tool_use","id":"toolu_1","name":"issue_refund","input":{"amount":5}}` {
		t.Errorf("call %s", call)
	}
	call = newCodec().CallJSON(neutral.ToolCall{ID: "toolu_1", Name: "x", Args: []byte(`{"cut`)})
	if !json.Valid(call) {
		t.Errorf("call with broken arguments is not JSON: %s", call)
	}
}

// The abstain exit is appended last, as a custom tool, and nothing else of
// the request changes.
func TestInjectToolAppendsLast(t *testing.T) {
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"tools":[{"name":"a","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`
	c, _ := mustDecode(t, body)
	out, err := c.InjectTool(neutral.Offered{Name: "exit", Description: "none fits", Parameters: []byte(`{"type":"object"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"claude-sonnet-4-5","max_tokens":64,"tools":[{"name":"a","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}},` +
		`{"name":"exit","description":"none fits","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	again, err := newCodec().DecodeRequest("", out)
	if err != nil || len(again.Offered) != 2 || again.Offered[1].Name != "exit" {
		t.Fatalf("the injected request reads back as %+v, %v", again, err)
	}
}
