package responses

import (
	"bytes"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// toolgate's own errors go out in the OpenAI error envelope that the
// Responses API shares with Chat Completions; a refusal of the request is
// typed invalid_request_error, as the SDKs expect.
func TestEncodeError(t *testing.T) {
	c := API{}.NewCodec()
	got := string(c.EncodeError(neutral.Failure{Status: 502, Code: neutral.CodeUpstream, Message: "the upstream failed"}))
	want := `{"error":{"type":"upstream_error","code":"upstream_error","message":"the upstream failed","param":null}}`
	if got != want {
		t.Errorf("failure\n got %s\nwant %s", got, want)
	}
	got = string(c.EncodeError(neutral.Failure{Status: 404, Code: "unknown_route", Message: "no such route", Refusal: true}))
	want = `{"error":{"type":"invalid_request_error","code":"unknown_route","message":"no such route","param":null}}`
	if got != want {
		t.Errorf("refusal\n got %s\nwant %s", got, want)
	}
}

// After InjectTool the codec's request is the injected one: re-queries
// offer the exit too, and an answer that calls it is read in output order
// and can be answered with the abstention's text.
func TestInjectToolThenReQueryAndAnswer(t *testing.T) {
	if _, err := (API{}).NewCodec().InjectTool(neutral.Offered{Name: "x"}); err == nil {
		t.Error("a tool was injected into no request")
	}
	c := codecFor(t, `{"model":"m","input":"book a train","tools":[{"type":"function","name":"get_weather","parameters":{}}]}`)
	body, err := c.InjectTool(neutral.Offered{Name: "toolgate_no_suitable_tool", Description: "none fits"})
	if err != nil {
		t.Fatal(err)
	}
	exit := `{"id":"fc_09","type":"function_call","status":"completed","arguments":"{\"reason\":\"No tool books trains.\"}","call_id":"call_09","name":"toolgate_no_suitable_tool"}`
	a, err := c.DecodeAnswer([]byte(responseOf("resp_1", itemReasoning, exit, itemCall)))
	if err != nil {
		t.Fatal(err)
	}
	calls := a.Choices[0].Calls
	if len(calls) != 2 || calls[0].Name != "toolgate_no_suitable_tool" || calls[0].ID != "call_09" ||
		string(calls[0].Args) != `{"reason":"No tool books trains."}` || calls[1].Name != "get_weather" {
		t.Fatalf("calls %+v", calls)
	}
	q := &neutral.Query{History: []neutral.Round{{Turn: a.Choices[0], Replies: []neutral.CallReply{{CallID: "call_09", Content: "x"}}}}}
	out, err := c.ReQuery(a, q)
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := jsonx.ParseObject(out)
	if !bytes.Equal(obj.Get("tools"), jsonx.Object(mustObject(t, body)).Get("tools")) ||
		!bytes.Contains(obj.Get("tools"), []byte(`"name":"toolgate_no_suitable_tool"`)) {
		t.Errorf("the re-query does not offer the injected tool: %s", obj.Get("tools"))
	}
	enc, err := c.EncodeAnswer(a, []neutral.Action{abstaining("No tool books trains.")})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(enc, []byte(`"text":"No tool books trains."`)) || bytes.Contains(enc, []byte("toolgate_no_suitable_tool")) {
		t.Errorf("abstained answer %s", enc)
	}
}

func mustObject(t *testing.T, b []byte) jsonx.Object {
	t.Helper()
	o, err := jsonx.ParseObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Every request gets a codec of its own: what one reads or injects does
// not reach another, and a failed injection leaves the request as it was.
func TestCodecsArePerRequest(t *testing.T) {
	chained := codecFor(t, chainReq)
	if _, err := chained.InjectTool(neutral.Offered{Name: "exit"}); err == nil {
		t.Fatal("a tool was injected into a request without tools")
	}
	plain := codecFor(t, `{"model":"m","input":"x","tools":[]}`)
	if _, err := plain.InjectTool(neutral.Offered{Name: "exit"}); err != nil {
		t.Fatal(err)
	}
	turn := turnOf(t, responseOf("resp_1", itemBadCall))
	q := &neutral.Query{History: []neutral.Round{{Turn: turn, Replies: []neutral.CallReply{{CallID: "call_02", Content: "x"}}}}}
	out, err := chained.ReQuery(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"previous_response_id":"resp_1"`)) || bytes.Contains(out, []byte("exit")) {
		t.Errorf("chained re-query %s", out)
	}
	out, err = plain.ReQuery(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("previous_response_id")) || !bytes.Contains(out, []byte(`"name":"exit"`)) {
		t.Errorf("plain re-query %s", out)
	}
}

// An escalation on a stored request, chained or not, continues from the
// last re-query only when that answer left no call unanswered (a
// decision); otherwise the client keeps the original id. A request with
// store false always keeps it: nothing was stored to continue from.
func TestEncodeChainedEscalationID(t *testing.T) {
	resp := mustDecodeAnswer(t, responseOf("resp_1", itemBadCall))
	decision := turnOf(t, responseOf("resp_2", itemMessage))
	again := turnOf(t, responseOf("resp_3", itemBadCall))
	esc := escalated("needs a person")
	for _, c := range []struct {
		req     string
		requery []*neutral.Turn
		id      string
	}{
		{chainReq, []*neutral.Turn{again, decision}, "resp_2"},
		{chainReq, []*neutral.Turn{decision, again}, "resp_1"},
		{chainReq, nil, "resp_1"},
		{plainReq, []*neutral.Turn{decision}, "resp_2"},
		{plainReq, []*neutral.Turn{decision, again}, "resp_1"},
		{unstoredReq, []*neutral.Turn{decision}, "resp_1"},
	} {
		out, err := codecFor(t, c.req).EncodeAnswer(resp, []neutral.Action{escalating(esc, c.requery...)})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(mustObject(t, out).Get("id")); got != strconv.Quote(c.id) {
			t.Errorf("%s after %d re-queries: id %s, want %s", c.req, len(c.requery), got, c.id)
		}
	}
}

// On a chained request, a kept call that the model repeated in the last
// re-query takes the repeat's ids: the repeat is the call the stored
// conversation still waits on.
func TestEncodeChainedKeptCallTakesRepeatIDs(t *testing.T) {
	c := codecFor(t, chainReq)
	resp := mustDecodeAnswer(t, responseOf("resp_1", itemBadCall, itemCall))
	fixed := `{"id":"fc_31","type":"function_call","status":"completed","arguments":"{\"location\":\"Oslo\"}","call_id":"call_31","name":"get_weather"}`
	repeat := strings.NewReplacer(`"fc_01"`, `"fc_32"`, `"call_01"`, `"call_32"`).Replace(itemCall)
	requery := turnOf(t, responseOf("resp_2", fixed, repeat))
	act := replaced(resp.Choices[0], map[int]neutral.ToolCall{0: {Name: "get_weather", Args: []byte(`{"location":"Oslo"}`)}}, requery)
	out, err := c.EncodeAnswer(resp, []neutral.Action{act})
	if err != nil {
		t.Fatal(err)
	}
	obj := mustObject(t, out)
	items, _ := jsonx.ParseArray(obj.Get("output"))
	if string(obj.Get("id")) != `"resp_2"` || len(items) != 2 || string(items[0]) != fixed || string(items[1]) != repeat {
		t.Errorf("chained output %s", out)
	}
}

// The codec's non-test files import of toolgate only the contract, the
// neutral values and the wire leaves, never the catalog, the checks, the
// ladder or another codec.
func TestImportsOnlyTheContract(t *testing.T) {
	allowed := map[string]bool{
		"github.com/toolgate/toolgate/neutral":          true,
		"github.com/toolgate/toolgate/proxy/api":        true,
		"github.com/toolgate/toolgate/proxy/sse":        true,
		"github.com/toolgate/toolgate/internal/jsonx":   true,
		"github.com/toolgate/toolgate/proxy/openaiwire": true,
	}
	files, _ := filepath.Glob("*.go")
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/toolgate/") && !allowed[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}

// FuzzCodec runs arbitrary request and answer bodies through everything
// the pipeline asks of a codec outside a stream: nothing may panic, and a
// kept answer goes out byte for byte.
func FuzzCodec(f *testing.F) {
	f.Add([]byte(chainReq), []byte(responseOf("resp_1", itemReasoning, itemBadCall, itemCall)), uint8(0))
	f.Add([]byte(`{"input":[{"role":"user","content":"x"}],"tools":[],"store":false}`), []byte(responseOf("resp_2", itemCustom)), uint8(1))
	f.Add([]byte(`{"input":"x","conversation":"c"}`), []byte(`{"output":[{"type":"function_call","arguments":{}}]}`), uint8(2))
	requery := mustDecodeAnswer(f, responseOf("resp_9", itemCall))
	f.Fuzz(func(t *testing.T, reqBody, answer []byte, pick uint8) {
		c := API{}.NewCodec()
		if _, err := c.DecodeRequest("", reqBody); err != nil {
			return
		}
		_, _ = c.InjectTool(neutral.Offered{Name: "exit"})
		a, err := c.DecodeAnswer(answer)
		if err != nil {
			return
		}
		turn := a.Choices[0]
		q := &neutral.Query{Decision: pick&1 == 1, History: []neutral.Round{{Turn: turn, Replies: []neutral.CallReply{{CallID: "c", Content: "x"}}}}}
		_, _ = c.ReQuery(a, q)
		for _, call := range turn.Calls {
			_ = c.CallJSON(call)
		}
		acts := []neutral.Action{{Kind: neutral.Keep}, abstaining("none"), escalating(escalated("esc"), requery.Choices[0])}
		repl := map[int]neutral.ToolCall{}
		for i := range turn.Calls {
			if i%2 == int(pick>>1)&1 {
				repl[i] = neutral.ToolCall{Name: "fixed", Args: []byte(`{"a":1}`), Kind: turn.Calls[i].Kind}
			}
		}
		acts = append(acts, replaced(turn, repl, requery.Choices[0]))
		act := acts[int(pick>>2)%len(acts)]
		out, err := c.EncodeAnswer(a, []neutral.Action{act})
		if act.Kind == neutral.Keep && (err != nil || !bytes.Equal(out, answer)) {
			t.Errorf("a kept answer was rewritten: %v", err)
		}
	})
}
