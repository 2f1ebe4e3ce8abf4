// Package app wires toolgate together: config, listeners, the proxy and admin
// handlers, reloads and the drain on shutdown. cmd/toolgate, the demo and
// the end-to-end tests all start toolgate through it, so they run the same
// thing.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/sink"
)

// App is a running toolgate.
type App struct {
	// Path is the config file, empty when started from a snapshot.
	Path     string
	Log      *zap.Logger
	Registry *prometheus.Registry
	Metrics  *observe.Metrics
	Server   *proxy.Server
	Admin    *proxy.Admin
	Store    *catalog.Store
	// Approvals holds confirm calls for a person (docs/approvals.md).
	Approvals *approval.Service

	proxySrv, adminSrv *http.Server
	proxyLn, adminLn   net.Listener
	reloadMu           sync.Mutex
	done               chan struct{}
	baseDir            string
	fixedSink          pipeline.Sink
	sinks              atomic.Pointer[sink.Set]
	approvals          *approvals
	// watchRead, when set, runs just before the watcher reads a replaced
	// file: a test's way to land a write exactly there.
	watchRead func()
}

// sinkSwitch hands each escalation to the sinks of the live config.
type sinkSwitch struct{ app *App }

func (s sinkSwitch) Record(rec *pipeline.EscalationRecord) {
	if s.app.fixedSink != nil {
		s.app.fixedSink.Record(rec)
		return
	}
	if set := s.app.sinks.Load(); set != nil {
		set.Record(rec)
	}
}

func (a *App) newSinks(snap *catalog.Snapshot) (*sink.Set, error) {
	esc := snap.Config.Escalation
	if esc.Sinks.File != "" && !filepath.IsAbs(esc.Sinks.File) && a.baseDir != "" {
		esc.Sinks.File = filepath.Join(a.baseDir, esc.Sinks.File)
	}
	return sink.New(esc, snap.Secrets, a.Log, sink.Counters{Dropped: a.Metrics.SinkDropped, Failures: a.Metrics.SinkFailures})
}

// Options tune Start beyond the config file.
type Options struct {
	Logger *zap.Logger
	// Sink receives escalations; nil uses the config's sinks.
	Sink pipeline.Sink
	// Observer receives every judged answer's recovery steps (eval).
	Observer pipeline.RecoveryObserver
	// BaseDir resolves a relative sink file path (the config's folder).
	BaseDir string
	// Keepalive overrides the held-stream keepalive interval (tests).
	Keepalive time.Duration
	// ReadHeaderTimeout bounds how long a client may take to send its
	// request headers (default 10s); tests of slow clients shorten it.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds how long a client may take to send a whole
	// request, body included (default 60s: 64 MiB at about 1 MiB/s).
	ReadTimeout time.Duration
	// TraceTuning bounds the trace export queue (tests shorten it).
	TraceTuning telemetry.Tuning
	// Version is toolgate's own, reported with every span.
	Version string
}

// Start loads the config at path and starts both listeners.
func Start(path string, o Options) (*App, error) {
	snap, err := catalog.Load(path)
	if err != nil {
		return nil, err
	}
	o.BaseDir = filepath.Dir(path)
	a, err := StartSnapshot(snap, o)
	if err != nil {
		return nil, err
	}
	a.Path = path
	return a, nil
}

// StartSnapshot starts toolgate from an already compiled snapshot.
func StartSnapshot(snap *catalog.Snapshot, o Options) (*App, error) {
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := observe.NewMetrics(reg)
	store := catalog.NewStore(snap)
	a := &App{Log: log, Registry: reg, Metrics: m, Admin: proxy.NewAdmin(reg), Store: store,
		done: make(chan struct{}), baseDir: o.BaseDir, fixedSink: o.Sink}
	if o.Sink == nil {
		set, err := a.newSinks(snap)
		if err != nil {
			return nil, err
		}
		a.sinks.Store(set)
	}
	otel.SetErrorHandler(exportErrors(log))
	// A pin decision comes through the admin listener, which serves only
	// once a.Server is set.
	ap, err := openApprovals(snap, o.BaseDir, reg, log, store, auditApproval(sinkSwitch{a}),
		func(d approval.Drift) { a.Server.PinDecided(d) })
	if err != nil {
		return nil, err
	}
	a.approvals, a.Approvals = ap, ap.svc
	a.Admin.Mount(ap, "/approvals", "/approvals/{id}", "/ui/", "/pins", "/pins/{server}/{tool}")
	srv, err := proxy.New(proxy.Options{Store: store, Logger: log, Metrics: m, Sink: sinkSwitch{a}, Keepalive: o.Keepalive,
		Observer: o.Observer, TraceTuning: o.TraceTuning, Version: o.Version, Approvals: ap.svc})
	if err != nil {
		ap.close()
		return nil, err
	}
	a.Server = srv
	if a.proxyLn, err = net.Listen("tcp", snap.Config.Listen); err != nil {
		ap.close()
		return nil, fmt.Errorf("listen %s: %w", snap.Config.Listen, err)
	}
	if a.adminLn, err = net.Listen("tcp", snap.Config.AdminListen); err != nil {
		a.proxyLn.Close()
		ap.close()
		return nil, fmt.Errorf("admin_listen %s: %w", snap.Config.AdminListen, err)
	}
	readHeader := o.ReadHeaderTimeout
	if readHeader <= 0 {
		readHeader = 10 * time.Second
	}
	readWhole := o.ReadTimeout
	if readWhole <= 0 {
		readWhole = 60 * time.Second
	}
	a.proxySrv = &http.Server{
		Handler: srv,
		// Bounded header and body reads stop slow-loris clients. net/http
		// lifts the read deadline once the body is read, so a long
		// streamed answer is not cut; for the same reason there is no
		// write timeout.
		ReadHeaderTimeout: readHeader,
		ReadTimeout:       readWhole,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          zap.NewStdLog(log),
	}
	a.adminSrv = &http.Server{Handler: a.Admin, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	go a.serve(a.proxySrv, a.proxyLn, "proxy")
	go a.serve(a.adminSrv, a.adminLn, "admin")
	a.Admin.SetReady(true)
	log.Info("toolgate started",
		zap.String("listen", a.proxyLn.Addr().String()),
		zap.String("admin_listen", a.adminLn.Addr().String()),
		zap.String("mode", string(snap.Config.Mode)),
		zap.String("catalog_version", snap.Version),
		zap.Int("catalog_tools", len(snap.Tools)))
	return a, nil
}

func (a *App) serve(s *http.Server, ln net.Listener, name string) {
	if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.Log.Error("listener failed", zap.String("listener", name), zap.Error(err))
	}
}

// ProxyAddr is the proxy listener's address.
func (a *App) ProxyAddr() string { return a.proxyLn.Addr().String() }

// AdminAddr is the admin listener's address.
func (a *App) AdminAddr() string { return a.adminLn.Addr().String() }

// ErrListenerChanged rejects a reload that moves a listener: sockets are
// bound once, at start.
var ErrListenerChanged = errors.New("listen and admin_listen cannot change without a restart")

// Reload re-reads the config file and every file and variable it names. An
// invalid config is rejected and the live one keeps serving.
func (a *App) Reload() error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.Path == "" {
		return errors.New("no config file to reload")
	}
	return a.install(catalog.Load(a.Path))
}

// install makes a loaded config live, or reports why it was not loaded;
// the caller holds reloadMu.
func (a *App) install(snap *catalog.Snapshot, err error) error {
	if err == nil {
		err = a.apply(snap)
	}
	if err != nil {
		a.Metrics.ConfigReloads.WithLabelValues("error").Inc()
		// An error from past the config's own problems may quote a URL
		// too; neither kind may print the credentials it refuses.
		a.Log.Error("config reload rejected; the previous config stays live", zap.String("config", filepath.Base(a.Path)),
			zap.String("error", secrets.WithoutUserinfo(err.Error())))
		return err
	}
	a.Metrics.ConfigReloads.WithLabelValues("success").Inc()
	a.Log.Info("config reloaded", zap.String("catalog_version", snap.Version), zap.Int("catalog_tools", len(snap.Tools)))
	return nil
}

func (a *App) apply(snap *catalog.Snapshot) error {
	cur := a.Store.Load()
	if snap.Config.Listen != cur.Config.Listen || snap.Config.AdminListen != cur.Config.AdminListen {
		return ErrListenerChanged
	}
	var fresh *sink.Set
	if a.fixedSink == nil {
		var err error
		if fresh, err = a.newSinks(snap); err != nil {
			return err
		}
	}
	if err := a.Server.Apply(snap); err != nil {
		if fresh != nil {
			fresh.Close()
		}
		return err
	}
	if fresh != nil {
		if old := a.sinks.Swap(fresh); old != nil {
			// Records already queued on the old sinks still go out.
			go old.Close()
		}
	}
	a.approvals.reload(snap, a.Log)
	return nil
}

// Shutdown drains: readiness goes false, the listeners stop accepting, and
// requests in flight (streams included) get until ctx ends to finish.
func (a *App) Shutdown(ctx context.Context) error {
	a.Admin.SetReady(false)
	err := a.proxySrv.Shutdown(ctx)
	if err != nil {
		// The grace period is over: cut what is left.
		a.proxySrv.Close()
	}
	_ = a.adminSrv.Close()
	// After the proxy drained: no request holds or resumes a call now,
	// and the last state changes reach the sinks closed below.
	a.approvals.close()
	if set := a.sinks.Load(); set != nil {
		set.Close()
	}
	// The spans of the drained requests go out last, within what is left
	// of the grace period and never longer than a few seconds.
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = a.Server.CloseTracing(tctx)
	cancel()
	a.Log.Info("toolgate stopped")
	return err
}

// exportErrors logs the trace exporter's failures, at most one a minute:
// with the collector down every batch fails, and the log is not the place
// to count them (toolgate_trace_spans_dropped_total is). The messages name
// the endpoint and the failure, never the exporter's headers.
func exportErrors(log *zap.Logger) otel.ErrorHandlerFunc {
	var last atomic.Int64
	return func(err error) {
		now := time.Now().UnixNano()
		prev := last.Load()
		if now-prev < int64(time.Minute) || !last.CompareAndSwap(prev, now) {
			return
		}
		log.Warn("trace export failed", zap.Error(err))
	}
}
