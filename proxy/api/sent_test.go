package api

import (
	"testing"

	"github.com/toolgate/toolgate/neutral"
)

// The cursor counts what was fed and says only what Wrote made sent: the
// held events' sequence numbers and ids are not the client's until then.
func TestCursor(t *testing.T) {
	var c Cursor
	if got := c.Sent(); got != (Sent{}) {
		t.Fatalf("a new cursor %+v", got)
	}
	c.Fed(neutral.Step{Opening: true, Seq: 0, Numbered: true, Commits: true})
	c.Fed(neutral.Step{Opening: true, Seq: 1, Numbered: true})
	if got := c.Sent(); got != (Sent{Held: 2}) {
		t.Fatalf("with two opening events held: %+v", got)
	}
	c.Fed(neutral.Step{Seq: 2, Numbered: true})
	c.Wrote()
	if got := c.Sent(); got != (Sent{Events: 3, Next: 3, Committed: true}) {
		t.Fatalf("after the first text went out: %+v", got)
	}
	// A comment has no number: the next one stays.
	c.Fed(neutral.Step{})
	c.Fed(neutral.Step{Hold: true, Seq: 3, Numbered: true})
	if got := c.Sent(); got != (Sent{Events: 3, Held: 2, Next: 3, Committed: true}) {
		t.Fatalf("with a call held: %+v", got)
	}
}
