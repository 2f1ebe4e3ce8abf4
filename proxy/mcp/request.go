package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/httpx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// Header names of Streamable HTTP.
const (
	hdrSession  = "Mcp-Session-Id"
	hdrProtocol = "Mcp-Protocol-Version"
)

// clientRequest is one HTTP request a client made on an MCP route (a POST's
// message or batch, the server's GET stream, a DELETE) and what toolgate
// learned while answering it.
type clientRequest struct {
	rt      *Route
	w       http.ResponseWriter
	r       *http.Request
	ctx     context.Context
	rid     string
	sess    *session
	outcome string
	// tracked are the requests of this POST whose answers toolgate reads.
	tracked map[string]tracked
	batch   bool
	// statelessRevision is set for a request of a stateless revision
	// (2026-07-28): version is the revision it carries and capabilities
	// its clientCapabilities.
	statelessRevision bool
	version           string
	capabilities      []byte
	method            string
	// upstreamSession is the session id the server's answer gave.
	upstreamSession string
	// gone is set when the server said it no longer knows the session.
	gone *sessionGone
	// start, upWait and findings are for the request's report: when it
	// began, how long the server took, and the finding codes judged.
	start        time.Time
	upstreamWait time.Duration
	findings     []string
	// calls counts the requests sent to the server.
	calls int
}

func (rt *Route) newClientRequest(w http.ResponseWriter, r *http.Request) *clientRequest {
	return &clientRequest{rt: rt, w: w, r: r, ctx: r.Context(), rid: w.Header().Get("X-Toolgate-Request-Id"),
		outcome: outcomePass, tracked: map[string]tracked{}, start: time.Now()}
}

func (cr *clientRequest) log() *zap.Logger {
	return cr.rt.gateway.deps.Log.With(zap.String("request_id", cr.rid), zap.String("mcp_server", cr.rt.cfg.Name))
}

// post handles a client's JSON-RPC message or batch.
func (cr *clientRequest) post() {
	body, ok := cr.readBody()
	if !ok {
		return
	}
	msgs, bad, batch, perr := parseBody(body)
	cr.batch = batch
	if perr != nil {
		cr.outcome = outcomeInvalid
		cr.writeJSON(http.StatusBadRequest, jsonrpc.ErrorResponse(perr.id, perr.code, perr.msg, nil))
		return
	}
	if !cr.revision(msgs, batch) {
		return
	}
	sid := cr.r.Header.Get(hdrSession)
	if cr.statelessRevision {
		// Nothing is sticky: whatever a session header says, the request
		// stands alone, and the server's own tool list judges it.
		sid = ""
	}
	cr.sess = cr.rt.state.get(sid, true)
	if batch {
		if v := cr.protocol(); v != protocol20250326 {
			cr.outcome = outcomeInvalid
			cr.writeJSON(http.StatusBadRequest, jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest,
				"Invalid Request: MCP revision "+v+" has no JSON-RPC batches; send one message per request", nil))
			return
		}
	}
	if hasRequest(msgs) {
		if !cr.sess.acquire(cr.ctx, cr.rt.cfg.MaxStreams, cr.rt.cfg.IdleTimeout.D()) {
			cr.busy(msgs)
			return
		}
		defer cr.sess.release()
	}

	fwd, local, hold := cr.triage(msgs, bad)
	if hold != nil {
		cr.confirm(hold)
		return
	}
	if cr.gone != nil {
		cr.outcome = outcomeUpstreamError
		cr.rt.pipe.Write(cr.w, http.StatusNotFound, cr.gone.header, cr.gone.body)
		return
	}
	if len(local) > 0 && cr.outcome == outcomePass {
		cr.outcome = outcomeEscalated
	}
	if len(fwd) == 0 {
		if len(local) == 0 {
			cr.rt.pipe.Write(cr.w, http.StatusAccepted, nil, nil)
			return
		}
		cr.writeLocal(local)
		return
	}
	out := body
	if len(fwd) != len(msgs) || len(bad) > 0 {
		elems := make([][]byte, len(fwd))
		for i, m := range fwd {
			elems[i] = m.raw
		}
		out = elems[0]
		if batch {
			out = joinBatch(elems)
		}
	}
	cr.forward(out, fwd, local)
}

// triage decides each message of a POST: answered by toolgate (a refusal or
// an error), consumed (an answer to toolgate's own question), held for a
// person's yes, or forwarded.
func (cr *clientRequest) triage(msgs []message, bad []rpcError) (fwd []message, local [][]byte, hold *held) {
	for _, e := range bad {
		local = append(local, jsonrpc.ErrorResponse(e.id, e.code, e.msg, nil))
	}
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.kind == kindResponse && cr.sess.deliver(m):
		case m.kind == kindNotification && m.method == "notifications/cancelled" && cr.sess.cancelHeld(m.params):
		case m.kind == kindNotification && m.method == "tools/call":
			// A call without an id would get no answer, and a lax server
			// might still run it; it is neither judged nor forwarded.
			local = append(local, jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: tools/call is a request and needs an id", nil))
		case m.kind == kindRequest && m.method == "tools/call":
			ans, h := cr.judge(m)
			switch {
			case ans != nil:
				local = append(local, ans)
			case h != nil && cr.batch:
				local = append(local, cr.refuseUnconfirmed(h, "a call that needs a person's yes cannot be part of a batch"))
			case h != nil:
				// Only a single message is held, so nothing else waits.
				return nil, nil, h
			default:
				fwd = append(fwd, *m)
			}
		default:
			cr.trackRequest(m)
			fwd = append(fwd, *m)
		}
	}
	return fwd, local, nil
}

// trackRequest notes a forwarded request whose answer toolgate reads.
func (cr *clientRequest) trackRequest(m *message) {
	if m.kind != kindRequest {
		return
	}
	switch m.method {
	case "tools/list":
		cr.tracked[m.idKey()] = tracked{kind: trackList, cursor: listCursor(m.params)}
	case "initialize":
		cr.tracked[m.idKey()] = tracked{kind: trackInit, elicit: declaresElicitation(m.params)}
	case "server/discover":
		cr.tracked[m.idKey()] = tracked{kind: trackDiscover}
	case "tasks/result":
		// The result of a judged call that runs as a task: checked
		// against the tool's outputSchema like the call's own result.
		if t, ok := cr.sess.task(taskIDParam(m.params)); ok {
			cr.tracked[m.idKey()] = t
			if cr.sess.id != "" {
				cr.sess.track(m.idKey(), t)
			}
		}
	}
}

func hasRequest(msgs []message) bool {
	for _, m := range msgs {
		if m.kind == kindRequest {
			return true
		}
	}
	return false
}

// busy answers the requests of a POST that found no free slot within
// idle_timeout, each with a JSON-RPC error the client's SDK hands to the
// caller, naming the limit.
func (cr *clientRequest) busy(msgs []message) {
	if cr.ctx.Err() != nil {
		cr.outcome = outcomeCancelled
		return
	}
	cr.outcome = outcomeLimited
	msg := fmt.Sprintf("this session already has %d calls in flight, the most mcp_servers[].max_streams allows, and none ended within %s",
		cr.rt.cfg.MaxStreams, cr.rt.cfg.IdleTimeout.D())
	var local [][]byte
	for _, m := range msgs {
		if m.kind == kindRequest {
			local = append(local, jsonrpc.ErrorResponse(m.id, codeBusy, msg, nil))
		}
	}
	cr.writeLocal(local)
}

// protocol is the revision this request speaks: its header, else what the
// session negotiated, else 2025-03-26, which the specification says to
// assume when a client sends no header.
func (cr *clientRequest) protocol() string {
	if v := cr.r.Header.Get(hdrProtocol); v != "" {
		return v
	}
	if v, _ := cr.sess.negotiated(); v != "" {
		return v
	}
	return protocol20250326
}

// listening reports a stateless subscriptions/listen: a stream, not a call.
func (cr *clientRequest) listening() bool {
	return cr.statelessRevision && cr.method == "subscriptions/listen"
}

// forward sends the messages toolgate let through and relays the answer,
// with local answers (refusals) joined to it.
func (cr *clientRequest) forward(body []byte, fwd []message, local [][]byte) {
	resp, done, err := cr.sendTimed(body)
	if err != nil {
		cr.upstreamDown(fwd, local, err)
		return
	}
	defer done()
	cr.upstreamSession = resp.Header.Get(hdrSession)
	ct := mediaType(resp.Header)
	switch {
	case resp.StatusCode == http.StatusOK && ct == "application/json":
		cr.answerJSON(resp, fwd, local)
	case resp.StatusCode == http.StatusOK && ct == "text/event-stream":
		cr.copyHeader(resp.Header, false)
		cr.w.WriteHeader(http.StatusOK)
		for _, l := range local {
			_, _ = cr.w.Write(jsonrpc.Event(nil, l))
		}
		if cr.listening() {
			_ = http.NewResponseController(cr.w).Flush()
		}
		cr.pipeSSE(resp.Body, fwd)
	case resp.StatusCode/100 == 2 && len(local) > 0:
		// The server took the rest (notifications, responses) and had
		// nothing to say; toolgate's own answers still go out.
		cr.writeLocal(local)
	default:
		cr.passthrough(resp)
	}
}

// sendTimed posts body to the server for the client. done closes the
// answer and observes the upstream duration up to that point.
func (cr *clientRequest) sendTimed(body []byte) (*http.Response, func(), error) {
	start := time.Now()
	// A stateless client's subscriptions/listen is the stream the server's
	// notifications come on, quiet for as long as nothing changes, as a
	// session's GET stream is: idle_timeout does not end it.
	resp, cancel, err := cr.send(http.MethodPost, body, !cr.listening())
	if err != nil {
		return nil, nil, err
	}
	cr.sessionStatus(resp)
	return resp, func() {
		resp.Body.Close()
		cancel()
		cr.rt.gateway.deps.Metrics.UpstreamDuration.WithLabelValues(apiMCP, "original").Observe(time.Since(start).Seconds())
	}, nil
}

// sessionStatus forgets a session the server no longer knows, so toolgate
// does not keep judging by a tool list from before.
func (cr *clientRequest) sessionStatus(resp *http.Response) {
	if resp.StatusCode == http.StatusNotFound {
		if sid := cr.r.Header.Get(hdrSession); sid != "" {
			cr.rt.state.drop(sid)
		}
	}
}

// forwardNonPost forwards GET (the server's stream) and DELETE (end of
// session), and a CORS preflight.
func (cr *clientRequest) forwardNonPost() {
	sid := cr.r.Header.Get(hdrSession)
	cr.sess = cr.rt.state.get(sid, true)
	// The server's own stream may stay quiet for hours; only a POST's
	// answer is held to idle_timeout. It is not a call, so max_streams
	// does not count it.
	resp, cancel, err := cr.send(cr.r.Method, nil, false)
	if err != nil {
		if cr.ctx.Err() != nil {
			cr.outcome = outcomeCancelled // the client left while the server had not answered yet
			return
		}
		cr.outcome = outcomeUpstreamError
		cr.log().Warn("mcp server unreachable", zap.Error(err))
		cr.writeJSON(http.StatusBadGateway, cr.failure(nil, upstreamFailure(cr.downMessage())))
		return
	}
	defer cancel()
	defer resp.Body.Close()
	cr.sessionStatus(resp)
	if cr.r.Method == http.MethodDelete && resp.StatusCode/100 == 2 && sid != "" {
		cr.rt.state.drop(sid)
	}
	if cr.r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && mediaType(resp.Header) == "text/event-stream" {
		cr.copyHeader(resp.Header, false)
		cr.w.WriteHeader(http.StatusOK)
		// The stream may stay quiet for long: the client learns it is open
		// now, not with the first event.
		_ = http.NewResponseController(cr.w).Flush()
		cr.pipeSSE(resp.Body, nil)
		return
	}
	cr.passthrough(resp)
}

// send makes the upstream request with the client's headers. The cancel
// func ends the request; with idle set, a body that goes silent for
// idle_timeout fails instead of hanging.
func (cr *clientRequest) send(method string, body []byte, idle bool, edit ...func(http.Header)) (*http.Response, func(), error) {
	ctx, cancel := context.WithCancelCause(cr.ctx)
	t := *cr.rt.target
	t.RawQuery = cr.r.URL.RawQuery
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.String(), rd)
	if err != nil {
		cancel(err)
		return nil, nil, err
	}
	req.Header = outboundHeader(cr.r.Header)
	for _, f := range edit {
		f(req.Header)
	}
	if body != nil {
		req.ContentLength = int64(len(body))
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if cr.rt.key != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+cr.rt.key)
	}
	sent := time.Now()
	cr.calls++
	resp, err := cr.rt.client.Do(req)
	// The server's time to answer is not toolgate's: the report's
	// overhead leaves it out.
	cr.upstreamWait += time.Since(sent)
	if err != nil {
		cancel(err)
		return nil, nil, httpx.WithoutURL(err)
	}
	if idle {
		resp.Body = httpx.NewIdleBody(resp.Body, cr.rt.cfg.IdleTimeout.D(), cancel)
	}
	return resp, func() { cancel(context.Canceled) }, nil
}

// upstreamDown answers every forwarded request with a JSON-RPC error, so
// a client never waits on a server that is not there.
func (cr *clientRequest) upstreamDown(fwd []message, local [][]byte, err error) {
	if cr.ctx.Err() != nil {
		cr.outcome = outcomeCancelled // the client left; nobody reads an answer
		return
	}
	cr.outcome = outcomeUpstreamError
	cr.log().Warn("mcp server unreachable", zap.Error(err))
	for _, m := range fwd {
		if m.kind == kindRequest {
			local = append(local, cr.failure(m.id, upstreamFailure(cr.downMessage())))
		}
	}
	if len(local) == 0 {
		cr.writeJSON(http.StatusBadGateway, cr.failure(nil, upstreamFailure(cr.downMessage())))
		return
	}
	cr.writeLocal(local)
}

func (cr *clientRequest) downMessage() string {
	return "the MCP server " + strconv.Quote(cr.rt.cfg.Name) + " could not be reached or did not answer in time"
}

// writeLocal answers with toolgate's own messages: one object, or an
// array for a batch.
func (cr *clientRequest) writeLocal(local [][]byte) {
	if cr.batch {
		cr.writeJSON(http.StatusOK, joinBatch(local))
		return
	}
	cr.writeJSON(http.StatusOK, local[0])
}

func (cr *clientRequest) writeJSON(status int, body []byte) {
	cr.rt.pipe.Write(cr.w, status, nil, body)
}

// readBody reads the POST body within limits.max_request_bytes.
func (cr *clientRequest) readBody() ([]byte, bool) {
	limit := cr.rt.snap.Config.Limits.MaxRequestBytes
	tooLarge := func() ([]byte, bool) {
		cr.outcome = outcomeLimited
		cr.w.Header().Set("Connection", "close")
		f := neutral.Failure{Status: http.StatusRequestEntityTooLarge, Code: neutral.CodeRequestTooLarge,
			Message: fmt.Sprintf("Invalid Request: the body exceeds %d bytes", limit), Refusal: true}
		cr.writeJSON(f.Status, cr.failure(nil, f))
		return nil, false
	}
	if cr.r.ContentLength > limit {
		return tooLarge()
	}
	b, err := io.ReadAll(http.MaxBytesReader(cr.w, cr.r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge()
		}
		cr.outcome = outcomeInvalid
		cr.writeJSON(http.StatusBadRequest, jsonrpc.ErrorResponse(nil, jsonrpc.CodeParseError, "Parse error: the body could not be read", nil))
		return nil, false
	}
	return b, true
}

// passthrough relays the server's answer as it is.
func (cr *clientRequest) passthrough(resp *http.Response) {
	if resp.StatusCode >= 400 && cr.outcome == outcomePass {
		cr.outcome = outcomeUpstreamError
	}
	cr.copyHeader(resp.Header, true)
	cr.w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(cr.w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := cr.w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

func mediaType(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return strings.ToLower(mt)
}
