package openaichat

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/neutral"
)

// FuzzDecodeRequest feeds arbitrary bytes to a codec as the client's
// request. Nothing may panic; a request it reads keeps its bytes, the exit
// tool it injects is offered last by the body it returns, and a decision
// re-query built on that body is a request the codec reads back with the
// same tools, tool_choice none, no stream and nothing structured.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(convo))
	f.Add([]byte(legacyRequest))
	f.Add([]byte(`{"messages":[{"role":"function","content":"x"}],"functions":[{"name":"f"}],"function_call":{"name":"f"},"tools":null}`))
	f.Add(readFixture(f, "request.json"))
	f.Add([]byte(`{"messages":[],"tools":[]}`))
	f.Add([]byte(`{"messages":null,"tools":[{"type":"custom","custom":{"name":"g"}}],"tool_choice":"required"}`))
	f.Add([]byte(`{"messages":[{"role":"tool","tool_call_id":"a","content":[{"text":"x"},{"text":""}]}],"tools":[],"stream":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c := API{}.NewCodec()
		req, err := c.DecodeRequest("", body)
		if err != nil {
			return
		}
		if string(req.Body) != string(body) || req.History == nil {
			t.Fatalf("request %+v", req)
		}
		injected, err := c.InjectTool(abstainTool)
		if err != nil {
			return
		}
		back := readBack(t, injected)
		want := append(append([]neutral.Offered(nil), req.Offered...), abstainTool)
		if !reflect.DeepEqual(back.Offered, want) {
			t.Fatalf("injected body offers %+v, want %+v", back.Offered, want)
		}
		q, err := c.ReQuery(nil, &neutral.Query{Kind: neutral.KindReprompt, Decision: true})
		if err != nil {
			return
		}
		re := readBack(t, q)
		if !reflect.DeepEqual(re.Offered, want) || re.Choice.Kind != neutral.ChoiceNone || re.Stream || re.StructuredOutput {
			t.Fatalf("decision re-query %s read as %+v", q, re)
		}
	})
}

// readBack decodes a body the codec wrote, which must be a request.
func readBack(t *testing.T, body []byte) *neutral.Request {
	t.Helper()
	if !json.Valid(body) {
		t.Fatalf("wrote invalid JSON %q", body)
	}
	req, err := API{}.NewCodec().DecodeRequest("", body)
	if err != nil {
		t.Fatalf("cannot read back %s: %v", body, err)
	}
	return req
}
