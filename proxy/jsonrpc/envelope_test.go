package jsonrpc

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"issue_refund","arguments":{"order_id":"ord_1","amount_cents":5},"_meta":{"progressToken":"p"}}}`

// decode is the envelope of a tools/call as its route reads it.
func decode(t testing.TB, body string) *Call {
	t.Helper()
	c, ok := readCall([]byte(body))
	if !ok {
		t.Fatalf("not a tools/call: %s", body)
	}
	return c
}

func readCall(body []byte) (*Call, bool) {
	msg, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, false
	}
	params, err := jsonx.ParseObject(msg.Get("params"))
	if err != nil {
		return nil, false
	}
	name, _ := jsonx.Unquote(params.Get("name"))
	_, terr := jsonx.ParseObject(params.Get("task"))
	return NewCall(msg.Get("id"), name, terr == nil, body), true
}

func escalated() *neutral.Escalated {
	return &neutral.Escalated{ID: "esc_1", Code: "rule_violation", Codes: []string{"rule_violation"}, CatalogVersion: "v1",
		Findings: []neutral.Finding{
			{Code: "rule_violation", Pointer: "/amount_cents", Message: "a rule failed", Detail: "refunds above 1000.00 need a person", Blocking: true},
			{Code: "provenance_unverifiable", Message: "history upstream", Detail: "not listed"},
		}}
}

func TestEncodeEscalation(t *testing.T) {
	c := decode(t, call)
	var r struct {
		ID     int `json:"id"`
		Result struct {
			Content []struct{ Type, Text string } `json:"content"`
			IsError bool                          `json:"isError"`
			Meta    map[string]json.RawMessage    `json:"_meta"`
		} `json:"result"`
	}
	e := escalated()
	if err := json.Unmarshal(c.Refusal(e), &r); err != nil {
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
	out := string(c.Refusal(e))
	if !strings.Contains(out, `Ask a person."`) || !strings.Contains(out, `"toolgate/approval":{"id":"apr_1"}`) {
		t.Errorf("advice and approval: %s", out)
	}

	task := decode(t, `{"jsonrpc":"2.0","id":"t1","method":"tools/call","params":{"name":"export","task":{"ttl":60000}}}`)
	out = string(task.Refusal(escalated()))
	if !strings.Contains(out, `"error":{"code":-32602`) || !strings.Contains(out, `"data":{"catalog_version":"v1"`) || strings.Contains(out, `"result"`) {
		t.Errorf("a task call's refusal: %s", out)
	}
}

func TestEncodeUnknownTool(t *testing.T) {
	c := decode(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"database_query"}}`)
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
	if err := json.Unmarshal(c.Refusal(e), &r); err != nil {
		t.Fatal(err)
	}
	if r.Error.Code != -32602 || !strings.Contains(r.Error.Message, `Unknown tool: "database_query"`) || !strings.Contains(r.Error.Message, "and 10 more") ||
		r.Error.Data.Code != "unknown_tool" || r.Error.Data.Tool != "database_query" || len(r.Error.Data.Available) != 60 {
		t.Errorf("%+v", r)
	}
}

func TestEncodeError(t *testing.T) {
	c := decode(t, call)
	for _, tc := range []struct {
		f    neutral.Failure
		code string
	}{
		{neutral.Failure{Code: neutral.CodeUpstream, Message: "down"}, `"code":-32000`},
		{neutral.Failure{Code: "invalid_request", Message: "bad", Refusal: true}, `"code":-32600`},
	} {
		out := string(Error(c.id, tc.f))
		if !strings.Contains(out, tc.code) || !strings.Contains(out, `"data":{"code":"`+string(tc.f.Code)+`"}`) || !strings.Contains(out, `"id":7`) {
			t.Errorf("%s", out)
		}
	}
}

// Whatever a client's call holds, its refusal and toolgate's errors are
// JSON.
func FuzzRefusal(f *testing.F) {
	f.Add(call)
	f.Add(`{"jsonrpc":"2.0","id":"t1","method":"tools/call","params":{"name":"export","task":{"ttl":60000}}}`)
	f.Add(`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"a","arguments":"x"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		c, ok := readCall([]byte(body))
		if !ok || (c.id != nil && !json.Valid(c.id)) {
			return
		}
		unknown := &neutral.Escalated{ID: "esc_2", Code: "unknown_tool", Available: []string{body}}
		for _, b := range [][]byte{c.Refusal(escalated()), c.Refusal(unknown), Error(c.id, neutral.Failure{Message: body})} {
			if !json.Valid(b) {
				t.Fatalf("not JSON: %s", b)
			}
		}
	})
}
