package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/recovery"
)

// serveConfig is the demo's catalog behind one toolgate with the scripted
// model as all three upstreams. catalog.mode config judges every answer by
// the demo's catalog, so a client need not offer any tools of its own.
const serveConfig = `
listen: %s
admin_listen: 127.0.0.1:0
upstreams:
  - name: openai
    url: %[2]s
  - name: anthropic
    url: %[2]s
    path_prefix: /anthropic
  - name: gemini
    url: %[2]s
    path_prefix: /gemini
catalog:
  version: demo
  mode: config
  tools:
` + commonTools

// ServeOptions configure Serve.
type ServeOptions struct {
	// Listen is toolgate's proxy address; 127.0.0.1:0 picks a free port.
	Listen string
	// TraceEndpoint, when set, exports traces over OTLP http/protobuf.
	TraceEndpoint string
}

// Serve keeps toolgate and a scripted model running until ctx ends, and
// prints the base URL and a snippet per SDK that shows a call judged: the
// model calls database_query, which is no tool of the catalog, and
// toolgate's recovery turns it into web_search.
func Serve(ctx context.Context, out io.Writer, o ServeOptions) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ms := &http.Server{Handler: &polyglotModel{}, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = ms.Serve(ln) }()
	defer ms.Close()

	snap, err := compileConfig(fmt.Sprintf(serveConfig, strconv.Quote(o.Listen), "http://"+ln.Addr().String()), o.TraceEndpoint)
	if err != nil {
		return err
	}
	a, err := app.StartSnapshot(snap, app.Options{})
	if err != nil {
		return fmt.Errorf("%w (pass --listen 127.0.0.1:0 for a free port)", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = a.Shutdown(sctx)
	}()
	printSnippets(out, "http://"+a.ProxyAddr(), "http://"+a.AdminAddr())
	<-ctx.Done()
	fmt.Fprintln(out, "toolgate demo: stopped.")
	return nil
}

// The snippets are printed as they are; the Node one between its markers
// is what the demo's test runs.
const snippets = `toolgate demo --serve: toolgate listens on {{BASE}} in front of a scripted model
(no key, no network). Whatever you ask, the model calls database_query, a tool
that does not exist; toolgate's recovery turns it into web_search, and the
answer carries the header X-Toolgate-Outcome: substituted. Non-streamed calls
only. Metrics: {{ADMIN}}/metrics. Ctrl-C stops it.

base URL (OpenAI):    {{BASE}}/v1
base URL (Anthropic): {{BASE}}/anthropic
base URL (Gemini):    {{BASE}}/gemini

curl:
  curl -si {{BASE}}/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"scripted-1","messages":[{"role":"user","content":"How many active users do we have?"}]}'

OpenAI, Node (npm install openai):
--- node openai ---
import OpenAI from "openai";
const client = new OpenAI({ baseURL: "{{BASE}}/v1", apiKey: "demo" });
const { data, response } = await client.chat.completions.create({
  model: "scripted-1",
  messages: [{ role: "user", content: "How many active users do we have?" }],
}).withResponse();
const call = data.choices[0].message.tool_calls[0].function;
console.log(response.headers.get("x-toolgate-outcome"), call.name, call.arguments);
--- end ---

OpenAI, Python (pip install openai):
  from openai import OpenAI
  client = OpenAI(base_url="{{BASE}}/v1", api_key="demo")
  raw = client.chat.completions.with_raw_response.create(model="scripted-1",
      messages=[{"role": "user", "content": "How many active users do we have?"}])
  print(raw.headers["x-toolgate-outcome"], raw.parse().choices[0].message.tool_calls[0].function)

Anthropic, Python (pip install anthropic):
  import anthropic
  client = anthropic.Anthropic(base_url="{{BASE}}/anthropic", api_key="demo")
  raw = client.messages.with_raw_response.create(model="scripted-1", max_tokens=256,
      messages=[{"role": "user", "content": "How many active users do we have?"}])
  print(raw.headers["x-toolgate-outcome"], raw.parse().content[0])

Gemini, Python (pip install google-genai):
  from google import genai
  client = genai.Client(api_key="demo", http_options={"base_url": "{{BASE}}/gemini"})
  r = client.models.generate_content(model="scripted-1", contents="How many active users do we have?")
  print(r.sdk_http_response.headers["x-toolgate-outcome"], r.function_calls[0])
`

func printSnippets(out io.Writer, base, admin string) {
	fmt.Fprint(out, strings.NewReplacer("{{BASE}}", base, "{{ADMIN}}", admin).Replace(snippets))
}

// polyglotModel answers Chat Completions, Messages and generateContent
// alike: a first turn calls database_query; toolgate's recovery prompt is
// answered by substituting web_search.
type polyglotModel struct{ n atomic.Int64 }

const (
	inventedCall = `{"sql":"SELECT COUNT(*) FROM users WHERE active = 1"}`
	substitution = `{"decision":"substitute","corrected_tool_call":{"tool_name":"web_search","arguments":{"query":"number of active users"}},"escalation":null,"confidence":0.9}`
)

// recoveryMarker is the first line of toolgate's recovery prompt, found in
// the body whichever API carries it.
var recoveryMarker = []byte(strings.SplitN(recovery.DefaultPrompt, "\n", 2)[0])

func (m *polyglotModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil || !json.Valid(body) {
		http.Error(w, `{"error":{"message":"the scripted model reads a JSON body"}}`, http.StatusBadRequest)
		return
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	if req.Stream || strings.Contains(r.URL.Path, ":streamGenerateContent") {
		http.Error(w, `{"error":{"message":"the scripted model answers non-streamed requests only"}}`, http.StatusBadRequest)
		return
	}
	recovering := strings.Contains(string(body), string(recoveryMarker))
	id := fmt.Sprintf("demo%d", m.n.Add(1))
	switch {
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		if recovering {
			writeText(w, "chatcmpl-"+id, substitution)
		} else {
			writeCall(w, "chatcmpl-"+id, "call_"+id, "database_query", inventedCall)
		}
	case strings.HasSuffix(r.URL.Path, "/v1/messages"):
		block := map[string]any{"type": "tool_use", "id": "toolu_" + id, "name": "database_query", "input": json.RawMessage(inventedCall)}
		stop := "tool_use"
		if recovering {
			block, stop = map[string]any{"type": "text", "text": substitution}, "end_turn"
		}
		writeJSON(w, map[string]any{"id": "msg_" + id, "type": "message", "role": "assistant", "model": "scripted-1",
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 40, "output_tokens": 12}})
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		part := map[string]any{"functionCall": map[string]any{"name": "database_query", "args": json.RawMessage(inventedCall)}}
		if recovering {
			part = map[string]any{"text": substitution}
		}
		writeJSON(w, map[string]any{"candidates": []any{map[string]any{
			"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
			"usageMetadata": map[string]any{"promptTokenCount": 40, "candidatesTokenCount": 12, "totalTokenCount": 52},
			"modelVersion":  "scripted-1"})
	default:
		http.Error(w, `{"error":{"message":"the scripted model serves chat completions, messages and generateContent"}}`, http.StatusNotFound)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
