package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/proxy/openaichat"
)

// panickyAPI's codec panics while reading the request, which toolgate
// does on a goroutine of its own while the upstream works.
type panickyAPI struct{ openaichat.API }

func (panickyAPI) NewCodec() api.Codec { return panickyCodec{openaichat.API{}.NewCodec()} }

type panickyCodec struct{ api.Codec }

func (panickyCodec) DecodeRequest(string, []byte) (*neutral.Request, error) { panic("parser exploded") }

// A panic while the request is read in the background is the handler's
// panic: the client gets a 502, it is counted, and the process lives on.
func TestParsePanicIsTheHandlers(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	}))
	defer up.Close()
	saved := apis["chat"]
	apis["chat"] = panickyAPI{}
	defer func() { apis["chat"] = saved }()

	cfg, err := catalog.Parse([]byte("upstreams:\n  - url: "+up.URL+"\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := observe.NewMetrics(prometheus.NewRegistry())
	srv, err := New(Options{Store: catalog.NewStore(snap), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	gate := httptest.NewServer(srv)
	defer gate.Close()
	for i := 0; i < 2; i++ {
		resp, err := http.Post(gate.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("request %d: status %d, want 502", i+1, resp.StatusCode)
		}
	}
	if n := testutil.ToFloat64(m.PanicsRecovered); n != 2 {
		t.Errorf("toolgate_panics_total = %v, want 2", n)
	}
}
