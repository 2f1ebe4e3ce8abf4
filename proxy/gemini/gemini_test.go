package gemini

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// newCodec is a codec as the pipeline gets one for a request.
func newCodec() *codec { return API{}.NewCodec().(*codec) }

// decodeAnswer reads an answer with a fresh codec.
func decodeAnswer(body []byte) (*neutral.Answer, error) { return newCodec().DecodeAnswer(body) }

func TestDecodeRequest(t *testing.T) {
	req, err := newCodec().DecodeRequest("/v1beta/models/gemini-2.5-flash:streamGenerateContent", readSample(t, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "gemini-2.5-flash" || !req.Stream {
		t.Errorf("model %q stream %v", req.Model, req.Stream)
	}
	if len(req.Offered) != 2 {
		t.Fatalf("offered %d tools, want the 2 function declarations (googleSearch is not judged)", len(req.Offered))
	}
	weather := `{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","format":"enum","enum":["celsius","fahrenheit"]}},"required":["location"]}`
	if !sameJSON(t, req.Offered[0].Parameters, []byte(weather)) {
		t.Errorf("parameters translated to %s", req.Offered[0].Parameters)
	}
	if !bytes.Contains(req.Offered[1].Parameters, []byte(`"additionalProperties": false`)) {
		t.Errorf("parametersJsonSchema not taken as is: %s", req.Offered[1].Parameters)
	}
	if req.Choice.Kind != neutral.ChoiceAuto || !strings.Contains(req.UserText, "Boston") {
		t.Errorf("choice %v user text %q", req.Choice, req.UserText)
	}
	plain, err := newCodec().DecodeRequest("/v1/projects/p/locations/l/publishers/google/models/gemini-2.0-flash:generateContent", []byte(`{"contents":[]}`))
	if err != nil || plain.Model != "gemini-2.0-flash" || plain.Stream {
		t.Errorf("vertex path: %+v %v", plain, err)
	}
}

func TestDecodeRequestStructuredAndCached(t *testing.T) {
	req, err := newCodec().DecodeRequest("", []byte(`{"contents":[],"generationConfig":{"responseMimeType":"application/json"},"cachedContent":"cachedContents/abc"}`))
	if err != nil || !req.StructuredOutput || !req.HistoryUpstream {
		t.Fatalf("%+v %v", req, err)
	}
	if _, err := newCodec().DecodeRequest("", []byte(`[]`)); err == nil {
		t.Error("an array is not a request")
	}
}

// A schema that cannot be translated is offered as written, so it fails
// to compile and calls of it are findings rather than unjudged.
func TestDecodeRequestUntranslatableSchema(t *testing.T) {
	req, err := newCodec().DecodeRequest("", []byte(`{"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"MAP"}}]}]}`))
	if err != nil || len(req.Offered) != 1 || string(req.Offered[0].Parameters) != `{"type":"MAP"}` {
		t.Fatalf("%+v %v", req, err)
	}
}

func TestToolChoice(t *testing.T) {
	cases := []struct {
		conf string
		want neutral.ToolChoice
	}{
		{``, neutral.ToolChoice{Kind: neutral.ChoiceAuto}},
		{`,"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}`, neutral.ToolChoice{Kind: neutral.ChoiceAuto}},
		{`,"toolConfig":{"functionCallingConfig":{"mode":"VALIDATED"}}`, neutral.ToolChoice{Kind: neutral.ChoiceAuto}},
		{`,"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}`, neutral.ToolChoice{Kind: neutral.ChoiceRequired}},
		{`,"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}`, neutral.ToolChoice{Kind: neutral.ChoiceNone}},
		{`,"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["a","b"]}}`, neutral.ToolChoice{Kind: neutral.ChoiceAllowed, Names: []string{"a", "b"}}},
		{`,"toolConfig":{"functionCallingConfig":{"mode":"VALIDATED","allowedFunctionNames":["a"]}}`, neutral.ToolChoice{Kind: neutral.ChoiceAllowed, Names: []string{"a"}}},
	}
	for _, c := range cases {
		req, err := newCodec().DecodeRequest("", []byte(`{"contents":[]`+c.conf+`}`))
		if err != nil {
			t.Fatal(err)
		}
		if req.Choice.Kind != c.want.Kind || strings.Join(req.Choice.Names, ",") != strings.Join(c.want.Names, ",") {
			t.Errorf("%s: got %+v want %+v", c.conf, req.Choice, c.want)
		}
	}
}

func TestDecodeAnswerRecorded(t *testing.T) {
	body := readSample(t, "recorded/generate_call_int_enums_gemini-2.0-flash.json")
	resp, err := decodeAnswer(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || len(resp.Choices[0].Calls) != 1 {
		t.Fatalf("choices %+v", resp.Choices)
	}
	c := resp.Choices[0].Calls[0]
	if c.Name != "getWeather" || !sameJSON(t, c.Args, []byte(`{"location":"New York"}`)) || !strings.HasPrefix(c.ID, syntheticID) {
		t.Errorf("call %+v", c)
	}
	if resp.Usage != (neutral.Usage{Input: 27, Output: 5}) || resp.Choices[0].Raw.(*turn).finish != "STOP" {
		t.Errorf("usage %+v, finishReason 1 read as %q", resp.Usage, resp.Choices[0].Raw.(*turn).finish)
	}

	body = readSample(t, "recorded/generate_thought_and_call_gemini-2.5-flash.json")
	resp, err = decodeAnswer(body)
	if err != nil {
		t.Fatal(err)
	}
	turn0 := resp.Choices[0]
	if len(turn0.Calls) != 1 || turn0.Calls[0].Name != "weather" || turn0.Text != "" {
		t.Errorf("calls %+v text %q (thought parts are not text)", turn0.Calls, turn0.Text)
	}
	if resp.Usage != (neutral.Usage{Input: 54, Output: 15 + 54}) {
		t.Errorf("usage with thoughts %+v", resp.Usage)
	}
	obj, _ := jsonx.ParseObject(body)
	cands, _ := jsonx.ParseArray(obj.Get("candidates"))
	cand, _ := jsonx.ParseObject(cands[0])
	if raw := turn0.Raw.(*turn).content; !bytes.Equal(raw, cand.Get("content")) || !bytes.Contains(raw, []byte("thoughtSignature")) {
		t.Errorf("the turn replays %s, not the content as received", raw)
	}

	resp, err = decodeAnswer(readSample(t, "recorded/generate_parallel_gemini-3.1-pro.json"))
	if err != nil || len(resp.Choices[0].Calls) != 2 || resp.Choices[0].Calls[0].ID != "wxvlv0tv" || resp.Choices[0].Calls[1].ID != "75p2opbh" {
		t.Fatalf("call ids: %+v %v", resp, err)
	}
}

func TestDecodeAnswerRefuses(t *testing.T) {
	for _, body := range []string{
		`{}`, `[]`, `{"candidates":{}}`, `{"candidates":[1]}`, `{"candidates":[{"content":{"parts":[1]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"FunctionCall":{"name":"x"}}]}}]}`,
	} {
		if _, err := decodeAnswer([]byte(body)); err == nil {
			t.Errorf("%s was read", body)
		}
	}
}

func TestDecodeAnswerTruncatedAndIDs(t *testing.T) {
	resp, err := decodeAnswer([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"fc_1","name":"f"}}]},"finishReason":"MAX_TOKENS"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tn := resp.Choices[0]
	if !tn.Truncated() || tn.Calls[0].ID != "fc_1" || string(tn.Calls[0].Args) != "{}" {
		t.Errorf("%+v", tn)
	}
	resp, _ = decodeAnswer([]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":"x"}}]}}]}`))
	if !resp.Choices[0].Calls[0].BadShape {
		t.Error("args that are not an object are a bad shape")
	}
}

// MALFORMED_FUNCTION_CALL and its kin carry no call: the candidate passes
// and the codec names the note the operator sees.
func TestNotes(t *testing.T) {
	for reason, want := range map[string]string{
		"MALFORMED_FUNCTION_CALL": "gemini_malformed_function_call",
		"UNEXPECTED_TOOL_CALL":    "gemini_unexpected_tool_call",
		"TOO_MANY_TOOL_CALLS":     "gemini_too_many_tool_calls",
		"STOP":                    "",
	} {
		resp, err := decodeAnswer([]byte(`{"candidates":[{"content":{"parts":[]},"finishReason":"` + reason + `","finishMessage":"Malformed function call: x"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(newCodec().Notes(resp.Choices[0]), ",")
		if got != want || len(resp.Choices[0].Calls) != 0 {
			t.Errorf("%s: notes %q, want %q", reason, got, want)
		}
	}
}

// parallelTurn is a recorded request with two tools read by a codec, and
// that codec's reading of the recorded answer with two parallel calls.
func parallelTurn(t *testing.T) (*codec, *neutral.Request, *neutral.Answer) {
	t.Helper()
	c := newCodec()
	req, err := c.DecodeRequest("/v1beta/models/gemini-3-pro-preview:generateContent", readSample(t, "recorded/generate_parallel_gemini-3.1-pro.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.DecodeAnswer(readSample(t, "recorded/generate_parallel_gemini-3.1-pro.json"))
	if err != nil {
		t.Fatal(err)
	}
	return c, req, resp
}

// followUpContents decodes a re-query's contents.
func followUpContents(t *testing.T, body []byte) []json.RawMessage {
	t.Helper()
	var q struct {
		Contents []json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(body, &q); err != nil {
		t.Fatal(err)
	}
	return q.Contents
}

func TestReQuery(t *testing.T) {
	cd, req, resp := parallelTurn(t)
	tn := resp.Choices[0]
	q := &neutral.Query{Kind: neutral.KindReprompt, History: []neutral.Round{{Turn: tn, Replies: []neutral.CallReply{
		{CallID: tn.Calls[0].ID, Content: "bad unit", IsError: true},
		{CallID: tn.Calls[1].ID, Content: "held"},
	}}}}
	body, err := cd.ReQuery(resp, q)
	if err != nil {
		t.Fatal(err)
	}
	contents := followUpContents(t, body)
	if len(contents) != 3 {
		t.Fatalf("contents %d", len(contents))
	}
	if !bytes.Equal(contents[1], tn.Raw.(*turn).content) {
		t.Errorf("model turn replayed as %s", contents[1])
	}
	want := `{"role":"user","parts":[{"functionResponse":{"id":"wxvlv0tv","name":"add","response":{"error":"bad unit"}}},{"functionResponse":{"id":"75p2opbh","name":"multiply","response":{"output":"held"}}}]}`
	if string(contents[2]) != want {
		t.Errorf("responses %s\nwant      %s", contents[2], want)
	}
	orig, _ := jsonx.ParseObject(req.Body)
	got, _ := jsonx.ParseObject(body)
	if !bytes.Equal(orig.Get("tools"), got.Get("tools")) || !bytes.Equal(orig.Get("toolConfig"), got.Get("toolConfig")) {
		t.Error("tools or toolConfig changed in a reprompt")
	}

	q.Decision = true
	body, err = cd.ReQuery(resp, q)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = jsonx.ParseObject(body)
	if string(got.Get("toolConfig")) != `{"functionCallingConfig":{"mode":"NONE"}}` || !bytes.Equal(orig.Get("tools"), got.Get("tools")) {
		t.Errorf("decision toolConfig %s", got.Get("toolConfig"))
	}
}

// Ids the model sent are echoed; everything else of the request stays as
// sent, and a decision drops the response schema.
func TestReQueryIDsAndConfig(t *testing.T) {
	reqBody := `{"systemInstruction":{"parts":[{"text":"be brief"}]},"cachedContent":"cachedContents/x","contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"candidateCount":2,"responseMimeType":"application/json","temperature":0.2},"tools":[{"functionDeclarations":[{"name":"f"}]}]}`
	cd := newCodec()
	if _, err := cd.DecodeRequest("", []byte(reqBody)); err != nil {
		t.Fatal(err)
	}
	resp, _ := cd.DecodeAnswer([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"c1","name":"f","args":{}}}]}}]}`))
	tn := resp.Choices[0]
	body, err := cd.ReQuery(resp, &neutral.Query{Decision: true, History: []neutral.Round{{Turn: tn, Replies: []neutral.CallReply{{CallID: "c1", Content: "x", IsError: true}}}}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := jsonx.ParseObject(body)
	if string(got.Get("generationConfig")) != `{"candidateCount":1,"temperature":0.2}` {
		t.Errorf("generationConfig %s", got.Get("generationConfig"))
	}
	orig, _ := jsonx.ParseObject([]byte(reqBody))
	for _, k := range []string{"systemInstruction", "cachedContent", "tools"} {
		if !bytes.Equal(orig.Get(k), got.Get(k)) {
			t.Errorf("%s changed", k)
		}
	}
	if !bytes.Contains(body, []byte(`{"functionResponse":{"id":"c1","name":"f","response":{"error":"x"}}}`)) {
		t.Errorf("id not echoed: %s", body)
	}
	if _, err := cd.ReQuery(resp, &neutral.Query{History: []neutral.Round{{Turn: tn}}}); err == nil {
		t.Error("a turn without replies was replayed")
	}
}

func TestFollowUpRoute(t *testing.T) {
	p, q := newCodec().FollowUpRoute("/v1beta/models/m:streamGenerateContent", "alt=sse&key=k1")
	if p != "/v1beta/models/m:generateContent" || q != "key=k1" {
		t.Errorf("%s ? %s", p, q)
	}
	p, q = newCodec().FollowUpRoute("/v1/models/m:generateContent", "")
	if p != "/v1/models/m:generateContent" || q != "" {
		t.Errorf("%s ? %s", p, q)
	}
}

func TestEncodeAnswerSplicesAndReplaces(t *testing.T) {
	cd, _, resp := parallelTurn(t)
	tn := resp.Choices[0]
	fixed := neutral.ToolCall{ID: tn.Calls[0].ID, Name: "add", Args: []byte(`{"a":5,"b":6}`)}
	act := neutral.Action{Kind: neutral.Replace, Calls: []neutral.ToolCall{fixed, tn.Calls[1]}, Changed: []bool{true, false}}
	out, err := cd.EncodeAnswer(resp, []neutral.Action{act})
	if err != nil {
		t.Fatal(err)
	}
	again, err := decodeAnswer(out)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, again.Choices[0].Calls[0].Args, fixed.Args) || !sameJSON(t, again.Choices[0].Calls[1].Args, tn.Calls[1].Args) {
		t.Errorf("rendered %s", out)
	}
	if !bytes.Contains(out, []byte(`"thoughtSignature":"Es8KCswKAb4+`)) || !bytes.Contains(out, []byte(`"id":"wxvlv0tv"`)) {
		t.Errorf("signature or id lost: %s", out)
	}
	// A thought part stays where it was.
	tc := newCodec()
	tr, err := tc.DecodeAnswer(readSample(t, "recorded/generate_thought_and_call_gemini-2.5-flash.json"))
	if err != nil {
		t.Fatal(err)
	}
	wx := neutral.ToolCall{ID: tr.Choices[0].Calls[0].ID, Name: "weather", Args: []byte(`{"location":"Firenze"}`)}
	out2, err := tc.EncodeAnswer(tr, []neutral.Action{{Kind: neutral.Replace, Calls: []neutral.ToolCall{wx}, Changed: []bool{true}}})
	if err != nil || !bytes.Contains(out2, []byte(`"thought": true`)) || !bytes.Contains(out2, []byte(`"location":"Firenze"`)) {
		t.Errorf("thought part lost or call not replaced (%v): %s", err, out2)
	}

	esc := &neutral.Escalated{ID: "esc_1", Body: []byte(`{"id":"esc_1"}`), Text: "needs a person [toolgate:esc_1]"}
	out, err = cd.EncodeAnswer(resp, []neutral.Action{{Kind: neutral.Respond, Text: esc.Text, Escalation: esc}})
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Candidates []struct {
			Content struct {
				Parts []map[string]any `json:"parts"`
				Role  string           `json:"role"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
		Escalation map[string]any `json:"toolgate_escalation"`
	}
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatal(err)
	}
	c := w.Candidates[0]
	if len(c.Content.Parts) != 1 || c.Content.Parts[0]["text"] != esc.Text || c.FinishReason != "STOP" || c.Content.Role != "model" || w.Escalation["id"] != "esc_1" {
		t.Errorf("message mode %s", out)
	}
}

func TestErrorBodies(t *testing.T) {
	esc := &neutral.Escalated{ID: "esc_1", Code: "unknown_tool", Body: []byte(`{"id":"esc_1","codes":["unknown_tool"]}`), Text: "t"}
	var w struct {
		Error struct {
			Code    int              `json:"code"`
			Message string           `json:"message"`
			Status  string           `json:"status"`
			Details []map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(newCodec().EncodeEscalation(esc), &w); err != nil {
		t.Fatal(err)
	}
	d := w.Error.Details[0]
	if w.Error.Code != 422 || w.Error.Status != "FAILED_PRECONDITION" || d["@type"] != escalationType || d["id"] != "esc_1" {
		t.Errorf("%+v", w)
	}
	if err := json.Unmarshal(newCodec().EncodeError(neutral.Failure{Status: 504, Code: neutral.CodeUpstreamTimeout, Message: "slow"}), &w); err != nil {
		t.Fatal(err)
	}
	if w.Error.Code != 504 || w.Error.Status != "DEADLINE_EXCEEDED" || w.Error.Details[0]["reason"] != "upstream_timeout" {
		t.Errorf("%+v", w)
	}
}

func TestCallJSON(t *testing.T) {
	got := newCodec().CallJSON(neutral.ToolCall{ID: syntheticID + "0", Name: "f", Args: []byte(`{ "a": 1 }`)})
	if string(got) != `{"functionCall":{"name":"f","args":{"a":1}}}` {
		t.Errorf("%s", got)
	}
	got = newCodec().CallJSON(neutral.ToolCall{ID: "c9", Name: "f", Args: []byte(`{}`)})
	if string(got) != `{"functionCall":{"id":"c9","name":"f","args":{}}}` {
		t.Errorf("%s", got)
	}
}

func TestInjectTool(t *testing.T) {
	abstain := neutral.Offered{Name: "none_fits", Description: "d", Parameters: []byte(`{"type":"object","properties":{"reason":{"type":"string","description":"why"}},"required":["reason"],"additionalProperties":false}`)}
	cd := newCodec()
	if _, err := cd.DecodeRequest("", readSample(t, "request.json")); err != nil {
		t.Fatal(err)
	}
	body, err := cd.InjectTool(abstain)
	if err != nil {
		t.Fatal(err)
	}
	again, err := newCodec().DecodeRequest("", body)
	if err != nil || len(again.Offered) != 3 || again.Offered[2].Name != "none_fits" {
		t.Fatalf("%+v %v", again, err)
	}
	// The last declaration of that tool uses parametersJsonSchema, so the
	// injected one does too.
	if !bytes.Equal(again.Offered[2].Parameters, abstain.Parameters) {
		t.Errorf("injected schema %s", again.Offered[2].Parameters)
	}
	cd = newCodec()
	if _, err := cd.DecodeRequest("", []byte(`{"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"}}]}]}`)); err != nil {
		t.Fatal(err)
	}
	body, err = cd.InjectTool(abstain)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte(`"parameters":{"type":"OBJECT","properties":{"reason":{"type":"STRING","description":"why"}},"required":["reason"]}`)) {
		t.Errorf("OpenAPI form not used: %s", body)
	}
	cd = newCodec()
	if _, err := cd.DecodeRequest("", []byte(`{"tools":[{"googleSearch":{}}]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := cd.InjectTool(abstain); err == nil {
		t.Error("injected into a request without function declarations")
	}
}

// Keys that fold onto a Gemini key are refused where toolgate reads keys,
// and judged as arguments inside args.
func TestFoldedKeys(t *testing.T) {
	for body, want := range map[string]bool{
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"Name":"x","Type":"y","ARGS":1}}}]}}]}`: false,
		`{"Candidates":[]}`:                                                      true,
		`{"candidates":[{"Content":{}}]}`:                                        true,
		`{"candidates":[{"content":{"Parts":[]}}]}`:                              true,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"Name":"f"}}]}}]}`: true,
		`{"candidates":[{"content":{"parts":[{"FunctionCall":{"name":"f"}}]}}]}`: true,
		`{"usageMetadata":{"PromptTokenCount":1}}`:                               true,
		`{"Error":{}}`: true,
	} {
		if got := newCodec().FoldedKey([]byte(body)); got != want {
			t.Errorf("%s: %v", body, got)
		}
	}
	resp, err := decodeAnswer([]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"Type":"y"}}}]}}]}`))
	if err != nil || string(resp.Choices[0].Calls[0].Args) != `{"Type":"y"}` {
		t.Errorf("an argument named like a protocol key: %v", err)
	}
}
