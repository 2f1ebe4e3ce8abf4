package mcp

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
)

// Pipeline is the one pipeline of package proxy, bound to one config
// snapshot. A tools/call is judged, counted and recorded there exactly as
// a model's tool call is: the same checks, the same ladder, the same
// metrics, escalation records and log line. This package only translates
// between JSON-RPC and those decisions, and keeps what is MCP's alone:
// sessions, server streams, elicitation and learned tool lists.
type Pipeline interface {
	// Judge decides one tools/call before the server sees it.
	Judge(ctx context.Context, c *Call) Decision
	// Record records the escalation of a call the route refuses: counted,
	// logged and sent to the sinks like a model's. why is the reason a
	// confirm call was refused or held for an approval ("" for the
	// others, whose findings are the reason).
	Record(d *Decision, why string) *neutral.Escalated
	// Output judges a tool result's structuredContent (nil when absent)
	// against the tool's outputSchema, counting a violation.
	Output(o *Output) []neutral.Finding
	// Done counts one MCP request and writes its log line.
	Done(ctx context.Context, r *Done)
}

// Call is one tools/call on its way to the pipeline.
type Call struct {
	RequestID string
	Server    string
	// Session is a hash of the session id, never the id itself.
	Session string
	Set     *catalog.MCPSet
	Call    neutral.ToolCall
}

// Verdict is what the pipeline made of a tools/call.
type Verdict uint8

// Verdicts.
const (
	// Forward: every check passed; the server may run the call.
	Forward Verdict = iota
	// Refuse: the call breaks a check.
	Refuse
	// UnknownTool: a refusal whose tool the server does not have.
	UnknownTool
	// Confirm: a valid call to a policy: confirm tool, which runs only
	// after a person's yes.
	Confirm
)

// Decision is the pipeline's answer on one tools/call.
type Decision struct {
	Verdict Verdict
	// Noted are every finding code of the call, for the log line.
	Noted []string
	// CallerApproves is set when the confirm tool's approver is the
	// caller rather than an operator.
	CallerApproves bool
	// State is the pipeline's own record of the judgement, handed back
	// to it by Record.
	State any
}

// Output is a tool result to check against the tool's outputSchema.
type Output struct {
	Schema *catalog.MCPSchema
	// Structured is the result's structuredContent, nil when absent.
	Structured []byte
	// Version and Label say where a violation is counted.
	Version, Label string
}

// Done is one MCP request as the pipeline reports it.
type Done struct {
	RequestID string
	Route     string
	Server    string
	Status    int
	Outcome   string
	Findings  []string
	Start     time.Time
	// Upstream is the time spent waiting on the server.
	Upstream time.Duration
}
