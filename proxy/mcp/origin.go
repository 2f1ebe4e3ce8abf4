package mcp

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// rebinding refuses a request a web page may have sent through DNS
// rebinding (docs/mcp.md): an Origin that is neither loopback nor allowed, or
// a Host that is not toolgate's own address, a loopback name or allowed.
// The server behind toolgate cannot check these itself: it sees toolgate's
// connection and its own Host. It reports whether the request was refused.
func (rt *Route) rebinding(w http.ResponseWriter, r *http.Request) bool {
	why := ""
	for _, o := range r.Header.Values("Origin") {
		if !rt.originAllowed(o) {
			why = "its Origin " + strconv.Quote(o) + " is not a loopback origin nor in mcp_servers[].allowed_origins"
			break
		}
	}
	if why == "" && !rt.hostAllowed(r) {
		why = "its Host " + strconv.Quote(r.Host) + " is not toolgate's address, a loopback name, nor in mcp_servers[].allowed_hosts"
	}
	if why == "" {
		return false
	}
	rt.gateway.deps.Log.Info("mcp request refused", zap.String("request_id", w.Header().Get("X-Toolgate-Request-Id")),
		zap.String("mcp_server", rt.cfg.Name), zap.String("reason", why))
	body := jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest, "Forbidden: toolgate refused this request to MCP server "+
		strconv.Quote(rt.cfg.Name)+": "+why, nil)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write(body)
	return true
}

// originAllowed: a loopback origin over http or https, any port, or one of
// allowed_origins. "null" (an opaque origin) is neither.
func (rt *Route) originAllowed(o string) bool {
	o = strings.TrimSuffix(strings.TrimSpace(o), "/")
	for _, a := range rt.cfg.AllowedOrigins {
		if strings.EqualFold(o, strings.TrimSuffix(a, "/")) {
			return true
		}
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" || u.User != nil {
		return false
	}
	return loopbackName(u.Hostname())
}

// hostAllowed: no Host at all (HTTP/1.0, which no browser sends), a
// loopback name, the address the request came in on, or allowed_hosts (an
// entry without a port allows every port).
func (rt *Route) hostAllowed(r *http.Request) bool {
	if r.Host == "" {
		return true
	}
	name, port := splitHost(r.Host)
	if loopbackName(name) {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
		lname, lport := splitHost(la.String())
		if sameHost(name, lname) && (port == "" || port == lport) {
			return true
		}
	}
	for _, a := range rt.cfg.AllowedHosts {
		aname, aport := splitHost(a)
		if sameHost(name, aname) && (aport == "" || aport == port) {
			return true
		}
	}
	return false
}

// splitHost splits host[:port], taking the brackets off an IPv6 address.
func splitHost(hp string) (name, port string) {
	if h, p, err := net.SplitHostPort(hp); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), ""
}

func sameHost(a, b string) bool {
	if strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, ".")) {
		return true
	}
	ia, ib := net.ParseIP(a), net.ParseIP(b)
	return ia != nil && ib != nil && ia.Equal(ib)
}

// loopbackName: localhost or a loopback address (127.0.0.0/8, ::1).
func loopbackName(name string) bool {
	if strings.EqualFold(strings.TrimSuffix(name, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}
