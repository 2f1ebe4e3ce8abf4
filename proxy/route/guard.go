package route

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// RawPath is the request's path as the client sent it, still escaped.
// url.URL keeps RawPath exactly when it differs from Path's default
// escaping, so otherwise that escaping is the client's own.
func RawPath(u *url.URL) string {
	if u.RawPath != "" {
		return u.RawPath
	}
	return u.EscapedPath()
}

// overrideHeaders make some frameworks serve another method or path than
// the request line's: the judge would see one route, the upstream another.
var (
	methodOverrides = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}
	pathOverrides   = []string{"X-Original-Url", "X-Rewrite-Url", "X-Override-Url"}
)

// CheckHeaders refuses what the path alone does not show: a compressed
// body on a judged route (toolgate would judge bytes it cannot read), an
// upgrade or a method override on a judged route's path, and a path
// override header naming a judged route. m is the request's Match.
func (t *Table) CheckHeaders(r *http.Request, m Match) Match {
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
		if o := t.Match(http.MethodPost, v, true); o.Kind != Pass {
			return refused(o.Route, http.StatusBadRequest, refuseOverride, o.Route.patternOr(o.Use))
		}
	}
	if m.Route == nil {
		return m
	}
	for _, k := range methodOverrides {
		if r.Header.Get(k) != "" {
			return refused(m.Route, http.StatusBadRequest, refuseOverride, m.Route.pattern)
		}
	}
	if m.read && (r.Header.Get("Upgrade") != "" || headerHasToken(r.Header, "Connection", "upgrade")) {
		return refused(m.Route, http.StatusBadRequest, refuseMethod, m.Route.pattern)
	}
	if m.Kind == Judge {
		for _, enc := range r.Header.Values("Content-Encoding") {
			for _, e := range strings.Split(enc, ",") {
				if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "identity") {
					return refused(m.Route, http.StatusUnsupportedMediaType, refuseContentEncoding, m.Route.pattern)
				}
			}
		}
	}
	return m
}

func (j *Judged) patternOr(use string) string {
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
var refusalText = map[Reason]string{
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

// Message is what a refusal tells the client that sent method: what was
// wrong, and where to send the request instead.
func (m Match) Message(method string) string {
	if m.Status == http.StatusMethodNotAllowed {
		return fmt.Sprintf("toolgate refused this request: %s is not judged on %s (allowed: %s); GET, HEAD and OPTIONS without a body pass through",
			method, m.Use, strings.Join(m.Route.Methods, ", "))
	}
	return fmt.Sprintf("toolgate refused this request: %s. Send it to %s", refusalText[m.Reason], m.Use)
}
