package proxy

import (
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaiwire"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/proxy/route"
)

// route runs the path guard on a request and serves it as it matched:
// a judged route on its canonical path, a pass-through with the client's
// bytes, or a refusal in the route's envelope.
func (s *Server) route(w http.ResponseWriter, r *http.Request, rt *runtime) {
	if h, at := s.dispatch(w, r, rt); h != nil {
		h.ServeHTTP(w, at)
	}
}

// dispatch matches the request's route and serves it there, but for a
// judged route, whose handler and request it returns for route to call.
// A held stream waits under route's frame, which so stays small (see
// serveStream).
//
//go:noinline
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, rt *runtime) (http.Handler, *http.Request) {
	t := rt.routes
	raw := route.RawPath(r.URL)
	m := t.Match(r.Method, raw, r.ContentLength != 0)
	if m.Kind != route.Refuse {
		m = t.CheckHeaders(r, m)
	}
	if m.Kind == route.Refuse {
		if rt.Snap.Config.Mode != catalog.ModeShadow || (m.Route != nil && m.Route.Alone) {
			s.refuse(w, r, m)
			return nil, nil
		}
		// Shadow mode forwards unchanged: the refusal is only counted, and
		// the request routed as written, to the upstream that owns the
		// route it resembles. A route reached alone has no such upstream.
		s.countRefusal(r, m, "shadow-would-refuse")
		m = route.Match{Kind: route.Pass, Path: route.CanonicalPath(raw)}
	}
	if m.Kind == route.Judge {
		// The route is known: no second lookup. The handler reads the
		// path it sends upstream from the URL.
		return m.Route.Handler, atPath(r, m.Path)
	}
	t.ServePassThrough(w, r, m.Path)
	return nil, nil
}

// refuse answers a refused request and counts it. Nothing is forwarded.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, m route.Match) {
	s.countRefusal(r, m, "refused")
	env := route.Envelope(openaiwire.Error)
	h := w.Header()
	if m.Route != nil {
		env = m.Route.Envelope
		if m.Status == http.StatusMethodNotAllowed {
			h.Set("Allow", strings.Join(m.Route.Methods, ", "))
		}
	}
	if m.Status == http.StatusUnsupportedMediaType {
		h.Set("Accept-Encoding", "identity")
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Should-Retry", "false")
	w.WriteHeader(m.Status)
	_, _ = w.Write(env(neutral.Failure{Status: m.Status, Code: neutral.FailureCode(m.Reason), Message: m.Message(r.Method), Refusal: true}))
}

// countRefusal counts and logs a refusal, made or (shadow mode) not.
func (s *Server) countRefusal(r *http.Request, m route.Match, outcome string) {
	s.metrics.RouteRefusals.WithLabelValues(string(m.Reason)).Inc()
	api := ""
	if m.Route != nil {
		api = m.Route.API
		s.metrics.Requests.WithLabelValues(api, outcome).Inc()
	}
	s.log.Info("request refused",
		zap.String("request_id", pipeline.RequestID(r.Context())),
		zap.String("api", api),
		zap.String("method", r.Method),
		zap.String("reason", string(m.Reason)),
		zap.String("outcome", outcome),
		zap.Int("status", m.Status))
}

// envelopeOf is the API's own error envelope. A codec writes errors
// without any request state, so a fresh one serves.
func envelopeOf(a api.API) route.Envelope {
	return a.NewCodec().EncodeError
}

// writeOpenAIFailure answers with f in OpenAI's envelope: where no API's
// codec speaks (before the route is known, and on pass-through routes).
func writeOpenAIFailure(w http.ResponseWriter, f neutral.Failure) {
	writeFailure(w, f, openaiwire.Error(f))
}

// writeFailure writes f's status and its body in a route's envelope.
func writeFailure(w http.ResponseWriter, f neutral.Failure, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if v := pipeline.ShouldRetry(f); v != "" {
		h.Set("X-Should-Retry", v)
	}
	w.WriteHeader(f.Status)
	_, _ = w.Write(body)
}

// atPath is r with its URL's path set to path. Out of line, the copies it
// makes take no place in route's frame.
//
//go:noinline
func atPath(r *http.Request, path string) *http.Request {
	u := *r.URL
	u.RawPath = path
	u.Path, _ = url.PathUnescape(path)
	r2 := *r
	r2.URL = &u
	return &r2
}
