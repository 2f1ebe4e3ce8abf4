package jsonrpc

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"ord_1","amount_cents":5},"_meta":{"progressToken":"p"}}}`

func decode(t *testing.T, body string) (*Codec, *neutral.Answer) {
	t.Helper()
	c := API{}.NewCodec().(*Codec)
	a, err := c.DecodeAnswer([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return c, a
}

func TestDecodeCall(t *testing.T) {
	_, a := decode(t, call)
	if len(a.Choices) != 1 || len(a.Choices[0].Calls) != 1 {
		t.Fatalf("%+v", a)
	}
	got := a.Choices[0].Calls[0]
	if got.ID != "7" || got.Name != "issue_refund" || string(got.Args) != `{"order_id":"ord_1","amount_cents":5}` || got.Kind != neutral.Function {
		t.Errorf("%+v", got)
	}
	_, a = decode(t, `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","arguments":null}}`)
	if string(a.Choices[0].Calls[0].Args) != "{}" {
		t.Errorf("absent arguments are %s", a.Choices[0].Calls[0].Args)
	}
	for _, bad := range []string{
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}`, // a notification
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":""}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}`,
		`[1]`, `nope`,
	} {
		if _, err := (&Codec{}).DecodeAnswer([]byte(bad)); err == nil {
			t.Errorf("%s read as a call", bad)
		}
	}
}

func TestEncodeActions(t *testing.T) {
	c, a := decode(t, call)
	out, err := c.EncodeAnswer(a, []neutral.Action{{Kind: neutral.Keep}})
	if err != nil || string(out) != call {
		t.Errorf("keep: %s, %v", out, err)
	}
	repl := neutral.ToolCall{ID: "7", Name: "lookup_order", Args: []byte(`{"order_id":"ord_1"}`)}
	out, err = c.EncodeAnswer(a, []neutral.Action{{Kind: neutral.Replace, Calls: []neutral.ToolCall{repl}, Changed: []bool{true}}})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		ID     int `json:"id"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(out, &m) != nil || m.ID != 7 || m.Params.Name != "lookup_order" || string(m.Params.Arguments) != `{"order_id":"ord_1"}` ||
		string(m.Params.Meta) != `{"progressToken":"p"}` {
		t.Errorf("replace: %s", out)
	}
	out, err = c.EncodeAnswer(a, []neutral.Action{{Kind: neutral.Respond, Text: "no tool fits"}})
	if err != nil || !strings.Contains(string(out), `"isError":true`) || !strings.Contains(string(out), "no tool fits") || !strings.Contains(string(out), `"id":7`) {
		t.Errorf("respond: %s, %v", out, err)
	}
	if _, err := c.EncodeAnswer(a, nil); err == nil {
		t.Error("no action encoded")
	}
}

func escalated() *neutral.Escalated {
	return &neutral.Escalated{ID: "esc_1", Code: "rule_violation", Codes: []string{"rule_violation"}, CatalogVersion: "v1",
		Findings: []neutral.Finding{
			{Code: "rule_violation", Pointer: "/amount_cents", Message: "a rule failed", Detail: "refunds above 1000.00 need a person", Blocking: true},
			{Code: "provenance_unverifiable", Message: "history upstream", Detail: "not listed"},
		}}
}

func TestEncodeEscalation(t *testing.T) {
	c, _ := decode(t, call)
	var r struct {
		ID     int `json:"id"`
		Result struct {
			Content []struct{ Type, Text string } `json:"content"`
			IsError bool                          `json:"isError"`
			Meta    map[string]json.RawMessage    `json:"_meta"`
		} `json:"result"`
	}
	e := escalated()
	if err := json.Unmarshal(c.EncodeEscalation(e), &r); err != nil {
		t.Fatal(err)
	}
	text := r.Result.Content[0].Text
	if r.ID != 7 || !r.Result.IsError || !strings.Contains(text, "- rule_violation at /amount_cents: refunds above 1000.00 need a person") ||
		strings.Contains(text, "not listed") || !strings.HasSuffix(text, "Correct the arguments and call the tool again.") {
		t.Errorf("refusal: %+v", r)
	}
	var meta struct {
		ID       string   `json:"id"`
		Codes    []string `json:"codes"`
		Findings []struct {
			Code string `json:"code"`
		} `json:"findings"`
	}
	if json.Unmarshal(r.Result.Meta[metaEscalation], &meta) != nil || meta.ID != "esc_1" || len(meta.Findings) != 2 || meta.Codes[0] != "rule_violation" {
		t.Errorf("meta: %s", r.Result.Meta[metaEscalation])
	}
	e.Advice, e.Approval = "Ask a person.", []byte(`{"id":"apr_1"}`)
	out := string(c.EncodeEscalation(e))
	if !strings.Contains(out, `Ask a person."`) || !strings.Contains(out, `"toolgate/approval":{"id":"apr_1"}`) {
		t.Errorf("advice and approval: %s", out)
	}

	task, _ := decode(t, `{"jsonrpc":"2.0","id":"t1","method":"tools/call","params":{"name":"export","task":{"ttl":60000}}}`)
	out = string(task.EncodeEscalation(escalated()))
	if !strings.Contains(out, `"error":{"code":-32602`) || !strings.Contains(out, `"data":{"catalog_version":"v1"`) || strings.Contains(out, `"result"`) {
		t.Errorf("a task call's refusal: %s", out)
	}
}

func TestEncodeUnknownTool(t *testing.T) {
	c, _ := decode(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"database_query"}}`)
	names := make([]string, 60)
	for i := range names {
		names[i] = "tool_" + strconv.Itoa(i)
	}
	e := &neutral.Escalated{ID: "esc_2", Code: "unknown_tool", Available: names}
	var r struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Code      string   `json:"code"`
				Tool      string   `json:"tool"`
				Available []string `json:"available"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(c.EncodeEscalation(e), &r); err != nil {
		t.Fatal(err)
	}
	if r.Error.Code != -32602 || !strings.Contains(r.Error.Message, `Unknown tool: "database_query"`) || !strings.Contains(r.Error.Message, "and 10 more") ||
		r.Error.Data.Code != "unknown_tool" || r.Error.Data.Tool != "database_query" || len(r.Error.Data.Available) != 60 {
		t.Errorf("%+v", r)
	}
}

func TestEncodeError(t *testing.T) {
	c, _ := decode(t, call)
	for _, tc := range []struct {
		f    neutral.Failure
		code string
	}{
		{neutral.Failure{Code: neutral.CodeUpstream, Message: "down"}, `"code":-32000`},
		{neutral.Failure{Code: "invalid_request", Message: "bad", Refusal: true}, `"code":-32600`},
	} {
		out := string(c.EncodeError(tc.f))
		if !strings.Contains(out, tc.code) || !strings.Contains(out, `"data":{"code":"`+string(tc.f.Code)+`"}`) || !strings.Contains(out, `"id":7`) {
			t.Errorf("%s", out)
		}
	}
}

func TestStream(t *testing.T) {
	c, _ := decode(t, call)
	st := c.NewStream()
	events := []string{
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`,
	}
	var held []neutral.HeldEvent
	for i, data := range events {
		ev := &sse.Event{Data: []byte(data), Raw: Event(nil, []byte(data))}
		step, err := st.Feed(ev)
		if err != nil {
			t.Fatal(err)
		}
		if step.Done != (i == 1) || step.Hold {
			t.Errorf("event %d: %+v", i, step)
		}
		held = append(held, neutral.HeldEvent{Raw: ev.Raw, Data: ev.Data})
	}
	out, err := st.Encode(held, nil, api.Sent{})
	if err != nil || string(out) != string(held[0].Raw)+string(held[1].Raw) {
		t.Errorf("encode: %q", out)
	}
	if _, err := st.Feed(&sse.Event{Data: []byte("{cut")}); err == nil {
		t.Error("a cut event was read")
	}
	ev := string(st.ErrorEvent(neutral.Failure{Code: neutral.CodeUpstream, Message: "the stream ended"}, nil, api.Sent{Events: 2}))
	if !strings.HasPrefix(ev, "event: message\ndata: ") || !strings.Contains(ev, `"id":7`) || !strings.HasSuffix(ev, "\n\n") {
		t.Errorf("error event %q", ev)
	}
	if len(st.Turns()) != 0 || st.Complete() {
		t.Error("a server's answer has no calls and ends with its response")
	}
}

func FuzzDecodeAnswer(f *testing.F) {
	f.Add(call)
	f.Add(`{"jsonrpc":"2.0","id":"t1","method":"tools/call","params":{"name":"export","task":{"ttl":60000}}}`)
	f.Add(`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"a","arguments":"x"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		c := &Codec{}
		a, err := c.DecodeAnswer([]byte(body))
		if err != nil {
			return
		}
		out, err := c.EncodeAnswer(a, []neutral.Action{{Kind: neutral.Keep}})
		if err != nil || string(out) != body {
			t.Fatalf("keep changed the call: %q", out)
		}
		for _, b := range [][]byte{c.EncodeEscalation(escalated()), c.EncodeError(neutral.Failure{Message: body})} {
			if !json.Valid(b) {
				t.Fatalf("not JSON: %s", b)
			}
		}
	})
}
