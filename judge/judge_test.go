package judge_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/signature"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/validate"
)

// observed records what a Validators reports, like the metrics do.
type observed struct {
	mu      sync.Mutex
	results []string
}

func (o *observed) observe(_ context.Context, name, result string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results = append(o.results, name+"="+result)
}

func (o *observed) all() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.results, ",")
}

const judgeConfig = `
upstreams: [{url: "https://api.openai.com"}]
catalog:
  version: v7
  context: {customer_id: {header: X-Customer-Id}}
  tools:
    - name: issue_refund
      parameters: {type: object, properties: {amount_cents: {type: integer}}, required: [amount_cents]}
    - name: get_order
      parameters: {type: object}
    - name: note
`

// newJudge builds a Judge whose one validator "orders" calls url for
// issue_refund.
func newJudge(t *testing.T, url string, timeout time.Duration, failOpen bool, secret string) (*judge.Judge, *observed) {
	t.Helper()
	cfg, err := catalog.Parse([]byte(judgeConfig), "judge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy := catalog.FailurePolicyFail
	if failOpen {
		policy = catalog.FailurePolicyIgnore
	}
	cfg.Validators = []catalog.Validator{{Name: "orders", URL: url, Tools: []string{"issue_refund", "note"},
		Timeout: catalog.Duration(timeout), FailurePolicy: policy}}
	if secret != "" {
		t.Setenv("ORDERS_SECRET", secret)
		cfg.Validators[0].SecretEnv = "ORDERS_SECRET"
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	vs := judge.NewValidators(snap.Validators, obs.observe)
	t.Cleanup(vs.Close)
	h := &validate.History{}
	h.AddCall("c0", "get_order", []byte(`{"order_id":"ord_1"}`))
	h.AddResult("c0", `{"order_id":"ord_1","total_cents":4000}`, false, nil)
	eff := snap.Effective([]catalog.Offered{{Name: "issue_refund"}, {Name: "get_order"}, {Name: "note"}}, catalog.ToolChoice{}, true)
	return &judge.Judge{
		Local: &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil), History: h,
			Values: map[string]string{"customer_id": "c_1"}},
		Validators: vs, RequestID: "req_1", CatalogVersion: snap.Version,
	}, obs
}

func refund(id, args string) validate.ToolCall {
	return validate.ToolCall{ID: id, Name: "issue_refund", Args: []byte(args), Kind: validate.Function}
}

// server answers every validator request with status and body.
func server(t *testing.T, status int, body string) (*httptest.Server, *[][]byte) {
	t.Helper()
	var mu sync.Mutex
	var got [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func TestValidatorAllowed(t *testing.T) {
	srv, got := server(t, 200, `{"allowed":true}`)
	j, obs := newJudge(t, srv.URL, 5*time.Second, false, "")
	v := j.Call(context.Background(), refund("call_1", `{"amount_cents":2000}`))
	if !v.Valid() || len(v.Findings) != 0 {
		t.Fatalf("findings %+v", v.Findings)
	}
	if obs.all() != "orders=allowed" || len(*got) != 1 {
		t.Fatalf("observed %q, %d requests", obs.all(), len(*got))
	}
	var body struct {
		RequestID      string `json:"request_id"`
		CatalogVersion string `json:"catalog_version"`
		Call           struct {
			ID        string          `json:"id"`
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"call"`
		History         []validate.HistoryEntry `json:"history"`
		HistoryComplete bool                    `json:"history_complete"`
		Context         map[string]string       `json:"context"`
	}
	if err := json.Unmarshal((*got)[0], &body); err != nil {
		t.Fatal(err)
	}
	if body.RequestID != "req_1" || body.CatalogVersion != "v7" || body.Call.ID != "call_1" || body.Call.Tool != "issue_refund" ||
		string(body.Call.Arguments) != `{"amount_cents":2000}` || len(body.History) != 1 || body.History[0].Tool != "get_order" ||
		!body.HistoryComplete || body.Context["customer_id"] != "c_1" {
		t.Fatalf("validator request %s", (*got)[0])
	}
}

func TestValidatorDenied(t *testing.T) {
	srv, _ := server(t, 200, `{"allowed":false,"reasons":[{"pointer":"/amount_cents","message":"account 4411 is frozen"},{"pointer":"not a pointer","message":""}]}`)
	j, obs := newJudge(t, srv.URL, 5*time.Second, false, "")
	v := j.Call(context.Background(), refund("call_1", `{"amount_cents":2000}`))
	if v.Valid() || len(v.Findings) != 2 || obs.all() != "orders=denied" {
		t.Fatalf("findings %+v observed %q", v.Findings, obs.all())
	}
	f := v.Findings[0]
	if f.Code != validate.RuleViolation || f.Keyword != "validator:orders" || f.Pointer != "/amount_cents" ||
		f.Detail != "account 4411 is frozen" || f.Reason != "account 4411 is frozen" || f.Message != "arguments/amount_cents: denied by validator orders" {
		t.Fatalf("finding %+v", f)
	}
	if g := v.Findings[1]; g.Pointer != "" || g.Detail != "the call was refused by validator orders" || g.Reason != "" {
		t.Fatalf("second finding %+v", g)
	}
}

// Only calls that passed every local check, and only the validator's
// tools, are sent.
func TestValidatorOnlyAfterLocalChecks(t *testing.T) {
	srv, got := server(t, 200, `{"allowed":true}`)
	j, _ := newJudge(t, srv.URL, 5*time.Second, false, "")
	batch := []validate.ToolCall{
		refund("bad", `{"amount_cents":"lots"}`),
		{ID: "other", Name: "get_order", Args: []byte(`{}`), Kind: validate.Function},
		refund("good", `{"amount_cents":1}`),
	}
	vs := j.Batch(context.Background(), batch, []int{0, 1, 2})
	if vs[0].Valid() || !vs[1].Valid() || !vs[2].Valid() {
		t.Fatalf("reports %+v", vs)
	}
	if len(*got) != 1 || !strings.Contains(string((*got)[0]), `"id":"good"`) {
		t.Fatalf("validator requests %q", *got)
	}
}

func TestValidatorFailures(t *testing.T) {
	hang := func(t *testing.T) string {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(func() { close(release); srv.Close() })
		return srv.URL
	}
	answer := func(status int, body string) func(t *testing.T) string {
		return func(t *testing.T) string { s, _ := server(t, status, body); return s.URL }
	}
	for _, tc := range []struct {
		name   string
		url    func(t *testing.T) string
		result string
	}{
		{"timeout", hang, "timeout"},
		{"500", answer(500, `{"allowed":true}`), "error"},
		{"not JSON", answer(200, `allowed`), "error"},
		{"no allowed field", answer(200, `{"reasons":[]}`), "error"},
		{"allowed not a bool", answer(200, `{"allowed":"yes"}`), "error"},
		{"too large", answer(200, `{"allowed":true,"pad":"`+strings.Repeat("x", 70<<10)+`"}`), "error"},
		{"redirect", answer(302, ``), "error"},
	} {
		for _, failOpen := range []bool{false, true} {
			name := tc.name + "/fail"
			if failOpen {
				name = tc.name + "/ignore"
			}
			t.Run(name, func(t *testing.T) {
				// Only the hanging validator may reach its timeout; the
				// others get one no loaded machine reaches.
				timeout := 20 * time.Second
				if tc.result == "timeout" {
					timeout = 100 * time.Millisecond
				}
				j, obs := newJudge(t, tc.url(t), timeout, failOpen, "")
				v := j.Call(context.Background(), refund("call_1", `{"amount_cents":1}`))
				if obs.all() != "orders="+tc.result {
					t.Fatalf("observed %q, want %s", obs.all(), tc.result)
				}
				if failOpen {
					if !v.Valid() {
						t.Fatalf("ignore policy blocked: %+v", v.Findings)
					}
					return
				}
				if v.Valid() || len(v.Findings) != 1 || v.Findings[0].Keyword != "validator:orders" ||
					v.Findings[0].Message != "validator orders gave no answer ("+tc.result+"), so the call was not executed" {
					t.Fatalf("findings %+v", v.Findings)
				}
			})
		}
	}
}

// A validator that never answers holds the call no longer than its
// timeout: Batch returns although the server is still holding the request.
func TestValidatorHangBoundedByTimeout(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release // ignores the client going away
	}))
	defer srv.Close()
	defer close(release)
	const timeout = 200 * time.Millisecond
	j, obs := newJudge(t, srv.URL, timeout, false, "")
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		j.Call(context.Background(), refund("call_1", `{"amount_cents":1}`))
		done <- time.Since(start)
	}()
	<-arrived
	select {
	case d := <-done:
		if d < timeout {
			t.Fatalf("returned after %v, before the timeout", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a hanging validator held the call far past its timeout")
	}
	if obs.all() != "orders=timeout" {
		t.Fatalf("observed %q", obs.all())
	}
}

// The calls of one answer are validated side by side: each request waits
// until all three have arrived, which only concurrent calls can reach.
func TestValidatorSiblingsConcurrent(t *testing.T) {
	const n = 3
	var wg sync.WaitGroup
	wg.Add(n)
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Done()
		select {
		case <-all:
			_, _ = io.WriteString(w, `{"allowed":true}`)
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	j, obs := newJudge(t, srv.URL, 20*time.Second, false, "")
	batch := []validate.ToolCall{refund("a", `{"amount_cents":1}`), refund("b", `{"amount_cents":2}`), refund("c", `{"amount_cents":3}`)}
	for i, v := range j.Batch(context.Background(), batch, []int{0, 1, 2}) {
		if !v.Valid() {
			t.Fatalf("call %d: %+v", i, v.Findings)
		}
	}
	if obs.all() != "orders=allowed,orders=allowed,orders=allowed" {
		t.Fatalf("observed %q", obs.all())
	}
}

// The signature is "sha256=" and the hex HMAC-SHA256 of the exact body,
// which a receiver recomputes.
func TestValidatorSignature(t *testing.T) {
	const secret = "whsec_123"
	var verified, unsigned bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sig := r.Header.Get("X-Toolgate-Signature")
		unsigned = sig == ""
		verified = hmac.Equal([]byte(sig), []byte(signature.Sign([]byte(secret), body))) && strings.HasPrefix(sig, "sha256=")
		_, _ = io.WriteString(w, `{"allowed":true}`)
	}))
	defer srv.Close()
	j, _ := newJudge(t, srv.URL, 5*time.Second, false, secret)
	j.Call(context.Background(), refund("call_1", `{"amount_cents":1}`))
	if !verified {
		t.Fatal("the receiver could not verify the signature")
	}
	j2, _ := newJudge(t, srv.URL, 5*time.Second, false, "")
	j2.Call(context.Background(), refund("call_1", `{"amount_cents":1}`))
	if !unsigned {
		t.Fatal("a validator without secret_env got a signature")
	}
}

// The documented format, checked against a value computed independently:
// printf '%s' '{"a":1}' | openssl dgst -sha256 -hmac k
func TestSignatureFormat(t *testing.T) {
	const want = "sha256=c3a92ff9e274cdcce27a58c15a78ec6dcbbdbd0038a87e7a11baef2028fd8bff"
	if got := signature.Sign([]byte("k"), []byte(`{"a":1}`)); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

// A custom tool's free-text input reaches the validator as a JSON string.
func TestValidatorCustomCallText(t *testing.T) {
	srv, got := server(t, 200, `{"allowed":true}`)
	j, _ := newJudge(t, srv.URL, 5*time.Second, false, "")
	v := j.Call(context.Background(), validate.ToolCall{ID: "c1", Name: "note", Args: []byte(`say "hi"`), Kind: validate.Custom})
	if !v.Valid() || len(*got) != 1 || !strings.Contains(string((*got)[0]), `"arguments":"say \"hi\""`) {
		t.Fatalf("report %+v, requests %q", v, *got)
	}
}

// A call to an MCP server's tool reaches the validators that list it as
// server/tool, named so in the body, and only after the surface's own
// checks passed it.
func TestValidatorServerToolsAndExtraChecks(t *testing.T) {
	cfg, err := catalog.Parse([]byte(`
upstreams: [{url: "https://api.openai.com"}]
mcp_servers: [{name: orders, url: "http://127.0.0.1:9", path_prefix: /mcp/orders}]
catalog:
  tools:
    - name: issue_refund
      parameters: {type: object}
    - name: orders/issue_refund
validators:
  - {name: mcp, url: "http://127.0.0.1:9", tools: [orders/issue_refund], timeout: 5s}
  - {name: model, url: "http://127.0.0.1:9", tools: [issue_refund], timeout: 5s}
`), "judge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv, got := server(t, 200, `{"allowed":true}`)
	for i := range cfg.Validators {
		cfg.Validators[i].URL = srv.URL
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	vs := judge.NewValidators(snap.Validators, obs.observe)
	t.Cleanup(vs.Close)
	set := snap.MCPSet("orders", []catalog.MCPTool{{Name: "issue_refund", InputSchema: []byte(`{"type":"object"}`)}})
	extra := func(c validate.ToolCall, v *validate.CallReport) {
		if strings.Contains(string(c.Args), "server-says-no") {
			v.Findings = append(v.Findings, validate.Finding{Code: validate.SchemaViolation, Message: "no"})
		}
	}
	j := &judge.Judge{Local: &validate.Context{Effective: set.Eff}, Validators: vs, CatalogVersion: set.Version, Server: "orders", Extra: extra}
	if v := j.Call(context.Background(), refund("1", `{"reason":"server-says-no"}`)); v.Valid() || len(*got) != 0 {
		t.Fatalf("a call the extra check refused: findings %+v, %d validator requests", v.Findings, len(*got))
	}
	if v := j.Call(context.Background(), refund("2", `{}`)); !v.Valid() {
		t.Fatalf("findings %+v", v.Findings)
	}
	if obs.all() != "mcp=allowed" || len(*got) != 1 || !strings.Contains(string((*got)[0]), `"tool":"orders/issue_refund"`) ||
		!strings.Contains(string((*got)[0]), `"history":[]`) || !strings.Contains(string((*got)[0]), `"history_complete":false`) {
		t.Fatalf("observed %q, requests %q", obs.all(), *got)
	}
}
