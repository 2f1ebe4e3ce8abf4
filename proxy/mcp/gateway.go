// Package mcp stands toolgate in front of MCP servers (docs/mcp.md): it
// forwards Streamable HTTP between a client and one configured server,
// learns the server's tools from its tools/list answers, and judges every
// tools/call with the same validator as the model side before the server
// sees it.
//
// toolgate serves MCP revision 2026-07-28 statelessly, each request on its
// own (revision.go, stateless.go), and the session revisions 2025-11-25,
// 2025-06-18 and 2025-03-26 (the only one with JSON-RPC batches), chosen
// per request.
package mcp

import (
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
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// Metrics are the proxy's collectors an MCP route observes itself; the
// pipeline counts requests, calls and escalations.
type Metrics struct {
	UpstreamDuration *prometheus.HistogramVec // api, kind
}

// Deps are what the MCP routes need from the proxy around them.
type Deps struct {
	Log     *zap.Logger
	Metrics *Metrics
	// Approvals, when set, holds a confirm call of a client without
	// elicitation for a person's yes and releases it once (approve.go).
	Approvals *approval.Service
	// CallerToken returns the inbound token of the request a writer
	// answers ("" without inbound_auth), which an approval binds to.
	CallerToken func(http.ResponseWriter) string
}

// Gateway holds what outlives a config reload: each server's sessions and
// the tool lists learned in them.
type Gateway struct {
	deps   Deps
	mu     sync.Mutex
	states map[string]*serverState
	// processKey signs requestStates when no secret is configured; used
	// are the confirmations already answered here, when there is no
	// approvals store to record them for every replica.
	processKey []byte
	used       usedStates
}

// NewGateway returns a Gateway counting in d.Metrics.
func NewGateway(d Deps) *Gateway {
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	return &Gateway{deps: d, states: map[string]*serverState{}, processKey: randomKey()}
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
	gateway *Gateway
	snap    *catalog.Snapshot
	// pipe judges, counts and records under the snapshot, swapped with it.
	pipe   Pipeline
	cfg    catalog.MCPServer
	key    string
	target *url.URL
	client *http.Client
	state  *serverState
	// stateKey signs the requestState of a stateless confirmation.
	stateKey []byte
}

// Route builds the handler of server cfg under snap, whose calls pipe
// judges.
func (g *Gateway) Route(snap *catalog.Snapshot, pipe Pipeline, cfg catalog.MCPServer) (*Route, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, err
	}
	// The answer's headers are held to idle_timeout: a server answering
	// in JSON sends none until the tool is done.
	tr := httpx.NewTransport(cfg.ConnectTimeout.D(), cfg.IdleTimeout.D())
	return &Route{
		gateway: g, snap: snap, pipe: pipe, cfg: cfg, key: snap.Secrets.MCPKeys[cfg.Name], target: u, state: g.state(cfg),
		client:   &http.Client{Transport: tr, CheckRedirect: httpx.NoRedirects},
		stateKey: stateKeyFor(snap.Secrets.MCPStateSecret, snap.Secrets.ApprovalsAdminToken, g.processKey),
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
	sw := &statusWriter{ResponseWriter: w}
	cr := rt.newClientRequest(sw, r)
	defer func() {
		rt.pipe.Done(r.Context(), &RequestReport{RequestID: cr.rid, Route: r.URL.Path, Server: rt.cfg.Name, Status: sw.status,
			Outcome: cr.outcome, Findings: cr.findings, Start: cr.start, Upstream: cr.upstreamWait, Calls: cr.calls})
		trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("toolgate.outcome", cr.outcome))
	}()
	if rt.rebinding(sw, r) {
		cr.outcome = outcomeForbidden
		return
	}
	switch r.Method {
	case http.MethodPost:
		cr.post()
	case http.MethodGet, http.MethodDelete:
		cr.forwardNonPost()
	case http.MethodOptions:
		// A browser's CORS preflight, from an origin that passed the
		// check above: the server answers it as it would without toolgate,
		// and its Access-Control-* headers come back unchanged.
		cr.forwardNonPost()
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		cr.writeJSON(http.StatusMethodNotAllowed, jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest, "MCP Streamable HTTP takes POST, GET and DELETE", nil))
		cr.outcome = outcomeInvalid
	}
}

// statusWriter remembers the status the route answered with, for the
// request's report.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

const apiMCP = "mcp"

// Request outcomes (toolgate_requests_total{api="mcp"}).
const (
	outcomePass      = "pass"
	outcomeEscalated = "escalated"
	outcomeConfirmed = "confirmed"
	// outcomeInputRequired: a stateless client was asked to confirm a
	// call through an input request; its retry carries the answer.
	outcomeInputRequired = "input_required"
	outcomeUpstreamError = "upstream_error"
	outcomeInvalid       = "invalid"
	outcomeLimited       = "limited"
	// outcomeForbidden: refused for its Origin or Host (DNS rebinding).
	outcomeForbidden = "forbidden"
	// outcomeCancelled: the client left before its answer was complete;
	// nothing says the server failed.
	outcomeCancelled = "cancelled"
)
