// Package apitest plays the pipeline's part for tests of a codec's Stream:
// it feeds events by the pipeline's holding rules and keeps the account of
// what went out, so a test can call the stream's writers as the pipeline
// would.
package apitest

import (
	"bytes"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// Run is one stream fed by the pipeline's rules: opening events (and
// comments among them) are held until the first event that carries
// something, which releases them in front of itself unless it carries a
// call; from the first call on, everything is held.
type Run struct {
	// Shadow forwards every event, as the pipeline does in shadow mode.
	Shadow bool
	// OpeningSent forwards opening events at once, as the pipeline does
	// once something went out before them.
	OpeningSent bool
	// Forwarded is what the client got at once.
	Forwarded []byte
	// Held are the events held back, copied.
	Held []neutral.HeldEvent
	// Steps are what Feed reported, one per event fed.
	Steps []neutral.Step
	// Holding: a call began and everything since is held.
	Holding bool
	// Done: the terminal event came. UpstreamError is the event Feed
	// reported as the upstream's error, which ended the run.
	Done          bool
	UpstreamError *neutral.HeldEvent
	cur           api.Cursor
	opened        bool
}

// Sent is the pipeline's account of the stream, as its writers take it.
func (r *Run) Sent() api.Sent { return r.cur.Sent() }

// Feed feeds ev to st and forwards or holds it. An event Feed reports as
// the upstream's error is kept aside, not counted, as the pipeline does.
func (r *Run) Feed(st api.Stream, ev *sse.Event) (neutral.Step, error) {
	step, err := st.Feed(ev)
	if err != nil {
		return step, err
	}
	r.Steps = append(r.Steps, step)
	if step.UpstreamError {
		r.UpstreamError = &neutral.HeldEvent{Raw: bytes.Clone(ev.Raw), Event: string(ev.Event), Data: bytes.Clone(ev.Data)}
		return step, nil
	}
	r.cur.Fed(step)
	r.Done = r.Done || step.Done
	switch {
	case r.Holding:
	case step.Hold && !r.Shadow:
		r.Holding, r.opened = true, true
	case !r.opened && !r.Shadow && !r.OpeningSent && (step.Opening || ev.Comment):
	default:
		r.opened = true
		r.Release()
		r.Forwarded = append(r.Forwarded, ev.Raw...)
		r.cur.Wrote()
		return step, nil
	}
	r.Held = append(r.Held, neutral.HeldEvent{Raw: bytes.Clone(ev.Raw), Event: string(ev.Event), Data: bytes.Clone(ev.Data)})
	return step, nil
}

// Release forwards the held events, as the pipeline does with held
// opening events in front of the first event that carries something, or
// of the upstream's error.
func (r *Run) Release() {
	for _, h := range r.Held {
		r.Forwarded = append(r.Forwarded, h.Raw...)
	}
	r.Held = nil
	r.cur.Wrote()
}

// Play feeds every event of rd to st until the terminal event, the
// upstream's error or the end, and returns the run with the first error
// Feed or the reader reported.
func Play(st api.Stream, rd api.EventReader) (*Run, error) {
	r := &Run{}
	return r, r.Play(st, rd)
}

// Play is the package's Play on a run set up by the caller.
func (r *Run) Play(st api.Stream, rd api.EventReader) error {
	for !r.Done && r.UpstreamError == nil && rd.Next() {
		ev := rd.Event()
		if _, err := r.Feed(st, &ev); err != nil {
			return err
		}
	}
	return rd.Err()
}

// HeldBytes is the held events' bytes as they came.
func (r *Run) HeldBytes() []byte {
	var out []byte
	for _, h := range r.Held {
		out = append(out, h.Raw...)
	}
	return out
}
