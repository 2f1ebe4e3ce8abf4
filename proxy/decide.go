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
// the ladder's results become what the codecs write. decide makes it and
// nothing changes it after: what carrying it out produced (the recorded
// escalations, a held approval) is an effects value beside it.
type verdict struct {
	outcome recovery.Outcome
	// upstream is a retryable re-query failure to hand to the client.
	upstream *recovery.UpstreamError
	// errorMode: the first escalation replaces the whole answer (docs/escalations.md);
	// else each escalated choice answers with its message.
	errorMode bool
	// escalating are the choices that escalate, in order. perform records
	// each one's escalation, in both modes.
	escalating []int
	// actions say what becomes of each choice; an escalating choice's
	// message is the effects' (answerActions).
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
// after (perform), and what is written is built from it.
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
// the recorded escalation's (answerActions).
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

// effects is what carrying out a verdict produced. The reply is built
// from the verdict and its effects, and neither changes after.
type effects struct {
	// escalations are the escalating choices' recorded escalations, in
	// the verdict's order.
	escalations []*neutral.Escalated
	// answering is the escalation that replaces the answer in error mode,
	// with its approval's ticket when the answer is held.
	answering *neutral.Escalated
	// storeDown: the answer was to be held but the approval store could
	// not be reached; the reply is a retryable 503 while the call stays
	// held.
	storeDown bool
}

// perform carries out the verdict, once, for everything but the client:
// the calls and the ladder's steps are counted, the observer sees the
// steps, every escalation of every choice is completed, counted and given
// to the sinks (in error mode too, where only the first one answers), and
// a held answer is stored for a person's yes. held renders the answer as
// it would be released; nil when this answer cannot be held.
func (x *exchange) perform(results []*recovery.Result, v *verdict, held *heldCopy) effects {
	x.account(results)
	x.observe(results)
	var fx effects
	for _, i := range v.escalating {
		fx.escalations = append(fx.escalations, x.escalated(results[i]))
	}
	if n := len(fx.escalations); n > 0 {
		// The header names the escalation the answer carries: the one that
		// replaces it, or the last message.
		x.out.escalationID = fx.escalations[n-1].ID
		if v.errorMode {
			fx.answering = fx.escalations[0]
			x.out.escalationID = fx.answering.ID
		}
	}
	if v.hold != nil && fx.answering != nil && held != nil {
		fx.answering, fx.storeDown = x.hold(v, fx.answering, held)
	}
	return fx
}

// answerActions are the verdict's actions with each escalating choice's
// message, as the effects recorded it.
func answerActions(v *verdict, fx *effects) []neutral.Action {
	if len(fx.escalations) == 0 {
		return v.actions
	}
	actions := append([]neutral.Action(nil), v.actions...)
	for k, i := range v.escalating {
		e := fx.escalations[k]
		actions[i].Text, actions[i].Escalation = e.Text, e
	}
	return actions
}

// finish decides a judged plain answer, carries the verdict out and writes
// the reply the two make.
func (x *exchange) finish(resp *neutral.Answer, upHeader http.Header, results []*recovery.Result) {
	v := x.decide(results, false)
	var held *heldCopy
	if v.hold != nil {
		held = &heldCopy{contentType: contentTypeOf(upHeader), render: func() ([]byte, error) { return x.heldAnswer(resp, v.hold) }}
	}
	fx := x.perform(results, &v, held)
	x.write(x.answerOf(&v, &fx, resp, upHeader))
}

// answerOf is the reply a verdict and its effects make of a plain answer.
func (x *exchange) answerOf(v *verdict, fx *effects, resp *neutral.Answer, upHeader http.Header) reply {
	switch {
	case v.upstream != nil:
		return x.handBackReply(v.upstream)
	case fx.storeDown:
		return x.failureReply(storeFailure(storeDownHeld))
	case fx.answering != nil:
		return x.escalationReply(fx.answering, v.outcome)
	case !v.changed:
		// The common case: every call valid, the upstream's bytes go out as is.
		return answerReply(upHeader, resp.Body, v.outcome)
	}
	body, err := x.cd.EncodeAnswer(resp, answerActions(v, fx))
	if err != nil {
		x.s.log.Error("render failed", zap.String("request_id", x.rid), zap.Error(err))
		return x.failureReply(classify(errRender))
	}
	return answerReply(upHeader, body, v.outcome)
}
