package pipeline

import (
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/observe"
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
	Drift *mcp.DriftReport `json:"drift,omitempty"`
}

// Sink receives every escalation (docs/escalations.md). Implementations
// must not block.
type Sink interface {
	Record(rec *EscalationRecord)
}

// APIMCP is the api label of an MCP route's requests, calls and records.
const APIMCP = "mcp"

// Recorder keeps the books of every route, model and MCP alike: it counts
// judged calls and the ladder's steps, records escalations (the metric,
// the log line, the sinks) and writes each request's one log line. The
// same finding is counted and recorded the same way whichever route met
// it.
type Recorder struct {
	Log     *zap.Logger
	Metrics *observe.Metrics
	Sink    Sink
}

// Facts are what the pipeline knows of the request a judged call came
// in: what counting its calls and recording its escalations adds to the
// ladder's results.
type Facts struct {
	API, Model, RequestID, CatalogVersion string
	// UpstreamIDs are the request ids the upstream gave its calls.
	UpstreamIDs []string
	// Server and Session say where an MCP call was refused; the session
	// is a hash of its id.
	Server, Session string
	// CallJSON writes an escalated call as the API spells it.
	CallJSON func(neutral.ToolCall) []byte
	// AbstainTool is the abstain exit's name when it was offered.
	AbstainTool string
	// Tools labels calls in the metrics.
	Tools ToolLabeler
}

// ToolLabeler names a call's tool in the metrics. An interface, not two
// func fields: a model route's exchange is one itself, so counting its
// answer allocates nothing for it.
type ToolLabeler interface {
	// ToolLabel is the bounded tool label of a call.
	ToolLabel(name string, rep validate.CallReport) string
	// StrictMarked reports a tool sent with the provider's strict flag.
	StrictMarked(name string) bool
}

// Record completes r's escalation with the request's facts, counts it,
// logs it and hands it to the sinks: the one place an escalation is
// recorded, for every API and MCP. It returns the escalation as the
// codecs write it.
func (rc *Recorder) Record(at *Facts, r *recovery.Result) *neutral.Escalated {
	e := r.Escalation
	e.CatalogVersion = at.CatalogVersion
	e.RequestID = at.RequestID
	e.UpstreamRequestIDs = append([]string{}, at.UpstreamIDs...)
	if e.CallIndex >= 0 && e.CallIndex < len(r.Calls) {
		e.Call = at.CallJSON(r.Calls[e.CallIndex])
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
	rc.Metrics.Escalations.WithLabelValues(e.CatalogVersion, e.Label).Inc()
	rc.Sink.Record(&EscalationRecord{Time: e.Time, API: at.API, Model: at.Model, Escalation: e,
		Server: at.Server, Session: at.Session})
	fields := []zap.Field{
		zap.String("request_id", at.RequestID),
		zap.String("escalation_id", e.ID),
		zap.String("reason", e.Label),
		zap.Strings("codes", e.Codes),
		zap.String("catalog_version", e.CatalogVersion),
	}
	if at.Server != "" {
		fields = append(fields, zap.String("mcp_server", at.Server), zap.String("session", at.Session))
	}
	rc.Log.Info("escalation", fields...)
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

// Count counts judged calls and the ladder's steps, for the model routes
// and MCP alike, and appends every finding code to findings for the log
// line. Only the original answer's calls are counted, so the
// hallucination rate is per model answer, not inflated by repairs.
func (rc *Recorder) Count(at *Facts, results []*recovery.Result, findings []string) []string {
	m := rc.Metrics
	for _, r := range results {
		for i, rep := range r.Reports {
			orig := r.Original[i]
			if orig.Kind == validate.Other || (at.AbstainTool != "" && orig.Name == at.AbstainTool) {
				// Built-in and server tools are not judged, and the abstain
				// exit is toolgate's own tool: neither is a model's tool call.
				continue
			}
			result := rc.callResult(at.RequestID, rep)
			for _, f := range rep.Findings {
				findings = append(findings, string(f.Code))
			}
			m.ToolCalls.WithLabelValues(at.API, at.CatalogVersion, at.Tools.ToolLabel(orig.Name, rep), result).Inc()
			if at.Tools.StrictMarked(orig.Name) {
				m.StrictCalls.WithLabelValues(at.API, result).Inc()
			}
			rc.countUnvalidated(at.RequestID, rep)
			if result == string(validate.UnknownTool) {
				m.Hallucinations.WithLabelValues(at.API, at.CatalogVersion).Inc()
			}
		}
		rc.countSteps(at, r.Events)
	}
	return findings
}

// callResult is the toolgate_tool_calls_total result of one call.
func (rc *Recorder) callResult(rid string, rep validate.CallReport) string {
	result := "valid"
	switch {
	case rep.Stripped && rep.Valid():
		result = "prefix_stripped"
		rc.Log.Info("tool name prefix stripped",
			zap.String("request_id", rid),
			zap.String("tool", rep.Tool.Name))
	case !rep.Valid():
		for _, f := range rep.Findings {
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
	for _, f := range rep.Findings {
		if f.Code == validate.ProvenanceUnverifiable && result == "valid" {
			result = string(validate.ProvenanceUnverifiable)
		}
	}
	return result
}

// countSteps counts and logs the ladder's re-queries.
func (rc *Recorder) countSteps(at *Facts, events []recovery.Event) {
	m := rc.Metrics
	for _, ev := range events {
		if ev.Result != "" {
			m.Recoveries.WithLabelValues(at.CatalogVersion, ev.Strategy, ev.Result).Inc()
		}
		if ev.Confidence >= 0 {
			m.RecoveryConf.Observe(ev.Confidence)
		}
		rc.Log.Info("recovery attempt",
			zap.String("request_id", at.RequestID),
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

// countUnvalidated counts a call whose arguments were not judged in full.
// An uncompilable request schema is logged once per schema, not on every
// request that offers it: agents resend the same tools with every turn.
func (rc *Recorder) countUnvalidated(rid string, rep validate.CallReport) {
	if rep.Unvalidated == "" {
		return
	}
	rc.Metrics.CountUnvalidated(string(rep.Unvalidated))
	if rep.Unvalidated != validate.SchemaUncompilable || rep.Tool == nil {
		return
	}
	if hash, first := rep.Tool.ReportSchemaError(); first {
		rc.Log.Warn("request tool schema does not compile; its calls pass with only their object shape checked",
			zap.String("request_id", rid),
			zap.String("tool", rep.Tool.Name),
			zap.String("schema_sha256", hash),
			zap.Error(rep.Tool.SchemaError))
	}
}

// RequestLine is the one `request` log line of a request, whatever its
// route: a model API's or an MCP server's.
type RequestLine struct {
	RequestID, API, Route string
	// Model is the model a model route's request named; Server the MCP
	// server of an MCP route's. A line has one or the other.
	Model, Server      string
	Status             int
	Outcome            string
	Findings           []string
	Calls              int
	Duration, Overhead time.Duration
	Trace              []zap.Field
}

// LogRequest writes l, for a model route and an MCP route alike. Checked
// first: at log.level warn or above the fields and the slice holding them
// are not built at all.
func (rc *Recorder) LogRequest(l *RequestLine) {
	ce := rc.Log.Check(zap.InfoLevel, "request")
	if ce == nil {
		return
	}
	which := zap.String("model", l.Model)
	if l.Server != "" {
		which = zap.String("mcp_server", l.Server)
	}
	ce.Write(append([]zap.Field{
		zap.String("request_id", l.RequestID),
		zap.String("api", l.API),
		zap.String("route", l.Route),
		which,
		zap.Int("status", l.Status),
		zap.String("outcome", l.Outcome),
		zap.Strings("findings", l.Findings),
		zap.Int("upstream_calls", l.Calls),
		zap.Duration("duration", l.Duration),
		zap.Duration("overhead", l.Overhead),
	}, l.Trace...)...)
}
