package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is the OTLP http/protobuf endpoint toolgate exports to when
// the run has tracing on (-trace-ratio): it decodes every export, as a
// real collector would, counts the spans and keeps nothing. It runs in the
// harness's process, so its CPU is the load generator's, not toolgate's.
type collector struct {
	addr  string
	spans atomic.Int64
	srv   *http.Server
}

// runCollector is the run's collector, if tracing is on.
var runCollector *collector

func startCollector() (*collector, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &collector{addr: ln.Addr().String()}
	c.srv = &http.Server{Handler: http.HandlerFunc(c.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var n int64
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += int64(len(ss.GetSpans()))
		}
	}
	c.spans.Add(n)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *collector) close() { _ = c.srv.Close() }

// tracingYAML is the tracing block of toolgate's config for a run at
// sample ratio ratio; a negative ratio leaves tracing off.
func tracingYAML(endpoint string, ratio float64) string {
	if ratio < 0 {
		return ""
	}
	return fmt.Sprintf("tracing:\n  endpoint: http://%s\n  sample_ratio: %g\n", endpoint, ratio)
}
