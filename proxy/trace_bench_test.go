package proxy_test

import (
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/otlptest"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/proxy"
)

// BenchmarkTracing is one plain two-call answer per op through toolgate
// with tracing off, exporting to a collector that takes every span, and
// to one that is down (connection refused) or silent (accepts and never
// answers). A collector's state must not show in ns/op: spans are queued
// without waiting and dropped when the queue is full.
func BenchmarkTracing(b *testing.B) {
	e := newBenchEnv(b)
	// Export failures are expected here; the default handler prints each.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	live := otlptest.NewHTTP(b)
	refused := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return ln.Addr().String()
	}()
	silent, _ := net.Listen("tcp", "127.0.0.1:0")
	b.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	cases := []struct{ name, tracing string }{
		{"off", ""},
		{"collector-up", "tracing: {endpoint: '" + live.URL + "'}\n"},
		{"collector-up-ratio-0.01", "tracing: {endpoint: '" + live.URL + "', sample_ratio: 0.01}\n"},
		{"collector-refused", "tracing: {endpoint: 'http://" + refused + "'}\n"},
		{"collector-silent", "tracing: {endpoint: 'http://" + silent.Addr().String() + "'}\n"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			url := tracedBenchGate(b, e.mock.URL, c.tracing)
			b.ReportAllocs()
			for b.Loop() {
				e.do(b, url, e.plainReq, e.answer)
			}
		})
	}
}

func tracedBenchGate(b *testing.B, upstream, tracing string) string {
	b.Helper()
	cfg, err := catalog.Parse([]byte("upstreams:\n  - name: mock\n    url: "+upstream+"\n"+benchCatalogYAML+tracing), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Store: catalog.NewStore(snap), Logger: discardLogger(),
		TraceTuning: telemetry.Tuning{ExportTimeout: 2 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	gate := httptest.NewServer(srv)
	b.Cleanup(gate.Close)
	return gate.URL
}
