package proxy

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
)

// What became of a judged tool result: the result label of
// toolgate_tool_results_total, and for a refusal the code the client reads
// (docs/results.md).
const (
	resultClean     = "clean"
	resultRedacted  = "redacted"
	resultViolation = "result_violation"
	resultSecret    = "result_secret"
	resultTooLarge  = "too_large"
)

// resultCheck is one tool result on its way to the model.
type resultCheck struct {
	id, tool string
	// text is the result as the model reads it: its text parts joined, or
	// its JSON text.
	text    string
	isError bool
	// raw is the JSON value that holds the result's strings, where secrets
	// are looked for and replaced.
	raw []byte
	// args is the argument JSON of the call it answers; nil when unknown.
	args []byte
	// structured is the result's structured JSON (MCP's
	// structuredContent); nil reads text as JSON when it is.
	structured []byte
	// size is what max_bytes caps; 0 counts text.
	size int
}

// resultVerdict is what the judge made of one result.
type resultVerdict struct {
	label string
	// why names the finding for a refusal: a rule's message, a validator's
	// reasons, a credential's kind; never the result's text.
	why string
	// raw is the result's JSON value with its credentials replaced, when
	// label is resultRedacted.
	raw []byte
	// recorded is why as sinks may keep it: without a validator's own
	// words; "" when it is why.
	recorded string
}

func (v resultVerdict) refused() bool {
	return v.label != resultClean && v.label != resultRedacted
}

// code is the refusal's code in the client's envelope: a result over
// max_bytes is refused as a violation of the operator's policy.
func (v resultVerdict) code() neutral.FailureCode {
	if v.label == resultSecret {
		return resultSecret
	}
	return resultViolation
}

// resultJudge judges the tool results of one request against the
// snapshot it began with.
type resultJudge struct {
	policy catalog.ResultsPolicy
	snap   *catalog.Snapshot
	vals   *judge.Validators
	// server is the MCP server's name; "" on a model route.
	server string
	rid    string
	values map[string]string
	// buf holds a decoded string, reused across the request's results.
	buf []byte
}

func newResultJudge(snap *catalog.Snapshot, vals *judge.Validators, server, rid string, values map[string]string) *resultJudge {
	return &resultJudge{policy: snap.Config.Catalog.Results, snap: snap, vals: vals, server: server, rid: rid, values: values}
}

// judge decides one result: too large, a credential (refused or
// replaced), a false result rule, a validator's denial, or clean.
func (j *resultJudge) judge(ctx context.Context, c *resultCheck) resultVerdict {
	size := c.size
	if size == 0 {
		size = len(c.text)
	}
	if max := j.policy.MaxBytes; max > 0 && int64(size) > max {
		return resultVerdict{label: resultTooLarge, why: "is " + strconv.Itoa(size) + " bytes, over catalog.results.max_bytes (" + strconv.FormatInt(max, 10) + ")"}
	}
	out := resultVerdict{label: resultClean}
	if j.policy.Secrets != catalog.SecretsOff {
		redacted, kinds := redactStrings(c.raw, &j.buf)
		if c.raw == nil && secrets.Contains([]byte(c.text)) {
			// Nothing to splice into: refused rather than passed on.
			kinds = []string{"credential"}
		}
		if len(kinds) > 0 {
			if j.policy.Secrets == catalog.SecretsBlock || redacted == nil {
				return resultVerdict{label: resultSecret, why: "carries a credential (" + strings.Join(kinds, ", ") + ")"}
			}
			out = resultVerdict{label: resultRedacted, raw: redacted}
		}
	}
	if why := j.rules(ctx, c); why != "" {
		return resultVerdict{label: resultViolation, why: why}
	}
	if j.vals.HasResultValidators() {
		if why, name := j.vals.AskResult(ctx, j.toolName(c.tool), j.question(c)); why != "" {
			return resultVerdict{label: resultViolation, why: why, recorded: "was refused by validator " + name}
		}
	}
	return out
}

// rules runs the tool's result rules; the first false one's message (or
// its expression, when it has none) is the finding.
func (j *resultJudge) rules(ctx context.Context, c *resultCheck) string {
	rules := j.snap.ResultRulesFor(j.server, c.tool)
	if len(rules) == 0 {
		return ""
	}
	vars := &catalog.ResultVars{Tool: c.tool, Text: c.text, IsError: c.isError, Structured: celJSON(c.structuredText()), Args: celJSON(string(c.args))}
	for _, r := range rules {
		ok, err := r.Eval(ctx, vars)
		if ok && err == nil {
			continue
		}
		msg := r.Message
		if msg == "" {
			msg = "result rule " + strconv.Quote(r.Expr) + " is false"
		}
		if err != nil {
			msg = "result rule " + strconv.Quote(r.Expr) + " could not be evaluated: " + err.Error()
		}
		return msg
	}
	return ""
}

// question is the validators' body for one result.
func (j *resultJudge) question(c *resultCheck) *judge.ResultQuestion {
	q := &judge.ResultQuestion{RequestID: j.rid, CatalogVersion: j.snap.Version, Context: j.values}
	q.Result.ID, q.Result.Tool, q.Result.Text, q.Result.IsError = c.id, j.toolName(c.tool), c.text, c.isError
	if v, ok := jsonx.Decode([]byte(c.structuredText())); ok {
		q.Result.Structured = v
	}
	if c.args != nil {
		if v, ok := jsonx.Decode(c.args); ok {
			q.Args = v
		}
	}
	return q
}

// structuredText is the JSON text of the result's structured value.
func (c *resultCheck) structuredText() string {
	if c.structured != nil {
		return string(c.structured)
	}
	return c.text
}

// toolName is the name validators know the tool by: "server/tool" on MCP.
func (j *resultJudge) toolName(tool string) string {
	if j.server == "" || tool == "" {
		return tool
	}
	return j.server + "/" + tool
}

// celJSON is a JSON text's value ready for CEL, or nil when it is not
// JSON.
func celJSON(text string) any {
	t := strings.TrimSpace(text)
	if t == "" {
		return nil
	}
	v, ok := jsonx.Decode([]byte(t))
	if !ok {
		return nil
	}
	return catalog.CELValue(v)
}

// redactStrings finds credentials in the strings of the JSON value raw and
// returns raw with each such string re-encoded with its credentials
// replaced, and the kinds found (nil, nil for a clean value). Only the
// strings that held one change; every other byte stays. A value that is
// not a JSON value toolgate can re-encode gives nil with the kinds, which
// the caller refuses rather than pass a credential on.
func redactStrings(raw []byte, buf *[]byte) ([]byte, []string) {
	// Most results hold no escape and no credential: one pass over the
	// bytes decides that, since no credential spans a quote.
	if bytes.IndexByte(raw, '\\') < 0 && !secrets.Contains(raw) {
		return nil, nil
	}
	var edits []jsonx.Edit
	var kinds []string
	for at := 0; ; {
		start, end, ok := nextString(raw, at)
		if !ok {
			break
		}
		at = end
		content := raw[start+1 : end-1]
		text := content
		if bytes.IndexByte(content, '\\') >= 0 {
			if *buf, ok = jsonx.AppendUnquoted((*buf)[:0], raw[start:end]); !ok {
				return nil, []string{"unreadable"}
			}
			text = *buf
		}
		red, ms := secrets.Redact(text)
		if len(ms) == 0 {
			continue
		}
		for _, m := range ms {
			kinds = appendNew(kinds, m.Kind)
		}
		edits = append(edits, jsonx.Edit{Start: start, End: end, Text: jsonx.String(string(red))})
	}
	if len(edits) == 0 {
		return nil, nil
	}
	return jsonx.Splice(raw, edits), kinds
}

// nextString finds the next JSON string literal in raw at or after at:
// raw[start:end] including its quotes. raw is a JSON value the codec
// decoded, so every quote outside a string opens one.
func nextString(raw []byte, at int) (start, end int, ok bool) {
	q := bytes.IndexByte(raw[at:], '"')
	if q < 0 {
		return 0, 0, false
	}
	start = at + q
	for i := start + 1; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return start, i + 1, true
		}
	}
	return 0, 0, false
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// judgeResults judges the tool results the client's request carries
// before it goes upstream (docs/results.md). It returns the body to forward: the
// client's own bytes, or with only the credentials' strings replaced. On a
// refusal it writes the route's error envelope and reports false.
func (x *exchange) judgeResults(body []byte) ([]byte, bool) {
	h := x.req.History
	if x.unread || h == nil || len(h.Results) == 0 {
		return body, true
	}
	j := newResultJudge(x.rt.snap, x.rt.validators, "", x.rid, x.vctx.Values)
	pair := x.rt.snap.AnyResultRules || j.vals.HasResultValidators()
	var edits []jsonx.Edit
	from := 0
	// Counted once per label, not per result: a series lookup allocates.
	tally := map[string]float64{}
	defer func() {
		for label, n := range tally {
			x.s.metrics.ToolResults.WithLabelValues(x.api.Name(), label).Add(n)
		}
	}()
	for i := range h.Results {
		r := &h.Results[i]
		c := resultCheck{id: r.ID, text: r.Text, isError: r.IsError, raw: r.Raw}
		if pair {
			c.tool, c.args = callOf(h, r.ID)
		}
		v := j.judge(x.r.Context(), &c)
		if v.label == resultRedacted {
			off, ok := locate(body, r.Raw, from)
			if !ok {
				v = resultVerdict{label: resultSecret, why: "carries a credential toolgate could not replace in place"}
			} else {
				edits = append(edits, jsonx.Edit{Start: off, End: off + len(r.Raw), Text: v.raw})
				from = off + len(r.Raw)
			}
		}
		tally[v.label]++
		if v.refused() {
			x.s.recordResult(&site{api: x.api.Name(), model: x.req.Model, rid: x.rid, version: x.rt.snap.Version}, r.ID, c.tool, v)
			x.refuseResult(r.ID, v)
			return nil, false
		}
	}
	if len(edits) == 0 {
		return body, true
	}
	return jsonx.Splice(body, edits), true
}

// refuseResult answers the request with the route's error envelope naming
// the tool call whose result was refused; nothing goes upstream.
func (x *exchange) refuseResult(id string, v resultVerdict) {
	f := neutral.Failure{Status: pipeline.StatusEscalated, Code: v.code(),
		Message: "the tool result for call " + strconv.Quote(id) + " " + v.why}
	x.write(pipeline.FailureReply(x.cd, f))
}

// recordResult hands a refused result to the sinks as an escalation:
// the call's id and tool, the code and why, never the result's text.
func (s *Server) recordResult(at *site, id, tool string, v resultVerdict) {
	why := v.why
	if v.recorded != "" {
		why = v.recorded
	}
	call, _ := jsonx.Marshal(map[string]string{"id": id, "tool": tool})
	e := &recovery.Escalation{ID: recovery.NewEscalationID(), Codes: []string{string(v.code())}, Label: string(v.code()),
		Reason: "the tool result for call " + strconv.Quote(id) + " " + why, CallIndex: -1, Time: time.Now().UTC(), Call: call}
	at.callJSON = func(neutral.ToolCall) []byte { return call }
	s.record(at, &recovery.Result{Escalation: e})
}

// callOf is the tool and argument JSON of the call with id, when the
// conversation holds it.
func callOf(h *neutral.History, id string) (string, []byte) {
	for i := range h.Calls {
		if c := &h.Calls[i]; c.ID == id && id != "" {
			return c.Tool, c.Args
		}
	}
	return "", nil
}

// locate finds where raw, the result's value as the codec read it, sits in
// body at or after from: a slice of body tells by its address; a copy is
// found by its bytes, in conversation order.
func locate(body, raw []byte, from int) (int, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	if off, err := jsonx.Offset(body, raw); err == nil && off >= from {
		return off, true
	}
	k := bytes.Index(body[from:], raw)
	if k < 0 {
		return 0, false
	}
	return from + k, true
}

// errResultRefused ends an exchange whose refusal of a tool result has
// been written.
var errResultRefused = errors.New("a tool result was refused")

// resultsOn says whether the tool results of a request are judged: then
// the request is read before it is sent, since what it carries may change
// or stop it.
func (x *exchange) resultsOn() bool {
	p := x.rt.snap.Config.Catalog.Results
	return p.Secrets != catalog.SecretsOff || p.MaxBytes > 0 || x.rt.snap.AnyResultRules || x.rt.validators.HasResultValidators()
}

// judgeParsedResults judges the results of the parsed request. A
// redacted body is read again by a new codec, so that every re-query the
// codec builds from its request carries the replaced strings too.
func (x *exchange) judgeParsedResults(body []byte) ([]byte, bool) {
	out, ok := x.judgeResults(body)
	if !ok || len(out) == len(body) && (len(out) == 0 || &out[0] == &body[0]) {
		return body, ok
	}
	// The judge reads the exchange's parsed values in place.
	x.cd = x.api.NewCodec()
	x.parsed = x.parseRequest(out)
	return out, true
}
