package telemetry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queue is a span processor that never makes the request wait: ended spans
// go into a bounded channel, and when it is full they are dropped and
// counted. One goroutine sends them on in batches; a collector that is slow
// or gone only ever stalls that goroutine. The SDK's batch processor drops
// the same way but keeps its count to itself, which is why this exists.
type queue struct {
	exp      sdktrace.SpanExporter
	spans    chan sdktrace.ReadOnlySpan
	dropped  func(n int)
	interval time.Duration
	batch    int
	timeout  time.Duration

	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	stopped  atomic.Bool
}

func newQueue(exp sdktrace.SpanExporter, o queueOptions) *queue {
	q := &queue{exp: exp, spans: make(chan sdktrace.ReadOnlySpan, o.size), dropped: o.dropped,
		interval: o.interval, batch: o.batch, timeout: o.timeout,
		flush: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if q.dropped == nil {
		q.dropped = func(int) {}
	}
	go q.run()
	return q
}

type queueOptions struct {
	size     int
	batch    int
	interval time.Duration
	timeout  time.Duration
	dropped  func(n int)
}

func (q *queue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd enqueues a sampled span without blocking.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() || q.stopped.Load() {
		return
	}
	select {
	case q.spans <- s:
	default:
		q.dropped(1)
	}
}

func (q *queue) run() {
	defer close(q.done)
	t := time.NewTicker(q.interval)
	defer t.Stop()
	buf := make([]sdktrace.ReadOnlySpan, 0, q.batch)
	for {
		select {
		case s := <-q.spans:
			buf = append(buf, s)
			if len(buf) == q.batch {
				buf = q.export(buf)
			}
		case <-t.C:
			buf = q.export(buf)
		case ack := <-q.flush:
			buf = q.export(q.drain(buf))
			close(ack)
		case <-q.stop:
			q.export(q.drain(buf))
			return
		}
	}
}

// drain moves what is queued now into buf, exporting full batches.
func (q *queue) drain(buf []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for {
		select {
		case s := <-q.spans:
			buf = append(buf, s)
			if len(buf) == q.batch {
				buf = q.export(buf)
			}
		default:
			return buf
		}
	}
}

// export sends buf within the export timeout. A batch the collector did
// not take is lost and counted: retrying it would only grow the backlog
// behind it.
func (q *queue) export(buf []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(buf) == 0 {
		return buf
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	if err := q.exp.ExportSpans(ctx, buf); err != nil {
		q.dropped(len(buf))
		otel.Handle(err)
	}
	cancel()
	clear(buf)
	return buf[:0]
}

// ForceFlush exports everything queued so far, or gives up when ctx ends.
func (q *queue) ForceFlush(ctx context.Context) error {
	if q.stopped.Load() {
		return nil
	}
	ack := make(chan struct{})
	select {
	case q.flush <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued and closes the exporter, within ctx.
func (q *queue) Shutdown(ctx context.Context) error {
	q.stopOnce.Do(func() {
		q.stopped.Store(true)
		close(q.stop)
	})
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.exp.Shutdown(ctx)
}
