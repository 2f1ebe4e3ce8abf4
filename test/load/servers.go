package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// The mock upstream and the bare proxy run as their own processes (this
// binary with -mock or -bare), so each server's CPU can be read from /proc
// apart from the load generator's, and none of them shares a Go scheduler
// or garbage collector with another.

// serveChild listens on a free loopback port, tells the parent the address
// on stdout, and serves until the parent goes away (its end of our stdin
// closes) or lifetime passes, so a child never outlives the run. connState,
// if set, sees every connection's state changes.
func serveChild(h http.Handler, lifetime time.Duration, connState func(net.Conn, http.ConnState)) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, ConnState: connState}
	fmt.Printf("ADDR %s\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = srv.Close()
	}()
	stop := time.AfterFunc(lifetime, func() {
		fmt.Fprintln(os.Stderr, "lifetime over; stopping")
		_ = srv.Close()
	})
	defer stop.Stop()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// gapHeader asks the mock to pause between stream events, as a model
// producing tokens does. Both proxies forward it like any client header.
const gapHeader = "X-Mock-Event-Gap"

// mockStats counts what the mock saw, so the driver can tell how many
// upstream connections each target opened per request: a proxy that
// cannot reuse its upstream connections pays a new one (and, against a
// real provider, a TLS handshake) per request.
type mockStats struct {
	Conns    atomic.Int64
	Requests atomic.Int64
}

func (m *mockStats) connState(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		m.Conns.Add(1)
	}
}

// mockHandler answers POST /v1/chat/completions like the provider: the
// plain answer in one write with a Content-Length, or the stream one event
// per write with a flush after each, so a proxy sees the events arrive one
// by one (spaced by the request's X-Mock-Event-Gap, if any). GET /_stats
// reports the counters as "conns requests".
func mockHandler(stats *mockStats) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/_stats" {
			fmt.Fprintf(w, "%d %d\n", stats.Conns.Load(), stats.Requests.Load())
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != chatPath {
			http.NotFound(w, r)
			return
		}
		stats.Requests.Add(1)
		gap, _ := time.ParseDuration(r.Header.Get(gapHeader))
		gap = min(max(gap, 0), 100*time.Millisecond)
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return
		}
		wl, ok := workloads[r.Header.Get(workloadHeader)]
		if !ok {
			wl = workloads[smallWorkload]
		}
		answer, events := wl.answer, wl.events
		h := w.Header()
		h.Set("X-Request-Id", "req_load")
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", fmt.Sprint(len(answer)))
			_, _ = w.Write(answer)
			return
		}
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		rc := http.NewResponseController(w)
		for i, ev := range events {
			if gap > 0 && i > 0 {
				select {
				case <-time.After(gap):
				case <-r.Context().Done():
					return
				}
			}
			if _, err := w.Write(ev); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	})
}
