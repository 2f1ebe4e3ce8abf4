package mcp

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// held is a valid call to a tool that needs a person's yes first.
type held struct {
	m    *message
	call validate.ToolCall
	set  *catalog.MCPSet
	v    validate.Verdict
}

// judge decides a tools/call before the server sees it: an answer toolgate
// gives itself (a refusal), a call held for confirmation, or neither, and
// then it is forwarded.
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
	call := validate.ToolCall{ID: string(m.id), Name: name, Args: args}
	v := x.check(call, set)
	x.count(set, name, v)
	if ans := x.staleResume(m, call, v); ans != nil {
		return ans, nil
	}
	switch {
	case v.Tool == nil:
		x.escalate(set, call, v.Findings, v.Findings[0].Message)
		return errorResponse(m.id, codeInvalidParams, unknownToolText(name, set), unknownToolData(v, name, set)), nil
	case !v.Valid():
		e := x.escalate(set, call, v.Findings, "the arguments do not pass the tool's checks")
		return refuse(m, name, e, v.Findings, ""), nil
	case v.Tool.Policy == catalog.PolicyConfirm:
		return nil, &held{m: m, call: call, set: set, v: v}
	}
	x.trackCall(m, set, name)
	return nil, nil
}

// check judges a call as the model side does, through judge.Judge: the
// catalog's checks (name, schema, CEL rules with the request's context)
// over the server's tools as the catalog refines them, the server's own
// inputSchema where a catalog entry brought a stricter one, then the
// operator's validators. An MCP request carries no conversation, so rules
// and validators see an empty history with history_complete false, and
// provenance is unverifiable (no evidence).
func (x *exchange) check(call validate.ToolCall, set *catalog.MCPSet) validate.Verdict {
	j := &judge.Judge{
		Local:          &validate.Context{Eff: set.Eff, Values: x.rt.g.deps.ContextValues(x.ctx)},
		Validators:     x.rt.validators,
		RequestID:      x.rid,
		CatalogVersion: set.Version,
		Server:         x.rt.cfg.Name,
		Extra:          func(c validate.ToolCall, v *validate.Verdict) { serverChecks(c, v, set) },
	}
	return j.Call(x.ctx, call)
}

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

// count feeds toolgate_tool_calls_total and the hallucination counter as
// the model side does, with api="mcp".
func (x *exchange) count(set *catalog.MCPSet, name string, v validate.Verdict) {
	m := x.rt.g.deps.Metrics
	result := "valid"
	for _, f := range v.Findings {
		if f.Blocking() {
			result = string(f.Code)
			break
		}
		if f.Code == validate.ProvenanceUnverifiable {
			result = string(f.Code)
		}
	}
	label := "_unknown"
	if l, ok := set.Labels[name]; ok && v.Tool != nil {
		label = l
	}
	m.ToolCalls.WithLabelValues(apiMCP, set.Version, label, result).Inc()
	if result == string(validate.UnknownTool) {
		m.Hallucinations.WithLabelValues(apiMCP, set.Version).Inc()
	}
}

// escalate records a refused call: counted, logged without arguments, and
// sent to the sinks, which redact what escalation.redact names.
func (x *exchange) escalate(set *catalog.MCPSet, call validate.ToolCall, fs []validate.Finding, reason string) *recovery.Escalation {
	codes := []string{}
	for _, f := range fs {
		if !strings.Contains(strings.Join(codes, "\x00"), string(f.Code)) && f.Blocking() {
			codes = append(codes, string(f.Code))
		}
	}
	if len(codes) == 0 {
		codes = append(codes, string(validate.ConfirmationRequired))
	}
	callJSON, _ := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}{call.Name, objectOrNil(call.Args)})
	e := &recovery.Escalation{
		ID: recovery.NewEscalationID(), Codes: codes, Reason: reason, CatalogVersion: set.Version,
		RequestID: x.rid, UpstreamRequestIDs: []string{}, Call: callJSON,
		Attempts: []recovery.Attempt{recovery.CallAttempt(call, fs)},
		Label:    codes[0], CallIndex: -1, Time: time.Now(),
	}
	x.rt.g.deps.Metrics.Escalations.WithLabelValues(set.Version, e.Label).Inc()
	x.rt.g.deps.Escalate(&Escalation{Server: x.rt.cfg.Name, Session: x.sess.label(), Escalation: e})
	x.log().Info("escalation",
		zap.String("escalation_id", e.ID),
		zap.String("reason", e.Label),
		zap.Strings("codes", e.Codes),
		zap.String("catalog_version", e.CatalogVersion),
		zap.String("session", x.sess.label()))
	x.outcome = outcomeEscalated
	return e
}

func objectOrNil(b []byte) json.RawMessage {
	t := strings.TrimSpace(string(b))
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return nil
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

func findingsJSON(fs []validate.Finding) []findingJSON {
	out := make([]findingJSON, 0, len(fs))
	for _, f := range fs {
		if f.Blocking() || f.Code == validate.ProvenanceUnverifiable {
			out = append(out, findingJSON{Code: string(f.Code), Pointer: f.Pointer, Keyword: f.Keyword, Message: f.Message, Reason: f.Reason})
		}
	}
	return out
}

func unknownToolData(v validate.Verdict, name string, set *catalog.MCPSet) any {
	return struct {
		Code      string   `json:"code"`
		Tool      string   `json:"tool"`
		Available []string `json:"available"`
	}{string(v.Findings[0].Code), name, append([]string{}, set.Visible...)}
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
func refuse(m *message, name string, e *recovery.Escalation, fs []validate.Finding, note string) []byte {
	res := refusal(name, e, fs, note)
	if !taskAugmented(m.params) {
		return response(m.id, res)
	}
	return errorResponse(m.id, codeInvalidParams, res.Content[0].Text, res.Meta["toolgate/escalation"])
}

// refusal is the error result of a call toolgate did not forward: the
// exact reasons, so the model can correct the call (MCP 2025-11-25 asks
// servers to report input validation errors this way). note replaces the
// closing advice when the reason is not the arguments.
func refusal(name string, e *recovery.Escalation, fs []validate.Finding, note string) toolResult {
	var b strings.Builder
	b.WriteString("toolgate did not run this call to " + strconv.Quote(name) + ":\n")
	for _, f := range fs {
		if !f.Blocking() {
			continue
		}
		b.WriteString("- " + string(f.Code))
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
			"id": e.ID, "codes": e.Codes, "catalog_version": e.CatalogVersion, "findings": findingsJSON(fs)}},
	}
}
