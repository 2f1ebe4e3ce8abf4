package gemini

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// The recorded snake_case request offers its tool with the schema it sent
// as parameters_json_schema, and its allowed function names.
func TestDecodeRequestRecordedSnakeCase(t *testing.T) {
	body := readSample(t, "recorded/generate_snake_case_declaration_gemini-2.5-flash.request.json")
	req, err := newCodec().DecodeRequest("/v1beta/models/gemini-2.5-flash:generateContent", body)
	if err != nil || len(req.Offered) != 1 {
		t.Fatalf("%+v %v", req, err)
	}
	if !bytes.HasPrefix(req.Offered[0].Parameters, []byte(`{"$defs": {"MiddleModel"`)) {
		t.Errorf("parameters_json_schema not read: %s", req.Offered[0].Parameters)
	}
	if req.Choice.Kind != neutral.ChoiceAllowed || strings.Join(req.Choice.Names, ",") != "final_result" {
		t.Errorf("choice %+v", req.Choice)
	}
	// History sent as function_call / function_response is read.
	hist := readSample(t, "recorded/array_single_element_unsigned_call_gemini-2.5-flash.request.json")
	req, err = newCodec().DecodeRequest("/v1beta/models/gemini-2.5-flash:streamGenerateContent", hist)
	if err != nil || req.History == nil || len(req.History.Calls) != 1 || req.History.Calls[0].Tool != "pelican_name_generator" {
		t.Fatalf("history %+v %v", req.History, err)
	}
	if _, ok := req.History.Result(req.History.Calls[0].ID); !ok {
		t.Errorf("the function_response is not paired with its call")
	}
}

// Every field the codec reads is read under its proto name too; both
// names in one object are refused.
func TestDecodeRequestEitherSpelling(t *testing.T) {
	body := `{"contents":[],"tools":[{"function_declarations":[{"name":"f","parameters":{"type":"OBJECT","properties":{"n":{"type":"INTEGER"}}}}]}],` +
		`"tool_config":{"function_calling_config":{"mode":"ANY","allowed_function_names":["f"]}},"generation_config":{"response_mime_type":"application/json"},"cached_content":"cachedContents/x"}`
	req, err := newCodec().DecodeRequest("", []byte(body))
	if err != nil || len(req.Offered) != 1 || !sameJSON(t, req.Offered[0].Parameters, []byte(`{"type":"object","properties":{"n":{"type":"integer"}}}`)) {
		t.Fatalf("%+v %v", req, err)
	}
	if req.Choice.Kind != neutral.ChoiceAllowed || !req.StructuredOutput || !req.HistoryUpstream {
		t.Errorf("choice %+v structured %v cached %v", req.Choice, req.StructuredOutput, req.HistoryUpstream)
	}
	both := `{"tools":[{"functionDeclarations":[],"function_declarations":[{"name":"f"}]}]}`
	if _, err := newCodec().DecodeRequest("", []byte(both)); !errors.Is(err, errBothSpellings) {
		t.Errorf("both spellings: %v", err)
	}
}

// The mode is read as its name or its number.
func TestToolChoiceModeNumbers(t *testing.T) {
	for mode, want := range map[string]neutral.ChoiceKind{`1`: neutral.ChoiceAuto, `2`: neutral.ChoiceRequired, `3`: neutral.ChoiceNone, `4`: neutral.ChoiceAuto, `"none"`: neutral.ChoiceNone} {
		req, err := newCodec().DecodeRequest("", []byte(`{"toolConfig":{"functionCallingConfig":{"mode":`+mode+`}}}`))
		if err != nil || req.Choice.Kind != want {
			t.Errorf("mode %s: %+v %v", mode, req.Choice, err)
		}
	}
}

// The recorded integer-enum request's schema ("type": 6) compiles to the
// JSON Schema it means.
func TestDecodeRequestRecordedIntEnums(t *testing.T) {
	req, err := newCodec().DecodeRequest("", readSample(t, "recorded/generate_call_int_enums_gemini-2.0-flash.request.json"))
	want := `{"type":"object","properties":{"location":{"type":"string","description":"The location to get weather for"}},"required":["location"]}`
	if err != nil || len(req.Offered) != 1 || string(req.Offered[0].Parameters) != want {
		t.Fatalf("%+v %v", req, err)
	}
}

// Answers are read under either spelling too.
func TestDecodeAnswerSnakeCase(t *testing.T) {
	body := `{"candidates":[{"content":{"parts":[{"function_call":{"name":"f","args":{"a":1}},"thought_signature":"CgA="}],"role":"model"},"finish_reason":"MAX_TOKENS"}],"usage_metadata":{"prompt_token_count":3,"candidates_token_count":2},"response_id":"r"}`
	resp, err := decodeAnswer([]byte(body))
	if err != nil || len(resp.Choices[0].Calls) != 1 || !resp.Choices[0].Truncated() || resp.Usage != (neutral.Usage{Input: 3, Output: 2}) || resp.Choices[0].ResponseID != "r" {
		t.Fatalf("%+v %v", resp, err)
	}
	for _, b := range []string{
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"},"function_call":{"name":"g"}}]}}]}`,
		`{"candidates":[{"content":{"parts":[]},"finishReason":"STOP","finish_reason":"STOP"}]}`,
		`{"candidates":[{"content":{"parts":[{"Function_Call":{"name":"f"}}]}}]}`,
	} {
		if !newCodec().FoldedKey([]byte(b)) {
			t.Errorf("not refused: %s", b)
		}
	}
}

// Finish reasons sent as numbers are read by each API's numbering; a
// candidate that still carries a call gets no note, as its call is judged.
func TestNotesFinishReasons(t *testing.T) {
	cases := []struct {
		path, finish, parts, want string
	}{
		{"/v1beta/models/m:generateContent", `10`, ``, "gemini_malformed_function_call"},
		{"/v1beta/models/m:generateContent", `12`, ``, "gemini_unexpected_tool_call"},
		{"/v1/projects/p/locations/l/publishers/google/models/m:generateContent", `9`, ``, "gemini_malformed_function_call"},
		{"/v1/projects/p/locations/l/publishers/google/models/m:generateContent", `15`, ``, "gemini_unexpected_tool_call"},
		{"/v1beta/models/m:generateContent", `"UNEXPECTED_TOOL_CALL"`, `{"functionCall":{"name":"list_files","args":{}}}`, ""},
		{"/v1beta/models/m:generateContent", `1`, ``, ""},
	}
	for _, c := range cases {
		cd := newCodec()
		if _, err := cd.DecodeRequest(c.path, []byte(`{"contents":[]}`)); err != nil {
			t.Fatal(err)
		}
		resp, err := cd.DecodeAnswer([]byte(`{"candidates":[{"content":{"parts":[` + c.parts + `]},"finishReason":` + c.finish + `}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cd.Notes(resp.Choices[0]), ","); got != c.want {
			t.Errorf("%s finish %s: notes %q, want %q", c.path, c.finish, got, c.want)
		}
	}
	resp, err := decodeAnswer(readSample(t, "recorded/generate_vertex_unexpected_tool_call_gemini-3-flash.json"))
	if err != nil || len(resp.Choices[0].Calls) != 1 || resp.Choices[0].Calls[0].Name != "list_files" {
		t.Fatalf("the undeclared call is not read: %+v %v", resp, err)
	}
}

// partialArgsParts are the parts of every chunk of the recorded
// streamed-arguments answer, in order.
func partialArgsParts(t *testing.T) [][]byte {
	t.Helper()
	var parts [][]byte
	for _, line := range strings.Split(string(readSample(t, "recorded/sse_vertex_partial_args_gemini-3.1-pro.sse")), "\n") {
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data: ")
		if !ok {
			continue
		}
		obj, _ := jsonx.ParseObject([]byte(data))
		cands, _ := jsonx.ParseArray(obj.Get("candidates"))
		cand, _ := jsonx.ParseObject(cands[0])
		p, err := contentParts(cand.Get("content"))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p...)
	}
	return parts
}

// Vertex's streamed arguments are assembled into the call they build, in
// a plain answer and in the recorded stream; the stream still replays
// byte for byte, and a re-query replays the assembled calls.
func TestPartialArgsAssembled(t *testing.T) {
	plain := `{"candidates":[{"content":{"role":"model","parts":[` + string(bytes.Join(partialArgsParts(t), []byte(","))) + `]},"finishReason":"STOP"}]}`
	resp, err := decodeAnswer([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	f := feedAll(t, false, bytes.NewReader(readSample(t, "recorded/sse_vertex_partial_args_gemini-3.1-pro.sse")))
	if f.err != nil || !f.done {
		t.Fatalf("stream: %v done %v", f.err, f.done)
	}
	for _, tn := range []*neutral.Turn{resp.Choices[0], f.st.Turns()[0]} {
		c := tn.Calls
		if len(c) != 2 || c[0].Name != "getWeather" || string(c[0].Args) != `{"location":"Boston"}` || string(c[1].Args) != `{"location":"San Francisco"}` {
			t.Fatalf("calls %+v", c)
		}
		content := string(tn.Raw.(*turn).content)
		if strings.Contains(content, "partialArgs") || !strings.Contains(content, `"thoughtSignature":"CiMBjz1rX25K`) {
			t.Errorf("re-query content %s", content)
		}
	}
}

// A repaired streamed call is written whole where it began and its other
// fragments are dropped, in a stream and in a plain answer; the other
// call's fragments and the signature stay as sent.
func TestPartialArgsRepaired(t *testing.T) {
	f := feedAll(t, false, bytes.NewReader(readSample(t, "recorded/sse_vertex_partial_args_gemini-3.1-pro.sse")))
	c := f.st.Turns()[0].Calls
	fixed := neutral.ToolCall{ID: c[1].ID, Name: "getWeather", Args: []byte(`{"location":"SF"}`)}
	acts := []neutral.Action{{Kind: neutral.Replace, Calls: []neutral.ToolCall{c[0], fixed}, Changed: []bool{false, true}}}
	out, err := f.st.Encode(f.held(), acts, f.sent())
	if err != nil {
		t.Fatal(err)
	}
	again := feedAll(t, false, bytes.NewReader(append(joinRaw(f.events[:f.holdAt]), out...)))
	got := again.st.Turns()[0].Calls
	if again.err != nil || !again.done || len(got) != 2 || string(got[0].Args) != `{"location":"Boston"}` || string(got[1].Args) != `{"location":"SF"}` {
		t.Fatalf("rendered (%v):\n%s", again.err, out)
	}
	if strings.Contains(string(out), "San Francisco") || !bytes.Contains(out, []byte(`"stringValue":"Boston"`)) || !bytes.Contains(out, []byte(`"thoughtSignature":"CiMBjz1rX25K`)) {
		t.Errorf("rendered %s", out)
	}

	plain := `{"candidates":[{"content":{"role":"model","parts":[` + string(bytes.Join(partialArgsParts(t), []byte(","))) + `]},"finishReason":"STOP"}]}`
	cd := newCodec()
	resp, err := cd.DecodeAnswer([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	fixed.ID = resp.Choices[0].Calls[1].ID
	acts[0].Calls = []neutral.ToolCall{resp.Choices[0].Calls[0], fixed}
	body, err := cd.EncodeAnswer(resp, acts)
	if err != nil {
		t.Fatal(err)
	}
	re, err := decodeAnswer(body)
	if err != nil || len(re.Choices[0].Calls) != 2 || string(re.Choices[0].Calls[1].Args) != `{"location":"SF"}` || strings.Contains(string(body), "San Francisco") {
		t.Fatalf("rendered (%v) %s", err, body)
	}
}

// Paths build nested objects and arrays; strings go on across fragments;
// shapes that cannot be one call are refused.
func TestPartialArgsShapes(t *testing.T) {
	frag := func(body string) string { return `{"functionCall":` + body + `}` }
	answer := func(parts ...string) string {
		return `{"candidates":[{"content":{"parts":[` + strings.Join(parts, ",") + `]},"finishReason":"STOP"}]}`
	}
	ok := answer(
		frag(`{"name":"f","id":"c1","willContinue":true}`),
		frag(`{"partialArgs":[{"jsonPath":"$.a.b[0]","numberValue":1.5},{"jsonPath":"$['c d'][0].e","stringValue":"x","willContinue":true}],"willContinue":true}`),
		frag(`{"partialArgs":[{"jsonPath":"$['c d'][0].e","stringValue":"y"},{"jsonPath":"$.f","boolValue":true},{"jsonPath":"$.g","nullValue":"NULL_VALUE"},{"jsonPath":"$.a.b[1]","stringValue":""}],"willContinue":true}`),
		`{"text":"between","thought":true}`,
		frag(`{}`),
		`{"text":"done"}`)
	resp, err := decodeAnswer([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0].Calls
	if len(c) != 1 || c[0].ID != "c1" || string(c[0].Args) != `{"a":{"b":[1.5,""]},"c d":[{"e":"xy"}],"f":true,"g":null}` || resp.Choices[0].Text != "done" {
		t.Fatalf("calls %+v text %q", c, resp.Choices[0].Text)
	}
	for _, bad := range []string{
		answer(frag(`{"name":"f","willContinue":true}`)),
		answer(frag(`{"name":"f","willContinue":true}`), frag(`{"name":"g"}`)),
		answer(frag(`{"name":"f","args":{},"willContinue":true}`), frag(`{}`)),
		answer(frag(`{"name":"f","willContinue":true}`), frag(`{"partialArgs":[{"jsonPath":"$.a","numberValue":1},{"jsonPath":"$.a.b","numberValue":2}]}`)),
		answer(frag(`{"name":"f","willContinue":true}`), frag(`{"partialArgs":[{"jsonPath":"$.a[2]","numberValue":1}]}`)),
		answer(frag(`{"name":"f","willContinue":true}`), frag(`{"partialArgs":[{"jsonPath":"a","numberValue":1}]}`)),
		answer(frag(`{"name":"f","willContinue":true}`), frag(`{"partialArgs":[{"jsonPath":"$.a","numberValue":1,"stringValue":"x"}]}`)),
		answer(frag(`{"name":"f","willContinue":true}`), frag(`{"partialArgs":[{"jsonPath":"$.a","numberValue":"1"}]}`)),
		answer(frag(`{"name":"f","willContinue":true}`), frag(`{"partialArgs":[{"jsonPath":"$.a","numberValue":1},{"jsonPath":"$.a","numberValue":2}]}`)),
	} {
		if _, err := decodeAnswer([]byte(bad)); err == nil {
			t.Errorf("read: %s", bad)
		}
	}
}

// The abstain exit joins declarations written as function_declarations
// under that spelling, so the request never holds both.
func TestInjectToolSnakeCase(t *testing.T) {
	cd := newCodec()
	if _, err := cd.DecodeRequest("", readSample(t, "recorded/generate_snake_case_declaration_gemini-2.5-flash.request.json")); err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(cd.body), `"functionDeclarations"`, `"function_declarations"`, 1)
	if _, err := cd.DecodeRequest("", []byte(body)); err != nil {
		t.Fatal(err)
	}
	out, err := cd.InjectTool(abstainTool)
	if err != nil {
		t.Fatal(err)
	}
	req, err := newCodec().DecodeRequest("", out)
	if err != nil || len(req.Offered) != 2 || req.Offered[1].Name != abstainTool.Name || strings.Contains(string(out), `"functionDeclarations"`) {
		t.Fatalf("%v %s", err, out)
	}
}

// An answer replaced by text drops every fragment of the streamed calls:
// the last held chunk carries the text, and no functionCall remains.
func TestPartialArgsRespond(t *testing.T) {
	f := feedAll(t, false, bytes.NewReader(readSample(t, "recorded/sse_vertex_partial_args_gemini-3.1-pro.sse")))
	esc := &neutral.Escalated{ID: "esc_p", Body: []byte(`{"id":"esc_p"}`), Text: "A person decides. [toolgate:esc_p]"}
	out, err := f.st.Encode(f.held(), respond(esc), f.sent())
	if err != nil {
		t.Fatal(err)
	}
	again := feedAll(t, false, bytes.NewReader(append(joinRaw(f.events[:f.holdAt]), out...)))
	if again.err != nil || !again.done || bytes.Contains(out, []byte("functionCall")) || again.st.Turns()[0].Text != esc.Text {
		t.Fatalf("rendered (%v):\n%s", again.err, out)
	}
}
