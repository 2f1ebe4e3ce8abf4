// Package catalog owns toolgate's configuration: the config.yaml file form, its
// defaults and validation, and the compiled, immutable Snapshot that every
// request reads. It is a leaf package: nothing here does I/O on the request path.
package catalog

import (
	"encoding/json"
	"time"
)

// Mode says whether toolgate enforces its verdicts or only reports them.
type Mode string

// Modes of operation.
const (
	// ModeEnforce repairs or escalates bad calls.
	ModeEnforce Mode = "enforce"
	// ModeShadow validates, counts and logs, but forwards every answer unchanged.
	ModeShadow Mode = "shadow"
)

// Config is config.yaml as written by an operator. Load fills defaults and
// validates it; Compile turns it into a Snapshot.
type Config struct {
	Mode        Mode        `yaml:"mode"`
	Listen      string      `yaml:"listen"`
	AdminListen string      `yaml:"admin_listen"`
	InboundAuth InboundAuth `yaml:"inbound_auth"`
	Upstreams   []Upstream  `yaml:"upstreams"`
	Catalog     Catalog     `yaml:"catalog"`
	Validators  []Validator `yaml:"validators"`
	Recovery    Recovery    `yaml:"recovery"`
	Reprompt    Reprompt    `yaml:"reprompt"`
	Abstain     Abstain     `yaml:"abstain"`
	Truncated   string      `yaml:"truncated"`
	Escalation  Escalation  `yaml:"escalation"`
	Limits      Limits      `yaml:"limits"`
	MCPServers  []MCPServer `yaml:"mcp_servers"`
	Approvals   Approvals   `yaml:"approvals"`
	Tracing     Tracing     `yaml:"tracing"`
	Log         Log         `yaml:"log"`
	Shutdown    Shutdown    `yaml:"shutdown"`

	// src locates fields in the file Parse read, so that later checks can
	// give line numbers too. Nil for a Config built in code.
	src *source
}

// InboundAuth guards the proxy listener with shared tokens.
type InboundAuth struct {
	// TokensEnv names an environment variable holding a comma-separated list of
	// accepted tokens. Empty disables inbound authentication.
	TokensEnv string `yaml:"tokens_env"`
}

// Upstream is one model API that toolgate forwards to.
type Upstream struct {
	Name             string            `yaml:"name"`
	URL              string            `yaml:"url"`
	PathPrefix       string            `yaml:"path_prefix"`
	APIPaths         map[string]string `yaml:"api_paths"`
	APIKeyEnv        string            `yaml:"api_key_env"`
	APIKeyMode       string            `yaml:"api_key_mode"`
	ConnectTimeout   Duration          `yaml:"connect_timeout"`
	FirstByteTimeout Duration          `yaml:"first_byte_timeout"`
	IdleTimeout      Duration          `yaml:"idle_timeout"`
}

// API shapes an upstreams[].api_paths entry can map a path to.
const (
	APIChat      = "chat"
	APIMessages  = "messages"
	APIResponses = "responses"
	APIGemini    = "gemini"
)

// How an upstream's own key combines with the client's credentials.
const (
	// APIKeyIfMissing sends toolgate's key only when the client sent none.
	APIKeyIfMissing = "if_missing"
	// APIKeyReplace always sends toolgate's key instead of the client's.
	APIKeyReplace = "replace"
)

// Catalog modes (docs/config.md, catalog.mode).
const (
	CatalogIntersect = "intersect"
	CatalogConfig    = "config"
	CatalogRequest   = "request"
)

// What happens to an offered tool the catalog lacks (docs/config.md, catalog.unlisted).
const (
	UnlistedAllow  = "allow"
	UnlistedReject = "reject"
)

// Catalog is the operator's list of real tools and how it combines with
// the tools a request offers.
type Catalog struct {
	Version       string       `yaml:"version"`
	Mode          string       `yaml:"mode"`
	Unlisted      string       `yaml:"unlisted"`
	StripPrefixes []string     `yaml:"strip_prefixes"`
	Tools         []ToolConfig `yaml:"tools"`
	Files         []string     `yaml:"files"`
	// Formats says whether JSON Schema "format" is checked (assert) or is a
	// description only (annotate).
	Formats string `yaml:"formats"`
	// Strict is off or auto: ask the provider to constrain decoding to
	// the schema of each tool whose schema fits its strict subset.
	Strict string    `yaml:"strict"`
	MCP    MCPPolicy `yaml:"mcp"`
	// Results judges the tool results that flow back to the model.
	Results ResultsPolicy `yaml:"results"`
	// Pins pins MCP servers' tool definitions (docs/pins.md).
	Pins Pins `yaml:"pins"`
	// Context declares the per-request values rules and validators may
	// read, by name.
	Context map[string]ContextSource `yaml:"context"`
}

// ContextSource says where a per-request context value comes from. The
// header is removed before the request is forwarded and is never logged:
// its values (a customer id, a tenant) may be personal data.
type ContextSource struct {
	Header string `yaml:"header"`
}

// Validator failure policies: what a call gets when its validator cannot
// give an answer (timeout, non-2xx, unreadable body).
const (
	// FailurePolicyFail blocks the call, like a denial.
	FailurePolicyFail = "fail"
	// FailurePolicyIgnore counts the failure and lets the call pass.
	FailurePolicyIgnore = "ignore"
)

// Validator is one operator webhook that judges calls after every local
// check passed, like a Kubernetes validating admission webhook.
type Validator struct {
	Name string `yaml:"name"`
	URL  string `yaml:"url"`
	// Tools are the tool names it judges, or ["*"] for every tool.
	Tools         []string `yaml:"tools"`
	Timeout       Duration `yaml:"timeout"`
	FailurePolicy string   `yaml:"failure_policy"`
	// SecretEnv names the variable holding the HMAC-SHA256 key that signs
	// each request body (X-Toolgate-Signature).
	SecretEnv string `yaml:"secret_env"`
	// AllowInsecure permits plain http to a host that is not loopback.
	AllowInsecure bool `yaml:"allow_insecure"`
	// On says what it is asked about: calls, results or both (default calls).
	On []string `yaml:"on"`
}

// tracing.protocol values.
const (
	TracingHTTP = "http/protobuf"
	TracingGRPC = "grpc"
)

// Tracing is the OTLP trace export (docs/tracing.md); off while Endpoint is empty.
type Tracing struct {
	Endpoint string `yaml:"endpoint"`
	Protocol string `yaml:"protocol"`
	// SampleRatio is for traces toolgate starts; a caller's sampled trace
	// is always continued. A pointer, so that an explicit 0 survives.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// HeadersEnv names a variable holding k=v,k=v exporter headers
	// (credentials of the trace backend).
	HeadersEnv string `yaml:"headers_env"`
}

// catalog.formats values.
const (
	FormatsAssert   = "assert"
	FormatsAnnotate = "annotate"
)

// catalog.strict values (docs/strict.md).
const (
	StrictOff  = "off"
	StrictAuto = "auto"
)

// Tool policies.
const (
	PolicyExecute = "execute"
	PolicyConfirm = "confirm"
)

// Who may say yes to a confirm call (docs/approvals.md, "Who says yes").
const (
	// ApproverOperator decides through the admin API.
	ApproverOperator = "operator"
	// ApproverCaller is the app, which asked its own user: presenting the
	// approval's secret on resume is the yes.
	ApproverCaller = "caller"
)

// ToolConfig is one tool as written in config.yaml or a tool file.
type ToolConfig struct {
	Name          string       `yaml:"name"`
	Description   string       `yaml:"description"`
	Parameters    JSONValue    `yaml:"parameters"`
	Policy        string       `yaml:"policy"`
	Approver      string       `yaml:"approver"`
	Substitutable *bool        `yaml:"substitutable"`
	Provenance    []string     `yaml:"provenance"`
	Rules         []RuleConfig `yaml:"rules"`
	// ResultRules are CEL over the tool's results (docs/results.md).
	ResultRules []RuleConfig `yaml:"result_rules"`

	// Origin names where the tool came from ("config.yaml:42", "tools.json"),
	// for error messages. Not read from YAML.
	Origin string `yaml:"-"`
}

// RuleConfig is one CEL rule over a call, its answer and the conversation
// (see NewRule for the variables it may read).
type RuleConfig struct {
	Expr    string `yaml:"expr"`
	Message string `yaml:"message"`
}

// Recovery strategies (docs/recovery.md, "The ladder").
const (
	StrategyDecision   = "decision"
	StrategyCorrection = "correction"
)

// Recovery configures the repair of calls to tools that do not exist.
type Recovery struct {
	Strategy            string   `yaml:"strategy"`
	MaxAttempts         *int     `yaml:"max_attempts"`
	ConfidenceThreshold *float64 `yaml:"confidence_threshold"`
	Shortlist           *int     `yaml:"shortlist"`
	PromptFile          string   `yaml:"prompt_file"`
	Deadline            Duration `yaml:"deadline"`
}

// Reprompt configures the repair of calls with bad arguments.
type Reprompt struct {
	MaxAttempts *int `yaml:"max_attempts"`
}

// Abstain configures the virtual "no tool fits" exit.
type Abstain struct {
	Enabled  bool   `yaml:"enabled"`
	ToolName string `yaml:"tool_name"`
}

// Truncated call handling.
const (
	TruncatedEscalate = "escalate"
	TruncatedPass     = "pass"
)

// Escalation modes (docs/escalations.md).
const (
	EscalationError   = "error"
	EscalationMessage = "message"
)

// Escalation configures how escalations reach the caller and the sinks.
type Escalation struct {
	Mode   string   `yaml:"mode"`
	Redact []string `yaml:"redact"`
	Sinks  Sinks    `yaml:"sinks"`
	// ReplayWindow is how long the same request from the same caller
	// gets the escalation it got before, without asking the model again;
	// 0 turns replays off. nil until defaults are set.
	ReplayWindow *Duration `yaml:"replay_window"`
}

// Sinks are where every escalation is recorded.
type Sinks struct {
	File             string `yaml:"file"`
	Webhook          string `yaml:"webhook"`
	WebhookSecretEnv string `yaml:"webhook_secret_env"`
}

// Approvals configures the hold and resume of confirm calls (docs/approvals.md, "Config").
type Approvals struct {
	// Store is memory, file:PATH or redis://HOST:PORT/DB.
	Store string   `yaml:"store"`
	TTL   Duration `yaml:"ttl"`
	// AdminTokenEnv names the variable holding the admin API's bearer
	// token; required when admin_listen is not loopback.
	AdminTokenEnv string `yaml:"admin_token_env"`
	// AdminTokensEnv names the variable holding named admin tokens
	// ("name:token,…"); the name of the token a decision came with is
	// recorded as who decided.
	AdminTokensEnv string `yaml:"admin_tokens_env"`
	// Notify is a webhook POSTed each new pending approval.
	Notify          string `yaml:"notify"`
	NotifySecretEnv string `yaml:"notify_secret_env"`
	// NotifyFormat is the notification's body: json (the record, signed)
	// or slack (an incoming-webhook message a person reads).
	NotifyFormat string `yaml:"notify_format"`
	// PageURL is where the approvals page is reached from outside
	// (https://host/ui/approvals); a slack notification links to it.
	PageURL string `yaml:"page_url"`
}

// Notification formats.
const (
	NotifyJSON  = "json"
	NotifySlack = "slack"
)

// Limits bound what toolgate buffers.
type Limits struct {
	MaxRequestBytes  int64 `yaml:"max_request_bytes"`
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
}

// Log configures the zap logger.
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Shutdown configures the drain on SIGTERM.
type Shutdown struct {
	Grace Duration `yaml:"grace"`
}

// MCPServer is one MCP server toolgate stands in front of (docs/mcp.md). A
// client points its Streamable HTTP URL at PathPrefix on the proxy listener.
type MCPServer struct {
	Name       string `yaml:"name"`
	URL        string `yaml:"url"`
	PathPrefix string `yaml:"path_prefix"`
	// APIKeyEnv names a variable holding a bearer token toolgate sends when
	// the client sent no Authorization of its own.
	APIKeyEnv      string   `yaml:"api_key_env"`
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// IdleTimeout is the longest silence inside the answer to a POST.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxStreams caps the calls of one session in flight at once; more
	// wait for a slot. The session's standing GET stream is not one.
	MaxStreams int `yaml:"max_streams"`
	// AllowedOrigins are browser origins (scheme://host[:port]) allowed
	// besides loopback ones; a request with any other Origin is refused.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowedHosts are Host values (host or host:port) allowed besides
	// the listener's own address and loopback names.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// What MCP tools the catalog lacks are (docs/config.md, catalog.mcp.expose).
const (
	// ExposeAll lists and judges every tool a server lists.
	ExposeAll = "all"
	// ExposeCatalog hides, and refuses calls to, tools without a
	// catalog.tools entry named server/tool.
	ExposeCatalog = "catalog"
)

// MCPPolicy is how the catalog treats tools learned from MCP servers.
type MCPPolicy struct {
	Expose string `yaml:"expose"`
	// ConfirmDestructive treats tools annotated destructiveHint: true as
	// policy: confirm.
	ConfirmDestructive bool `yaml:"confirm_destructive"`
	// ConfirmTimeout is how long a person has to answer an elicitation.
	ConfirmTimeout Duration `yaml:"confirm_timeout"`
	// StateSecretEnv names a variable holding the secret the requestState
	// of a 2026-07-28 confirmation is signed with; every replica behind
	// one load balancer needs the same one.
	StateSecretEnv string `yaml:"state_secret_env"`
}

// JSONValue is a YAML value kept as the equivalent JSON text, so JSON Schemas
// can be written in YAML and still reach the schema compiler byte-exact.
type JSONValue json.RawMessage

// Duration is a time.Duration written as a Go duration string ("10s").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
