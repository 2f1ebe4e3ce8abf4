package proxy

import (
	"context"
	"net/http"

	"github.com/toolgate/toolgate/proxy/exchange"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/proxy/pipeline"
)

// This file holds the small helpers kept out of line (//go:noinline) only
// to keep frames small under a held stream.
//
// Why: a held stream's handler waits in the event reader, for as long as
// the upstream holds a tool call, under every frame from Server.ServeHTTP
// down: ServeHTTP, serve, route, exchange.Route.ServeHTTP, exchange.serve,
// serveStream, streamRun.read and the reader's Next and fill, with the
// upstream connection's own reader below them. Writing the headers takes
// the goroutine's stack to 16 KiB, and the runtime halves a stack at a
// collection only when less than a quarter of it, counting 800 bytes it
// keeps spare, is in use. So the stack of a held stream shrinks back to
// 8 KiB only while those frames come to less than 3,296 bytes. An inlined
// helper puts its locals (a copied http.Request or url.URL, a context, a
// struct literal) in its caller's frame, and so in the frame a stream
// waits under; out of line they live only while the helper runs.
//
// The guard: TestHeldStreamStackShrinks (proxy/heldstack_test.go) holds a stream
// in a child process, reads the depth of those frames from its traceback
// and fails over the budget. It skips itself under the race detector, whose
// instrumentation changes the frames; run it without -race after touching
// anything on that path. docs/performance.md ("Held streams: the frames a
// stream waits under") has the measurements.
//
// The out-of-line pieces that are the logic of their own file stay there,
// next to what they belong to:
//   - Server.dispatch and atPath (guard.go): the route match and everything
//     but a judged route's handler;
//   - Route.exchange and exchange.answerPath (proxy/exchange/exchange.go):
//     the exchange's making, and the choice of an answer's path with the
//     whole non-stream answer;
//   - newStreamRun and streamRun.handle (proxy/exchange/stream.go): the
//     run's setup and what is done with each event;
//   - sse.Reader's emit and stop (proxy/sse/sse.go): the reader's Next keeps
//     building an event and the end of the source out of its frame.

// begin names the request and wraps its writer.
//
//go:noinline
func begin(w http.ResponseWriter) *exchange.Writer {
	rid := newRequestID()
	w.Header().Set("X-Toolgate-Request-Id", rid)
	return &exchange.Writer{ResponseWriter: w, RequestID: rid}
}

// serveTraced is serve's end with a server span around the request.
//
//go:noinline
func (s *Server) serveTraced(w http.ResponseWriter, r *http.Request, rid string, bw *exchange.Writer, rt *runtime) {
	ctx, sp := observe.StartServer(requestContext(r, rid, rt).Context(), rt.Tracer, r, rt.Snap.Config.Limits.MaxRequestBytes)
	defer func() { observe.EndServer(sp, bw.Status()) }()
	s.route(w, withContext(r, ctx), rt)
}

// requestContext is r with its request id and catalog.context values in
// its context.
//
//go:noinline
func requestContext(r *http.Request, rid string, rt *runtime) *http.Request {
	ctx := pipeline.WithRequestID(r.Context(), rid)
	if rt.contextHeaders != nil {
		ctx = pipeline.WithContextValues(ctx, takeContext(r.Header, rt.contextHeaders))
	}
	return r.WithContext(ctx)
}

// withContext is r.WithContext kept out of line: inlined, its copy of the
// request took a place in the frame of every handler.
//
//go:noinline
func withContext(r *http.Request, ctx context.Context) *http.Request { return r.WithContext(ctx) }
