package pipeline

import (
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// Verdict is the pipeline's decision on a whole answer, before any byte of
// it is written. Streams, plain answers and an MCP tools/call share it; it
// is the only place the ladder's results become what is written. Decide
// makes it and nothing changes it after (its fields are unexported, and
// the architecture test holds Decide to be its only maker): what carrying
// it out produced, the recorded escalations and a held approval, is an
// Effects value beside it.
type Verdict struct {
	outcome recovery.Outcome
	// upstream is a retryable re-query failure to hand to the client.
	upstream *recovery.UpstreamError
	// errorMode: the first escalation replaces the whole answer (docs/escalations.md);
	// else each escalated choice answers with its message.
	errorMode bool
	// escalating are the choices that escalate, in order; every one is
	// recorded, in both modes.
	escalating []int
	// actions say what becomes of each choice; an escalating choice's
	// message is its recorded escalation's (Actions).
	actions []neutral.Action
	// changed is false when the upstream's bytes can go out as they are.
	changed bool
	// held are the results of an answer held for approval.
	held []*recovery.Result
}

// Policy is what Decide needs of the request beside the ladder's results.
type Policy struct {
	Shadow bool
	// ErrorMode: an escalation answers in place of the whole answer
	// (docs/escalations.md) rather than as a choice's message.
	ErrorMode bool
	// Hold: the answer may wait for a person's yes (ConfirmOnly, and a
	// route that can hold it).
	Hold bool
}

// Decide turns the ladder's results into one verdict, for a model's
// answer and an MCP call alike. It has no effects: what counts, observes
// and records the answer reads the verdict after, and what is written is
// built from the two.
func Decide(results []*recovery.Result, p Policy) Verdict {
	v := Verdict{outcome: recovery.Pass}
	if p.Shadow {
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
	if p.Shadow {
		return v
	}
	v.errorMode = p.ErrorMode
	if p.Hold {
		// A held answer is released on a retry, which only an error asks for.
		v.errorMode, v.held = true, results
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

// Outcome is the whole answer's outcome: the worst of its choices'.
func (v *Verdict) Outcome() recovery.Outcome { return v.outcome }

// Upstream is the retryable re-query failure to hand back, or nil.
func (v *Verdict) Upstream() *recovery.UpstreamError { return v.upstream }

// ErrorMode reports that the first escalation answers in place of the
// whole answer.
func (v *Verdict) ErrorMode() bool { return v.errorMode }

// Escalating are the choices that escalate, in order.
func (v *Verdict) Escalating() []int { return v.escalating }

// Changed is false when the upstream's bytes go out as they are.
func (v *Verdict) Changed() bool { return v.changed }

// Held are the results of an answer to hold for a person's yes, or nil.
func (v *Verdict) Held() []*recovery.Result { return v.held }

// actionFor is what the ladder's result makes of one choice: an
// abstention answers with the model's reason, a repair replaces the calls
// it changed, and the rest goes out as it came. An escalation's message is
// the recorded escalation's (Actions).
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

// Effects is what carrying out a verdict produced: the escalations
// recorded and the approval held. The reply is built from the verdict and
// its effects, and neither changes after.
type Effects struct {
	// Escalations are the escalating choices' recorded escalations, in
	// the verdict's order.
	Escalations []*neutral.Escalated
	// Answering is the escalation that replaces the answer in error mode,
	// with its approval's ticket when the answer is held.
	Answering *neutral.Escalated
	// StoreDown: the answer was to be held but the approval store could
	// not be reached; the reply is a retryable 503 while the call stays
	// held.
	StoreDown bool
}

// Actions are the verdict's actions with each escalating choice's message,
// as the effects recorded it: what a codec writes. The verdict's own are
// returned when nothing escalated, and are not to be changed.
func (v *Verdict) Actions(fx *Effects) []neutral.Action {
	if len(fx.Escalations) == 0 {
		return v.actions
	}
	actions := append([]neutral.Action(nil), v.actions...)
	for k, i := range v.escalating {
		e := fx.Escalations[k]
		actions[i].Text, actions[i].Escalation = e.Text, e
	}
	return actions
}

// ConfirmOnly reports results whose every escalation is only that a valid
// call needs a person's yes, with at least one such: the calls can wait
// for one as the model wrote them. It is the rule approvals hold a model's
// answer and an MCP call by.
func ConfirmOnly(results []*recovery.Result) bool {
	held := false
	for _, r := range results {
		switch e := r.Escalation; {
		case r.Upstream != nil:
			return false
		case e == nil:
			continue
		case e.Label != string(validate.ConfirmationRequired) || len(e.Codes) != 1 || r.AnyChanged():
			return false
		}
		held = true
	}
	return held
}

// ReleasedActions are what each choice becomes once its calls are
// approved: a held choice goes out as the model wrote it, the others as
// the ladder decided. changed is false when the answer goes out as it came.
func ReleasedActions(results []*recovery.Result) (actions []neutral.Action, changed bool) {
	actions = make([]neutral.Action, len(results))
	for i, r := range results {
		if r.Escalation == nil {
			actions[i] = actionFor(r)
		}
		changed = changed || actions[i].Touched()
	}
	return actions, changed
}
