package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolgate/toolgate/internal/baseline"
)

// bareEnv makes this program, started in toolgate's place, serve the load
// harness's bare httputil.ReverseProxy instead: the floor any Go proxy on
// net/http pays for the same held streams, measured the same way (-bare).
const bareEnv = "TOOLGATE_RSS_BARE"

// serveBare reads the three lines of the config run writes (listen,
// admin_listen and the upstream's url), proxies listen to the upstream
// and serves /readyz and the Go runtime's metrics on admin, until ctx ends.
func serveBare(ctx context.Context, args []string) error {
	if len(args) != 3 || args[0] != "serve" || args[1] != "--config" {
		return fmt.Errorf("bare proxy: want serve --config FILE, got %q", args)
	}
	cfg, err := os.ReadFile(args[2])
	if err != nil {
		return err
	}
	var listen, admin, upstream string
	for _, line := range strings.Split(string(cfg), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		switch k {
		case "listen":
			listen = v
		case "admin_listen":
			admin = v
		case "url":
			upstream = v
		}
	}
	target, err := url.Parse(upstream)
	if err != nil || listen == "" || admin == "" {
		return fmt.Errorf("bare proxy: config without listen, admin_listen or upstream url")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("/metrics", promhttp.Handler())
	errs := make(chan error, 2)
	front := &http.Server{Addr: listen, Handler: baseline.Proxy(target), ReadHeaderTimeout: 10 * time.Second}
	back := &http.Server{Addr: admin, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { errs <- front.ListenAndServe() }()
	go func() { errs <- back.ListenAndServe() }()
	defer front.Close()
	defer back.Close()
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
		return nil
	}
}
