package proxy

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Admin serves /metrics, /healthz and /readyz on the admin listener, apart
// from the proxy so that a scrape never competes with agent traffic and the
// proxy port never exposes internals.
type Admin struct {
	ready   atomic.Bool
	handler http.Handler
	mux     *http.ServeMux
}

// NewAdmin returns the admin handler for the registry g.
func NewAdmin(g prometheus.Gatherer) *Admin {
	a := &Admin{}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		// Exemplars (the trace ids on latency buckets) only exist in
		// OpenMetrics; a scraper that asks for it gets it.
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	a.handler, a.mux = mux, mux
	return a
}

// Mount serves h at the patterns, beside metrics and health (the
// approvals admin API). Call it before the listener serves.
func (a *Admin) Mount(h http.Handler, patterns ...string) {
	for _, p := range patterns {
		a.mux.Handle(p, h)
	}
}

// SetReady flips readiness: true once a config is loaded, false when
// draining so that load balancers stop sending first.
func (a *Admin) SetReady(v bool) { a.ready.Store(v) }

// ServeHTTP implements http.Handler.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }
