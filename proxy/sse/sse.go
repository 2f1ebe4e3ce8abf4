// Package sse reads and writes Server-Sent Events streams without losing a
// byte.
//
// A proxy that inspects streamed LLM responses has to forward exactly what
// the upstream sent, so the Reader hands out every event's raw bytes next to
// its parsed fields instead of expecting callers to re-serialise them. The
// Reader also tells a stream that was cut mid-event apart from one that ended
// cleanly, which the plain SSE algorithm (drop the partial event) hides.
package sse

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
)

// DefaultMaxEvent is the event size limit NewReader uses when given a
// non-positive maxEvent. It is generous because a final Responses
// "response.completed" event repeats the whole response.
const DefaultMaxEvent = 8 << 20

const (
	initialBufSize = 4 << 10
	// maxEmptyReads bounds how long a source that keeps returning (0, nil)
	// is tolerated before it is treated as broken rather than slow.
	maxEmptyReads = 100
)

var (
	// ErrEventTooLarge is reported by Reader.Err when one event, including
	// its terminating blank line, is longer than the Reader's limit.
	ErrEventTooLarge = errors.New("sse: event exceeds size limit")

	// ErrTruncated is reported by Reader.Err when the source reaches EOF
	// after some bytes of an event but before its terminating blank line.
	ErrTruncated = errors.New("sse: stream ended inside an event")

	errBadRead = errors.New("sse: source returned an invalid byte count")
)

var bom = []byte("\xEF\xBB\xBF")

// Event is one event of a stream: the lines up to and including the blank
// line that ends it.
//
// Every blank line ends an event, so a blank line that directly follows
// another one (a bare keep-alive) is returned as an event of its own whose
// Raw is just that line break and whose other fields are empty. Writing the
// Raw of every event in order therefore reproduces the stream exactly.
//
// The slices of an Event returned by Reader.Event alias the Reader's
// internal buffers and stay valid only until the next call to Next or
// Reset; copy anything that must outlive that. Their capacity is capped, so
// appending to one copies instead of overwriting the bytes that follow it.
type Event struct {
	// Raw is the event exactly as received, including the line break of
	// its terminating blank line.
	Raw []byte
	// Event is the value of the last "event" field, or nil if there was
	// none.
	Event []byte
	// Data is the values of all "data" fields joined with "\n", or nil if
	// the event had no data field (an empty "data:" line gives a non-nil
	// empty slice).
	Data []byte
	// DataAt is where Data starts in Raw when it is the value of a single
	// data line, as it nearly always is, and 0 otherwise (no field
	// name can be empty, so Data never starts at 0). A caller that keeps a
	// copy of Raw can then find Data in it instead of copying it too.
	DataAt int
	// Comment reports whether the event has at least one line and all of
	// its lines are comments (start with ':'), as in ": keepalive".
	Comment bool
	// ID is the value of the last "id" field of this event, or nil. Unlike
	// a browser, the Reader does not carry it over to later events.
	ID []byte
}

// Reader splits an SSE stream into events. Use it as an iterator: call Next
// until it returns false, read each event with Event, then check Err.
type Reader struct {
	src io.Reader
	max int

	buf []byte
	// pooled: buf is one of bufs, handed back whenever the reader is
	// drained; wait is what a drained reader reads into meanwhile.
	pooled bool
	wait   *[waitBufSize]byte
	// buf[start:end] holds the bytes read but not yet returned. Within
	// it, line is where the line being scanned begins, and buf[line:scan]
	// is known to contain no line break, so short reads never cause a
	// rescan.
	start, end int
	line, scan int

	breaks  breakFinder // positions relative to buf
	cur     fields      // of the event being scanned
	data    []byte      // joined Data of multi-line events
	ev      Event
	atStart bool // the next event begins at byte 0 of the stream
	srcErr  error
	err     error
	done    bool
}

// NewReader returns a Reader of the stream src that refuses events longer
// than maxEvent bytes; maxEvent <= 0 means DefaultMaxEvent. The buffer grows
// on demand up to about maxEvent bytes.
func NewReader(src io.Reader, maxEvent int) *Reader {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	return &Reader{src: src, max: maxEvent, atStart: true}
}

// Reset makes r read a new stream from src with the same size limit,
// keeping its buffers so that pooled Readers do not allocate per stream.
func (r *Reader) Reset(src io.Reader) {
	*r = Reader{src: src, max: r.max, buf: r.buf, pooled: r.pooled, wait: r.wait, data: r.data[:0], atStart: true}
}

// BufferCap is the size of the Reader's buffer, for a pool that keeps only
// Readers whose buffer is of an ordinary size.
func (r *Reader) BufferCap() int { return cap(r.buf) }

// Next advances to the next event and reports whether there is one. It
// returns false at the end of the stream or on an error; Err tells which.
func (r *Reader) Next() bool {
	if r.done {
		return false
	}
	for {
		if n, ok := r.scanEvent(); ok {
			return r.emit(n)
		}
		if r.srcErr != nil {
			return r.stop()
		}
		if r.end-r.start > r.max {
			return r.fail(ErrEventTooLarge)
		}
		r.fill()
	}
}

// emit makes the n bytes at start the current event. It and stop are out
// of line: a proxy holds a quiet stream in fill, under Next's frame, and
// kept small that frame lets the runtime shrink the stack of each of
// thousands of held streams by half.
//
//go:noinline
func (r *Reader) emit(n int) bool {
	if n > r.max {
		return r.fail(ErrEventTooLarge)
	}
	raw := r.buf[r.start : r.start+n : r.start+n]
	r.start += n
	r.line, r.scan = r.start, r.start
	r.ev = r.cur.build(raw, r.data)
	r.cur = fields{}
	r.atStart = false
	return true
}

// stop ends the events once the source has: cleanly at EOF between
// events, else with the source's error or ErrTruncated.
//
//go:noinline
func (r *Reader) stop() bool {
	err := r.srcErr
	if err == io.EOF {
		err = nil
		if r.start < r.end {
			err = ErrTruncated
		}
	}
	return r.fail(err)
}

// Event returns the event found by the last successful call to Next. Its
// slices are valid only until the next call to Next or Reset.
func (r *Reader) Event() Event { return r.ev }

// Err returns the error that stopped the Reader: nil after a clean end of
// stream, ErrTruncated, ErrEventTooLarge, or an error from the source.
func (r *Reader) Err() error { return r.err }

// Pending returns the bytes read from the source but not covered by any
// returned event. After Next has returned false this is the cut-off or
// oversized event, so a proxy can still forward it, followed by whatever
// the source has left, and lose nothing. The slice is valid only until the
// next call to Next or Reset.
func (r *Reader) Pending() []byte { return r.buf[r.start:r.end] }

// Buffered reports whether the bytes already read hold another whole
// event, so the next Next returns without reading from the source. A
// proxy uses it to write the events of one read with one flush. It scans
// no byte twice: what it finds is kept for Next. Like Next, it may reuse
// the joined Data of the event last returned; Raw stays valid.
func (r *Reader) Buffered() bool {
	if r.done {
		return false
	}
	_, ok := r.scanEvent()
	return ok
}

func (r *Reader) fail(err error) bool {
	r.err = err
	r.done = true
	r.ev = Event{}
	return false
}

// scanEvent looks for the blank line ending the event at buf[start:] and
// returns the event's length.
func (r *Reader) scanEvent() (int, bool) {
	// Once the source is finished, a trailing '\r' can no longer turn out
	// to be the first half of "\r\n".
	atEnd := r.srcErr != nil
	for {
		at, width := r.breaks.next(r.buf[:r.end], r.scan, atEnd)
		if width == 0 {
			r.scan = r.end
			if !atEnd && r.scan > r.line && r.buf[r.scan-1] == '\r' {
				r.scan--
			}
			return 0, false
		}
		next := at + width
		if at == r.line {
			return next - r.start, true
		}
		// Parsing each line as it is found saves a second pass over the
		// event.
		r.addLine(r.line, at)
		r.line, r.scan = next, next
	}
}

// breakFinder locates line breaks in a buffer that is consumed front to
// back and may grow at the end. It remembers the next '\r' and '\n' it has
// seen, or how far it looked without finding one, because searching afresh
// for each line would rescan the rest of the buffer for the kind of break a
// stream never uses, making CR-only or LF-only input quadratic.
type breakFinder struct {
	cr, lf byteFinder
}

// next returns the position and width (1 or 2) of the first line break in
// b[from:], or a width of 0 if there is none yet. A '\r' at the very end of
// b only counts when atEnd, since otherwise a '\n' may still follow. Calls
// must not move from backwards or change bytes already searched.
func (f *breakFinder) next(b []byte, from int, atEnd bool) (int, int) {
	// This runs once per line, so the remembered answers are checked here
	// rather than in a call that the compiler will not inline.
	lf, cr := -1, -1
	switch {
	case f.lf.end > from:
		lf = f.lf.end - 1
	case f.lf.end != 0 || f.lf.upTo < len(b):
		lf = f.lf.search(b, from, '\n')
	}
	switch {
	case f.cr.end > from:
		cr = f.cr.end - 1
	case f.cr.end != 0 || f.cr.upTo < len(b):
		cr = f.cr.search(b, from, '\r')
	}
	if cr >= 0 && (lf < 0 || cr < lf) {
		switch {
		case cr+1 == lf:
			return cr, 2
		case cr+1 < len(b) || atEnd:
			return cr, 1
		default:
			return 0, 0
		}
	}
	if lf >= 0 {
		return lf, 1
	}
	return 0, 0
}

// byteFinder is one half of breakFinder. Its zero value knows nothing.
type byteFinder struct {
	// end is one past the occurrence last found, or 0 when the last
	// search found none before upTo. Storing it off by one makes the zero
	// value mean "nothing found yet".
	end  int
	upTo int
}

// search returns the first occurrence of c in b[from:], or -1, skipping
// what an earlier search already ruled out.
func (f *byteFinder) search(b []byte, from int, c byte) int {
	start := from
	if f.end == 0 {
		start = max(from, f.upTo)
	}
	if i := bytes.IndexByte(b[start:], c); i >= 0 {
		f.end = start + i + 1
		return start + i
	}
	f.end, f.upTo = 0, len(b)
	return -1
}

// span locates a field value within its event's Raw; offsets are relative
// to the event's first byte so that they survive the buffer being moved.
type span struct {
	set      bool
	from, to int
}

func (s span) in(raw []byte) []byte {
	if !s.set {
		return nil
	}
	// Capping capacity keeps a caller's append to a field from
	// overwriting the rest of Raw.
	return raw[s.from:s.to:s.to]
}

// fields accumulates what the lines of the event being scanned say.
type fields struct {
	lines, comments, dataLines int
	event, id                  span
	data                       span // the first data line; Reader.data joins more
}

func (f *fields) build(raw, joined []byte) Event {
	ev := Event{
		Raw:     raw,
		Event:   f.event.in(raw),
		ID:      f.id.in(raw),
		Data:    f.data.in(raw),
		Comment: f.lines > 0 && f.comments == f.lines,
	}
	if f.dataLines > 1 {
		ev.Data = joined[:len(joined):len(joined)]
	} else if f.data.set {
		ev.DataAt = f.data.from
	}
	return ev
}

// addLine records the non-blank line buf[from:to] of the event that starts
// at buf[start].
func (r *Reader) addLine(from, to int) {
	f := &r.cur
	// The spec lets a stream open with a byte order mark that is not part
	// of the first field name.
	if r.atStart && from == 0 && bytes.HasPrefix(r.buf[:to], bom) {
		from += len(bom)
		if from == to {
			return
		}
	}
	f.lines++
	if r.buf[from] == ':' {
		f.comments++
		return
	}
	nameEnd, valueFrom := to, to
	if colon := bytes.IndexByte(r.buf[from:to], ':'); colon >= 0 {
		nameEnd = from + colon
		valueFrom = nameEnd + 1
		if valueFrom < to && r.buf[valueFrom] == ' ' {
			valueFrom++
		}
	}
	value := span{set: true, from: valueFrom - r.start, to: to - r.start}
	switch string(r.buf[from:nameEnd]) {
	case "data":
		// The common single-line case keeps aliasing the buffer; joining
		// is deferred until a second line shows it is needed.
		switch f.dataLines {
		case 0:
			f.data = value
		case 1:
			r.data = append(r.data[:0], r.buf[r.start+f.data.from:r.start+f.data.to]...)
			fallthrough
		default:
			r.data = append(r.data, '\n')
			r.data = append(r.data, r.buf[valueFrom:to]...)
		}
		f.dataLines++
	case "event":
		f.event = value
	case "id":
		// The spec ignores ids containing NUL.
		if bytes.IndexByte(r.buf[valueFrom:to], 0) < 0 {
			f.id = value
		}
	}
}

// A drained reader, one that has returned every byte it read, waits for
// the next bytes in a small buffer of its own, and takes a full one from
// bufs only for an event that does not fit. A proxy holding ten thousand
// quiet streams kept a 4 KiB buffer for each, 39 MiB in all, to wait
// with, and took one for each again when they all ended at once; a chat
// chunk is a few hundred bytes, so a stream reads them in the small
// buffer.
const waitBufSize = 1 << 10

var bufs = sync.Pool{New: func() any { return new([initialBufSize]byte) }}

// fill reads more of the source into buf, making room first if needed.
func (r *Reader) fill() {
	if r.start == r.end {
		// Nothing pending: rewinding is free and avoids a later copy.
		r.start, r.end, r.line, r.scan = 0, 0, 0, 0
		r.breaks = breakFinder{}
		r.drained()
	}
	if r.end == len(r.buf) {
		r.makeRoom()
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			r.srcErr = errBadRead
			return
		}
		r.end += n
		if err != nil {
			r.srcErr = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.srcErr = io.ErrNoProgress
}

// drained hands a pooled buffer back and waits in the small one. A buffer
// grown past the pooled size for a large event is kept: such events tend
// to come again.
func (r *Reader) drained() {
	if r.pooled {
		bufs.Put((*[initialBufSize]byte)(r.buf))
		r.buf, r.pooled = nil, false
	}
	if r.buf != nil {
		return
	}
	if r.wait == nil {
		r.wait = new([waitBufSize]byte)
	}
	r.buf = r.wait[:]
	if r.max < waitBufSize {
		// One byte past the limit, as makeRoom allows.
		r.buf = r.buf[:r.max+1]
	}
}

// makeRoom frees space at the end of a full buffer. It slides pending bytes
// to the front only when at least as many bytes were consumed as must be
// copied (so copying stays proportional to the stream length) and grows
// the buffer otherwise, never past what one event of the limit needs.
func (r *Reader) makeRoom() {
	// One byte past the limit is enough to prove an event too large, and
	// lets an event of exactly max bytes ending in '\r' see whether '\n'
	// follows.
	limit := r.max
	if limit < math.MaxInt {
		limit++
	}
	pending := r.end - r.start
	size := len(r.buf)
	if size < limit && (r.start == 0 || r.start < pending) {
		switch {
		case size < initialBufSize:
			size = min(initialBufSize, limit)
		case size > limit/2:
			size = limit
		default:
			size *= 2
		}
	}
	if size != len(r.buf) {
		r.grow(size)
	} else {
		copy(r.buf, r.buf[r.start:r.end])
	}
	r.line -= r.start
	r.scan -= r.start
	r.start, r.end = 0, pending
	// Rescanning pending bytes costs no more than the copy just made.
	r.breaks = breakFinder{}
}

// grow moves the pending bytes into a buffer of size bytes, a pooled one
// when that is the pooled size.
func (r *Reader) grow(size int) {
	var grown []byte
	pooled := size == initialBufSize
	if pooled {
		grown = bufs.Get().(*[initialBufSize]byte)[:]
	} else {
		grown = make([]byte, size)
	}
	copy(grown, r.buf[r.start:r.end])
	if r.pooled {
		bufs.Put((*[initialBufSize]byte)(r.buf))
	}
	r.buf, r.pooled = grown, pooled
}

// AppendEvent appends an event with the given name and data to dst in the
// form "event: NAME\ndata: LINE\n...\n\n" and returns the extended slice.
// The event line is left out when event is "". Data is split into one data
// line per line of data, so a Reader gives it back unchanged, except that
// "\r\n" and "\r" come back as "\n" because SSE cannot carry them. Anything
// from the first line break of event on is dropped, as it would otherwise
// forge extra fields.
func AppendEvent(dst []byte, event string, data []byte) []byte {
	if i := strings.IndexAny(event, "\r\n"); i >= 0 {
		event = event[:i]
	}
	if event != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, event...)
		dst = append(dst, '\n')
	}
	var breaks breakFinder
	for pos := 0; ; {
		at, width := breaks.next(data, pos, true)
		if width == 0 {
			at = len(data)
		}
		dst = append(dst, "data:"...)
		if at > pos {
			dst = append(dst, ' ')
			dst = append(dst, data[pos:at]...)
		}
		dst = append(dst, '\n')
		if width == 0 {
			break
		}
		pos = at + width
	}
	return append(dst, '\n')
}

// AppendComment appends a comment event ": TEXT\n\n" to dst and returns the
// extended slice; a multi-line text becomes one comment line per line. It is
// what a proxy sends to keep an idle connection open.
func AppendComment(dst []byte, text string) []byte {
	for {
		n := strings.IndexAny(text, "\r\n")
		line := text
		if n >= 0 {
			line = text[:n]
		}
		dst = append(dst, ':')
		if line != "" {
			dst = append(dst, ' ')
			dst = append(dst, line...)
		}
		dst = append(dst, '\n')
		if n < 0 {
			break
		}
		width := 1
		if text[n] == '\r' && n+1 < len(text) && text[n+1] == '\n' {
			width = 2
		}
		text = text[n+width:]
	}
	return append(dst, '\n')
}
