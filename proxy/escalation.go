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
	// (SPEC §5a): who, when, for which escalation and call.
	Approval *approval.Event `json:"approval,omitempty"`
	// Server and Session say where an MCP call was refused; the session
	// is a hash of its id.
	Server  string `json:"server,omitempty"`
	Session string `json:"session,omitempty"`
}

// mcpEscalation hands an MCP refusal to the sinks like any other.
func (s *Server) mcpEscalation(e *mcp.Escalation) {
	s.sink.Record(&EscalationRecord{Time: e.Escalation.Time, API: "mcp", Escalation: e.Escalation, Server: e.Server, Session: e.Session})
}

// escalated completes the ladder's escalation with request facts, counts
// it and hands it to the sinks.
func (x *exchange) escalated(r *recovery.Result) *neutral.Escalated {
	e := r.Escalation
	e.CatalogVersion = x.rt.snap.Version
	e.RequestID = x.rid
	e.UpstreamRequestIDs = append([]string{}, x.upIDs...)
	if e.CallIndex >= 0 && e.CallIndex < len(r.Calls) {
		e.Call = x.cd.CallJSON(r.Calls[e.CallIndex])
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
	x.s.metrics.Escalations.WithLabelValues(e.CatalogVersion, e.Label).Inc()
	model := ""
	if x.req != nil {
		model = x.req.Model
	}
	x.s.sink.Record(&EscalationRecord{Time: e.Time, API: x.api.Name(), Model: model, Escalation: e})
	x.s.log.Info("escalation",
		zap.String("request_id", x.rid),
		zap.String("escalation_id", e.ID),
		zap.String("reason", e.Label),
		zap.Strings("codes", e.Codes),
		zap.String("catalog_version", e.CatalogVersion),
	)
	return &neutral.Escalated{ID: e.ID, Code: e.Code(), Text: userText(e), Body: body}
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

// account counts the answer's calls and the ladder's steps. Only the
// original answer's calls are counted, so the hallucination rate is per
// model answer, not inflated by repairs.
func (x *exchange) account(results []*recovery.Result) {
	m := x.s.metrics
	version := x.rt.snap.Version
	api := x.api.Name()
	for _, r := range results {
		for i, v := range r.Verdicts {
			orig := r.Original[i]
			if orig.Kind == validate.Other || (x.settings.AbstainTool != "" && orig.Name == x.settings.AbstainTool) {
				// Built-in and server tools are not judged, and the abstain
				// exit is toolgate's own tool: neither is a model's tool call.
				continue
			}
			result := "valid"
			switch {
			case v.Stripped && v.Valid():
				result = "prefix_stripped"
				x.s.log.Info("tool name prefix stripped",
					zap.String("request_id", x.rid),
					zap.String("tool", v.Tool.Name))
			case !v.Valid():
				for _, f := range v.Findings {
					if f.Blocking() && result == "valid" {
						result = string(f.Code)
					}
					if f.Code == validate.Truncated {
						// A cut-off call is the token limit's doing, not a
						// malformed call by the model.
						result = string(validate.Truncated)
						break
					}
				}
			}
			for _, f := range v.Findings {
				x.out.findings = append(x.out.findings, string(f.Code))
				if f.Code == validate.ProvenanceUnverifiable && result == "valid" {
					result = string(validate.ProvenanceUnverifiable)
				}
			}
			m.ToolCalls.WithLabelValues(api, version, x.toolLabel(orig.Name, v), result).Inc()
			if x.strictMarked(orig.Name) {
				m.StrictCalls.WithLabelValues(api, result).Inc()
			}
			x.accountUnvalidated(v)
			if result == string(validate.UnknownTool) {
				m.Hallucinations.WithLabelValues(api, version).Inc()
			}
		}
		for _, ev := range r.Events {
			if ev.Result != "" {
				m.Recoveries.WithLabelValues(version, ev.Strategy, ev.Result).Inc()
			}
			if ev.Confidence >= 0 {
				m.RecoveryConf.Observe(ev.Confidence)
			}
			x.s.log.Info("recovery attempt",
				zap.String("request_id", x.rid),
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
}

// toolLabel bounds the tool label: a catalog name, _request for a tool only
// the request declared, _unknown for anything else.
func (x *exchange) toolLabel(name string, v validate.Verdict) string {
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
func (x *exchange) accountUnvalidated(v validate.Verdict) {
	if v.Unvalidated == "" {
		return
	}
	x.s.metrics.unvalidated(string(v.Unvalidated))
	if v.Unvalidated != validate.SchemaUncompilable || v.Tool == nil {
		return
	}
	if hash, first := v.Tool.ReportSchemaError(); first {
		x.s.log.Warn("request tool schema does not compile; its calls pass with only their object shape checked",
			zap.String("request_id", x.rid),
			zap.String("tool", v.Tool.Name),
			zap.String("schema_sha256", hash),
			zap.Error(v.Tool.SchemaError))
	}
}

func (m *Metrics) unvalidated(reason string) {
	m.Unvalidated.WithLabelValues(reason).Inc()
}
