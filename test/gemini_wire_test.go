package test

// Wire-level tests of the Gemini routes with plain HTTP, where the SDKs
// hide what matters: the JSON-array stream, exact bytes, keys in the query
// string, routes, metrics and logs.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/genai"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// gemRequestBody is the fixtures' request as JSON, with the given
// functionCallingConfig mode.
func gemRequestBody(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "proxy", "gemini", "testdata", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gemRaw is an upstream that answers every request with body as is, with
// the content type a real Gemini answer of that framing has.
func gemRaw(t *testing.T, body string) *gemUpstream {
	t.Helper()
	u := newGemUpstream(t, nil)
	u.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.reqs = append(u.reqs, &gemRequest{N: len(u.reqs) + 1, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone()})
		u.mu.Unlock()
		ct := "application/json; charset=UTF-8"
		if strings.HasPrefix(body, "data:") {
			ct = "text/event-stream"
		}
		w.Header().Set("Content-Type", ct)
		_, _ = io.WriteString(w, body)
	})
	return u
}

func gemPost(t *testing.T, base, path string, body []byte, header ...string) fuResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := fuClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(resp.Body)
	return fuResult{Status: resp.StatusCode, Header: resp.Header, Body: b, Err: rerr}
}

// The JSON-array stream: text elements flow, the element with a call is
// held, and an escalation after text went out is an element saying it as
// text, then a last error element that closes the array.
func TestGeminiJSONArrayStreamEscalates(t *testing.T) {
	up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
		if n == 1 {
			if strings.Contains(r.Query, "alt") {
				t.Errorf("query %q", r.Query)
			}
			return gemReply{Chunks: []string{gemAnswer("", gemText("Let me check.")), gemAnswer("STOP", gemFC("database_query", `{"sql":"x"}`, "c2ln"))}}
		}
		gemRequery(t, r, gemStreamTurn(gemText("Let me check."), gemFC("database_query", `{"sql":"x"}`, "c2ln")))
		return gemReply{Chunks: []string{gemAnswer("STOP", gemText(gemDecision("escalate", "", "", 0.1)))}}
	})
	g := gemGate(t, up, "")
	r := gemPost(t, g.URL, "/v1beta/models/m:streamGenerateContent", gemRequestBody(t), "x-goog-api-key", "k")
	var elems []map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &elems); err != nil || r.Status != 200 {
		t.Fatalf("status %d, not one JSON array (%v):\n%s", r.Status, err, r.Body)
	}
	if len(elems) != 3 || !bytes.Contains(elems[0]["candidates"], []byte("Let me check.")) || elems[2]["error"] == nil {
		t.Fatalf("elements %s", r.Body)
	}
	recs := g.Sink.records()
	if len(recs) != 1 || !bytes.Contains(elems[1]["candidates"], []byte("[toolgate:"+recs[0].Escalation.ID+"]")) {
		t.Errorf("the text element %s does not name the escalation", elems[1]["candidates"])
	}
	var e struct {
		Code    int              `json:"code"`
		Status  string           `json:"status"`
		Details []map[string]any `json:"details"`
	}
	_ = json.Unmarshal(elems[2]["error"], &e)
	if e.Code != 422 || e.Status != "FAILED_PRECONDITION" || len(recs) != 1 || e.Details[0]["id"] != recs[0].Escalation.ID {
		t.Errorf("error element %s", elems[2]["error"])
	}
	if bytes.Contains(elems[0]["candidates"], []byte("database_query")) {
		t.Error("the bad call reached the client")
	}
}

// In an SSE stream whose text already went out, the Go SDK raises the
// escalation event as a genai.APIError with the escalation in Details.
func TestGeminiSSEErrorEventReachesTheGoSDK(t *testing.T) {
	up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
		if n == 1 {
			return gemReply{Chunks: []string{gemAnswer("", gemText("Let me check.")), gemAnswer("STOP", gemFC("database_query", `{"sql":"x"}`, "c2ln"))}}
		}
		return gemReply{Chunks: []string{gemAnswer("STOP", gemText(gemDecision("escalate", "", "", 0.1)))}}
	})
	g := gemGate(t, up, "")
	r := gemCall(t, g.URL, nil, true)
	recs := g.Sink.records()
	if len(recs) != 1 || r.text() != "Let me check.\n\nThis step needs a person: no tool can query the database. [toolgate:"+recs[0].Escalation.ID+"]" || r.APIErr == nil {
		t.Fatalf("text %q err %v", r.text(), r.Err)
	}
	if r.APIErr.Code != 422 || gemDetail(t, r.APIErr)["id"] != recs[0].Escalation.ID {
		t.Errorf("APIError %+v", r.APIErr)
	}
}

// toolgate's own errors use Google's envelope, which the Go SDK reads into
// genai.APIError's fields.
func TestGeminiOwnErrorsInGoogleEnvelope(t *testing.T) {
	up := newGemUpstream(t, func(int, *gemRequest) gemReply { return gemReply{} })
	g := gemGate(t, up, "limits:\n  max_request_bytes: 400")
	up.srv.Close()
	r := gemCall(t, g.URL, &genai.GenerateContentConfig{Tools: []*genai.Tool{}}, false)
	if r.APIErr == nil || r.APIErr.Code != 502 || r.APIErr.Status != "UNAVAILABLE" || r.APIErr.Details[0]["reason"] != "upstream_error" {
		t.Errorf("upstream down: %+v", r.Err)
	}
	big := gemCall(t, g.URL, nil, false)
	if big.APIErr == nil || big.APIErr.Code != 413 || big.APIErr.Status != "INVALID_ARGUMENT" {
		t.Errorf("too large: %+v", big.Err)
	}
}

// MALFORMED_FUNCTION_CALL carries no call: the candidate passes as sent
// (the SDK reports the finish reason, the client may retry), and the
// operator sees it in toolgate_unvalidated_total and the request's log
// line.
func TestGeminiMalformedFunctionCall(t *testing.T) {
	answer := `{"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"MALFORMED_FUNCTION_CALL","finishMessage":"Malformed function call: print(default_api.get_current_weather(location='Boston'))","index":0}],"usageMetadata":{"promptTokenCount":90,"totalTokenCount":90},"modelVersion":"gemini-2.5-flash"}`
	core, logs := observer.New(zapcore.InfoLevel)
	up := gemRaw(t, answer)
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: gemini\n    url: " + up.srv.URL + "\n"
	g, _ := startGateWith(t, cfg, app.Options{Logger: zap.New(core), Sink: &recordingSink{}})
	r := gemPost(t, g.URL, "/v1beta/models/gemini-2.5-flash:generateContent", gemRequestBody(t), "x-goog-api-key", "k")
	if r.Status != 200 || string(r.Body) != answer || r.Header.Get("X-Toolgate-Outcome") != "pass" {
		t.Fatalf("status %d outcome %q body %s", r.Status, r.Header.Get("X-Toolgate-Outcome"), r.Body)
	}
	if n := testutil.ToFloat64(g.App.Metrics.Unvalidated.WithLabelValues("gemini_malformed_function_call")); n != 1 {
		t.Errorf("unvalidated{gemini_malformed_function_call} = %v", n)
	}
	lines := logs.FilterMessage("request").All()
	if len(lines) != 1 || !strings.Contains(fmt.Sprint(lines[0].ContextMap()["findings"]), "gemini_malformed_function_call") {
		t.Errorf("log lines %+v", lines)
	}
}

// The /v1/ routes and Vertex AI paths mapped by api_paths are validated;
// other Gemini paths pass through.
func TestGeminiRoutes(t *testing.T) {
	up := gemRaw(t, string(recorded(t, "generate_call_int_enums_gemini-2.0-flash.json")))
	req := recorded(t, "generate_call_int_enums_gemini-2.0-flash.request.json")
	vertex := "/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent"
	g := gemGate(t, up, "    api_paths: {\""+vertex+"\": gemini}")
	for _, path := range []string{
		"/v1/models/gemini-2.0-flash:generateContent",
		"/v1beta/models/gemini-2.0-flash:generateContent?key=k",
		"/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent",
		"/v1beta/tunedModels/my-tuned-model:generateContent",
	} {
		r := gemPost(t, g.URL, path, req)
		if r.Status != 200 || r.Header.Get("X-Toolgate-Outcome") != "pass" {
			t.Errorf("%s: status %d outcome %q", path, r.Status, r.Header.Get("X-Toolgate-Outcome"))
		}
	}
	// A spelling of a Gemini route the path guard refuses is refused in
	// Google's envelope and never forwarded.
	n := len(up.requests())
	ref := gemPost(t, g.URL, "/v1beta/models/gemini-2.0-flash%3AgenerateContent", req)
	var env struct {
		Error struct {
			Code   int    `json:"code"`
			Status string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal(ref.Body, &env); err != nil || ref.Status != 400 || env.Error.Code != 400 || env.Error.Status != "INVALID_ARGUMENT" || len(up.requests()) != n {
		t.Errorf("escaped colon: status %d body %s", ref.Status, ref.Body)
	}
	r := gemPost(t, g.URL, "/v1beta/models/gemini-2.0-flash:countTokens", []byte(`{}`))
	if r.Status != 200 || r.Header.Get("X-Toolgate-Outcome") != "" {
		t.Errorf("countTokens: status %d outcome %q", r.Status, r.Header.Get("X-Toolgate-Outcome"))
	}
	paths := []string{}
	for _, q := range up.requests() {
		paths = append(paths, q.Path)
	}
	if paths[2] != "/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent" {
		t.Errorf("forwarded paths %v", paths)
	}
}

// A key in the query string or the x-goog-api-key header reaches the
// upstream, re-queries included, and never a log line, a metric or a sink.
func TestGeminiKeysNeverLogged(t *testing.T) {
	const qkey, hkey = "AIzaQUERYKEY0123456789", "AIzaHEADERKEY0123456789"
	up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
		if n%2 == 1 {
			return gemReply{Chunks: []string{gemAnswer("STOP", gemFC("database_query", `{"sql":"x"}`, "c2ln"))}}
		}
		return gemReply{Chunks: []string{gemAnswer("STOP", gemText(gemDecision("escalate", "", "", 0.1)))}}
	})
	core, logs := observer.New(zapcore.DebugLevel)
	sink := &recordingSink{}
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: gemini\n    url: " + up.srv.URL + "\n"
	g, _ := startGateWith(t, cfg, app.Options{Logger: zap.New(core), Sink: sink})
	gemPost(t, g.URL, "/v1beta/models/m:generateContent?key="+qkey, gemRequestBody(t))
	gemPost(t, g.URL, "/v1beta/models/m:streamGenerateContent?alt=sse&key="+qkey, gemRequestBody(t))
	gemPost(t, g.URL, "/v1beta/models/m:generateContent", gemRequestBody(t), "x-goog-api-key", hkey)
	// A pass-through path and an upstream that is gone log too.
	gemPost(t, g.URL, "/v1beta/models/m:countTokens?key="+qkey, []byte(`{}`))
	up.srv.Close()
	gemPost(t, g.URL, "/v1beta/models/m:generateContent?key="+qkey, gemRequestBody(t))
	gemPost(t, g.URL, "/v1beta/models/m:countTokens?key="+qkey, []byte(`{}`))

	reqs := up.requests()
	if len(reqs) < 6 {
		t.Fatalf("%d upstream requests", len(reqs))
	}
	for _, r := range reqs[:4] {
		if !strings.Contains(r.Query, "key="+qkey) {
			t.Errorf("request %d %s?%s lost the query key", r.N, r.Path, r.Query)
		}
	}
	if reqs[5].Header.Get("X-Goog-Api-Key") != hkey {
		t.Error("the header key was not forwarded on the re-query")
	}
	var all bytes.Buffer
	for _, e := range logs.All() {
		fmt.Fprintf(&all, "%s %v\n", e.Message, e.ContextMap())
	}
	recs, _ := json.Marshal(sink.records())
	all.Write(recs)
	resp, err := http.Get("http://" + g.App.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	all.Write(metrics)
	for _, k := range []string{qkey, hkey} {
		if bytes.Contains(all.Bytes(), []byte(k)) {
			t.Errorf("a key reached the logs, sinks or metrics:\n%s", all.String())
		}
	}
	if logs.Len() < 6 || !bytes.Contains(metrics, []byte(`api="gemini"`)) {
		t.Errorf("%d log lines; metrics without api=gemini", logs.Len())
	}
}

// api_key_env puts toolgate's key in x-goog-api-key: when the client sent
// none (if_missing), and instead of the client's header or key= (replace).
func TestGeminiAPIKeyEnv(t *testing.T) {
	t.Setenv("GEM_TEST_KEY", "toolgate-key")
	for _, c := range []struct {
		mode, path, header string
		wantHeader, wantQ  string
	}{
		{"if_missing", "/v1beta/models/m:generateContent", "", "toolgate-key", ""},
		{"if_missing", "/v1beta/models/m:generateContent?key=client", "", "", "key=client"},
		{"if_missing", "/v1beta/models/m:generateContent", "client", "client", ""},
		{"replace", "/v1beta/models/m:generateContent?alt=json&key=client", "client", "toolgate-key", "alt=json"},
	} {
		up := gemRaw(t, string(recorded(t, "generate_call_int_enums_gemini-2.0-flash.json")))
		g := gemGate(t, up, "    api_key_env: GEM_TEST_KEY\n    api_key_mode: "+c.mode)
		var h []string
		if c.header != "" {
			h = []string{"x-goog-api-key", c.header}
		}
		if r := gemPost(t, g.URL, c.path, recorded(t, "generate_call_int_enums_gemini-2.0-flash.request.json"), h...); r.Status != 200 {
			t.Fatalf("status %d %s", r.Status, r.Body)
		}
		got := up.requests()[0]
		if got.Header.Get("X-Goog-Api-Key") != c.wantHeader || got.Query != c.wantQ || got.Header.Get("Authorization") != "" {
			t.Errorf("%s %s: header %q query %q", c.mode, c.path, got.Header.Get("X-Goog-Api-Key"), got.Query)
		}
	}
}

// Usage of every upstream call reaches X-Toolgate-Usage and the token
// metric under api="gemini", thoughts counted as output.
func TestGeminiUsageAndMetrics(t *testing.T) {
	up := newGemUpstream(t, func(n int, r *gemRequest) gemReply {
		if n == 1 {
			return gemReply{Chunks: []string{gemAnswer("STOP", gemFC("get_current_weather", `{"location":"Boston, MA","unit":"kelvin"}`, "c2ln"))}}
		}
		return gemReply{Chunks: []string{gemAnswer("STOP", gemFC("get_current_weather", weatherOK, "c2lnMg=="))}}
	})
	g := gemGate(t, up, "")
	r := gemPost(t, g.URL, "/v1beta/models/m:generateContent", gemRequestBody(t), "x-goog-api-key", "k")
	if r.Header.Get("X-Toolgate-Outcome") != "reprompted" {
		t.Fatalf("outcome %q: %s", r.Header.Get("X-Toolgate-Outcome"), r.Body)
	}
	var u struct {
		Input  int64 `json:"input_tokens"`
		Output int64 `json:"output_tokens"`
		Calls  []struct {
			Kind string `json:"kind"`
		} `json:"calls"`
	}
	if err := json.Unmarshal([]byte(r.Header.Get("X-Toolgate-Usage")), &u); err != nil || u.Input != 240 || u.Output != 120 || len(u.Calls) != 2 {
		t.Errorf("usage %s", r.Header.Get("X-Toolgate-Usage"))
	}
	m := g.App.Metrics
	if in := testutil.ToFloat64(m.UpstreamTokens.WithLabelValues("gemini", "reprompt", "input")); in != 120 {
		t.Errorf("reprompt input tokens %v", in)
	}
	if out := testutil.ToFloat64(m.UpstreamTokens.WithLabelValues("gemini", "original", "output")); out != 60 {
		t.Errorf("original output tokens %v", out)
	}
	if n := testutil.ToFloat64(m.Requests.WithLabelValues("gemini", "reprompted")); n != 1 {
		t.Errorf("requests_total{api=gemini,outcome=reprompted} = %v", n)
	}
}

// While a call is held, the keepalive is an empty event in the upstream's
// line breaks, which the Go SDK skips; an SSE comment would fail its
// stream. The upstream finishes only
// once the client has read a keepalive.
func TestGeminiKeepaliveThroughTheGoSDK(t *testing.T) {
	rec := &gemRecorder{}
	release := make(chan struct{})
	up := newGemUpstream(t, nil)
	up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		// Text first: keepalives only go out once the headers have.
		_, _ = io.WriteString(w, "data: "+gemAnswer("", gemText("Checking."))+"\r\n\r\n")
		_, _ = io.WriteString(w, "data: "+gemAnswer("", gemFC("get_current_weather", weatherOK, "c2ln"))+"\r\n\r\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: "+gemAnswer("STOP", gemText(""))+"\r\n\r\n")
	})
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: gemini\n    url: " + up.srv.URL + "\n"
	g, _ := startGateWith(t, cfg, app.Options{Sink: &recordingSink{}, Keepalive: time.Millisecond})
	go func() {
		defer close(release)
		for range 1000 {
			rec.mu.Lock()
			seen := bytes.Contains(rec.raw.Bytes(), []byte("\r\n\r\n\r\n\r\n"))
			rec.mu.Unlock()
			if seen {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: g.URL, APIVersion: "v1beta"}, HTTPClient: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	for chunk, err := range client.Models.GenerateContentStream(ctx, gemModel, genai.Text("weather?"), &genai.GenerateContentConfig{Tools: gemTools()}) {
		if err != nil {
			t.Fatalf("the SDK failed on the held stream: %v\n%q", err, rec.raw.String())
		}
		calls += len(chunk.FunctionCalls())
	}
	if !bytes.Contains(rec.raw.Bytes(), []byte("\r\n\r\n\r\n\r\ndata: ")) || bytes.Contains(rec.raw.Bytes(), []byte(": keepalive")) || calls != 1 {
		t.Errorf("calls %d; no empty-event keepalive before the held events in %q", calls, rec.raw.String())
	}
}

// Under a path_prefix, the Go SDK's base URL with a path reaches the
// validated routes.
func TestGeminiUnderAPrefix(t *testing.T) {
	up := newGemUpstream(t, func(int, *gemRequest) gemReply {
		return gemReply{Chunks: []string{gemAnswer("STOP", gemFC("get_current_weather", weatherOK, "c2ln"))}}
	})
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: other\n    url: http://127.0.0.1:9\n" +
		"  - name: gemini\n    url: " + up.srv.URL + "\n    path_prefix: /gemini\n"
	g, _ := startGateWith(t, cfg, app.Options{Sink: &recordingSink{}})
	for _, stream := range []bool{false, true} {
		r := gemCall(t, g.URL+"/gemini", nil, stream)
		if r.Err != nil || len(r.calls(t)) != 1 {
			t.Fatalf("stream %v: %v %v", stream, r.Err, r.calls(t))
		}
	}
	if p := up.requests()[1].Path; p != "/v1beta/models/"+gemModel+":streamGenerateContent" {
		t.Errorf("forwarded to %s", p)
	}
}

// An argument named like a protocol key ("Type", "Name") is the
// function's business, judged by its schema: the answer is not refused as
// a folded key, plain or streamed.
func TestGeminiArgumentNamedLikeAProtocolKey(t *testing.T) {
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"file it"}]}],"tools":[{"functionDeclarations":[{"name":"file_ticket","parameters":{"type":"OBJECT","properties":{"Type":{"type":"STRING"},"Name":{"type":"STRING"}},"required":["Type"]}}]}]}`)
	answer := gemAnswer("STOP", gemFC("file_ticket", `{"Type":"bug","Name":"crash"}`, ""))
	for path, want := range map[string]string{
		"/v1beta/models/m:generateContent":               answer,
		"/v1beta/models/m:streamGenerateContent?alt=sse": "data: " + answer + "\r\n\r\n",
	} {
		g := gemGate(t, gemRaw(t, want), "")
		r := gemPost(t, g.URL, path, body, "x-goog-api-key", "k")
		if r.Status != 200 || string(r.Body) != want {
			t.Errorf("%s: status %d body %s", path, r.Status, r.Body)
		}
	}
	// A folded protocol key is still refused.
	g := gemGate(t, gemRaw(t, strings.Replace(answer, `"functionCall"`, `"FunctionCall"`, 1)), "")
	if r := gemPost(t, g.URL, "/v1beta/models/m:generateContent", body); r.Status != 502 {
		t.Errorf("a folded functionCall key: status %d", r.Status)
	}
}

// The inbound-auth refusal comes before the route is known; the Go SDK
// still hands it over as a genai.APIError with its status. The token is
// accepted from x-goog-api-key, where the SDKs put their key.
func TestGeminiInboundAuth(t *testing.T) {
	t.Setenv("GEM_TOKENS", "tok-1")
	up := newGemUpstream(t, func(int, *gemRequest) gemReply {
		return gemReply{Chunks: []string{gemAnswer("STOP", gemFC("get_current_weather", weatherOK, "c2ln"))}}
	})
	g := gemGate(t, up, "inbound_auth:\n  tokens_env: GEM_TOKENS")
	r := gemCall(t, g.URL, nil, false)
	if r.APIErr == nil || r.APIErr.Code != 401 || !strings.Contains(r.APIErr.Message, "toolgate token") {
		t.Errorf("without a token: %v", r.Err)
	}
	ok := gemPost(t, g.URL, "/v1beta/models/m:generateContent", gemRequestBody(t), "x-goog-api-key", "tok-1")
	if ok.Status != 200 || up.requests()[0].Header.Get("X-Goog-Api-Key") != "" {
		t.Errorf("with the token: status %d; the token must not reach the upstream", ok.Status)
	}
}
