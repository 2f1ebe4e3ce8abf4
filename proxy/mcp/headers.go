package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// hopHeaders are connection-level headers never forwarded (RFC 9110 §7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// outboundHeader copies the client's headers for the server: all but
// hop-by-hop ones, toolgate's namespace and framing. Accept-Encoding goes
// too, so the transport negotiates compression itself and toolgate reads
// plain JSON whatever the client accepts.
func outboundHeader(in http.Header) http.Header {
	out := in.Clone()
	cleanHeader(out)
	out.Del("Content-Length")
	out.Del("Host")
	out.Del("Accept-Encoding")
	return out
}

// cleanHeader drops what must not cross toolgate in either direction.
func cleanHeader(h http.Header) {
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
	for k := range h {
		if len(k) >= len("x-toolgate-") && strings.EqualFold(k[:len("x-toolgate-")], "x-toolgate-") {
			delete(h, k)
		}
	}
}

// copyHeader copies the server's answer headers to the client. Unless the
// body passes unchanged, its length is toolgate's to set.
func (x *exchange) copyHeader(h http.Header, keepLength bool) {
	dst := x.w.Header()
	src := h.Clone()
	cleanHeader(src)
	if !keepLength {
		src.Del("Content-Length")
	}
	for k, v := range src {
		dst[k] = v
	}
}

// withoutURL drops the request URL that net/http quotes in its errors: a
// query string may carry a key, and logs never hold one.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// errIdle is the cause recorded when a server's answer goes silent.
var errIdle = errors.New("the MCP server went silent for longer than idle_timeout")

// idleBody cancels the request when reads stall for longer than d. A read
// records the time; the timer checks it when it fires and re-arms for the
// rest of the window.
type idleBody struct {
	rc     io.ReadCloser
	d      time.Duration
	last   atomic.Int64
	timer  *time.Timer
	cancel context.CancelCauseFunc
	once   sync.Once
}

func newIdleBody(rc io.ReadCloser, d time.Duration, cancel context.CancelCauseFunc) io.ReadCloser {
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
		b.cancel(errIdle)
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
