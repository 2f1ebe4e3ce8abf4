package proxy_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/baseline"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/sse"
)

// These benchmarks push one request per op end to end over loopback HTTP:
// client -> proxy -> mock upstream and back. "toolgate" is proxy.New as
// the handler; "bare" is an httputil.ReverseProxy to the same mock, the
// floor any proxy pays; "direct" skips the proxy. The -c32 variants keep
// 32 requests in flight, the load test's concurrency, which is the right
// shape for a CPU profile. toolgate logs its per-request line through a
// production JSON encoder into io.Discard, so encoding costs are counted
// as in a deployment but no file I/O is.

const benchPath = "/v1/chat/completions"

// benchCatalogYAML lists the fixture's two tools with request.json's
// schemas, so every call is judged by a compiled catalog schema.
const benchCatalogYAML = `catalog:
  version: bench
  tools:
    - name: get_current_weather
      description: Get the current weather in a given location
      parameters: {"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}
    - name: get_stock_price
      description: Fetch the latest price for a given ticker
      parameters: {"type":"object","properties":{"ticker":{"type":"string","description":"Ticker symbol, e.g. AAPL"},"exchange":{"type":"string","description":"Exchange the ticker is listed on, e.g. NASDAQ"}},"required":["ticker","exchange"]}
`

type benchEnv struct {
	mock, gate, bare *httptest.Server
	client           *http.Client
	streamReq        []byte
	plainReq         []byte
	answer           []byte
	stream           []byte
}

func benchFile(b *testing.B, name string) []byte {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "chat", name))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// benchStream builds the 40-event answer the load test's mock sends: the
// recorded parallel stream (21 events) with 18 text deltas after its role
// chunk and a usage chunk before [DONE].
func benchStream(b *testing.B) []byte {
	b.Helper()
	rd := sse.NewReader(bytes.NewReader(benchFile(b, "parallel_tool_calls_stream.sse")), 0)
	var raws [][]byte
	for rd.Next() {
		raws = append(raws, bytes.Clone(rd.Event().Raw))
	}
	if len(raws) != 21 {
		b.Fatalf("fixture has %d events, want 21", len(raws))
	}
	const head = `{"id":"chatcmpl-zupGhv7Ib3M03NBQNSgPwlUQia1ID","object":"chat.completion.chunk","created":1741569980,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_bed440e504",`
	words := strings.Fields("Let me check the weather in Boston and the current price of Apple stock on NASDAQ for you right now, one moment.")
	out := append([]byte(nil), raws[0]...)
	for i := range 18 {
		out = sse.AppendEvent(out, "", []byte(head+`"choices":[{"index":0,"delta":{"content":"`+words[i%len(words)]+` "},"logprobs":null,"finish_reason":null}]}`))
	}
	for _, r := range raws[1:20] {
		out = append(out, r...)
	}
	out = sse.AppendEvent(out, "", []byte(head+`"choices":[],"usage":{"prompt_tokens":118,"completion_tokens":58,"total_tokens":176}}`))
	return append(out, raws[20]...)
}

// mockHandler answers like the provider: the plain answer as one write, the
// stream one event per write with a flush after each, as real SSE servers
// do, so a proxy sees events arrive separately.
func mockHandler(answer, stream []byte) http.HandlerFunc {
	var events [][]byte
	for rest := stream; len(rest) > 0; {
		i := bytes.Index(rest, []byte("\n\n"))
		events, rest = append(events, rest[:i+2]), rest[i+2:]
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		h := w.Header()
		h.Set("X-Request-Id", "req_bench")
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(answer)
			return
		}
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		rc := http.NewResponseController(w)
		for _, ev := range events {
			if _, err := w.Write(ev); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}
}

// discardLogger is the production JSON logger of cmd/toolgate writing
// nowhere.
func discardLogger() *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zap.InfoLevel))
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	e := &benchEnv{answer: benchFile(b, "parallel_tool_calls.json"), stream: benchStream(b)}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(benchFile(b, "request.json"), &req); err != nil {
		b.Fatal(err)
	}
	var err error
	if e.streamReq, err = json.Marshal(req); err != nil {
		b.Fatal(err)
	}
	req["stream"] = json.RawMessage("false")
	delete(req, "stream_options")
	if e.plainReq, err = json.Marshal(req); err != nil {
		b.Fatal(err)
	}

	e.mock = httptest.NewServer(mockHandler(e.answer, e.stream))
	b.Cleanup(e.mock.Close)
	cfg, err := catalog.Parse([]byte("upstreams:\n  - name: mock\n    url: "+e.mock.URL+"\n"+benchCatalogYAML), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Store: catalog.NewStore(snap), Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	e.gate = httptest.NewServer(srv)
	b.Cleanup(e.gate.Close)
	target, _ := url.Parse(e.mock.URL)
	e.bare = httptest.NewServer(baseline.Proxy(target))
	b.Cleanup(e.bare.Close)
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, DisableCompression: true}
	e.client = &http.Client{Transport: tr}
	b.Cleanup(tr.CloseIdleConnections)
	return e
}

// do sends one request and checks the answer is byte-for-byte what the
// mock sent: a valid answer must pass through toolgate unchanged. For a
// stream it returns the time to the first text delta's bytes.
func (e *benchEnv) do(b *testing.B, base string, body, want []byte) time.Duration {
	start := time.Now()
	resp, err := e.client.Post(base+benchPath, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Error(err)
		return 0
	}
	defer resp.Body.Close()
	var ttfb time.Duration
	got := make([]byte, 0, len(want))
	buf := make([]byte, 16<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			from := max(0, len(got)-len(textStart)+1)
			got = append(got, buf[:n]...)
			if ttfb == 0 && bytes.Contains(got[from:], textStart) {
				ttfb = time.Since(start)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Error(err)
			return 0
		}
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
		b.Errorf("status %d, body %d bytes (want %d)", resp.StatusCode, len(got), len(want))
	}
	return ttfb
}

// textStart opens the first text delta; the role chunk before it has
// "content":null.
var textStart = []byte(`"content":"`)

func runProxyBench(b *testing.B, stream bool) {
	e := newBenchEnv(b)
	body, want := e.plainReq, e.answer
	if stream {
		body, want = e.streamReq, e.stream
	}
	targets := []struct{ name, url string }{{"toolgate", e.gate.URL}, {"bare", e.bare.URL}, {"direct", e.mock.URL}}
	for _, t := range targets {
		b.Run(t.name, func(b *testing.B) {
			b.ReportAllocs()
			var ttfb []time.Duration
			for b.Loop() {
				if d := e.do(b, t.url, body, want); d > 0 {
					ttfb = append(ttfb, d)
				}
			}
			if len(ttfb) > 0 {
				// The median is robust to the scheduling spikes of a busy
				// machine, unlike the mean that ns/op is.
				slices.Sort(ttfb)
				b.ReportMetric(float64(ttfb[len(ttfb)/2].Nanoseconds())/1e3, "ttfb-p50-µs")
			}
		})
	}
	for _, t := range targets {
		b.Run(t.name+"-c32", func(b *testing.B) {
			b.ReportAllocs()
			// RunParallel starts parallelism × GOMAXPROCS goroutines.
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					e.do(b, t.url, body, want)
				}
			})
		})
	}
}

// BenchmarkProxyNonStream is one plain (stream:false) two-call answer per op.
func BenchmarkProxyNonStream(b *testing.B) { runProxyBench(b, false) }

// BenchmarkProxyStream is one 40-event streamed answer per op.
func BenchmarkProxyStream(b *testing.B) { runProxyBench(b, true) }
