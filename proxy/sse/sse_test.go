package sse_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/sse"
)

// fixture is one recorded stream in testdata, copied from the shared
// wire-format fixtures.
type fixture struct {
	api    string // folder: openai-chat, anthropic-messages, openai-responses
	name   string
	events int
}

var fixtures = []fixture{
	{"openai-chat", "tool_call_stream.sse", 15},
	{"openai-chat", "parallel_tool_calls_stream.sse", 21},
	{"openai-chat", "tool_call_stream_include_usage.sse", 16},
	{"anthropic-messages", "tool_use_stream.sse", 16},
	{"anthropic-messages", "parallel_tool_use_stream.sse", 23},
	{"openai-responses", "function_call_stream.sse", 18},
	{"openai-responses", "parallel_function_calls_stream.sse", 30},
}

// chunkSizes are the read sizes every fixture is fed with; 0 means the
// whole stream in one read.
var chunkSizes = []int{1, 2, 3, 7, 64, 0}

func (f fixture) path() string { return filepath.Join("testdata", f.api, f.name) }

func (f fixture) load(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(f.path())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chunkReader hands out its data in reads of the given sizes, cycling
// through them, so tests control exactly where the stream is split.
type chunkReader struct {
	data  []byte
	sizes []int
	next  int
}

func newChunkReader(data []byte, size int) *chunkReader {
	if size <= 0 {
		size = len(data) + 1
	}
	return &chunkReader{data: data, sizes: []int{size}}
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := c.sizes[c.next%len(c.sizes)]
	c.next++
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// result is everything a Reader produced, copied out of its buffers.
type result struct {
	events  []sse.Event
	raw     []byte // every event's Raw, concatenated
	pending []byte
	err     error
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneEvent(ev sse.Event) sse.Event {
	return sse.Event{
		Raw:     cloneBytes(ev.Raw),
		Event:   cloneBytes(ev.Event),
		Data:    cloneBytes(ev.Data),
		Comment: ev.Comment,
		ID:      cloneBytes(ev.ID),
	}
}

// checkDataAt: DataAt locates Data in Raw exactly when Data is a single
// line (joined lines always hold a '\n').
func checkDataAt(ev sse.Event) {
	single := ev.Data != nil && bytes.IndexByte(ev.Data, '\n') < 0
	if single != (ev.DataAt > 0) {
		panic(fmt.Sprintf("DataAt %d for Data %q", ev.DataAt, ev.Data))
	}
	if ev.DataAt > 0 && (ev.DataAt+len(ev.Data) > len(ev.Raw) || !bytes.Equal(ev.Raw[ev.DataAt:ev.DataAt+len(ev.Data)], ev.Data)) {
		panic(fmt.Sprintf("DataAt %d does not locate %q in %q", ev.DataAt, ev.Data, ev.Raw))
	}
}

func readAll(src io.Reader, maxEvent int) result {
	r := sse.NewReader(src, maxEvent)
	var res result
	for r.Next() {
		ev := r.Event()
		checkDataAt(ev)
		res.events = append(res.events, cloneEvent(ev))
		res.raw = append(res.raw, ev.Raw...)
	}
	res.pending = cloneBytes(r.Pending())
	res.err = r.Err()
	if r.Next() {
		panic("Next returned true after the Reader stopped")
	}
	return res
}

func sameEvent(a, b sse.Event) bool {
	return bytes.Equal(a.Raw, b.Raw) && bytes.Equal(a.Event, b.Event) &&
		bytes.Equal(a.Data, b.Data) && a.Comment == b.Comment && bytes.Equal(a.ID, b.ID)
}

// sameFields compares everything but Raw, for streams that differ only in
// their line breaks.
func sameFields(a, b sse.Event) bool {
	a.Raw, b.Raw = nil, nil
	return sameEvent(a, b)
}

func show(ev sse.Event) string {
	return fmt.Sprintf("{Raw:%q Event:%q Data:%q Comment:%v ID:%q}", ev.Raw, ev.Event, ev.Data, ev.Comment, ev.ID)
}

func TestFixtures(t *testing.T) {
	for _, f := range fixtures {
		stream := f.load(t)
		whole := readAll(bytes.NewReader(stream), 0)
		for _, size := range chunkSizes {
			t.Run(fmt.Sprintf("%s/%s/chunk=%d", f.api, f.name, size), func(t *testing.T) {
				res := readAll(newChunkReader(stream, size), 0)
				if res.err != nil {
					t.Fatalf("Err() = %v, want nil", res.err)
				}
				if !bytes.Equal(res.raw, stream) {
					t.Fatalf("concatenated Raw differs from the file (%d vs %d bytes)", len(res.raw), len(stream))
				}
				if len(res.pending) != 0 {
					t.Errorf("Pending() = %q after a clean end", res.pending)
				}
				if len(res.events) != f.events {
					t.Fatalf("got %d events, want %d", len(res.events), f.events)
				}
				for i, ev := range res.events {
					if !sameEvent(ev, whole.events[i]) {
						t.Errorf("event %d differs from a whole-stream read:\n got %s\nwant %s", i, show(ev), show(whole.events[i]))
					}
					checkFixtureEvent(t, f, i, len(res.events), ev)
				}
			})
		}
	}
}

// checkFixtureEvent checks what the fixtures README promises about each
// API's framing.
func checkFixtureEvent(t *testing.T, f fixture, i, n int, ev sse.Event) {
	t.Helper()
	if ev.Comment || ev.ID != nil {
		t.Errorf("event %d: unexpected comment or id: %s", i, show(ev))
	}
	if f.api == "openai-chat" && i == n-1 {
		if string(ev.Data) != "[DONE]" || ev.Event != nil {
			t.Errorf("last Chat event = %s, want data: [DONE]", show(ev))
		}
		return
	}
	var body struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(ev.Data, &body); err != nil {
		t.Errorf("event %d: Data is not JSON: %v: %q", i, err, ev.Data)
		return
	}
	switch f.api {
	case "openai-chat":
		if ev.Event != nil {
			t.Errorf("event %d: Chat event has an event name %q", i, ev.Event)
		}
	default:
		if body.Type == nil || string(ev.Event) != *body.Type {
			t.Errorf("event %d: event name %q does not match data type %v", i, ev.Event, body.Type)
		}
	}
}

// TestLineBreaks rewrites every fixture with CRLF and with bare CR line
// breaks; the fields must come out as with LF, and Raw must still rebuild
// the rewritten stream. Chunk size 1 puts a read boundary between every
// '\r' and its '\n'.
func TestLineBreaks(t *testing.T) {
	breaks := []struct {
		name, nl string
	}{
		{"CRLF", "\r\n"},
		{"CR", "\r"},
	}
	for _, f := range fixtures {
		stream := f.load(t)
		want := readAll(bytes.NewReader(stream), 0)
		for _, br := range breaks {
			converted := bytes.ReplaceAll(stream, []byte("\n"), []byte(br.nl))
			for _, size := range chunkSizes {
				t.Run(fmt.Sprintf("%s/%s/%s/chunk=%d", br.name, f.api, f.name, size), func(t *testing.T) {
					res := readAll(newChunkReader(converted, size), 0)
					if res.err != nil {
						t.Fatalf("Err() = %v", res.err)
					}
					if !bytes.Equal(res.raw, converted) {
						t.Fatal("concatenated Raw differs from the converted stream")
					}
					if len(res.events) != len(want.events) {
						t.Fatalf("got %d events, want %d", len(res.events), len(want.events))
					}
					for i := range res.events {
						if !sameFields(res.events[i], want.events[i]) {
							t.Errorf("event %d:\n got %s\nwant %s", i, show(res.events[i]), show(want.events[i]))
						}
					}
				})
			}
		}
	}
}

// ev builds an expected Event; "-" stands for a nil field so tables can
// tell an absent field from an empty one.
func ev(raw, event, data, id string, comment bool) sse.Event {
	field := func(s string) []byte {
		if s == "-" {
			return nil
		}
		return []byte(s)
	}
	return sse.Event{Raw: []byte(raw), Event: field(event), Data: field(data), ID: field(id), Comment: comment}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []sse.Event
		wantErr error
	}{
		{name: "empty input", in: ""},
		{
			name: "single data line",
			in:   "data: {\"a\":1}\n\n",
			want: []sse.Event{ev("data: {\"a\":1}\n\n", "-", `{"a":1}`, "-", false)},
		},
		{
			name: "event name and data",
			in:   "event: ping\ndata: {}\n\n",
			want: []sse.Event{ev("event: ping\ndata: {}\n\n", "ping", "{}", "-", false)},
		},
		{
			name: "keepalive comment",
			in:   ": keepalive\n\ndata: x\n\n",
			want: []sse.Event{
				ev(": keepalive\n\n", "-", "-", "-", true),
				ev("data: x\n\n", "-", "x", "-", false),
			},
		},
		{
			name: "several comment lines",
			in:   ":a\n: b\n\n",
			want: []sse.Event{ev(":a\n: b\n\n", "-", "-", "-", true)},
		},
		{
			name: "comment mixed with data is not a comment event",
			in:   ": note\ndata: x\n\n",
			want: []sse.Event{ev(": note\ndata: x\n\n", "-", "x", "-", false)},
		},
		{
			name: "blank keep-alive lines are events of their own",
			in:   "data: a\n\n\n\ndata: b\n\n",
			want: []sse.Event{
				ev("data: a\n\n", "-", "a", "-", false),
				ev("\n", "-", "-", "-", false),
				ev("\n", "-", "-", "-", false),
				ev("data: b\n\n", "-", "b", "-", false),
			},
		},
		{
			name: "stream starting with blank lines",
			in:   "\r\n\ndata: a\n\n",
			want: []sse.Event{
				ev("\r\n", "-", "-", "-", false),
				ev("\n", "-", "-", "-", false),
				ev("data: a\n\n", "-", "a", "-", false),
			},
		},
		{
			name: "multi-line data joined with LF",
			in:   "data: a\ndata: b\ndata:\ndata:  c\n\n",
			want: []sse.Event{ev("data: a\ndata: b\ndata:\ndata:  c\n\n", "-", "a\nb\n\n c", "-", false)},
		},
		{
			name: "data after a multi-line event does not leak",
			in:   "data: a\ndata: b\n\ndata: c\n\n",
			want: []sse.Event{
				ev("data: a\ndata: b\n\n", "-", "a\nb", "-", false),
				ev("data: c\n\n", "-", "c", "-", false),
			},
		},
		{
			name: "no space after colon",
			in:   "event:x\ndata:y\n\n",
			want: []sse.Event{ev("event:x\ndata:y\n\n", "x", "y", "-", false)},
		},
		{
			name: "field name without colon has an empty value",
			in:   "data\n\n",
			want: []sse.Event{ev("data\n\n", "-", "", "-", false)},
		},
		{
			name: "empty data line is empty not absent",
			in:   "data:\n\n",
			want: []sse.Event{ev("data:\n\n", "-", "", "-", false)},
		},
		{
			name: "unknown fields and retry are ignored",
			in:   "retry: 10\nfoo: bar\nDATA: no\n\n",
			want: []sse.Event{ev("retry: 10\nfoo: bar\nDATA: no\n\n", "-", "-", "-", false)},
		},
		{
			name: "last event name wins",
			in:   "event: a\nevent: b\ndata: x\n\n",
			want: []sse.Event{ev("event: a\nevent: b\ndata: x\n\n", "b", "x", "-", false)},
		},
		{
			name: "id field",
			in:   "id: 7\ndata: x\n\nid: a\x00b\n\n",
			want: []sse.Event{
				ev("id: 7\ndata: x\n\n", "-", "x", "7", false),
				ev("id: a\x00b\n\n", "-", "-", "-", false),
			},
		},
		{
			name: "CR line breaks",
			in:   "data: a\rdata: b\r\r",
			want: []sse.Event{ev("data: a\rdata: b\r\r", "-", "a\nb", "-", false)},
		},
		{
			name: "mixed line breaks",
			in:   "event: e\r\ndata: a\rdata: b\n\r\n",
			want: []sse.Event{ev("event: e\r\ndata: a\rdata: b\n\r\n", "e", "a\nb", "-", false)},
		},
		{
			name: "CR line then CRLF blank line",
			in:   "data: a\r\r\ndata: b\n\n",
			want: []sse.Event{
				ev("data: a\r\r\n", "-", "a", "-", false),
				ev("data: b\n\n", "-", "b", "-", false),
			},
		},
		{
			name: "lone CR at end of stream ends a line",
			in:   "data: a\n\r",
			want: []sse.Event{ev("data: a\n\r", "-", "a", "-", false)},
		},
		{
			name: "byte order mark at stream start is skipped",
			in:   "\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n",
			want: []sse.Event{
				ev("\xEF\xBB\xBFdata: a\n\n", "-", "a", "-", false),
				// Only the stream's first bytes may be a BOM.
				ev("\xEF\xBB\xBFdata: b\n\n", "-", "-", "-", false),
			},
		},
		{
			name: "multi-byte UTF-8 kept intact",
			in:   "data: {\"t\":\"héllo ✓ 🌍\"}\n\n",
			want: []sse.Event{ev("data: {\"t\":\"héllo ✓ 🌍\"}\n\n", "-", "{\"t\":\"héllo ✓ 🌍\"}", "-", false)},
		},
		{
			name:    "truncated after a complete line",
			in:      "data: a\n\ndata: b\n",
			want:    []sse.Event{ev("data: a\n\n", "-", "a", "-", false)},
			wantErr: sse.ErrTruncated,
		},
		{
			name:    "truncated mid-line",
			in:      "data: a\n\ndata: b",
			want:    []sse.Event{ev("data: a\n\n", "-", "a", "-", false)},
			wantErr: sse.ErrTruncated,
		},
		{
			name:    "truncated comment",
			in:      ": keepalive",
			wantErr: sse.ErrTruncated,
		},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 2, 3, 0} {
			t.Run(fmt.Sprintf("%s/chunk=%d", tt.name, size), func(t *testing.T) {
				res := readAll(newChunkReader([]byte(tt.in), size), 0)
				if !errors.Is(res.err, tt.wantErr) {
					t.Fatalf("Err() = %v, want %v", res.err, tt.wantErr)
				}
				if len(res.events) != len(tt.want) {
					t.Fatalf("got %d events, want %d: %+v", len(res.events), len(tt.want), res.events)
				}
				for i, got := range res.events {
					w := tt.want[i]
					if !sameEvent(got, w) || (got.Data == nil) != (w.Data == nil) ||
						(got.Event == nil) != (w.Event == nil) || (got.ID == nil) != (w.ID == nil) {
						t.Errorf("event %d:\n got %s\nwant %s", i, show(got), show(w))
					}
				}
				if got := string(res.raw) + string(res.pending); got != tt.in {
					t.Errorf("Raw+Pending = %q, want the input %q", got, tt.in)
				}
			})
		}
	}
}

// eventEnds returns the offset just past each event of a LF-only fixture.
func eventEnds(stream []byte) []int {
	var ends []int
	for i := 0; ; {
		j := bytes.Index(stream[i:], []byte("\n\n"))
		if j < 0 {
			return ends
		}
		i += j + 2
		ends = append(ends, i)
	}
}

func TestTruncated(t *testing.T) {
	for _, f := range fixtures {
		stream := f.load(t)
		ends := eventEnds(stream)
		if len(ends) != f.events {
			t.Fatalf("%s: found %d event ends, want %d", f.name, len(ends), f.events)
		}
		// Cut inside the first, a middle and the last event: one byte in,
		// halfway, and just before the terminating blank line.
		for _, k := range []int{0, len(ends) / 2, len(ends) - 1} {
			begin := 0
			if k > 0 {
				begin = ends[k-1]
			}
			for _, cut := range []int{begin + 1, (begin + ends[k]) / 2, ends[k] - 1} {
				in := stream[:cut]
				for _, size := range []int{1, 7, 0} {
					t.Run(fmt.Sprintf("%s/%s/event=%d/cut=%d/chunk=%d", f.api, f.name, k, cut, size), func(t *testing.T) {
						res := readAll(newChunkReader(in, size), 0)
						if res.err != sse.ErrTruncated {
							t.Fatalf("Err() = %v, want ErrTruncated", res.err)
						}
						if len(res.events) != k {
							t.Fatalf("got %d events before the cut, want %d", len(res.events), k)
						}
						if !bytes.Equal(res.raw, stream[:begin]) {
							t.Error("complete events before the cut do not rebuild the stream")
						}
						if !bytes.Equal(res.pending, stream[begin:cut]) {
							t.Errorf("Pending() = %q, want the partial event", res.pending)
						}
					})
				}
			}
		}
	}
}

// countingReader records how much of its source has been read.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestEventTooLarge(t *testing.T) {
	f := fixtures[6] // the largest stream; its last event is the largest
	stream := f.load(t)
	ends := eventEnds(stream)
	biggest, begin := 0, 0
	for i, end := range ends {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		if end-start > ends[biggest]-begin {
			biggest, begin = i, start
		}
	}
	size := ends[biggest] - begin
	tests := []struct {
		name     string
		maxEvent int
		wantErr  error
	}{
		{"limit equals the largest event", size, nil},
		{"limit one byte short", size - 1, sse.ErrEventTooLarge},
		{"limit far too small", 16, sse.ErrEventTooLarge},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 64, 0} {
			t.Run(fmt.Sprintf("%s/chunk=%d", tt.name, chunk), func(t *testing.T) {
				src := &countingReader{r: newChunkReader(stream, chunk)}
				res := readAll(src, tt.maxEvent)
				if res.err != tt.wantErr {
					t.Fatalf("Err() = %v, want %v", res.err, tt.wantErr)
				}
				for i, e := range res.events {
					if len(e.Raw) > tt.maxEvent {
						t.Errorf("event %d is %d bytes, over the limit %d", i, len(e.Raw), tt.maxEvent)
					}
				}
				if tt.wantErr == nil {
					if !bytes.Equal(res.raw, stream) {
						t.Error("concatenated Raw differs from the file")
					}
					return
				}
				// Every event before the first oversized one comes out,
				// and the Reader buffers no more than one event's worth.
				first := 0
				for i, end := range ends {
					start := 0
					if i > 0 {
						start = ends[i-1]
					}
					if end-start > tt.maxEvent {
						first = i
						break
					}
				}
				if len(res.events) != first {
					t.Fatalf("got %d events, want the %d before the oversized one", len(res.events), first)
				}
				consumed := len(res.raw)
				if !bytes.HasPrefix(stream[consumed:], res.pending) {
					t.Error("Pending() is not the stream's continuation")
				}
				if src.n > consumed+tt.maxEvent+1 {
					t.Errorf("read %d bytes, more than %d consumed + limit %d + 1", src.n, consumed, tt.maxEvent)
				}
			})
		}
	}
}

// TestLargeEvents makes the buffer grow past its initial size, with and
// without a limit that is hit exactly.
func TestLargeEvents(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 6<<10) // 96 KiB, several buffer doublings
	var stream []byte
	stream = sse.AppendEvent(stream, "small", []byte("x"))
	stream = sse.AppendEvent(stream, "big", []byte(big))
	stream = sse.AppendEvent(stream, "", []byte(big[:5000]+"\n"+big[:7000]))
	stream = append(stream, "data: "+big+"\r\ndata: the largest event\r\n\r\n"...)
	stream = sse.AppendComment(stream, "keepalive")
	wantData := []string{"x", big, big[:5000] + "\n" + big[:7000], big + "\nthe largest event", ""}
	largest := len("data: " + big + "\r\ndata: the largest event\r\n\r\n")

	tests := []struct {
		name     string
		maxEvent int
		wantErr  error
		events   int
	}{
		{"default limit", 0, nil, 5},
		{"limit equals the largest event", largest, nil, 5},
		{"limit one byte short", largest - 1, sse.ErrEventTooLarge, 3},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 7, 4096, 0} {
			t.Run(fmt.Sprintf("%s/chunk=%d", tt.name, size), func(t *testing.T) {
				res := readAll(newChunkReader(stream, size), tt.maxEvent)
				if res.err != tt.wantErr || len(res.events) != tt.events {
					t.Fatalf("got %d events, err %v; want %d, %v", len(res.events), res.err, tt.events, tt.wantErr)
				}
				for i, e := range res.events {
					if string(e.Data) != wantData[i] {
						t.Errorf("event %d: Data of %d bytes, want %d", i, len(e.Data), len(wantData[i]))
					}
				}
				if !bytes.HasPrefix(stream, res.raw) || (tt.wantErr == nil && len(res.raw) != len(stream)) {
					t.Error("concatenated Raw does not rebuild the stream")
				}
			})
		}
	}
}

// TestManyLinesInOneEvent guards against rescanning: an event of many
// short lines that use only one kind of line break, read in one go, must
// parse in linear time. A search for the other kind of break that restarts
// on every line makes the CR case about a hundred times slower here, and
// the gap grows with the square of the event size.
func TestManyLinesInOneEvent(t *testing.T) {
	const lines = 200_000
	for _, nl := range []string{"\r", "\n", "\r\n"} {
		t.Run(fmt.Sprintf("%q", nl), func(t *testing.T) {
			stream := []byte(strings.Repeat("data: x"+nl, lines) + nl)
			res := readAll(bytes.NewReader(stream), 0)
			if res.err != nil || len(res.events) != 1 {
				t.Fatalf("got %d events, err %v", len(res.events), res.err)
			}
			if want := strings.Repeat("x\n", lines-1) + "x"; string(res.events[0].Data) != want {
				t.Errorf("Data has %d bytes, want %d", len(res.events[0].Data), len(want))
			}
			if got := sse.AppendEvent(nil, "", res.events[0].Data); len(got) != len("data: x\n")*lines+1 {
				t.Errorf("AppendEvent gave %d bytes", len(got))
			}
		})
	}
}

// failingReader returns its data and then a non-EOF error in the same call.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n := copy(p, f.data)
	f.data = f.data[n:]
	if len(f.data) == 0 {
		return n, f.err
	}
	return n, nil
}

// liarReader breaks the io.Reader contract by reporting more bytes than
// fit in p.
type liarReader struct{}

func (liarReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestSourceErrors(t *testing.T) {
	boom := errors.New("connection reset")
	tests := []struct {
		name       string
		src        io.Reader
		wantEvents int
		wantErr    error
	}{
		{"error after complete events", &failingReader{[]byte("data: a\n\ndata: b\n\n"), boom}, 2, boom},
		{"error inside an event", &failingReader{[]byte("data: a\n\ndata: b\n"), boom}, 1, boom},
		{"error right after a CR", &failingReader{[]byte("data: a\r\r"), boom}, 1, boom},
		{"source that never makes progress", emptyReader{}, 0, io.ErrNoProgress},
		{"source that claims too many bytes", liarReader{}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := readAll(tt.src, 0)
			if tt.wantErr == nil {
				// No sentinel to match: any error will do, as long as
				// the Reader neither panics nor reports success.
				if res.err == nil {
					t.Fatal("Err() = nil, want an error")
				}
				return
			}
			if res.err != tt.wantErr {
				t.Fatalf("Err() = %v, want %v", res.err, tt.wantErr)
			}
			if len(res.events) != tt.wantEvents {
				t.Fatalf("got %d events, want %d", len(res.events), tt.wantEvents)
			}
		})
	}
}

// Buffered says yes exactly when the bytes read so far end another event,
// whatever the line breaks, and asking changes nothing Next returns.
func TestBuffered(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"LF", "data: a\n\ndata: b\n\ndata: c\n\n"},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\ndata: c\r\n\r\n"},
		{"CR", "data: a\r\rdata: b\r\rdata: c\r\r."},
		{"mixed", "data: a\n\r\ndata: b\r\n\ndata: c\r\n\r\n"},
		{"multi-line data", "data: a\ndata: b\n\ndata: c\ndata: d\n\nevent: e\n\n"},
		{"partial last", "data: a\n\ndata: b\n\ndata: c\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := readAll(newChunkReader([]byte(tc.in), 0), 0)
			src := &countingReader{r: newChunkReader([]byte(tc.in), 0)}
			r := sse.NewReader(src, 0)
			var got []sse.Event
			var answers []bool
			for r.Next() {
				got = append(got, cloneEvent(r.Event()))
				answers = append(answers, r.Buffered())
				if r.Buffered() != answers[len(answers)-1] {
					t.Fatal("a second Buffered answered differently")
				}
			}
			if r.Err() != want.err || len(got) != len(want.events) {
				t.Fatalf("with Buffered: %d events, %v; without: %d, %v", len(got), r.Err(), len(want.events), want.err)
			}
			for i := range got {
				if !sameEvent(got[i], want.events[i]) {
					t.Errorf("event %d: %s with Buffered, %s without", i, show(got[i]), show(want.events[i]))
				}
				// The whole input arrives in the first read, so every
				// event but the last has a whole one after it.
				if wantB := i < len(got)-1; answers[i] != wantB {
					t.Errorf("after event %d Buffered = %v, want %v", i, answers[i], wantB)
				}
			}
		})
	}
}

func TestReset(t *testing.T) {
	r := sse.NewReader(strings.NewReader("data: partial"), 0)
	for r.Next() {
	}
	if r.Err() != sse.ErrTruncated {
		t.Fatalf("Err() = %v, want ErrTruncated", r.Err())
	}
	for _, f := range fixtures {
		t.Run(f.api+"/"+f.name, func(t *testing.T) {
			stream := f.load(t)
			r.Reset(newChunkReader(stream, 5))
			var raw []byte
			n := 0
			for r.Next() {
				raw = append(raw, r.Event().Raw...)
				n++
			}
			if r.Err() != nil || n != f.events || !bytes.Equal(raw, stream) {
				t.Fatalf("after Reset: %d events, err %v, raw equal %v", n, r.Err(), bytes.Equal(raw, stream))
			}
		})
	}
}

// TestAppendToFieldsKeepsRaw checks that the aliasing documented on Event
// cannot corrupt Raw when a caller appends to one of the fields.
func TestAppendToFieldsKeepsRaw(t *testing.T) {
	const in = "event: e\nid: 1\ndata: d\n\n"
	r := sse.NewReader(strings.NewReader(in), 0)
	if !r.Next() {
		t.Fatal(r.Err())
	}
	e := r.Event()
	_ = append(e.Event, "XX"...)
	_ = append(e.ID, "XX"...)
	_ = append(e.Data, "XX"...)
	_ = append(e.Raw, "XX"...)
	if string(e.Raw) != in || string(r.Pending()) != "" {
		t.Errorf("Raw = %q after appending to fields, want %q", e.Raw, in)
	}
}

// TestNoAllocs guards the hot path: a reused Reader must not allocate per
// event, including for multi-line data once its scratch buffer has grown.
func TestNoAllocs(t *testing.T) {
	stream := append(fixtures[1].load(t), "data: a\ndata: b\n\n: keepalive\n\n\n"...)
	src := bytes.NewReader(stream)
	r := sse.NewReader(src, 0)
	read := func() {
		src.Reset(stream)
		r.Reset(src)
		for r.Next() {
		}
		if r.Err() != nil {
			t.Fatal(r.Err())
		}
	}
	read()
	if n := testing.AllocsPerRun(20, read); n != 0 {
		t.Errorf("%v allocations per stream, want 0", n)
	}
}

func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name     string
		event    string
		data     string
		want     string
		wantData string // what a Reader gives back
	}{
		{"data only", "", `{"a":1}`, "data: {\"a\":1}\n\n", `{"a":1}`},
		{"named event", "message_stop", `{"type":"message_stop"}`, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", `{"type":"message_stop"}`},
		{"empty data", "ping", "", "event: ping\ndata:\n\n", ""},
		{"multi-line data", "", "a\nb\n\nc", "data: a\ndata: b\ndata:\ndata: c\n\n", "a\nb\n\nc"},
		{"trailing newline survives", "", "a\n", "data: a\ndata:\n\n", "a\n"},
		{"leading space survives", "", " a", "data:  a\n\n", " a"},
		{"CRLF and CR become LF", "", "a\r\nb\rc", "data: a\ndata: b\ndata: c\n\n", "a\nb\nc"},
		{"line break in name is cut", "x\ndata: forged", "d", "event: x\ndata: d\n\n", "d"},
		{"name that is only a line break", "\r\n", "d", "data: d\n\n", "d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("keep")
			got := sse.AppendEvent(prefix, tt.event, []byte(tt.data))
			if string(got) != "keep"+tt.want {
				t.Fatalf("AppendEvent = %q, want %q", got, "keep"+tt.want)
			}
			res := readAll(bytes.NewReader(got[len(prefix):]), 0)
			if res.err != nil || len(res.events) != 1 {
				t.Fatalf("read back: %d events, err %v", len(res.events), res.err)
			}
			e := res.events[0]
			wantName, _, _ := strings.Cut(tt.event, "\n")
			wantName = strings.TrimSuffix(wantName, "\r")
			if string(e.Data) != tt.wantData || string(e.Event) != wantName || e.Comment {
				t.Errorf("read back %s, want Event %q Data %q", show(e), wantName, tt.wantData)
			}
		})
	}
}

func TestAppendComment(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"keepalive", "keepalive", ": keepalive\n\n"},
		{"empty", "", ":\n\n"},
		{"multi-line", "a\r\nb\nc", ": a\n: b\n: c\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sse.AppendComment(nil, tt.text)
			if string(got) != tt.want {
				t.Fatalf("AppendComment = %q, want %q", got, tt.want)
			}
			res := readAll(bytes.NewReader(got), 0)
			if res.err != nil || len(res.events) != 1 || !res.events[0].Comment || res.events[0].Data != nil {
				t.Fatalf("read back %+v, err %v: want one comment event", res.events, res.err)
			}
		})
	}
}

func TestAppendedStreamRoundTrip(t *testing.T) {
	// Rebuilding a fixture from its parsed fields must give an equivalent
	// stream, which is how a proxy would re-emit an edited event.
	for _, f := range fixtures {
		t.Run(f.api+"/"+f.name, func(t *testing.T) {
			want := readAll(bytes.NewReader(f.load(t)), 0)
			var out []byte
			for _, e := range want.events {
				out = sse.AppendEvent(out, string(e.Event), e.Data)
			}
			out = sse.AppendComment(out, "keepalive")
			got := readAll(newChunkReader(out, 3), 0)
			if got.err != nil || len(got.events) != len(want.events)+1 {
				t.Fatalf("got %d events, err %v", len(got.events), got.err)
			}
			for i, e := range want.events {
				if !sameFields(got.events[i], e) {
					t.Errorf("event %d:\n got %s\nwant %s", i, show(got.events[i]), show(e))
				}
			}
			if !got.events[len(want.events)].Comment {
				t.Error("appended keepalive is not a comment event")
			}
		})
	}
}

func BenchmarkReader(b *testing.B) {
	stream := fixtures[1].load(b) // Chat parallel tool calls
	src := bytes.NewReader(stream)
	r := sse.NewReader(src, 0)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(stream)
		r.Reset(src)
		for r.Next() {
		}
		if r.Err() != nil {
			b.Fatal(r.Err())
		}
	}
}

func BenchmarkAppendEvent(b *testing.B) {
	data := []byte(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"Bos"}}`)
	buf := make([]byte, 0, 512)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		buf = sse.AppendEvent(buf[:0], "content_block_delta", data)
	}
}

// signalReader serves its chunks one Read at a time, telling waiting each
// time it is asked for more and blocking until next gives the next chunk.
type signalReader struct {
	waiting chan struct{}
	next    chan []byte
}

func (s *signalReader) Read(p []byte) (int, error) {
	s.waiting <- struct{}{}
	b, ok := <-s.next
	if !ok {
		return 0, io.EOF
	}
	if len(b) > len(p) {
		panic("chunk larger than the read")
	}
	return copy(p, b), nil
}

// TestDrainedReaderHoldsNoBuffer: a reader waiting for the next event with
// nothing pending has handed its buffer back and waits in a small one, and
// an event larger than that, read in pieces, comes back whole.
func TestDrainedReaderHoldsNoBuffer(t *testing.T) {
	const piece = 1 << 10 // the reader's small buffer
	src := &signalReader{waiting: make(chan struct{}), next: make(chan []byte)}
	rd := sse.NewReader(src, 0)
	long := "data: " + strings.Repeat("x", 3*piece) + "\n\n"
	events := make(chan string, 3)
	go func() {
		for rd.Next() {
			events <- string(rd.Event().Raw)
		}
		close(events)
	}()
	<-src.waiting
	src.next <- []byte("data: a\n\n")
	if got := <-events; got != "data: a\n\n" {
		t.Fatalf("first event %q", got)
	}
	<-src.waiting
	if c := rd.BufferCap(); c > piece {
		t.Fatalf("a drained reader keeps a buffer of %d bytes while it waits", c)
	}
	for i := 0; i < len(long); i += piece {
		src.next <- []byte(long[i:min(i+piece, len(long))])
		<-src.waiting
	}
	close(src.next)
	if got := <-events; got != long {
		t.Fatalf("long event of %d bytes, want %d", len(got), len(long))
	}
	if _, more := <-events; more || rd.Err() != nil {
		t.Fatalf("after the end: err %v", rd.Err())
	}
}

// eventReads serves a stream one event per Read, as an upstream that
// flushes every event is read: the reader is drained after each.
type eventReads struct {
	ends   []int
	stream []byte
	at, i  int
}

func (e *eventReads) Read(p []byte) (int, error) {
	if e.i >= len(e.ends) {
		return 0, io.EOF
	}
	n := copy(p, e.stream[e.at:e.ends[e.i]])
	e.at += n
	if e.at == e.ends[e.i] {
		e.i++
	}
	return n, nil
}

// BenchmarkReaderEventPerRead is BenchmarkReader with every event read on
// its own, where the reader waits in its small buffer between events.
func BenchmarkReaderEventPerRead(b *testing.B) {
	stream := fixtures[1].load(b)
	ends := eventEnds(stream)
	src := &eventReads{ends: ends, stream: stream}
	r := sse.NewReader(src, 0)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		*src = eventReads{ends: ends, stream: stream}
		r.Reset(src)
		n := 0
		for r.Next() {
			n++
		}
		if r.Err() != nil || n != len(ends) {
			b.Fatal(r.Err(), n)
		}
	}
}
