// Package baseline is what the benchmarks and load harnesses measure
// toolgate against: a bare httputil.ReverseProxy, which judges nothing.
package baseline

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Proxy is the baseline every proxy pays at least: an
// httputil.ReverseProxy to the mock with the same connection pool sizes as
// toolgate's upstream client. Like toolgate it reads the inbound body whole
// first and hands the transport a copy: giving it r.Body lets the server
// close that body under the transport and truncate answers
// (golang/go#40747). FlushInterval -1 flushes every write, as toolgate does
// for streams.
func Proxy(target *url.URL) http.Handler {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 120 * time.Second,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = ""
		},
		Transport:     tr,
		FlushInterval: -1,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, "request body unreadable", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	})
}
