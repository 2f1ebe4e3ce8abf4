package test

// The recorded exchanges of proxy/gemini/testdata/recorded (real answers of
// the Gemini API and Vertex AI, see the README there) replayed through the
// real server: each recorded request is sent as recorded, the upstream
// answers with the recorded bytes and status, and the client must read
// them unchanged when every call is valid. Copies of real answers edited
// to carry a bad call must never reach the client.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genai"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// recordedDir holds the recordings.
var recordedDir = filepath.Join("..", "proxy", "gemini", "testdata", "recorded")

func recorded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(recordedDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// partialArgsRequest is the request of the streamed-arguments recording,
// which was recorded without its request: the source's test declares
// getWeather(location: string) and asks Vertex AI to stream arguments.
const partialArgsRequest = `{"contents":[{"role":"user","parts":[{"text":"What is the weather in Boston and San Francisco?"}]}],` +
	`"tools":[{"functionDeclarations":[{"name":"getWeather","parameters":{"type":"OBJECT","properties":{"location":{"type":"STRING"}},"required":["location"]}}]}],` +
	`"toolConfig":{"functionCallingConfig":{"mode":"AUTO","streamFunctionCallArguments":true}}}`

// recordedUpstream answers every request with one recorded body and
// status, as the API sent it, and keeps the bodies it was sent.
type recordedUpstream struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	paths  []string
}

func newRecordedUpstream(t *testing.T, status int, body []byte, sse bool) *recordedUpstream {
	t.Helper()
	u := &recordedUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, b)
		u.paths = append(u.paths, r.URL.RequestURI())
		u.mu.Unlock()
		ct := "application/json; charset=UTF-8"
		if sse {
			ct = "text/event-stream"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		// Written in pieces, as a stream arrives.
		for len(body) > 0 {
			n := min(len(body), 97)
			_, _ = w.Write(body[:n])
			w.(http.Flusher).Flush()
			body = body[n:]
		}
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *recordedUpstream) sent() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.bodies)
}

// recordedGate is toolgate in front of u, with the Vertex AI paths the
// recordings use mapped to the Gemini codec.
func recordedGate(t *testing.T, u *recordedUpstream) *gate {
	t.Helper()
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: gemini\n    url: " + u.srv.URL + "\n" +
		"    api_paths:\n" +
		"      \"/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent\": gemini\n" +
		"      \"/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent\": gemini\n" +
		"      \"/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent\": gemini\n"
	return startGate(t, cfg)
}

// recording is one recorded exchange and where its client sent it.
type recording struct {
	file, request, path string
	status              int
}

const vertexBase = "/v1/projects/p/locations/us-east5/publishers/google/models/"

var recordings = []recording{
	{"sse_call_gemini-2.0-flash.sse", "", "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", 200},
	{"sse_parallel_one_event_gemini-2.5-flash.sse", "", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", 200},
	{"sse_parallel_split_events_gemini-3.1-pro.sse", "", "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse", 200},
	{"sse_thought_then_call_gemini-2.5-flash.sse", "", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", 200},
	{"sse_vertex_parallel_gemini-2.5-flash.sse", "", vertexBase + "gemini-2.5-flash:streamGenerateContent?alt=sse", 200},
	{"sse_max_tokens_gemini-2.5-flash.sse", "", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", 200},
	{"sse_vertex_partial_args_gemini-3.1-pro.sse", partialArgsRequest, vertexBase + "gemini-3.1-pro-preview:streamGenerateContent?alt=sse", 200},
	{"array_thought_then_call_gemini-2.5-flash.json", "", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", 200},
	{"array_single_element_unsigned_call_gemini-2.5-flash.json", "", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", 200},
	{"array_call_with_id_gemini-3.6-flash.json", "", "/v1beta/models/gemini-flash-latest:streamGenerateContent", 200},
	{"generate_parallel_gemini-3.1-pro.json", "", "/v1beta/models/gemini-3-pro-preview:generateContent", 200},
	{"generate_thought_and_call_gemini-2.5-flash.json", "", "/v1beta/models/gemini-2.5-flash:generateContent", 200},
	{"generate_call_int_enums_gemini-2.0-flash.json", "", "/v1beta/models/gemini-2.0-flash:generateContent?$alt=json;enum-encoding=int", 200},
	{"generate_vertex_parallel_gemini-2.5-flash.json", "", vertexBase + "gemini-2.5-flash:generateContent", 200},
	{"generate_snake_case_declaration_gemini-2.5-flash.json", "", "/v1beta/models/gemini-2.5-flash:generateContent", 200},
	{"error_403_permission_denied.json", "", "/v1beta/models/gemini-2.0-flash:generateContent", 403},
}

// requestOf is the recorded request of r, or the one written for it.
func (r recording) body(t *testing.T) []byte {
	if r.request != "" {
		return []byte(r.request)
	}
	base := strings.TrimSuffix(strings.TrimSuffix(r.file, ".sse"), ".json")
	return recorded(t, base+".request.json")
}

// replay sends r's request through a gate whose upstream answers with
// answer, and returns what the client read and what the upstream was sent.
func (r recording) replay(t *testing.T, answer []byte) (fuResult, [][]byte) {
	t.Helper()
	up := newRecordedUpstream(t, r.status, answer, strings.HasSuffix(r.file, ".sse"))
	g := recordedGate(t, up)
	res := gemPost(t, g.URL, r.path, r.body(t), "x-goog-api-key", "k")
	return res, up.sent()
}

// Every valid recording reaches the client byte for byte, with its
// status, and every recorded request reaches the upstream as recorded.
func TestGeminiRecordingsReplayByteIdentical(t *testing.T) {
	for _, r := range recordings {
		t.Run(r.file, func(t *testing.T) {
			answer := recorded(t, r.file)
			res, sent := r.replay(t, answer)
			if res.Err != nil || res.Status != r.status || string(res.Body) != string(answer) {
				t.Fatalf("status %d (want %d) err %v, outcome %q, body\n%s", res.Status, r.status, res.Err, res.Header.Get("X-Toolgate-Outcome"), res.Body)
			}
			if len(sent) != 1 || string(sent[0]) != string(r.body(t)) {
				t.Fatalf("the upstream was sent %d requests, the first\n%s", len(sent), sent)
			}
			if r.status == 200 && !strings.Contains(r.path, "stream") && res.Header.Get("X-Toolgate-Outcome") != "pass" {
				t.Errorf("outcome %q", res.Header.Get("X-Toolgate-Outcome"))
			}
		})
	}
}

// releasedCalls are the functionCall objects (and the fragments of
// streamed ones) a client reads in body: a plain answer, an SSE stream or
// a JSON-array stream. Error envelopes carry none.
func releasedCalls(body []byte) []string {
	var docs [][]byte
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		var elems []json.RawMessage
		_ = json.Unmarshal(trimmed, &elems)
		for _, e := range elems {
			docs = append(docs, e)
		}
	case len(trimmed) > 0 && trimmed[0] == '{':
		docs = append(docs, trimmed)
	default:
		for _, line := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data: "); ok {
				docs = append(docs, []byte(d))
			}
		}
	}
	var out []string
	for _, d := range docs {
		var a struct {
			Candidates []struct {
				Content struct {
					Parts []map[string]json.RawMessage `json:"parts"`
				} `json:"content"`
			} `json:"candidates"`
		}
		_ = json.Unmarshal(d, &a)
		for _, c := range a.Candidates {
			for _, p := range c.Content.Parts {
				if fc := p["functionCall"]; fc != nil {
					out = append(out, string(fc))
				}
			}
		}
	}
	return out
}

// edited is a copy of a real answer with one edit that makes a call bad.
type edited struct {
	name     string
	rec      recording
	old, new string
	// code is the finding the bad call must be judged with; needle is
	// what shows the bad call in a functionCall.
	code, needle string
}

var editedRecordings = []edited{
	{"int enums, argument of the wrong type", recordings[12], `"location": "New York"`, `"location": 123`, "schema_violation", `123`},
	{"snake_case declaration, argument of the wrong type", recordings[14], `"value": 1}`, `"value": "one"}`, "schema_violation", `"one"`},
	{"plain parallel, undeclared name", recordings[10], `"name": "multiply"`, `"name": "divide"`, "unknown_tool", `"divide"`},
	{"Gemini 3 split stream, second call of the wrong type", recordings[2], `"args": {"b": 3,"a": 2}`, `"args": {"b": "three","a": 2}`, "schema_violation", `"three"`},
	{"Gemini 3 split stream, second call undeclared", recordings[2], `"name": "multiply"`, `"name": "divide"`, "unknown_tool", `"divide"`},
	{"partialArgs stream, argument of the wrong type", recordings[6], `"stringValue":"San Francisco","willContinue":true`, `"numberValue":94103`, "schema_violation", `94103`},
	{"partialArgs stream, second call undeclared", recordings[6], `{"functionCall":{"name":"getWeather","willContinue":true}}`, `{"functionCall":{"name":"getTime","willContinue":true}}`, "unknown_tool", `"getTime"`},
	{"JSON array, nested argument of the wrong type", recordings[9], `"age": 30`, `"age": "thirty"`, "schema_violation", `"thirty"`},
}

// Copies of real answers edited to carry one bad call are never released:
// the bad call is judged (and, as the upstream answers every re-query
// with the same copy, escalated), whatever shape carried it.
func TestGeminiEditedRecordingsNeverReleased(t *testing.T) {
	for _, e := range editedRecordings {
		t.Run(e.name, func(t *testing.T) {
			answer := recorded(t, e.rec.file)
			if bytes.Count(answer, []byte(e.old)) != 1 {
				t.Fatalf("%q is not in %s exactly once", e.old, e.rec.file)
			}
			bad := bytes.Replace(answer, []byte(e.old), []byte(e.new), 1)
			up := newRecordedUpstream(t, 200, bad, strings.HasSuffix(e.rec.file, ".sse"))
			sink := &recordingSink{}
			cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: gemini\n    url: " + up.srv.URL + "\n" +
				"    api_paths:\n      \"/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent\": gemini\n"
			g, _ := startGateWith(t, cfg, app.Options{Sink: sink})
			res := gemPost(t, g.URL, e.rec.path, e.rec.body(t), "x-goog-api-key", "k")
			for _, fc := range releasedCalls(res.Body) {
				if strings.Contains(fc, e.needle) {
					t.Fatalf("the bad call reached the client: %s\n%s", fc, res.Body)
				}
			}
			recs := sink.records()
			if len(recs) != 1 || !slices.Contains(recs[0].Escalation.Codes, e.code) {
				t.Fatalf("status %d, escalations %d, want one with %s; body\n%s", res.Status, len(recs), e.code, res.Body)
			}
		})
	}
}

// The recorded UNEXPECTED_TOOL_CALL candidate still carries the undeclared
// call: it is judged (unknown_tool) like any other call, never passed,
// and not counted as unvalidated.
func TestGeminiUnexpectedToolCallIsJudged(t *testing.T) {
	answer := recorded(t, "generate_vertex_unexpected_tool_call_gemini-3-flash.json")
	up := newRecordedUpstream(t, 200, answer, false)
	sink := &recordingSink{}
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: gemini\n    url: " + up.srv.URL + "\n" +
		"    api_paths:\n      \"/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent\": gemini\n"
	g, _ := startGateWith(t, cfg, app.Options{Sink: sink})
	path := "/v1beta1/projects/p/locations/global/publishers/google/models/gemini-3-flash-preview:generateContent"
	res := gemPost(t, g.URL, path, recorded(t, "generate_vertex_unexpected_tool_call_gemini-3-flash.request.json"))
	if calls := releasedCalls(res.Body); len(calls) != 0 || res.Header.Get("X-Toolgate-Outcome") == "pass" {
		t.Fatalf("status %d outcome %q, calls released %v", res.Status, res.Header.Get("X-Toolgate-Outcome"), calls)
	}
	recs := sink.records()
	if len(recs) != 1 || !slices.Contains(recs[0].Escalation.Codes, "unknown_tool") {
		t.Fatalf("escalations %d, want one with unknown_tool", len(recs))
	}
	if n := testutil.ToFloat64(g.App.Metrics.Unvalidated.WithLabelValues("gemini_unexpected_tool_call")); n != 0 {
		t.Errorf("a judged call counted as unvalidated %v times", n)
	}
}

// A MALFORMED_FUNCTION_CALL finish written as its number (the legacy Go
// SDK asks for enum-encoding=int) is noted like the named one.
func TestGeminiIntegerFinishReasonNoted(t *testing.T) {
	answer := []byte(`{"candidates":[{"content":{"role":"model"},"finishReason":10}],"usageMetadata":{"promptTokenCount":27,"totalTokenCount":27},"modelVersion":"gemini-2.0-flash"}`)
	up := newRecordedUpstream(t, 200, answer, false)
	g := recordedGate(t, up)
	r := recordings[12]
	res := gemPost(t, g.URL, r.path, r.body(t), "x-goog-api-key", "k")
	if res.Status != 200 || string(res.Body) != string(answer) {
		t.Fatalf("status %d body %s", res.Status, res.Body)
	}
	if n := testutil.ToFloat64(g.App.Metrics.Unvalidated.WithLabelValues("gemini_malformed_function_call")); n != 1 {
		t.Errorf("unvalidated{gemini_malformed_function_call} = %v", n)
	}
}

// Requests written in proto field names throughout (function_declarations,
// function_calling_config, allowed_function_names, the mode as its
// number) offer the same tools: the recorded valid call passes unchanged,
// and the same call with a bad argument does not.
func TestGeminiSnakeCaseRequestEverywhere(t *testing.T) {
	r := recordings[14]
	body := string(r.body(t))
	for old, repl := range map[string]string{
		`"functionDeclarations"`: `"function_declarations"`,
		`"toolConfig"`:           `"tool_config"`, `"functionCallingConfig"`: `"function_calling_config"`,
		`"allowedFunctionNames"`: `"allowed_function_names"`, `"mode": "ANY"`: `"mode": 2`,
		`"systemInstruction"`: `"system_instruction"`,
	} {
		if !strings.Contains(body, old) {
			t.Fatalf("%s is not in the recorded request", old)
		}
		body = strings.Replace(body, old, repl, 1)
	}
	answer := recorded(t, r.file)
	for _, c := range []struct {
		answer []byte
		pass   bool
	}{{answer, true}, {bytes.Replace(answer, []byte(`"value": 1}`), []byte(`"value": "one"}`), 1), false}} {
		up := newRecordedUpstream(t, 200, c.answer, false)
		g := recordedGate(t, up)
		res := gemPost(t, g.URL, r.path, []byte(body), "x-goog-api-key", "k")
		if got := res.Header.Get("X-Toolgate-Outcome") == "pass" && string(res.Body) == string(c.answer); got != c.pass {
			t.Errorf("pass %v, want %v: status %d outcome %q", got, c.pass, res.Status, res.Header.Get("X-Toolgate-Outcome"))
		}
		if sent := up.sent(); len(sent) == 0 || string(sent[0]) != body {
			t.Errorf("the request was not forwarded as sent")
		}
	}
}

// recordedSDKRequest is a recorded request as Go SDK arguments: its
// contents, tools, tool config and system instruction.
func recordedSDKRequest(t *testing.T, body []byte) ([]*genai.Content, *genai.GenerateContentConfig) {
	t.Helper()
	var req struct {
		Contents          []*genai.Content  `json:"contents"`
		Tools             []*genai.Tool     `json:"tools"`
		ToolConfig        *genai.ToolConfig `json:"toolConfig"`
		SystemInstruction *genai.Content    `json:"systemInstruction"`
		GenerationConfig  *struct {
			ThinkingConfig *genai.ThinkingConfig `json:"thinkingConfig"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	cfg := &genai.GenerateContentConfig{Tools: req.Tools, ToolConfig: req.ToolConfig, SystemInstruction: req.SystemInstruction}
	if req.GenerationConfig != nil {
		cfg.ThinkingConfig = req.GenerationConfig.ThinkingConfig
	}
	return req.Contents, cfg
}

// goSDKResult is what the Go SDK hands its caller.
type goSDKResult struct {
	chunks []*genai.GenerateContentResponse
	err    error
}

// calls lists every function call of every chunk as id, name and args.
func (r goSDKResult) calls() []string {
	var out []string
	for _, c := range r.chunks {
		for _, fc := range c.FunctionCalls() {
			b, _ := json.Marshal(fc.Args)
			out = append(out, fc.ID+" "+fc.Name+" "+string(b))
		}
	}
	return out
}

// askGoSDK sends a recorded request through the Go SDK to a gate whose
// upstream answers with answer.
func askGoSDK(t *testing.T, r recording, answer []byte) goSDKResult {
	t.Helper()
	up := newRecordedUpstream(t, r.status, answer, strings.HasSuffix(r.file, ".sse"))
	g := recordedGate(t, up)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey: "k", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: g.URL, APIVersion: "v1beta"},
	})
	if err != nil {
		t.Fatal(err)
	}
	contents, cfg := recordedSDKRequest(t, r.body(t))
	model := strings.TrimPrefix(r.path[:strings.IndexByte(r.path, ':')], "/v1beta/models/")
	var res goSDKResult
	if strings.Contains(r.path, "stream") {
		for chunk, err := range client.Models.GenerateContentStream(ctx, model, contents, cfg) {
			if err != nil {
				res.err = err
				break
			}
			res.chunks = append(res.chunks, chunk)
		}
	} else {
		resp, err := client.Models.GenerateContent(ctx, model, contents, cfg)
		res.err = err
		if resp != nil {
			res.chunks = append(res.chunks, resp)
		}
	}
	return res
}

// The Go SDK reads the recorded shapes through toolgate as the API sent
// them: Gemini 3's split events with call ids and a signature, a plain
// answer's parallel calls, thought summaries; an edited bad call in the split
// stream reaches it as an escalation, never as a call.
func TestGeminiRecordedThroughGoSDK(t *testing.T) {
	split := recordings[2]
	res := askGoSDK(t, split, recorded(t, split.file))
	if res.err != nil || len(res.chunks) != 3 || strings.Join(res.calls(), "; ") != `8hd01vsf add {"a":2,"b":3}; k0srpqrc multiply {"a":2,"b":3}` {
		t.Fatalf("split stream: %v, %d chunks, calls %v", res.err, len(res.chunks), res.calls())
	}
	if sig := res.chunks[0].Candidates[0].Content.Parts[0].ThoughtSignature; len(sig) == 0 || res.chunks[2].Candidates[0].FinishReason != genai.FinishReasonStop {
		t.Errorf("signature %d bytes, last finish %q", len(sig), res.chunks[2].Candidates[0].FinishReason)
	}

	plain := recordings[10]
	res = askGoSDK(t, plain, recorded(t, plain.file))
	// (The Go SDK does not hand over finishMessage; the replay test shows
	// it reaches the client.)
	if res.err != nil || len(res.calls()) != 2 || len(res.chunks[0].Candidates[0].Content.Parts[0].ThoughtSignature) == 0 {
		t.Fatalf("plain parallel: %v, calls %v", res.err, res.calls())
	}

	thought := recordings[3]
	res = askGoSDK(t, thought, recorded(t, thought.file))
	if res.err != nil || len(res.chunks) != 2 || !res.chunks[0].Candidates[0].Content.Parts[0].Thought || len(res.calls()) != 1 {
		t.Fatalf("thought then call: %v, %d chunks, calls %v", res.err, len(res.chunks), res.calls())
	}

	// Vertex's streamed arguments, asked on the Gemini API route this SDK
	// client uses (which refuses to send the Vertex-only option itself):
	// the SDK gets every fragment as sent.
	partial := recordings[6]
	partial.path = "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse"
	partial.request = strings.Replace(partialArgsRequest, `,"streamFunctionCallArguments":true`, "", 1)
	res = askGoSDK(t, partial, recorded(t, partial.file))
	if res.err != nil || len(res.chunks) != 8 {
		t.Fatalf("streamed arguments: %v, %d chunks", res.err, len(res.chunks))
	}
	if fc := res.chunks[1].Candidates[0].Content.Parts[0].FunctionCall; fc == nil || len(fc.PartialArgs) != 1 || fc.PartialArgs[0].StringValue != "Boston" {
		t.Errorf("fragment %+v", fc)
	}

	edited := bytes.Replace(recorded(t, split.file), []byte(`"name": "multiply"`), []byte(`"name": "divide"`), 1)
	res = askGoSDK(t, split, edited)
	var ae genai.APIError
	if !errors.As(res.err, &ae) || ae.Code != 422 || len(res.calls()) != 0 {
		t.Fatalf("edited split stream: err %v, calls %v", res.err, res.calls())
	}
}

// nodeRecordedResult is one line of test/node-gemini/recorded.mjs.
type nodeRecordedResult struct {
	Case     string   `json:"case"`
	Chunks   int      `json:"chunks"`
	Calls    []string `json:"calls"`
	Thoughts int      `json:"thoughts"`
	Signed   bool     `json:"signed"`
	Finish   []string `json:"finish"`
	Error    *struct {
		Status int `json:"status"`
	} `json:"error"`
}

// @google/genai reads the recorded shapes through toolgate as the API
// sent them (split events, call ids, signatures, thought summaries; the
// SDK does not hand over finishMessage, which the replay test shows
// reaching the client), and an edited bad call as an ApiError, never as a
// call.
func TestGeminiRecordedThroughNodeSDK(t *testing.T) {
	node := needNodeIn(t, "node-gemini", "@google/genai")
	split := recordings[2]
	cases := []struct {
		name   string
		rec    recording
		answer []byte
		check  func(r nodeRecordedResult) bool
	}{
		{"split", split, recorded(t, split.file), func(r nodeRecordedResult) bool {
			return r.Chunks == 3 && strings.Join(r.Calls, "; ") == `8hd01vsf add {"a":2,"b":3}; k0srpqrc multiply {"b":3,"a":2}` &&
				r.Signed && strings.Join(r.Finish, ",") == "STOP" && r.Error == nil
		}},
		{"plain", recordings[10], recorded(t, recordings[10].file), func(r nodeRecordedResult) bool {
			return len(r.Calls) == 2 && r.Signed && strings.Join(r.Finish, ",") == "STOP" && r.Error == nil
		}},
		{"thought", recordings[3], recorded(t, recordings[3].file), func(r nodeRecordedResult) bool {
			return r.Chunks == 2 && r.Thoughts == 1 && len(r.Calls) == 1 && r.Signed && r.Error == nil
		}},
		{"edited", split, bytes.Replace(recorded(t, split.file), []byte(`"name": "multiply"`), []byte(`"name": "divide"`), 1), func(r nodeRecordedResult) bool {
			return r.Error != nil && r.Error.Status == 422 && len(r.Calls) == 0
		}},
	}
	env := map[string]any{}
	checks := map[string]func(nodeRecordedResult) bool{}
	for _, c := range cases {
		up := newRecordedUpstream(t, 200, c.answer, strings.HasSuffix(c.rec.file, ".sse"))
		g := recordedGate(t, up)
		var req any
		if err := json.Unmarshal(c.rec.body(t), &req); err != nil {
			t.Fatal(err)
		}
		model := strings.TrimPrefix(c.rec.path[:strings.IndexByte(c.rec.path, ':')], "/v1beta/models/")
		env[c.name] = map[string]any{"base": g.URL, "model": model, "stream": strings.Contains(c.rec.path, "stream"), "request": req}
		checks[c.name] = c.check
	}
	b, _ := json.Marshal(env)
	stdout := runNodeIn(t, node, "node-gemini", "recorded.mjs", 60*time.Second, "TOOLGATE_RECORDED="+string(b))
	seen := 0
	for _, line := range bytes.Split(bytes.TrimSpace(stdout), []byte("\n")) {
		var r nodeRecordedResult
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("line %s: %v", line, err)
		}
		seen++
		if check := checks[r.Case]; check == nil || !check(r) {
			t.Errorf("%s: %+v", r.Case, r)
		}
	}
	if seen != len(cases) {
		t.Errorf("%d results for %d cases:\n%s", seen, len(cases), stdout)
	}
}

// A bad call among Vertex's streamed arguments, corrected by a re-query,
// reaches the client whole in place of its fragments, while the other
// call's fragments stay as sent.
func TestGeminiStreamedArgumentsCorrected(t *testing.T) {
	r := recordings[6]
	bad := bytes.Replace(recorded(t, r.file), []byte(`"stringValue":"San Francisco","willContinue":true`), []byte(`"numberValue":94103`), 1)
	fixed := `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"getWeather","args":{"location":"San Francisco"}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":40,"candidatesTokenCount":8,"totalTokenCount":48,"trafficType":"ON_DEMAND"},"modelVersion":"gemini-3.1-pro-preview"}`
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(bad)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, fixed)
	}))
	t.Cleanup(srv.Close)
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nrecovery:\n  strategy: correction\nupstreams:\n  - name: gemini\n    url: " + srv.URL + "\n" +
		"    api_paths:\n      \"/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent\": gemini\n"
	g := startGate(t, cfg)
	res := gemPost(t, g.URL, r.path, r.body(t), "x-goog-api-key", "k")
	calls := strings.Join(releasedCalls(res.Body), "\n")
	if res.Status != 200 || strings.Contains(calls, "94103") || !strings.Contains(calls, `{"name":"getWeather","args":{"location":"San Francisco"}}`) ||
		!strings.Contains(calls, `"stringValue":"Boston"`) {
		t.Fatalf("status %d, calls released:\n%s\nbody\n%s", res.Status, calls, res.Body)
	}
}
