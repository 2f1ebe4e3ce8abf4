package exchange

import (
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// facts are what the pipeline's books record of this exchange: its API,
// model, ids and catalog version. How its codec writes a call is added
// only for an escalation: the method value costs an allocation, which
// counting every answer's calls does not need.
func (x *exchange) facts() pipeline.Facts {
	model := ""
	if x.parsed.req != nil {
		model = x.parsed.req.Model
	}
	return pipeline.Facts{API: x.api.Name(), Model: model, RequestID: x.requestID, CatalogVersion: x.gen.Snap.Version,
		UpstreamIDs: x.account.upIDs, AbstainTool: x.settings.AbstainTool, Tools: x}
}

// escalated completes the ladder's escalation with the exchange's facts,
// counts it and hands it to the sinks.
func (x *exchange) escalated(r *recovery.Result) *neutral.Escalated {
	f := x.facts()
	f.CallJSON = x.codec.CallJSON
	return x.env.Recorder.Record(&f, r)
}

// countCalls counts the answer's calls and the ladder's steps.
func (x *exchange) countCalls(results []*recovery.Result) {
	f := x.facts()
	x.out.findings = x.env.Recorder.Count(&f, results, x.out.findings)
}

// ToolLabel bounds the tool label: a catalog name, _request for a tool only
// the request declared, _unknown for anything else.
func (x *exchange) ToolLabel(name string, v validate.CallReport) string {
	if v.Tool == nil {
		if _, ok := x.gen.Snap.Tools[name]; ok {
			return name
		}
		return "_unknown"
	}
	if v.Tool.FromRequest {
		return "_request"
	}
	return v.Tool.Name
}
