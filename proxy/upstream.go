package proxy

import (
	"bytes"
	"context"
	"crypto/subtle"
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

	"github.com/toolgate/toolgate/catalog"
)

// upstream is one configured model API with its own connection pool.
type upstream struct {
	cfg    catalog.Upstream
	base   *url.URL
	client *http.Client
	key    string
}

// errIdle is the cause recorded when an upstream body goes silent.
var errIdle = errors.New("upstream went silent for longer than idle_timeout")

func newUpstream(cfg catalog.Upstream, key string) (*upstream, error) {
	base, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, err
	}
	return &upstream{cfg: cfg, base: base, key: key, client: NewUpstreamClient(cfg)}, nil
}

// NewUpstreamClient is the HTTP client toolgate talks to an upstream with:
// the upstream's connect and first-byte timeouts, a pool sized for a
// sidecar, and no redirects. toolgate eval uses it too, so it measures the
// upstream as serve reaches it.
func NewUpstreamClient(cfg catalog.Upstream) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout.D(), KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   cfg.ConnectTimeout.D(),
		ResponseHeaderTimeout: cfg.FirstByteTimeout.D(),
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
		// A sidecar talks to one host at high concurrency; keep enough idle
		// connections that a burst does not pay new handshakes.
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		// The upstream is fixed by config; a redirect must not move it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (u *upstream) close() {
	if tr, ok := u.client.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// target builds the upstream URL for an escaped client path (prefix
// removed) and query, keeping the path's bytes: decoding it would turn a
// "%2F" the client sent into a "/" the upstream routes on.
func (u *upstream) target(escaped, rawQuery string) *url.URL {
	t := *u.base
	t.RawPath = strings.TrimSuffix(u.base.EscapedPath(), "/") + escaped
	t.Path = t.RawPath
	if p, err := url.PathUnescape(t.RawPath); err == nil {
		t.Path = p
	}
	t.RawQuery = rawQuery
	if t.EscapedPath() != t.RawPath {
		// Bytes url.URL would escape again ("{", raw UTF-8): the request
		// line carries them as the client sent them, in absolute form,
		// which every HTTP/1.1 server accepts (RFC 9112 §3.2.2).
		t.Opaque = "//" + t.Host + t.RawPath
	}
	return &t
}

// call is one upstream round trip. The returned body enforces idle_timeout:
// if no byte arrives for that long, the read fails instead of hanging.
type call struct {
	ctx    context.Context
	resp   *http.Response
	cancel context.CancelCauseFunc
	body   io.ReadCloser
}

func (c *call) Close() {
	if c.body != nil {
		c.body.Close()
	}
	c.cancel(context.Canceled)
}

func (u *upstream) do(ctx context.Context, method, path, rawQuery string, header http.Header, body []byte) (*call, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(ctx, method, u.target(path, rawQuery).String(), bytes.NewReader(body))
	if err != nil {
		cancel(err)
		return nil, err
	}
	req.Header = header
	req.ContentLength = int64(len(body))
	resp, err := u.client.Do(req)
	if err != nil {
		cancel(err)
		return nil, err
	}
	c := &call{ctx: ctx, resp: resp, cancel: cancel}
	c.body = newIdleBody(resp.Body, u.cfg.IdleTimeout.D(), cancel)
	return c, nil
}

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

// hopHeaders are connection-level headers never forwarded (RFC 9110 §7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// outboundHeader copies the client's headers for the upstream: everything but
// hop-by-hop headers, toolgate's own namespace, and framing toolgate redoes.
// keepEncoding is false on validated routes so the transport negotiates
// compression itself and toolgate reads plain bytes whatever the client
// accepts.
func outboundHeader(in http.Header, keepEncoding bool) http.Header {
	out := make(http.Header, len(in))
	for k, v := range in {
		out[k] = v
	}
	removeHop(out)
	dropToolgateHeaders(out)
	out.Del("Content-Length")
	out.Del("Host")
	if !keepEncoding {
		out.Del("Accept-Encoding")
	}
	return out
}

// isToolgateHeader reports a header in toolgate's own namespace.
func isToolgateHeader(k string) bool {
	return len(k) >= len("x-toolgate-") && strings.EqualFold(k[:len("x-toolgate-")], "x-toolgate-")
}

// dropToolgateHeaders removes toolgate's namespace from headers crossing a
// trust boundary: inbound ones must not reach the upstream, and an
// upstream's must not reach the client as if toolgate had set them.
func dropToolgateHeaders(h http.Header) {
	for k := range h {
		if isToolgateHeader(k) {
			delete(h, k)
		}
	}
}

// withoutURL drops the request URL that net/http quotes in its errors: a
// client may carry a key in the query string, and logs never hold one.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

func removeHop(h http.Header) {
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

// credentialHeaders are where SDKs put API keys.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// applyKey puts the upstream key toolgate holds into h, following
// api_key_mode: if_missing keeps a key the client sent, replace always uses
// toolgate's. Google's APIs also take a key as the query parameter key=:
// it counts as a client key, and replace removes it. The query to send is
// returned.
func (u *upstream) applyKey(h http.Header, rawQuery, api string) string {
	if u.key == "" {
		return rawQuery
	}
	google := keyHeader(u.base.Hostname(), api) == "x-goog-api-key"
	if u.cfg.APIKeyMode != "replace" {
		if google && queryKey(rawQuery) {
			return rawQuery
		}
		for _, k := range credentialHeaders {
			if h.Get(k) != "" {
				return rawQuery
			}
		}
	}
	for _, k := range credentialHeaders {
		h.Del(k)
	}
	SetUpstreamKey(h, u.base.Hostname(), api, u.key)
	if google {
		rawQuery = withoutQueryKey(rawQuery)
	}
	return rawQuery
}

// queryKey reports a key= parameter in a raw query.
func queryKey(rawQuery string) bool {
	for _, kv := range strings.Split(rawQuery, "&") {
		if k, _, _ := strings.Cut(kv, "="); k == "key" {
			return true
		}
	}
	return false
}

// withoutQueryKey drops every key= parameter, keeping the rest as sent.
func withoutQueryKey(rawQuery string) string {
	if !queryKey(rawQuery) {
		return rawQuery
	}
	kept := make([]string, 0, 2)
	for _, kv := range strings.Split(rawQuery, "&") {
		if k, _, _ := strings.Cut(kv, "="); k != "key" {
			kept = append(kept, kv)
		}
	}
	return strings.Join(kept, "&")
}

// SetUpstreamKey puts key in the header the provider at host reads it from
// for the named API (see keyHeader).
func SetUpstreamKey(h http.Header, host, api, key string) {
	switch keyHeader(host, api) {
	case "x-api-key":
		h.Set("X-Api-Key", key)
	case "api-key":
		h.Set("Api-Key", key)
	case "x-goog-api-key":
		h.Set("X-Goog-Api-Key", key)
	default:
		h.Set("Authorization", "Bearer "+key)
	}
}

// keyHeader picks the header a provider reads its key from: Anthropic uses
// x-api-key, Azure OpenAI api-key, Gemini x-goog-api-key, everything
// OpenAI-compatible a bearer.
func keyHeader(host, api string) string {
	host = strings.ToLower(host)
	switch {
	case api == "messages" || strings.HasSuffix(host, "anthropic.com"):
		return "x-api-key"
	case api == "gemini" || host == "generativelanguage.googleapis.com":
		return "x-goog-api-key"
	case strings.HasSuffix(host, ".azure.com"):
		return "api-key"
	}
	return "authorization"
}

// checkInbound authenticates a client against the configured tokens. The
// token is read from the headers SDKs send keys in, compared in constant
// time, and removed so it never reaches the upstream.
func checkInbound(h http.Header, tokens []string) bool {
	if len(tokens) == 0 {
		return true
	}
	for _, k := range credentialHeaders {
		v := h.Get(k)
		if v == "" {
			continue
		}
		if k == "Authorization" {
			if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
				continue
			}
			v = strings.TrimSpace(v[7:])
		}
		ok := 0
		for _, t := range tokens {
			ok |= subtle.ConstantTimeCompare([]byte(v), []byte(t))
		}
		if ok == 1 {
			h.Del(k)
			return true
		}
	}
	return false
}
