// Package mcp stands toolgate in front of MCP servers (SPEC §3a): it
// forwards Streamable HTTP between a client and one configured server,
// learns the server's tools from its tools/list answers, and judges every
// tools/call with the same validator as the model side before the server
// sees it.
//
// toolgate follows MCP revision 2025-11-25 and also serves clients that
// negotiate 2025-06-18 or 2025-03-26 (the only one with JSON-RPC batches).
// The stateless 2026-07-28 handshake (server/discover) is declined, and
// clients then fall back to initialize, as that revision asks them to.
package mcp

import (
	"context"
	"net/http"
	"net/url"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/httpx"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/recovery"
)

// Metrics are the proxy's collectors the MCP routes count in, with
// api="mcp" wherever there is an api label.
type Metrics struct {
	Requests         *prometheus.CounterVec   // api, outcome
	ToolCalls        *prometheus.CounterVec   // api, catalog_version, tool, result
	Hallucinations   *prometheus.CounterVec   // api, catalog_version
	Escalations      *prometheus.CounterVec   // catalog_version, reason
	UpstreamDuration *prometheus.HistogramVec // api, kind
	OutputViolations *prometheus.CounterVec   // catalog_version, tool
}

// Escalation is a refused call on its way to the sinks.
type Escalation struct {
	Server string
	// Session is a hash of the session id, never the id itself.
	Session    string
	Escalation *recovery.Escalation
}

// Deps are what the MCP routes need from the proxy around them.
type Deps struct {
	Log     *zap.Logger
	Metrics *Metrics
	// Escalate hands a refusal to the sinks; it must not block.
	Escalate func(*Escalation)
	// ContextValues returns the catalog.context values the proxy took
	// from the request's headers (and removed from them) before routing
	// it; nil, or a nil result, means none.
	ContextValues func(context.Context) map[string]string
	// Approvals, when set, holds a confirm call of a client without
	// elicitation for a person's yes and releases it once (approve.go).
	Approvals *approval.Service
}

// Gateway holds what outlives a config reload: each server's sessions and
// the tool lists learned in them.
type Gateway struct {
	deps   Deps
	mu     sync.Mutex
	states map[string]*serverState
}

// NewGateway returns a Gateway counting in d.Metrics.
func NewGateway(d Deps) *Gateway {
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Escalate == nil {
		d.Escalate = func(*Escalation) {}
	}
	if d.ContextValues == nil {
		d.ContextValues = func(context.Context) map[string]string { return nil }
	}
	return &Gateway{deps: d, states: map[string]*serverState{}}
}

// state returns the sessions of a server. A server that moved to another
// URL is another server: its sessions would not be valid there.
func (g *Gateway) state(cfg catalog.MCPServer) *serverState {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := cfg.Name + "\x00" + cfg.URL
	st := g.states[k]
	if st == nil {
		st = newServerState()
		g.states[k] = st
	}
	return st
}

// Route is one mcp_servers entry under one snapshot: an http.Handler for
// its path_prefix.
type Route struct {
	g    *Gateway
	snap *catalog.Snapshot
	// validators are the snapshot's validators, swapped with it.
	validators *judge.Validators
	cfg        catalog.MCPServer
	key        string
	target     *url.URL
	client     *http.Client
	st         *serverState
}

// Route builds the handler of server cfg under snap, whose validators vs
// judge its calls (nil calls none).
func (g *Gateway) Route(snap *catalog.Snapshot, vs *judge.Validators, cfg catalog.MCPServer) (*Route, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, err
	}
	// The answer's headers are held to idle_timeout: a server answering
	// in JSON sends none until the tool is done.
	tr := httpx.NewTransport(cfg.ConnectTimeout.D(), cfg.IdleTimeout.D())
	return &Route{
		g: g, snap: snap, validators: vs, cfg: cfg, key: snap.Secrets.MCPKeys[cfg.Name], target: u, st: g.state(cfg),
		client: &http.Client{Transport: tr, CheckRedirect: httpx.NoRedirects},
	}, nil
}

// Close releases the route's idle connections once a reload replaced it.
func (rt *Route) Close() {
	if tr, ok := rt.client.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// ServeHTTP implements http.Handler for the three methods of Streamable
// HTTP, and the CORS preflight a browser sends before them.
func (rt *Route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rt.rebinding(w, r) {
		rt.g.deps.Metrics.Requests.WithLabelValues(apiMCP, outcomeForbidden).Inc()
		return
	}
	x := rt.newExchange(w, r)
	switch r.Method {
	case http.MethodPost:
		x.post()
	case http.MethodGet, http.MethodDelete:
		x.other()
	case http.MethodOptions:
		// A browser's CORS preflight, from an origin that passed the
		// check above: the server answers it as it would without toolgate,
		// and its Access-Control-* headers come back unchanged.
		x.other()
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		x.writeJSON(http.StatusMethodNotAllowed, errorResponse(nil, codeInvalidRequest, "MCP Streamable HTTP takes POST, GET and DELETE", nil))
		x.outcome = outcomeInvalid
	}
	rt.g.deps.Metrics.Requests.WithLabelValues(apiMCP, x.outcome).Inc()
	trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("toolgate.outcome", x.outcome))
}

const apiMCP = "mcp"

// Request outcomes (toolgate_requests_total{api="mcp"}).
const (
	outcomePass          = "pass"
	outcomeEscalated     = "escalated"
	outcomeConfirmed     = "confirmed"
	outcomeUpstreamError = "upstream_error"
	outcomeInvalid       = "invalid"
	outcomeLimited       = "limited"
	// outcomeForbidden: refused for its Origin or Host (DNS rebinding).
	outcomeForbidden = "forbidden"
	// outcomeCancelled: the client left before its answer was complete;
	// nothing says the server failed.
	outcomeCancelled = "cancelled"
)
