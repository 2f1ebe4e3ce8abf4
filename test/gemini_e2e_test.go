package test

// End-to-end tests of the Gemini routes: a real toolgate, the official
// google.golang.org/genai SDK as the client, and a scripted upstream that
// refuses, as the Gemini API does, a functionCall replayed without the
// thoughtSignature it was sent with, a function response turn whose parts
// do not match the calls of the model turn before it, and a model turn
// with calls that is not followed by their responses. Helpers are
// prefixed gem.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// gemRequest is one request the scripted upstream received.
type gemRequest struct {
	N      int
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// body decodes the request body.
func (r *gemRequest) body(t *testing.T) gemBody {
	t.Helper()
	var b gemBody
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("upstream request %d: %v", r.N, err)
	}
	return b
}

type gemBody struct {
	Contents   []gemContent    `json:"contents"`
	Tools      json.RawMessage `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig struct {
			Mode string `json:"mode"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
}

type gemContent struct {
	Role  string    `json:"role"`
	Parts []gemPart `json:"parts"`
}

type gemPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	Signature    string `json:"thoughtSignature"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Response struct {
			Error  string `json:"error"`
			Output string `json:"output"`
		} `json:"response"`
	} `json:"functionResponse"`
}

// gemReply is a scripted answer: one GenerateContentResponse per chunk
// (one chunk for a plain answer), framed as the request asked. Status 0
// means 200.
type gemReply struct {
	Status int
	Chunks []string
}

// gemUpstream is a scripted stand-in for the Gemini API.
type gemUpstream struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []*gemRequest
	rejected []string
	// signatures are the thoughtSignatures the upstream has sent.
	signatures map[string]bool
	script     func(n int, r *gemRequest) gemReply
}

func newGemUpstream(t *testing.T, script func(n int, r *gemRequest) gemReply) *gemUpstream {
	t.Helper()
	u := &gemUpstream{t: t, script: script, signatures: map[string]bool{}}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		u.srv.Close()
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, r := range u.rejected {
			t.Errorf("the mock upstream refused a request as the Gemini API would: %s", r)
		}
	})
	return u
}

func (u *gemUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	req := &gemRequest{N: len(u.reqs) + 1, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	u.reqs = append(u.reqs, req)
	msg := gemReject(r.URL.Path, body, u.signatures)
	if msg != "" {
		u.rejected = append(u.rejected, fmt.Sprintf("request %d: %s", req.N, msg))
	}
	u.mu.Unlock()
	if msg != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"code":400,"message":%q,"status":"INVALID_ARGUMENT"}}`, msg)
		return
	}
	reply := u.script(req.N, req)
	u.mu.Lock()
	for _, c := range reply.Chunks {
		for _, sig := range gemSignatures(c) {
			u.signatures[sig] = true
		}
	}
	u.mu.Unlock()
	gemWrite(w, r, reply)
}

// gemWrite frames a reply: SSE for ?alt=sse, a JSON array for a stream
// without it, the one chunk for generateContent.
func gemWrite(w http.ResponseWriter, r *http.Request, reply gemReply) {
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	stream := strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
	switch {
	case stream && r.URL.Query().Get("alt") == "sse" && status == http.StatusOK:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		for _, c := range reply.Chunks {
			_, _ = io.WriteString(w, "data: "+c+"\r\n\r\n")
			w.(http.Flusher).Flush()
		}
	case stream && status == http.StatusOK:
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "["+strings.Join(reply.Chunks, "\n,\r\n")+"]")
	default:
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, strings.Join(reply.Chunks, ""))
	}
}

// gemSignatures returns the thoughtSignatures of an answer.
func gemSignatures(chunk string) []string {
	var a struct {
		Candidates []struct {
			Content gemContent `json:"content"`
		} `json:"candidates"`
	}
	_ = json.Unmarshal([]byte(chunk), &a)
	var out []string
	for _, c := range a.Candidates {
		for _, p := range c.Content.Parts {
			if p.Signature != "" {
				out = append(out, p.Signature)
			}
		}
	}
	return out
}

// gemReject is what the Gemini API refuses: a first functionCall of a
// model turn without a signature the API issued, a model turn with calls
// not followed by a user turn answering each call, by name (and id), in
// order.
func gemReject(path string, body []byte, issued map[string]bool) string {
	if strings.HasSuffix(path, ":countTokens") {
		return ""
	}
	if !strings.HasPrefix(path, "/v1beta/models/") || !(strings.HasSuffix(path, ":generateContent") || strings.HasSuffix(path, ":streamGenerateContent")) {
		return "unexpected path " + path
	}
	var b gemBody
	if err := json.Unmarshal(body, &b); err != nil {
		return "Invalid JSON payload received. " + err.Error()
	}
	for i, c := range b.Contents {
		if c.Role != "model" {
			continue
		}
		var calls []*gemPart
		for j := range c.Parts {
			if c.Parts[j].FunctionCall != nil {
				calls = append(calls, &c.Parts[j])
			}
		}
		if len(calls) == 0 {
			continue
		}
		if !issued[calls[0].Signature] {
			return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. Position %d", i)
		}
		if i+1 >= len(b.Contents) || b.Contents[i+1].Role != "user" {
			return "Please ensure that function call turn comes immediately before a function response turn."
		}
		resp := b.Contents[i+1].Parts
		if len(resp) != len(calls) {
			return "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
		}
		for k, p := range resp {
			fc := calls[k].FunctionCall
			if p.FunctionResponse == nil || p.FunctionResponse.Name != fc.Name || p.FunctionResponse.ID != fc.ID {
				return fmt.Sprintf("function response %d does not answer the call %s", k, fc.Name)
			}
		}
	}
	return ""
}

func (u *gemUpstream) requests() []*gemRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*gemRequest(nil), u.reqs...)
}

// TestGeminiMockRejectsWhatTheAPIRejects checks the mock itself, so that
// the tests below would fail if toolgate's re-queries broke these rules.
func TestGeminiMockRejectsWhatTheAPIRejects(t *testing.T) {
	issued := map[string]bool{"sig1": true}
	user := `{"role":"user","parts":[{"text":"hi"}]}`
	model := `{"role":"model","parts":[{"functionCall":{"name":"a","args":{}},"thoughtSignature":"sig1"},{"functionCall":{"name":"b","args":{}}}]}`
	answer := func(parts ...string) string {
		return `{"role":"user","parts":[` + strings.Join(parts, ",") + `]}`
	}
	fr := func(name string) string { return `{"functionResponse":{"name":"` + name + `","response":{}}}` }
	path := "/v1beta/models/m:generateContent"
	for name, c := range map[string]struct {
		contents string
		ok       bool
	}{
		"valid":              {user + "," + model + "," + answer(fr("a"), fr("b")), true},
		"no signature":       {user + "," + strings.Replace(model, `,"thoughtSignature":"sig1"`, "", 1) + "," + answer(fr("a"), fr("b")), false},
		"other signature":    {user + "," + strings.Replace(model, "sig1", "sig2", 1) + "," + answer(fr("a"), fr("b")), false},
		"too few responses":  {user + "," + model + "," + answer(fr("a")), false},
		"out of order":       {user + "," + model + "," + answer(fr("b"), fr("a")), false},
		"no response turn":   {user + "," + model, false},
		"text after a model": {user + "," + model + "," + user, false},
	} {
		msg := gemReject(path, []byte(`{"contents":[`+c.contents+`]}`), issued)
		if (msg == "") != c.ok {
			t.Errorf("%s: %q", name, msg)
		}
	}
}

// gemGate starts toolgate with u as its only upstream; rest adds
// top-level keys.
func gemGate(t *testing.T, u *gemUpstream, rest string) *gate {
	t.Helper()
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: gemini\n    url: " + u.srv.URL + "\n" + rest + "\n"
	g, _ := startGateWith(t, cfg, app.Options{Sink: &recordingSink{}})
	return g
}

// gemTools are the fixtures' two functions: one with an OpenAPI-style
// schema, one with parametersJsonSchema.
func gemTools() []*genai.Tool {
	return []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
		{
			Name:        "get_current_weather",
			Description: "Get the current weather in a given location",
			Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{
				"location": {Type: genai.TypeString, Description: "The city and state, e.g. San Francisco, CA"},
				"unit":     {Type: genai.TypeString, Format: "enum", Enum: []string{"celsius", "fahrenheit"}},
			}, Required: []string{"location"}},
		},
		{
			Name:        "get_stock_price",
			Description: "Fetch the latest price for a given ticker",
			ParametersJsonSchema: map[string]any{"type": "object", "properties": map[string]any{
				"ticker": map[string]any{"type": "string"}, "exchange": map[string]any{"type": "string"},
			}, "required": []string{"ticker"}, "additionalProperties": false},
		},
	}}}
}

// gemResult is what one SDK call gave the client.
type gemResult struct {
	Resp *genai.GenerateContentResponse
	// Chunks are the streamed responses, in order.
	Chunks []*genai.GenerateContentResponse
	Err    error
	APIErr *genai.APIError
	Header http.Header
	Raw    []byte
}

// gemRecorder keeps the wire bytes of the answer.
type gemRecorder struct {
	mu     sync.Mutex
	raw    bytes.Buffer
	header http.Header
}

func (g *gemRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.header = resp.Header.Clone()
	g.mu.Unlock()
	resp.Body = &teeBody{rc: resp.Body, g: g}
	return resp, nil
}

type teeBody struct {
	rc io.ReadCloser
	g  *gemRecorder
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.g.mu.Lock()
	b.g.raw.Write(p[:n])
	b.g.mu.Unlock()
	return n, err
}

func (b *teeBody) Close() error { return b.rc.Close() }

const gemModel = "gemini-2.5-flash"

// gemCall asks through the Go SDK, plain or streaming (alt=sse, as the
// SDK streams).
func gemCall(t *testing.T, base string, cfg *genai.GenerateContentConfig, stream bool) gemResult {
	t.Helper()
	rec := &gemRecorder{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey: "gem-client-key", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: "v1beta"},
		HTTPClient:  &http.Client{Transport: rec},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		cfg = &genai.GenerateContentConfig{}
	}
	if cfg.Tools == nil {
		cfg.Tools = gemTools()
	}
	contents := genai.Text("What's the weather like in Boston today, and what is Apple (AAPL on NASDAQ) trading at?")
	var r gemResult
	if stream {
		for chunk, err := range client.Models.GenerateContentStream(ctx, gemModel, contents, cfg) {
			if err != nil {
				r.Err = err
				break
			}
			r.Chunks = append(r.Chunks, chunk)
		}
	} else {
		r.Resp, r.Err = client.Models.GenerateContent(ctx, gemModel, contents, cfg)
	}
	var ae genai.APIError
	if errors.As(r.Err, &ae) {
		r.APIErr = &ae
	}
	rec.mu.Lock()
	r.Header, r.Raw = rec.header, append([]byte(nil), rec.raw.Bytes()...)
	rec.mu.Unlock()
	return r
}

// calls are the function calls the client got, as name and arguments.
func (r gemResult) calls(t *testing.T) []string {
	t.Helper()
	var out []string
	add := func(resp *genai.GenerateContentResponse) {
		for _, fc := range resp.FunctionCalls() {
			b, _ := json.Marshal(fc.Args)
			out = append(out, fc.Name+" "+string(b))
		}
	}
	if r.Resp != nil {
		add(r.Resp)
	}
	for _, c := range r.Chunks {
		add(c)
	}
	return out
}

// text is the visible text the client got.
func (r gemResult) text() string {
	var b strings.Builder
	add := func(resp *genai.GenerateContentResponse) {
		for _, c := range resp.Candidates {
			if c.Content == nil {
				continue
			}
			for _, p := range c.Content.Parts {
				if !p.Thought {
					b.WriteString(p.Text)
				}
			}
		}
	}
	if r.Resp != nil {
		add(r.Resp)
	}
	for _, c := range r.Chunks {
		add(c)
	}
	return b.String()
}

func gemModes(t *testing.T, f func(t *testing.T, stream bool)) {
	t.Run("plain", func(t *testing.T) { f(t, false) })
	t.Run("stream", func(t *testing.T) { f(t, true) })
}

// gemAnswer is a GenerateContentResponse with one candidate of the given
// parts, shaped like the recorded gemini-2.5-flash answers: a chunk that
// does not end the candidate has no finishReason, and one that ends it
// with calls carries the finishMessage the API sends with them.
func gemAnswer(finish string, parts ...string) string {
	end := ""
	if finish != "" {
		end = `,"finishReason":"` + finish + `","index":0`
		if strings.Contains(strings.Join(parts, ""), `"functionCall"`) {
			end += `,"finishMessage":"Model generated function call(s)."`
		}
	} else {
		end = `,"index":0`
	}
	return `{"candidates":[{"content":{"parts":[` + strings.Join(parts, ",") + `],"role":"model"}` + end + `}],` +
		`"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":20,"totalTokenCount":180,"thoughtsTokenCount":40},"modelVersion":"gemini-2.5-flash","responseId":"resp_1"}`
}

func gemText(s string) string { return `{"text":` + mustJSON(s) + `}` }

func gemThought(s string) string { return `{"text":` + mustJSON(s) + `,"thought":true}` }

// gemFC is a functionCall part; sig, when set, is its thoughtSignature.
func gemFC(name, args, sig string) string {
	p := `{"functionCall":{"name":"` + name + `","args":` + args + `}`
	if sig != "" {
		p += `,"thoughtSignature":"` + sig + `"`
	}
	return p + "}"
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// gemDecision is the model's text answer to the recovery prompt.
func gemDecision(decision, tool, args string, confidence float64) string {
	if decision == "substitute" {
		return fmt.Sprintf(`{"decision":"substitute","corrected_tool_call":{"tool_name":%q,"arguments":%s},"escalation":null,"confidence":%g}`, tool, args, confidence)
	}
	return fmt.Sprintf(`{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":"no tool can query the database","original_intent":"count users","missing_capability":"database access"},"confidence":%g}`, confidence)
}

// gemRequery checks a re-query: a plain generateContent call without
// alt, the client's turn first, the model turn replayed byte for byte, and
// returns the function responses of the last user turn.
func gemRequery(t *testing.T, r *gemRequest, modelTurn string) gemBody {
	t.Helper()
	if !strings.HasSuffix(r.Path, ":generateContent") || strings.Contains(r.Query, "alt=") {
		t.Errorf("re-query %d went to %s?%s", r.N, r.Path, r.Query)
	}
	var raw struct {
		Contents []json.RawMessage `json:"contents"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Contents) < 3 {
		t.Fatalf("re-query %d contents: %s", r.N, r.Body)
	}
	if modelTurn != "" && string(raw.Contents[len(raw.Contents)-2]) != modelTurn {
		t.Errorf("model turn replayed as\n%s\nwant\n%s", raw.Contents[len(raw.Contents)-2], modelTurn)
	}
	return r.body(t)
}

// gemContentOf is the content object of a one-candidate answer as the
// upstream wrote it.
func gemContentOf(t *testing.T, answer string) string {
	t.Helper()
	var a struct {
		Candidates []struct {
			Content json.RawMessage `json:"content"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(answer), &a); err != nil {
		t.Fatal(err)
	}
	return string(a.Candidates[0].Content)
}

// gemStreamTurn is the content toolgate rebuilds from a streamed answer of
// the given parts: every part as sent, in order.
func gemStreamTurn(parts ...string) string {
	return `{"parts":[` + strings.Join(parts, ",") + `],"role":"model"}`
}

const weatherOK = `{"location":"Boston, MA","unit":"fahrenheit"}`

func TestGeminiValidPassesUnchanged(t *testing.T) {
	gemModes(t, func(t *testing.T, stream bool) {
		chunks := []string{
			gemAnswer("", gemThought("The user wants two lookups."), gemText("Checking both.")),
			gemAnswer("STOP", gemFC("get_current_weather", weatherOK, "c2lnLXdlYXRoZXI="), gemFC("get_stock_price", `{"ticker":"AAPL","exchange":"NASDAQ"}`, "")),
		}
		up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
			if stream {
				return gemReply{Chunks: chunks}
			}
			return gemReply{Chunks: chunks[1:]}
		})
		g := gemGate(t, up, "")
		r := gemCall(t, g.URL, nil, stream)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		want := []string{"get_current_weather " + weatherOK, `get_stock_price {"exchange":"NASDAQ","ticker":"AAPL"}`}
		if fmt.Sprint(r.calls(t)) != fmt.Sprint(want) {
			t.Errorf("calls %v", r.calls(t))
		}
		wire := chunks[1]
		if stream {
			wire = "data: " + chunks[0] + "\r\n\r\ndata: " + chunks[1] + "\r\n\r\n"
		}
		if string(r.Raw) != wire {
			t.Errorf("the answer was not passed byte for byte:\n%s\nwant\n%s", r.Raw, wire)
		}
		if !stream && (r.Header.Get("X-Toolgate-Outcome") != "pass" || !strings.Contains(r.Header.Get("X-Toolgate-Usage"), `"input_tokens":120,"output_tokens":60`)) {
			t.Errorf("headers %v", r.Header)
		}
		if len(up.requests()) != 1 {
			t.Errorf("%d upstream calls", len(up.requests()))
		}
		if up.requests()[0].Header.Get("X-Goog-Api-Key") != "gem-client-key" {
			t.Error("the client's key was not forwarded")
		}
	})
}

func TestGeminiHallucinationSubstituted(t *testing.T) {
	gemModes(t, func(t *testing.T, stream bool) {
		parts := []string{gemText("I'll look up both."), gemFC("weather_lookup", `{"city":"Boston"}`, "c2lnLWJhZA=="), gemFC("get_stock_price", `{"ticker":"AAPL"}`, "")}
		bad := gemAnswer("STOP", parts...)
		up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
			if n == 1 {
				return gemReply{Chunks: []string{bad}}
			}
			turn := gemContentOf(t, bad)
			if stream {
				turn = gemStreamTurn(parts...)
			}
			b := gemRequery(t, r, turn)
			if b.ToolConfig == nil || b.ToolConfig.FunctionCallingConfig.Mode != "NONE" {
				t.Errorf("decision re-query toolConfig %+v", b.ToolConfig)
			}
			resp := b.Contents[len(b.Contents)-1].Parts
			if len(resp) != 2 || !strings.Contains(resp[0].FunctionResponse.Response.Error, "weather_lookup") ||
				!strings.Contains(resp[1].FunctionResponse.Response.Output, "Not executed") {
				t.Errorf("function responses %s", r.Body)
			}
			return gemReply{Chunks: []string{gemAnswer("STOP", gemText(gemDecision("substitute", "get_current_weather", `{"location":"Boston, MA"}`, 0.93)))}}
		})
		g := gemGate(t, up, "")
		r := gemCall(t, g.URL, nil, stream)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		want := []string{`get_current_weather {"location":"Boston, MA"}`, `get_stock_price {"ticker":"AAPL"}`}
		if fmt.Sprint(r.calls(t)) != fmt.Sprint(want) {
			t.Errorf("calls %v", r.calls(t))
		}
		if r.text() != "I'll look up both." || strings.Contains(string(r.Raw), "decision") {
			t.Errorf("text %q raw %s", r.text(), r.Raw)
		}
		if !stream && (r.Header.Get("X-Toolgate-Outcome") != "substituted" || r.Header.Get("X-Toolgate-Upstream-Calls") != "2") {
			t.Errorf("headers %v", r.Header)
		}
		if !bytes.Contains(r.Raw, []byte(`"thoughtSignature":"c2lnLWJhZA=="`)) {
			t.Errorf("the repaired call lost its signature: %s", r.Raw)
		}
	})
}

func TestGeminiCorrected(t *testing.T) {
	gemModes(t, func(t *testing.T, stream bool) {
		bad := gemAnswer("STOP", gemFC("weather_lookup", `{"city":"Boston"}`, "c2ln"))
		up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
			if n == 1 {
				return gemReply{Chunks: []string{bad}}
			}
			b := gemRequery(t, r, "")
			if b.ToolConfig != nil && b.ToolConfig.FunctionCallingConfig.Mode == "NONE" {
				t.Error("a correction re-query forbade calls")
			}
			return gemReply{Chunks: []string{gemAnswer("STOP", gemFC("get_current_weather", `{"location":"Boston, MA"}`, "c2lnMg=="))}}
		})
		g := gemGate(t, up, "recovery:\n  strategy: correction")
		r := gemCall(t, g.URL, nil, stream)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if fmt.Sprint(r.calls(t)) != fmt.Sprint([]string{`get_current_weather {"location":"Boston, MA"}`}) {
			t.Errorf("calls %v", r.calls(t))
		}
		if !stream && r.Header.Get("X-Toolgate-Outcome") != "corrected" {
			t.Errorf("outcome %q", r.Header.Get("X-Toolgate-Outcome"))
		}
	})
}

// A bad argument is reprompted; its valid sibling is held, answered "not
// executed", and the client gets both calls.
func TestGeminiRepromptedParallel(t *testing.T) {
	gemModes(t, func(t *testing.T, stream bool) {
		bad := gemAnswer("STOP", gemFC("get_current_weather", `{"location":"Boston, MA","unit":"kelvin"}`, "c2lnLWs="), gemFC("get_stock_price", `{"ticker":"AAPL"}`, ""))
		up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
			if n == 1 {
				return gemReply{Chunks: []string{bad}}
			}
			b := gemRequery(t, r, "")
			if b.ToolConfig != nil && b.ToolConfig.FunctionCallingConfig.Mode == "NONE" {
				t.Error("a reprompt forbade calls")
			}
			resp := b.Contents[len(b.Contents)-1].Parts
			if len(resp) != 2 || !strings.Contains(resp[0].FunctionResponse.Response.Error, "unit") || resp[1].FunctionResponse.Response.Error != "" {
				t.Errorf("function responses %s", r.Body)
			}
			return gemReply{Chunks: []string{gemAnswer("STOP", gemFC("get_current_weather", `{"location":"Boston, MA","unit":"fahrenheit"}`, "c2lnLWY="))}}
		})
		g := gemGate(t, up, "")
		r := gemCall(t, g.URL, nil, stream)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		want := []string{"get_current_weather " + weatherOK, `get_stock_price {"ticker":"AAPL"}`}
		if fmt.Sprint(r.calls(t)) != fmt.Sprint(want) {
			t.Errorf("calls %v", r.calls(t))
		}
		if !stream && r.Header.Get("X-Toolgate-Outcome") != "reprompted" {
			t.Errorf("outcome %q", r.Header.Get("X-Toolgate-Outcome"))
		}
	})
}

// gemDetail is the escalation as the Go SDK hands it to the caller.
func gemDetail(t *testing.T, e *genai.APIError) map[string]any {
	t.Helper()
	if e == nil || len(e.Details) == 0 {
		t.Fatalf("no escalation detail in %+v", e)
	}
	return e.Details[0]
}

func TestGeminiEscalatedErrorMode(t *testing.T) {
	gemModes(t, func(t *testing.T, stream bool) {
		up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
			if n == 1 {
				return gemReply{Chunks: []string{gemAnswer("STOP", gemText("Let me query that."), gemFC("database_query", `{"sql":"SELECT 1"}`, "c2lnLWRi"))}}
			}
			gemRequery(t, r, "")
			return gemReply{Chunks: []string{gemAnswer("STOP", gemText(gemDecision("escalate", "", "", 0.2)))}}
		})
		g := gemGate(t, up, "")
		r := gemCall(t, g.URL, nil, stream)
		recs := g.Sink.records()
		if r.APIErr == nil || len(recs) != 1 {
			t.Fatalf("err %v, %d sink records", r.Err, len(recs))
		}
		d := gemDetail(t, r.APIErr)
		if r.APIErr.Code != 422 || r.APIErr.Status != "FAILED_PRECONDITION" || d["@type"] != "type.googleapis.com/toolgate.ToolCallEscalation" ||
			d["id"] != recs[0].Escalation.ID || !strings.Contains(r.APIErr.Message, "[toolgate:"+recs[0].Escalation.ID+"]") {
			t.Errorf("APIError %+v", r.APIErr)
		}
		if codes, _ := d["codes"].([]any); len(codes) == 0 || codes[0] != "unknown_tool" {
			t.Errorf("codes %v", d["codes"])
		}
		if !stream && r.Header.Get("X-Toolgate-Escalation-Id") != recs[0].Escalation.ID {
			t.Errorf("headers %v", r.Header)
		}
		if recs[0].API != "gemini" || recs[0].Model != gemModel {
			t.Errorf("sink record %+v", recs[0])
		}
	})
}

func TestGeminiEscalatedMessageMode(t *testing.T) {
	gemModes(t, func(t *testing.T, stream bool) {
		up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
			if n == 1 {
				return gemReply{Chunks: []string{gemAnswer("STOP", gemFC("database_query", `{"sql":"SELECT 1"}`, "c2lnLWRi"))}}
			}
			return gemReply{Chunks: []string{gemAnswer("STOP", gemText(gemDecision("escalate", "", "", 0.2)))}}
		})
		g := gemGate(t, up, "escalation:\n  mode: message")
		r := gemCall(t, g.URL, nil, stream)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		recs := g.Sink.records()
		if len(recs) != 1 || len(r.calls(t)) != 0 || !strings.HasSuffix(r.text(), "[toolgate:"+recs[0].Escalation.ID+"]") {
			t.Fatalf("text %q calls %v", r.text(), r.calls(t))
		}
		var last *genai.GenerateContentResponse
		if stream {
			last = r.Chunks[len(r.Chunks)-1]
		} else {
			last = r.Resp
		}
		if last.Candidates[0].FinishReason != genai.FinishReasonStop {
			t.Errorf("finish %q", last.Candidates[0].FinishReason)
		}
		if !bytes.Contains(r.Raw, []byte(`"toolgate_escalation":{"id":"`+recs[0].Escalation.ID+`"`)) {
			t.Errorf("no toolgate_escalation in %s", r.Raw)
		}
		if r.Header.Get("X-Toolgate-Escalation-Id") != recs[0].Escalation.ID {
			t.Errorf("escalation id header %q", r.Header.Get("X-Toolgate-Escalation-Id"))
		}
	})
}

// A call cut off by maxOutputTokens escalates as truncated without a
// re-query.
func TestGeminiTruncated(t *testing.T) {
	gemModes(t, func(t *testing.T, stream bool) {
		up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
			return gemReply{Chunks: []string{gemAnswer("MAX_TOKENS", gemFC("get_current_weather", `{"location":"Bos"}`, "c2lnLXQ="))}}
		})
		g := gemGate(t, up, "")
		r := gemCall(t, g.URL, nil, stream)
		if r.APIErr == nil || r.APIErr.Code != 422 {
			t.Fatalf("err %v", r.Err)
		}
		if codes, _ := gemDetail(t, r.APIErr)["codes"].([]any); len(codes) == 0 || codes[0] != "truncated" {
			t.Errorf("codes %v", codes)
		}
		if len(up.requests()) != 1 {
			t.Errorf("%d upstream calls", len(up.requests()))
		}
	})
}

// With abstain on, mode AUTO gets the exit declared; the model taking it
// becomes text for the user.
func TestGeminiAbstain(t *testing.T) {
	gemModes(t, func(t *testing.T, stream bool) {
		up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
			if !bytes.Contains(r.Body, []byte(`"name":"toolgate_no_suitable_tool"`)) {
				t.Errorf("abstain exit not declared: %s", r.Body)
			}
			return gemReply{Chunks: []string{gemAnswer("STOP", gemFC("toolgate_no_suitable_tool", `{"reason":"No tool books flights."}`, "c2lnLWE="))}}
		})
		g := gemGate(t, up, "abstain:\n  enabled: true")
		r := gemCall(t, g.URL, &genai.GenerateContentConfig{ToolConfig: &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAuto}}}, stream)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if len(r.calls(t)) != 0 || !strings.Contains(r.text(), "No tool books flights.") {
			t.Errorf("calls %v text %q", r.calls(t), r.text())
		}
		if !stream && r.Header.Get("X-Toolgate-Outcome") != "abstained" {
			t.Errorf("outcome %q", r.Header.Get("X-Toolgate-Outcome"))
		}
	})
}
