package mcp

import (
	"errors"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
)

// held is a valid call to a tool that needs a person's yes first.
type held struct {
	m    *message
	call *Call
	d    Decision
}

// judge decides a tools/call before the server sees it: an answer toolgate
// gives itself (a refusal), a call held for confirmation, or neither, and
// then it is forwarded. The pipeline judges; this reads its decision.
func (x *exchange) judge(m *message) ([]byte, *held) {
	name, args, problem := callParams(m.params)
	if problem != "" {
		return errorResponse(m.id, codeInvalidParams, "Invalid params: "+problem, nil), nil
	}
	set, err := x.catalog()
	var gone *sessionGone
	if errors.As(err, &gone) {
		x.gone = gone
		return errorResponse(m.id, codeUnavailable, gone.Error(), nil), nil
	}
	if err != nil {
		x.outcome = outcomeUpstreamError
		x.log().Warn("mcp tool list unavailable; call not forwarded", zap.Error(err))
		return errorResponse(m.id, codeUnavailable, x.downMessage()+
			"; toolgate could not read its tool list, so it did not judge or forward this call", nil), nil
	}
	c := &Call{RequestID: x.rid, Server: x.rt.cfg.Name, Session: x.sess.label(), Set: set,
		Call: neutral.ToolCall{ID: string(m.id), Name: name, Args: args}}
	d := x.rt.pipe.Judge(x.ctx, c)
	x.findings = append(x.findings, d.Noted...)
	if ans := x.staleResume(m, c, d); ans != nil {
		return ans, nil
	}
	switch d.Verdict {
	case UnknownTool:
		e := x.refused(&d, "")
		return errorResponse(m.id, codeInvalidParams, unknownToolText(name, set), unknownToolData(e, name, set)), nil
	case Refuse:
		return refuse(m, name, x.refused(&d, ""), ""), nil
	case Confirm:
		return nil, &held{m: m, call: c, d: d}
	}
	x.trackCall(m, set, name)
	return nil, nil
}

// refused has the pipeline record a call toolgate answers itself.
func (x *exchange) refused(d *Decision, why string) *neutral.Escalated {
	x.outcome = outcomeEscalated
	return x.rt.pipe.Record(d, why)
}

// trackCall remembers a forwarded call so its result is checked against
// the tool's outputSchema, on this stream or a resumed one.
func (x *exchange) trackCall(m *message, set *catalog.MCPSet, name string) {
	t := tracked{kind: trackCall, tool: name, output: set.Output[name], version: set.Version, label: set.Labels[name]}
	x.tracked[m.idKey()] = t
	if x.sess.id != "" {
		x.sess.track(m.idKey(), t)
	}
}

// catalog is the session's judged tool set, read from the server first
// when toolgate has no fresh list of it.
func (x *exchange) catalog() (*catalog.MCPSet, error) {
	if set := x.sess.catalogFor(x.rt.snap, x.rt.cfg.Name); set != nil {
		return set, nil
	}
	if err := x.fetchTools(); err != nil {
		return nil, err
	}
	return x.sess.catalogFor(x.rt.snap, x.rt.cfg.Name), nil
}

// maxNamesShown bounds the real tool names an unknown-tool error lists.
const maxNamesShown = 50

func unknownToolText(name string, set *catalog.MCPSet) string {
	names := set.Visible
	more := ""
	if len(names) > maxNamesShown {
		more = " and " + strconv.Itoa(len(names)-maxNamesShown) + " more"
		names = names[:maxNamesShown]
	}
	list := "none"
	if len(names) > 0 {
		list = strings.Join(names, ", ") + more
	}
	return "Unknown tool: " + strconv.Quote(name) + ". The tools of this server are: " + list + "."
}

// findingJSON is a finding in the refusal's _meta. Reason, a validator's
// own words, goes to the client as in the model side's escalation; sinks
// and logs never see it.
type findingJSON struct {
	Code    string `json:"code"`
	Pointer string `json:"pointer"`
	Keyword string `json:"keyword"`
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
}

func findingsJSON(fs []neutral.Finding) []findingJSON {
	out := make([]findingJSON, 0, len(fs))
	for _, f := range fs {
		out = append(out, findingJSON{Code: f.Code, Pointer: f.Pointer, Keyword: f.Keyword, Message: f.Message, Reason: f.Reason})
	}
	return out
}

func unknownToolData(e *neutral.Escalated, name string, set *catalog.MCPSet) any {
	return struct {
		Code      string   `json:"code"`
		Tool      string   `json:"tool"`
		Available []string `json:"available"`
	}{e.Findings[0].Code, name, append([]string{}, set.Visible...)}
}

// toolResult is a CallToolResult toolgate answers with.
type toolResult struct {
	Content []textContent  `json:"content"`
	IsError bool           `json:"isError"`
	Meta    map[string]any `json:"_meta,omitempty"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// refuse answers a call toolgate did not forward. A task-augmented call
// (params.task) gets a JSON-RPC error with the findings in data: its
// client expects a task handle, and would fail to parse a result.
func refuse(m *message, name string, e *neutral.Escalated, note string) []byte {
	res := refusal(name, e, note)
	if !taskAugmented(m.params) {
		return response(m.id, res)
	}
	return errorResponse(m.id, codeInvalidParams, res.Content[0].Text, res.Meta["toolgate/escalation"])
}

// refusal is the error result of a call toolgate did not forward: the
// exact reasons, so the model can correct the call (MCP 2025-11-25 asks
// servers to report input validation errors this way). note replaces the
// closing advice when the reason is not the arguments.
func refusal(name string, e *neutral.Escalated, note string) toolResult {
	var b strings.Builder
	b.WriteString("toolgate did not run this call to " + strconv.Quote(name) + ":\n")
	for _, f := range e.Findings {
		if !f.Blocking {
			continue
		}
		b.WriteString("- " + f.Code)
		if f.Pointer != "" {
			b.WriteString(" at " + f.Pointer)
		}
		if f.Keyword != "" {
			b.WriteString(" (" + f.Keyword + ")")
		}
		b.WriteString(": " + f.Detail + "\n")
	}
	if note == "" {
		note = "Correct the arguments and call the tool again."
	}
	b.WriteString(note)
	return toolResult{
		Content: []textContent{{Type: "text", Text: b.String()}},
		IsError: true,
		Meta: map[string]any{"toolgate/escalation": map[string]any{
			"id": e.ID, "codes": e.Codes, "catalog_version": e.CatalogVersion, "findings": findingsJSON(e.Findings)}},
	}
}
