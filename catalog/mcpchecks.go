package catalog

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// validateMCP checks mcp_servers and catalog.mcp: names unique, URLs that
// toolgate may call, and prefixes that no other route already owns, since
// a prefix shared with a model route would leave one of them unreachable.
func (c *Config) validateMCP(ps *problems) {
	oneOf(ps, "catalog.mcp.expose", c.Catalog.MCP.Expose, ExposeAll, ExposeCatalog)
	positive(ps, "catalog.mcp.confirm_timeout", c.Catalog.MCP.ConfirmTimeout)

	taken := c.modelRoutes()
	names := map[string]int{}
	prefixes := map[string]int{}
	for i, m := range c.MCPServers {
		at := indexPath("mcp_servers", i)
		switch {
		case m.Name == "":
			ps.add(at+".name", "must not be empty")
		case !toolName.MatchString(m.Name):
			ps.add(at+".name", "%q is not a valid name (1 to 128 of a-z A-Z 0-9 _ . : -)", m.Name)
		default:
			if j, dup := names[m.Name]; dup {
				ps.add(at+".name", "%q is also the name of mcp_servers[%d]", m.Name, j)
			} else {
				names[m.Name] = i
			}
		}
		if msg := httpURLProblem(m.URL); msg != "" {
			ps.add(at+".url", "%s", msg)
		}
		c.checkMCPPrefix(ps, at+".path_prefix", m.PathPrefix, taken)
		if j, dup := prefixes[m.PathPrefix]; dup && m.PathPrefix != "" {
			ps.add(at+".path_prefix", "%q is also the path_prefix of mcp_servers[%d]", m.PathPrefix, j)
		} else {
			prefixes[m.PathPrefix] = i
		}
		positive(ps, at+".connect_timeout", m.ConnectTimeout)
		positive(ps, at+".idle_timeout", m.IdleTimeout)
		if m.MaxStreams < 1 {
			ps.add(at+".max_streams", "must be at least 1, got %d", m.MaxStreams)
		}
		for j, o := range m.AllowedOrigins {
			if msg := originProblem(o); msg != "" {
				ps.add(indexPath(at+".allowed_origins", j), "%s", msg)
			}
		}
		for j, h := range m.AllowedHosts {
			if msg := hostProblem(h); msg != "" {
				ps.add(indexPath(at+".allowed_hosts", j), "%s", msg)
			}
		}
	}
	for i, t := range c.Catalog.Tools {
		server, _, ok := strings.Cut(t.Name, "/")
		if !ok {
			continue
		}
		if _, known := names[server]; !known {
			ps.add(indexPath("catalog.tools", i)+".name", "%q names MCP server %q, which mcp_servers does not define", t.Name, server)
		}
	}
}

func (c *Config) checkMCPPrefix(ps *problems, at, p string, taken map[string]string) {
	switch {
	case p == "" || p == "/":
		ps.add(at, "must be set to a path of its own, e.g. /mcp/orders")
		return
	case !strings.HasPrefix(p, "/"):
		ps.add(at, "%q must start with \"/\"", p)
	case strings.HasSuffix(p, "/"):
		ps.add(at, "%q must not end with \"/\"", p)
	case strings.ContainsAny(p, "?#{}*%") || strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../") ||
		strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/.."):
		ps.add(at, "%q must be a plain path", p)
	}
	if owner, ok := taken[p]; ok {
		ps.add(at, "%q is already the route of %s", p, owner)
	}
}

// modelRoutes lists the exact paths the model side routes, with who owns
// each: every upstream's prefix root and validated paths.
func (c *Config) modelRoutes() map[string]string {
	out := map[string]string{}
	for i, u := range c.Upstreams {
		at := indexPath("upstreams", i)
		if u.PathPrefix != "" {
			out[u.PathPrefix] = at + ".path_prefix"
		}
		for _, p := range []string{"/v1/chat/completions", "/v1/messages", "/v1/responses"} {
			out[u.PathPrefix+p] = at + " (" + p + ")"
		}
		for p := range u.APIPaths {
			out[u.PathPrefix+p] = fieldPath(at+".api_paths", p)
		}
	}
	return out
}

// originProblem checks an allowed_origins entry: an origin as a browser
// sends it, scheme://host[:port] and nothing more, since the header is
// compared with it as it comes.
func originProblem(o string) string {
	u, err := url.Parse(o)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return strconv.Quote(o) + " must be an origin such as https://app.example.com"
	case u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || strings.ContainsAny(o, "?#"):
		return strconv.Quote(o) + " must be scheme://host[:port] with nothing after it"
	case strings.Contains(u.Host, "*"):
		return strconv.Quote(o) + " must name one origin; wildcards are not supported"
	}
	return ""
}

// hostProblem checks an allowed_hosts entry: a host name or address, with
// or without a port, as a Host header carries it.
func hostProblem(h string) string {
	if h == "" || strings.ContainsAny(h, "/?#@* \t") {
		return strconv.Quote(h) + " must be a host or host:port, such as toolgate.internal:8080"
	}
	if host, port, err := net.SplitHostPort(h); err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil || host == "" {
			return strconv.Quote(h) + " has an invalid port"
		}
	}
	return ""
}
