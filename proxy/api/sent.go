package api

import "github.com/toolgate/toolgate/neutral"

// Sent is the pipeline's account of one stream at a moment: what the
// client has been given of the events fed so far. Only the pipeline knows
// it, since only the pipeline decides what is held; it passes it to every
// Stream method that writes, and a stream keeps no copy of it.
type Sent struct {
	// Events is how many of the fed events went out, in the order fed.
	Events int
	// Held is how many events fed after those were held and not sent.
	Held int
	// Next is the sequence number the next event the client gets must
	// carry, in an API that numbers its events (Step.Numbered).
	Next int64
	// Committed: an event that went out gave the client an id that a
	// re-query would have to change (Step.Commits).
	Committed bool
}

// Cursor keeps a stream's Sent as the pipeline feeds and writes its
// events. It only counts: when to call Wrote is the pipeline's decision.
type Cursor struct {
	sent, fed Sent
}

// Fed counts one more event fed to the stream, with the step Feed read
// from it. It is held until Wrote says otherwise.
func (c *Cursor) Fed(step neutral.Step) {
	c.fed.Events++
	if step.Numbered {
		c.fed.Next = step.Seq + 1
	}
	if step.Commits {
		c.fed.Committed = true
	}
}

// Wrote records that every event fed so far went out.
func (c *Cursor) Wrote() { c.sent = c.fed }

// Sent is what went out, and how many fed events are held after it.
func (c *Cursor) Sent() Sent {
	s := c.sent
	s.Held = c.fed.Events - c.sent.Events
	return s
}
