package test

// Strict mode (SPEC §3b) against upstreams that enforce each provider's
// documented strict rules the way the API does: a marked tool whose schema
// falls outside the subset gets a 400 in the provider's error shape. Each
// upstream records what it received, so the tests hold toolgate to marking
// exactly where the subset allows and changing no other byte.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// strictTool is one tool a test request offers.
type strictTool struct {
	name, schema string
	// client is the client's own flag, written as the client wrote it
	// ("" for none).
	client string
}

const (
	strictFits  = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	strictFits2 = `{"type":"object","properties":{"n":{"type":["integer","null"]}},"required":["n"],"additionalProperties":false}`
	// strictUnfit is outside every subset: an open object for OpenAI and
	// Anthropic, a minLength for Gemini.
	strictUnfit = `{"type":"object","properties":{"q":{"type":"string","minLength":1}},"required":["q"]}`
	// strictDoubtful fits toolgate's reading of every subset, but holds the
	// keyword these upstreams refuse anyway (refusedKeyword), as a provider
	// may refuse what its documents leave open.
	strictDoubtful = `{"type":"object","properties":{"t":{"type":"string","description":"refuse me"}},"required":["t"],"additionalProperties":false}`
	refusedKeyword = "refuse me"
)

// strictAPI is one model API as these tests drive it.
type strictAPI struct {
	name, path string
	// request writes a request offering tools, spaced the way a hand-written
	// client might (extra blanks), so that a re-encoding would show.
	request func(tools []strictTool, stream bool) []byte
	// unmark takes out of a received body exactly what toolgate may add.
	unmark func(body string) string
	// marked lists the tools a received body marks strict.
	marked func(t *testing.T, body []byte) []string
	// refuse is the provider's check of a marked request: a 400 body in its
	// error shape, or "".
	refuse func(t *testing.T, body []byte) string
	// answer is a call of tool with args, whole or streamed.
	answer func(t *testing.T, tool, args string, stream bool) faultAction
	// streamPath is the path a streamed request goes to, when it differs.
	streamPath string
}

func (a strictAPI) pathFor(stream bool) string {
	if stream && a.streamPath != "" {
		return a.streamPath
	}
	return a.path
}

// strictToolsJSON writes the tools array with one tool per line.
func strictToolsJSON(tools []strictTool, one func(t strictTool) string) string {
	parts := make([]string, len(tools))
	for i, t := range tools {
		parts[i] = one(t)
	}
	return "[\n    " + strings.Join(parts, ",\n    ") + "\n  ]"
}

func clientFlag(t strictTool) string {
	if t.client == "" {
		return ""
	}
	return `, "strict": ` + t.client
}

var strictChat = strictAPI{
	name: "chat", path: "/v1/chat/completions",
	request: func(tools []strictTool, stream bool) []byte {
		return []byte(fmt.Sprintf(`{ "model": "gpt-4o", "stream": %v,
  "messages": [ {"role": "user", "content": "Do it."} ],
  "tools": %s,
  "parallel_tool_calls": true }`, stream, strictToolsJSON(tools, func(t strictTool) string {
			return `{ "type": "function", "function": { "name": "` + t.name + `", "parameters": ` + t.schema + clientFlag(t) + ` } }`
		})))
	},
	unmark: func(b string) string { return strings.ReplaceAll(b, `,"strict":true`, "") },
	marked: func(t *testing.T, body []byte) []string {
		var r struct {
			Tools []struct {
				Function map[string]json.RawMessage `json:"function"`
			} `json:"tools"`
		}
		strictJSON(t, body, &r)
		var out []string
		for _, tool := range r.Tools {
			if string(tool.Function["strict"]) == "true" {
				out = append(out, unquote(t, tool.Function["name"]))
			}
		}
		return out
	},
	refuse: func(t *testing.T, body []byte) string {
		var r struct {
			Tools []struct {
				Function struct {
					Name       string          `json:"name"`
					Strict     *bool           `json:"strict"`
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			} `json:"tools"`
		}
		strictJSON(t, body, &r)
		for i, tool := range r.Tools {
			if f := tool.Function; f.Strict != nil && *f.Strict {
				if why := openAIStrictRules(t, f.Parameters); why != "" {
					return openAIError("Invalid schema for function '"+f.Name+"': "+why, "invalid_request_error",
						fmt.Sprintf("tools[%d].function.parameters", i), "invalid_function_parameters")
				}
			}
		}
		return ""
	},
	answer: func(t *testing.T, tool, args string, stream bool) faultAction {
		if stream {
			return fuSSE(fuConcat(fuTextEvents(), fuCallEvents("call_s1", tool, args)), 0)
		}
		return fuJSON(rawCallAnswer(rawCall(`"call_s1"`, jsonStr(tool), jsonStr(args))))
	},
}

var strictResponses = strictAPI{
	name: "responses", path: "/v1/responses",
	request: func(tools []strictTool, stream bool) []byte {
		return []byte(fmt.Sprintf(`{ "model": "gpt-5", "stream": %v, "input": "Do it.",
  "tools": %s }`, stream, strictToolsJSON(tools, func(t strictTool) string {
			return `{ "type": "function", "name": "` + t.name + `", "parameters": ` + t.schema + clientFlag(t) + ` }`
		})))
	},
	unmark: func(b string) string { return strings.ReplaceAll(b, `,"strict":true`, "") },
	marked: func(t *testing.T, body []byte) []string {
		var r struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		strictJSON(t, body, &r)
		var out []string
		for _, tool := range r.Tools {
			if string(tool["strict"]) == "true" {
				out = append(out, unquote(t, tool["name"]))
			}
		}
		return out
	},
	refuse: func(t *testing.T, body []byte) string {
		var r struct {
			Tools []struct {
				Name       string          `json:"name"`
				Strict     *bool           `json:"strict"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"tools"`
		}
		strictJSON(t, body, &r)
		for i, f := range r.Tools {
			if f.Strict != nil && *f.Strict {
				if why := openAIStrictRules(t, f.Parameters); why != "" {
					return openAIError("Invalid schema for function '"+f.Name+"': "+why, "invalid_request_error",
						fmt.Sprintf("tools[%d].parameters", i), "invalid_function_parameters")
				}
			}
		}
		return ""
	},
	answer: func(t *testing.T, tool, args string, stream bool) faultAction {
		a := respAnswer{ID: "resp_s1", Items: []string{respCall("fc_s1", "call_s1", tool, args)}}
		if stream {
			return fuSSE([]string{string(respStreamOf(a, ""))}, 0)
		}
		return fuJSON(respObject(a, "completed", "", a.Items))
	},
}

var strictMessages = strictAPI{
	name: "messages", path: "/v1/messages",
	request: func(tools []strictTool, stream bool) []byte {
		return []byte(fmt.Sprintf(`{ "model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": %v,
  "messages": [ {"role": "user", "content": "Do it."} ],
  "tools": %s }`, stream, strictToolsJSON(tools, func(t strictTool) string {
			return `{ "name": "` + t.name + `", "input_schema": ` + t.schema + clientFlag(t) + ` }`
		})))
	},
	unmark: func(b string) string { return strings.ReplaceAll(b, `,"strict":true`, "") },
	marked: strictResponses.marked,
	refuse: func(t *testing.T, body []byte) string {
		var r struct {
			Tools []struct {
				Strict      *bool           `json:"strict"`
				InputSchema json.RawMessage `json:"input_schema"`
			} `json:"tools"`
		}
		strictJSON(t, body, &r)
		marked := 0
		for _, tool := range r.Tools {
			if tool.Strict != nil && *tool.Strict {
				marked++
			}
		}
		if marked > 20 {
			return `{"type":"error","error":{"type":"invalid_request_error","message":"tools: a request may have at most 20 strict tools"}}`
		}
		for i, tool := range r.Tools {
			if tool.Strict != nil && *tool.Strict {
				if why := anthropicStrictRules(t, tool.InputSchema); why != "" {
					b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{
						"type": "invalid_request_error", "message": fmt.Sprintf("tools.%d.custom.input_schema: %s", i, why)}})
					return string(b)
				}
			}
		}
		return ""
	},
	answer: func(t *testing.T, tool, args string, stream bool) faultAction {
		msg := anthMsg("msg_s1", "tool_use", anthToolUse("toolu_s1", tool, args))
		if stream {
			return fuSSE([]string{anthSSE(t, msg)}, 0)
		}
		return fuJSON(msg)
	},
}

// geminiValidated is what toolgate adds to a Gemini request without a
// toolConfig.
const geminiValidated = `,"toolConfig":{"functionCallingConfig":{"mode":"VALIDATED"}}`

var strictGemini = strictAPI{
	name: "gemini", path: "/v1beta/models/gemini-2.5-flash:generateContent",
	streamPath: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
	request: func(tools []strictTool, _ bool) []byte {
		return []byte(fmt.Sprintf(`{ "contents": [ {"role": "user", "parts": [ {"text": "Do it."} ]} ],
  "tools": [ { "functionDeclarations": %s } ] }`, strictToolsJSON(tools, func(t strictTool) string {
			return `{ "name": "` + t.name + `", "parametersJsonSchema": ` + t.schema + ` }`
		})))
	},
	unmark: func(b string) string { return strings.Replace(b, geminiValidated, "", 1) },
	marked: func(t *testing.T, body []byte) []string {
		var r struct {
			Tools []struct {
				FunctionDeclarations []struct {
					Name string `json:"name"`
				} `json:"functionDeclarations"`
			} `json:"tools"`
			ToolConfig struct {
				FunctionCallingConfig struct {
					Mode string `json:"mode"`
				} `json:"functionCallingConfig"`
			} `json:"toolConfig"`
		}
		strictJSON(t, body, &r)
		var out []string
		if r.ToolConfig.FunctionCallingConfig.Mode == "VALIDATED" {
			for _, tool := range r.Tools {
				for _, d := range tool.FunctionDeclarations {
					out = append(out, d.Name)
				}
			}
		}
		return out
	},
	refuse: func(t *testing.T, body []byte) string {
		var r struct {
			Tools []struct {
				FunctionDeclarations []struct {
					ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
				} `json:"functionDeclarations"`
			} `json:"tools"`
			ToolConfig struct {
				FunctionCallingConfig struct {
					Mode string `json:"mode"`
				} `json:"functionCallingConfig"`
			} `json:"toolConfig"`
		}
		strictJSON(t, body, &r)
		if r.ToolConfig.FunctionCallingConfig.Mode != "VALIDATED" {
			return ""
		}
		for _, tool := range r.Tools {
			for i, d := range tool.FunctionDeclarations {
				if why := geminiStrictRules(t, d.ParametersJSONSchema); why != "" {
					b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 400, "status": "INVALID_ARGUMENT",
						"message": fmt.Sprintf("* GenerateContentRequest.tools[0].function_declarations[%d].parameters_json_schema: %s in VALIDATED mode", i, why)}})
					return string(b)
				}
			}
		}
		return ""
	},
	answer: func(t *testing.T, tool, args string, stream bool) faultAction {
		chunk := `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":` + jsonStr(tool) + `,"args":` + args +
			`}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":4,"totalTokenCount":13},"modelVersion":"gemini-2.5-flash"}`
		if stream {
			return fuSSE([]string{"data: " + chunk + "\r\n\r\n"}, 0)
		}
		return fuJSON(chunk)
	},
}

var strictAPIs = []strictAPI{strictChat, strictResponses, strictMessages, strictGemini}

func strictJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

func unquote(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	strictJSON(t, raw, &s)
	return s
}

// strictRig is toolgate before one enforcing upstream.
type strictRig struct {
	api strictAPI
	u   *faultUpstream
	g   *gate
}

// newStrictRig starts toolgate with rest as its extra config; the upstream
// refuses what the provider refuses and else answers each request with
// answer(n).
func newStrictRig(t *testing.T, api strictAPI, rest string, stream bool, answer func(n int) (tool, args string)) *strictRig {
	t.Helper()
	r := &strictRig{api: api}
	r.u = newFaultUpstream(t, func(n int, req *faultRequest) faultAction {
		if e := api.refuse(t, req.Body); e != "" {
			return fuStatus(http.StatusBadRequest, e)
		}
		tool, args := answer(n)
		return api.answer(t, tool, args, stream)
	})
	r.g, _ = startGateWith(t, fuConfig(r.u, "", rest), app.Options{Sink: &recordingSink{}})
	return r
}

// post sends the client's request and fails the test unless it passed.
func (r *strictRig) post(t *testing.T, body []byte, stream bool) fuResult {
	t.Helper()
	res := fuPost(t, r.g.URL, r.api.pathFor(stream), body, "x-goog-api-key", "k", "anthropic-version", "2023-06-01")
	if res.Status != http.StatusOK || res.Err != nil {
		t.Fatalf("%s: status %d (%v): %s", r.api.name, res.Status, res.Err, res.Body)
	}
	return res
}

func (r *strictRig) strictTools(result string) float64 {
	return testutil.ToFloat64(r.g.App.Metrics.StrictTools.WithLabelValues(r.api.name, result))
}

func (r *strictRig) strictCalls(result string) float64 {
	return testutil.ToFloat64(r.g.App.Metrics.StrictCalls.WithLabelValues(r.api.name, result))
}

const strictAuto = "catalog:\n  strict: auto\n"

func sameNames(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// TestStrictMarksWhereTheSubsetAllows: a fitting tool is marked, an unfit
// one and one the client decided are left as sent, and no other byte of
// the request changes; Gemini's mode is set when every declaration fits.
func TestStrictMarksWhereTheSubsetAllows(t *testing.T) {
	for _, api := range strictAPIs {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", api.name, stream), func(t *testing.T) {
				tools := []strictTool{{"fits", strictFits, ""}, {"unfit", strictUnfit, ""}, {"mine", strictUnfit, "false"}}
				want, results := []string{"fits"}, map[string]float64{"marked": 1, "unfit": 1, "client": 1}
				if api.name == "gemini" {
					tools = []strictTool{{"fits", strictFits, ""}, {"fits2", strictFits2, ""}}
					want, results = []string{"fits", "fits2"}, map[string]float64{"marked": 2}
				}
				r := newStrictRig(t, api, strictAuto, stream, func(int) (string, string) { return "fits", `{"city":"Oslo"}` })
				body := api.request(tools, stream)
				r.post(t, body, stream)
				reqs := r.u.requests()
				if len(reqs) != 1 {
					t.Fatalf("upstream got %d requests, want 1", len(reqs))
				}
				if got := api.marked(t, reqs[0].Body); !sameNames(got, want) {
					t.Errorf("marked %v, want %v", got, want)
				}
				if got := api.unmark(string(reqs[0].Body)); got != string(body) {
					t.Errorf("the request changed beyond the flag:\n got %s\nwant %s", got, body)
				}
				for _, res := range []string{"marked", "unfit", "client", "refused"} {
					if n := r.strictTools(res); n != results[res] {
						t.Errorf("strict_tools_total{%s} = %v, want %v", res, n, results[res])
					}
				}
				if n := r.strictCalls("valid"); n != 1 {
					t.Errorf("strict_calls_total{valid} = %v, want 1", n)
				}
			})
		}
	}
}

// TestStrictGeminiModeOnlyWhenAllFitAndUnset: one unfit declaration, or a
// mode the client set, leaves a Gemini request as it was.
func TestStrictGeminiModeOnlyWhenAllFitAndUnset(t *testing.T) {
	r := newStrictRig(t, strictGemini, strictAuto, false, func(int) (string, string) { return "fits", `{"city":"Oslo"}` })
	unfit := strictGemini.request([]strictTool{{"fits", strictFits, ""}, {"unfit", strictUnfit, ""}}, false)
	own := []byte(strings.Replace(string(strictGemini.request([]strictTool{{"fits", strictFits, ""}}, false)),
		`"tools"`, `"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}, "tools"`, 1))
	snake := []byte(strings.Replace(string(strictGemini.request([]strictTool{{"fits", strictFits, ""}}, false)),
		`"tools"`, `"tool_config": {"function_calling_config": {"allowed_function_names": ["fits"]}}, "tools"`, 1))
	r.post(t, unfit, false)
	r.post(t, own, false)
	r.post(t, snake, false)
	reqs := r.u.requests()
	if string(reqs[0].Body) != string(unfit) || string(reqs[1].Body) != string(own) {
		t.Errorf("a request gained the mode:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	want := strings.Replace(string(snake), `["fits"]}`, `["fits"],"mode":"VALIDATED"}`, 1)
	if string(reqs[2].Body) != want {
		t.Errorf("snake_case config:\n got %s\nwant %s", reqs[2].Body, want)
	}
	if r.strictTools("unfit") != 2 || r.strictTools("client") != 1 || r.strictTools("marked") != 1 {
		t.Errorf("unfit %v client %v marked %v, want 2, 1, 1", r.strictTools("unfit"), r.strictTools("client"), r.strictTools("marked"))
	}
}

// TestStrictReQueriesCarryTheSameMarks: a re-query after a bad call
// offers the tools exactly as the first request did, marks included.
func TestStrictReQueriesCarryTheSameMarks(t *testing.T) {
	for _, api := range strictAPIs {
		t.Run(api.name, func(t *testing.T) {
			r := newStrictRig(t, api, strictAuto, false, func(n int) (string, string) {
				if n == 1 {
					return "fits", `{"city":5}`
				}
				return "fits", `{"city":"Oslo"}`
			})
			second := strictTool{"unfit", strictUnfit, ""}
			if api.name == "gemini" {
				second = strictTool{"fits2", strictFits2, ""}
			}
			r.post(t, api.request([]strictTool{{"fits", strictFits, ""}, second}, false), false)
			reqs := r.u.requests()
			if len(reqs) != 2 {
				t.Fatalf("upstream got %d requests, want the original and a re-query", len(reqs))
			}
			first, again := api.marked(t, reqs[0].Body), api.marked(t, reqs[1].Body)
			if len(first) == 0 || !sameNames(first, again) {
				t.Errorf("first marked %v, re-query %v", first, again)
			}
			if n := r.strictCalls("valid"); n != 0 {
				t.Errorf("strict_calls_total{valid} = %v; only the original answer's bad call counts", n)
			}
		})
	}
}

// TestStrictRefusalIsSentOnceAsTheClientSentIt: a 400 refusing the marking
// is followed by one request exactly as the client sent it; the tool is
// then remembered, and the next request marks only what was not refused.
func TestStrictRefusalIsSentOnceAsTheClientSentIt(t *testing.T) {
	for _, api := range strictAPIs {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", api.name, stream), func(t *testing.T) {
				r := newStrictRig(t, api, strictAuto, stream, func(int) (string, string) { return "fits", `{"city":"Oslo"}` })
				body := api.request([]strictTool{{"fits", strictFits, ""}, {"doubtful", strictDoubtful, ""}}, stream)
				r.post(t, body, stream)
				reqs := r.u.requests()
				if len(reqs) != 2 {
					t.Fatalf("upstream got %d requests, want the refused one and one more", len(reqs))
				}
				if got := api.marked(t, reqs[0].Body); len(got) != 2 {
					t.Errorf("first request marked %v, want both", got)
				}
				if string(reqs[1].Body) != string(body) {
					t.Errorf("the second request is not the client's:\n got %s\nwant %s", reqs[1].Body, body)
				}
				if n := r.strictTools("refused"); n < 1 {
					t.Errorf("strict_tools_total{refused} = %v", n)
				}
				r.post(t, body, stream)
				reqs = r.u.requests()
				if len(reqs) != 3 {
					t.Fatalf("upstream got %d requests after the second client request, want 3", len(reqs))
				}
				want := []string{"fits"}
				if api.name == "gemini" {
					want = nil // the mode is the request's: one refusal ends it for these tools
				}
				if got := api.marked(t, reqs[2].Body); !sameNames(got, want) {
					t.Errorf("after the refusal marked %v, want %v", got, want)
				}
			})
		}
	}
}

// TestStrictOtherErrorsAreHandedBack: a 400 about something else, or any
// other status, reaches the client as the upstream sent it, after one call.
func TestStrictOtherErrorsAreHandedBack(t *testing.T) {
	for _, api := range strictAPIs {
		for _, c := range []struct {
			status int
			body   string
		}{
			{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long","code":400,"status":"INVALID_ARGUMENT"}}`},
			{500, `{"error":{"message":"strict schema cache unavailable","type":"server_error"}}`},
		} {
			t.Run(fmt.Sprintf("%s/%d", api.name, c.status), func(t *testing.T) {
				u := newFaultUpstream(t, func(int, *faultRequest) faultAction { return fuStatus(c.status, c.body) })
				g, _ := startGateWith(t, fuConfig(u, "", strictAuto), app.Options{Sink: &recordingSink{}})
				res := fuPost(t, g.URL, api.path, api.request([]strictTool{{"fits", strictFits, ""}}, false), "anthropic-version", "2023-06-01")
				if res.Status != c.status || string(res.Body) != c.body {
					t.Errorf("client got %d %s", res.Status, res.Body)
				}
				if n := u.count(); n != 1 {
					t.Errorf("upstream got %d requests, want 1", n)
				}
			})
		}
	}
}

// TestStrictOffAndShadowLeaveRequestsAlone: with strict off (the default)
// or in shadow mode every request reaches the upstream byte for byte.
func TestStrictOffAndShadowLeaveRequestsAlone(t *testing.T) {
	for _, rest := range []string{"", "catalog:\n  strict: off\n", "mode: shadow\n" + strictAuto} {
		for _, api := range strictAPIs {
			t.Run(api.name+"/"+strings.ReplaceAll(strings.TrimSpace(rest), "\n", ";"), func(t *testing.T) {
				r := newStrictRig(t, api, rest, false, func(int) (string, string) { return "fits", `{"city":"Oslo"}` })
				body := api.request([]strictTool{{"fits", strictFits, ""}, {"fits2", strictFits2, ""}}, false)
				r.post(t, body, false)
				if got := r.u.requests()[0].Body; string(got) != string(body) {
					t.Errorf("the request changed:\n got %s\nwant %s", got, body)
				}
				if n := r.strictTools("marked") + r.strictTools("unfit"); n != 0 {
					t.Errorf("strict_tools_total counted %v tools", n)
				}
			})
		}
	}
}

// TestStrictFallbackIsSentOnlyOnce: when the request sent as the client sent
// it is refused too, that answer goes to the client; there is no third try.
func TestStrictFallbackIsSentOnlyOnce(t *testing.T) {
	refusal := openAIError("Invalid schema for function 'fits': strict mode is not available for this model",
		"invalid_request_error", "tools[0].function.parameters", "invalid_function_parameters")
	u := newFaultUpstream(t, func(int, *faultRequest) faultAction { return fuStatus(http.StatusBadRequest, refusal) })
	g, _ := startGateWith(t, fuConfig(u, "", strictAuto), app.Options{Sink: &recordingSink{}})
	body := strictChat.request([]strictTool{{"fits", strictFits, ""}}, false)
	res := fuPost(t, g.URL, strictChat.path, body)
	if res.Status != http.StatusBadRequest || string(res.Body) != refusal {
		t.Errorf("client got %d %s", res.Status, res.Body)
	}
	reqs := u.requests()
	if len(reqs) != 2 || string(reqs[1].Body) != string(body) {
		t.Fatalf("upstream got %d requests, want the marked one and the client's", len(reqs))
	}
}

// TestStrictAnthropicRequestLimit: Anthropic takes at most 20 strict tools
// in a request; toolgate marks the first 20 that fit and no more.
func TestStrictAnthropicRequestLimit(t *testing.T) {
	r := newStrictRig(t, strictMessages, strictAuto, false, func(int) (string, string) { return "t0", `{"city":"Oslo"}` })
	var tools []strictTool
	for i := 0; i < 22; i++ {
		tools = append(tools, strictTool{fmt.Sprintf("t%d", i), strictFits, ""})
	}
	r.post(t, strictMessages.request(tools, false), false)
	reqs := r.u.requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(reqs))
	}
	if got := strictMessages.marked(t, reqs[0].Body); len(got) != 20 || got[19] != "t19" {
		t.Errorf("marked %v, want t0…t19", got)
	}
	if r.strictTools("unfit") != 2 {
		t.Errorf("strict_tools_total{unfit} = %v, want 2", r.strictTools("unfit"))
	}
}

// TestStrictClientsOwnMarkingIsTheClients: a tool the client marked itself
// is sent as it is, and a refusal of it reaches the client after one call:
// toolgate's own marking on the same request was not the cause.
func TestStrictClientsOwnMarkingIsTheClients(t *testing.T) {
	for _, api := range []strictAPI{strictChat, strictResponses, strictMessages} {
		t.Run(api.name, func(t *testing.T) {
			r := newStrictRig(t, api, strictAuto, false, func(int) (string, string) { return "fits", `{"city":"Oslo"}` })
			body := api.request([]strictTool{{"fits", strictFits, ""}, {"mine", strictUnfit, "true"}}, false)
			res := fuPost(t, r.g.URL, api.path, body, "anthropic-version", "2023-06-01")
			reqs := r.u.requests()
			if res.Status != http.StatusBadRequest || len(reqs) != 1 {
				t.Fatalf("client got %d after %d upstream requests, want the upstream's 400 after 1: %s", res.Status, len(reqs), res.Body)
			}
			if got := api.marked(t, reqs[0].Body); !sameNames(got, []string{"fits", "mine"}) {
				t.Errorf("marked %v, want toolgate's fits and the client's mine", got)
			}
			if n := r.strictTools("refused"); n != 0 {
				t.Errorf("strict_tools_total{refused} = %v, want 0", n)
			}
		})
	}
}
