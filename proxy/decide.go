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
	// errorMode: the first escalation replaces the whole answer (docs/escalations.md);
	// else each escalated choice answers with its message.
	errorMode bool
	// escalating are the choices that escalate, in order. record gives
	// each its escalation, in both modes.
	escalating []int
	// escalation is the escalation that replaces the answer in error
	// mode, set by record.
	escalation *neutral.Escalated
	// actions say what becomes of each choice.
	actions []neutral.Action
	// changed is false when the upstream's bytes can go out as they are.
	changed bool
	// hold are the results of an answer held for approval (approve.go).
	hold []*recovery.Result
}

// policy is what decide needs of the request beside the ladder's results.
type policy struct {
	shadow bool
	// errorMode: an escalation answers in place of the whole answer
	// (docs/escalations.md) rather than as a choice's message.
	errorMode bool
	// hold: the answer may wait for a person's yes (holdable).
	hold bool
}

// decide turns the ladder's results into one verdict, for a model's
// answer (exchange.decide) and an MCP call (mcpcall.go) alike. It has no
// effects: what counts, observes and records the answer reads the verdict
// after (record), and what is written is built from it.
func decide(results []*recovery.Result, p policy) verdict {
	v := verdict{outcome: recovery.Pass}
	if p.shadow {
		v.outcome = recovery.ShadowPass
	}
	for _, r := range results {
		v.outcome = recovery.Worse(v.outcome, r.Outcome)
	}
	for _, r := range results {
		if r.Upstream != nil {
			// The client's retry is judged afresh: nothing of this answer
			// is escalated.
			v.upstream = r.Upstream
			return v
		}
	}
	if p.shadow {
		return v
	}
	v.errorMode = p.errorMode
	if p.hold {
		// A held answer is released on a retry, which only an error asks for.
		v.errorMode, v.hold = true, results
	}
	v.actions = make([]neutral.Action, len(results))
	for i, r := range results {
		v.actions[i] = actionFor(r)
		if r.Escalation != nil {
			v.escalating = append(v.escalating, i)
			v.actions[i].Kind = neutral.Respond
		}
		v.changed = v.changed || v.actions[i].Touched()
	}
	return v
}

// decide is the verdict on this exchange's answer. begun: a stream's
// first bytes went out before its answer was decided.
func (x *exchange) decide(results []*recovery.Result, begun bool) verdict {
	return decide(results, policy{
		shadow:    x.settings.Shadow,
		errorMode: x.rt.snap.Config.Escalation.Mode != catalog.EscalationMessage || x.req.StructuredOutput,
		hold:      x.holdable(results, begun),
	})
}

// actionFor is what the ladder's result makes of one choice: an
// abstention answers with the model's reason, a repair replaces the calls
// it changed, and the rest goes out as it came. An escalation's message is
// added by record, which also records it.
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

// record reads the verdict for everything but the client: the calls and
// the ladder's steps are counted, the observer sees the steps, and every
// escalation of every choice is completed, counted and given to the
// sinks, in error mode too, where only the first one answers.
func (x *exchange) record(results []*recovery.Result, v *verdict) {
	x.account(results)
	x.observe(results)
	for _, i := range v.escalating {
		e := x.escalated(results[i])
		a := &v.actions[i]
		a.Text, a.Escalation = e.Text, e
		if v.escalation == nil || !v.errorMode {
			// The header names the escalation the answer carries: the
			// one that replaces it, or the last message.
			x.out.escalationID = e.ID
		}
		if v.errorMode && v.escalation == nil {
			v.escalation = e
		}
	}
}

// finish decides a judged plain answer, records the verdict and writes the
// reply it makes.
func (x *exchange) finish(resp *neutral.Answer, upHeader http.Header, results []*recovery.Result) {
	v := x.decide(results, false)
	x.record(results, &v)
	x.write(x.answerOf(&v, resp, upHeader))
}

// answerOf is the reply the verdict makes of a plain answer.
func (x *exchange) answerOf(v *verdict, resp *neutral.Answer, upHeader http.Header) reply {
	switch {
	case v.upstream != nil:
		return x.handBackReply(v.upstream)
	case v.escalation != nil:
		if v.hold != nil {
			if rp, failed := x.holdPlain(v, resp, upHeader); failed {
				return rp
			}
		}
		return x.escalationReply(v.escalation, v.outcome)
	case !v.changed:
		// The common case: every call valid, the upstream's bytes go out as is.
		return answerReply(upHeader, resp.Body, v.outcome)
	}
	body, err := x.cd.EncodeAnswer(resp, v.actions)
	if err != nil {
		x.s.log.Error("render failed", zap.String("request_id", x.rid), zap.Error(err))
		return x.failureReply(classify(errRender))
	}
	return answerReply(upHeader, body, v.outcome)
}
