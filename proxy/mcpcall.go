package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/mcp"
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

// judged is what Judge keeps of a call for Unconfirmed.
type judged struct {
	res  *recovery.Result
	site *site
}

// Judge runs the call through the ladder and decides what the route does.
func (p *mcpPipeline) Judge(ctx context.Context, c *mcp.Call) mcp.Decision {
	j := &judge.Judge{
		Local:          &validate.Context{Eff: c.Set.Eff, Values: contextValues(ctx)},
		Validators:     p.rt.validators,
		RequestID:      c.RequestID,
		CatalogVersion: c.Set.Version,
		Server:         c.Server,
		Extra:          func(call validate.ToolCall, v *validate.Verdict) { serverChecks(call, v, c.Set) },
	}
	// An MCP request has no shadow mode, abstain exit or token limit:
	// the ladder's other settings do not apply to it.
	settings := recovery.Settings{}
	res, _ := recovery.Run(ctx, &recovery.Input{
		Turn:     &neutral.Turn{Calls: []neutral.ToolCall{c.Call}},
		Judge:    j.Batch,
		Eff:      c.Set.Eff,
		Settings: &settings,
	})
	at := &site{api: apiMCP, rid: c.RequestID, version: c.Set.Version, server: c.Server, session: c.Session,
		callJSON: mcpCallJSON}
	labels := func(name string, v validate.Verdict) string {
		if l, ok := c.Set.Labels[name]; ok && v.Tool != nil {
			return l
		}
		return "_unknown"
	}
	noted := p.s.count(&tally{api: apiMCP, version: c.Set.Version, rid: c.RequestID, label: labels}, []*recovery.Result{res})
	d := mcp.Decision{Noted: noted, State: &judged{res: res, site: at}}
	v := res.Verdicts[0]
	switch {
	case res.Escalation == nil:
		d.Verdict = mcp.Forward
	case v.Tool != nil && v.Valid():
		// The ladder's last rung: a valid call that needs a person.
		d.Verdict = mcp.Confirm
		d.CallerApproves = v.Tool.Approver == catalog.ApproverCaller
	case v.Tool == nil:
		d.Verdict = mcp.UnknownTool
	default:
		d.Verdict = mcp.Refuse
	}
	return d
}

// Record records the ladder's escalation of a refused call, or of a
// confirm call with the reason no person said yes.
func (p *mcpPipeline) Record(d *mcp.Decision, why string) *neutral.Escalated {
	j := d.State.(*judged)
	fs := j.res.Verdicts[0].Findings
	if why != "" {
		j.res.Escalation.Reason = why
		fs = []validate.Finding{validate.NeedsConfirmation(why)}
	}
	// MCP records the call whole, as its params spell it.
	j.res.Escalation.CallIndex = 0
	e := p.s.record(j.site, j.res)
	e.Findings = neutralFindings(fs)
	return e
}

// Output checks a tool result against the tool's outputSchema.
func (p *mcpPipeline) Output(o *mcp.Output) []neutral.Finding {
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
	if len(fs) > 0 {
		p.s.metrics.MCPOutput.WithLabelValues(o.Version, o.Label).Inc()
	}
	return neutralFindings(fs)
}

// Done counts the request and writes its one log line, as report does for
// a model route.
func (p *mcpPipeline) Done(ctx context.Context, d *mcp.Done) {
	overhead := time.Since(d.Start) - d.Upstream
	observe(ctx, p.s.metrics.AddedLatency.WithLabelValues(apiMCP), max(overhead, 0).Seconds())
	p.s.metrics.Requests.WithLabelValues(apiMCP, d.Outcome).Inc()
	ce := p.s.log.Check(zap.InfoLevel, "request")
	if ce == nil {
		return
	}
	ce.Write(
		zap.String("request_id", d.RequestID),
		zap.String("api", apiMCP),
		zap.String("route", d.Route),
		zap.String("mcp_server", d.Server),
		zap.Int("status", d.Status),
		zap.String("outcome", d.Outcome),
		zap.Strings("findings", d.Findings),
		zap.Duration("duration", time.Since(d.Start)),
		zap.Duration("overhead", max(overhead, 0)),
	)
}

const apiMCP = "mcp"

// serverChecks are the local checks only an MCP server's tool set has: a
// tool the catalog hides, and the server's own inputSchema.
func serverChecks(call validate.ToolCall, v *validate.Verdict, set *catalog.MCPSet) {
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

// mcpCallJSON is a call as MCP's tools/call params spell it.
func mcpCallJSON(c neutral.ToolCall) []byte {
	b, _ := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}{c.Name, objectOrNil(c.Args)})
	return b
}

func objectOrNil(b []byte) json.RawMessage {
	t := strings.TrimSpace(string(b))
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return nil
}
