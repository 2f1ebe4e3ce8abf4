package pipeline

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/recovery"
)

// What became of a judged tool result: the result label of
// toolgate_tool_results_total, and for a refusal the code the client reads
// (docs/results.md).
const (
	resultClean     = "clean"
	ResultRedacted  = "redacted"
	resultViolation = "result_violation"
	resultSecret    = "result_secret"
	resultTooLarge  = "too_large"
)

// ResultCheck is one tool result on its way to the model.
type ResultCheck struct {
	ID, Tool string
	// Text is the result as the model reads it: its text parts joined, or
	// its JSON text.
	Text    string
	IsError bool
	// Raw is the JSON value that holds the result's strings, where secrets
	// are looked for and replaced.
	Raw []byte
	// Args is the argument JSON of the call it answers; nil when unknown.
	Args []byte
	// Structured is the result's structured JSON (MCP's
	// structuredContent); nil reads Text as JSON when it is.
	Structured []byte
	// Size is what max_bytes caps; 0 counts Text.
	Size int
}

// ResultRuling is what the judge made of one result.
type ResultRuling struct {
	// Label is the toolgate_tool_results_total result.
	Label string
	// Why names the finding for a refusal: a rule's message, a validator's
	// reasons, a credential's kind; never the result's text.
	Why string
	// Raw is the result's JSON value with its credentials replaced, when
	// Label is ResultRedacted.
	Raw []byte
	// recorded is why as sinks may keep it: without a validator's own
	// words; "" when it is why.
	recorded string
}

// Refused reports a result that does not reach the model.
func (v ResultRuling) Refused() bool {
	return v.Label != resultClean && v.Label != ResultRedacted
}

// Code is the refusal's code in the client's envelope: a result over
// max_bytes is refused as a violation of the operator's policy.
func (v ResultRuling) Code() neutral.FailureCode {
	if v.Label == resultSecret {
		return resultSecret
	}
	return resultViolation
}

// ResultJudge judges the tool results of one request against the
// snapshot it began with.
type ResultJudge struct {
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

// NewResultJudge judges results against snap with its validators; server
// is the MCP server's name, "" on a model route.
func NewResultJudge(snap *catalog.Snapshot, vals *judge.Validators, server, rid string, values map[string]string) *ResultJudge {
	return &ResultJudge{policy: snap.Config.Catalog.Results, snap: snap, vals: vals, server: server, rid: rid, values: values}
}

// Judge decides one result: too large, a credential (refused or
// replaced), a false result rule, a validator's denial, or clean.
func (j *ResultJudge) Judge(ctx context.Context, c *ResultCheck) ResultRuling {
	size := c.Size
	if size == 0 {
		size = len(c.Text)
	}
	if max := j.policy.MaxBytes; max > 0 && int64(size) > max {
		return ResultRuling{Label: resultTooLarge, Why: "is " + strconv.Itoa(size) + " bytes, over catalog.results.max_bytes (" + strconv.FormatInt(max, 10) + ")"}
	}
	out := ResultRuling{Label: resultClean}
	if j.policy.Secrets != catalog.SecretsOff {
		redacted, kinds := redactStrings(c.Raw, &j.buf)
		if c.Raw == nil && secrets.Contains([]byte(c.Text)) {
			// Nothing to splice into: refused rather than passed on.
			kinds = []string{"credential"}
		}
		if len(kinds) > 0 {
			if j.policy.Secrets == catalog.SecretsBlock || redacted == nil {
				return ResultRuling{Label: resultSecret, Why: "carries a credential (" + strings.Join(kinds, ", ") + ")"}
			}
			out = ResultRuling{Label: ResultRedacted, Raw: redacted}
		}
	}
	if why := j.rules(ctx, c); why != "" {
		return ResultRuling{Label: resultViolation, Why: why}
	}
	if j.vals.HasResultValidators() {
		if why, name := j.vals.AskResult(ctx, j.toolName(c.Tool), j.question(c)); why != "" {
			return ResultRuling{Label: resultViolation, Why: why, recorded: "was refused by validator " + name}
		}
	}
	return out
}

// rules runs the tool's result rules; the first false one's message (or
// its expression, when it has none) is the finding.
func (j *ResultJudge) rules(ctx context.Context, c *ResultCheck) string {
	rules := j.snap.ResultRulesFor(j.server, c.Tool)
	if len(rules) == 0 {
		return ""
	}
	vars := &catalog.ResultVars{Tool: c.Tool, Text: c.Text, IsError: c.IsError, Structured: celJSON(c.structuredText()), Args: celJSON(string(c.Args))}
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
func (j *ResultJudge) question(c *ResultCheck) *judge.ResultQuestion {
	q := &judge.ResultQuestion{RequestID: j.rid, CatalogVersion: j.snap.Version, Context: j.values}
	q.Result.ID, q.Result.Tool, q.Result.Text, q.Result.IsError = c.ID, j.toolName(c.Tool), c.Text, c.IsError
	if v, ok := jsonx.Decode([]byte(c.structuredText())); ok {
		q.Result.Structured = v
	}
	if c.Args != nil {
		if v, ok := jsonx.Decode(c.Args); ok {
			q.Args = v
		}
	}
	return q
}

// structuredText is the JSON text of the result's structured value.
func (c *ResultCheck) structuredText() string {
	if c.Structured != nil {
		return string(c.Structured)
	}
	return c.Text
}

// toolName is the name validators know the tool by: "server/tool" on MCP.
func (j *ResultJudge) toolName(tool string) string {
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

// RecordResult hands a refused result to the sinks as an escalation:
// the call's id and tool, the code and why, never the result's text.
func (rc *Recorder) RecordResult(at *Facts, id, tool string, v ResultRuling) {
	why := v.Why
	if v.recorded != "" {
		why = v.recorded
	}
	call, _ := jsonx.Marshal(map[string]string{"id": id, "tool": tool})
	e := &recovery.Escalation{ID: recovery.NewEscalationID(), Codes: []string{string(v.Code())}, Label: string(v.Code()),
		Reason: "the tool result for call " + strconv.Quote(id) + " " + why, CallIndex: -1, Time: time.Now().UTC(), Call: call}
	facts := *at
	facts.CallJSON = func(neutral.ToolCall) []byte { return call }
	rc.Record(&facts, &recovery.Result{Escalation: e})
}

// CallOf is the tool and argument JSON of the call with id, when the
// conversation holds it.
func CallOf(h *neutral.History, id string) (string, []byte) {
	for i := range h.Calls {
		if c := &h.Calls[i]; c.ID == id && id != "" {
			return c.Tool, c.Args
		}
	}
	return "", nil
}

// Locate finds where raw, the result's value as the codec read it, sits in
// body at or after from: a slice of body tells by its address; a copy is
// found by its bytes, in conversation order.
func Locate(body, raw []byte, from int) (int, bool) {
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

// Unreplaced is the ruling on a result whose credential could not be
// replaced where the body holds it: refused rather than passed on.
func Unreplaced() ResultRuling {
	return ResultRuling{Label: resultSecret, Why: "carries a credential toolgate could not replace in place"}
}

// JudgesResults says whether tool results are judged under snap: then a
// request is read before it is sent, since what it carries may change or
// stop it.
func JudgesResults(snap *catalog.Snapshot, vals *judge.Validators) bool {
	p := snap.Config.Catalog.Results
	return p.Secrets != catalog.SecretsOff || p.MaxBytes > 0 || snap.AnyResultRules || vals.HasResultValidators()
}
