package proxy

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/exchange"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
	"go.uber.org/zap"
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
		Local:          &validate.Context{Effective: c.Set.Eff, Values: pipeline.ContextValues(ctx)},
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
	res, _ := recovery.Run(ctx, &recovery.Input{Turn: turn, Judge: j.Batch, Effective: c.Set.Eff, Settings: &settings})
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
func (p *mcpPipeline) Done(ctx context.Context, d *mcp.RequestReport) {
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

// JudgesResults says whether an MCP server's tool results are judged.
func (p *mcpPipeline) JudgesResults() bool {
	return pipeline.JudgesResults(p.rt.Snap, p.rt.Validators)
}

// Result judges an MCP server's tool result on its way to the client
// (docs/results.md): its text content and structuredContent.
func (p *mcpPipeline) Result(ctx context.Context, r *mcp.ToolResult) []byte {
	res, err := jsonx.SplitObject(r.Result)
	if err != nil {
		return nil
	}
	c := pipeline.ResultCheck{ID: r.ID, Tool: r.Tool, Text: mcpText(res.Get("content")), Raw: r.Result, Size: len(r.Result),
		Structured: res.Get("structuredContent"), IsError: string(res.Get("isError")) == "true"}
	j := pipeline.NewResultJudge(p.rt.Snap, p.rt.Validators, r.Server, "", nil)
	v := j.Judge(ctx, &c)
	var out []byte
	if v.Label == pipeline.ResultRedacted {
		if off, ok := pipeline.Locate(r.Message, r.Result, 0); ok {
			out = jsonx.Splice(r.Message, []jsonx.Edit{{Start: off, End: off + len(r.Result), Text: v.Raw}})
		} else {
			v = pipeline.Unreplaced()
		}
	}
	p.s.metrics.ToolResults.WithLabelValues("mcp", v.Label).Inc()
	if v.Refused() {
		p.s.recorder.RecordResult(&pipeline.Facts{API: pipeline.APIMCP, CatalogVersion: p.rt.Snap.Version, Server: r.Server}, r.ID, r.Tool, v)
		out = jsonrpc.RefusedResult(r.Message, r.Tool, string(v.Code()), v.Why, r.Meta)
	}
	return out
}

// mcpText joins a result's text content blocks, as the model reads them.
func mcpText(content []byte) string {
	items, err := jsonx.SplitArray(content)
	if err != nil {
		return ""
	}
	var parts []string
	for _, it := range items {
		obj, err := jsonx.SplitObject(it)
		if err != nil {
			continue
		}
		if t, _ := jsonx.Unquote(obj.Get("type")); t != "text" {
			continue
		}
		if s, ok := jsonx.Unquote(obj.Get("text")); ok {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// Drift counts a drifted MCP tool definition, logs it and hands it to the
// sinks. The route reports each definition once per action, so the log
// line is written once per definition.
func (p *mcpPipeline) Drift(_ context.Context, d *mcp.DriftReport) { p.s.drift(d) }

func (s *Server) drift(d *mcp.DriftReport) {
	s.metrics.ToolDrift.WithLabelValues(d.Server, d.Tool, d.Action).Inc()
	s.log.Warn("mcp tool definition drifted from its pin",
		zap.String("mcp_server", d.Server), zap.String("tool", d.Tool), zap.String("action", d.Action),
		zap.String("pinned_digest", d.PinnedDigest), zap.String("digest", d.Digest), zap.String("by", d.By))
	s.recorder.Sink.Record(&pipeline.EscalationRecord{Time: time.Now().UTC(), API: pipeline.APIMCP, Server: d.Server, Drift: d})
}

// PinDecided reports a person's decision on a held drift: an accepted
// definition is counted, logged and recorded as the others are; a
// rejected one stays counted as held.
func (s *Server) PinDecided(d approval.Drift) {
	if d.State == approval.DriftRejected {
		s.log.Info("mcp drifted tool definition rejected", zap.String("mcp_server", d.Server), zap.String("tool", d.Tool),
			zap.String("digest", d.Digest), zap.String("by", d.DecidedBy))
		return
	}
	s.drift(&mcp.DriftReport{Server: d.Server, Tool: d.Tool, Action: mcp.DriftAccepted, PinnedDigest: d.PinnedDigest,
		Digest: d.Digest, Diff: d.Diff, By: d.DecidedBy})
}
