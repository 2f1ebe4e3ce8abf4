package proxy

import "github.com/toolgate/toolgate/recovery"

// RecoveryObserver receives the recovery steps of every judged answer: the
// steps the "recovery attempt" log lines and the recovery metrics count.
// They carry what neither the answer nor an escalation shows when a
// substitute was used: the decision's confidence. toolgate eval reads them
// to sweep thresholds over what serve itself decided.
type RecoveryObserver interface {
	// ObserveRecovery is called once per judged answer, before any byte of
	// it is written, with the request's id (X-Toolgate-Request-Id) and the
	// steps of all its choices in order; no steps when every call passed.
	// It runs on the request's goroutine and must not block. Steps hold
	// names and sizes, never argument values.
	ObserveRecovery(requestID string, steps []recovery.Event)
}

// observe hands the ladder's steps to the observer, if there is one.
func (x *exchange) observe(results []*recovery.Result) {
	o := x.s.observer
	if o == nil {
		return
	}
	var steps []recovery.Event
	for _, r := range results {
		steps = append(steps, r.Events...)
	}
	o.ObserveRecovery(x.rid, steps)
}
