package catalog

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/storespec"
)

// toolName is the grammar of a tool name. It is wider than OpenAI's (it admits
// "." and ":") because MCP-style names use them and Anthropic accepts them.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_.:-]{1,128}$`)

// mcpToolName is a catalog entry for a tool of an MCP server: the server's
// name, a slash, and the tool's name as the server lists it.
var mcpToolName = regexp.MustCompile(`^[a-zA-Z0-9_.:-]{1,128}/[a-zA-Z0-9_.:-]{1,128}$`)

// maxAttemptsLimit caps re-queries per answer: each is a paid upstream call
// on the client's clock, and ten failed repairs in a row mean the eleventh
// will fail too.
const maxAttemptsLimit = 10

// Validate checks a defaulted Config and reports every problem at once. It
// reads no files and no environment, so it gives the same answer at start,
// on reload and in `toolgate check`.
func (c *Config) Validate() error {
	ps := &problems{src: c.src}

	oneOf(ps, "mode", string(c.Mode), string(ModeEnforce), string(ModeShadow))
	checkListen(ps, "listen", c.Listen)
	checkListen(ps, "admin_listen", c.AdminListen)
	if c.Listen != "" && c.Listen == c.AdminListen && !strings.HasSuffix(c.Listen, ":0") {
		ps.add("admin_listen", "must differ from listen (%s)", c.Listen)
	}

	c.validateUpstreams(ps)
	c.validateCatalog(ps)
	c.validateContext(ps)
	c.validateValidators(ps)
	c.validateMCP(ps)
	c.validatePins(ps)
	c.validateApprovals(ps)
	c.validateTracing(ps)

	oneOf(ps, "recovery.strategy", c.Recovery.Strategy, StrategyDecision, StrategyCorrection)
	checkAttempts(ps, "recovery.max_attempts", c.Recovery.MaxAttempts)
	if p := c.Recovery.ConfidenceThreshold; p != nil && (math.IsNaN(*p) || *p < 0 || *p > 1) {
		ps.add("recovery.confidence_threshold", "must be between 0 and 1, got %v", *p)
	}
	if p := c.Recovery.Shortlist; p != nil && *p < 1 {
		ps.add("recovery.shortlist", "must be at least 1, got %d", *p)
	}
	positive(ps, "recovery.deadline", c.Recovery.Deadline)
	checkAttempts(ps, "reprompt.max_attempts", c.Reprompt.MaxAttempts)

	if !toolName.MatchString(c.Abstain.ToolName) {
		ps.add("abstain.tool_name", "%q is not a valid tool name (1 to 128 of a-z A-Z 0-9 _ . : -)", c.Abstain.ToolName)
	} else if c.Abstain.Enabled {
		for i, t := range c.Catalog.Tools {
			if t.Name == c.Abstain.ToolName {
				ps.add("abstain.tool_name", "%q is also the name of catalog.tools[%d]; the virtual tool would hide it", t.Name, i)
			}
		}
	}
	oneOf(ps, "truncated", c.Truncated, TruncatedEscalate, TruncatedPass)

	oneOf(ps, "escalation.mode", c.Escalation.Mode, EscalationError, EscalationMessage)
	if w := c.Escalation.ReplayWindow; w != nil && (*w < 0 || *w > Duration(maxReplayWindow)) {
		ps.add("escalation.replay_window", "must be between 0 (off) and %s, got %s", Duration(maxReplayWindow), *w)
	}
	for i, r := range c.Escalation.Redact {
		checkPointer(ps, indexPath("escalation.redact", i), r)
	}
	if w := c.Escalation.Sinks.Webhook; w != "" {
		if msg := httpURLProblem(w); msg != "" {
			ps.add("escalation.sinks.webhook", "%s", msg)
		}
	}

	if c.Limits.MaxRequestBytes <= 0 {
		ps.add("limits.max_request_bytes", "must be greater than 0, got %d", c.Limits.MaxRequestBytes)
	}
	if c.Limits.MaxResponseBytes <= 0 {
		ps.add("limits.max_response_bytes", "must be greater than 0, got %d", c.Limits.MaxResponseBytes)
	}
	oneOf(ps, "log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf(ps, "log.format", c.Log.Format, "json", "console")
	positive(ps, "shutdown.grace", c.Shutdown.Grace)

	c.validateExposure(ps)
	return ps.err()
}

func (c *Config) validateUpstreams(ps *problems) {
	if len(c.Upstreams) == 0 {
		ps.add("upstreams", "at least one upstream is required, e.g. upstreams: [{url: https://api.openai.com}]")
		return
	}
	names := map[string]int{}
	prefixes := map[string]int{}
	for i, u := range c.Upstreams {
		at := indexPath("upstreams", i)
		if u.Name == "" {
			ps.add(at+".name", "must not be empty")
		} else if j, dup := names[u.Name]; dup {
			ps.add(at+".name", "%q is also the name of upstreams[%d]", u.Name, j)
		} else {
			names[u.Name] = i
		}

		if msg := httpURLProblem(u.URL); msg != "" {
			ps.add(at+".url", "%s", msg)
		}

		switch p := u.PathPrefix; {
		case p != "" && !strings.HasPrefix(p, "/"):
			ps.add(at+".path_prefix", "%q must start with \"/\"", p)
		case strings.HasSuffix(p, "/"):
			ps.add(at+".path_prefix", "%q must not end with \"/\" (use \"\" for the root)", p)
		case strings.ContainsAny(p, "?#{}*"):
			ps.add(at+".path_prefix", "%q must be a plain path", p)
		default:
			if msg := canonicalRouteProblem(p); msg != "" {
				ps.add(at+".path_prefix", "%q %s", p, msg)
			}
		}
		if j, dup := prefixes[u.PathPrefix]; dup {
			ps.add(at+".path_prefix", "%q is also the path_prefix of upstreams[%d]; the prefix selects the upstream", u.PathPrefix, j)
		} else {
			prefixes[u.PathPrefix] = i
		}

		for _, k := range slices.Sorted(maps.Keys(u.APIPaths)) {
			kp := fieldPath(at+".api_paths", k)
			if msg := routePatternProblem(k); msg != "" {
				ps.add(kp, "%s", msg)
			}
			oneOf(ps, kp, u.APIPaths[k], APIChat, APIMessages, APIResponses, APIGemini)
		}

		oneOf(ps, at+".api_key_mode", u.APIKeyMode, APIKeyIfMissing, APIKeyReplace)
		positive(ps, at+".connect_timeout", u.ConnectTimeout)
		positive(ps, at+".first_byte_timeout", u.FirstByteTimeout)
		positive(ps, at+".idle_timeout", u.IdleTimeout)
	}
}

func (c *Config) validateCatalog(ps *problems) {
	cat := &c.Catalog
	oneOf(ps, "catalog.mode", cat.Mode, CatalogIntersect, CatalogConfig, CatalogRequest)
	oneOf(ps, "catalog.unlisted", cat.Unlisted, UnlistedAllow, UnlistedReject)
	oneOf(ps, "catalog.formats", cat.Formats, FormatsAssert, FormatsAnnotate)
	oneOf(ps, "catalog.strict", cat.Strict, StrictOff, StrictAuto)
	cat.Results.validate(ps)
	if cat.Mode == CatalogConfig && len(cat.Tools) == 0 && len(cat.Files) == 0 {
		ps.add("catalog.mode", "mode config needs a catalog: add catalog.tools or catalog.files")
	}
	for i, p := range cat.StripPrefixes {
		if p == "" {
			ps.add(indexPath("catalog.strip_prefixes", i), "must not be empty")
		}
	}
	for i, f := range cat.Files {
		if strings.TrimSpace(f) == "" {
			ps.add(indexPath("catalog.files", i), "must not be empty")
		}
	}
	seen := map[string]int{}
	for i := range cat.Tools {
		t := &cat.Tools[i]
		at := indexPath("catalog.tools", i)
		t.validate(ps, at)
		if t.Name == "" {
			continue
		}
		if j, dup := seen[t.Name]; dup {
			ps.add(at+".name", "tool %q is already defined at catalog.tools[%d]", t.Name, j)
		} else {
			seen[t.Name] = i
		}
	}
}

// contextName is what a context value may be called: a CEL identifier, so a
// rule reads it as context.name.
var contextName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// headerName is an HTTP header field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")

// reservedHeaders carry the request's framing or its credentials, which the
// upstream needs: declaring one as a context value would strip it.
var reservedHeaders = []string{"authorization", "x-api-key", "api-key", "content-type", "content-length",
	"content-encoding", "host", "accept", "accept-encoding", "connection", "transfer-encoding", "anthropic-version"}

func (c *Config) validateContext(ps *problems) {
	headers := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(c.Catalog.Context)) {
		at := fieldPath("catalog.context", name)
		if !contextName.MatchString(name) {
			ps.add(at, "%q is not a valid context name (a letter or _, then letters, digits or _; a rule reads it as context.name)", name)
		}
		h := c.Catalog.Context[name].Header
		lower := strings.ToLower(h)
		switch {
		case h == "":
			ps.add(at+".header", "must be set, e.g. X-Customer-Id")
		case !headerName.MatchString(h):
			ps.add(at+".header", "%q is not a valid header name", h)
		case slices.Contains(reservedHeaders, lower) || strings.HasPrefix(lower, "x-toolgate-"):
			ps.add(at+".header", "%q is needed by the upstream or by toolgate and cannot carry a context value", h)
		case headers[lower] != "":
			ps.add(at+".header", "%q is also the header of catalog.context.%s", h, headers[lower])
		default:
			headers[lower] = name
		}
	}
}

// validatorName is what a validator may be called: it labels metrics and
// findings (validator:<name>).
var validatorName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func (c *Config) validateValidators(ps *problems) {
	names := map[string]int{}
	for i, v := range c.Validators {
		at := indexPath("validators", i)
		switch j, dup := names[v.Name]; {
		case !validatorName.MatchString(v.Name):
			ps.add(at+".name", "%q is not a valid validator name (1 to 64 of a-z A-Z 0-9 _ . -)", v.Name)
		case dup:
			ps.add(at+".name", "%q is also the name of validators[%d]", v.Name, j)
		default:
			names[v.Name] = i
		}
		v.validateOn(ps, at)
		if msg := validatorURLProblem(v.URL, v.AllowInsecure); msg != "" {
			ps.add(at+".url", "%s", msg)
		}
		if len(v.Tools) == 0 {
			ps.add(at+".tools", `must list the tools it judges, or ["*"] for all (the default)`)
		}
		for j, t := range v.Tools {
			if t == "*" && len(v.Tools) > 1 {
				ps.add(indexPath(at+".tools", j), `"*" already names every tool; list it alone`)
			} else if t != "*" && !toolName.MatchString(t) && !mcpToolName.MatchString(t) {
				ps.add(indexPath(at+".tools", j), "%q is not a valid tool name", t)
			}
		}
		positive(ps, at+".timeout", v.Timeout)
		if v.Timeout > c.Recovery.Deadline && c.Recovery.Deadline > 0 {
			ps.add(at+".timeout", "%s is longer than recovery.deadline (%s), inside which every validator call runs", v.Timeout, c.Recovery.Deadline)
		}
		oneOf(ps, at+".failure_policy", v.FailurePolicy, FailurePolicyFail, FailurePolicyIgnore)
	}
}

// validatorURLProblem says what is wrong with a validator URL, or "". Plain
// http is only for loopback (the same host or pod) unless allowed: the body
// carries the call, the conversation's tool results and the context values.
// validateTracing checks the exporter's settings. The endpoint takes no
// credentials: they would be logged with the config; headers_env is where
// they go.
func (c *Config) validateTracing(ps *problems) {
	t := c.Tracing
	oneOf(ps, "tracing.protocol", t.Protocol, TracingHTTP, TracingGRPC)
	if p := t.SampleRatio; p != nil && (math.IsNaN(*p) || *p < 0 || *p > 1) {
		ps.add("tracing.sample_ratio", "must be between 0 and 1, got %v", *p)
	}
	if t.Endpoint == "" {
		return
	}
	raw := t.Endpoint
	if !strings.Contains(raw, "://") && t.Protocol == TracingGRPC {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		ps.add("tracing.endpoint", "must be http://HOST:PORT or https://HOST:PORT (grpc also takes HOST:PORT)")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		ps.add("tracing.endpoint", "may not carry credentials, a query or a fragment; put exporter headers in headers_env")
	}
}

func validatorURLProblem(raw string, allowInsecure bool) string {
	if msg := httpURLProblem(raw); msg != "" {
		return msg
	}
	u, _ := url.Parse(raw)
	if u.Scheme == "http" && !allowInsecure && !isLoopback(u.Hostname()) {
		return strconv.Quote(raw) + " is plain http to a host that is not loopback; use https, or set allow_insecure: true"
	}
	return ""
}

// validate checks one tool, from config.yaml or from a tool file, at path at.
func (t *ToolConfig) validate(ps *problems, at string) {
	switch {
	case t.Name == "":
		ps.add(at+".name", "must not be empty")
	case !toolName.MatchString(t.Name) && !mcpToolName.MatchString(t.Name):
		ps.add(at+".name", "%q is not a valid tool name (1 to 128 of a-z A-Z 0-9 _ . : -, or mcp_server/tool)", t.Name)
	}
	if len(t.Parameters) > 0 {
		if v := bytes.TrimSpace(t.Parameters); !bytes.Equal(v, []byte("null")) && (len(v) == 0 || v[0] != '{' || !json.Valid(v)) {
			ps.add(at+".parameters", "must be a JSON Schema object, as the model APIs require")
		}
	}
	oneOf(ps, at+".policy", t.Policy, PolicyExecute, PolicyConfirm)
	if t.Approver != "" {
		oneOf(ps, at+".approver", t.Approver, ApproverOperator, ApproverCaller)
	}
	for j, p := range t.Provenance {
		checkPointer(ps, indexPath(at+".provenance", j), p)
	}
	for j, r := range t.Rules {
		if strings.TrimSpace(r.Expr) == "" {
			ps.add(indexPath(at+".rules", j)+".expr", "must not be empty")
		}
	}
}

// maxApprovalTTL bounds approvals.ttl: every held answer stays in the
// store that long, and a call nobody approved within a week is stale.
const maxApprovalTTL = 7 * 24 * time.Hour

// maxReplayWindow bounds escalation.replay_window: a replay answers a
// client's own retry, and after an hour the same request is a new question.
const maxReplayWindow = time.Hour

func (c *Config) validateApprovals(ps *problems) {
	a := &c.Approvals
	if _, err := storespec.Parse(a.Store); err != nil {
		ps.add("approvals.store", "%s", err.Error())
	}
	if a.TTL < Duration(time.Second) || a.TTL > Duration(maxApprovalTTL) {
		ps.add("approvals.ttl", "must be between 1s and %s, got %s", maxApprovalTTL, a.TTL)
	}
	if a.Notify != "" {
		if msg := httpURLProblem(a.Notify); msg != "" {
			ps.add("approvals.notify", "%s", msg)
		}
	} else if a.NotifySecretEnv != "" {
		ps.add("approvals.notify_secret_env", "is set but approvals.notify is empty; nothing would be signed")
	}
	c.validateApprovalsPeople(ps)
	mcpConfirm := c.Catalog.MCP.ConfirmDestructive && len(c.MCPServers) > 0
	for i, t := range c.Catalog.Tools {
		// An MCP server's tool may be confirm through its destructiveHint,
		// which only the server knows.
		if t.Approver != "" && t.Policy != PolicyConfirm && !(mcpConfirm && mcpToolName.MatchString(t.Name)) {
			ps.add(indexPath("catalog.tools", i)+".approver", "applies only to a tool with policy: confirm; %q has policy: %s", t.Name, t.Policy)
		}
	}
	host, _, err := net.SplitHostPort(c.AdminListen)
	if err == nil && !isLoopback(host) && a.AdminTokenEnv == "" && a.AdminTokensEnv == "" && c.approvalsInUse() {
		ps.add("approvals.admin_token_env",
			"required because admin_listen %q is not a loopback address and confirm tools are held for approval: anyone who can reach it could approve them",
			c.AdminListen)
	}
}

// validateApprovalsPeople checks what serves people: the notification's
// format and the page's address it links to.
func (c *Config) validateApprovalsPeople(ps *problems) {
	a := &c.Approvals
	oneOf(ps, "approvals.notify_format", a.NotifyFormat, NotifyJSON, NotifySlack)
	if a.NotifyFormat == NotifySlack && a.NotifySecretEnv != "" {
		ps.add("approvals.notify_secret_env", "is set but notify_format is slack: an incoming webhook reads no signature")
	}
	if a.PageURL != "" {
		if msg := httpURLProblem(a.PageURL); msg != "" {
			ps.add("approvals.page_url", "%s", msg)
		}
	}
}

// approvalsInUse reports whether any call can be held for approval: a
// confirm tool in the catalog, or MCP tools made confirm by their
// destructiveHint.
func (c *Config) approvalsInUse() bool {
	if c.Catalog.MCP.ConfirmDestructive && len(c.MCPServers) > 0 {
		return true
	}
	if c.Catalog.Pins.Enabled() && c.Catalog.Pins.OnDrift == DriftHold && len(c.MCPServers) > 0 {
		return true
	}
	for _, t := range c.Catalog.Tools {
		if t.Policy == PolicyConfirm {
			return true
		}
	}
	return false
}

// validateExposure refuses a proxy that would lend its upstream key to anyone
// who can reach it: the config's one hard safety rule (docs/config.md, under
// the table).
func (c *Config) validateExposure(ps *problems) {
	if c.InboundAuth.TokensEnv != "" {
		return
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil || isLoopback(host) {
		return
	}
	var keyed []string
	for i, u := range c.Upstreams {
		if u.APIKeyEnv != "" {
			keyed = append(keyed, indexPath("upstreams", i))
		}
	}
	for i, m := range c.MCPServers {
		if m.APIKeyEnv != "" {
			keyed = append(keyed, indexPath("mcp_servers", i))
		}
	}
	if len(keyed) > 0 {
		ps.add("inbound_auth.tokens_env",
			"required because listen %q is not a loopback address and %s.api_key_env is set: anyone who can reach toolgate could spend that key",
			c.Listen, keyed[0])
	}
}

// isLoopback reports whether host only ever accepts local connections. An
// empty host or 0.0.0.0 listens everywhere, and a name other than localhost
// may resolve anywhere, so both count as exposed.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func checkListen(ps *problems, path, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		ps.add(path, "%q must be host:port, e.g. 127.0.0.1:8080", addr)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		ps.add(path, "%q has an invalid port", addr)
	}
	if strings.ContainsAny(host, "/ ") {
		ps.add(path, "%q has an invalid host", addr)
	}
}

// httpURLProblem says what is wrong with an upstream or webhook URL, or "".
func httpURLProblem(raw string) string {
	if raw == "" {
		return "must be set, e.g. https://api.openai.com"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "is not a valid URL: " + strings.TrimPrefix(err.Error(), "parse "+strconv.Quote(raw)+": ")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return strconv.Quote(raw) + " must be an absolute http:// or https:// URL"
	case u.Host == "" || u.Opaque != "":
		return strconv.Quote(raw) + " has no host"
	case u.User != nil:
		return strconv.Quote(raw) + " must not carry credentials; they would show in logs (use api_key_env)"
	case u.RawQuery != "" || u.ForceQuery:
		return strconv.Quote(raw) + " must not have a query string"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return strconv.Quote(raw) + " must not have a fragment"
	}
	if _, port, err := net.SplitHostPort(u.Host); err == nil {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return strconv.Quote(raw) + " has an invalid port"
		}
	}
	return ""
}

// routePatternProblem checks an api_paths key: an absolute path whose
// segments may be chi-style {param} placeholders.
func routePatternProblem(p string) string {
	if !strings.HasPrefix(p, "/") {
		return "path must start with \"/\""
	}
	if strings.ContainsAny(p, "?#") {
		return "path must not contain a query or fragment"
	}
	if msg := canonicalRouteProblem(p); msg != "" {
		return "path " + msg
	}
	for _, seg := range strings.Split(p[1:], "/") {
		open := strings.Count(seg, "{")
		if open != strings.Count(seg, "}") || open > 1 {
			return "segment " + strconv.Quote(seg) + " has unbalanced or nested braces"
		}
		if open == 1 {
			i, j := strings.IndexByte(seg, '{'), strings.IndexByte(seg, '}')
			if j < i || j == i+1 {
				return "segment " + strconv.Quote(seg) + " needs a parameter name between the braces"
			}
		}
	}
	return ""
}

// canonicalRouteProblem checks that a configured route is spelled the one
// way toolgate routes on: requests are matched on their canonical path,
// and any other spelling of a judged route is refused, so a route written
// with escapes, ";", dot or empty segments could never be reached.
func canonicalRouteProblem(p string) string {
	for i := 0; i < len(p); i++ {
		c := p[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~!$&'()*+,=:@/{}", c) >= 0
		if !ok {
			return "must use only letters, digits and -._~!$&'()*+,=:@ (no escapes, spaces or \";\"); found " + strconv.Quote(string(c))
		}
	}
	for _, seg := range strings.Split(p, "/")[1:] {
		if seg == "" || strings.HasSuffix(seg, ".") {
			return "must not have empty segments or segments ending in \".\""
		}
	}
	return ""
}

// checkPointer checks an RFC 6901 JSON pointer: empty (the whole value) or
// "/"-separated tokens in which "~" only starts "~0" or "~1".
func checkPointer(ps *problems, path, p string) {
	if msg := pointerProblem(p); msg != "" {
		ps.add(path, "%q is not a JSON pointer: %s", p, msg)
	}
}

func pointerProblem(p string) string {
	if p != "" && p[0] != '/' {
		return "must be empty or start with \"/\""
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return "\"~\" must be followed by 0 or 1"
		}
	}
	return ""
}

func oneOf(ps *problems, path, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	ps.add(path, "%q is not one of %s", v, strings.Join(allowed, ", "))
}

func positive(ps *problems, path string, d Duration) {
	if d <= 0 {
		ps.add(path, "must be greater than 0, got %s", d)
	}
}

func checkAttempts(ps *problems, path string, p *int) {
	if p != nil && (*p < 0 || *p > maxAttemptsLimit) {
		ps.add(path, "must be between 0 and %d, got %d", maxAttemptsLimit, *p)
	}
}
