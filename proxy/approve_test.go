package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy"
)

const refundBody = `{"model":"m","messages":[{"role":"user","content":"Refund ord_1"}],` +
	`"tools":[{"type":"function","function":{"name":"issue_refund","parameters":{"type":"object"}}}]}`

// refundGate is toolgate with approvals on a memory store in front of a
// model that always calls the confirm tool issue_refund; hits counts what
// reached the model.
func refundGate(t testing.TB) (http.Handler, *atomic.Int32) {
	hits := &atomic.Int32{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, chatAnswer(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"issue_refund","arguments":"{\"order_id\":\"ord_1\"}"}}]}`))
	}))
	t.Cleanup(up.Close)
	cfg, err := catalog.Parse([]byte(gateConfig(up.URL, "", `
catalog:
  tools:
    - name: issue_refund
      policy: confirm
      parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
`)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Store: catalog.NewStore(snap),
		Approvals: approval.New(approval.Config{Store: approval.NewMemory(approval.Options{})})})
	if err != nil {
		t.Fatal(err)
	}
	return srv, hits
}

func resumePost(h http.Handler, body string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, chatRoute, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		r.Header[k] = []string{v}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// FuzzResumeHeaders: whatever a resume's headers and body hold, toolgate
// answers it itself with a §5a refusal (the one held approval is pending,
// so nothing may be released), never panics and never asks the model.
func FuzzResumeHeaders(f *testing.F) {
	h, hits := refundGate(f)
	held := resumePost(h, refundBody, nil)
	var e struct {
		Error struct {
			Escalation struct {
				Approval struct{ ID string } `json:"approval"`
			} `json:"escalation"`
		} `json:"error"`
	}
	if err := json.Unmarshal(held.Body.Bytes(), &e); err != nil || held.Code != http.StatusUnprocessableEntity || e.Error.Escalation.Approval.ID == "" {
		f.Fatalf("hold: %d %s", held.Code, held.Body)
	}
	id := e.Error.Escalation.Approval.ID
	f.Add(id, "", refundBody)
	f.Add(id, strings.Repeat("0", 32), refundBody)
	f.Add(strings.ToUpper(id), "", refundBody)
	f.Add(id+" ", "", refundBody)
	f.Add("apr_", "x", "{}")
	f.Add("", strings.Repeat("a", 32), refundBody)
	f.Add(id, "", `{"model":"m"`)
	f.Fuzz(func(t *testing.T, id, secret, body string) {
		hdr := map[string]string{"X-Toolgate-Approval": id}
		if secret != "" {
			hdr["X-Toolgate-Approval-Secret"] = secret
		}
		w := resumePost(h, body, hdr)
		switch w.Code {
		case http.StatusNotFound, http.StatusForbidden, http.StatusConflict, http.StatusGone, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		if w.Code != http.StatusRequestEntityTooLarge && !strings.Contains(w.Body.String(), `"code":"approval_`) {
			t.Fatalf("no approval code: %s", w.Body)
		}
		if w.Header().Get("X-Should-Retry") != "false" {
			t.Fatalf("x-should-retry %q", w.Header().Get("X-Should-Retry"))
		}
		if n := hits.Load(); n != 1 {
			t.Fatalf("a resume reached the model (%d requests)", n)
		}
	})
}
