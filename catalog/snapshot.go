package catalog

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/catalog/strict"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/schema"
)

// Tool is one real tool in compiled, ready-to-check form. Tools are shared
// between requests and never mutated after Compile.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema as JSON text, for recovery prompts.
	Parameters json.RawMessage
	// Schema is nil when the tool declares no parameters or its schema could
	// not be compiled (request tools only); then arguments must only be a JSON
	// object. Validate through ArgsValid and ValidateArgs, never
	// Schema.Validate: see schema.Validate.
	Schema *jsonschema.Schema
	Policy string
	// Approver is who may say yes to a confirm call: ApproverOperator or
	// ApproverCaller ("" for other tools).
	Approver      string
	Substitutable bool
	Provenance    []string
	Rules         []*Rule
	// ResultRules judge the tool's results (docs/results.md).
	ResultRules []*ResultRule
	// FromRequest marks a tool judged by the request's own schema.
	FromRequest bool
	// SchemaError is set when a request tool's schema did not compile.
	SchemaError error

	// fast is Schema's fast path, nil when the schema uses a keyword it
	// leaves to the library (see schema.NewFast).
	fast *schema.Fast

	// uncompiled is the shared cache entry of a schema that did not compile.
	uncompiled *schema.Entry
}

// ReportSchemaError returns the short hash of the tool's uncompilable
// schema, and first=true for exactly one caller per schema text, so that
// the proxy logs such a schema once instead of on every request that
// offers it. For a tool whose schema compiled it returns "", false.
func (t *Tool) ReportSchemaError() (hash string, first bool) {
	if t.uncompiled == nil {
		return "", false
	}
	return t.uncompiled.Hash, schema.FirstReport(t.uncompiled.Hash)
}

// ArgsValid judges argument text by the schema's fast path alone: true
// only when the text is one JSON object the schema accepts. False means
// no ruling: decode the arguments and ValidateArgs them. A pattern that
// ran out of time comes back as a *schema.PatternError.
func (t *Tool) ArgsValid(raw []byte) (bool, error) {
	return t.fast.ValidObject(raw)
}

// ValidateArgs validates decoded arguments against the tool's schema, by
// the library, which words the findings. A pattern that could not be
// evaluated in time is reported as a *schema.PatternError rather than as
// a finding on the value.
func (t *Tool) ValidateArgs(args any) error {
	if t.Schema == nil {
		return nil
	}
	return schema.Validate(t.Schema, args)
}

// Rule is a compiled semantic rule; its program is filled by the rules
// compiler (see rules.go).
type Rule struct {
	Expr    string
	Message string
	// ContextKeys are the context names the expression reads by name.
	ContextKeys []string
	// ArgKeys are the top-level argument names it reads by name.
	ArgKeys []string
	prog    ruleProgram
}

// ruleProgram is the compiled form of a rule expression. It takes a context
// so that a cancelled request also stops its rule evaluation.
type ruleProgram interface {
	eval(ctx context.Context, v *RuleVars) (bool, error)
}

// Snapshot is one immutable, fully compiled configuration. A request takes
// the current Snapshot once at its start and keeps it to the end, so a reload
// never changes the rules under a request in flight.
type Snapshot struct {
	Config *Config
	// Version labels metrics and escalations: catalog.version, or a short hash
	// of the catalog, or "request" when the catalog is empty.
	Version string
	// Tools are the config catalog's tools by name.
	Tools map[string]*Tool
	// Names are the catalog's tool names, sorted.
	Names []string
	// MCPTools are the catalog's server/tool entries by that name: rules,
	// provenance, policy and a stricter schema for an MCP server's tools.
	MCPTools map[string]*Tool
	// AnyResultRules is set when a tool (an MCP server's too) has
	// result_rules, so
	// judging results need not pair each with its call otherwise.
	AnyResultRules bool
	// Prompt is the recovery prompt template (default or prompt_file).
	Prompt string
	// Secrets resolved from the environment at load time.
	Secrets Secrets
	// Validators are the operator's webhooks in config order. They belong
	// to the snapshot, so a reload swaps them with everything else.
	Validators []*ValidatorSpec
	// Pins is catalog.pins.file as read, nil without one.
	Pins *PinFile

	schemas *schema.Cache
	// strict is the strict mode's memory (docs/strict.md). A copy of the
	// snapshot shares it, as it shares the compiled schemas.
	strict *strict.Memory
	// all is the Effective of the whole catalog, built once and shared by
	// every request that needs no other.
	all *Effective
}

// Secrets are values read from environment variables named in the config.
// They are kept apart so that logging a Config can never print them.
type Secrets struct {
	// UpstreamKeys by upstream name.
	UpstreamKeys map[string]string
	// InboundTokens accepted from clients; empty disables inbound auth.
	InboundTokens []string
	// WebhookSecret signs webhook deliveries.
	WebhookSecret string
	// MCPKeys by mcp_servers name.
	MCPKeys map[string]string
	// ApprovalsAdminToken is the admin API's bearer token; empty when
	// approvals.admin_token_env is not set.
	ApprovalsAdminToken string
	// ApprovalsAdminTokens are approvals.admin_tokens_env's named tokens,
	// in the order written.
	ApprovalsAdminTokens []NamedToken
	// ApprovalsNotifySecret signs approvals.notify deliveries.
	ApprovalsNotifySecret string
	// MCPStateSecret signs the requestState of an MCP confirmation
	// (catalog.mcp.state_secret_env); empty when not set.
	MCPStateSecret string
	// TraceHeaders go with every trace export (tracing.headers_env).
	TraceHeaders map[string]string
}

// NamedToken is an admin token and the name its decisions are recorded
// under.
type NamedToken struct {
	Name  string
	Token string
}

// ValidatorSpec is one validator in compiled form.
type ValidatorSpec struct {
	Name    string
	URL     string
	Timeout time.Duration
	// FailOpen is failure_policy: ignore, under which a validator that
	// cannot answer lets the call pass.
	FailOpen bool
	// Secret is the HMAC key for X-Toolgate-Signature; nil signs nothing.
	// It is kept out of the Config so a logged Config never shows it.
	Secret []byte
	// Calls and Results say what it is asked about (validators[].on).
	Calls, Results bool
	tools          map[string]bool
	all            bool
}

// Judges reports whether the validator is called for the tool.
func (v *ValidatorSpec) Judges(tool string) bool { return v.all || v.tools[tool] }

// Store holds the live Snapshot and swaps it atomically on reload.
type Store struct {
	cur atomic.Pointer[Snapshot]
}

// NewStore returns a Store serving s.
func NewStore(s *Snapshot) *Store {
	st := &Store{}
	st.cur.Store(s)
	return st
}

// Load returns the live Snapshot.
func (st *Store) Load() *Snapshot { return st.cur.Load() }

// Swap installs s as the live Snapshot.
func (st *Store) Swap(s *Snapshot) { st.cur.Store(s) }

// Offered is a function tool as a request declares it.
type Offered = neutral.Offered

// ChoiceKind is the request's tool_choice, reduced to what narrows tools.
type ChoiceKind = neutral.ChoiceKind

// Tool choices.
const (
	ChoiceAuto     = neutral.ChoiceAuto
	ChoiceRequired = neutral.ChoiceRequired
	ChoiceNone     = neutral.ChoiceNone
	ChoiceNamed    = neutral.ChoiceNamed
	ChoiceAllowed  = neutral.ChoiceAllowed
)

// ToolChoice narrows the effective catalog.
type ToolChoice = neutral.ToolChoice

// Status says how a called name relates to the effective catalog.
type Status uint8

// Name statuses, mapped to finding codes by package validate.
const (
	Found        Status = iota // callable in this request
	NotOffered                 // a catalog tool this request did not offer
	NotInCatalog               // offered, but the catalog lacks it and unlisted is reject
	Unknown                    // nothing of that name exists
)

// Effective is the set of tools one request may call (docs/config.md, catalog.mode). It is
// read-only once built; the one built for the whole catalog is shared by
// requests.
type Effective struct {
	Version string
	tools   map[string]*Tool
	// narrowed are the tools tool_choice took out of reach in this request.
	narrowed map[string]*Tool
	// catalog is the config catalog in intersect mode, where a catalog tool
	// the request did not offer is not offered rather than unknown.
	catalog  map[string]*Tool
	rejected map[string]struct{}
	strip    []string
	sorted   []*Tool
}

// Len is the number of callable tools.
func (e *Effective) Len() int { return len(e.tools) }

// Tools returns the callable tools sorted by name. The slice is shared. It
// is built on first use, since most requests never need it; the first call
// must not race with another on the same Effective (the shared catalog-wide
// one is built up front).
func (e *Effective) Tools() []*Tool {
	if e.sorted == nil && len(e.tools) > 0 {
		out := make([]*Tool, 0, len(e.tools))
		for _, t := range e.tools {
			out = append(out, t)
		}
		sortTools(out)
		e.sorted = out
	}
	return e.sorted
}

// Lookup resolves a called name. Names are matched exactly; the only
// loosening is the operator's strip_prefixes, reported through stripped.
func (e *Effective) Lookup(name string) (t *Tool, st Status, stripped bool) {
	if t, st = e.lookup(name); st != Unknown {
		return t, st, false
	}
	for _, p := range e.strip {
		if len(name) > len(p) && name[:len(p)] == p {
			if t2, st2 := e.lookup(name[len(p):]); st2 != Unknown {
				return t2, st2, true
			}
		}
	}
	return nil, Unknown, false
}

func (e *Effective) lookup(name string) (*Tool, Status) {
	if t, ok := e.tools[name]; ok {
		return t, Found
	}
	if _, ok := e.rejected[name]; ok {
		return nil, NotInCatalog
	}
	if _, ok := e.narrowed[name]; ok {
		return nil, NotOffered
	}
	if _, ok := e.catalog[name]; ok {
		return nil, NotOffered
	}
	return nil, Unknown
}

// PlanStrict decides which of a request's function tools to mark strict
// (strict.Memory.Plan), from what upstreams refused under this snapshot's
// catalog version.
func (s *Snapshot) PlanStrict(p strict.Provider, tools []strict.Tool, perRequest bool) strict.Plan {
	return s.strictMemory().Plan(p, tools, perRequest)
}

// RefuseStrict remembers that the upstream refused t marked strict, so
// no later request under this catalog version marks it again.
func (s *Snapshot) RefuseStrict(p strict.Provider, t strict.Tool) {
	s.strictMemory().Refuse(p, t)
}

// strictMemory is the snapshot's memory; one made other than by Compile
// has none, and then remembers nothing.
func (s *Snapshot) strictMemory() *strict.Memory {
	if s.strict == nil {
		return strict.NewMemory()
	}
	return s.strict
}
