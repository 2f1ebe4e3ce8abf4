package mcp

import (
	"bytes"
	"net/http"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// protocol20260728 is the stateless revision: no initialize and no
// session, every request self-describing in params._meta, routing headers
// that must equal the body.
const protocol20260728 = "2026-07-28"

// Keys of a 2026-07-28 request's params._meta.
const (
	metaProtocol     = "io.modelcontextprotocol/protocolVersion"
	metaCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// Routing headers of 2026-07-28.
const (
	hdrMethod = "Mcp-Method"
	hdrName   = "Mcp-Name"
)

// servedProtocols are every revision toolgate serves, newest first.
var servedProtocols = append([]string{protocol20260728}, supportedProtocols...)

// stateless reports a revision that keeps no session: 2026-07-28 and, so
// that a newer one is answered in its own terms, any later date.
func stateless(v string) bool { return v >= protocol20260728 }

// routeError is a request refused for its revision or routing headers,
// before anything is forwarded.
type routeError struct {
	code int
	msg  string
	data any
}

// revision decides which revision a POST speaks. A request carrying a
// stateless revision in its header or its _meta is checked here and served
// without a session; anything else is a session revision, served as
// before. It reports false when it answered the request itself.
func (cr *clientRequest) revision(msgs []message, batch bool) bool {
	headerVersion := strings.TrimSpace(cr.r.Header.Get(hdrProtocol))
	if batch || len(msgs) != 1 || msgs[0].kind == kindResponse {
		return true // batches are 2025-03-26's; post refuses them otherwise
	}
	m := &msgs[0]
	if !stateless(headerVersion) && !bytes.Contains(m.params, []byte(metaProtocol)) {
		return true // a session revision's request: nothing more to read
	}
	meta := requestMeta(m.params)
	metaVersion, _ := jsonx.Unquote(meta.Get(metaProtocol))
	if metaVersion == "" && !stateless(headerVersion) {
		return true
	}
	cr.statelessRevision, cr.version, cr.capabilities, cr.method = true, metaVersion, meta.Get(metaCapabilities), m.method
	if cr.version == "" {
		cr.version = headerVersion
	}
	if e := checkRevision(m, cr.r.Header, headerVersion, metaVersion); e != nil {
		cr.outcome = outcomeInvalid
		cr.rt.pipe.Write(cr.w, http.StatusBadRequest, nil, jsonrpc.ErrorResponse(m.id, e.code, e.msg, e.data))
		return false
	}
	return true
}

// checkRevision applies 2026-07-28's rules to one request or notification:
// a revision toolgate serves, header and _meta agreeing, and the routing
// headers equal to the body.
func checkRevision(m *message, h http.Header, hv, mv string) *routeError {
	// Disagreeing versions are a mismatch even when one of them is not
	// served: the revision answers a header that differs from _meta with
	// HeaderMismatch, and only a version both agree on with
	// UnsupportedProtocolVersion.
	if hv != "" && mv != "" && hv != mv {
		return &routeError{code: jsonrpc.CodeHeaderMismatch, msg: "the MCP-Protocol-Version header " + hv + " differs from _meta[\"" + metaProtocol + "\"] " + mv}
	}
	for _, v := range []string{hv, mv} {
		if v != "" && !slices.Contains(servedProtocols, v) {
			return &routeError{code: jsonrpc.CodeUnsupportedProtocolVersion,
				msg:  "toolgate does not serve MCP revision " + v + "; it serves " + strings.Join(servedProtocols, ", "),
				data: map[string]any{"supported": servedProtocols, "requested": v}}
		}
	}
	switch {
	case hv == "":
		return &routeError{code: jsonrpc.CodeHeaderMismatch, msg: "the MCP-Protocol-Version header is required for a request carrying _meta[\"" + metaProtocol + "\"]"}
	case m.kind == kindRequest && mv == "":
		return &routeError{code: jsonrpc.CodeInvalidParams, msg: "Invalid params: _meta[\"" + metaProtocol + "\"] is required in MCP revision " + hv}
	}
	return checkRouting(m, h)
}

// checkRouting holds when Mcp-Method equals the body's method and, for a
// method that names something, Mcp-Name equals that name. Surrounding
// whitespace is not part of a header's value.
func checkRouting(m *message, h http.Header) *routeError {
	methodHeader, ok := headerValue(h, hdrMethod)
	switch {
	case !ok:
		return &routeError{code: jsonrpc.CodeHeaderMismatch, msg: "the Mcp-Method header is required"}
	case methodHeader != m.method:
		return &routeError{code: jsonrpc.CodeHeaderMismatch, msg: "the Mcp-Method header " + quoteHeader(methodHeader) + " differs from the body's method " + quoteHeader(m.method)}
	}
	field, required := nameField(m.method)
	if field == "" {
		return nil
	}
	nameHeader, ok := headerValue(h, hdrName)
	if !ok {
		if required {
			return &routeError{code: jsonrpc.CodeHeaderMismatch, msg: "the Mcp-Name header is required for " + m.method}
		}
		return nil
	}
	params, _ := jsonx.ParseObject(m.params)
	if body, _ := jsonx.Unquote(params.Get(field)); nameHeader != body {
		return &routeError{code: jsonrpc.CodeHeaderMismatch, msg: "the Mcp-Name header " + quoteHeader(nameHeader) + " differs from params." + field + " " + quoteHeader(body)}
	}
	return nil
}

// nameField is the params member Mcp-Name carries for method, and whether
// the header is required. A task's id is checked when the header is
// given.
func nameField(method string) (field string, required bool) {
	switch method {
	case "tools/call", "prompts/get":
		return "name", true
	case "resources/read":
		return "uri", true
	case "tasks/get", "tasks/result", "tasks/cancel":
		return "taskId", false
	}
	return "", false
}

// headerValue is a header's one value without surrounding whitespace. A
// header given twice is not one value and matches nothing.
func headerValue(h http.Header, name string) (string, bool) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", false
	case 1:
		return strings.TrimSpace(vs[0]), true
	}
	return "\x00", true
}

// quoteHeader quotes a value for an error message, bounded: a header can
// be long and the message goes back to the client and into logs.
func quoteHeader(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	b, _ := jsonx.Marshal(s)
	return string(b)
}

// requestMeta is a request's params._meta, or nil.
func requestMeta(params []byte) jsonx.Object {
	p, err := jsonx.ParseObject(params)
	if err != nil {
		return nil
	}
	meta, err := jsonx.ParseObject(p.Get("_meta"))
	if err != nil {
		return nil
	}
	return meta
}

// declaresElicitationCaps reads a 2026-07-28 request's clientCapabilities:
// elicitation {} or with form, as an initialize declares it.
func declaresElicitationCaps(caps []byte) bool {
	c, err := jsonx.ParseObject(caps)
	if err != nil {
		return false
	}
	el, err := jsonx.ParseObject(c.Get("elicitation"))
	if err != nil {
		return false
	}
	return len(el) == 0 || el.Has("form")
}
