package catalog

import (
	"strconv"
	"time"
)

// Defaults from the table of docs/config.md. They live here as named values so that tests and
// `toolgate check` can refer to them.
const (
	DefaultListen           = "127.0.0.1:8080"
	DefaultAdminListen      = "127.0.0.1:9091"
	DefaultAPIKeyMode       = APIKeyIfMissing
	DefaultConnectTimeout   = 10 * time.Second
	DefaultFirstByteTimeout = 120 * time.Second
	DefaultIdleTimeout      = 60 * time.Second
	DefaultMaxAttempts      = 1
	DefaultConfidence       = 0.8
	DefaultShortlist        = 20
	DefaultRecoveryDeadline = 60 * time.Second
	// DefaultReplayWindow covers the retries SDKs make on their own, which
	// back off for seconds, not minutes.
	DefaultReplayWindow       = 60 * time.Second
	DefaultAbstainToolName    = "toolgate_no_suitable_tool"
	DefaultMaxBodyBytes       = 64 << 20
	DefaultLogLevel           = "info"
	DefaultLogFormat          = "json"
	DefaultShutdownGrace      = 25 * time.Second
	defaultUpstreamNamePrefix = "upstream"
	// DefaultMCPIdleTimeout is longer than a model upstream's: a tool call
	// may work quietly for minutes before it answers.
	DefaultMCPIdleTimeout    = 300 * time.Second
	DefaultMCPMaxStreams     = 16
	DefaultMCPConfirmTimeout = 120 * time.Second
	DefaultApprovalsStore    = "memory"
	DefaultApprovalsTTL      = 15 * time.Minute
)

// DefaultValidatorTimeout bounds one validator call: it runs on the agent's
// clock, before any byte of the answer goes out.
const DefaultValidatorTimeout = 300 * time.Millisecond

// SetDefaults fills every field the operator left out. It is idempotent, and
// it never overrides a value that was written: the pointer fields exist so
// that an explicit 0 (no recovery attempts, say) survives. Durations and byte
// limits have no such pointer, so 0 there means "not set".
func (c *Config) SetDefaults() {
	setString((*string)(&c.Mode), string(ModeEnforce))
	setString(&c.Listen, DefaultListen)
	setString(&c.AdminListen, DefaultAdminListen)

	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		setString(&u.Name, defaultUpstreamNamePrefix+strconv.Itoa(i))
		setString(&u.APIKeyMode, DefaultAPIKeyMode)
		setDuration(&u.ConnectTimeout, DefaultConnectTimeout)
		setDuration(&u.FirstByteTimeout, DefaultFirstByteTimeout)
		setDuration(&u.IdleTimeout, DefaultIdleTimeout)
	}

	for i := range c.MCPServers {
		m := &c.MCPServers[i]
		setDuration(&m.ConnectTimeout, DefaultConnectTimeout)
		setDuration(&m.IdleTimeout, DefaultMCPIdleTimeout)
		if m.MaxStreams == 0 {
			m.MaxStreams = DefaultMCPMaxStreams
		}
	}
	c.Catalog.setMCPDefaults()
	setDuration(&c.Catalog.MCP.ConfirmTimeout, DefaultMCPConfirmTimeout)

	setString(&c.Catalog.Mode, CatalogIntersect)
	setString(&c.Catalog.Unlisted, UnlistedAllow)
	setString(&c.Catalog.Formats, FormatsAssert)
	setString(&c.Catalog.Strict, StrictOff)
	c.Catalog.Results.setDefaults()
	for i := range c.Catalog.Tools {
		c.Catalog.Tools[i].setDefaults()
	}

	for i := range c.Validators {
		v := &c.Validators[i]
		setDuration(&v.Timeout, DefaultValidatorTimeout)
		if v.Tools == nil {
			v.Tools = []string{"*"}
		}
		setString(&v.FailurePolicy, FailurePolicyFail)
	}

	setString(&c.Recovery.Strategy, StrategyDecision)
	setInt(&c.Recovery.MaxAttempts, DefaultMaxAttempts)
	if c.Recovery.ConfidenceThreshold == nil {
		v := DefaultConfidence
		c.Recovery.ConfidenceThreshold = &v
	}
	setInt(&c.Recovery.Shortlist, DefaultShortlist)
	setDuration(&c.Recovery.Deadline, DefaultRecoveryDeadline)
	setInt(&c.Reprompt.MaxAttempts, DefaultMaxAttempts)

	setString(&c.Abstain.ToolName, DefaultAbstainToolName)
	setString(&c.Truncated, TruncatedEscalate)
	setString(&c.Escalation.Mode, EscalationError)
	if c.Escalation.ReplayWindow == nil {
		w := Duration(DefaultReplayWindow)
		c.Escalation.ReplayWindow = &w
	}

	if c.Limits.MaxRequestBytes == 0 {
		c.Limits.MaxRequestBytes = DefaultMaxBodyBytes
	}
	if c.Limits.MaxResponseBytes == 0 {
		c.Limits.MaxResponseBytes = DefaultMaxBodyBytes
	}
	setString(&c.Approvals.Store, DefaultApprovalsStore)
	setDuration(&c.Approvals.TTL, DefaultApprovalsTTL)
	setString(&c.Approvals.NotifyFormat, NotifyJSON)

	setString(&c.Tracing.Protocol, TracingHTTP)
	if c.Tracing.SampleRatio == nil {
		v := 1.0
		c.Tracing.SampleRatio = &v
	}
	setString(&c.Log.Level, DefaultLogLevel)
	setString(&c.Log.Format, DefaultLogFormat)
	setDuration(&c.Shutdown.Grace, DefaultShutdownGrace)
}

// setDefaults fills a tool's policy, approver and substitutability. Only a
// confirm tool gets an approver, so one written on another tool stays
// visible to Validate. A confirm tool is not substitutable by default:
// mapping an invented call onto an irreversible action is exactly what an
// operator would not expect.
func (t *ToolConfig) setDefaults() {
	setString(&t.Policy, PolicyExecute)
	if t.Policy == PolicyConfirm {
		setString(&t.Approver, ApproverOperator)
	}
	if t.Substitutable == nil {
		v := t.Policy != PolicyConfirm
		t.Substitutable = &v
	}
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setDuration(p *Duration, v time.Duration) {
	if *p == 0 {
		*p = Duration(v)
	}
}

func setInt(p **int, v int) {
	if *p == nil {
		*p = &v
	}
}
