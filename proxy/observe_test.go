package proxy_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/recovery"
)

// observed records what a RecoveryObserver is handed.
type observed struct {
	mu    sync.Mutex
	calls map[string][]recovery.Event
	n     int
}

func (o *observed) ObserveRecovery(rid string, steps []recovery.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[rid] = steps
	o.n++
}

func chatAnswer(message string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":` + message + `}]}`
}

// TestRecoveryObserverSeesEachJudgedAnswer checks that the observer gets
// one call per judged answer, under the id the client reads in
// X-Toolgate-Request-Id, with the decision's confidence even when the
// substitute was used (the answer itself no longer shows it).
func TestRecoveryObserverSeesEachJudgedAnswer(t *testing.T) {
	bad := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"fetch_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`
	good := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}`
	decision := `{"decision":"substitute","corrected_tool_call":{"tool_name":"get_weather","arguments":{"city":"Oslo"}},"escalation":null,"confidence":0.91}`
	var first atomic.Value
	first.Store(bad)
	var calls atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1)%2 == 1 {
			fmt.Fprint(w, chatAnswer(first.Load().(string)))
			return
		}
		fmt.Fprintf(w, chatAnswer(`{"role":"assistant","content":%q}`), decision)
	}))
	defer up.Close()
	cfg, err := catalog.Parse([]byte(gateConfig(up.URL, "", `
catalog:
  tools:
    - name: get_weather
      parameters: {type: object, properties: {city: {type: string}}, required: [city]}
`)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o := &observed{calls: map[string][]recovery.Event{}}
	srv, err := proxy.New(proxy.Options{Store: catalog.NewStore(snap), Observer: o})
	if err != nil {
		t.Fatal(err)
	}
	gate := httptest.NewServer(srv)
	defer gate.Close()
	ask := func() *http.Response {
		t.Helper()
		body := `{"model":"m","messages":[{"role":"user","content":"Weather in Oslo?"}],` +
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`
		resp, err := http.Post(gate.URL+chatRoute, "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	resp := ask()
	if got := resp.Header.Get("X-Toolgate-Outcome"); got != string(recovery.Substituted) {
		t.Fatalf("outcome %q, want substituted", got)
	}
	rid := resp.Header.Get("X-Toolgate-Request-Id")
	o.mu.Lock()
	steps, ok := o.calls[rid]
	o.mu.Unlock()
	if !ok || len(steps) != 1 {
		t.Fatalf("observer got %v for request %s, want one step", o.calls, rid)
	}
	if s := steps[0]; s.Strategy != catalog.StrategyDecision || s.Result != "substituted" || s.Confidence != 0.91 ||
		s.Suggested != "get_weather" || s.Name != "fetch_weather" {
		t.Errorf("step %+v", s)
	}

	// A valid answer is judged too: one call, no steps.
	first.Store(good)
	resp = ask()
	if got := resp.Header.Get("X-Toolgate-Outcome"); got != string(recovery.Pass) {
		t.Fatalf("outcome %q, want pass", got)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	steps, ok = o.calls[resp.Header.Get("X-Toolgate-Request-Id")]
	if !ok || len(steps) != 0 || o.n != 2 {
		t.Errorf("valid answer: steps %v (recorded %v), %d calls in all, want 2", steps, ok, o.n)
	}
}
