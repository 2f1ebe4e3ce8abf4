package exchange

import (
	"io"
	"net/http"
	"sync/atomic"

	"github.com/toolgate/toolgate/proxy/pipeline"
)

// Writer is the response writer a request is served through, from the
// server's first frame: it notes when the response has begun, so that a
// recovered panic knows whether a 502 can still be sent, and the status
// sent, for the server span; it carries the request's id and the inbound
// token it presented, which approvals and replays bind to. Unwrap keeps
// http.ResponseController (flushes, hijacks) working through it.
type Writer struct {
	http.ResponseWriter
	began atomic.Bool
	// status is the one sent, for the server span.
	status atomic.Int32
	// RequestID is the request's id.
	RequestID string
	// Caller is the inbound token the request presented, or "".
	Caller string
}

func (b *Writer) WriteHeader(code int) {
	if code >= 200 && b.began.CompareAndSwap(false, true) {
		b.status.Store(int32(code))
	}
	b.ResponseWriter.WriteHeader(code)
}

func (b *Writer) Write(p []byte) (int, error) {
	if b.began.CompareAndSwap(false, true) {
		b.status.Store(http.StatusOK)
	}
	return b.ResponseWriter.Write(p)
}

func (b *Writer) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// Began reports that the response's status went out.
func (b *Writer) Began() bool { return b.began.Load() }

// Status is the status sent, or 0 before one was.
func (b *Writer) Status() int { return int(b.status.Load()) }

// CallerOf is the inbound token of the request w answers, or "" without
// inbound_auth, looked up through the writers wrapped around toolgate's
// own (an MCP route's).
func CallerOf(w http.ResponseWriter) string {
	for {
		if bw, ok := w.(*Writer); ok {
			return bw.Caller
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return ""
		}
		w = u.Unwrap()
	}
}

// ReadBody reads the whole request body within limit. Over the limit it
// stops without buffering the rest; the error says why, for pipeline.Classify.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	rd := http.MaxBytesReader(innermost(w), r.Body, limit)
	body, err := readAll(rd, r.ContentLength)
	if err != nil {
		return nil, pipeline.BodyError(err)
	}
	// Read to its end and closed, the body leaves net/http nothing to
	// drain when the response begins; left open, it is drained (of
	// nothing) by a copy made inside the first write.
	_ = r.Body.Close()
	return body, nil
}

// readAll is io.ReadAll sized from the declared length, so a body is read
// into one allocation instead of a doubling series. The hint is capped: a
// false Content-Length costs at most maxReadHint bytes up front.
func readAll(r io.Reader, hint int64) ([]byte, error) {
	if hint <= 0 || hint > maxReadHint {
		hint = 512
	}
	// One spare byte, so that the read that meets EOF finds room and
	// does not force a copy of a body that was exactly as announced.
	b := make([]byte, 0, hint+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

const maxReadHint = 1 << 20

// innermost unwraps w down to the server's own ResponseWriter. Only that
// one lets http.MaxBytesReader mark the connection to close once the limit
// is hit; through a wrapper the server would instead try to drain the rest
// of the body before it sends the 413.
func innermost(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}
