package exchange

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/proxy/sse"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// maxEvent bounds one SSE event; a larger one fails the stream.
const maxEvent = 8 << 20

// streamWriter serialises writes to a streamed answer: the pipeline and the
// keepalive ticker both write. Headers go out with the first byte, so until
// then the pipeline may still answer with a plain status.
type streamWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	status  int
	err     error
	header  func(http.Header)
}

func (sw *streamWriter) write(b []byte) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.writeLocked(b, true)
}

// writeLater writes b without flushing: the caller knows more bytes follow
// at once, and one flush (one syscall) for several events is what keeps a
// fast stream cheap.
func (sw *streamWriter) writeLater(b []byte) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.writeLocked(b, false)
}

// flush sends what writeLater left in the buffer. Before anything was
// written it does nothing, keeping the option of a plain status answer.
func (sw *streamWriter) flush() error { return sw.write(nil) }

func (sw *streamWriter) writeLocked(b []byte, flush bool) error {
	if sw.err != nil {
		return sw.err
	}
	if !sw.started && len(b) == 0 {
		// Nothing to send yet: keep the option of a plain status answer.
		return nil
	}
	if !sw.started {
		sw.started = true
		sw.header(sw.w.Header())
		sw.w.WriteHeader(sw.status)
	}
	if len(b) > 0 {
		if _, err := sw.w.Write(b); err != nil {
			sw.err = err
			return err
		}
	}
	if !flush {
		return nil
	}
	if err := sw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		sw.err = err
	}
	return sw.err
}

// start sends the headers if nothing has been sent yet, so that even an
// answer with no events reaches the client as a stream.
func (sw *streamWriter) start() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if !sw.started && sw.err == nil {
		sw.started = true
		sw.header(sw.w.Header())
		sw.w.WriteHeader(sw.status)
		_ = sw.rc.Flush()
	}
}

// failed reports a write that failed: the client is gone.
func (sw *streamWriter) failed() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.err != nil
}

func (sw *streamWriter) begun() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.started
}

// keepalive writes an SSE comment every interval until stop is called, so
// proxies and load balancers do not cut a stream that is being held once
// its headers are out. Most
// held streams end long before the first comment is due, so it runs on a
// timer rather than a goroutine of its own. Once stop returns, no comment
// is being written and none will be.
func (sw *streamWriter) keepalive(interval time.Duration, comment []byte) (stop func()) {
	k := &keepaliveTimer{sw: sw, interval: interval, comment: comment}
	k.mu.Lock()
	k.t = time.AfterFunc(interval, k.fire)
	k.mu.Unlock()
	return k.stop
}

type keepaliveTimer struct {
	mu       sync.Mutex
	sw       *streamWriter
	t        *time.Timer
	interval time.Duration
	comment  []byte
	stopped  bool
}

func (k *keepaliveTimer) fire() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	// Before the headers are out a comment would spend the plain status an
	// escalation needs: SDKs read an error inside a 200 stream as a server
	// fault and retry it. Until then the client waits for headers, as for
	// any answer that is not streamed, and there is no stream to keep alive.
	if k.sw.begun() && k.sw.write(k.comment) != nil {
		return
	}
	k.t.Reset(k.interval)
}

func (k *keepaliveTimer) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	k.t.Stop()
}

// serveStream validates a streamed answer: text flows through as it comes;
// from the first tool-call event on, everything is held until the calls
// are complete and judged, then the original events, repaired ones or an
// escalation go out.
//
// The events that open an answer and carry nothing yet (a role-only delta,
// message_start, response.created, comments) are held too, until the first
// event that carries something: text releases them in front of itself, so
// it is not delayed; a call makes them the first held events. So when an
// answer begins with a call, no byte has gone out when it is judged, and
// an escalation can still be a plain 422 that no SDK retries.
//
// rd is nil for an SSE stream; a codec with its own framing passes its
// reader. A held stream waits under this frame, in the reader's fill, for
// as long as the upstream holds the call.
// Writing the headers takes the handler's stack to 16 KiB, and the runtime
// halves a stack at a collection only when under a quarter of it, less
// 800 bytes, is in use: so the frames from net/http's down to the reader's
// are kept small (what is not needed while waiting is out of line), and a
// held stream's stack shrinks back to 8 KiB. Waiting under 5 KiB of frames,
// ten thousand held streams took 75 MiB more of stacks than a bare reverse
// proxy.
func (x *exchange) serveStream(r *streamRun) {
	defer r.end()
	if done, ok := r.read(); ok {
		r.complete(done, r.rd)
	}
}

// newStreamRun begins a stream's run; rd nil reads SSE with a pooled
// reader.
//
//go:noinline
func newStreamRun(x *exchange, c *upstream.Call, st api.Stream, rd api.EventReader) *streamRun {
	r := &streamRun{x: x, c: c, st: st, rd: rd, shadow: x.settings.Shadow, stopKeepalive: func() {}}
	// Shadow mode changes nothing, so it delays nothing either.
	r.opening = !r.shadow
	r.sw = &streamWriter{w: x.w, rc: http.NewResponseController(x.w), status: http.StatusOK,
		header: func(h http.Header) {
			copyHeader(h, c.Resp.Header)
			// A stream's headers go out before its answer is decided.
			x.headers(h, false)
		}}
	x.sw = r.sw
	if rd == nil {
		r.pooled = getReader(c.Body)
		r.rd = r.pooled
	}
	return r
}

// end stops the keepalive and gives back the held events' buffers and the
// pooled reader.
func (r *streamRun) end() {
	r.stopKeepalive()
	r.held.free()
	if r.pooled != nil {
		putReader(r.pooled)
	}
}

// complete judges and delivers a stream that read ended: done when its
// terminal event came. It is apart from serveStream so that the frame a
// stream is held under stays small (see serveStream).
func (r *streamRun) complete(done bool, rd api.EventReader) {
	x, c := r.x, r.c
	if !done && x.r.Context().Err() == nil {
		done = completeAtEOF(r.st, rd, c)
	}
	if !done {
		if x.r.Context().Err() != nil {
			return
		}
		cause := rd.Err()
		if cause == nil {
			cause = io.ErrUnexpectedEOF
		}
		if errors.Is(c.Cause(), upstream.ErrIdle) {
			r.fail(pipeline.ErrStreamIdle)
			return
		}
		r.fail(fmt.Errorf("%w: %w", pipeline.ErrCut, cause))
		return
	}
	// The stream is complete; nothing after the terminal event is read.
	turns := r.st.Turns()
	if r.holding && missingCallID(turns) {
		x.env.Metrics.CountUnvalidated(pipeline.UnreadableResponse)
		r.fail(pipeline.ErrNoCallID)
		return
	}
	x.countUsage(neutral.KindOriginal, r.st.Usage(), c.Resp.Header)
	results, ok := x.judge(turns, &asker{x: x}, r.cur.Sent().Committed)
	if !ok {
		return
	}
	// Stop the keepalive before decide: in message mode decide sets a
	// response header, which must not race with the keepalive sending the
	// headers.
	r.stopKeepalive()
	v := x.decide(results, r.sw.begun())
	fx := x.perform(results, &v, r.heldCopy(&v))
	x.env.Metrics.StreamsHeldEvents.Observe(float64(len(r.held.events)))
	rp := r.deliver(&v, &fx)
	x.write(rp)
	if rp.Tail {
		drain(c)
	}
}

// streamRun is one streamed answer on its way through the pipeline.
type streamRun struct {
	x    *exchange
	c    *upstream.Call
	st   api.Stream
	sw   *streamWriter
	held heldEvents
	// cur is what the client was given of the events fed: the stream's
	// writers follow it, and only this run knows it.
	cur api.Cursor
	// holding: a call has begun and everything is held. opening: nothing
	// but opening events has come yet, and they are held.
	holding, opening, shadow bool
	keepaliveOn              bool
	stopKeepalive            func()
	// ev is the event being taken.
	ev sse.Event
	// rd reads the events; pooled is rd when it is the pool's.
	rd     api.EventReader
	pooled *sse.Reader
	// tRead is when reading began.
	tRead time.Time
}

func (r *streamRun) startKeepalive() {
	if !r.keepaliveOn {
		r.keepaliveOn = true
		r.stopKeepalive = r.sw.keepalive(r.x.env.Keepalive, keepaliveBytes(r.st))
	}
}

// fail stops the keepalive first: streamFail may answer with a plain
// status, and a comment written concurrently would race on the headers and
// land inside that JSON body or after [DONE].
func (r *streamRun) fail(err error) {
	r.stopKeepalive()
	r.x.streamFail(r.sw, r.st, r.cur.Sent(), err)
}

// read feeds the upstream's events and writes or holds each, until the
// terminal event (done) or the end of the body. ok is false when the
// stream is over already: the client is gone or a failure was written.
// A held stream waits in rd.Next under this frame: what is done with each
// event is out of line, in take.
func (r *streamRun) read() (done, ok bool) {
	r.tRead = time.Now()
	for !done && r.rd.Next() {
		if done, ok = r.handle(); !ok {
			return false, false
		}
	}
	r.x.account.upWait += time.Since(r.tRead)
	return done, true
}

// handle feeds the event the reader has read and writes or holds it. ok is
// false when the stream is over: the client is gone or a failure was
// written, after the wait since tRead was counted, so that the failure's
// log line reports toolgate's own time.
//
//go:noinline
func (r *streamRun) handle() (done, ok bool) {
	x, rd, tRead := r.x, r.rd, r.tRead
	fail := func(err error) (bool, bool) {
		x.account.upWait += time.Since(tRead)
		r.fail(err)
		return false, false
	}
	// The event lives in the run: Feed takes its address, and a variable
	// of this frame would be a heap object per event.
	ev := &r.ev
	*ev = rd.Event()
	step, err := r.st.Feed(ev)
	if errors.Is(err, api.ErrFoldedKey) {
		// Told apart from a whole answer's: it is one event of many.
		return fail(fmt.Errorf("%w: %v", pipeline.ErrBadEvent, pipeline.ErrFoldedKey))
	}
	if err != nil {
		return fail(fmt.Errorf("%w: %w", pipeline.ErrBadEvent, err))
	}
	if step.UpstreamError {
		x.account.upWait += time.Since(tRead)
		r.relayError(ev, rd)
		return false, false
	}
	r.cur.Fed(step)
	if !r.route(ev, step) {
		return false, false
	}
	if r.holding || r.opening {
		if r.held.add(ev) > x.gen.Snap.Config.Limits.MaxResponseBytes {
			return fail(pipeline.ErrTooLarge)
		}
		return step.Done, true
	}
	write := r.sw.write
	if rd.Buffered() {
		write = r.sw.writeLater
	}
	if err := write(ev.Raw); err != nil {
		// The client is gone; returning cancels the upstream call.
		return false, false
	}
	// The event went out, behind any held opening events route wrote.
	r.cur.Wrote()
	return step.Done, true
}

// route decides whether an event is held, and releases the held opening
// events when the first event that carries something arrives. It is false
// when the client is gone.
func (r *streamRun) route(ev *sse.Event, step neutral.Step) bool {
	switch {
	case r.holding:
	case step.Hold && !r.shadow:
		// Text written without a flush must reach the client now: what
		// follows is held.
		if r.sw.flush() != nil {
			return false
		}
		r.holding, r.opening = true, false
		r.startKeepalive()
	case r.opening && (step.Opening || ev.Comment):
		r.startKeepalive()
	default:
		r.opening = false
		if len(r.held.events) > 0 {
			// The opening events go out in front of this one, in the
			// same flush.
			r.stopKeepalive()
			r.keepaliveOn = false
			if r.sw.writeLater(r.held.buf) != nil {
				return false
			}
			r.held.reset()
		}
	}
	return true
}

// tailWait bounds how long a stream ended by the upstream's error waits
// for what the upstream sends after it (a JSON array's closing bracket).
const tailWait = time.Second

// maxTail bounds the bytes passed on after the upstream's error.
const maxTail = 64 << 10

// relayError passes on an error the upstream sent inside its stream, as it
// sent it: the client reads the provider's own code and message, as it
// would without toolgate. The upstream answered 200 and began a stream, so
// the error stays in the stream even when nothing was sent yet: a status
// toolgate picked would be a guess at one the provider never gave.
// Opening events held in front of the error go out first, as they came.
// Events held since a call began were not judged and never go out; the
// error then follows what the client was sent. Nothing judged comes after
// an error: of what follows it, only framing (a JSON array's closing
// bracket, blank lines, comments) is passed on.
func (r *streamRun) relayError(ev *sse.Event, rd api.EventReader) {
	x := r.x
	r.stopKeepalive()
	dropped := r.holding
	if !dropped {
		if r.sw.writeLater(r.held.buf) != nil {
			return
		}
		r.cur.Wrote()
	}
	r.held.reset()
	out := r.st.UpstreamError(neutral.HeldEvent{Raw: ev.Raw, Event: string(ev.Event), Data: ev.Data}, r.cur.Sent())
	x.env.Log.Info("upstream error in the stream passed on", zap.String("request_id", x.requestID),
		zap.String("api", x.api.Name()), zap.Bool("held_call_dropped", dropped))
	x.write(pipeline.TailReply(out, pipeline.LabelUpstreamError, false))
	if !r.sw.failed() {
		r.relayTail(rd)
	}
}

// relayTail passes on what follows the upstream's error that carries
// nothing but framing, within tailWait and maxTail.
func (r *streamRun) relayTail(rd api.EventReader) {
	t := time.AfterFunc(tailWait, func() { r.c.Cancel(errDrained) })
	defer t.Stop()
	sent := 0
	for sent < maxTail && rd.Next() {
		ev := rd.Event()
		if len(ev.Data) > 0 || !(ev.Comment || framing(ev.Raw)) {
			continue
		}
		sent += len(ev.Raw)
		if r.sw.write(ev.Raw) != nil {
			return
		}
	}
}

// framing reports bytes that are only line breaks, spaces and a JSON
// array's closing bracket: what may follow an error without saying
// anything. Lines of unknown SSE fields do not go on; a client might read
// them as something.
func framing(raw []byte) bool {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\r', '\n', ']':
		default:
			return false
		}
	}
	return true
}

// deliver is the reply the verdict makes of a complete stream: its held
// events as they came or re-encoded, or an error event; while nothing
// went out, a failure or an escalation is a plain status instead. Every
// writer follows what the cursor says the client has.
func (r *streamRun) deliver(v *pipeline.Verdict, fx *pipeline.Effects) pipeline.Reply {
	x, sw, st, sent := r.x, r.sw, r.st, r.cur.Sent()
	tail := func(b []byte) pipeline.Reply { return pipeline.TailReply(b, string(v.Outcome()), true) }
	switch {
	case r.shadow || !r.holding:
		return tail(r.held.buf)
	case v.Upstream() != nil:
		if !sw.begun() {
			// Nothing went out yet: a plain status (the provider's, or a
			// 504 for a transport failure) is what makes the SDK retry.
			return pipeline.HandBackReply(x.codec, v.Upstream())
		}
		return tail(st.ErrorEvent(pipeline.RepairFailure(v.Upstream(), true), nil, sent))
	case fx.Answering != nil:
		e := fx.Answering
		if sw.begun() {
			return tail(st.ErrorEvent(neutral.Failure{Code: neutral.FailureCode(e.Code), Message: e.Text}, e, sent))
		}
		if fx.StoreDown {
			return pipeline.FailureReply(x.codec, pipeline.StoreFailure(storeDownHeld))
		}
		return pipeline.EscalationReply(x.codec, e, v.Outcome())
	case !v.Changed():
		return tail(r.held.buf)
	}
	out, err := st.Encode(r.held.events, v.Actions(fx), sent)
	if err != nil {
		x.env.Log.Error("stream render failed", zap.String("request_id", x.requestID), zap.Error(err))
		return tail(st.ErrorEvent(pipeline.Classify(pipeline.ErrRender), nil, sent))
	}
	return tail(out)
}

// keepaliveBytes is what the stream's clients take as a keepalive, asked
// when it starts: a stream may match what it has seen.
func keepaliveBytes(st api.Stream) []byte { return st.Keepalive() }

// completeAtEOF reports a stream without a terminal event that ended with
// its body, cleanly (no read error, no idle timeout) and complete.
func completeAtEOF(st api.Stream, rd api.EventReader, c *upstream.Call) bool {
	return rd.Err() == nil && c.Cause() == nil && st.Complete()
}

// heldEvents are the events a stream keeps back, copied out of the
// reader's buffer as they come.
type heldEvents struct {
	events []neutral.HeldEvent
	// buf holds every event's raw bytes in order, so the common case
	// (nothing changed) writes it out without another copy. data holds
	// only the data that is not one line of its event's raw bytes.
	buf, data []byte
	// dataAt is where each event's data begins in its raw bytes, -1 when
	// it is in data instead (or absent).
	dataAt   []int32
	size     int64
	pooled   *heldStore
	lastName string
}

// add copies ev and returns how many bytes are held since the last reset.
func (h *heldEvents) add(ev *sse.Event) int64 {
	h.size += int64(len(ev.Raw))
	if h.pooled == nil {
		h.pooled = heldStores.Get().(*heldStore)
		h.buf, h.data, h.events, h.dataAt = h.pooled.buf[:0], h.pooled.data[:0], h.pooled.events[:0], h.pooled.dataAt[:0]
	}
	if len(h.buf)+len(ev.Raw) > cap(h.buf) {
		h.grow(len(ev.Raw))
	}
	start := len(h.buf)
	h.buf = append(h.buf, ev.Raw...)
	raw := h.buf[start:len(h.buf):len(h.buf)]
	var data []byte
	dataAt := int32(-1)
	// The comparison makes sure the bytes found are Data's even if the
	// event's Raw is not the reader's.
	switch at, end := ev.DataAt, ev.DataAt+len(ev.Data); {
	case at > 0 && end <= len(raw) && bytes.Equal(raw[at:end], ev.Data):
		data, dataAt = raw[at:end:end], int32(at)
	case ev.Data != nil:
		dstart := len(h.data)
		h.data = append(h.data, ev.Data...)
		data = h.data[dstart:len(h.data):len(h.data)]
	}
	h.events = append(h.events, neutral.HeldEvent{Raw: raw, Event: h.name(ev.Event), Data: data})
	h.dataAt = append(h.dataAt, dataAt)
	return h.size
}

// grow moves the held bytes to an array with room for n more and points
// the held events at it. Left to append, every event would keep the array
// it was copied into, and a held answer would keep each array it outgrew;
// those arrays are recycled instead. Ten thousand streams ending at once
// grew theirs together, and that garbage was most of what they left.
func (h *heldEvents) grow(n int) {
	old := h.buf
	buf := getHeldBuf(max(2*cap(old), len(old)+n))
	buf = append(buf, old...)
	// The events' raw bytes lie in buf one after another, in order.
	at := 0
	for i := range h.events {
		e := &h.events[i]
		end := at + len(e.Raw)
		e.Raw = buf[at:end:end]
		if d := int(h.dataAt[i]); d >= 0 {
			e.Data = e.Raw[d : d+len(e.Data) : d+len(e.Data)]
		}
		at = end
	}
	h.buf = buf
	putHeldBuf(old)
}

// heldBufs recycles the arrays held events outgrow, by size class: powers
// of two from 512 bytes to maxPooledHeld.
var heldBufs [heldBufClasses]sync.Pool

const (
	minHeldBuf     = 512
	heldBufClasses = 10 // 512 B to 256 KiB
)

// heldBufClass is the class of an array of capacity c, rounded up when up
// is set (for an array to get) and down when not (for one to give back).
func heldBufClass(c int, up bool) int {
	k := 0
	for size := minHeldBuf; size < c; size *= 2 {
		k++
	}
	if !up && minHeldBuf<<k > c {
		k--
	}
	return k
}

func getHeldBuf(n int) []byte {
	k := heldBufClass(n, true)
	if k >= heldBufClasses {
		return make([]byte, 0, n)
	}
	if b, ok := heldBufs[k].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, minHeldBuf<<k)
}

func putHeldBuf(b []byte) {
	k := heldBufClass(cap(b), false)
	if k < 0 || k >= heldBufClasses {
		return
	}
	b = b[:0]
	heldBufs[k].Put(&b)
}

// reset forgets the held events once they were written; the buffers are
// reused.
func (h *heldEvents) reset() {
	h.events, h.buf, h.data, h.dataAt, h.size = h.events[:0], h.buf[:0], h.data[:0], h.dataAt[:0], 0
}

// free returns the buffers to the pool. Every slice of them is dead once
// serveStream returns: codecs copy what they keep from events as they
// are fed, and Encode's output is written before the return.
func (h *heldEvents) free() {
	st := h.pooled
	if st == nil {
		return
	}
	h.pooled = nil
	// An unusually long held answer's buffers stay out of the pool, so one
	// large answer does not pin its memory.
	if cap(h.buf) > maxPooledHeld || cap(h.data) > maxPooledHeld || cap(h.events) > maxPooledEvents {
		return
	}
	// The stale entries would otherwise keep older, outgrown arrays alive.
	clear(h.events[:cap(h.events)])
	st.buf, st.data, st.events, st.dataAt = h.buf[:0], h.data[:0], h.events[:0], h.dataAt[:0]
	heldStores.Put(st)
}

// name is an event's name as a string. A stream names most of its events
// alike (content_block_delta, response.output_text.delta), so a name equal
// to the last one reuses its string instead of allocating.
func (h *heldEvents) name(b []byte) string {
	if string(b) != h.lastName {
		h.lastName = string(b)
	}
	return h.lastName
}

// readers recycles stream readers with their buffers. Events alias a
// reader's buffer, and codecs copy what they keep of them, so nothing
// points into it once serveStream returns.
var readers = sync.Pool{New: func() any { return sse.NewReader(nil, maxEvent) }}

func getReader(src io.Reader) *sse.Reader {
	rd := readers.Get().(*sse.Reader)
	rd.Reset(src)
	return rd
}

func putReader(rd *sse.Reader) {
	if rd.BufferCap() > maxPooledHeld {
		return
	}
	rd.Reset(nil)
	readers.Put(rd)
}

// heldStore is the set of arrays one stream's held events live in; it is
// recycled whole, so a stream that holds its answer allocates nothing for
// the holding in the steady state.
type heldStore struct {
	buf, data []byte
	events    []neutral.HeldEvent
	dataAt    []int32
}

// A new store starts empty: append sizes it to what the first stream holds
// (a few events while a call is held open), and the pool keeps what it
// grew to for the streams after.
var heldStores = sync.Pool{New: func() any { return new(heldStore) }}

const (
	maxPooledHeld   = 256 << 10
	maxPooledEvents = 4 << 10
)

// drainWait bounds how long a finished stream waits for the upstream's end
// of body after its terminal event.
const drainWait = 100 * time.Millisecond

// drain reads what follows the terminal event, normally just the chunked
// body's end. Closing the body before reading that end makes net/http drop
// the connection, and every stream would then pay a new TCP and TLS
// handshake to the provider.
func drain(c *upstream.Call) {
	t := time.AfterFunc(drainWait, func() { c.Cancel(errDrained) })
	_, _ = io.CopyN(io.Discard, c.Body, 64<<10)
	t.Stop()
}

// errDrained is the cause recorded when an upstream kept a finished
// stream's connection open past drainWait.
var errDrained = errors.New("upstream kept the body open after the terminal event")

// streamFail ends a stream that cannot be completed: never a half tool call,
// always an error the client's SDK reports, following what sent says the
// client has.
func (x *exchange) streamFail(sw *streamWriter, st api.Stream, sent api.Sent, err error) {
	x.env.Log.Warn("stream failed", zap.String("request_id", x.requestID), zap.String("api", x.api.Name()), zap.Error(err))
	f := pipeline.Classify(err)
	if !sw.begun() {
		x.write(pipeline.FailureReply(x.codec, f))
		return
	}
	x.write(pipeline.TailReply(st.ErrorEvent(f, nil, sent), string(f.Code), false))
}
