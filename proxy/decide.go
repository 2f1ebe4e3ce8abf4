package proxy

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/recovery"
)

// verdict is the pipeline's decision on a whole answer, before any byte of
// it is written. Streams and plain answers share it; it is the only place
// the ladder's results become what the codecs write.
type verdict struct {
	outcome recovery.Outcome
	// upstream is a retryable re-query failure to hand to the client.
	upstream *recovery.UpstreamError
	// escalation, when set, replaces the whole answer (error mode).
	escalation *neutral.Escalated
	// actions say what becomes of each choice.
	actions []neutral.Action
	// changed is false when the upstream's bytes can go out as they are.
	changed bool
	// hold are the results of an answer held for approval (approve.go).
	hold []*recovery.Result
}

// decide turns the ladder's results into one verdict, counting and
// recording what happened.
func (x *exchange) decide(results []*recovery.Result) verdict {
	v := verdict{outcome: recovery.Pass}
	if x.settings.Shadow {
		v.outcome = recovery.ShadowPass
	}
	for _, r := range results {
		v.outcome = recovery.Worse(v.outcome, r.Outcome)
	}
	x.account(results)
	x.observe(results)
	for _, r := range results {
		if r.Upstream != nil {
			v.upstream = r.Upstream
			return v
		}
	}
	if x.settings.Shadow {
		return v
	}
	errorMode := x.rt.snap.Config.Escalation.Mode != catalog.EscalationMessage || x.req.StructuredOutput
	if x.holdable(results) {
		// A held answer is released on a retry, which only an error asks for.
		errorMode, v.hold = true, results
	}
	v.actions = make([]neutral.Action, len(results))
	for i, r := range results {
		a := &v.actions[i]
		*a = actionFor(r)
		if r.Escalation != nil {
			e := x.escalated(r)
			x.out.escalationID = e.ID
			if errorMode {
				v.escalation = e
				return v
			}
			a.Kind, a.Text, a.Escalation = neutral.Respond, e.Text, e
		}
		v.changed = v.changed || a.Touched()
	}
	return v
}

// actionFor is what the ladder's result makes of one choice: an
// abstention answers with the model's reason, a repair replaces the calls
// it changed, and the rest goes out as it came. An escalation's message is
// added by decide, which also records it.
func actionFor(r *recovery.Result) neutral.Action {
	a := neutral.Action{ReQueries: r.Turns}
	switch {
	case r.Outcome == recovery.Abstained:
		a.Kind, a.Text = neutral.Respond, r.AbstainReason
	case r.AnyChanged():
		a.Kind, a.Calls, a.Changed = neutral.Replace, r.Calls, r.Changed
	}
	return a
}

// finish writes a plain answer according to the verdict.
func (x *exchange) finish(resp *neutral.Answer, upHeader http.Header, results []*recovery.Result) {
	v := x.decide(results)
	switch {
	case v.upstream != nil:
		x.writeUpstreamError(v.upstream)
	case v.escalation != nil:
		if v.hold != nil && !x.holdPlain(&v, resp, upHeader) {
			return
		}
		x.writeEscalation(v.escalation, v.outcome)
	case !v.changed:
		// The common case: every call valid, the upstream's bytes go out as is.
		x.writeAnswer(http.StatusOK, upHeader, resp.Body, v.outcome)
	default:
		body, err := x.cd.EncodeAnswer(resp, v.actions)
		if err != nil {
			x.s.log.Error("render failed", zap.String("request_id", x.rid), zap.Error(err))
			x.writeFailure(classify(errRender, false))
			return
		}
		x.writeAnswer(http.StatusOK, upHeader, body, v.outcome)
	}
}
