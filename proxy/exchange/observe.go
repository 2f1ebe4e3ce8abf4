package exchange

import "github.com/toolgate/toolgate/recovery"

// observe hands the ladder's steps to the observer, if there is one.
func (x *exchange) observe(results []*recovery.Result) {
	o := x.env.Observer
	if o == nil {
		return
	}
	var steps []recovery.Event
	for _, r := range results {
		steps = append(steps, r.Events...)
	}
	o.ObserveRecovery(x.requestID, steps)
}
