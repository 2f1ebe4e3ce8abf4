package proxy

import (
	"context"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/exchange"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// mcpPipeline is the pipeline as an MCP route drives it: a tools/call is
// one answer of one call, judged by the same ladder as a model's, with
// nobody to ask again (the client reads the refusal's findings and its
// model may call again), then counted and recorded like any other.
type mcpPipeline struct {
	s  *Server
	rt *runtime
}

var _ mcp.Pipeline = (*mcpPipeline)(nil)

// Judge runs the call through the ladder and decides what the route does,
// with a refusal's escalation recorded.
func (p *mcpPipeline) Judge(ctx context.Context, c *mcp.Call) mcp.Ruling {
	j := &judge.Judge{
		Local:          &validate.Context{Eff: c.Set.Eff, Values: pipeline.ContextValues(ctx)},
		Validators:     p.rt.Validators,
		RequestID:      c.RequestID,
		CatalogVersion: c.Set.Version,
		Server:         c.Server,
		Extra:          func(call validate.ToolCall, v *validate.CallReport) { serverChecks(call, v, c.Set) },
	}
	// The route read the call: it is the one call of one turn.
	turn := &neutral.Turn{Calls: []neutral.ToolCall{{ID: string(c.ID), Name: c.Name, Args: c.Args, Kind: neutral.Function}}, Stop: neutral.StopToolCalls}
	// An MCP request has no shadow mode, abstain exit or token limit,
	// and nobody to ask again: the ladder's other settings do not apply.
	settings := recovery.Settings{}
	res, _ := recovery.Run(ctx, &recovery.Input{Turn: turn, Judge: j.Batch, Eff: c.Set.Eff, Settings: &settings})
	at := &pipeline.Facts{API: pipeline.APIMCP, RequestID: c.RequestID, CatalogVersion: c.Set.Version, Server: c.Server,
		Session: c.Session, Tools: mcpTools{c.Set},
		CallJSON: func(call neutral.ToolCall) []byte { return jsonrpc.CallJSON(call.Name, call.Args) }}
	noted := p.s.recorder.Count(at, []*recovery.Result{res}, nil)
	d := mcp.Ruling{Noted: noted}
	// The same decide as a model's answer: an MCP refusal always answers
	// in place of the call, and a confirm call waits for a person.
	v := pipeline.Decide([]*recovery.Result{res}, pipeline.Policy{ErrorMode: true, Hold: pipeline.ConfirmOnly([]*recovery.Result{res})})
	tool := res.Reports[0].Tool
	switch {
	case len(v.Escalating()) == 0:
		d.Disposition = mcp.Forward
		return d
	case v.Held() != nil:
		d.Disposition = mcp.Confirm
		d.CallerApproves = tool.Approver == catalog.ApproverCaller
		d.Decline = func(why string) *neutral.Escalated {
			res.Escalation.Reason = why
			return p.record(at, res, []validate.Finding{validate.NeedsConfirmation(why)})
		}
		return d
	}
	d.Escalation = p.record(at, res, res.Reports[0].Findings)
	d.Disposition = mcp.Refuse
	if tool == nil {
		d.Disposition = mcp.UnknownTool
		d.Escalation.Available = append([]string{}, c.Set.Visible...)
	}
	return d
}

// record records the ladder's escalation of the call, whose refusal
// lists fs.
func (p *mcpPipeline) record(at *pipeline.Facts, res *recovery.Result, fs []validate.Finding) *neutral.Escalated {
	// MCP records the call whole, as its params spell it.
	res.Escalation.CallIndex = 0
	e := p.s.recorder.Record(at, res)
	e.Findings = neutralFindings(fs)
	return e
}

// Output checks a tool result against the tool's outputSchema.
func (p *mcpPipeline) Output(o *mcp.Output) ([]byte, []neutral.Finding) {
	var fs []validate.Finding
	switch {
	case o.Schema.Err != nil:
		msg := "the tool's outputSchema could not be compiled, so the result cannot be checked"
		fs = []validate.Finding{validate.SchemaError("", "outputSchema", msg, msg+": "+o.Schema.Err.Error())}
	case o.Structured == nil:
		msg := "structuredContent is missing, but the tool declares an outputSchema"
		fs = []validate.Finding{validate.SchemaError("", "outputSchema", msg, msg)}
	default:
		fs = validate.CheckJSON(o.Schema.Schema, o.Structured, "structuredContent")
	}
	if len(fs) == 0 {
		return nil, nil
	}
	p.s.metrics.MCPOutput.WithLabelValues(o.Version, o.Label).Inc()
	nf := neutralFindings(fs)
	return jsonrpc.Withheld(o.Message, o.Tool, nf, o.Meta), nf
}

// Write sends an answer the MCP route gives whole (its own messages, or
// the server's answer, changed or not) through the writer a model route's
// answers go through.
func (p *mcpPipeline) Write(w http.ResponseWriter, status int, upstream http.Header, body []byte) {
	rp := pipeline.Reply{Status: status, Upstream: upstream, Body: body}
	if upstream == nil && len(body) > 0 {
		// toolgate's own JSON-RPC messages; a server's answer keeps the
		// server's Content-Type.
		rp.ContentType = "application/json"
	}
	exchange.Send(w, &rp, nil)
}

// Done counts the request and writes its one log line, as report does for
// a model route.
func (p *mcpPipeline) Done(ctx context.Context, d *mcp.Done) {
	overhead := time.Since(d.Start) - d.Upstream
	observe.Record(ctx, p.s.metrics.AddedLatency.WithLabelValues(pipeline.APIMCP), max(overhead, 0).Seconds())
	p.s.metrics.Requests.WithLabelValues(pipeline.APIMCP, d.Outcome).Inc()
	p.s.recorder.LogRequest(&pipeline.RequestLine{RequestID: d.RequestID, API: pipeline.APIMCP, Route: d.Route, Server: d.Server, Status: d.Status, Outcome: d.Outcome,
		Findings: d.Findings, Calls: d.Calls, Duration: time.Since(d.Start), Overhead: max(overhead, 0), Trace: observe.TraceIDs(ctx)})
}

// mcpTools labels an MCP call's tool "server/tool", or _unknown.
type mcpTools struct{ set *catalog.MCPSet }

func (m mcpTools) ToolLabel(name string, v validate.CallReport) string {
	if l, ok := m.set.Labels[name]; ok && v.Tool != nil {
		return l
	}
	return "_unknown"
}

// StrictMarked implements pipeline.ToolLabeler: no provider decodes MCP
// calls.
func (mcpTools) StrictMarked(string) bool { return false }

// serverChecks are the local checks only an MCP server's tool set has: a
// tool the catalog hides, and the server's own inputSchema.
func serverChecks(call validate.ToolCall, v *validate.CallReport, set *catalog.MCPSet) {
	if v.Tool == nil && set.Hidden[call.Name] {
		v.Findings = []validate.Finding{validate.NotInCatalog(call.Name)}
	}
	if own := set.Input[call.Name]; own != nil && v.Tool != nil && v.Valid() {
		if own.Err != nil {
			msg := "the server's inputSchema could not be compiled, so the arguments cannot be checked"
			v.Findings = append(v.Findings, validate.SchemaError("", "", msg, msg+": "+own.Err.Error()))
		} else {
			v.Findings = append(v.Findings, validate.CheckJSON(own.Schema, call.Args, "arguments")...)
		}
	}
}

// neutralFindings are the findings a refusal lists: the blocking ones and
// provenance_unverifiable.
func neutralFindings(fs []validate.Finding) []neutral.Finding {
	out := make([]neutral.Finding, 0, len(fs))
	for _, f := range fs {
		if f.Blocking() || f.Code == validate.ProvenanceUnverifiable {
			out = append(out, neutral.Finding{Code: string(f.Code), Pointer: f.Pointer, Keyword: f.Keyword,
				Message: f.Message, Detail: f.Detail, Reason: f.Reason, Blocking: f.Blocking()})
		}
	}
	return out
}
