package proxy

import (
	"net/http"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/toolgate/toolgate/neutral"
)

// The path guard. A judged route must be unreachable under any other
// spelling: a client library that joins "/v1/" with "/chat/completions",
// an ingress that merges slashes, or a provider front end that ignores
// case, decodes "%2F" or drops ";params" would otherwise take a request
// past the judge to a server that reads it as the judged route. So every
// request is routed on its canonical path (canonicalPath), and a request
// whose path any lenient server could read as a judged route (looseForm)
// is either judged as exactly that route or refused; only paths no such
// reading maps onto a judged route pass through, as the client sent them.

// refusal is why the guard refused a request; the metric's reason label.
type refusal string

// The closed set of refusal reasons.
const (
	refuseCase            refusal = "case"              // letter case differs (Unicode folds included)
	refuseSlashes         refusal = "slashes"           // repeated or empty segments
	refuseTrailingSlash   refusal = "trailing_slash"    // a slash after the last segment
	refuseDotSegment      refusal = "dot_segment"       // ".", "..", a trailing dot, or ".." above the root
	refuseSeparator       refusal = "encoded_separator" // "%2F", "%5C", "\", an encoded "?" or "#"
	refuseParameter       refusal = "path_parameter"    // ";params" on a segment
	refuseWhitespace      refusal = "whitespace"        // spaces, tabs, NUL or other control characters
	refuseEncoding        refusal = "encoding"          // other escapes, double encoding, overlong UTF-8, fullwidth forms
	refusePrefix          refusal = "prefix"            // an upstream path_prefix spelled differently
	refuseMethod          refusal = "method"            // a method the route does not judge, with a body or an upgrade
	refuseOverride        refusal = "override_header"   // X-HTTP-Method-Override or X-Original-URL style headers
	refuseContentEncoding refusal = "content_encoding"  // a compressed request body
)

// refusalReasons lists every reason, so their series exist from the start.
var refusalReasons = []refusal{refuseCase, refuseSlashes, refuseTrailingSlash, refuseDotSegment, refuseSeparator,
	refuseParameter, refuseWhitespace, refuseEncoding, refusePrefix, refuseMethod, refuseOverride, refuseContentEncoding}

// envelope writes a toolgate error in a route's own error shape.
type envelope func(f neutral.Failure) []byte

// judgedRoute is one route whose traffic toolgate judges.
type judgedRoute struct {
	api      string
	prefix   string
	pattern  string // prefix + path, as registered on the router
	methods  []string
	full     []patternSeg // prefix and path
	path     []patternSeg // path alone, as the upstream sees it
	envelope envelope
	handler  http.Handler
	// alone is set when the route is the only way to its server (an MCP
	// server): no pass-through leads there.
	alone bool
}

func (j *judgedRoute) judges(method string) bool {
	for _, m := range j.methods {
		if m == method {
			return true
		}
	}
	return false
}

// routeTable is the router of one runtime with what the guard knows of its
// routes: every judged route and every upstream path_prefix.
type routeTable struct {
	mux      *chi.Mux
	judged   []*judgedRoute
	byRoute  map[string]*judgedRoute // by pattern
	prefixes []upstreamPrefix
	ctxs     sync.Pool
}

type upstreamPrefix struct {
	prefix string
	segs   []patternSeg
}

func newRouteTable() *routeTable {
	t := &routeTable{mux: chi.NewRouter(), byRoute: map[string]*judgedRoute{}}
	t.ctxs.New = func() any { return chi.NewRouteContext() }
	return t
}

// judge registers h as a judged route for methods at prefix+path, written
// in the route's error envelope when the guard refuses a spelling of it.
//
// It is the one place a judged route is added. The path guard covers
// exactly the routes registered here: every spelling of them is judged or
// refused, never passed through. Every validated API belongs here, built-in
// or from api_paths, under every upstream path_prefix; Gemini's
// generateContent and streamGenerateContent routes and each MCP server's
// path (POST, GET, DELETE) too. A route added on the chi router directly
// would be reachable past the judge under another spelling.
func (t *routeTable) judge(api, prefix, path string, env envelope, h http.Handler, methods ...string) {
	jr := &judgedRoute{api: api, prefix: prefix, pattern: prefix + path, methods: methods,
		full: parsePattern(prefix + path), path: parsePattern(path), envelope: env, handler: h}
	t.judged = append(t.judged, jr)
	for _, m := range methods {
		t.mux.Method(m, jr.pattern, h)
	}
	t.byRoute[jr.pattern] = jr
}

// judgeServer registers a judged route at path for a server reached
// through it alone, as an MCP server is. Routing a spelling of such a
// route as written would send it to another server (a model upstream's
// pass-through), so the guard refuses those spellings even in shadow
// mode.
func (t *routeTable) judgeServer(api, path string, env envelope, h http.Handler, methods ...string) {
	t.judge(api, "", path, env, h, methods...)
	t.judged[len(t.judged)-1].alone = true
}

// passThrough registers an upstream's pass-through handler for everything
// under prefix.
func (t *routeTable) passThrough(prefix string, h http.Handler) {
	t.mux.Handle(prefix+"/*", h)
	if prefix != "" {
		t.mux.Handle(prefix, h)
	}
	t.prefixes = append(t.prefixes, upstreamPrefix{prefix: prefix, segs: parsePattern(prefix)})
}

// routeKind is what the guard does with a request.
type routeKind int

const (
	routePass   routeKind = iota // forward the client's bytes
	routeJudge                   // serve on the judged route
	routeRefuse                  // answer with an error, forward nothing
)

// routeDecision is the guard's answer for one request.
type routeDecision struct {
	kind routeKind
	// route is the judged route, or the one a refused path looks like
	// (nil when the refusal concerns no route, as a misspelt prefix).
	route *judgedRoute
	// path is the canonical path the router dispatches on.
	path string
	// read is set on a pass-through of a judged route's exact path by a
	// method that route does not judge (a GET listing stored answers).
	read   bool
	status int
	reason refusal
	// use is the path to send instead.
	use string
}

// readMethods may pass through on a judged route's exact path when they
// carry no body: they cannot ask for a model answer.
func readMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// find returns the pattern the router would serve method on path with.
func (t *routeTable) find(method, path string) string {
	rctx := t.ctxs.Get().(*chi.Context)
	rctx.Reset()
	p := t.mux.Find(rctx, method, path)
	t.ctxs.Put(rctx)
	return p
}

// exact reports whether path is exactly route jr under a method it judges.
func (t *routeTable) exact(jr *judgedRoute, path string) bool {
	return t.find(jr.methods[0], path) == jr.pattern
}

// decide routes one request: method, its escaped path (URL.RawPath or
// EscapedPath) and whether it carries a body.
func (t *routeTable) decide(method, raw string, body bool) routeDecision {
	canon := canonicalPath(raw)
	if canon == "" {
		canon = "/"
	}
	forms := loosen(canon)
	first := forms.f[0]
	clean := first.flags == 0 && !first.above
	if jr := t.byRoute[t.find(method, canon)]; jr != nil && jr.judges(method) {
		if clean {
			return routeDecision{kind: routeJudge, route: jr, path: canon}
		}
		return refused(jr, http.StatusBadRequest, reasonOf(first.flags), jr.pattern)
	}
	for _, f := range forms.all() {
		if f.above {
			return refused(nil, http.StatusBadRequest, refuseDotSegment, "a path without \"..\"")
		}
		for _, jr := range t.judged {
			if _, ok := matchFold(f.path, jr.full, false); !ok {
				continue
			}
			use, _ := matchFold(f.path, jr.full, true)
			if clean && t.exact(jr, canon) {
				if readMethod(method) && !body {
					return routeDecision{kind: routePass, route: jr, path: canon, read: true}
				}
				return refused(jr, http.StatusMethodNotAllowed, refuseMethod, use)
			}
			return refused(jr, http.StatusBadRequest, reasonOf(f.flags), use)
		}
	}
	return t.decidePrefix(&forms, canon)
}

// decidePrefix checks a path that is no judged route under any reading
// for the upstream it goes to: the prefix must be spelled as configured,
// and the rest, as that upstream may read it, must not be one of its
// judged routes either.
func (t *routeTable) decidePrefix(forms *looseForms, canon string) routeDecision {
	sel := t.selectPrefix(canon)
	for _, f := range forms.all() {
		var loose *upstreamPrefix
		for i := range t.prefixes {
			p := &t.prefixes[i]
			if len(p.segs) > 0 && (loose == nil || len(p.segs) > len(loose.segs)) && prefixFold(f.path, p.segs) {
				loose = p
			}
		}
		if loose != nil && (sel == nil || sel.prefix != loose.prefix) {
			return refused(nil, http.StatusBadRequest, refusePrefix, loose.prefix+afterSegments(f.path, len(loose.segs)))
		}
	}
	if sel == nil || sel.prefix == "" {
		return routeDecision{kind: routePass, path: canon}
	}
	rest := loosen(canon[len(sel.prefix):])
	for _, f := range rest.all() {
		if f.above {
			return refused(nil, http.StatusBadRequest, refuseDotSegment, "a path without \"..\"")
		}
		for _, jr := range t.judged {
			if jr.prefix != sel.prefix {
				continue
			}
			if _, ok := matchFold(f.path, jr.path, false); ok {
				use, _ := matchFold(f.path, jr.path, true)
				return refused(jr, http.StatusBadRequest, reasonOf(f.flags), sel.prefix+use)
			}
		}
	}
	return routeDecision{kind: routePass, path: canon}
}

// selectPrefix is the longest configured prefix canon starts with, as
// written, at a segment boundary: the upstream the router picks.
func (t *routeTable) selectPrefix(canon string) *upstreamPrefix {
	var best *upstreamPrefix
	for i := range t.prefixes {
		p := &t.prefixes[i]
		if !strings.HasPrefix(canon, p.prefix) || (len(canon) > len(p.prefix) && canon[len(p.prefix)] != '/') {
			continue
		}
		if best == nil || len(p.prefix) > len(best.prefix) {
			best = p
		}
	}
	return best
}

// prefixFold reports whether a loose path begins with the prefix segments
// under case folding.
func prefixFold(path string, segs []patternSeg) bool {
	_, ok := matchFold(path[:len(path)-len(afterSegments(path, len(segs)))], segs, false)
	return ok
}

// afterSegments is path without its first n segments.
func afterSegments(path string, n int) string {
	for i := 0; i < n; i++ {
		if path == "" {
			return ""
		}
		j := strings.IndexByte(path[1:], '/')
		if j < 0 {
			return ""
		}
		path = path[j+1:]
	}
	return path
}

// refused is a refusal decision.
func refused(jr *judgedRoute, status int, reason refusal, use string) routeDecision {
	return routeDecision{kind: routeRefuse, route: jr, status: status, reason: reason, use: use}
}
