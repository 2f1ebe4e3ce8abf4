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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy"
)

// App is a running toolgate.
type App struct {
	// Path is the config file, empty when started from a snapshot.
	Path     string
	Log      *zap.Logger
	Registry *prometheus.Registry
	Metrics  *proxy.Metrics
	Server   *proxy.Server
	Admin    *proxy.Admin
	Store    *catalog.Store

	proxySrv, adminSrv *http.Server
	proxyLn, adminLn   net.Listener
	reloadMu           sync.Mutex
	done               chan struct{}
}

// Options tune Start beyond the config file.
type Options struct {
	Logger *zap.Logger
	// Sink receives escalations; nil uses the config's sinks.
	Sink proxy.Sink
}

// Start loads the config at path and starts both listeners.
func Start(path string, o Options) (*App, error) {
	snap, err := catalog.Load(path)
	if err != nil {
		return nil, err
	}
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
	m := proxy.NewMetrics(reg)
	store := catalog.NewStore(snap)
	srv, err := proxy.New(proxy.Options{Store: store, Logger: log, Metrics: m, Sink: o.Sink})
	if err != nil {
		return nil, err
	}
	a := &App{Log: log, Registry: reg, Metrics: m, Server: srv, Admin: proxy.NewAdmin(reg), Store: store,
		done: make(chan struct{})}
	if a.proxyLn, err = net.Listen("tcp", snap.Config.Listen); err != nil {
		return nil, fmt.Errorf("listen %s: %w", snap.Config.Listen, err)
	}
	if a.adminLn, err = net.Listen("tcp", snap.Config.AdminListen); err != nil {
		a.proxyLn.Close()
		return nil, fmt.Errorf("admin_listen %s: %w", snap.Config.AdminListen, err)
	}
	a.proxySrv = &http.Server{
		Handler: srv,
		// Bounded header reads stop slow-loris clients; no write timeout,
		// since a streamed answer may legitimately run for minutes.
		ReadHeaderTimeout: 10 * time.Second,
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
	snap, err := catalog.Load(a.Path)
	if err == nil {
		err = a.apply(snap)
	}
	if err != nil {
		a.Metrics.ConfigReloads.WithLabelValues("error").Inc()
		a.Log.Error("config reload rejected; the previous config stays live", zap.String("config", filepath.Base(a.Path)), zap.Error(err))
		return err
	}
	a.Metrics.ConfigReloads.WithLabelValues("success").Inc()
	a.Log.Info("config reloaded", zap.String("catalog_version", snap.Version), zap.Int("catalog_tools", len(snap.Tools)))
	return nil
}

func (a *App) apply(snap *catalog.Snapshot) error {
	cur := a.Store.Load().Config
	if snap.Config.Listen != cur.Listen || snap.Config.AdminListen != cur.AdminListen {
		return ErrListenerChanged
	}
	return a.Server.Apply(snap)
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
	a.Log.Info("toolgate stopped")
	return err
}
