package gemini

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/toolgate/toolgate/proxy/sse"
)

// ErrArray reports a JSON-array stream that is not one array of objects.
var ErrArray = errors.New("gemini: malformed JSON-array stream")

// ErrElementTooLarge reports an array element over the reader's limit.
var ErrElementTooLarge = errors.New("gemini: stream element too large")

// ArrayReader reads the stream :streamGenerateContent sends without
// alt=sse: one JSON array of GenerateContentResponse objects, written
// element by element. It hands each element to the pipeline as an event
// whose Data is the element and whose Raw is every byte since the previous
// event (the bracket or comma and whitespace before it), so the events'
// Raw joined are the stream byte for byte. The closing bracket, and any
// whitespace after it, are events of their own with no Data; the stream is
// complete when the body ends cleanly after the bracket.
type ArrayReader struct {
	src  io.Reader
	max  int
	buf  []byte
	at   int // start of the bytes not yet returned
	scan scanState
	ev   sse.Event
	err  error
	eof  bool
	// closed is set once the closing bracket was returned.
	closed bool
}

// scanState is where the scanner is, kept across reads so that no byte
// is scanned twice.
type scanState struct {
	pos      int // next byte to scan, relative to at
	stage    int // before '[', before an element, after an element, inside one
	elem     int // start of the element being read, relative to at
	count    int // elements read
	depth    int
	inString bool
	escaped  bool
}

// Stages of the scanner.
const (
	stageOpen = iota
	stageValue
	stageComma
	stageInside
)

// NewArrayReader reads src; an element longer than max fails the stream.
func NewArrayReader(src io.Reader, max int) *ArrayReader {
	return &ArrayReader{src: src, max: max}
}

// Event returns the event Next found.
func (r *ArrayReader) Event() sse.Event { return r.ev }

// Err returns what ended the stream early, or nil at a clean end.
func (r *ArrayReader) Err() error { return r.err }

// Buffered reports false: each element is written as it comes.
func (r *ArrayReader) Buffered() bool { return false }

// Closed reports whether the closing bracket was read.
func (r *ArrayReader) Closed() bool { return r.closed }

// Next finds the next element, the closing bracket, or whitespace after
// it.
func (r *ArrayReader) Next() bool {
	if r.err != nil {
		return false
	}
	for {
		done, err := r.step()
		if err != nil {
			r.err = err
			return false
		}
		if done {
			return true
		}
		if r.eof {
			if !r.closed {
				r.err = io.ErrUnexpectedEOF
			}
			return false
		}
		if len(r.buf)-r.at > r.max {
			r.err = ErrElementTooLarge
			return false
		}
		r.fill()
	}
}

// fill reads more bytes, dropping those already returned.
func (r *ArrayReader) fill() {
	if r.at > 0 {
		n := copy(r.buf, r.buf[r.at:])
		r.buf = r.buf[:n]
		r.at = 0
	}
	if cap(r.buf)-len(r.buf) < 4096 {
		nb := make([]byte, len(r.buf), 2*cap(r.buf)+4096)
		copy(nb, r.buf)
		r.buf = nb
	}
	n, err := r.src.Read(r.buf[len(r.buf):cap(r.buf)])
	r.buf = r.buf[:len(r.buf)+n]
	if err == io.EOF {
		r.eof = true
	} else if err != nil {
		r.err = err
		r.eof = true
	}
}

// step scans the buffered bytes; done reports a complete event.
func (r *ArrayReader) step() (done bool, err error) {
	if r.err != nil {
		return false, r.err
	}
	b := r.buf[r.at:]
	s := &r.scan
	if r.closed {
		return r.trailer(b)
	}
	for ; s.pos < len(b); s.pos++ {
		c := b[s.pos]
		switch s.stage {
		case stageInside:
			if r.inside(c) {
				elem := b[s.elem : s.pos+1]
				if len(elem) > r.max {
					return false, ErrElementTooLarge
				}
				if !json.Valid(elem) {
					return false, ErrArray
				}
				r.emit(s.pos+1, s.elem)
				s.stage = stageComma
				s.count++
				return true, nil
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		switch {
		case s.stage == stageOpen && c == '[':
			s.stage = stageValue
		case s.stage == stageValue && c == '{':
			s.stage, s.elem, s.depth = stageInside, s.pos, 1
		case s.stage == stageComma && c == ',':
			s.stage = stageValue
		case c == ']' && (s.stage == stageComma || (s.stage == stageValue && s.count == 0)):
			r.emit(s.pos+1, -1)
			r.closed = true
			return true, nil
		default:
			return false, ErrArray
		}
	}
	return false, nil
}

// inside advances the object scanner by one byte and reports whether it
// closed the element.
func (r *ArrayReader) inside(c byte) bool {
	s := &r.scan
	switch {
	case s.inString:
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
	case c == '"':
		s.inString = true
	case c == '{' || c == '[':
		s.depth++
	case c == '}' || c == ']':
		s.depth--
		return s.depth == 0
	}
	return false
}

// emit returns the bytes up to end as an event; elem is where its data
// starts, or -1 for the closing bracket.
func (r *ArrayReader) emit(end, elem int) {
	raw := r.buf[r.at : r.at+end : r.at+end]
	r.ev = sse.Event{Raw: raw}
	if elem >= 0 {
		r.ev.Data = raw[elem:]
		r.ev.DataAt = elem
	}
	r.at += end
	r.scan.pos -= end
	if r.scan.pos < 0 {
		r.scan.pos = 0
	}
}

// trailer returns the whitespace that follows the closing bracket as an
// event; anything else there is not one JSON array.
func (r *ArrayReader) trailer(b []byte) (bool, error) {
	end := 0
	for end < len(b) && (b[end] == ' ' || b[end] == '\t' || b[end] == '\n' || b[end] == '\r') {
		end++
	}
	if end < len(b) {
		return false, ErrArray
	}
	if end == 0 {
		return false, nil
	}
	r.emit(end, -1)
	return true, nil
}
