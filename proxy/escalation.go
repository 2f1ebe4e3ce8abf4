package proxy

import (
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// EscalationRecord is what sinks receive: the escalation and where it
// happened. Sinks redact it before writing; nothing here holds a secret.
type EscalationRecord struct {
	Time       time.Time            `json:"time"`
	API        string               `json:"api"`
	Model      string               `json:"model"`
	Escalation *recovery.Escalation `json:"escalation,omitempty"`
	// Approval, instead of an escalation, is an approval's state change
	// (docs/approvals.md): who, when, for which escalation and call.
	Approval *approval.Event `json:"approval,omitempty"`
	// Server and Session say where an MCP call was refused; the session
	// is a hash of its id.
	Server  string `json:"server,omitempty"`
	Session string `json:"session,omitempty"`
	// Drift, instead of an escalation, is an MCP tool definition unlike
	// its pin (docs/pins.md, "Drift"): both digests and the diff.
	Drift *mcp.Drift `json:"drift,omitempty"`
}

// site is where an escalation happened: the facts the pipeline adds to
// the ladder's escalation before it is counted and recorded, the same for
// a model route and an MCP server.
type site struct {
	api     string
	model   string
	rid     string
	version string
	upIDs   []string
	// server and session say where an MCP call was refused; the session
	// is a hash of its id.
	server, session string
	// callJSON writes the escalated call as the API spells it.
	callJSON func(neutral.ToolCall) []byte
}

// escalated completes the ladder's escalation with request facts, counts
// it and hands it to the sinks.
func (x *exchange) escalated(r *recovery.Result) *neutral.Escalated {
	model := ""
	if x.req != nil {
		model = x.req.Model
	}
	return x.s.record(&site{api: x.api.Name(), model: model, rid: x.rid, version: x.rt.snap.Version,
		upIDs: x.upIDs, callJSON: x.cd.CallJSON}, r)
}

// record completes r's escalation with the site's facts, counts it, logs
// it and hands it to the sinks: the one place an escalation is recorded,
// for every API and MCP.
func (s *Server) record(at *site, r *recovery.Result) *neutral.Escalated {
	e := r.Escalation
	e.CatalogVersion = at.version
	e.RequestID = at.rid
	e.UpstreamRequestIDs = append([]string{}, at.upIDs...)
	if e.CallIndex >= 0 && e.CallIndex < len(r.Calls) {
		e.Call = at.callJSON(r.Calls[e.CallIndex])
	}
	if e.Attempts == nil {
		e.Attempts = []recovery.Attempt{}
	}
	body, err := jsonx.Marshal(e)
	if err != nil {
		// Every field is a plain type; this cannot fail, but an escalation
		// must never be lost to it.
		body = []byte(`{"id":` + string(jsonx.String(e.ID)) + `}`)
	}
	s.metrics.Escalations.WithLabelValues(e.CatalogVersion, e.Label).Inc()
	s.sink.Record(&EscalationRecord{Time: e.Time, API: at.api, Model: at.model, Escalation: e,
		Server: at.server, Session: at.session})
	fields := []zap.Field{
		zap.String("request_id", at.rid),
		zap.String("escalation_id", e.ID),
		zap.String("reason", e.Label),
		zap.Strings("codes", e.Codes),
		zap.String("catalog_version", e.CatalogVersion),
	}
	if at.server != "" {
		fields = append(fields, zap.String("mcp_server", at.server), zap.String("session", at.session))
	}
	s.log.Info("escalation", fields...)
	return &neutral.Escalated{ID: e.ID, Code: e.Code(), Text: userText(e), Body: body,
		Codes: e.Codes, CatalogVersion: e.CatalogVersion}
}

// userText is the sentence a person reads in message mode, and the error
// message in error mode.
func userText(e *recovery.Escalation) string {
	reason := e.Reason
	if reason == "" {
		reason = "a tool call could not be validated"
	}
	return "This step needs a person: " + reason + ". [toolgate:" + e.ID + "]"
}

// account counts the answer's calls and the ladder's steps.
func (x *exchange) account(results []*recovery.Result) {
	t := &tally{api: x.api.Name(), version: x.rt.snap.Version, rid: x.rid, abstain: x.settings.AbstainTool, tools: x}
	x.out.findings = x.s.count(t, results, x.out.findings)
}

// tally is what counting one request's calls needs to know of it.
type tally struct {
	api, version, rid string
	// abstain is the abstain exit's name when it was offered.
	abstain string
	tools   toolLabeler
}

// toolLabeler names a call's tool in the metrics. An interface, not two
// func fields: the exchange itself is one, so counting a model's answer
// allocates nothing for it.
type toolLabeler interface {
	// toolLabel is the bounded tool label of a call.
	toolLabel(name string, v validate.CallReport) string
	// strictMarked reports a tool sent with the provider's strict flag.
	strictMarked(name string) bool
}

// count counts judged calls and the ladder's steps, for the model routes
// and MCP alike, and appends every finding code to findings for the log
// line. Only the original answer's calls are counted, so the
// hallucination rate is per model answer, not inflated by repairs.
func (s *Server) count(t *tally, results []*recovery.Result, findings []string) []string {
	m := s.metrics
	for _, r := range results {
		for i, v := range r.Reports {
			orig := r.Original[i]
			if orig.Kind == validate.Other || (t.abstain != "" && orig.Name == t.abstain) {
				// Built-in and server tools are not judged, and the abstain
				// exit is toolgate's own tool: neither is a model's tool call.
				continue
			}
			result := s.callResult(t.rid, v)
			for _, f := range v.Findings {
				findings = append(findings, string(f.Code))
			}
			m.ToolCalls.WithLabelValues(t.api, t.version, t.tools.toolLabel(orig.Name, v), result).Inc()
			if t.tools.strictMarked(orig.Name) {
				m.StrictCalls.WithLabelValues(t.api, result).Inc()
			}
			s.accountUnvalidated(t.rid, v)
			if result == string(validate.UnknownTool) {
				m.Hallucinations.WithLabelValues(t.api, t.version).Inc()
			}
		}
		s.countSteps(t, r.Events)
	}
	return findings
}

// callResult is the toolgate_tool_calls_total result of one verdict.
func (s *Server) callResult(rid string, v validate.CallReport) string {
	result := "valid"
	switch {
	case v.Stripped && v.Valid():
		result = "prefix_stripped"
		s.log.Info("tool name prefix stripped",
			zap.String("request_id", rid),
			zap.String("tool", v.Tool.Name))
	case !v.Valid():
		for _, f := range v.Findings {
			if f.Blocking() && result == "valid" {
				result = string(f.Code)
			}
			if f.Code == validate.Truncated {
				// A cut-off call is the token limit's doing, not a
				// malformed call by the model.
				return string(validate.Truncated)
			}
		}
	}
	for _, f := range v.Findings {
		if f.Code == validate.ProvenanceUnverifiable && result == "valid" {
			result = string(validate.ProvenanceUnverifiable)
		}
	}
	return result
}

// countSteps counts and logs the ladder's re-queries.
func (s *Server) countSteps(t *tally, events []recovery.Event) {
	m := s.metrics
	for _, ev := range events {
		if ev.Result != "" {
			m.Recoveries.WithLabelValues(t.version, ev.Strategy, ev.Result).Inc()
		}
		if ev.Confidence >= 0 {
			m.RecoveryConf.Observe(ev.Confidence)
		}
		s.log.Info("recovery attempt",
			zap.String("request_id", t.rid),
			zap.String("strategy", ev.Strategy),
			zap.String("hallucinated_name", ev.Name),
			zap.Int("arguments_bytes", ev.ArgsBytes),
			zap.String("suggested_tool", ev.Suggested),
			zap.Float64("confidence", ev.Confidence),
			zap.String("result", ev.Result),
			zap.Duration("duration", ev.Duration),
		)
	}
}

// toolLabel bounds the tool label: a catalog name, _request for a tool only
// the request declared, _unknown for anything else.
func (x *exchange) toolLabel(name string, v validate.CallReport) string {
	if v.Tool == nil {
		if _, ok := x.rt.snap.Tools[name]; ok {
			return name
		}
		return "_unknown"
	}
	if v.Tool.FromRequest {
		return "_request"
	}
	return v.Tool.Name
}

// accountUnvalidated counts a call whose arguments were not judged in full.
// An uncompilable request schema is logged once per schema, not on every
// request that offers it: agents resend the same tools with every turn.
func (s *Server) accountUnvalidated(rid string, v validate.CallReport) {
	if v.Unvalidated == "" {
		return
	}
	s.metrics.CountUnvalidated(string(v.Unvalidated))
	if v.Unvalidated != validate.SchemaUncompilable || v.Tool == nil {
		return
	}
	if hash, first := v.Tool.ReportSchemaError(); first {
		s.log.Warn("request tool schema does not compile; its calls pass with only their object shape checked",
			zap.String("request_id", rid),
			zap.String("tool", v.Tool.Name),
			zap.String("schema_sha256", hash),
			zap.Error(v.Tool.SchemaError))
	}
}
