package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaiwire"
)

// rawPath is the request's path as the client sent it, still escaped.
// url.URL keeps RawPath exactly when it differs from Path's default
// escaping, so otherwise that escaping is the client's own.
func rawPath(u *url.URL) string {
	if u.RawPath != "" {
		return u.RawPath
	}
	return u.EscapedPath()
}

// route runs the path guard on a request and serves it as it decides:
// a judged route on its canonical path, a pass-through with the client's
// bytes, or a refusal in the route's envelope.
func (s *Server) route(w http.ResponseWriter, r *http.Request, rt *runtime) {
	if h, at := s.dispatch(w, r, rt); h != nil {
		h.ServeHTTP(w, at)
	}
}

// dispatch decides the request's route and serves it there, but for a
// judged route, whose handler and request it returns for route to call.
// A held stream waits under route's frame, which so stays small (see
// serveStream).
//
//go:noinline
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, rt *runtime) (http.Handler, *http.Request) {
	t := rt.routes
	raw := rawPath(r.URL)
	d := t.decide(r.Method, raw, r.ContentLength != 0)
	if d.kind != routeRefuse {
		d = t.checkHeaders(r, d)
	}
	if d.kind == routeRefuse {
		if rt.snap.Config.Mode != catalog.ModeShadow || (d.route != nil && d.route.alone) {
			s.refuse(w, r, d)
			return nil, nil
		}
		// Shadow mode forwards unchanged: the refusal is only counted, and
		// the request routed as written, to the upstream that owns the
		// route it resembles. A route reached alone has no such upstream.
		s.countRefusal(r, d, "shadow-would-refuse")
		d = routeDecision{kind: routePass, path: canonicalPath(raw)}
	}
	if d.kind == routeJudge {
		// The route is known: no second lookup. The handler reads the
		// path it sends upstream from the URL.
		return d.route.handler, atPath(r, d.path)
	}
	rctx := t.ctxs.Get().(*chi.Context)
	rctx.Reset()
	rctx.RoutePath = d.path
	t.mux.ServeHTTP(w, withContext(r, context.WithValue(r.Context(), chi.RouteCtxKey, rctx)))
	t.ctxs.Put(rctx)
	return nil, nil
}

// overrideHeaders make some frameworks serve another method or path than
// the request line's: the judge would see one route, the upstream another.
var (
	methodOverrides = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}
	pathOverrides   = []string{"X-Original-Url", "X-Rewrite-Url", "X-Override-Url"}
)

// checkHeaders refuses what the path alone does not show: a compressed
// body on a judged route (toolgate would judge bytes it cannot read), an
// upgrade or a method override on a judged route's path, and a path
// override header naming a judged route.
func (t *routeTable) checkHeaders(r *http.Request, d routeDecision) routeDecision {
	for _, k := range pathOverrides {
		v := r.Header.Get(k)
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err == nil && u.Scheme != "" {
			v = u.EscapedPath()
		} else if i := strings.IndexAny(v, "?#"); i >= 0 {
			v = v[:i]
		}
		if o := t.decide(http.MethodPost, v, true); o.kind != routePass {
			return refused(o.route, http.StatusBadRequest, refuseOverride, o.route.patternOr(o.use))
		}
	}
	if d.route == nil {
		return d
	}
	for _, k := range methodOverrides {
		if r.Header.Get(k) != "" {
			return refused(d.route, http.StatusBadRequest, refuseOverride, d.route.pattern)
		}
	}
	if d.read && (r.Header.Get("Upgrade") != "" || headerHasToken(r.Header, "Connection", "upgrade")) {
		return refused(d.route, http.StatusBadRequest, refuseMethod, d.route.pattern)
	}
	if d.kind == routeJudge {
		for _, enc := range r.Header.Values("Content-Encoding") {
			for _, e := range strings.Split(enc, ",") {
				if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "identity") {
					return refused(d.route, http.StatusUnsupportedMediaType, refuseContentEncoding, d.route.pattern)
				}
			}
		}
	}
	return d
}

func (j *judgedRoute) patternOr(use string) string {
	if j == nil {
		return use
	}
	return j.pattern
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// refusalText says, per reason, what was wrong with the request.
var refusalText = map[refusal]string{
	refuseCase:            "its letter case differs from the route's",
	refuseSlashes:         "it has repeated or empty path segments",
	refuseTrailingSlash:   "it ends with a slash",
	refuseDotSegment:      "it has \".\" or \"..\" segments or a segment ending in a dot",
	refuseSeparator:       "it has an encoded or backslash separator (%2F, %5C, \\, an encoded ? or #)",
	refuseParameter:       "it has ;parameters on a segment",
	refuseWhitespace:      "it has whitespace or control characters",
	refuseEncoding:        "it has percent-encoded, double-encoded or look-alike characters",
	refusePrefix:          "its upstream path_prefix is spelled differently from the config",
	refuseMethod:          "it asks for a method or a protocol upgrade toolgate does not judge on this route",
	refuseOverride:        "it carries a header that names another method or path",
	refuseContentEncoding: "its body is compressed; toolgate judges requests it can read, so send it without Content-Encoding",
}

// refuse answers a refused request and counts it. Nothing is forwarded.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, d routeDecision) {
	s.countRefusal(r, d, "refused")
	env := envelope(openaiwire.Error)
	h := w.Header()
	if d.route != nil {
		env = d.route.envelope
		if d.status == http.StatusMethodNotAllowed {
			h.Set("Allow", strings.Join(d.route.methods, ", "))
		}
	}
	if d.status == http.StatusUnsupportedMediaType {
		h.Set("Accept-Encoding", "identity")
	}
	msg := fmt.Sprintf("toolgate refused this request: %s. Send it to %s", refusalText[d.reason], d.use)
	if d.status == http.StatusMethodNotAllowed {
		msg = fmt.Sprintf("toolgate refused this request: %s is not judged on %s (allowed: %s); GET, HEAD and OPTIONS without a body pass through",
			r.Method, d.use, strings.Join(d.route.methods, ", "))
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Should-Retry", "false")
	w.WriteHeader(d.status)
	_, _ = w.Write(env(neutral.Failure{Status: d.status, Code: neutral.FailureCode(d.reason), Message: msg, Refusal: true}))
}

// countRefusal counts and logs a refusal, made or (shadow mode) not.
func (s *Server) countRefusal(r *http.Request, d routeDecision, outcome string) {
	s.metrics.RouteRefusals.WithLabelValues(string(d.reason)).Inc()
	api := ""
	if d.route != nil {
		api = d.route.api
		s.metrics.Requests.WithLabelValues(api, outcome).Inc()
	}
	s.log.Info("request refused",
		zap.String("request_id", requestID(r.Context())),
		zap.String("api", api),
		zap.String("method", r.Method),
		zap.String("reason", string(d.reason)),
		zap.String("outcome", outcome),
		zap.Int("status", d.status))
}

// envelopeOf is the API's own error envelope. A codec writes errors
// without any request state, so a fresh one serves.
func envelopeOf(a api.API) envelope {
	return a.NewCodec().EncodeError
}
