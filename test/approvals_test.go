package test

// End to end tests of approvals (SPEC §5a): a confirm call held, approved
// through the admin API and released once, through the official SDKs of
// the four routes, plain and streamed; every refusal with its code and
// nothing sent upstream; replicas sharing redis; the file store across a
// restart.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/genai"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/test/internal/proc"
)

// ticket is an escalation's approval object (SPEC §5a).
type ticket struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ExpiresAt  string `json:"expires_at"`
	CallDigest string `json:"call_digest"`
	Secret     string `json:"secret"`
}

// escalationRecords keeps the sink records that are escalations, leaving
// out the approvals' state changes.
func escalationRecords(recs []*pipeline.EscalationRecord) []*pipeline.EscalationRecord {
	var out []*pipeline.EscalationRecord
	for _, r := range recs {
		if r.Escalation != nil {
			out = append(out, r)
		}
	}
	return out
}

// refundArgs are the arguments the model calls issue_refund with.
const refundArgs = `{"order_id":"ord_1","amount_cents":500}`

const refundSchema = `{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer","minimum":1,"maximum":%d}},"required":["order_id","amount_cents"],"additionalProperties":false}`

// refundConfig is a config with one confirm tool; maxCents bounds its
// amount, so a reload can make a held call fail.
func refundConfig(upstreamURL, approvals string, maxCents int, approver string) string {
	return "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: up\n    url: " + upstreamURL + "\n" +
		"approvals:\n" + approvals +
		"catalog:\n  version: refunds-v1\n  tools:\n    - name: issue_refund\n      description: Refund an order\n" +
		"      policy: confirm\n      approver: " + approver + "\n      parameters: " + fmt.Sprintf(refundSchema, maxCents) + "\n"
}

// refundUpstream answers every request with the model's one call to
// issue_refund, in the route's shape, and counts what it was sent.
type refundUpstream struct {
	t   *testing.T
	srv *httptest.Server
	n   atomic.Int64
}

func newRefundUpstream(t *testing.T) *refundUpstream {
	u := &refundUpstream{t: t}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *refundUpstream) serve(w http.ResponseWriter, r *http.Request) {
	u.n.Add(1)
	body, _ := io.ReadAll(r.Body)
	var head struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &head)
	ct, out := "application/json", ""
	switch p := r.URL.Path; {
	case p == "/v1/chat/completions" && head.Stream:
		ct, out = "text/event-stream", csCall("call_r1", "issue_refund", refundArgs)
	case p == "/v1/chat/completions":
		out = callsAnswer("chatcmpl-r1", call{"call_r1", "issue_refund", refundArgs}).Body
	case p == "/v1/messages":
		msg := anthMsg("msg_r1", "tool_use", anthToolUse("toolu_r1", "issue_refund", refundArgs))
		out = msg
		if head.Stream {
			ct, out = "text/event-stream", anthSSE(u.t, msg)
		}
	case p == "/v1/responses":
		a := respAnswer{ID: "resp_r1", Items: []string{respCall("fc_r1", "call_r1", "issue_refund", refundArgs)}}
		out = respObject(a, "completed", "", a.Items)
		if head.Stream {
			ct, out = "text/event-stream", string(respStreamOf(a, ""))
		}
	case strings.HasSuffix(p, ":streamGenerateContent") && r.URL.Query().Get("alt") != "sse":
		out = "[" + gemAnswer("STOP", gemFC("issue_refund", refundArgs, "")) + "\n]"
	case strings.HasSuffix(p, ":streamGenerateContent"):
		ct, out = "text/event-stream", "data: "+gemAnswer("STOP", gemFC("issue_refund", refundArgs, ""))+"\r\n\r\n"
	default:
		out = gemAnswer("STOP", gemFC("issue_refund", refundArgs, ""))
	}
	w.Header().Set("Content-Type", ct)
	_, _ = io.WriteString(w, out)
}

// wire records the status, headers and bytes of the last answer a client
// read, whatever its SDK makes of them.
type wire struct {
	mu     sync.Mutex
	status int
	header http.Header
	raw    bytes.Buffer
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	w.mu.Lock()
	w.status, w.header = resp.StatusCode, resp.Header.Clone()
	w.raw.Reset()
	w.raw.Write(b)
	w.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// sdkResult is one call through an SDK: the calls the client got and how
// the answer came.
type sdkResult struct {
	calls  []string
	err    error
	status int
	header http.Header
	raw    []byte
}

// approval returns the escalation's approval object, found anywhere in
// the error body.
func (r sdkResult) approval(t *testing.T) ticket {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.raw, &v); err != nil {
		t.Fatalf("answer is not JSON: %s", r.raw)
	}
	raw, ok := findKey(v, "approval")
	if !ok {
		t.Fatalf("no approval in %s", r.raw)
	}
	b, _ := json.Marshal(raw)
	var tk ticket
	_ = json.Unmarshal(b, &tk)
	return tk
}

// code is the error's code, wherever the route's envelope puts it.
func (r sdkResult) code() string {
	var v any
	_ = json.Unmarshal(r.raw, &v)
	c, _ := findKey(v, "code")
	if s, ok := c.(string); ok {
		return s
	}
	// Gemini's envelope has a numeric code and the name in status.
	st, _ := findKey(v, "status")
	s, _ := st.(string)
	return s
}

func findKey(v any, key string) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		if got, ok := x[key]; ok {
			return got, true
		}
		for _, c := range x {
			if got, ok := findKey(c, key); ok {
				return got, true
			}
		}
	case []any:
		for _, c := range x {
			if got, ok := findKey(c, key); ok {
				return got, true
			}
		}
	}
	return nil, false
}

// route drives one API's official SDK: send asks toolgate with the extra
// headers (the approval on a resume); changed asks something else.
type route struct {
	name string
	send func(t *testing.T, base string, stream, changed bool, h map[string]string) sdkResult
}

var routes = []route{
	{"chat", sendChat},
	{"messages", sendMessages},
	{"responses", sendResponses},
	{"gemini", sendGemini},
}

func question(changed bool) string {
	if changed {
		return "Refund order ord_1, 5 dollars, and say sorry."
	}
	return "Refund order ord_1, 5 dollars."
}

func refundSchemaMap() map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(fmt.Sprintf(refundSchema, 100000)), &m)
	return m
}

func ctx20() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

func finish(w *wire, calls []string, err error) sdkResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	return sdkResult{calls: calls, err: err, status: w.status, header: w.header, raw: append([]byte(nil), w.raw.Bytes()...)}
}

// compact writes JSON arguments one way (members sorted), so calls from
// every SDK compare.
func compact(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sendChat(t *testing.T, base string, stream, changed bool, h map[string]string) sdkResult {
	w := &wire{}
	opts := []option.RequestOption{option.WithBaseURL(base + "/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: w})}
	for k, v := range h {
		opts = append(opts, option.WithHeader(k, v))
	}
	c := openai.NewClient(opts...)
	params := openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question(changed))},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "issue_refund", Description: openai.String("Refund an order"), Parameters: refundSchemaMap()})}}
	ctx, cancel := ctx20()
	defer cancel()
	var calls []string
	if !stream {
		resp, err := c.Chat.Completions.New(ctx, params)
		if err == nil {
			for _, tc := range resp.Choices[0].Message.ToolCalls {
				calls = append(calls, tc.Function.Name+" "+compact(tc.Function.Arguments))
			}
		}
		return finish(w, calls, err)
	}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if s.Err() == nil && len(acc.Choices) > 0 {
		for _, tc := range acc.Choices[0].Message.ToolCalls {
			calls = append(calls, tc.Function.Name+" "+compact(tc.Function.Arguments))
		}
	}
	return finish(w, calls, s.Err())
}

func sendMessages(t *testing.T, base string, stream, changed bool, h map[string]string) sdkResult {
	w := &wire{}
	opts := []anthoption.RequestOption{anthoption.WithBaseURL(base), anthoption.WithAPIKey("sk-ant"), anthoption.WithMaxRetries(0),
		anthoption.WithHTTPClient(&http.Client{Transport: w})}
	for k, v := range h {
		opts = append(opts, anthoption.WithHeader(k, v))
	}
	c := anthropic.NewClient(opts...)
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5-20250929", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question(changed)))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "issue_refund", Description: anthropic.String("Refund an order"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: refundSchemaMap()["properties"], Required: []string{"order_id", "amount_cents"}}}}}}
	ctx, cancel := ctx20()
	defer cancel()
	var msg anthropic.Message
	var err error
	if !stream {
		var m *anthropic.Message
		if m, err = c.Messages.New(ctx, params); m != nil {
			msg = *m
		}
	} else {
		s := c.Messages.NewStreaming(ctx, params)
		for s.Next() {
			_ = msg.Accumulate(s.Current())
		}
		err = s.Err()
		s.Close()
	}
	var calls []string
	if err == nil {
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				calls = append(calls, b.Name+" "+compact(string(b.Input)))
			}
		}
	}
	return finish(w, calls, err)
}

func sendResponses(t *testing.T, base string, stream, changed bool, h map[string]string) sdkResult {
	w := &wire{}
	opts := []option.RequestOption{option.WithBaseURL(base + "/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: w})}
	for k, v := range h {
		opts = append(opts, option.WithHeader(k, v))
	}
	c := openai.NewClient(opts...)
	params := responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(question(changed))},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "issue_refund",
			Description: openai.String("Refund an order"), Parameters: refundSchemaMap(), Strict: openai.Bool(false)}}}}
	ctx, cancel := ctx20()
	defer cancel()
	var out []responses.ResponseOutputItemUnion
	var err error
	if !stream {
		var r *responses.Response
		if r, err = c.Responses.New(ctx, params); err == nil {
			out = r.Output
		}
	} else {
		s := c.Responses.NewStreaming(ctx, params)
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.completed" {
				out = ev.Response.Output
			}
		}
		err = s.Err()
		s.Close()
	}
	var calls []string
	for _, it := range out {
		if it.Type == "function_call" {
			calls = append(calls, it.Name+" "+compact(it.Arguments.OfString))
		}
	}
	return finish(w, calls, err)
}

func sendGemini(t *testing.T, base string, stream, changed bool, h map[string]string) sdkResult {
	w := &wire{}
	ctx, cancel := ctx20()
	defer cancel()
	hdr := http.Header{}
	for k, v := range h {
		hdr.Set(k, v)
	}
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "gem-key", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: "v1beta", Headers: hdr},
		HTTPClient:  &http.Client{Transport: w}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
		Name: "issue_refund", Description: "Refund an order", ParametersJsonSchema: refundSchemaMap()}}}},
		HTTPOptions: &genai.HTTPOptions{Headers: hdr}}
	contents := genai.Text(question(changed))
	var resps []*genai.GenerateContentResponse
	if stream {
		for chunk, e := range client.Models.GenerateContentStream(ctx, "gemini-2.5-flash", contents, cfg) {
			if e != nil {
				err = e
				break
			}
			resps = append(resps, chunk)
		}
	} else {
		var r *genai.GenerateContentResponse
		if r, err = client.Models.GenerateContent(ctx, "gemini-2.5-flash", contents, cfg); err == nil {
			resps = append(resps, r)
		}
	}
	var calls []string
	for _, r := range resps {
		for _, fc := range r.FunctionCalls() {
			b, _ := json.Marshal(fc.Args)
			calls = append(calls, fc.Name+" "+compact(string(b)))
		}
	}
	return finish(w, calls, err)
}

// approvalGate is one toolgate started from a config file, as the binary
// starts, so a test can reload or restart it.
type approvalGate struct {
	t    *testing.T
	path string
	app  *app.App
	sink *recordingSink
}

func startApprovalGate(t *testing.T, dir, cfg string) *approvalGate {
	t.Helper()
	path := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &approvalGate{t: t, path: path, sink: &recordingSink{}}
	a, err := app.Start(path, app.Options{Logger: testLogger(t), Sink: g.sink})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	g.app = a
	t.Cleanup(g.stop)
	return g
}

func (g *approvalGate) stop() {
	if g.app == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = g.app.Shutdown(ctx)
	g.app = nil
}

func (g *approvalGate) url() string { return "http://" + g.app.ProxyAddr() }

// reload rewrites the config file and reloads it.
func (g *approvalGate) reload(cfg string) {
	g.t.Helper()
	if err := os.WriteFile(g.path, []byte(cfg), 0o600); err != nil {
		g.t.Fatal(err)
	}
	if err := g.app.Reload(); err != nil {
		g.t.Fatalf("reload: %v", err)
	}
}

// decide posts a decision to the admin API and returns its status.
func (g *approvalGate) decide(id, decision string) int {
	g.t.Helper()
	body := `{"decision":"` + decision + `","by":"ana@example.com","note":"checked"}`
	resp, err := http.Post("http://"+g.app.AdminAddr()+"/approvals/"+id, "application/json", strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		g.t.Logf("decision %s: %d %s", decision, resp.StatusCode, b)
	}
	return resp.StatusCode
}

func resumeWith(id string) map[string]string { return map[string]string{"X-Toolgate-Approval": id} }

// expectResumeRefused checks a resume refused with code and status, in the
// route's envelope, which no SDK retries.
func expectResumeRefused(t *testing.T, r sdkResult, code string, status int) {
	t.Helper()
	if r.err == nil || r.status != status {
		t.Fatalf("got status %d err %v, want %d %s; body %s", r.status, r.err, status, code, r.raw)
	}
	if got := r.code(); got != code && !strings.Contains(string(r.raw), `"`+code+`"`) {
		t.Errorf("code %q, want %s; body %s", got, code, r.raw)
	}
	if got := r.header.Get("X-Should-Retry"); got != "false" {
		t.Errorf("x-should-retry %q, want false", got)
	}
	if len(r.calls) != 0 {
		t.Errorf("a refused resume released %v", r.calls)
	}
}

// hold asks until the call is held and returns its approval.
func hold(t *testing.T, rt route, base string, stream bool) ticket {
	t.Helper()
	r := rt.send(t, base, stream, false, nil)
	if r.status != http.StatusUnprocessableEntity || len(r.calls) != 0 {
		t.Fatalf("first answer %d with calls %v (err %v), want a 422 escalation; body %s", r.status, r.calls, r.err, r.raw)
	}
	tk := r.approval(t)
	if !strings.HasPrefix(tk.ID, "apr_") || tk.State != "pending" || !strings.HasPrefix(tk.CallDigest, "sha256:") || tk.ExpiresAt == "" {
		t.Fatalf("approval %+v", tk)
	}
	return tk
}

var wantRefund = []string{"issue_refund " + compact(refundArgs)}

// TestApprovalsHoldApproveResume: on every route, plain and streamed, a
// confirm call is held, refused while pending, approved through the admin
// API, released exactly once as the model wrote it with no further
// upstream request, and refused after that, for a changed body and for an
// unknown id.
func TestApprovalsHoldApproveResume(t *testing.T) {
	for _, rt := range routes {
		for _, stream := range []bool{false, true} {
			name := rt.name + "/plain"
			if stream {
				name = rt.name + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				up := newRefundUpstream(t)
				g := startApprovalGate(t, t.TempDir(), refundConfig(up.srv.URL, "  store: memory\n", 100000, "operator"))
				tk := hold(t, rt, g.url(), stream)
				expectResumeRefused(t, rt.send(t, g.url(), stream, false, resumeWith(tk.ID)), "approval_pending", http.StatusConflict)
				if st := g.decide(tk.ID, "approve"); st != http.StatusOK {
					t.Fatalf("approve: %d", st)
				}
				r := rt.send(t, g.url(), stream, false, resumeWith(tk.ID))
				if r.err != nil || r.status != http.StatusOK {
					t.Fatalf("resume: %d %v; body %s", r.status, r.err, r.raw)
				}
				if strings.Join(r.calls, "|") != strings.Join(wantRefund, "|") {
					t.Errorf("released %v, want %v", r.calls, wantRefund)
				}
				if r.header.Get("X-Toolgate-Outcome") != "approved" || r.header.Get("X-Toolgate-Upstream-Calls") != "0" {
					t.Errorf("outcome %q upstream calls %q", r.header.Get("X-Toolgate-Outcome"), r.header.Get("X-Toolgate-Upstream-Calls"))
				}
				if stream != strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
					t.Errorf("content type %q for stream=%v", r.header.Get("Content-Type"), stream)
				}
				expectResumeRefused(t, rt.send(t, g.url(), stream, false, resumeWith(tk.ID)), "approval_used", http.StatusConflict)
				expectResumeRefused(t, rt.send(t, g.url(), stream, true, resumeWith(tk.ID)), "approval_mismatch", http.StatusConflict)
				expectResumeRefused(t, rt.send(t, g.url(), stream, false, resumeWith("apr_00000000000000000000000000000000")),
					"approval_unknown", http.StatusNotFound)
				if n := up.n.Load(); n != 1 {
					t.Errorf("%d upstream requests, want 1: a resume sends nothing", n)
				}
			})
		}
	}
}

// TestApprovalsRefusals: a denied, an expired, a stale and a caller
// approval with a wrong secret are each refused with their code, on every
// route, and nothing reaches the upstream but the first request of each.
func TestApprovalsRefusals(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			up := newRefundUpstream(t)
			cfg := func(store string, maxCents int, approver string) string {
				return refundConfig(up.srv.URL, store, maxCents, approver)
			}
			t.Run("denied", func(t *testing.T) {
				g := startApprovalGate(t, t.TempDir(), cfg("  store: memory\n", 100000, "operator"))
				tk := hold(t, rt, g.url(), false)
				if st := g.decide(tk.ID, "deny"); st != http.StatusOK {
					t.Fatalf("deny: %d", st)
				}
				expectResumeRefused(t, rt.send(t, g.url(), false, false, resumeWith(tk.ID)), "approval_denied", http.StatusForbidden)
				if st := g.decide(tk.ID, "approve"); st != http.StatusConflict {
					t.Errorf("a second decision: %d, want 409", st)
				}
			})
			t.Run("expired", func(t *testing.T) {
				g := startApprovalGate(t, t.TempDir(), cfg("  store: memory\n  ttl: 1s\n", 100000, "operator"))
				tk := hold(t, rt, g.url(), true)
				if st := g.decide(tk.ID, "approve"); st != http.StatusOK {
					t.Fatalf("approve: %d", st)
				}
				time.Sleep(1100 * time.Millisecond)
				expectResumeRefused(t, rt.send(t, g.url(), true, false, resumeWith(tk.ID)), "approval_expired", http.StatusGone)
			})
			t.Run("stale after a reload", func(t *testing.T) {
				g := startApprovalGate(t, t.TempDir(), cfg("  store: memory\n", 100000, "operator"))
				tk := hold(t, rt, g.url(), false)
				if st := g.decide(tk.ID, "approve"); st != http.StatusOK {
					t.Fatalf("approve: %d", st)
				}
				// Refunds over a dollar now break the schema: the held 500
				// cents no longer passes.
				g.reload(cfg("  store: memory\n", 100, "operator"))
				expectResumeRefused(t, rt.send(t, g.url(), false, false, resumeWith(tk.ID)), "approval_stale", http.StatusConflict)
				var refused bool
				for _, rec := range g.sink.records() {
					if a := rec.Approval; a != nil && a.ApprovalID == tk.ID && a.Result == "refused" && a.Code == "approval_stale" {
						refused = true
					}
				}
				if !refused {
					t.Error("the stale refusal is not in the sinks")
				}
			})
			t.Run("caller secret", func(t *testing.T) {
				g := startApprovalGate(t, t.TempDir(), cfg("  store: memory\n", 100000, "caller"))
				tk := hold(t, rt, g.url(), true)
				if len(tk.Secret) != 32 {
					t.Fatalf("caller approval without a secret: %+v", tk)
				}
				wrong := map[string]string{"X-Toolgate-Approval": tk.ID, "X-Toolgate-Approval-Secret": strings.Repeat("0", 32)}
				expectResumeRefused(t, rt.send(t, g.url(), true, false, wrong), "approval_secret", http.StatusForbidden)
				expectResumeRefused(t, rt.send(t, g.url(), true, false, resumeWith(tk.ID)), "approval_secret", http.StatusForbidden)
				right := map[string]string{"X-Toolgate-Approval": tk.ID, "X-Toolgate-Approval-Secret": tk.Secret}
				r := rt.send(t, g.url(), true, false, right)
				if r.err != nil || strings.Join(r.calls, "|") != strings.Join(wantRefund, "|") {
					t.Fatalf("resume with the secret: %v %v; body %s", r.err, r.calls, r.raw)
				}
				expectResumeRefused(t, rt.send(t, g.url(), true, false, right), "approval_used", http.StatusConflict)
				for _, rec := range g.sink.records() {
					if b, _ := json.Marshal(rec); strings.Contains(string(b), tk.Secret) {
						t.Errorf("a sink record holds the secret: %s", b)
					}
				}
			})
			if n := up.n.Load(); n != 4 {
				t.Errorf("%d upstream requests, want 4 (one per hold)", n)
			}
		})
	}
}

// testRedis is a real redis-server the test started on a loopback port
// (Debian's package; CI installs it), stopped by its PID.
type testRedis struct {
	addr string
	cmd  *exec.Cmd
}

func startTestRedis(t *testing.T) *testRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed; CI must install it")
		}
		t.Skip("redis-server is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	// The kernel ends redis-server should the test binary die without its
	// cleanups (a timeout's panic).
	proc.SetParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &testRedis{addr: "127.0.0.1:" + port, cmd: cmd}
	t.Cleanup(r.stop)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", r.addr); err == nil {
			c.Close()
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not start", r.addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *testRedis) stop() {
	if r.cmd.Process == nil || r.cmd.ProcessState != nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
}

// chatRefundBody is a Chat request sent as raw bytes, the same each time.
var chatRefundBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"Refund order ord_1, 5 dollars."}],` +
	`"tools":[{"type":"function","function":{"name":"issue_refund","parameters":` + fmt.Sprintf(refundSchema, 100000) + `}}]}`

// postRaw posts a JSON body to url with the headers h and reads the whole
// answer; it needs no *testing.T, so any goroutine may call it.
func postRaw(url, body string, h map[string]string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// rawChat posts chatRefundBody to a gate with the headers h.
func rawChat(t *testing.T, base string, h map[string]string) (int, http.Header, []byte) {
	t.Helper()
	st, hdr, b, err := postRaw(base+"/v1/chat/completions", chatRefundBody, h)
	if err != nil {
		t.Fatal(err)
	}
	return st, hdr, b
}

// rawHold holds the refund at base and returns the approval id.
func rawHold(t *testing.T, base string) string {
	t.Helper()
	st, _, b := rawChat(t, base, nil)
	if st != http.StatusUnprocessableEntity {
		t.Fatalf("hold: %d %s", st, b)
	}
	var v any
	_ = json.Unmarshal(b, &v)
	a, _ := findKey(v, "approval")
	m, _ := a.(map[string]any)
	id, _ := m["id"].(string)
	if id == "" {
		t.Fatalf("no approval in %s", b)
	}
	return id
}

// TestApprovalsReplicasShareRedis: two toolgates on one redis. Approved at
// one, the call is released at the other; a resume raced at both releases
// it once, 100 times over; with redis gone the call stays held behind a
// retryable 503.
func TestApprovalsReplicasShareRedis(t *testing.T) {
	rd := startTestRedis(t)
	up := newRefundUpstream(t)
	store := "  store: redis://" + rd.addr + "/0\n"
	a := startApprovalGate(t, t.TempDir(), refundConfig(up.srv.URL, store, 100000, "operator"))
	b := startApprovalGate(t, t.TempDir(), refundConfig(up.srv.URL, store, 100000, "operator"))

	id := rawHold(t, a.url())
	if st := b.decide(id, "approve"); st != http.StatusOK {
		t.Fatalf("approve at b: %d", st)
	}
	st, h, body := rawChat(t, b.url(), resumeWith(id))
	if st != http.StatusOK || h.Get("X-Toolgate-Outcome") != "approved" || !strings.Contains(string(body), `"issue_refund"`) {
		t.Fatalf("resume at b: %d %s", st, body)
	}
	if st, _, body := rawChat(t, a.url(), resumeWith(id)); st != http.StatusConflict || !strings.Contains(string(body), "approval_used") {
		t.Fatalf("second resume at a: %d %s", st, body)
	}

	for i := 0; i < 100; i++ {
		id := rawHold(t, a.url())
		if st := a.decide(id, "approve"); st != http.StatusOK {
			t.Fatalf("round %d: approve %d", i, st)
		}
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for j, g := range []*approvalGate{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[j], _, _ = rawChat(t, g.url(), resumeWith(id))
			}()
		}
		wg.Wait()
		ok, used := 0, 0
		for _, s := range statuses {
			switch s {
			case http.StatusOK:
				ok++
			case http.StatusConflict:
				used++
			}
		}
		if ok != 1 || used != 1 {
			t.Fatalf("round %d: statuses %v, want one 200 and one 409", i, statuses)
		}
	}
	if n := up.n.Load(); n != 101 {
		t.Errorf("%d upstream requests, want 101 (the holds only)", n)
	}

	id = rawHold(t, a.url())
	if st := a.decide(id, "approve"); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	rd.stop()
	st, h, body = rawChat(t, b.url(), resumeWith(id))
	if st != http.StatusServiceUnavailable || h.Get("X-Should-Retry") == "false" || !strings.Contains(string(body), "store_unavailable") ||
		strings.Contains(string(body), "issue_refund") {
		t.Errorf("resume with redis down: %d %v %s", st, h, body)
	}
	st, _, body = rawChat(t, a.url(), nil)
	if st != http.StatusServiceUnavailable || strings.Contains(string(body), "issue_refund") {
		t.Errorf("hold with redis down: %d %s", st, body)
	}
}

// TestApprovalsFileStoreSurvivesRestart: an approval held before a
// restart is approved and released after it.
func TestApprovalsFileStoreSurvivesRestart(t *testing.T) {
	up := newRefundUpstream(t)
	dir := t.TempDir()
	cfg := refundConfig(up.srv.URL, "  store: file:approvals.db\n", 100000, "operator")
	g := startApprovalGate(t, dir, cfg)
	id := rawHold(t, g.url())
	g.stop()
	g = startApprovalGate(t, dir, cfg)
	if st := g.decide(id, "approve"); st != http.StatusOK {
		t.Fatalf("approve after restart: %d", st)
	}
	st, _, body := rawChat(t, g.url(), resumeWith(id))
	if st != http.StatusOK || !strings.Contains(string(body), `"issue_refund"`) {
		t.Fatalf("resume after restart: %d %s", st, body)
	}
	if _, err := os.Stat(filepath.Join(dir, "approvals.db")); err != nil {
		t.Errorf("the store is not beside the config: %v", err)
	}
	if n := up.n.Load(); n != 1 {
		t.Errorf("%d upstream requests, want 1", n)
	}
}

// TestApprovalsHeaderNeverForwarded: a request that presents an approval
// header, well formed or not, is a resume: it is answered by toolgate and
// nothing of it reaches the upstream.
func TestApprovalsHeaderNeverForwarded(t *testing.T) {
	up := newRefundUpstream(t)
	g := startApprovalGate(t, t.TempDir(), refundConfig(up.srv.URL, "  store: memory\n", 100000, "operator"))
	for _, h := range []map[string]string{
		{"X-Toolgate-Approval": "apr_not-an-id"},
		{"X-Toolgate-Approval": "APR_00000000000000000000000000000000"},
		{"X-Toolgate-Approval": ""},
		{"X-Toolgate-Approval-Secret": strings.Repeat("a", 32)},
	} {
		st, hdr, body := rawChat(t, g.url(), h)
		if st != http.StatusNotFound || !strings.Contains(string(body), "approval_unknown") || hdr.Get("X-Should-Retry") != "false" {
			t.Errorf("%v: %d %s", h, st, body)
		}
	}
	id := rawHold(t, g.url())
	st, _, body := rawChat(t, g.url(), map[string]string{"X-Toolgate-Approval": id, "X-Toolgate-Approval-Secret": "short"})
	if st != http.StatusForbidden || !strings.Contains(string(body), "approval_secret") {
		t.Errorf("malformed secret: %d %s", st, body)
	}
	if n := up.n.Load(); n != 1 {
		t.Errorf("%d upstream requests, want 1 (the hold)", n)
	}
}

// agentsUpstream scripts the model for the Agents SDK loop: the refund
// call first, then, once the tool's result comes back, the final text.
type agentsUpstream struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newAgentsUpstream(t *testing.T) *agentsUpstream {
	u := &agentsUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, body)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		var out string
		switch {
		case r.URL.Path == "/v1/chat/completions" && bytes.Contains(body, []byte(`"role":"tool"`)):
			out = textAnswer("chatcmpl-a2", "Refunded 5 dollars.").Body
		case r.URL.Path == "/v1/chat/completions":
			out = callsAnswer("chatcmpl-a1", call{"call_a1", "issue_refund", refundArgs}).Body
		case bytes.Contains(body, []byte("function_call_output")):
			a := respAnswer{ID: "resp_a2", Items: []string{respMessage("msg_a2", "Refunded 5 dollars.")}}
			out = respObject(a, "completed", "", a.Items)
		default:
			a := respAnswer{ID: "resp_a1", Items: []string{respCall("fc_a1", "call_a1", "issue_refund", refundArgs)}}
			out = respObject(a, "completed", "", a.Items)
		}
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// TestFrameworkOpenAIAgentsApproval: an app on the OpenAI Agents SDK
// catches the escalation, a person approves through the admin API what
// it shows, the app retries with the header, and the tool runs exactly
// once with the arguments the person saw; the model is asked once more,
// with the tool's result, and never for the released call.
func TestFrameworkOpenAIAgentsApproval(t *testing.T) {
	node := needNodeIn(t, "node-frameworks", "@openai/agents", "openai", "zod")
	t.Setenv("TG_APPROVALS_TOKEN", "admin-token")
	for _, api := range []string{"chat", "responses"} {
		t.Run(api, func(t *testing.T) {
			up := newAgentsUpstream(t)
			g := startApprovalGate(t, t.TempDir(), refundConfig(up.srv.URL, "  admin_token_env: TG_APPROVALS_TOKEN\n", 100000, "operator"))
			out := runNodeIn(t, node, "node-frameworks", "approve.mjs", 60*time.Second,
				"TOOLGATE_BASE="+g.url(), "TOOLGATE_ADMIN=http://"+g.app.AdminAddr(), "TOOLGATE_API="+api)
			var r struct {
				Runs          []json.RawMessage `json:"runs"`
				FirstStatus   int               `json:"first_status"`
				ApprovalID    string            `json:"approval_id"`
				SeenArguments json.RawMessage   `json:"seen_arguments"`
				Decision      int               `json:"decision_status"`
				Text          string            `json:"text"`
				SecondError   string            `json:"second_error"`
			}
			if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
				t.Fatalf("node output %s: %v", out, err)
			}
			if r.FirstStatus != http.StatusUnprocessableEntity || !strings.HasPrefix(r.ApprovalID, "apr_") || r.Decision != http.StatusOK {
				t.Fatalf("escalation and approval: %s", out)
			}
			if len(r.Runs) != 1 || compact(string(r.Runs[0])) != compact(string(r.SeenArguments)) ||
				compact(string(r.Runs[0])) != compact(refundArgs) {
				t.Fatalf("tool runs %s, the person saw %s, want one run with %s", r.Runs, r.SeenArguments, refundArgs)
			}
			if r.Text != "Refunded 5 dollars." || r.SecondError != "" {
				t.Errorf("final %q, error %q", r.Text, r.SecondError)
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			if len(up.bodies) != 2 || !bytes.Contains(up.bodies[1], []byte("refunded")) {
				t.Errorf("%d upstream requests, want 2 (the held answer, then the tool's result)", len(up.bodies))
			}
			for _, b := range up.bodies {
				if bytes.Contains(b, []byte("apr_")) {
					t.Errorf("the approval reached the upstream: %s", b)
				}
			}
		})
	}
}

// TestApprovalsAdminViewRedacts: the admin API shows a held call's
// arguments with escalation.redact applied, and the sinks get every state
// change of the approval.
func TestApprovalsAdminViewRedacts(t *testing.T) {
	up := newRefundUpstream(t)
	cfg := refundConfig(up.srv.URL, "  store: memory\n", 100000, "operator") + "escalation:\n  redact: [/order_id]\n"
	g := startApprovalGate(t, t.TempDir(), cfg)
	id := rawHold(t, g.url())
	resp, err := http.Get("http://" + g.app.AdminAddr() + "/approvals/" + id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(b), "ord_1") || !strings.Contains(string(b), "[redacted]") || !strings.Contains(string(b), `"amount_cents":500`) {
		t.Errorf("admin view %s", b)
	}
	if st := g.decide(id, "approve"); st != http.StatusOK {
		t.Fatal(st)
	}
	if st, _, _ := rawChat(t, g.url(), resumeWith(id)); st != http.StatusOK {
		t.Fatal(st)
	}
	var results []string
	for _, rec := range g.sink.records() {
		if a := rec.Approval; a != nil && a.ApprovalID == id {
			results = append(results, a.Result+":"+a.By)
		}
	}
	if want := "requested:|approved:ana@example.com|released:ana@example.com"; strings.Join(results, "|") != want {
		t.Errorf("sink records %v, want %s", results, want)
	}
}

// TestApprovalsGeminiJSONArrayStream: a Gemini stream without alt=sse is a
// JSON array; the held answer is replayed as that array, with its own
// content type.
func TestApprovalsGeminiJSONArrayStream(t *testing.T) {
	up := newRefundUpstream(t)
	g := startApprovalGate(t, t.TempDir(), refundConfig(up.srv.URL, "  store: memory\n", 100000, "operator"))
	body := `{"contents":[{"role":"user","parts":[{"text":"Refund order ord_1, 5 dollars."}]}],` +
		`"tools":[{"functionDeclarations":[{"name":"issue_refund","parametersJsonSchema":` + fmt.Sprintf(refundSchema, 100000) + `}]}]}`
	send := func(h map[string]string) (int, http.Header, []byte) {
		st, hdr, b, err := postRaw(g.url()+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", body, h)
		if err != nil {
			t.Fatal(err)
		}
		return st, hdr, b
	}
	st, _, b := send(nil)
	var v any
	_ = json.Unmarshal(b, &v)
	a, _ := findKey(v, "approval")
	m, _ := a.(map[string]any)
	id, _ := m["id"].(string)
	if st != http.StatusUnprocessableEntity || id == "" {
		t.Fatalf("hold: %d %s", st, b)
	}
	if st := g.decide(id, "approve"); st != http.StatusOK {
		t.Fatal(st)
	}
	st, h, b := send(resumeWith(id))
	if st != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !bytes.HasPrefix(b, []byte("[")) ||
		!strings.Contains(string(b), `"issue_refund"`) {
		t.Fatalf("resume: %d %q %s", st, h.Get("Content-Type"), b)
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(b, &arr); err != nil || len(arr) != 1 {
		t.Errorf("the replay is not the JSON array: %v %s", err, b)
	}
	if n := up.n.Load(); n != 1 {
		t.Errorf("%d upstream requests, want 1", n)
	}
}

// TestApprovalsStreamAfterTextNotHeld: a stream that sent text before the
// confirm call cannot be replayed whole, so it is not held: in message
// mode it ends with the escalation's message as before, no approval.
func TestApprovalsStreamAfterTextNotHeld(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, csText("Let me refund that.")+csCall("call_r1", "issue_refund", refundArgs))
	}))
	t.Cleanup(up.Close)
	cfg := refundConfig(up.URL, "  store: memory\n", 100000, "operator") + "escalation:\n  mode: message\n"
	g := startApprovalGate(t, t.TempDir(), cfg)
	body := strings.Replace(chatRefundBody, `{"model":"gpt-4o",`, `{"model":"gpt-4o","stream":true,`, 1)
	resp, err := http.Post(g.url()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Let me refund that.") || !strings.Contains(string(b), "[toolgate:esc_") ||
		strings.Contains(string(b), "approval") || strings.Contains(string(b), `"error"`) {
		t.Fatalf("stream %d:\n%s", resp.StatusCode, b)
	}
	for _, rec := range g.sink.records() {
		if rec.Approval != nil {
			t.Errorf("an approval was requested: %+v", rec.Approval)
		}
	}
}
