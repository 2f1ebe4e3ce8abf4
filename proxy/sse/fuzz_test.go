package sse_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/toolgate/toolgate/proxy/sse"
)

// splitReader feeds its data in reads whose sizes come from the fuzzer.
// A size of 0 yields an empty read, which real sources do return, but
// never twice in a row so the Reader's no-progress guard is not what a
// fuzz run ends up testing.
type splitReader struct {
	data      []byte
	splits    []byte
	next      int
	lastEmpty bool
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := len(s.data)
	if len(s.splits) > 0 {
		n = int(s.splits[s.next%len(s.splits)] % 33)
		s.next++
	}
	if n == 0 && s.lastEmpty {
		n = 1
	}
	s.lastEmpty = n == 0
	n = min(n, len(p), len(s.data))
	copy(p, s.data[:n])
	s.data = s.data[n:]
	return n, nil
}

// refParse is a deliberately naive whole-input parser that the streaming
// Reader is checked against: it splits the input into lines first, then
// groups lines into events at blank lines. It returns the complete events
// and the bytes of an unfinished trailing event.
func refParse(in []byte) (events []sse.Event, tail []byte) {
	type line struct{ text, raw []byte }
	var lines []line
	rest := in
	for len(rest) > 0 {
		i := bytes.IndexAny(rest, "\r\n")
		if i < 0 {
			break
		}
		w := 1
		if rest[i] == '\r' && i+1 < len(rest) && rest[i+1] == '\n' {
			w = 2
		}
		lines = append(lines, line{rest[:i], rest[:i+w]})
		rest = rest[i+w:]
	}

	var cur []line
	var raw []byte
	for _, l := range lines {
		raw = append(raw, l.raw...)
		if len(l.text) > 0 {
			cur = append(cur, l)
			continue
		}
		e := sse.Event{Raw: raw}
		var data [][]byte
		nonEmpty, comments := 0, 0
		for k, c := range cur {
			text := c.text
			if len(events) == 0 && k == 0 {
				// A BOM-only first line counts as neither a field nor a
				// comment, but it still does not end the event.
				text = bytes.TrimPrefix(text, []byte("\xEF\xBB\xBF"))
			}
			if len(text) == 0 {
				continue
			}
			nonEmpty++
			if text[0] == ':' {
				comments++
				continue
			}
			name, value, found := bytes.Cut(text, []byte(":"))
			if !found {
				value = []byte{}
			}
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(name) {
			case "data":
				data = append(data, value)
			case "event":
				e.Event = value
			case "id":
				if !bytes.Contains(value, []byte{0}) {
					e.ID = value
				}
			}
		}
		if data != nil {
			e.Data = append([]byte{}, bytes.Join(data, []byte("\n"))...)
		}
		e.Comment = nonEmpty > 0 && comments == nonEmpty
		events = append(events, e)
		cur, raw = nil, nil
	}
	return events, append(raw, rest...)
}

func FuzzReader(f *testing.F) {
	// Whole fixtures seed the real grammar; the variants use a short head
	// of each, because mutants of large inputs are slow to minimise and
	// would eat most of a short fuzzing run.
	for _, fx := range fixtures {
		stream := fx.load(f)
		f.Add(uint16(0), []byte{3, 0, 7, 64}, stream)
		head := stream[:eventEnds(stream)[2]]
		f.Add(uint16(0), []byte{1}, bytes.ReplaceAll(head, []byte("\n"), []byte("\r\n")))
		f.Add(uint16(0), []byte{2}, bytes.ReplaceAll(head, []byte("\n"), []byte("\r")))
		f.Add(uint16(200), []byte{5}, head)
		f.Add(uint16(0), []byte{}, head[:len(head)-1])
	}
	f.Add(uint16(0), []byte{1}, []byte(": keepalive\n\n\n\r\rdata: a\rdata: b\r\n\r\n"))
	f.Add(uint16(8), []byte{1, 2}, []byte("\xEF\xBB\xBFdata: x\r"))
	f.Add(uint16(0), []byte{}, []byte{})

	f.Fuzz(func(t *testing.T, maxEvent uint16, splits, in []byte) {
		limit := int(maxEvent)
		if limit == 0 {
			limit = sse.DefaultMaxEvent
		}
		src := &countingReader{r: &splitReader{data: in, splits: splits}}
		r := sse.NewReader(src, int(maxEvent))
		want, tail := refParse(in)
		// Half the inputs ask Buffered after every event: it must change
		// nothing Next returns, and a yes must mean Next reads no more.
		probe := len(splits)%2 == 1
		buffered, readBefore := false, 0

		var raw []byte
		n := 0
		for r.Next() {
			if buffered && src.n != readBefore {
				t.Fatalf("Buffered reported event %d whole, but Next read %d more bytes", n, src.n-readBefore)
			}
			// Every event consumes at least one byte, so more events than
			// bytes would mean the Reader is stuck.
			if n++; n > len(in) {
				t.Fatalf("more than %d events from %d bytes", len(in), len(in))
			}
			e := r.Event()
			checkDataAt(e)
			if len(e.Raw) == 0 || len(e.Raw) > limit {
				t.Fatalf("event %d has %d raw bytes (limit %d)", n-1, len(e.Raw), limit)
			}
			if n > len(want) {
				t.Fatalf("event %d %s not in reference (which has %d)", n-1, show(e), len(want))
			}
			w := want[n-1]
			if !sameEvent(e, w) || (e.Data == nil) != (w.Data == nil) ||
				(e.Event == nil) != (w.Event == nil) || (e.ID == nil) != (w.ID == nil) {
				t.Fatalf("event %d:\n got %s\nwant %s", n-1, show(e), show(w))
			}
			raw = append(raw, e.Raw...)
			if probe {
				readBefore, buffered = src.n, r.Buffered()
			}
		}
		if buffered && r.Err() != sse.ErrEventTooLarge {
			t.Fatalf("Buffered promised an event after %d, but the Reader stopped: %v", n, r.Err())
		}
		whole := append(append([]byte{}, raw...), r.Pending()...)

		switch err := r.Err(); err {
		case nil:
			if !bytes.Equal(raw, in) || n != len(want) {
				t.Fatalf("clean end after %d of %d events, raw %q of %q", n, len(want), raw, in)
			}
		case sse.ErrTruncated:
			if !bytes.HasPrefix(in, raw) || !bytes.Equal(whole, in) || n != len(want) || len(tail) == 0 {
				t.Fatalf("truncated after %d of %d events (tail %q): raw %q pending %q of %q", n, len(want), tail, raw, r.Pending(), in)
			}
		case sse.ErrEventTooLarge:
			if !bytes.HasPrefix(in, whole) {
				t.Fatalf("raw+pending %q is not a prefix of %q", whole, in)
			}
			next := tail
			if n < len(want) {
				next = want[n].Raw
			}
			if len(next) <= limit {
				t.Fatalf("ErrEventTooLarge but the next event is %d bytes, limit %d", len(next), limit)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}
