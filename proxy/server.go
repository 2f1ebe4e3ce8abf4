// Package proxy is toolgate's HTTP side, wired: the server takes each
// request, matches it against the route table (proxy/route), and hands a
// model API's judged route to its exchange (proxy/exchange), an MCP route
// to proxy/mcp with the pipeline as it asks (mcpcall.go), and anything
// else to a pass-through. What decides is proxy/pipeline; the codecs
// (proxy/openaichat, proxy/anthropic, proxy/responses, proxy/gemini) only
// translate.
package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/httpx"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/anthropic"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/exchange"
	"github.com/toolgate/toolgate/proxy/gemini"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/proxy/responses"
	"github.com/toolgate/toolgate/proxy/route"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/recovery"
)

// Options configure a Server.
type Options struct {
	Store   *catalog.Store
	Logger  *zap.Logger
	Metrics *observe.Metrics
	Sink    pipeline.Sink
	// Keepalive is the interval of ": keepalive" comments on held streams
	// (default 15s).
	Keepalive time.Duration
	// Observer, when set, receives every judged answer's recovery steps.
	Observer pipeline.RecoveryObserver
	// Approvals, when set, holds confirm calls for a person and resumes
	// them (docs/approvals.md); nil escalates them with nothing to approve.
	Approvals *approval.Service
	// TraceTuning bounds the trace export queue (tests shorten it).
	TraceTuning telemetry.Tuning
	// Version is toolgate's, reported with every span.
	Version string
}

// Server is the proxy listener's handler.
type Server struct {
	store   *catalog.Store
	log     *zap.Logger
	metrics *observe.Metrics
	// recorder keeps the books: counts, escalation records, log lines.
	recorder *pipeline.Recorder
	rt       atomic.Pointer[runtime]
	// mcp keeps MCP sessions and the tool lists learned in them across
	// reloads.
	mcp *mcp.Gateway

	tracing *observe.Tracing
	// models is what the model routes' exchanges share across reloads:
	// the books, approvals, and the memory of escalation replies.
	models *exchange.Env
}

// runtime is one generation: everything built from one snapshot (its
// routes, upstream clients, validators, the ladder's settings), built at
// load and swapped whole. A request keeps the runtime it started with.
type runtime struct {
	// Generation is what every route of the generation judges with: the
	// snapshot, the ladder's settings, the validators and the tracer.
	pipeline.Generation
	routes *route.Table
	ups    []*upstream.Upstream
	// contextHeaders maps each catalog.context header (canonical) to its
	// context name.
	contextHeaders map[string]string
	mcps           []*mcp.Route
}

// apis maps api_paths values and built-in routes to their wire formats.
var apis = map[string]api.API{
	"chat":      openaichat.API{},
	"messages":  anthropic.API{},
	"responses": responses.API{},
	"gemini":    gemini.API{},
}

// apiNames are the names of apis, whose series the metrics create ahead
// of traffic.
var apiNames = slices.Sorted(maps.Keys(apis))

// New builds a Server serving the store's current snapshot.
func New(o Options) (*Server, error) {
	s := &Server{store: o.Store, log: o.Logger, metrics: o.Metrics}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.metrics == nil {
		s.metrics = observe.NewMetrics(prometheus.NewRegistry())
	}
	var sink pipeline.Sink = nopSink{}
	if o.Sink != nil {
		sink = o.Sink
	}
	s.recorder = &pipeline.Recorder{Log: s.log, Metrics: s.metrics, Sink: sink}
	keepalive := o.Keepalive
	if keepalive <= 0 {
		keepalive = 15 * time.Second
	}
	s.models = &exchange.Env{Log: s.log, Metrics: s.metrics, Recorder: s.recorder, Approvals: o.Approvals,
		Replays: &exchange.Replays{}, Keepalive: keepalive, Observer: o.Observer}
	s.tracing = observe.NewTracing(o.TraceTuning, o.Version, s.log, s.metrics.TraceSpansDropped)
	s.mcp = mcp.NewGateway(mcp.Deps{Log: s.log, Metrics: &mcp.Metrics{UpstreamDuration: s.metrics.UpstreamDuration}, Approvals: o.Approvals, CallerToken: exchange.CallerOf})
	rt, err := s.build(o.Store.Load())
	if err != nil {
		return nil, err
	}
	s.rt.Store(rt)
	snap := o.Store.Load()
	s.metrics.SetCatalog(snap.Version, snap.Names, apiNames)
	return s, nil
}

type nopSink struct{}

func (nopSink) Record(*pipeline.EscalationRecord) {}

// Apply installs a new snapshot: routes and upstream clients are rebuilt off
// to the side, then swapped in one step. Requests in flight keep the old one.
func (s *Server) Apply(snap *catalog.Snapshot) error {
	rt, err := s.build(snap)
	if err != nil {
		return err
	}
	old := s.rt.Swap(rt)
	s.store.Swap(snap)
	s.metrics.SetCatalog(snap.Version, snap.Names, apiNames)
	if old != nil {
		for _, u := range old.ups {
			u.Close()
		}
		old.Validators.Close()
		for _, m := range old.mcps {
			m.Close()
		}
	}
	return nil
}

func (s *Server) build(snap *catalog.Snapshot) (*runtime, error) {
	rt := &runtime{Generation: pipeline.Generation{Snap: snap, Settings: recovery.SettingsFrom(snap)}}
	for name, src := range snap.Config.Catalog.Context {
		if rt.contextHeaders == nil {
			rt.contextHeaders = map[string]string{}
		}
		rt.contextHeaders[http.CanonicalHeaderKey(src.Header)] = name
	}
	routes := route.NewTable()
	for _, uc := range snap.Config.Upstreams {
		u, err := upstream.New(uc, snap.Secrets.UpstreamKeys[uc.Name])
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", uc.Name, err)
		}
		rt.ups = append(rt.ups, u)
		prefix := uc.PathPrefix
		for path, name := range route.Builtin {
			a := apis[name]
			routes.AddJudged(name, prefix, path, envelopeOf(a), exchange.NewRoute(s.models, &rt.Generation, u, a, prefix), http.MethodPost)
		}
		for path, name := range uc.APIPaths {
			a, ok := apis[name]
			if !ok {
				return nil, fmt.Errorf("upstream %s: api_paths %s: unknown API %q", uc.Name, path, name)
			}
			routes.AddJudged(name, prefix, path, envelopeOf(a), exchange.NewRoute(s.models, &rt.Generation, u, a, prefix), http.MethodPost)
		}
		routes.AddPassThrough(prefix, s.passthrough(rt, u, prefix))
	}
	// The MCP routes judge with the validators, so they come first.
	rt.Validators = judge.NewValidators(snap.Validators, s.metrics.ObserveValidator)
	if err := s.mcpRoutes(rt, routes); err != nil {
		rt.Validators.Close()
		return nil, err
	}
	rt.routes = routes
	names := make([]string, len(snap.Validators))
	for i, v := range snap.Validators {
		names[i] = v.Name
	}
	s.metrics.InitValidators(names)
	// Last: nothing after it can fail, so a rejected config never
	// replaces the live exporter.
	tracer, err := s.tracing.Tracer(snap)
	if err != nil {
		rt.Validators.Close()
		return nil, fmt.Errorf("tracing: %w", err)
	}
	rt.Tracer = tracer
	return rt, nil
}

// CloseTracing flushes the spans still queued and stops the exporter,
// within ctx. It is the last step of a shutdown.
func (s *Server) CloseTracing(ctx context.Context) error { return s.tracing.Close(ctx) }

// FlushTracing exports the spans queued so far, within ctx.
func (s *Server) FlushTracing(ctx context.Context) error { return s.tracing.Flush(ctx) }

// mcpMethods are every method an MCP route answers itself.
var mcpMethods = []string{http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodPut,
	http.MethodPatch, http.MethodHead, http.MethodOptions}

// jsonRPCPlainError is toolgate's own refusal on an MCP route: a JSON-RPC
// error with no id, which MCP clients raise as a transport error.
func jsonRPCPlainError(f neutral.Failure) []byte {
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, _ := jsonx.Marshal(struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      any      `json:"id"`
		Error   rpcError `json:"error"`
	}{JSONRPC: "2.0", Error: rpcError{Code: -32600, Message: f.Message}})
	return b
}

// mcpRoutes mounts each MCP server at its path_prefix, through the route
// table like every judged route, so the path guard refuses every other
// spelling of it, in shadow mode too. The route owns the path for every method (the MCP
// handler answers 405 to any but POST, GET and DELETE), so no method falls
// through to a model API's pass-through.
func (s *Server) mcpRoutes(rt *runtime, routes *route.Table) error {
	for _, mc := range rt.Snap.Config.MCPServers {
		h, err := s.mcp.Route(rt.Snap, &mcpPipeline{s: s, rt: rt}, mc)
		if err != nil {
			return fmt.Errorf("mcp server %s: %w", mc.Name, err)
		}
		rt.mcps = append(rt.mcps, h)
		routes.AddServer("mcp", mc.PathPrefix, jsonRPCPlainError, observe.TracedMCP(h, mc.Name), mcpMethods...)
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bw := begin(w)
	defer s.recovered(bw, r)
	s.serve(bw, r, bw.RequestID, bw)
}

// recovered answers a request whose handler panicked, when one did. It is
// deferred by ServeHTTP and calls recover itself, as recover requires.
func (s *Server) recovered(bw *exchange.Writer, r *http.Request) {
	rid := bw.RequestID
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		panic(p)
	}
	s.metrics.PanicsRecovered.Inc()
	s.log.Error("handler panic", zap.String("request_id", rid), zap.String("path", r.URL.Path),
		zap.String("panic", fmt.Sprint(p)), zap.Stack("stack"))
	if bw.Began() {
		// The status is sent and a stream may be half written: an error
		// body now would land inside it, and a clean end would pass a cut
		// answer off as complete. Cutting the connection makes the
		// client's SDK report a failure.
		panic(http.ErrAbortHandler)
	}
	writeOpenAIFailure(bw, pipeline.PanicFailure(rid))
}

// The functions from ServeHTTP down to the stream reader keep their frames
// small, and what a waiting stream does not need is out of line: why, and
// where each such helper is, is in stackdepth.go.

// serve is ServeHTTP within its recovery, apart from it so that the frame
// a held stream waits under stays small (see serveStream).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, rid string, bw *exchange.Writer) {
	rt := s.rt.Load()
	caller, ok := upstream.CheckInbound(r.Header, rt.Snap.Secrets.InboundTokens)
	if !ok {
		writeOpenAIFailure(w, pipeline.AuthFailure)
		return
	}
	bw.Caller = caller
	if rt.Tracer != nil {
		s.serveTraced(w, r, rid, bw, rt)
		return
	}
	s.route(w, requestContext(r, rid, rt), rt)
}

// takeContext reads the catalog.context values from the request's headers
// and removes those headers, so they reach no upstream on any route. A
// header sent empty, or more than once, counts as not sent: a rule reading
// it fails closed rather than pick one of two customers.
func takeContext(h http.Header, headers map[string]string) map[string]string {
	vals := make(map[string]string, len(headers))
	for k, name := range headers {
		if vs := h.Values(k); len(vs) == 1 {
			if v := strings.TrimSpace(vs[0]); v != "" {
				vals[name] = v
			}
		}
		h.Del(k)
	}
	return vals
}

// passthrough forwards anything that is not a validated route byte for byte.
// The body is read whole first: handing the live inbound body to the
// transport lets the server close it under the transport's feet and truncate
// answers (golang/go#40747).
func (s *Server) passthrough(rt *runtime, u *upstream.Upstream, prefix string) http.Handler {
	segments := strings.Count(prefix, "/")
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The client's own bytes after the prefix: the guard has
			// checked that no reading of them is a judged route, and
			// canonical routing never moves a "/", so the prefix is the
			// path's first segments.
			httpx.DropToolgateHeaders(pr.Out.Header)
			query := u.ApplyKey(pr.Out.Header, pr.In.URL.RawQuery, "")
			pr.Out.URL = u.Target(route.AfterSegments(route.RawPath(pr.In.URL), segments), query)
			pr.Out.Host = ""
		},
		ModifyResponse: func(resp *http.Response) error {
			httpx.DropToolgateHeaders(resp.Header)
			return nil
		},
		Transport:     u.Transport(),
		FlushInterval: -1,
		ErrorLog:      zap.NewStdLog(s.log),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("pass-through upstream error", zap.String("request_id", pipeline.RequestID(r.Context())), zap.Error(httpx.WithoutURL(err)))
			writeOpenAIFailure(w, pipeline.Classify(err))
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := exchange.ReadBody(w, r, rt.Snap.Config.Limits.MaxRequestBytes)
		if err != nil {
			writeOpenAIFailure(w, pipeline.Classify(err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	})
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}
