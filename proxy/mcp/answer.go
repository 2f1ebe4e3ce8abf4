package mcp

import (
	"errors"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/proxy/jsonrpc"
	"github.com/toolgate/toolgate/proxy/sse"
)

// answerJSON reads a JSON answer whole, lets toolgate read the responses
// it tracks, and relays it: the server's bytes when nothing changed, else
// the changed messages with toolgate's own answers joined.
func (cr *clientRequest) answerJSON(resp *http.Response, fwd []message, local [][]byte) {
	limit := cr.rt.snap.Config.Limits.MaxResponseBytes
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		cr.failRequests(fwd, local, "the MCP server's answer was cut off", err)
		return
	case int64(len(body)) > limit:
		cr.failRequests(fwd, local, "the MCP server's answer exceeds limits.max_response_bytes", nil)
		return
	}
	msgs, bad, batch, perr := parseBody(body)
	if perr != nil || len(bad) > 0 {
		// Not JSON-RPC: the client's SDK reports it as the server's fault,
		// which it is; toolgate has nothing to judge in it.
		cr.rt.pipe.Write(cr.w, resp.StatusCode, resp.Header, body)
		return
	}
	changed := false
	out := make([][]byte, len(msgs))
	for i := range msgs {
		out[i] = msgs[i].raw
		if b, ok := cr.inspect(&msgs[i]); ok {
			out[i], changed = b, true
		}
	}
	switch {
	case !changed && len(local) == 0:
		cr.rt.pipe.Write(cr.w, resp.StatusCode, resp.Header, body)
	case batch || cr.batch:
		cr.rt.pipe.Write(cr.w, resp.StatusCode, resp.Header, joinBatch(append(out, local...)))
	default:
		cr.rt.pipe.Write(cr.w, resp.StatusCode, resp.Header, out[0])
	}
}

// failRequests answers the forwarded requests with an error when the
// server's answer cannot be relayed.
func (cr *clientRequest) failRequests(fwd []message, local [][]byte, why string, err error) {
	if err != nil && cr.ctx.Err() != nil {
		cr.outcome = outcomeCancelled
		return
	}
	cr.outcome = outcomeUpstreamError
	cr.log().Warn("mcp answer not relayed", zap.String("reason", why), zap.Error(err))
	for _, m := range fwd {
		if m.kind == kindRequest {
			local = append(local, cr.failure(m.id, upstreamFailure(why)))
		}
	}
	if len(local) == 0 {
		cr.writeJSON(http.StatusBadGateway, cr.failure(nil, upstreamFailure(why)))
		return
	}
	cr.writeLocal(local)
}

// pipeSSE relays a server's event stream event by event, each as received
// unless toolgate had to change the message in it. When the stream breaks
// before a forwarded request was answered, toolgate answers it with an
// error so the client does not wait forever; a stream that ended cleanly
// after giving event ids is left for the client to resume.
func (cr *clientRequest) pipeSSE(body io.Reader, fwd []message) {
	open := map[string]bool{}
	for _, m := range fwd {
		if m.kind == kindRequest {
			open[m.idKey()] = true
		}
	}
	rc := http.NewResponseController(cr.w)
	rd := sse.NewReader(body, int(min(cr.rt.snap.Config.Limits.MaxResponseBytes, 1<<31-1)))
	resumable := false
	for rd.Next() {
		ev := rd.Event()
		out := ev.Raw
		if ev.ID != nil {
			resumable = true
		}
		if len(ev.Data) > 0 {
			if b, ok := cr.inspectData(ev.Data, open); ok {
				out = jsonrpc.Event(ev.ID, b)
			}
		}
		if _, err := cr.w.Write(out); err != nil {
			cr.outcome = outcomeCancelled // the client is gone
			return
		}
		if !rd.Buffered() {
			_ = rc.Flush()
		}
	}
	err := rd.Err()
	switch {
	case cr.ctx.Err() != nil && (err != nil || len(open) > 0):
		cr.outcome = outcomeCancelled
		return
	case err == nil && len(open) == 0,
		// A stream that gave event ids is the client's to resume with
		// Last-Event-ID, however it ended: the server keeps the answers
		// for the resumed stream, and an error here would be a second one.
		resumable && !errors.Is(err, sse.ErrEventTooLarge):
		_ = rc.Flush()
		return
	}
	cr.outcome = outcomeUpstreamError
	cr.log().Warn("mcp stream ended early", zap.Error(err), zap.Int("unanswered", len(open)))
	// A cut-off event is never relayed: half a message would break the
	// client's reader, and the error below says what happened.
	msg := "the MCP server's stream ended before it answered"
	if errors.Is(err, sse.ErrEventTooLarge) {
		msg = errTooLarge.Error()
	}
	for _, m := range fwd {
		if open[m.idKey()] {
			_, _ = cr.w.Write(jsonrpc.Event(nil, cr.failure(m.id, upstreamFailure(msg))))
		}
	}
	_ = rc.Flush()
}

// inspectData reads one event's data: a message or, in 2025-03-26, a batch.
func (cr *clientRequest) inspectData(data []byte, open map[string]bool) ([]byte, bool) {
	msgs, bad, batch, perr := parseBody(data)
	if perr != nil || len(bad) > 0 {
		return nil, false
	}
	changed := false
	out := make([][]byte, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		out[i] = m.raw
		if m.kind == kindResponse {
			delete(open, m.idKey())
		}
		if b, ok := cr.inspect(m); ok {
			out[i], changed = b, true
		}
	}
	if !changed {
		return nil, false
	}
	if batch {
		return joinBatch(out), true
	}
	return out[0], true
}

// inspect reads one message from the server. It returns the message to
// send instead when toolgate changes it.
func (cr *clientRequest) inspect(m *message) ([]byte, bool) {
	if m.kind == kindNotification {
		if m.method == "notifications/tools/list_changed" {
			cr.sess.stale()
			cr.rt.state.dropLists()
		}
		return nil, false
	}
	if m.kind != kindResponse {
		return nil, false
	}
	t, ok := cr.tracked[m.idKey()]
	delete(cr.tracked, m.idKey())
	// The session's copy goes too; without this request's own, the call
	// is one answered on another stream, after a resumption.
	if st, found := cr.sess.answered(m.idKey()); !ok {
		t, ok = st, found
	}
	if !ok || m.err != nil {
		return nil, false
	}
	switch t.kind {
	case trackInit:
		return cr.initialized(m, t)
	case trackList:
		return cr.listed(m, t)
	case trackCall:
		return cr.called(m, t)
	case trackDiscover:
		return discovered(m)
	}
	return nil, false
}

// readLimited reads a whole body of at most limit bytes.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = errTooLarge
	}
	return b, err
}

var errTooLarge = errors.New("the MCP server's answer exceeds limits.max_response_bytes")
