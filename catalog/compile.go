package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/catalog/strict"
	"github.com/toolgate/toolgate/schema"
)

// VersionRequest is the catalog version of a config without tools: every
// request brings its own.
const VersionRequest = "request"

// Compile turns a Config into a Snapshot: it reads the tool files and the
// recovery prompt file (relative paths against baseDir), compiles every
// schema and rule once, and resolves secrets from the environment. Like
// Parse, it reports every problem it finds in one *ConfigError. It fills
// defaults and validates first, so a Config built in code is safe to pass.
func Compile(c *Config, baseDir string) (*Snapshot, error) {
	return compile(c, baseDir, os.LookupEnv)
}

// catalogEntry is one tool on its way into the Snapshot, with where to
// point an error about it.
type catalogEntry struct {
	cfg ToolConfig
	// path is the config field that brought the tool in.
	path string
	// fromFile marks tools read from catalog.files, whose problems are
	// reported against the file entry.
	fromFile bool
}

func compile(c *Config, baseDir string, lookupEnv func(string) (string, bool)) (*Snapshot, error) {
	if c == nil {
		return nil, errors.New("catalog: no config")
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ps := &problems{src: c.src}

	entries := c.gatherTools(ps, baseDir)
	s := &Snapshot{
		strict:  strict.NewMemory(),
		Config:  c,
		Tools:   make(map[string]*Tool, len(entries)),
		Names:   make([]string, 0, len(entries)),
		schemas: schema.RequestCache(c.schemaOptions()),
	}
	for _, e := range entries {
		t := compileTool(ps, e, c.Catalog.Context, c.schemaOptions())
		s.AnyResultRules = s.AnyResultRules || len(e.cfg.ResultRules) > 0
		if strings.Contains(e.cfg.Name, "/") {
			// server/tool entries refine an MCP server's own tools; a
			// model API never offers a name with a slash.
			if t != nil {
				if s.MCPTools == nil {
					s.MCPTools = map[string]*Tool{}
				}
				s.MCPTools[t.Name] = t
			}
			continue
		}
		if t != nil {
			s.Tools[t.Name] = t
		}
		s.Names = append(s.Names, e.cfg.Name)
	}
	sort.Strings(s.Names)
	if c.Catalog.Mode == CatalogConfig && len(entries) == 0 && len(c.Catalog.Files) > 0 {
		ps.add("catalog.files", "mode config needs a catalog, and these files hold no function tools")
	}

	s.Secrets = c.resolveSecrets(ps, lookupEnv)
	s.Validators = c.compileValidators(ps, entries, lookupEnv)
	s.loadPins(ps, baseDir)
	if f := c.Recovery.PromptFile; f != "" {
		data, err := readFile(resolvePath(baseDir, f))
		switch {
		case err != nil:
			ps.add("recovery.prompt_file", "%v", err)
		case len(bytes.TrimSpace(data)) == 0:
			ps.add("recovery.prompt_file", "%s is empty; remove prompt_file to use the built-in prompt", f)
		default:
			s.Prompt = string(data)
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}

	s.Version = c.Catalog.Version
	if s.Version == "" {
		s.Version = catalogHash(entries)
	}
	s.all = s.catalogOnly()
	return s, nil
}

// gatherTools lists the config's tools followed by those of each file, in
// order, and refuses a name defined twice anywhere.
func (c *Config) gatherTools(ps *problems, baseDir string) []catalogEntry {
	var entries []catalogEntry
	origin := map[string]string{}
	for i, t := range c.Catalog.Tools {
		at := indexPath("catalog.tools", i)
		if t.Origin == "" {
			t.Origin = at
		}
		if _, dup := origin[t.Name]; dup {
			continue // Validate has reported it
		}
		origin[t.Name] = t.Origin
		entries = append(entries, catalogEntry{cfg: t, path: at})
	}
	for j, f := range c.Catalog.Files {
		at := indexPath("catalog.files", j)
		tools, err := readToolFile(resolvePath(baseDir, f), f)
		if err != nil {
			ps.add(at, "%v", err)
			continue
		}
		for _, t := range tools {
			t.setDefaults()
			sub := &problems{}
			t.validate(sub, "")
			for _, p := range sub.list {
				ps.add(at, "%s: %s: %s", t.Origin, strings.TrimPrefix(p.Path, "."), p.Message)
			}
			if len(sub.list) > 0 {
				continue
			}
			if prev, dup := origin[t.Name]; dup {
				ps.add(at, "tool %q in %s is already defined at %s", t.Name, t.Origin, prev)
				continue
			}
			if c.Abstain.Enabled && t.Name == c.Abstain.ToolName {
				ps.add(at, "tool %q in %s has the name of abstain.tool_name; the virtual tool would hide it", t.Name, t.Origin)
			}
			origin[t.Name] = t.Origin
			entries = append(entries, catalogEntry{cfg: t, path: at, fromFile: true})
		}
	}
	return entries
}

// compileTool builds one Tool, adding a problem for a schema or rule that
// does not compile or for a rule reading an undeclared context value.
func compileTool(ps *problems, entry catalogEntry, declared map[string]ContextSource, opt schema.Options) *Tool {
	config := &entry.cfg
	t := &Tool{
		Name:          config.Name,
		Description:   config.Description,
		Policy:        config.Policy,
		Approver:      config.Approver,
		Substitutable: config.Substitutable != nil && *config.Substitutable,
		Provenance:    config.Provenance,
	}
	ok := true
	where := func(field string) string {
		if entry.fromFile {
			return entry.path
		}
		return entry.path + field
	}
	if params := compactJSON(config.Parameters); params != nil {
		t.Parameters = params
		compiled, err := schema.Compile("https://toolgate.invalid/catalog/"+url.PathEscape(config.Name)+".json", params, opt)
		if err != nil {
			ps.add(where(".parameters"), "tool %q (%s): schema does not compile: %v", config.Name, config.Origin, err)
			ok = false
		}
		t.Schema, t.fast = compiled, schema.NewFast(compiled)
	}
	for i, ruleConfig := range config.Rules {
		rule, err := NewRule(ruleConfig.Expr, ruleConfig.Message)
		if err != nil {
			ps.add(where(indexPath(".rules", i)+".expr"), "tool %q: rule %q: %v", config.Name, ruleConfig.Expr, err)
			ok = false
			continue
		}
		for _, key := range rule.ContextKeys {
			if _, known := declared[key]; !known {
				ps.add(where(indexPath(".rules", i)+".expr"), "tool %q: rule %q reads context.%s, which catalog.context does not declare", config.Name, ruleConfig.Expr, key)
				ok = false
			}
		}
		t.Rules = append(t.Rules, rule)
	}
	ok = compileResultRules(ps, where, config, t) && ok
	if !ok {
		return nil
	}
	return t
}

// schemaOptions are the settings of catalog.formats the schema engine
// compiles with.
func (c *Config) schemaOptions() schema.Options {
	return schema.Options{AnnotateFormats: c.Catalog.Formats == FormatsAnnotate}
}

// compactJSON strips insignificant whitespace, so that reformatting a
// schema does not change the catalog version. An absent or null schema is
// nil: the tool takes any argument object.
func compactJSON(v []byte) []byte {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || bytes.Equal(v, []byte("null")) {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return v // Validate has refused invalid JSON already
	}
	return b.Bytes()
}

func (c *Config) resolveSecrets(ps *problems, lookupEnv func(string) (string, bool)) Secrets {
	sec := Secrets{UpstreamKeys: map[string]string{}}
	// Keys mounted from secret files often end in a newline, and no real
	// key contains whitespace.
	key := func(at, name string) string {
		v, _ := lookupEnv(name)
		if v = strings.TrimSpace(v); v == "" {
			ps.add(at+".api_key_env", "environment variable %s is not set or empty", name)
		}
		return v
	}
	for i, u := range c.Upstreams {
		if u.APIKeyEnv != "" {
			if v := key(indexPath("upstreams", i), u.APIKeyEnv); v != "" {
				sec.UpstreamKeys[u.Name] = v
			}
		}
	}
	for i, m := range c.MCPServers {
		if m.APIKeyEnv != "" {
			if v := key(indexPath("mcp_servers", i), m.APIKeyEnv); v != "" {
				if sec.MCPKeys == nil {
					sec.MCPKeys = map[string]string{}
				}
				sec.MCPKeys[m.Name] = v
			}
		}
	}
	if name := c.InboundAuth.TokensEnv; name != "" {
		v, _ := lookupEnv(name)
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				sec.InboundTokens = append(sec.InboundTokens, tok)
			}
		}
		if len(sec.InboundTokens) == 0 {
			// Starting without tokens would silently turn authentication off.
			ps.add("inbound_auth.tokens_env", "environment variable %s holds no tokens", name)
		}
	}
	sec.ApprovalsAdminToken = optionalSecret(ps, lookupEnv, "approvals.admin_token_env", c.Approvals.AdminTokenEnv)
	if name := c.Approvals.AdminTokensEnv; name != "" {
		sec.ApprovalsAdminTokens = namedTokens(ps, lookupEnv, name)
	}
	sec.ApprovalsNotifySecret = optionalSecret(ps, lookupEnv, "approvals.notify_secret_env", c.Approvals.NotifySecretEnv)
	sec.MCPStateSecret = optionalSecret(ps, lookupEnv, "catalog.mcp.state_secret_env", c.Catalog.MCP.StateSecretEnv)
	if name := c.Escalation.Sinks.WebhookSecretEnv; name != "" {
		v, _ := lookupEnv(name)
		if v = strings.TrimSpace(v); v == "" {
			ps.add("escalation.sinks.webhook_secret_env", "environment variable %s is not set or empty", name)
		}
		sec.WebhookSecret = v
	}
	if name := c.Tracing.HeadersEnv; name != "" {
		sec.TraceHeaders = traceHeaders(ps, name, lookupEnv)
	}
	return sec
}

// optionalSecret reads the variable a *_env field names, if it names one;
// a named variable that is unset or blank is a problem, since starting
// without it would silently drop the protection it gives.
func optionalSecret(ps *problems, lookupEnv func(string) (string, bool), field, name string) string {
	if name == "" {
		return ""
	}
	v, _ := lookupEnv(name)
	if v = strings.TrimSpace(v); v == "" {
		ps.add(field, "environment variable %s is not set or empty", name)
	}
	return v
}

// tokenName is what a named admin token's name may be: it is recorded as
// who decided, in sinks and on the page.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// namedTokens reads approvals.admin_tokens_env: name:token pairs split by
// commas. A problem names the variable and the entry's position, never its
// text, which would print a token.
func namedTokens(ps *problems, lookupEnv func(string) (string, bool), name string) []NamedToken {
	const field = "approvals.admin_tokens_env"
	v, _ := lookupEnv(name)
	var out []NamedToken
	before := len(ps.list)
	names, tokens := map[string]bool{}, map[string]bool{}
	for i, entry := range strings.Split(v, ",") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		n, tok, ok := strings.Cut(entry, ":")
		n, tok = strings.TrimSpace(n), strings.TrimSpace(tok)
		switch {
		case !ok || tok == "":
			ps.add(field, "environment variable %s: entry %d is not name:token", name, i+1)
			continue
		case !tokenName.MatchString(n):
			ps.add(field, "environment variable %s: entry %d: the name must be 1 to 64 letters, digits, '.', '_', '@' or '-'", name, i+1)
			continue
		case names[n]:
			ps.add(field, "environment variable %s: entry %d: the name %q is given twice", name, i+1, n)
			continue
		case tokens[tok]:
			ps.add(field, "environment variable %s: entry %d: its token is another entry's too, so who decided could not be told", name, i+1)
			continue
		}
		names[n], tokens[tok] = true, true
		out = append(out, NamedToken{Name: n, Token: tok})
	}
	if len(out) == 0 && len(ps.list) == before {
		ps.add(field, "environment variable %s holds no name:token entries", name)
	}
	return out
}

// traceHeaders reads tracing.headers_env: k=v pairs split by commas. A
// problem names the variable and the pair's position, never its text: the
// values are the trace backend's credentials.
func traceHeaders(ps *problems, name string, lookupEnv func(string) (string, bool)) map[string]string {
	v, _ := lookupEnv(name)
	out := map[string]string{}
	for i, kv := range strings.Split(v, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || !validHeaderName(k) || strings.ContainsAny(val, "\r\n") {
			ps.add("tracing.headers_env", "environment variable %s: entry %d is not a header=value pair", name, i+1)
			continue
		}
		out[k] = strings.TrimSpace(val)
	}
	if len(out) == 0 {
		ps.add("tracing.headers_env", "environment variable %s holds no header=value pairs", name)
	}
	return out
}

// validHeaderName reports an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// compileValidators resolves each validator's tools against the catalog and
// its signing secret from the environment.
func (c *Config) compileValidators(ps *problems, entries []catalogEntry, lookupEnv func(string) (string, bool)) []*ValidatorSpec {
	known := make(map[string]bool, len(entries))
	for _, e := range entries {
		known[e.cfg.Name] = true
	}
	var out []*ValidatorSpec
	for i, v := range c.Validators {
		at := indexPath("validators", i)
		spec := &ValidatorSpec{Name: v.Name, URL: v.URL, Timeout: v.Timeout.D(), FailOpen: v.FailurePolicy == FailurePolicyIgnore,
			Calls: v.onCalls(), Results: v.onResults()}
		for j, t := range v.Tools {
			switch {
			case t == "*":
				spec.tools = nil
				spec.all = true
			case !known[t]:
				ps.add(indexPath(at+".tools", j), "tool %q is not in the catalog", t)
			default:
				if spec.tools == nil {
					spec.tools = map[string]bool{}
				}
				spec.tools[t] = true
			}
		}
		if name := v.SecretEnv; name != "" {
			sec, _ := lookupEnv(name)
			if sec = strings.TrimSpace(sec); sec == "" {
				ps.add(at+".secret_env", "environment variable %s is not set or empty", name)
			}
			spec.Secret = []byte(sec)
		}
		out = append(out, spec)
	}
	return out
}

func resolvePath(baseDir, p string) string {
	if baseDir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(baseDir, p)
}

// catalogHash is the default catalog version: the first 12 hex digits of a
// SHA-256 over every field that changes how a call is judged, in name
// order. The same catalog gets the same version on every host and restart,
// so metrics from a fleet line up; any change gets a new one.
func catalogHash(entries []catalogEntry) string {
	if len(entries) == 0 {
		return VersionRequest
	}
	type canon struct {
		Name          string          `json:"name"`
		Description   string          `json:"description"`
		Parameters    json.RawMessage `json:"parameters"`
		Policy        string          `json:"policy"`
		Approver      string          `json:"approver,omitempty"`
		Substitutable bool            `json:"substitutable"`
		Provenance    []string        `json:"provenance"`
		Rules         [][2]string     `json:"rules"`
	}
	list := make([]canon, 0, len(entries))
	for _, e := range entries {
		t := e.cfg
		c := canon{
			Name:          t.Name,
			Description:   t.Description,
			Parameters:    compactJSON(t.Parameters),
			Policy:        t.Policy,
			Substitutable: t.Substitutable != nil && *t.Substitutable,
			Provenance:    t.Provenance,
		}
		// Only the non-default approver counts, so catalogs written before
		// approvers existed keep their versions.
		if t.Approver == ApproverCaller {
			c.Approver = t.Approver
		}
		for _, r := range t.Rules {
			c.Rules = append(c.Rules, [2]string{r.Expr, r.Message})
		}
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	data, err := json.Marshal(list)
	if err != nil {
		// Only invalid parameters JSON can fail here, and Validate refuses
		// that; hash the Go form so the version still tracks the content.
		data = fmt.Appendf(nil, "%#v", list)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:12]
}
