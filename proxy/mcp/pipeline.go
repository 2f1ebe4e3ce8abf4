package mcp

import (
	"context"
	"net/http"
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
	// Judge decides one tools/call before the server sees it, and
	// records the escalation of a refused one.
	Judge(ctx context.Context, c *Call) Ruling
	// Output judges a tool result against the tool's outputSchema,
	// counting a violation. It returns the message to send instead, or
	// nil when the result passes, and the findings.
	Output(o *Output) ([]byte, []neutral.Finding)
	// JudgesResults says whether tool results are judged under the
	// snapshot (docs/results.md); when not, a result is not read for it.
	JudgesResults() bool
	// Result judges a tool result before the client's model reads it:
	// nil when it passes unchanged, else the message to send instead (the
	// result with its credentials replaced, or an error result naming the
	// finding).
	Result(ctx context.Context, r *ToolResult) []byte
	// Write sends an answer the route gives whole: status, the server's
	// headers to pass on (nil: the body is toolgate's own JSON), body.
	Write(w http.ResponseWriter, status int, upstream http.Header, body []byte)
	// Done counts one MCP request and writes its log line.
	Done(ctx context.Context, r *RequestReport)
	// Drift counts, logs and records a tool definition unlike its pin.
	Drift(ctx context.Context, d *DriftReport)
}

// Call is one tools/call on its way to the pipeline.
type Call struct {
	RequestID string
	Server    string
	// Session is a hash of the session id, never the id itself.
	Session string
	Set     *catalog.MCPSet
	// Message is the tools/call exactly as the client sent it.
	Message []byte
	// ID, Name, Args and Task are the call as the route read it: its
	// JSON-RPC id, the tool, the arguments ({} when absent) and whether
	// it runs as a task, so the pipeline does not read the message again.
	ID   []byte
	Name string
	Args []byte
	Task bool
}

// Disposition is what the pipeline made of a tools/call.
type Disposition uint8

// Dispositions.
const (
	// Forward: every check passed; the server may run the call.
	Forward Disposition = iota
	// Refuse: the call breaks a check.
	Refuse
	// UnknownTool: a refusal whose tool the server does not have.
	UnknownTool
	// Confirm: a valid call to a policy: confirm tool, which runs only
	// after a person's yes.
	Confirm
)

// Ruling is the pipeline's answer on one tools/call.
type Ruling struct {
	Disposition Disposition
	// Escalation is the recorded escalation of a refused call (Refuse,
	// UnknownTool): its id, its findings and, for UnknownTool, the tools
	// the server has. The route answers the client with it.
	Escalation *neutral.Escalated
	// Noted are every finding code of the call, for the log line.
	Noted []string
	// CallerApproves is set when the confirm tool's approver is the
	// caller rather than an operator.
	CallerApproves bool
	// Decline records the escalation of a Confirm call no person said
	// yes to, refused or held for an approval, with why as its reason,
	// and returns it for the route to add its advice and approval to.
	Decline func(why string) *neutral.Escalated
}

// Output is a tool result to check against the tool's outputSchema.
type Output struct {
	Schema *catalog.MCPSchema
	// Message is the server's response; Tool the called tool's name.
	Message []byte
	Tool    string
	// Structured is the result's structuredContent, nil when absent, and
	// Meta the result's _meta, which a replacement keeps.
	Structured, Meta []byte
	// Version and Label say where a violation is counted.
	Version, Label string
}

// ToolResult is a tool result to judge before the client's model reads it.
type ToolResult struct {
	// Message is the server's response, Result its result object (a slice
	// of Message), Meta the result's _meta.
	Message, Result, Meta []byte
	// ID is the response's id; Server and Tool name the called tool.
	ID, Server, Tool string
}

// RequestReport is one MCP request as the pipeline reports it.
type RequestReport struct {
	RequestID string
	Route     string
	Server    string
	Status    int
	Outcome   string
	Findings  []string
	Start     time.Time
	// Upstream is the time spent waiting on the server, Calls the
	// requests sent to it (toolgate's own tools/list reads included).
	Upstream time.Duration
	Calls    int
}
