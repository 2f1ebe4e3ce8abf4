package observe

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// Tracing keeps the exporter of the live tracing config. A reload that
// leaves tracing as it was keeps the same exporter; one that changes it
// starts a new one, and the old one keeps taking the spans of requests
// that began under it until retireAfter has passed, then flushes and stops.
type Tracing struct {
	mu      sync.Mutex
	cfg     telemetry.Config
	cur     *telemetry.Provider
	tune    telemetry.Tuning
	version string
	log     *zap.Logger
}

// retireAfter is how long a replaced exporter stays up for the requests
// that started under it.
var retireAfter = 2 * time.Minute

// NewTracing keeps the exporters of toolgate version, bounded by tune;
// spans dropped from a full queue are counted in dropped unless tune
// counts them itself.
func NewTracing(tune telemetry.Tuning, version string, log *zap.Logger, dropped prometheus.Counter) *Tracing {
	if tune.Dropped == nil {
		tune.Dropped = func(n int) { dropped.Add(float64(n)) }
	}
	return &Tracing{tune: tune, version: version, log: log}
}

// Tracer is the tracer for a generation of snap, nil with tracing off.
func (t *Tracing) Tracer(snap *catalog.Snapshot) (trace.Tracer, error) {
	tc := snap.Config.Tracing
	cfg := telemetry.Config{Endpoint: tc.Endpoint, Protocol: tc.Protocol, Headers: snap.Secrets.TraceHeaders, Version: t.version}
	if tc.SampleRatio != nil {
		cfg.SampleRatio = *tc.SampleRatio
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur != nil && sameTracing(cfg, t.cfg) {
		return t.cur.Tracer(), nil
	}
	var next *telemetry.Provider
	if cfg.Endpoint != "" {
		p, err := telemetry.New(cfg, t.tune)
		if err != nil {
			return nil, err
		}
		next = p
	}
	if old := t.cur; old != nil {
		time.AfterFunc(retireAfter, func() { shutdownProvider(old) })
	}
	t.cur, t.cfg = next, cfg
	if next == nil {
		return nil, nil
	}
	t.log.Info("trace export on", zap.String("protocol", cfg.Protocol), zap.Float64("sample_ratio", cfg.SampleRatio))
	return next.Tracer(), nil
}

func sameTracing(a, b telemetry.Config) bool {
	return a.Endpoint == b.Endpoint && a.Protocol == b.Protocol && a.SampleRatio == b.SampleRatio &&
		maps.Equal(a.Headers, b.Headers)
}

func shutdownProvider(p *telemetry.Provider) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.Shutdown(ctx)
}

// Close flushes and stops the live exporter within ctx.
func (t *Tracing) Close(ctx context.Context) error {
	t.mu.Lock()
	p := t.cur
	t.cur = nil
	t.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Shutdown(ctx)
}

// Flush exports what is queued, within ctx.
func (t *Tracing) Flush(ctx context.Context) error {
	t.mu.Lock()
	p := t.cur
	t.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.ForceFlush(ctx)
}

// StartServer opens the request's server span, continuing the client's
// trace, and puts its context in the request's headers, so that whatever
// is forwarded as it came (pass-through routes, MCP servers) carries it.
func StartServer(ctx context.Context, tr trace.Tracer, r *http.Request, limit int64) (context.Context, trace.Span) {
	ctx = telemetry.Extract(ctx, r.Header)
	if !trace.SpanContextFromContext(ctx).IsValid() && r.Method == http.MethodPost && r.Header.Get("Mcp-Method") != "" {
		// MCP 2026-07-28 carries the caller's trace in params._meta as
		// well; only its requests have Mcp-Method, so no other body is
		// read here.
		ctx = telemetry.Extract(ctx, metaTrace(r, limit))
	}
	ctx, sp := tr.Start(ctx, "toolgate", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method)))
	telemetry.Inject(ctx, r.Header)
	return ctx, sp
}

// EndServer records the status the client got and ends the span.
func EndServer(sp trace.Span, status int) {
	if status != 0 {
		sp.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if status >= 500 {
		sp.SetStatus(codes.Error, http.StatusText(status))
	}
	sp.End()
}

// TracedMCP names the server span of an MCP route's requests after the
// server they are for.
func TracedMCP(h http.Handler, server string) http.Handler {
	name := "mcp " + server
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sp := trace.SpanFromContext(r.Context()); sp.IsRecording() {
			sp.SetName(name)
			sp.SetAttributes(attribute.String("toolgate.api", "mcp"), attribute.String("toolgate.mcp_server", server),
				attribute.String("rpc.system", "jsonrpc"))
		}
		h.ServeHTTP(w, r)
	})
}

// metaTrace reads traceparent and tracestate from an MCP request's
// params._meta into headers for Extract. The body read stays the
// request's: the route reads it again from the start. A body over limit is
// not looked into; the route refuses it.
func metaTrace(r *http.Request, limit int64) http.Header {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
	if err != nil || int64(len(b)) > limit {
		return nil
	}
	msg, err := jsonx.ParseObject(b)
	if err != nil {
		return nil
	}
	params, err := jsonx.ParseObject(msg.Get("params"))
	if err != nil {
		return nil
	}
	meta, err := jsonx.ParseObject(params.Get("_meta"))
	if err != nil {
		return nil
	}
	h := http.Header{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v, ok := jsonx.Unquote(meta.Get(k)); ok && v != "" {
			h.Set(k, v)
		}
	}
	return h
}
