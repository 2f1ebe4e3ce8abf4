package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/proxy/pipeline"
)

// start runs the order tools' MCP server for one test.
func start(t *testing.T, jsonAnswers bool) *mcptest.Orders {
	o := mcptest.Start(jsonAnswers)
	t.Cleanup(o.Close)
	return o
}

// sinkRec keeps every escalation record.
type sinkRec struct {
	mu   sync.Mutex
	recs []*pipeline.EscalationRecord
}

func (s *sinkRec) Record(r *pipeline.EscalationRecord) {
	s.mu.Lock()
	s.recs = append(s.recs, r)
	s.mu.Unlock()
}

func (s *sinkRec) all() []*pipeline.EscalationRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pipeline.EscalationRecord(nil), s.recs...)
}

type gate struct {
	url  string
	sink *sinkRec
	reg  *prometheus.Registry
	srv  *proxy.Server
}

// startGate runs toolgate with the MCP server at upURL mounted at
// /mcp/orders, plus extra config lines.
func startGate(t testing.TB, upURL, extra string) *gate {
	t.Helper()
	return startGateKey(t, upURL, "", extra)
}

// startGateKey is startGate with an api_key_env for the MCP server. An
// extra mcp_servers or upstreams list replaces the default one.
func startGateKey(t testing.TB, upURL, keyEnv, extra string) *gate {
	t.Helper()
	return startGateLog(t, upURL, keyEnv, extra, nil)
}

// startGateLog is startGateKey logging to log (nil logs nothing).
func startGateLog(t testing.TB, upURL, keyEnv, extra string, log *zap.Logger) *gate {
	t.Helper()
	cfg := ""
	if !strings.Contains(extra, "upstreams:") {
		cfg += "upstreams: [{url: http://127.0.0.1:9}]\n"
	}
	if !strings.Contains(extra, "mcp_servers:") {
		cfg += "mcp_servers: [{name: orders, url: " + upURL + ", path_prefix: /mcp/orders, idle_timeout: 20s, api_key_env: '" + keyEnv + "'}]\n"
	}
	cfg += extra
	c, err := catalog.Parse([]byte(cfg), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(c, "")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{sink: &sinkRec{}, reg: prometheus.NewRegistry()}
	g.srv, err = proxy.New(proxy.Options{Store: catalog.NewStore(snap), Metrics: observe.NewMetrics(g.reg), Sink: g.sink, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(g.srv)
	t.Cleanup(hs.Close)
	g.url = hs.URL + "/mcp/orders"
	return g
}

// clientWire records what the client received, for byte-for-byte checks.
type clientWire struct {
	mu      sync.Mutex
	answers map[string][]byte
}

type recordingRT struct{ cw *clientWire }

func (rt recordingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	var method string
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		method = m.Method
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || method == "" {
		return resp, err
	}
	// The body is recorded as the client reads it: an SSE answer may stay
	// open until the client itself answers something on it.
	resp.Body = &recordedBody{rc: resp.Body, done: func(b []byte) {
		rt.cw.mu.Lock()
		if _, seen := rt.cw.answers[method]; !seen {
			rt.cw.answers[method] = b
		}
		rt.cw.mu.Unlock()
	}}
	return resp, nil
}

type recordedBody struct {
	rc   io.ReadCloser
	buf  bytes.Buffer
	done func([]byte)
	once sync.Once
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.buf.Write(p[:n])
	if err != nil {
		b.once.Do(func() { b.done(b.buf.Bytes()) })
	}
	return n, err
}

func (b *recordedBody) Close() error {
	b.once.Do(func() { b.done(b.buf.Bytes()) })
	return b.rc.Close()
}

func connect(t testing.TB, url string, opts *mcp.ClientOptions, tune ...func(*mcp.StreamableClientTransport)) (*mcp.ClientSession, *clientWire) {
	t.Helper()
	cw := &clientWire{answers: map[string][]byte{}}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, HTTPClient: &http.Client{Transport: recordingRT{cw}}}
	for _, f := range tune {
		f(tr)
	}
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cw
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			if m.Counter != nil {
				total += m.Counter.GetValue()
			} else if m.Histogram != nil {
				total += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return total
}

// waitFor polls cond until it holds; it fails only after a long wait, so
// a loaded machine slows it down without failing it.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// labelValues lists the distinct values of label on the series of name
// with api="mcp", sorted.
func labelValues(t *testing.T, reg *prometheus.Registry, name, label string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			if have["api"] == "mcp" {
				seen[have[label]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
