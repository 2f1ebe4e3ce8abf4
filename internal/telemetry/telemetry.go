// Package telemetry exports toolgate's traces over OTLP (docs/tracing.md): the
// tracer provider built from the tracing config, a bounded export queue
// that drops and counts rather than wait, and the W3C trace context read
// from clients and written to everything toolgate calls.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Protocols of tracing.protocol.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Name is the instrumentation scope of every span toolgate makes.
const Name = "github.com/toolgate/toolgate"

// Config is one tracing configuration, secrets resolved.
type Config struct {
	Endpoint    string
	Protocol    string
	SampleRatio float64
	// Headers are sent with every export; they are credentials.
	Headers map[string]string
	// Version is toolgate's own, the service.version of every span.
	Version string
}

// Tuning bounds the export queue. The zero value takes the defaults.
type Tuning struct {
	QueueSize int
	BatchSize int
	// Interval is how long a span may wait in the queue for its batch.
	Interval time.Duration
	// ExportTimeout bounds one batch's export.
	ExportTimeout time.Duration
	// Dropped counts spans lost: refused by the full queue, or in a batch
	// the collector did not take.
	Dropped func(n int)
}

func (t Tuning) withDefaults() Tuning {
	if t.QueueSize <= 0 {
		t.QueueSize = 4096
	}
	if t.BatchSize <= 0 {
		t.BatchSize = 512
	}
	if t.Interval <= 0 {
		t.Interval = time.Second
	}
	if t.ExportTimeout <= 0 {
		t.ExportTimeout = 5 * time.Second
	}
	return t
}

// Provider is a running exporter and the tracer that feeds it.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New builds the exporter and the provider. Nothing connects here: the
// exporter dials when it first sends, on the queue's goroutine.
func New(cfg Config, tune Tuning) (*Provider, error) {
	exp, err := newExporter(cfg)
	if err != nil {
		return nil, err
	}
	tune = tune.withDefaults()
	q := newQueue(exp, queueOptions{size: tune.QueueSize, batch: tune.BatchSize, interval: tune.Interval,
		timeout: tune.ExportTimeout, dropped: tune.Dropped})
	res := resource.NewSchemaless(attribute.String("service.name", "toolgate"),
		attribute.String("service.version", cfg.Version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
		sdktrace.WithSpanProcessor(q),
		sdktrace.WithResource(res),
	)
	return &Provider{tp: tp, tracer: tp.Tracer(Name)}, nil
}

// Tracer starts toolgate's spans.
func (p *Provider) Tracer() trace.Tracer { return p.tracer }

// ForceFlush exports what is queued, within ctx.
func (p *Provider) ForceFlush(ctx context.Context) error { return p.tp.ForceFlush(ctx) }

// Shutdown exports what is queued and stops, within ctx.
func (p *Provider) Shutdown(ctx context.Context) error { return p.tp.Shutdown(ctx) }

func newExporter(cfg Config) (sdktrace.SpanExporter, error) {
	host, path, secure, err := Endpoint(cfg.Endpoint, cfg.Protocol)
	if err != nil {
		return nil, err
	}
	// Retries would keep one batch in the exporter while the queue fills
	// behind it; a lost batch costs less than a stalled queue.
	ctx := context.Background()
	switch cfg.Protocol {
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(host), otlptracegrpc.WithHeaders(cfg.Headers),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
		if !secure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	default:
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(host), otlptracehttp.WithURLPath(path),
			otlptracehttp.WithHeaders(cfg.Headers), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})}
		if !secure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return otlptracehttp.New(ctx, opts...)
	}
}

// Endpoint reads tracing.endpoint: a URL (http or https), or for grpc a
// bare HOST:PORT, which is plaintext like http://. The path is where
// http/protobuf posts, /v1/traces unless the URL names one.
func Endpoint(raw, protocol string) (host, path string, secure bool, err error) {
	s := raw
	if !strings.Contains(s, "://") {
		if protocol != ProtocolGRPC {
			return "", "", false, errors.New("must be a URL such as http://127.0.0.1:4318")
		}
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", "", false, errors.New("is not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", "", false, fmt.Errorf("scheme %q is neither http nor https", u.Scheme)
	case u.Hostname() == "":
		return "", "", false, errors.New("has no host")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		// Credentials belong in headers_env, which is never logged.
		return "", "", false, errors.New("may not carry credentials, a query or a fragment")
	}
	host = u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[u.Scheme == "https"])
	}
	path = u.EscapedPath()
	if path == "" || path == "/" {
		path = "/v1/traces"
	}
	return host, path, u.Scheme == "https", nil
}

// Bounds on the trace context a client may send: anything larger is not
// W3C trace context and starts a new trace.
const (
	maxTraceparent = 128
	maxTracestate  = 512
)

var propagator = propagation.TraceContext{}

// Extract continues the client's trace, if it sent a valid traceparent of
// sane size; anything else is ignored and the request starts a trace.
func Extract(ctx context.Context, h http.Header) context.Context {
	tp := h.Values("Traceparent")
	if len(tp) != 1 || len(tp[0]) > maxTraceparent {
		return ctx
	}
	c := propagation.HeaderCarrier(h)
	if ts := h.Values("Tracestate"); len(ts) > 1 || len(strings.Join(ts, ",")) > maxTracestate {
		c = propagation.HeaderCarrier{"Traceparent": tp}
	}
	return propagator.Extract(ctx, c)
}

// Inject writes the context of the span in ctx into h, replacing any the
// client sent. With no span it leaves h alone.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	h.Del("Traceparent")
	h.Del("Tracestate")
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Tracer is the tracer of the span in ctx: its provider's, so a span
// started from it follows the same provider and sampling, and without a
// span nothing is recorded.
func Tracer(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(Name)
}

// Recording reports whether the span in ctx records: attributes that
// cost something to build are only built then.
func Recording(ctx context.Context) bool {
	return trace.SpanFromContext(ctx).IsRecording()
}

// Clip bounds s at n bytes on a rune boundary: names a client or a model
// chose go on spans, and an invented one may be any length.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
