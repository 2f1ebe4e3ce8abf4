package telemetry

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/otlptest"
)

func TestExportOverBothProtocols(t *testing.T) {
	for _, proto := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(proto, func(t *testing.T) {
			var r *otlptest.Receiver
			endpoint := ""
			if proto == ProtocolGRPC {
				r = otlptest.NewGRPC(t)
				endpoint = r.Addr
			} else {
				r = otlptest.NewHTTP(t)
				endpoint = r.URL
			}
			p, err := New(Config{Endpoint: endpoint, Protocol: proto, SampleRatio: 1, Version: "v-test"}, Tuning{Interval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			_, sp := p.Tracer().Start(context.Background(), "one")
			sp.End()
			got := r.Wait(t, 5*time.Second, func(s []otlptest.Span) bool { return len(s) == 1 })
			if got[0].Name != "one" || got[0].Service != "toolgate" {
				t.Errorf("got %+v", got[0])
			}
		})
	}
}

// blockingExporter never returns until released, like a collector that
// accepts the connection and never answers.
type blockingExporter struct {
	release chan struct{}
	calls   atomic.Int32
}

func (b *blockingExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	b.calls.Add(1)
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *blockingExporter) Shutdown(context.Context) error { return nil }

func TestQueueDropsAndCountsWhenTheCollectorStalls(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	var dropped atomic.Int64
	q := newQueue(exp, queueOptions{size: 8, batch: 2, interval: time.Hour, timeout: time.Hour,
		dropped: func(n int) { dropped.Add(int64(n)) }})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	tr := tp.Tracer("t")
	start := time.Now()
	for range 200 {
		_, sp := tr.Start(context.Background(), "s")
		sp.End()
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("ending 200 spans took %v with the exporter stalled", d)
	}
	// At most the queue, the batch in the exporter and one being
	// gathered are held; everything else was dropped and counted.
	if n := dropped.Load(); n < 200-8-2-2 || n > 200 {
		t.Errorf("dropped %d of 200 with a queue of 8", n)
	}
	close(exp.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return &net.OpError{Op: "dial", Err: errRefused}
}
func (failingExporter) Shutdown(context.Context) error { return nil }

var errRefused = &net.AddrError{Err: "connection refused"}

func TestQueueCountsABatchTheCollectorRefused(t *testing.T) {
	var dropped atomic.Int64
	q := newQueue(failingExporter{}, queueOptions{size: 64, batch: 64, interval: time.Hour, timeout: time.Second,
		dropped: func(n int) { dropped.Add(int64(n)) }})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	for range 5 {
		_, sp := tp.Tracer("t").Start(context.Background(), "s")
		sp.End()
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := dropped.Load(); n != 5 {
		t.Errorf("dropped %d, want 5", n)
	}
	_ = tp.Shutdown(context.Background())
}

func TestUnsampledSpansAreNotQueued(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	close(exp.release)
	var dropped atomic.Int64
	q := newQueue(exp, queueOptions{size: 1, batch: 1, interval: time.Hour, timeout: time.Second,
		dropped: func(n int) { dropped.Add(int64(n)) }})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q), sdktrace.WithSampler(sdktrace.NeverSample()))
	for range 10 {
		_, sp := tp.Tracer("t").Start(context.Background(), "s")
		sp.End()
	}
	_ = tp.ForceFlush(context.Background())
	if exp.calls.Load() != 0 || dropped.Load() != 0 {
		t.Errorf("unsampled spans reached the queue: %d exports, %d dropped", exp.calls.Load(), dropped.Load())
	}
	_ = tp.Shutdown(context.Background())
}

func TestExtract(t *testing.T) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name   string
		header http.Header
		want   string // trace id continued, "" for a new trace
		state  string
	}{
		{"valid", http.Header{"Traceparent": {valid}, "Tracestate": {"v=1"}}, "4bf92f3577b34da6a3ce929d0e0e4736", "v=1"},
		{"absent", http.Header{}, "", ""},
		{"malformed", http.Header{"Traceparent": {"00-zz-00f067aa0ba902b7-01"}}, "", ""},
		{"zero trace id", http.Header{"Traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}, "", ""},
		{"oversized", http.Header{"Traceparent": {valid + "-" + strings.Repeat("a", 4096)}}, "", ""},
		{"twice", http.Header{"Traceparent": {valid, valid}}, "", ""},
		{"oversized tracestate kept out", http.Header{"Traceparent": {valid}, "Tracestate": {"v=" + strings.Repeat("x", 1000)}},
			"4bf92f3577b34da6a3ce929d0e0e4736", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := trace.SpanContextFromContext(Extract(context.Background(), tt.header))
			got := ""
			if sc.IsValid() {
				got = sc.TraceID().String()
			}
			if got != tt.want || sc.TraceState().String() != tt.state {
				t.Errorf("trace %q state %q, want %q %q", got, sc.TraceState().String(), tt.want, tt.state)
			}
		})
	}
}

func TestInjectReplacesTheClientsContext(t *testing.T) {
	ctx := Extract(context.Background(), http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	tp := sdktrace.NewTracerProvider()
	ctx, sp := tp.Tracer("t").Start(ctx, "s")
	defer sp.End()
	h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "Tracestate": {"a=1,b=2"}}
	Inject(ctx, h)
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + sp.SpanContext().SpanID().String() + "-01"
	if got := h.Values("Traceparent"); len(got) != 1 || got[0] != want {
		t.Errorf("traceparent %v, want %s", got, want)
	}
	if h.Get("Tracestate") != "" {
		t.Errorf("tracestate %q kept though the span has none", h.Get("Tracestate"))
	}
	empty := http.Header{"Traceparent": {"as sent"}}
	Inject(context.Background(), empty)
	if empty.Get("Traceparent") != "as sent" {
		t.Error("with no span, the header was touched")
	}
}

func TestEndpoint(t *testing.T) {
	tests := []struct {
		raw, proto, host, path string
		secure, bad            bool
	}{
		{"http://127.0.0.1:4318", ProtocolHTTP, "127.0.0.1:4318", "/v1/traces", false, false},
		{"https://tempo.example/otlp/v1/traces", ProtocolHTTP, "tempo.example:443", "/otlp/v1/traces", true, false},
		{"127.0.0.1:4317", ProtocolGRPC, "127.0.0.1:4317", "/v1/traces", false, false},
		{"https://otel.example:4317", ProtocolGRPC, "otel.example:4317", "/v1/traces", true, false},
		{"127.0.0.1:4318", ProtocolHTTP, "", "", false, true},
		{"http://u:p@h:4318", ProtocolHTTP, "", "", false, true},
		{"ftp://h:1", ProtocolHTTP, "", "", false, true},
	}
	for _, tt := range tests {
		host, path, secure, err := Endpoint(tt.raw, tt.proto)
		if tt.bad != (err != nil) || host != tt.host || path != tt.path || secure != tt.secure {
			t.Errorf("%s %s: %q %q %v %v", tt.raw, tt.proto, host, path, secure, err)
		}
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc"},
		{"aé", 3, "aé"},
		{"aéb", 2, "a"},
		{"日本", 4, "日"},
	}
	for _, tt := range tests {
		if got := Clip(tt.in, tt.n); got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
