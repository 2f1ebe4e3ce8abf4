// Package demo runs toolgate end to end against an embedded scripted model:
// no network beyond loopback, no key. It shows an invented tool repaired by
// the decision strategy, an invented tool escalated, and a bad argument
// repaired by a reprompt, and a refund held until a person approves it
// through the admin API, then released once.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// commonTools are the two real tools every scene and the served demo
// offer; the invented calls are mapped onto them or escalated.
const commonTools = `    - name: calculator
      description: Evaluate an arithmetic expression.
      parameters:
        type: object
        properties:
          expression: {type: string}
        required: [expression]
        additionalProperties: false
    - name: web_search
      description: Search the web and return the top results.
      parameters:
        type: object
        properties:
          query: {type: string, minLength: 1}
        required: [query]
        additionalProperties: false
`

const config = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams:
  - name: scripted-model
    url: %s
catalog:
  tools:
` + commonTools + `    - name: book_flight
      description: Book a flight for a number of passengers.
      parameters:
        type: object
        properties:
          destination: {type: string}
          passengers: {type: integer, minimum: 1, maximum: 9}
        required: [destination, passengers]
        additionalProperties: false
    - name: issue_refund
      description: Refund an order.
      policy: confirm
      parameters:
        type: object
        properties:
          order_id: {type: string}
          amount_cents: {type: integer, minimum: 1}
        required: [order_id, amount_cents]
        additionalProperties: false
`

// Run executes the demo and narrates it to out.
func Run(ctx context.Context, out io.Writer) error { return RunTraced(ctx, out, "") }

// RunTraced is Run exporting traces to an OTLP http/protobuf endpoint
// (tracing.endpoint); each scene names its trace id. Empty traces nothing.
func RunTraced(ctx context.Context, out io.Writer, traceEndpoint string) error {
	model := &scriptedModel{out: out}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ms := &http.Server{Handler: model, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = ms.Serve(ln) }()
	defer ms.Close()

	snap, err := compileConfig(fmt.Sprintf(config, "http://"+ln.Addr().String()), traceEndpoint)
	if err != nil {
		return err
	}
	a, err := app.StartSnapshot(snap, app.Options{})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = a.Shutdown(sctx)
	}()
	base := "http://" + a.ProxyAddr()
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	p("toolgate demo: an agent with four tools (calculator, web_search, book_flight, issue_refund) asks a scripted model.")
	p("toolgate listens on %s; the scripted model on %s.", a.ProxyAddr(), ln.Addr())
	p("")

	scenes := []struct{ title, question string }{
		{"1. The model invents a tool; recovery maps it onto a real one", "How many active users do we have?"},
		{"2. The model invents a tool; no real tool fits, so toolgate escalates", "How many active users do we have? (internal only)"},
		{"3. A real tool with an argument of the wrong type is reprompted", "Book a flight to Lisbon for two people."},
	}
	for _, sc := range scenes {
		p("== %s", sc.title)
		p("agent  -> toolgate   user: %q", sc.question)
		traceID := ""
		if traceEndpoint != "" {
			traceID = newTraceID()
		}
		status, hdr, body, err := ask(ctx, base, sc.question, traceID)
		if err != nil {
			return err
		}
		if traceID != "" {
			p("trace  %s", traceID)
		}
		p("agent  <- toolgate   HTTP %d, X-Toolgate-Outcome: %s, upstream calls: %s",
			status, hdr.Get("X-Toolgate-Outcome"), hdr.Get("X-Toolgate-Upstream-Calls"))
		describe(p, status, body)
		p("")
	}
	if err := refundScene(ctx, p, base, "http://"+a.AdminAddr(), model, traceEndpoint != ""); err != nil {
		return err
	}
	p("Nothing invalid reached the agent. Metrics: http://%s/metrics (while running `toolgate serve`).", "127.0.0.1:9091")
	return nil
}

// refundScene holds a refund for a person, approves it through the admin
// API and resumes it: the model's call is released once, without asking
// the model again, and a second resume is refused. Traced, the hold and
// both resumes are requests of one trace.
func refundScene(ctx context.Context, p func(string, ...any), base, admin string, model *scriptedModel, traced bool) error {
	const question = "Refund order ord_1, 5 dollars."
	p("== 4. A refund (policy: confirm) is held until a person approves it, then released once")
	p("agent  -> toolgate   user: %q", question)
	traceID := ""
	if traced {
		traceID = newTraceID()
	}
	status, _, body, err := ask(ctx, base, question, traceID)
	if err != nil {
		return err
	}
	if traceID != "" {
		p("trace  %s", traceID)
	}
	var e struct {
		Error struct {
			Code       string `json:"code"`
			Escalation struct {
				Approval struct {
					ID    string `json:"id"`
					State string `json:"state"`
				} `json:"approval"`
			} `json:"escalation"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	id := e.Error.Escalation.Approval.ID
	if id == "" {
		return fmt.Errorf("the refund was not held (HTTP %d): %s", status, body)
	}
	p("agent  <- toolgate   HTTP %d %s; approval %s is %s", status, e.Error.Code, id, e.Error.Escalation.Approval.State)
	decision := `{"decision":"approve","by":"ana@example.com","note":"customer confirmed by phone"}`
	p("           a person decides on the page %s/ui/approvals#%s (with an admin token), or through the API:", admin, id)
	p("person -> admin      POST /approvals/%s %s", id, decision)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, admin+"/approvals/"+id, strings.NewReader(decision))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return err
	}
	resp.Body.Close()
	p("person <- admin      HTTP %d", resp.StatusCode)
	before := model.requests()
	for i := 0; i < 2; i++ {
		p("agent  -> toolgate   the same request again, X-Toolgate-Approval: %s", id)
		status, hdr, body, err := askWith(ctx, base, question, traceID, map[string]string{"X-Toolgate-Approval": id})
		if err != nil {
			return err
		}
		if o := hdr.Get("X-Toolgate-Outcome"); o != "" {
			p("agent  <- toolgate   HTTP %d, X-Toolgate-Outcome: %s, upstream calls: %s", status, o, hdr.Get("X-Toolgate-Upstream-Calls"))
		} else {
			p("agent  <- toolgate   HTTP %d", status)
		}
		describe(p, status, body)
	}
	p("           the model was asked %d more times; the refund was released once.", model.requests()-before)
	p("")
	return nil
}

func ask(ctx context.Context, base, question, traceID string) (int, http.Header, []byte, error) {
	return askWith(ctx, base, question, traceID, nil)
}

func askWith(ctx context.Context, base, question, traceID string, headers map[string]string) (int, http.Header, []byte, error) {
	req := map[string]any{
		"model": "scripted-1",
		"messages": []any{
			map[string]any{"role": "user", "content": question},
		},
		"tools": []any{
			fnTool("calculator", "Evaluate an arithmetic expression.", `{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`),
			fnTool("web_search", "Search the web and return the top results.", `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
			fnTool("book_flight", "Book a flight for a number of passengers.", `{"type":"object","properties":{"destination":{"type":"string"},"passengers":{"type":"integer"}},"required":["destination","passengers"]}`),
			fnTool("issue_refund", "Refund an order.", `{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["order_id","amount_cents"]}`),
		},
	}
	b, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer demo-key-not-needed")
	for k, v := range headers {
		hr.Header.Set(k, v)
	}
	if traceID != "" {
		// The agent's own trace, which toolgate continues: its spans
		// are found under this id.
		var span [8]byte
		_, _ = rand.Read(span[:])
		hr.Header.Set("Traceparent", "00-"+traceID+"-"+hex.EncodeToString(span[:])+"-01")
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body, err
}

func fnTool(name, desc, params string) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{
		"name": name, "description": desc, "parameters": json.RawMessage(params)}}
}

func describe(p func(string, ...any), status int, body []byte) {
	if status != http.StatusOK {
		var e struct {
			Error struct {
				Code       string          `json:"code"`
				Message    string          `json:"message"`
				Escalation json.RawMessage `json:"escalation"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if len(e.Error.Escalation) == 0 {
			p("                     refused %s: %s", e.Error.Code, e.Error.Message)
			return
		}
		p("                     escalation %s: %s", e.Error.Code, e.Error.Message)
		var esc struct {
			ID                string `json:"id"`
			OriginalIntent    string `json:"original_intent"`
			MissingCapability string `json:"missing_capability"`
		}
		_ = json.Unmarshal(e.Error.Escalation, &esc)
		p("                     id %s; intent %q; missing %q", esc.ID, esc.OriginalIntent, esc.MissingCapability)
		return
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(body, &r)
	for _, c := range r.Choices {
		for _, tc := range c.Message.ToolCalls {
			p("                     tool call %s: %s(%s)", tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
		if c.Message.Content != nil && *c.Message.Content != "" {
			p("                     text: %s", *c.Message.Content)
		}
	}
}

// scriptedModel answers like a chat completions API, following a script
// keyed by the user's question and by what toolgate sends back.
type scriptedModel struct {
	out io.Writer
	mu  sync.Mutex
	n   int
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		ToolChoice any `json:"tool_choice"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.n++
	id := fmt.Sprintf("chatcmpl-demo%d", m.n)
	m.mu.Unlock()
	question, _ := req.Messages[0].Content.(string)
	last := req.Messages[len(req.Messages)-1]
	say := func(format string, args ...any) { fmt.Fprintf(m.out, "           model  "+format+"\n", args...) }

	switch {
	case last.Role == "user" && strings.HasPrefix(question, "How many active users"):
		say("<- toolgate   calls database_query (a tool that does not exist)")
		writeCall(w, id, "call_demo_1", "database_query", `{"sql":"SELECT COUNT(*) FROM users WHERE active = 1"}`)
	case last.Role == "user" && strings.HasPrefix(question, "Refund order"):
		say("<- toolgate   calls issue_refund for order ord_1, 500 cents (a tool a person must confirm)")
		writeCall(w, id, "call_demo_4", "issue_refund", `{"order_id":"ord_1","amount_cents":500}`)
	case last.Role == "user" && strings.HasPrefix(question, "Book a flight"):
		say("<- toolgate   calls book_flight with passengers: \"two\" (a string)")
		writeCall(w, id, "call_demo_3", "book_flight", `{"destination":"Lisbon","passengers":"two"}`)
	case last.Role == "tool" && strings.Contains(question, "internal only"):
		say("<- toolgate   recovery prompt received (tool_choice %v); decides to escalate", req.ToolChoice)
		writeText(w, id, `{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":"no available tool can read the user database","original_intent":"count active users","missing_capability":"read access to the user database"},"confidence":0.2}`)
	case last.Role == "tool" && strings.HasPrefix(question, "How many active users"):
		say("<- toolgate   recovery prompt received (tool_choice %v); substitutes web_search, confidence 0.86", req.ToolChoice)
		writeText(w, id, "```json\n"+`{"decision":"substitute","corrected_tool_call":{"tool_name":"web_search","arguments":{"query":"number of active users"}},"escalation":null,"confidence":0.86}`+"\n```")
	case last.Role == "tool" && strings.HasPrefix(question, "Book a flight"):
		say("<- toolgate   reprompt received with the reason; calls book_flight with passengers: 2")
		writeCall(w, id, "call_demo_3b", "book_flight", `{"destination":"Lisbon","passengers":2}`)
	default:
		writeText(w, id, "I have nothing scripted for that.")
	}
}

func (m *scriptedModel) requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

func writeCall(w http.ResponseWriter, id, callID, name, args string) {
	msg := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
		map[string]any{"id": callID, "type": "function", "function": map[string]any{"name": name, "arguments": args}},
	}}
	writeCompletion(w, id, msg, "tool_calls")
}

func writeText(w http.ResponseWriter, id, text string) {
	writeCompletion(w, id, map[string]any{"role": "assistant", "content": text}, "stop")
}

func writeCompletion(w http.ResponseWriter, id string, msg map[string]any, finish string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": "scripted-1",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
	})
}

func newTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// compileConfig compiles a demo's config, exporting traces to
// traceEndpoint when one is given.
func compileConfig(yaml, traceEndpoint string) (*catalog.Snapshot, error) {
	if traceEndpoint != "" {
		yaml += "tracing: {endpoint: " + strconv.Quote(traceEndpoint) + "}\n"
	}
	cfg, err := catalog.Parse([]byte(yaml), "demo.yaml")
	if err != nil {
		return nil, err
	}
	return catalog.Compile(cfg, ".")
}
