package proxy

import (
	"bytes"
	"context"
	"crypto/subtle"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/httpx"
)

// upstream is one configured model API with its own connection pool.
type upstream struct {
	cfg    catalog.Upstream
	base   *url.URL
	client *http.Client
	key    string
}

// errIdle is the cause recorded when an upstream body goes silent.
var errIdle = httpx.ErrIdle

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
	return &http.Client{
		Transport:     httpx.NewTransport(cfg.ConnectTimeout.D(), cfg.FirstByteTimeout.D()),
		CheckRedirect: httpx.NoRedirects,
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
	// span is the call's client span, ended once its body is done.
	span trace.Span
}

func (c *call) Close() {
	if c.body != nil {
		c.body.Close()
	}
	c.cancel(context.Canceled)
	if c.span != nil {
		c.span.End()
	}
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

func newIdleBody(rc io.ReadCloser, d time.Duration, cancel context.CancelCauseFunc) io.ReadCloser {
	return httpx.NewIdleBody(rc, d, cancel)
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

func isToolgateHeader(k string) bool { return httpx.IsToolgateHeader(k) }

func dropToolgateHeaders(h http.Header) { httpx.DropToolgateHeaders(h) }

func withoutURL(err error) error { return httpx.WithoutURL(err) }

func removeHop(h http.Header) { httpx.RemoveHop(h) }

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

// keyHeader picks the header a provider reads its key from: the API's own
// (apiKeyHeaders), else by host: Anthropic uses x-api-key, Azure OpenAI
// api-key, Gemini x-goog-api-key, everything OpenAI-compatible a bearer.
func keyHeader(host, api string) string {
	if h, ok := apiKeyHeaders[api]; ok {
		return h
	}
	host = strings.ToLower(host)
	switch {
	case strings.HasSuffix(host, "anthropic.com"):
		return "x-api-key"
	case host == "generativelanguage.googleapis.com":
		return "x-goog-api-key"
	case strings.HasSuffix(host, ".azure.com"):
		return "api-key"
	}
	return "authorization"
}

// checkInbound authenticates a client against the configured tokens. The
// token is read from the headers SDKs send keys in, compared in constant
// time, and removed so it never reaches the upstream.
func checkInbound(h http.Header, tokens []string) (caller string, ok bool) {
	if len(tokens) == 0 {
		return "", true
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
		match := 0
		for _, t := range tokens {
			match |= subtle.ConstantTimeCompare([]byte(v), []byte(t))
		}
		if match == 1 {
			h.Del(k)
			return v, true
		}
	}
	return "", false
}
