package exchange

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/sse"
)

// TestHeldEventsGrow: events held across many growths of the buffer keep
// their bytes and their data, whether the data is a line of the raw bytes
// or kept apart, and the buffer is their raw bytes in order.
func TestHeldEventsGrow(t *testing.T) {
	var h heldEvents
	defer h.free()
	var want []sse.Event
	var all []byte
	for i := range 300 {
		payload := fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", i%97))
		var ev sse.Event
		if i%5 == 4 {
			// Data of two lines: held apart from the raw bytes.
			ev = sse.Event{Raw: []byte("data: " + payload + "\ndata: more\n\n"), Data: []byte(payload + "\nmore"), Event: []byte("multi")}
		} else {
			raw := []byte("event: e\ndata: " + payload + "\n\n")
			at := len("event: e\ndata: ")
			ev = sse.Event{Raw: raw, Data: raw[at : at+len(payload)], DataAt: at, Event: []byte("e")}
		}
		want = append(want, sse.Event{Raw: bytes.Clone(ev.Raw), Data: bytes.Clone(ev.Data), Event: ev.Event})
		all = append(all, ev.Raw...)
		if got := h.add(&ev); got != int64(len(all)) {
			t.Fatalf("event %d: held size %d, want %d", i, got, len(all))
		}
		// The reader reuses its buffer: what was held must not change.
		clear(ev.Raw)
	}
	if !bytes.Equal(h.buf, all) {
		t.Fatal("the held buffer is not the events' raw bytes in order")
	}
	// Every event lies in the buffer itself: the arrays it outgrew are
	// recycled, and an event left in one would change under it.
	at := 0
	for i, e := range h.events {
		if &e.Raw[0] != &h.buf[at] {
			t.Fatalf("event %d is not in the held buffer", i)
		}
		at += len(e.Raw)
	}
	for i, e := range h.events {
		if !bytes.Equal(e.Raw, want[i].Raw) || !bytes.Equal(e.Data, want[i].Data) || e.Event != string(want[i].Event) {
			t.Fatalf("event %d held as %q / %q / %q, want %q / %q", i, e.Raw, e.Data, e.Event, want[i].Raw, want[i].Data)
		}
	}
	h.reset()
	ev := sse.Event{Raw: []byte("data: 1\n\n"), Data: []byte("1"), DataAt: 6}
	h.add(&ev)
	if string(h.buf) != "data: 1\n\n" || string(h.events[0].Data) != "1" || len(h.events) != 1 {
		t.Fatalf("after reset: %q %+v", h.buf, h.events)
	}
}
