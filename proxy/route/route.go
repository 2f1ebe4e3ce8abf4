// Package route is the proxy's route table and its path guard: which
// paths toolgate judges, the canonical path a request is routed on, the
// loose forms a lenient server could read it as, and the refusals of a
// spelling or a header that would take a request past the judge. It
// matches requests and refuses nothing itself: the server answers a
// refusal in the matched route's envelope and counts it.
package route

import (
	"context"
	"net/http"
	"slices"
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
// request is routed on its canonical path (CanonicalPath), and a request
// whose path any lenient server could read as a judged route (looseForm)
// is either judged as exactly that route or refused; only paths no such
// reading maps onto a judged route pass through, as the client sent them.

// Reason is why the guard refused a request; the refusal metric's reason
// label and the code of the error the client gets.
type Reason string

// The closed set of refusal reasons.
const (
	refuseCase            Reason = "case"              // letter case differs (Unicode folds included)
	refuseSlashes         Reason = "slashes"           // repeated or empty segments
	refuseTrailingSlash   Reason = "trailing_slash"    // a slash after the last segment
	refuseDotSegment      Reason = "dot_segment"       // ".", "..", a trailing dot, or ".." above the root
	refuseSeparator       Reason = "encoded_separator" // "%2F", "%5C", "\", an encoded "?" or "#"
	refuseParameter       Reason = "path_parameter"    // ";params" on a segment
	refuseWhitespace      Reason = "whitespace"        // spaces, tabs, NUL or other control characters
	refuseEncoding        Reason = "encoding"          // other escapes, double encoding, overlong UTF-8, fullwidth forms
	refusePrefix          Reason = "prefix"            // an upstream path_prefix spelled differently
	refuseMethod          Reason = "method"            // a method the route does not judge, with a body or an upgrade
	refuseOverride        Reason = "override_header"   // X-HTTP-Method-Override or X-Original-URL style headers
	refuseContentEncoding Reason = "content_encoding"  // a compressed request body
)

// Reasons lists every refusal reason, so that their series can exist from
// the start.
func Reasons() []Reason {
	return []Reason{refuseCase, refuseSlashes, refuseTrailingSlash, refuseDotSegment, refuseSeparator,
		refuseParameter, refuseWhitespace, refuseEncoding, refusePrefix, refuseMethod, refuseOverride, refuseContentEncoding}
}

// Envelope writes a toolgate error in a route's own error shape.
type Envelope func(f neutral.Failure) []byte

// Builtin are the judged paths under every upstream prefix, with the API
// each speaks. Gemini names the model in the path: the parameter ends at
// the colon of the verb.
var Builtin = map[string]string{
	"/v1/chat/completions": "chat",
	"/v1/messages":         "messages",
	"/v1/responses":        "responses",

	"/v1beta/models/{model}:generateContent":       "gemini",
	"/v1beta/models/{model}:streamGenerateContent": "gemini",
	"/v1/models/{model}:generateContent":           "gemini",
	"/v1/models/{model}:streamGenerateContent":     "gemini",

	"/v1beta/tunedModels/{model}:generateContent":       "gemini",
	"/v1beta/tunedModels/{model}:streamGenerateContent": "gemini",
}

// Judged is one route whose traffic toolgate judges.
type Judged struct {
	// API names the route's API ("mcp" for an MCP server).
	API string
	// Methods are the methods the route judges.
	Methods []string
	// Envelope writes a refusal in the route's error shape.
	Envelope Envelope
	// Handler serves the route's judged requests.
	Handler http.Handler
	// Alone is set when the route is the only way to its server (an MCP
	// server): no pass-through leads there.
	Alone bool

	prefix  string
	pattern string       // prefix + path, as registered on the router
	full    []patternSeg // prefix and path
	path    []patternSeg // path alone, as the upstream sees it
}

func (j *Judged) judges(method string) bool {
	for _, m := range j.Methods {
		if m == method {
			return true
		}
	}
	return false
}

// Table is the router of one runtime with what the guard knows of its
// routes: every judged route and every upstream path_prefix.
type Table struct {
	mux      *chi.Mux
	judged   []*Judged
	byRoute  map[string]*Judged // by pattern
	prefixes []upstreamPrefix
	ctxs     sync.Pool
}

type upstreamPrefix struct {
	prefix string
	segs   []patternSeg
}

// NewTable is an empty route table.
func NewTable() *Table {
	t := &Table{mux: chi.NewRouter(), byRoute: map[string]*Judged{}}
	t.ctxs.New = func() any { return chi.NewRouteContext() }
	return t
}

// AddJudged registers h as a judged route for methods at prefix+path, written
// in the route's error envelope when the guard refuses a spelling of it.
//
// It is the one place a judged route is added. The path guard covers
// exactly the routes registered here: every spelling of them is judged or
// refused, never passed through. Every validated API belongs here, built-in
// or from api_paths, under every upstream path_prefix; Gemini's
// generateContent and streamGenerateContent routes and each MCP server's
// path (POST, GET, DELETE) too. A route added on the chi router directly
// would be reachable past the judge under another spelling.
func (t *Table) AddJudged(api, prefix, path string, env Envelope, h http.Handler, methods ...string) {
	jr := &Judged{API: api, prefix: prefix, pattern: prefix + path, Methods: methods,
		full: parsePattern(prefix + path), path: parsePattern(path), Envelope: env, Handler: h}
	if old := t.byRoute[jr.pattern]; old != nil {
		// A pattern registered again (an upstream's api_paths naming a
		// built-in path) is served by the last registration, so a
		// refusal of its spellings speaks in that route's envelope too.
		t.judged[slices.Index(t.judged, old)] = jr
	} else {
		t.judged = append(t.judged, jr)
	}
	for _, m := range methods {
		t.mux.Method(m, jr.pattern, h)
	}
	t.byRoute[jr.pattern] = jr
}

// AddServer registers a judged route at path for a server reached
// through it alone, as an MCP server is. Routing a spelling of such a
// route as written would send it to another server (a model upstream's
// pass-through), so the guard refuses those spellings even in shadow
// mode.
func (t *Table) AddServer(api, path string, env Envelope, h http.Handler, methods ...string) {
	t.AddJudged(api, "", path, env, h, methods...)
	t.judged[len(t.judged)-1].Alone = true
}

// AddPassThrough registers an upstream's pass-through handler for
// everything under prefix.
func (t *Table) AddPassThrough(prefix string, h http.Handler) {
	t.mux.Handle(prefix+"/*", h)
	if prefix != "" {
		t.mux.Handle(prefix, h)
	}
	t.prefixes = append(t.prefixes, upstreamPrefix{prefix: prefix, segs: parsePattern(prefix)})
}

// Kind is what a request's route is.
type Kind int

// The kinds of route a request matches.
const (
	Pass   Kind = iota // forward the client's bytes
	Judge              // serve on the judged route
	Refuse             // answer with an error, forward nothing
)

// Match is the route of one request, as the guard found it.
type Match struct {
	Kind Kind
	// Route is the judged route, or the one a refused path looks like
	// (nil when the refusal concerns no route, as a misspelt prefix).
	Route *Judged
	// Path is the canonical path the router dispatches on.
	Path string
	// Status and Reason are a refusal's.
	Status int
	Reason Reason
	// Use is the path a refused request should be sent to instead.
	Use string
	// read is set on a pass-through of a judged route's exact path by a
	// method that route does not judge (a GET listing stored answers).
	read bool
}

// readMethods may pass through on a judged route's exact path when they
// carry no body: they cannot ask for a model answer.
func readMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// find returns the pattern the router would serve method on path with.
func (t *Table) find(method, path string) string {
	rctx := t.ctxs.Get().(*chi.Context)
	rctx.Reset()
	p := t.mux.Find(rctx, method, path)
	t.ctxs.Put(rctx)
	return p
}

// exact reports whether path is exactly route jr under a method it judges.
func (t *Table) exact(jr *Judged, path string) bool {
	return t.find(jr.Methods[0], path) == jr.pattern
}

// Match routes one request: method, its escaped path (RawPath) and whether
// it carries a body.
func (t *Table) Match(method, raw string, body bool) Match {
	canon := CanonicalPath(raw)
	if canon == "" {
		canon = "/"
	}
	forms := loosen(canon)
	first := forms.f[0]
	clean := first.flags == 0 && !first.above
	if jr := t.byRoute[t.find(method, canon)]; jr != nil && jr.judges(method) {
		if clean {
			return Match{Kind: Judge, Route: jr, Path: canon}
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
					return Match{Kind: Pass, Route: jr, Path: canon, read: true}
				}
				return refused(jr, http.StatusMethodNotAllowed, refuseMethod, use)
			}
			return refused(jr, http.StatusBadRequest, reasonOf(f.flags), use)
		}
	}
	return t.matchPrefix(&forms, canon)
}

// matchPrefix checks a path that is no judged route under any reading
// for the upstream it goes to: the prefix must be spelled as configured,
// and the rest, as that upstream may read it, must not be one of its
// judged routes either.
func (t *Table) matchPrefix(forms *looseForms, canon string) Match {
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
			return refused(nil, http.StatusBadRequest, refusePrefix, loose.prefix+AfterSegments(f.path, len(loose.segs)))
		}
	}
	if sel == nil || sel.prefix == "" {
		return Match{Kind: Pass, Path: canon}
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
	return Match{Kind: Pass, Path: canon}
}

// selectPrefix is the longest configured prefix canon starts with, as
// written, at a segment boundary: the upstream the router picks.
func (t *Table) selectPrefix(canon string) *upstreamPrefix {
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
	_, ok := matchFold(path[:len(path)-len(AfterSegments(path, len(segs)))], segs, false)
	return ok
}

// AfterSegments is path without its first n segments: an escaped path
// with its upstream's path_prefix of n segments taken off, since routing
// on the canonical path never moves a "/".
func AfterSegments(path string, n int) string {
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

// refused is a refusal.
func refused(jr *Judged, status int, reason Reason, use string) Match {
	return Match{Kind: Refuse, Route: jr, Status: status, Reason: reason, Use: use}
}

// ServePassThrough serves a request that is no judged route on the
// router, at path, its canonical path.
func (t *Table) ServePassThrough(w http.ResponseWriter, r *http.Request, path string) {
	rctx := t.ctxs.Get().(*chi.Context)
	rctx.Reset()
	rctx.RoutePath = path
	t.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx)))
	t.ctxs.Put(rctx)
}
