// Package httpx holds the HTTP plumbing the model routes and the MCP
// routes share: the upstream transport, the idle-body guard, and the
// header rules at toolgate's trust boundary.
package httpx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// NewTransport is the transport toolgate reaches an upstream with: connect
// bounded by connect, response headers by firstByte, and a pool sized for
// a sidecar that talks to one host at high concurrency.
func NewTransport(connect, firstByte time.Duration) *http.Transport {
	dialer := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   connect,
		ResponseHeaderTimeout: firstByte,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
		// Enough idle connections that a burst does not pay new handshakes.
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
}

// NoRedirects keeps a client on the host config named: the upstream is
// never taken from an answer either.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// ErrIdle is the cause recorded when an upstream body goes silent.
var ErrIdle = errors.New("upstream went silent for longer than idle_timeout")

// idleBody cancels the upstream request when reads stall for longer than d.
// A read only records the time; the timer, when it fires, checks that time
// and re-arms for the rest of the window. Resetting a timer on every read
// of every event cost more than the read.
type idleBody struct {
	rc     io.ReadCloser
	d      time.Duration
	last   atomic.Int64 // unix nanoseconds of the last byte
	timer  *time.Timer
	cancel context.CancelCauseFunc
	once   sync.Once
}

// NewIdleBody wraps rc so that d without a byte cancels the request with
// ErrIdle; d <= 0 leaves rc as it is.
func NewIdleBody(rc io.ReadCloser, d time.Duration, cancel context.CancelCauseFunc) io.ReadCloser {
	if d <= 0 {
		return rc
	}
	b := &idleBody{rc: rc, d: d, cancel: cancel}
	b.last.Store(time.Now().UnixNano())
	b.timer = time.AfterFunc(d, b.check)
	return b
}

func (b *idleBody) check() {
	silent := time.Duration(time.Now().UnixNano() - b.last.Load())
	if silent >= b.d {
		b.cancel(ErrIdle)
		return
	}
	b.timer.Reset(b.d - silent)
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.once.Do(func() { b.timer.Stop() })
	return b.rc.Close()
}

// hopHeaders are connection-level headers never forwarded (RFC 9110 §7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// RemoveHop deletes hop-by-hop headers, those Connection names included.
func RemoveHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// IsToolgateHeader reports a header in toolgate's own namespace.
func IsToolgateHeader(k string) bool {
	return len(k) >= len("x-toolgate-") && strings.EqualFold(k[:len("x-toolgate-")], "x-toolgate-")
}

// DropToolgateHeaders removes toolgate's namespace from headers crossing a
// trust boundary: inbound ones must not reach the upstream, and an
// upstream's must not reach the client as if toolgate had set them.
func DropToolgateHeaders(h http.Header) {
	for k := range h {
		if IsToolgateHeader(k) {
			delete(h, k)
		}
	}
}

// WithoutURL drops the request URL that net/http quotes in its errors: a
// client may carry a key in the query string, and logs never hold one.
func WithoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
