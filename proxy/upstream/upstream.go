// Package upstream is the proxy's client of the model APIs it fronts: one
// connection pool per configured upstream, the round trip with its idle
// timeout, the headers that go out, the key toolgate holds, and the check
// of the token a client presents.
package upstream

import (
	"bytes"
	"context"
	"crypto/subtle"
	"io"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/httpx"
)

// Upstream is one configured model API with its own connection pool.
type Upstream struct {
	cfg    catalog.Upstream
	base   *url.URL
	client *http.Client
	key    string
}

// ErrIdle is the cause recorded when an upstream body goes silent.
var ErrIdle = httpx.ErrIdle

// New is the upstream cfg configures, holding key to send for clients
// (see ApplyKey).
func New(cfg catalog.Upstream, key string) (*Upstream, error) {
	base, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, err
	}
	return &Upstream{cfg: cfg, base: base, key: key, client: NewClient(cfg)}, nil
}

// NewClient is the HTTP client toolgate talks to an upstream with:
// the upstream's connect and first-byte timeouts, a pool sized for a
// sidecar, and no redirects. toolgate eval uses it too, so it measures the
// upstream as serve reaches it.
func NewClient(cfg catalog.Upstream) *http.Client {
	return &http.Client{
		Transport:     httpx.NewTransport(cfg.ConnectTimeout.D(), cfg.FirstByteTimeout.D()),
		CheckRedirect: httpx.NoRedirects,
	}
}

// Name is the upstream's configured name.
func (u *Upstream) Name() string { return u.cfg.Name }

// Transport is the upstream's connection pool, for a pass-through.
func (u *Upstream) Transport() http.RoundTripper { return u.client.Transport }

// Close closes the idle connections of a replaced generation's upstream.
func (u *Upstream) Close() {
	if tr, ok := u.client.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// Target builds the upstream URL for an escaped client path (prefix
// removed) and query, keeping the path's bytes: decoding it would turn a
// "%2F" the client sent into a "/" the upstream routes on.
func (u *Upstream) Target(escaped, rawQuery string) *url.URL {
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

// Call is one upstream round trip. Its Body enforces idle_timeout: if no
// byte arrives for that long, the read fails instead of hanging.
type Call struct {
	Resp *http.Response
	// Body is the answer's body to read, in place of Resp.Body.
	Body   io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	// span is the call's client span, ended once its body is done.
	span trace.Span
}

// Cause is why the call's context ended (ErrIdle when the body went
// silent), or nil while it lasts.
func (c *Call) Cause() error { return context.Cause(c.ctx) }

// Cancel ends the call for cause.
func (c *Call) Cancel(cause error) { c.cancel(cause) }

// EndWith makes sp, the call's client span, end when the call is closed,
// once its body is done.
func (c *Call) EndWith(sp trace.Span) { c.span = sp }

// Close closes the body, ends the call and its span.
func (c *Call) Close() {
	if c.Body != nil {
		c.Body.Close()
	}
	c.cancel(context.Canceled)
	if c.span != nil {
		c.span.End()
	}
}

// Do sends one request to the upstream: path is the client's escaped path
// with the prefix taken off.
func (u *Upstream) Do(ctx context.Context, method, path, rawQuery string, header http.Header, body []byte) (*Call, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(ctx, method, u.Target(path, rawQuery).String(), bytes.NewReader(body))
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
	c := &Call{ctx: ctx, Resp: resp, cancel: cancel}
	c.Body = httpx.NewIdleBody(resp.Body, u.cfg.IdleTimeout.D(), cancel)
	return c, nil
}

// OutboundHeader copies the client's headers for the upstream: everything but
// hop-by-hop headers, toolgate's own namespace, and framing toolgate redoes.
// keepEncoding is false on validated routes so the transport negotiates
// compression itself and toolgate reads plain bytes whatever the client
// accepts.
func OutboundHeader(in http.Header, keepEncoding bool) http.Header {
	out := make(http.Header, len(in))
	for k, v := range in {
		out[k] = v
	}
	httpx.RemoveHop(out)
	httpx.DropToolgateHeaders(out)
	out.Del("Content-Length")
	out.Del("Host")
	if !keepEncoding {
		out.Del("Accept-Encoding")
	}
	return out
}

// CredentialHeaders are where SDKs put API keys.
var CredentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// ApplyKey puts the upstream key toolgate holds into h, following
// api_key_mode: if_missing keeps a key the client sent, replace always uses
// toolgate's. Google's APIs also take a key as the query parameter key=:
// it counts as a client key, and replace removes it. The query to send is
// returned.
func (u *Upstream) ApplyKey(h http.Header, rawQuery, api string) string {
	if u.key == "" {
		return rawQuery
	}
	google := keyHeader(u.base.Hostname(), api) == "x-goog-api-key"
	if u.cfg.APIKeyMode != "replace" {
		if google && queryKey(rawQuery) {
			return rawQuery
		}
		for _, k := range CredentialHeaders {
			if h.Get(k) != "" {
				return rawQuery
			}
		}
	}
	for _, k := range CredentialHeaders {
		h.Del(k)
	}
	SetKey(h, u.base.Hostname(), api, u.key)
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

// SetKey puts key in the header the provider at host reads it from
// for the named API (see keyHeader).
func SetKey(h http.Header, host, api, key string) {
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

// apiKeyHeaders names the header an API's own provider reads its key from,
// for the APIs that do not take OpenAI's bearer; the upstream's host
// decides for the others.
var apiKeyHeaders = map[string]string{
	"messages": "x-api-key",
	"gemini":   "x-goog-api-key",
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

// CheckInbound authenticates a client against the configured tokens. The
// token is read from the headers SDKs send keys in, compared in constant
// time, and removed so it never reaches the upstream.
func CheckInbound(h http.Header, tokens []string) (caller string, ok bool) {
	if len(tokens) == 0 {
		return "", true
	}
	for _, k := range CredentialHeaders {
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
