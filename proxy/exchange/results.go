package exchange

import (
	"errors"
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/pipeline"
)

// judgeResults judges the tool results the client's request carries
// before it goes upstream (docs/results.md). It returns the body to forward: the
// client's own bytes, or with only the credentials' strings replaced. On a
// refusal it writes the route's error envelope and reports false.
func (x *exchange) judgeResults(body []byte) ([]byte, bool) {
	h := x.parsed.req.History
	if x.parsed.unread || h == nil || len(h.Results) == 0 {
		return body, true
	}
	j := pipeline.NewResultJudge(x.gen.Snap, x.gen.Validators, "", x.requestID, x.parsed.local.Values)
	pair := x.gen.Snap.AnyResultRules || x.gen.Validators.HasResultValidators()
	var edits []jsonx.Edit
	from := 0
	// Counted once per label, not per result: a series lookup allocates.
	counted := map[string]float64{}
	defer func() {
		for label, n := range counted {
			x.env.Metrics.ToolResults.WithLabelValues(x.api.Name(), label).Add(n)
		}
	}()
	for i := range h.Results {
		r := &h.Results[i]
		c := pipeline.ResultCheck{ID: r.ID, Text: r.Text, IsError: r.IsError, Raw: r.Raw}
		if pair {
			c.Tool, c.Args = pipeline.CallOf(h, r.ID)
		}
		v := j.Judge(x.r.Context(), &c)
		if v.Label == pipeline.ResultRedacted {
			off, ok := pipeline.Locate(body, r.Raw, from)
			if !ok {
				v = pipeline.Unreplaced()
			} else {
				edits = append(edits, jsonx.Edit{Start: off, End: off + len(r.Raw), Text: v.Raw})
				from = off + len(r.Raw)
			}
		}
		counted[v.Label]++
		if v.Refused() {
			x.env.Recorder.RecordResult(&pipeline.Facts{API: x.api.Name(), Model: x.parsed.req.Model, RequestID: x.requestID, CatalogVersion: x.gen.Snap.Version}, r.ID, c.Tool, v)
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
func (x *exchange) refuseResult(id string, v pipeline.ResultRuling) {
	f := neutral.Failure{Status: pipeline.StatusEscalated, Code: v.Code(),
		Message: "the tool result for call " + strconv.Quote(id) + " " + v.Why}
	x.write(pipeline.FailureReply(x.codec, f))
}

// errResultRefused ends an exchange whose refusal of a tool result has
// been written.
var errResultRefused = errors.New("a tool result was refused")

// resultsOn says whether the tool results of a request are judged: then
// the request is read before it is sent, since what it carries may change
// or stop it.
func (x *exchange) resultsOn() bool {
	return pipeline.JudgesResults(x.gen.Snap, x.gen.Validators)
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
	x.codec = x.api.NewCodec()
	x.parsed = x.parseRequest(out)
	return out, true
}
