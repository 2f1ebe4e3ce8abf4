package test

// Semantics end to end, through the Go SDK: provenance, CEL rules, the
// confirm policy, the abstain exit, recovery shortlists, strip_prefixes and
// the catalog lints of `toolgate check` (SPEC §2–§4, §9).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// semVersion labels the semantics catalog.
const semVersion = "semantics-v1"

// semTool is one tool of the semantics catalog: what the SDK offers and
// what config.yaml adds (provenance, rules, policy).
type semTool struct {
	Name, Desc, Params string
	// Extra holds more YAML keys of the catalog entry, one per line, at
	// the entry's indentation.
	Extra string
}

// semTools is an order-support agent's catalog. Each semantic check lives
// on its own tool, so a test exercises exactly one of them.
var semTools = []semTool{
	{Name: "lookup_order", Desc: "Look up one order by its id and return its status.",
		Params: `{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"],"additionalProperties":false}`,
		Extra:  "provenance: [/order_id]"},
	{Name: "cancel_orders", Desc: "Cancel several orders of the customer at once.",
		Params: `{"type":"object","properties":{"order_ids":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["order_ids"]}`,
		Extra:  "provenance: [/order_ids]"},
	{Name: "get_invoice", Desc: "Fetch an invoice as a PDF link by its invoice number.",
		Params: `{"type":"object","properties":{"invoice_number":{"type":"integer"}},"required":["invoice_number"]}`,
		Extra:  "provenance: [/invoice_number]"},
	{Name: "list_orders", Desc: "List the customer's recent orders, newest first.",
		Params: `{"type":"object","properties":{}}`},
	{Name: "issue_refund", Desc: "Refund part or all of an order to the original payment method.",
		Params: `{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer","minimum":1},"currency":{"type":"string"}},"required":["order_id","amount_cents"]}`,
		Extra: `rules:
  - expr: "args.amount_cents <= 100000"
    message: refunds above 1000.00 need a person
  - expr: "!(tool == 'issue_refund' && has(args.currency)) || args.currency in ['USD', 'EUR']"
    message: refunds are paid in USD or EUR only`},
	{Name: "add_order_note", Desc: "Attach a short internal note to an order.",
		Params: `{"type":"object","properties":{"order_id":{"type":"string"},"note":{"type":"string"}},"required":["order_id"]}`,
		Extra: `rules:
  - expr: "args.note.size() <= 500"
    message: notes are limited to 500 characters`},
	{Name: "tag_items", Desc: "Add a tag to many catalog items in one go.",
		Params: `{"type":"object","properties":{"tag":{"type":"string"},"items":{"type":"array","items":{"type":"string"}}},"required":["tag","items"]}`,
		Extra: `rules:
  - expr: "args.items.all(x, args.items.all(y, x != y || true))"
    message: every item must be tagged once`},
	{Name: "close_account", Desc: "Close the customer's account for good. Irreversible.",
		Params: `{"type":"object","properties":{"account_id":{"type":"string"}},"required":["account_id"]}`,
		Extra:  "policy: confirm\nprovenance: [/account_id]"},
}

// semCatalog renders a catalog: block for tools; extraKeys are more keys of
// catalog: itself, one per line.
func semCatalog(version, extraKeys string, tools []semTool) string {
	var b strings.Builder
	b.WriteString("catalog:\n  version: " + version + "\n")
	for _, line := range strings.Split(strings.TrimSpace(extraKeys), "\n") {
		if line != "" {
			b.WriteString("  " + strings.TrimSpace(line) + "\n")
		}
	}
	b.WriteString("  tools:\n")
	for _, tl := range tools {
		b.WriteString("    - name: " + tl.Name + "\n")
		if tl.Desc != "" {
			b.WriteString("      description: " + strconv.Quote(tl.Desc) + "\n")
		}
		b.WriteString("      parameters: " + tl.Params + "\n")
		for _, line := range strings.Split(tl.Extra, "\n") {
			if strings.TrimSpace(line) != "" {
				b.WriteString("      " + line + "\n")
			}
		}
	}
	return b.String()
}

// semGate starts toolgate with the semantics catalog in front of m; rest
// adds top-level config keys.
func semGate(t *testing.T, m *mockUpstream, rest string) *gate {
	t.Helper()
	return startGate(t, config(m, "", semCatalog(semVersion, "", semTools)+rest))
}

// semParams is a request offering every semantics tool with tool_choice
// auto, and msgs as the conversation.
func semParams(t *testing.T, msgs ...openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	t.Helper()
	p := openai.ChatCompletionNewParams{
		Model:      "gpt-4o-2024-08-06",
		Messages:   msgs,
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")},
	}
	for _, tl := range semTools {
		p.Tools = append(p.Tools, sdkTool(t, tl.Name, tl.Desc, json.RawMessage(tl.Params)))
	}
	return p
}

// assistantCalls is an earlier assistant turn that called tools, as an
// agent replays it in its history.
func assistantCalls(calls ...call) openai.ChatCompletionMessageParamUnion {
	var a openai.ChatCompletionAssistantMessageParam
	for _, c := range calls {
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: c.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Args}}})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// startGateLogged is startGate with every log entry kept for inspection and
// the config's own sinks (file, webhook) instead of the recording sink.
func startGateLogged(t *testing.T, configYAML string) (*gate, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	g, _ := startGateWith(t, configYAML, app.Options{Logger: zap.New(core)})
	return g, logs
}

// logDump renders every observed entry, fields included, as JSON lines.
func logDump(t *testing.T, logs *observer.ObservedLogs) string {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	var b strings.Builder
	for _, e := range logs.All() {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatalf("encode log entry: %v", err)
		}
		b.Write(buf.Bytes())
		buf.Free()
	}
	return b.String()
}

// expectNotLogged fails when any value occurs in the observed logs.
func expectNotLogged(t *testing.T, logs *observer.ObservedLogs, values ...string) {
	t.Helper()
	dump := logDump(t, logs)
	if dump == "" {
		t.Fatalf("nothing was logged: the check would be vacuous")
	}
	for _, v := range values {
		if strings.Contains(dump, v) {
			t.Errorf("argument value %q appears in toolgate's logs:\n%s", v, dump)
		}
	}
}

// onlyReply returns the single tool message a re-query appended for a
// one-call turn, after checking the re-query's shape.
func onlyReply(t *testing.T, m *mockUpstream, answer mockReply, decision bool) string {
	t.Helper()
	replies := checkRequery(t, m.body(t, 1), m.body(t, 2), decision, replayed{[]byte(answer.Body), 0})
	if len(replies) != 1 {
		t.Fatalf("re-query replies %v, want one", replies)
	}
	return replies[0].Content
}

// SPEC §4 provenance: a value at a provenance pointer must have appeared,
// as a whole token, in what the user wrote or a tool returned.
func TestSemanticsProvenance(t *testing.T) {
	user := openai.UserMessage[string]
	// listed is an agent turn that listed orders, and what the tool said.
	listed := []openai.ChatCompletionMessageParamUnion{
		user("What's the status of my latest order, and send me its invoice."),
		assistantCalls(call{"call_list", "list_orders", `{}`}),
		openai.ToolMessage(`{"orders":[{"id":"ord_7731","placed":"2025-03-02","invoice_number":48213,"total_cents":4599}]}`, "call_list"),
	}
	cases := []struct {
		name string
		msgs []openai.ChatCompletionMessageParamUnion
		bad  call
		// fixed is the repaired arguments; "" means bad passes as it is.
		fixed string
		// wantInReply are what the reprompt must say (pointer and value).
		wantInReply []string
	}{
		{name: "value from an earlier tool result passes", msgs: listed,
			bad: call{"call_lookup", "lookup_order", `{"order_id":"ord_7731"}`}},
		{name: "numeric id from a tool result passes", msgs: listed,
			bad: call{"call_inv", "get_invoice", `{"invoice_number":48213}`}},
		{name: "numeric id never seen", msgs: listed,
			bad:   call{"call_inv", "get_invoice", `{"invoice_number":48214}`},
			fixed: `{"invoice_number":48213}`, wantInReply: []string{"/invoice_number", `"48214"`}},
		{name: "value never seen",
			msgs:  []openai.ChatCompletionMessageParamUnion{user("Where is my order ord_1? It has not arrived.")},
			bad:   call{"call_lookup", "lookup_order", `{"order_id":"ord_48213"}`},
			fixed: `{"order_id":"ord_1"}`, wantInReply: []string{"/order_id", `"ord_48213"`}},
		{name: "a longer token does not vouch",
			msgs:  []openai.ChatCompletionMessageParamUnion{user(`Please check order "ord_12" for me.`)},
			bad:   call{"call_lookup", "lookup_order", `{"order_id":"ord_1"}`},
			fixed: `{"order_id":"ord_12"}`, wantInReply: []string{"/order_id", `"ord_1"`}},
		{name: "array values each present",
			msgs: []openai.ChatCompletionMessageParamUnion{user("Cancel ord_1 and ord_2, I ordered them twice.")},
			bad:  call{"call_cancel", "cancel_orders", `{"order_ids":["ord_1","ord_2"]}`}},
		{name: "one array value never seen",
			msgs:  []openai.ChatCompletionMessageParamUnion{user("Cancel ord_1 and ord_2, I ordered them twice.")},
			bad:   call{"call_cancel", "cancel_orders", `{"order_ids":["ord_1","ord_9"]}`},
			fixed: `{"order_ids":["ord_1","ord_2"]}`, wantInReply: []string{"/order_ids", `"ord_9"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first := callsAnswer("chatcmpl-first", c.bad)
			replies := []mockReply{first}
			if c.fixed != "" {
				replies = append(replies, callsAnswer("chatcmpl-second", call{"call_new", c.bad.Name, c.fixed}))
			}
			m := newMock(t, replies...)
			g, logs := startGateLogged(t, config(m, "", semCatalog(semVersion, "", semTools)))
			r := chat(t, g.URL, semParams(t, c.msgs...))
			got := r.ok(t)
			if c.fixed == "" {
				expectCalls(t, callsOf(t, got, 0), gotCall(c.bad))
				expectHeaders(t, r, "pass", 1)
				expectCount(t, m, 1)
				if string(r.Raw) != first.Body {
					t.Errorf("a valid answer was not forwarded byte for byte:\n got  %s\n want %s", r.Raw, first.Body)
				}
				return
			}
			expectCalls(t, callsOf(t, got, 0), gotCall{c.bad.ID, c.bad.Name, c.fixed})
			expectHeaders(t, r, "reprompted", 2)
			expectCount(t, m, 2)
			reply := onlyReply(t, m, first, false)
			for _, w := range c.wantInReply {
				if !strings.Contains(reply, w) {
					t.Errorf("reprompt does not name %s:\n%s", w, reply)
				}
			}
			// The reprompt names the bad value for the model; the logs never do.
			bad := c.wantInReply[len(c.wantInReply)-1]
			expectNotLogged(t, logs, strings.Trim(bad, `"`))
			var n int
			for _, e := range logs.FilterMessage("request").All() {
				if fs, ok := e.ContextMap()["findings"].([]any); ok && len(fs) > 0 && fs[0] == "provenance" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("want one request log line with the provenance finding, got %d:\n%s", n, logDump(t, logs))
			}
		})
	}
}

// SPEC §4 and §5: an invented value the model will not give up escalates
// with a provenance finding. The reprompt names the value to the model;
// the escalation's findings, the sink record (with escalation.redact) and
// the logs never carry it.
func TestSemanticsProvenancePersistsToEscalation(t *testing.T) {
	first := callsAnswer("chatcmpl-first", call{"call_lookup", "lookup_order", `{"order_id":"ord_48213"}`})
	second := callsAnswer("chatcmpl-second", call{"call_again", "lookup_order", `{"order_id":"ord_48219"}`})
	m := newMock(t, first, second)
	sinkFile := filepath.Join(t.TempDir(), "escalations.jsonl")
	rest := "escalation:\n  redact: [/order_id]\n  sinks:\n    file: " + sinkFile + "\n"
	g, logs := startGateLogged(t, config(m, "", semCatalog(semVersion, "", semTools)+rest))
	r := chat(t, g.URL, semParams(t, openai.UserMessage("Where is my order ord_1? It has not arrived.")))
	e := escalated(t, r)
	if e.Code != "provenance" {
		t.Errorf("code %q (codes %v), want provenance", e.Code, e.Escalation.Codes)
	}
	expectHeaders(t, r, "escalated", 2)
	expectCount(t, m, 2)
	if reply := onlyReply(t, m, first, false); !strings.Contains(reply, `"ord_48213"`) || !strings.Contains(reply, "/order_id") {
		t.Errorf("reprompt does not name the pointer and the value:\n%s", reply)
	}
	var found bool
	for _, a := range e.Escalation.Attempts {
		for _, f := range a.Findings {
			if f.Code == "provenance" && f.Pointer == "/order_id" {
				found = true
			}
			if strings.Contains(f.Message, "ord_482") {
				t.Errorf("finding message quotes the value: %q", f.Message)
			}
		}
	}
	if !found {
		t.Errorf("no provenance finding at /order_id in %+v", e.Escalation.Attempts)
	}

	// The file sink writes in the background.
	var line []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(sinkFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			line = b
			break
		}
	}
	if line == nil {
		t.Fatalf("the escalation never reached the file sink")
	}
	var rec struct {
		Escalation escalation `json:"escalation"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(line), &rec); err != nil {
		t.Fatalf("sink record %s: %v", line, err)
	}
	if rec.Escalation.ID != e.Escalation.ID || len(rec.Escalation.Codes) == 0 || rec.Escalation.Codes[0] != "provenance" {
		t.Errorf("sink record %s", line)
	}
	if !bytes.Contains(line, []byte(`"pointer":"/order_id"`)) {
		t.Errorf("sink record lacks the finding's pointer: %s", line)
	}
	for _, v := range []string{"ord_48213", "ord_48219"} {
		if bytes.Contains(line, []byte(v)) {
			t.Errorf("sink record carries the value %s: %s", v, line)
		}
	}
	expectNotLogged(t, logs, "ord_48213", "ord_48219")
	if len(logs.FilterMessage("escalation").All()) != 1 {
		t.Errorf("want one escalation log line:\n%s", logDump(t, logs))
	}
}

// SPEC §4: assistant text is never evidence. A value only the model said
// (in prose or in its own earlier call) cannot vouch for itself.
func TestSemanticsProvenanceAssistantCannotLaunder(t *testing.T) {
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("I lost my order number, can you find it?"),
		openai.AssistantMessage("No problem: your most recent order is ord_555."),
		openai.UserMessage("Great, what's its status?"),
		assistantCalls(call{"call_prev", "lookup_order", `{"order_id":"ord_555"}`}),
		openai.ToolMessage(`{"error":"order not found"}`, "call_prev"),
	}
	bad := call{"call_lookup", "lookup_order", `{"order_id":"ord_555"}`}
	first := callsAnswer("chatcmpl-first", bad)
	m := newMock(t, first, callsAnswer("chatcmpl-second", call{"call_again", "lookup_order", `{"order_id":"ord_555"}`}))
	g := semGate(t, m, "")
	r := chat(t, g.URL, semParams(t, msgs...))
	e := escalated(t, r)
	if e.Code != "provenance" {
		t.Errorf("code %q (codes %v), want provenance", e.Code, e.Escalation.Codes)
	}
	expectHeaders(t, r, "escalated", 2)
	expectCount(t, m, 2)
	if reply := onlyReply(t, m, first, false); !strings.Contains(reply, "/order_id") || !strings.Contains(reply, `"ord_555"`) {
		t.Errorf("reprompt %q", reply)
	}
	if recs := g.Sink.records(); len(recs) != 1 || recs[0].Escalation.ID != e.Escalation.ID {
		t.Errorf("sinks got %d records, want the escalation", len(recs))
	}
}

// SPEC §2 and §4: CEL rules over args and tool.
func TestSemanticsRules(t *testing.T) {
	refundMsg := openai.UserMessage("Please refund order ord_1, it arrived broken.")
	cases := []struct {
		name  string
		bad   call
		fixed string // "" when the call passes as it is
		// again is a second bad answer: the finding persists and escalates.
		again   string
		wantMsg string
	}{
		{name: "rule true passes", bad: call{"call_refund", "issue_refund", `{"order_id":"ord_1","amount_cents":5000}`}},
		{name: "has() and tool in a rule pass", bad: call{"call_refund", "issue_refund", `{"order_id":"ord_1","amount_cents":5000,"currency":"EUR"}`}},
		{name: "rule false is reprompted and repaired",
			bad:     call{"call_refund", "issue_refund", `{"order_id":"ord_1","amount_cents":250000}`},
			fixed:   `{"order_id":"ord_1","amount_cents":90000}`,
			wantMsg: "refunds above 1000.00 need a person"},
		{name: "second rule false is reprompted and repaired",
			bad:     call{"call_refund", "issue_refund", `{"order_id":"ord_1","amount_cents":5000,"currency":"JPY"}`},
			fixed:   `{"order_id":"ord_1","amount_cents":5000,"currency":"USD"}`,
			wantMsg: "refunds are paid in USD or EUR only"},
		{name: "rule false twice escalates",
			bad:     call{"call_refund", "issue_refund", `{"order_id":"ord_1","amount_cents":250000}`},
			again:   `{"order_id":"ord_1","amount_cents":200000}`,
			wantMsg: "refunds above 1000.00 need a person"},
		{name: "rule reading a missing optional key is a violation",
			bad:     call{"call_note", "add_order_note", `{"order_id":"ord_1"}`},
			again:   `{"order_id":"ord_1"}`,
			wantMsg: "rule could not be evaluated: notes are limited to 500 characters"},
		{name: "missing optional key supplied on reprompt",
			bad:     call{"call_note", "add_order_note", `{"order_id":"ord_1"}`},
			fixed:   `{"order_id":"ord_1","note":"customer called twice"}`,
			wantMsg: "rule could not be evaluated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first := callsAnswer("chatcmpl-first", c.bad)
			replies := []mockReply{first}
			switch {
			case c.fixed != "":
				replies = append(replies, callsAnswer("chatcmpl-second", call{"call_new", c.bad.Name, c.fixed}))
			case c.again != "":
				replies = append(replies, callsAnswer("chatcmpl-second", call{"call_new", c.bad.Name, c.again}))
			}
			m := newMock(t, replies...)
			g := semGate(t, m, "")
			r := chat(t, g.URL, semParams(t, refundMsg))
			switch {
			case c.fixed == "" && c.again == "":
				expectCalls(t, callsOf(t, r.ok(t), 0), gotCall(c.bad))
				expectHeaders(t, r, "pass", 1)
				expectCount(t, m, 1)
				return
			case c.fixed != "":
				expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{c.bad.ID, c.bad.Name, c.fixed})
				expectHeaders(t, r, "reprompted", 2)
			default:
				e := escalated(t, r)
				if e.Code != "rule_violation" {
					t.Errorf("code %q (codes %v), want rule_violation", e.Code, e.Escalation.Codes)
				}
				var found bool
				for _, a := range e.Escalation.Attempts {
					for _, f := range a.Findings {
						if f.Code == "rule_violation" && f.Keyword == "rule" && f.Message == c.wantMsg {
							found = true
						}
					}
				}
				if !found {
					t.Errorf("no rule_violation finding with message %q: %+v", c.wantMsg, e.Escalation.Attempts)
				}
				expectHeaders(t, r, "escalated", 2)
			}
			expectCount(t, m, 2)
			if reply := onlyReply(t, m, first, false); !strings.Contains(reply, c.wantMsg) {
				t.Errorf("reprompt does not carry the rule's message %q:\n%s", c.wantMsg, reply)
			}
		})
	}
}

// SPEC §2: a rule over a model-chosen list is cut off by the cost limit and
// counts as a violation; it never holds the request.
func TestSemanticsRuleCostLimit(t *testing.T) {
	items := make([]string, 5000)
	for i := range items {
		items[i] = fmt.Sprintf("sku_%05d", i)
	}
	args, _ := json.Marshal(map[string]any{"tag": "summer-sale", "items": items})
	bad := call{"call_tag", "tag_items", string(args)}
	first := callsAnswer("chatcmpl-first", bad)
	m := newMock(t, first, callsAnswer("chatcmpl-second", call{"call_tag2", "tag_items", string(args)}))
	g := semGate(t, m, "")
	start := time.Now()
	r := chat(t, g.URL, semParams(t, openai.UserMessage("Tag every item of the summer catalog with summer-sale.")))
	elapsed := time.Since(start)
	e := escalated(t, r)
	if e.Code != "rule_violation" {
		t.Errorf("code %q (codes %v), want rule_violation", e.Code, e.Escalation.Codes)
	}
	expectHeaders(t, r, "escalated", 2)
	expectCount(t, m, 2)
	if reply := onlyReply(t, m, first, false); !strings.Contains(reply, "rule could not be evaluated") {
		t.Errorf("reprompt %q", reply)
	}
	// 5000² steps would take minutes; the cost limit stops each rule within
	// a few thousand. The bound leaves room for -race and a slow machine.
	if elapsed > 10*time.Second {
		t.Errorf("a cost-limited rule took %v", elapsed)
	}
}

// SPEC §2: a rule that does not compile rejects the config, naming the
// expression, so it never reaches a request.
func TestSemanticsRuleCompileErrors(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"args.amount_cents <=", "Syntax error"},
		{"args.amount_cents + 1", "must be a bool expression"},
		{"args.amount_cents <= limit", "undeclared reference"},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			y := "upstreams: [{url: 'http://127.0.0.1:1'}]\ncatalog:\n  tools:\n" +
				"    - name: issue_refund\n      description: Refund an order.\n" +
				`      parameters: {"type":"object","properties":{"amount_cents":{"type":"integer"}}}` + "\n" +
				"      rules:\n        - expr: " + strconv.Quote(c.expr) + "\n          message: too much\n"
			cfg, err := catalog.Parse([]byte(y), "rules.yaml")
			if err == nil {
				_, err = catalog.Compile(cfg, t.TempDir())
			}
			if err == nil {
				t.Fatalf("a config with rule %q was accepted", c.expr)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.expr) || !strings.Contains(msg, c.want) || !strings.Contains(msg, "rules[0].expr") {
				t.Errorf("error does not name the expression %q, its field and %q:\n%s", c.expr, c.want, msg)
			}
		})
	}
}

// confirmCall decodes an escalation's call in the Chat Completions shape.
func confirmCall(t *testing.T, raw json.RawMessage) gotCall {
	t.Helper()
	var c struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Type != "function" {
		t.Fatalf("escalation call %s is not a chat tool call: %v", raw, err)
	}
	return gotCall{c.ID, c.Function.Name, c.Function.Arguments}
}

// SPEC §4 rung 5 and §5: a valid call to a confirm tool needs a person; the
// escalation hands over the call as the route spells it.
func TestSemanticsConfirm(t *testing.T) {
	msg := openai.UserMessage("Please close my account acct_42, I am moving abroad.")
	closeCall := call{"call_close", "close_account", `{"account_id":"acct_42"}`}

	t.Run("error mode", func(t *testing.T) {
		m := newMock(t, callsAnswer("chatcmpl-first", closeCall))
		g := semGate(t, m, "")
		r := chat(t, g.URL, semParams(t, msg))
		e := escalated(t, r)
		if e.Code != "confirmation_required" || len(e.Escalation.Codes) != 1 {
			t.Errorf("code %q codes %v, want confirmation_required alone", e.Code, e.Escalation.Codes)
		}
		expectCalls(t, []gotCall{confirmCall(t, e.Escalation.Call)}, gotCall(closeCall))
		expectHeaders(t, r, "escalated", 1)
		expectCount(t, m, 1)
		recs := escalationRecords(g.Sink.records())
		if len(recs) != 1 || recs[0].Escalation.ID != e.Escalation.ID || !sameJSON(string(recs[0].Escalation.Call), string(e.Escalation.Call)) {
			t.Errorf("sinks got %d records, want the escalation with its call", len(recs))
		}
	})

	t.Run("message mode holds in error mode", func(t *testing.T) {
		// SPEC §5a: a held call is released on the client's retry, which
		// only an error asks for, so message mode escalates it as an error.
		m := newMock(t, callsAnswer("chatcmpl-first", closeCall))
		g := semGate(t, m, "escalation:\n  mode: message\n")
		r := chat(t, g.URL, semParams(t, msg))
		e := escalated(t, r)
		if e.Code != "confirmation_required" {
			t.Errorf("code %q", e.Code)
		}
		if a := e.Escalation.Approval; a == nil || !strings.HasPrefix(a.ID, "apr_") || a.State != "pending" {
			t.Errorf("approval %+v", a)
		}
		expectCount(t, m, 1)
	})

	t.Run("repaired call then confirmation", func(t *testing.T) {
		// The first call invents the account; the repaired one is what the
		// person is asked to approve, under the original call id.
		first := callsAnswer("chatcmpl-first", call{"call_close", "close_account", `{"account_id":"acct_99"}`})
		m := newMock(t, first, callsAnswer("chatcmpl-second", call{"call_new", "close_account", `{"account_id":"acct_42"}`}))
		g := semGate(t, m, "")
		r := chat(t, g.URL, semParams(t, msg))
		e := escalated(t, r)
		if e.Code != "confirmation_required" {
			t.Errorf("code %q (codes %v)", e.Code, e.Escalation.Codes)
		}
		expectCalls(t, []gotCall{confirmCall(t, e.Escalation.Call)}, gotCall(closeCall))
		expectHeaders(t, r, "escalated", 2)
		expectCount(t, m, 2)
		if reply := onlyReply(t, m, first, false); !strings.Contains(reply, "/account_id") {
			t.Errorf("reprompt %q", reply)
		}
	})
}

const abstainName = "toolgate_no_suitable_tool"

// SPEC §4 rung 6: the abstain exit is offered only when the model chooses
// freely, appended last with everything else as the client sent it, and its
// use is a plain answer, not a tool call and not a hallucination.
func TestSemanticsAbstain(t *testing.T) {
	abstainOn := "abstain:\n  enabled: true\n"
	msg := openai.UserMessage("Book me a table for two at an Italian place tonight.")
	useExit := call{"call_exit", abstainName, `{"reason":"None of my tools can book a restaurant."}`}

	for _, choice := range []string{"auto", "absent"} {
		t.Run("offered with tool_choice "+choice, func(t *testing.T) {
			m := newMock(t, callsAnswer("chatcmpl-first", useExit))
			g := semGate(t, m, abstainOn)
			p := semParams(t, msg)
			if choice == "absent" {
				p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{}
			}
			r := chat(t, g.URL, p)
			got := r.ok(t)

			var sdk, up map[string]json.RawMessage
			if err := json.Unmarshal(r.Sent, &sdk); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(m.body(t, 1), &up); err != nil {
				t.Fatal(err)
			}
			if _, ok := sdk["tool_choice"]; ok != (choice == "auto") {
				t.Fatalf("the SDK request's tool_choice is not %s: %s", choice, r.Sent)
			}
			for k, v := range sdk {
				if k != "tools" && !bytes.Equal(v, up[k]) {
					t.Errorf("field %q changed: %s -> %s", k, v, up[k])
				}
			}
			if len(up) != len(sdk) {
				t.Errorf("the upstream request has fields the client did not send: %s", m.body(t, 1))
			}
			var sdkTools, upTools []json.RawMessage
			_ = json.Unmarshal(sdk["tools"], &sdkTools)
			_ = json.Unmarshal(up["tools"], &upTools)
			if len(upTools) != len(sdkTools)+1 {
				t.Fatalf("upstream got %d tools, the client sent %d", len(upTools), len(sdkTools))
			}
			for i := range sdkTools {
				if !bytes.Equal(sdkTools[i], upTools[i]) {
					t.Errorf("tool %d changed:\n sent %s\n got  %s", i, sdkTools[i], upTools[i])
				}
			}
			var exit struct {
				Type     string `json:"type"`
				Function struct {
					Name        string `json:"name"`
					Description string `json:"description"`
					Parameters  struct {
						Required []string `json:"required"`
					} `json:"parameters"`
				} `json:"function"`
			}
			if err := json.Unmarshal(upTools[len(upTools)-1], &exit); err != nil || exit.Type != "function" ||
				exit.Function.Name != abstainName || exit.Function.Description == "" ||
				len(exit.Function.Parameters.Required) != 1 || exit.Function.Parameters.Required[0] != "reason" {
				t.Errorf("last tool %s is not the abstain exit", upTools[len(upTools)-1])
			}

			ch := got.Choices[0]
			if ch.Message.Content != "None of my tools can book a restaurant." || len(ch.Message.ToolCalls) != 0 || ch.FinishReason != "stop" {
				t.Errorf("abstention answer: content %q, %d tool calls, finish %q", ch.Message.Content, len(ch.Message.ToolCalls), ch.FinishReason)
			}
			if strings.Contains(string(r.Raw), abstainName) {
				t.Errorf("the virtual tool reached the client: %s", r.Raw)
			}
			expectHeaders(t, r, "abstained", 1)
			expectCount(t, m, 1)
			if n := counterSum(t, g, "toolgate_hallucinations_total"); n != 0 {
				t.Errorf("an abstention was counted as a hallucination (%v)", n)
			}
			if n := counterSum(t, g, "toolgate_tool_calls_total"); n != 0 {
				t.Errorf("an abstention was counted as a model tool call (%v)", n)
			}
			if n := testutil.ToFloat64(g.App.Metrics.Requests.WithLabelValues("chat", "abstained")); n != 1 {
				t.Errorf("toolgate_requests_total{outcome=abstained} = %v", n)
			}
			if n := len(g.Sink.records()); n != 0 {
				t.Errorf("an abstention reached the sinks")
			}
		})
	}

	t.Run("used in answer to a reprompt", func(t *testing.T) {
		// The model invents an order id, is told so, and takes the exit
		// rather than guess again: that is the honest answer, not a
		// hallucination to escalate.
		first := callsAnswer("chatcmpl-first", call{"call_lookup", "lookup_order", `{"order_id":"ord_48213"}`})
		m := newMock(t, first, callsAnswer("chatcmpl-second",
			call{"call_exit", abstainName, `{"reason":"I need your order number to look it up."}`}))
		g := semGate(t, m, abstainOn)
		r := chat(t, g.URL, semParams(t, openai.UserMessage("Where is my order?")))
		got := r.ok(t)
		ch := got.Choices[0]
		if ch.Message.Content != "I need your order number to look it up." || len(ch.Message.ToolCalls) != 0 || ch.FinishReason != "stop" {
			t.Errorf("abstention answer: content %q, %d tool calls, finish %q", ch.Message.Content, len(ch.Message.ToolCalls), ch.FinishReason)
		}
		expectHeaders(t, r, "abstained", 2)
		expectCount(t, m, 2)
		if reply := onlyReply(t, m, first, false); !strings.Contains(reply, "/order_id") {
			t.Errorf("reprompt %q", reply)
		}
		if n := counterSum(t, g, "toolgate_hallucinations_total"); n != 0 {
			t.Errorf("toolgate_hallucinations_total = %v", n)
		}
		if n := len(g.Sink.records()); n != 0 {
			t.Errorf("an abstention reached the sinks")
		}
	})

	t.Run("used in answer to a correction", func(t *testing.T) {
		// The invented tool is still the model's hallucination; the exit it
		// takes when told the real names is still an abstention.
		first := callsAnswer("chatcmpl-first", call{"call_table", "book_restaurant", `{"party":2}`})
		m := newMock(t, first, callsAnswer("chatcmpl-second",
			call{"call_exit", abstainName, `{"reason":"I cannot book restaurants."}`}))
		g := semGate(t, m, abstainOn+"recovery:\n  strategy: correction\n")
		r := chat(t, g.URL, semParams(t, msg))
		ch := r.ok(t).Choices[0]
		if ch.Message.Content != "I cannot book restaurants." || len(ch.Message.ToolCalls) != 0 {
			t.Errorf("abstention answer: content %q, %d tool calls", ch.Message.Content, len(ch.Message.ToolCalls))
		}
		expectHeaders(t, r, "abstained", 2)
		if reply := onlyReply(t, m, first, false); !strings.Contains(reply, `"book_restaurant"`) || strings.Contains(reply, abstainName) {
			t.Errorf("correction reply must name the unknown tool and only the real ones: %q", reply)
		}
		if n := counterSum(t, g, "toolgate_hallucinations_total"); n != 1 {
			t.Errorf("toolgate_hallucinations_total = %v, want 1 (the invented tool)", n)
		}
	})

	lookup := call{"call_lookup", "lookup_order", `{"order_id":"ord_1"}`}
	own := sdkTool(t, abstainName, "The client's own tool that happens to have this name.",
		json.RawMessage(`{"type":"object","properties":{"why":{"type":"string"}}}`))
	cases := []struct {
		name    string
		rest    string
		params  func(p *openai.ChatCompletionNewParams)
		answer  call
		outcome string
	}{
		{"tool_choice required", abstainOn, func(p *openai.ChatCompletionNewParams) {
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		}, lookup, "pass"},
		{"tool_choice names a tool", abstainOn, func(p *openai.ChatCompletionNewParams) {
			p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "lookup_order"})
		}, lookup, "pass"},
		{"shadow mode", abstainOn + "mode: shadow\n", func(*openai.ChatCompletionNewParams) {}, lookup, "shadow-pass"},
		{"a client tool has the name", abstainOn, func(p *openai.ChatCompletionNewParams) {
			p.Tools = append(p.Tools, own)
		}, call{"call_own", abstainName, `{"why":"the client's tool"}`}, "pass"},
		{"disabled", "", func(*openai.ChatCompletionNewParams) {}, lookup, "pass"},
	}
	for _, c := range cases {
		t.Run("not offered: "+c.name, func(t *testing.T) {
			answer := callsAnswer("chatcmpl-first", c.answer)
			m := newMock(t, answer)
			g := semGate(t, m, c.rest)
			p := semParams(t, openai.UserMessage("Where is my order ord_1?"))
			c.params(&p)
			r := chat(t, g.URL, p)
			got := r.ok(t)
			if !bytes.Equal(m.body(t, 1), r.Sent) {
				t.Errorf("the request was changed:\n sdk  %s\n sent %s", r.Sent, m.body(t, 1))
			}
			// The answer is the upstream's own: a call to the client's
			// tool of that name is an ordinary call.
			expectCalls(t, callsOf(t, got, 0), gotCall(c.answer))
			if string(r.Raw) != answer.Body {
				t.Errorf("the answer was changed: %s", r.Raw)
			}
			expectHeaders(t, r, c.outcome, 1)
			expectCount(t, m, 1)
		})
	}
}

// shortlistCatalog is a realistic 200-tool catalog: 25 business objects
// times 8 verbs, every tool substitutable.
func shortlistCatalog() []semTool {
	objects := []string{"user", "user_details", "user_preferences", "order", "order_items", "invoice", "payment",
		"refund", "product", "inventory", "shipment", "customer", "account", "subscription", "ticket", "comment",
		"project", "task", "team", "document", "report", "calendar_event", "notification", "webhook", "api_key"}
	verbs := []struct{ verb, does string }{
		{"get", "Get one %s by its id."},
		{"list", "List every %s, newest first, with paging."},
		{"create", "Create a new %s from the given fields."},
		{"update", "Update the fields of an existing %s."},
		{"delete", "Delete a %s permanently."},
		{"search", "Search %s records by free text."},
		{"archive", "Archive a %s so it no longer shows by default."},
		{"export", "Export %s data as CSV."},
	}
	var out []semTool
	for _, o := range objects {
		human := strings.ReplaceAll(o, "_", " ")
		for _, v := range verbs {
			out = append(out, semTool{
				Name:   v.verb + "_" + o,
				Desc:   fmt.Sprintf(v.does, human),
				Params: fmt.Sprintf(`{"type":"object","properties":{"%s_id":{"type":"string"},"query":{"type":"string"}}}`, strings.Split(o, "_")[0]),
			})
		}
	}
	return out
}

// SPEC §4 rung 2: above recovery.shortlist tools, the decision prompt offers
// the most similar ones only, and the right one is among them.
func TestSemanticsShortlist(t *testing.T) {
	tools := shortlistCatalog()
	if len(tools) != 200 {
		t.Fatalf("catalog has %d tools", len(tools))
	}
	invented := call{"call_user", "get_user_detials", `{"user_id":"u_381"}`}
	first := callsAnswer("chatcmpl-first", invented)
	m := newMock(t, first, substitute("get_user_details", `{"user_id":"u_381"}`, 0.93))
	g := startGate(t, config(m, "", semCatalog("big-v1", "", tools)+"recovery:\n  shortlist: 20\n"))
	p := openai.ChatCompletionNewParams{
		Model:    "gpt-4o-2024-08-06",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Show me the profile details of user u_381.")},
	}
	for _, tl := range tools {
		p.Tools = append(p.Tools, sdkTool(t, tl.Name, tl.Desc, json.RawMessage(tl.Params)))
	}
	r := chat(t, g.URL, p)
	expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{invented.ID, "get_user_details", `{"user_id":"u_381"}`})
	expectHeaders(t, r, "substituted", 2)
	expectCount(t, m, 2)

	prompt := onlyReply(t, m, first, true)
	var listed []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	for _, line := range strings.Split(prompt, "\n") {
		if strings.HasPrefix(line, `[{"name":`) {
			if err := json.Unmarshal([]byte(line), &listed); err != nil {
				t.Fatalf("catalog block %s: %v", line, err)
			}
		}
	}
	if len(listed) != 20 {
		t.Fatalf("the recovery prompt lists %d tools, want 20:\n%s", len(listed), prompt)
	}
	known := map[string]string{}
	for _, tl := range tools {
		known[tl.Name] = tl.Desc
	}
	seen := map[string]bool{}
	var names []string
	for _, l := range listed {
		names = append(names, l.Name)
		if seen[l.Name] {
			t.Errorf("%s listed twice", l.Name)
		}
		seen[l.Name] = true
		if d, ok := known[l.Name]; !ok || d != l.Description || len(l.Parameters) == 0 {
			t.Errorf("listed tool %+v is not the catalog's", l)
		}
	}
	t.Logf("shortlist for %s: %v", invented.Name, names)
	if !seen["get_user_details"] {
		t.Errorf("the shortlist lacks get_user_details: %v", names)
	}
	if strings.Count(prompt, `"name":`) != 20 {
		t.Errorf("the prompt names tools outside the shortlist")
	}
}

// SPEC §2 catalog.strip_prefixes: a configured provider prefix is removed
// before an exact match; nothing else is loosened.
func TestSemanticsStripPrefixes(t *testing.T) {
	weatherTool := semTool{Name: "get_weather", Desc: "Current weather for a city.",
		Params: `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`}
	cases := []struct {
		name   string
		called string
		result string
	}{
		{"default_api prefix", "default_api:get_weather", "prefix_stripped"},
		{"functions prefix", "functions.get_weather", "prefix_stripped"},
		{"exact name", "get_weather", "valid"},
		{"prefix in another case", "Default_api:get_weather", "unknown_tool"},
		{"name in another case", "get_Weather", "unknown_tool"},
		{"prefix twice", "functions.functions.get_weather", "unknown_tool"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := call{"call_w", c.called, `{"city":"Lisbon"}`}
			first := callsAnswer("chatcmpl-first", bad)
			m := newMock(t, first, escalate("no such tool", "weather in Lisbon", "", 0.2))
			cat := semCatalog("strip-v1", `strip_prefixes: ["default_api:", "functions."]`, []semTool{weatherTool})
			g := startGate(t, config(m, "", cat))
			p := openai.ChatCompletionNewParams{
				Model:    "gpt-4o-2024-08-06",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What's the weather in Lisbon?")},
				Tools:    []openai.ChatCompletionToolUnionParam{sdkTool(t, weatherTool.Name, weatherTool.Desc, json.RawMessage(weatherTool.Params))},
			}
			r := chat(t, g.URL, p)
			tool, hall := "get_weather", 0
			if c.result == "unknown_tool" {
				e := escalated(t, r)
				if e.Code != "unknown_tool" {
					t.Errorf("code %q (codes %v), want unknown_tool", e.Code, e.Escalation.Codes)
				}
				expectHeaders(t, r, "escalated", 2)
				expectCount(t, m, 2)
				if prompt := onlyReply(t, m, first, true); !strings.Contains(prompt, strconv.Quote(c.called)) {
					t.Errorf("the recovery prompt does not name %s", c.called)
				}
				tool, hall = "_unknown", 1
			} else {
				// The agent gets the real tool's name: it dispatches by name,
				// and the prefix was declared by the operator.
				expectCalls(t, callsOf(t, r.ok(t), 0), gotCall{bad.ID, "get_weather", bad.Args})
				if c.result == "valid" && string(r.Raw) != first.Body {
					t.Errorf("a valid answer was not forwarded byte for byte: %s", r.Raw)
				}
				if c.result == "prefix_stripped" && strings.Contains(string(r.Raw), c.called) {
					t.Errorf("the prefixed name reached the agent: %s", r.Raw)
				}
				expectHeaders(t, r, "pass", 1)
				expectCount(t, m, 1)
			}
			// Exactly one call was counted, under the catalog name (or
			// _unknown) with the right result.
			if n := testutil.ToFloat64(g.App.Metrics.ToolCalls.WithLabelValues("chat", "strip-v1", tool, c.result)); n != 1 {
				t.Errorf("toolgate_tool_calls_total{tool=%q,result=%q} = %v, want 1", tool, c.result, n)
			}
			if n := counterSum(t, g, "toolgate_tool_calls_total"); n != 1 {
				t.Errorf("toolgate_tool_calls_total sums to %v, want 1", n)
			}
			if n := counterSum(t, g, "toolgate_hallucinations_total"); int(n) != hall {
				t.Errorf("toolgate_hallucinations_total = %v, want %d", n, hall)
			}
		})
	}
}

// counterSum adds up every series of a counter family. Series that exist
// at zero (toolgate pre-creates some so dashboards show them) add nothing.
func counterSum(t *testing.T, g *gate, name string) float64 {
	t.Helper()
	mfs, err := g.App.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// SPEC §9: `toolgate check` validates the config and lints the catalog,
// one warning line per weakness.
func TestSemanticsCheckLint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command: " + err.Error())
	}
	tools := []semTool{
		{Name: "ping", Params: `{"type":"object"}`},
		{Name: "get_user", Desc: "Look up a user account by its id and return the profile.",
			Params: `{"type":"object","properties":{"user_id":{"type":"string"}}}`},
		{Name: "fetch_user", Desc: "Look up a user account by its id and return the profile fields.",
			Params: `{"type":"object","properties":{"user_id":{"type":"string"}}}`},
		{Name: "lookup_order", Desc: "Look up one order by its id and return its status.",
			Params: `{"type":"object","properties":{"order_id":{"type":"string"}}}`,
			Extra:  "provenance: [/orderId]"},
		{Name: "issue_refund", Desc: "Refund part or all of an order to the original payment method.",
			Params: `{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}}}`,
			Extra:  "rules:\n  - expr: \"args.amount <= 100000\"\n    message: refunds above 1000.00 need a person"},
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	y := "upstreams:\n  - url: https://api.openai.com\n" + semCatalog("lint-v1", "", tools)
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "run", "./cmd/toolgate", "check", "--config", path)
	cmd.Dir = ".."
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolgate check: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `: valid; catalog version lint-v1, 5 tools$`),
		regexp.MustCompile(`^warning: tool issue_refund: rule "args\.amount <= 100000" reads args\.amount, which its schema does not define$`),
		regexp.MustCompile(`^warning: tool lookup_order: provenance pointer /orderId is not a property of its schema$`),
		regexp.MustCompile(`^warning: tool ping has no description; models pick tools by their descriptions$`),
		regexp.MustCompile(`^warning: tools fetch_user and get_user have near-identical descriptions \(similarity 0\.[0-9]{2}\); a model may confuse them$`),
	}
	// The warnings come first; the strict fit table (docs/strict.md)
	// follows them.
	if len(lines) <= len(want) || !strings.HasPrefix(lines[len(want)], "strict subsets (") {
		t.Fatalf("toolgate check printed %d lines, want %d warnings then the strict table:\n%s", len(lines), len(want), stdout.String())
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d = %q, want %s", i+1, lines[i], re)
		}
	}
}
