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

// exchange is one HTTP request on an MCP route.
type exchange struct {
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
	// modern is set for a request of a stateless revision (2026-07-28):
	// version is the revision it carries and caps its clientCapabilities.
	modern  bool
	version string
	caps    []byte
	method  string
	// upstreamSession is the session id the server's answer gave.
	upstreamSession string
	// gone is set when the server said it no longer knows the session.
	gone *sessionGone
	// start, upWait and findings are for the request's report: when it
	// began, how long the server took, and the finding codes judged.
	start    time.Time
	upWait   time.Duration
	findings []string
	// calls counts the requests sent to the server.
	calls int
}

func (rt *Route) newExchange(w http.ResponseWriter, r *http.Request) *exchange {
	return &exchange{rt: rt, w: w, r: r, ctx: r.Context(), rid: w.Header().Get("X-Toolgate-Request-Id"),
		outcome: outcomePass, tracked: map[string]tracked{}, start: time.Now()}
}

func (x *exchange) log() *zap.Logger {
	return x.rt.g.deps.Log.With(zap.String("request_id", x.rid), zap.String("mcp_server", x.rt.cfg.Name))
}

// post handles a client's JSON-RPC message or batch.
func (x *exchange) post() {
	body, ok := x.readBody()
	if !ok {
		return
	}
	msgs, bad, batch, perr := parseBody(body)
	x.batch = batch
	if perr != nil {
		x.outcome = outcomeInvalid
		x.writeJSON(http.StatusBadRequest, jsonrpc.ErrorResponse(perr.id, perr.code, perr.msg, nil))
		return
	}
	if !x.revision(msgs, batch) {
		return
	}
	sid := x.r.Header.Get(hdrSession)
	if x.modern {
		// Nothing is sticky: whatever a session header says, the request
		// stands alone, and the server's own tool list judges it.
		sid = ""
	}
	x.sess = x.rt.st.get(sid, true)
	if batch {
		if v := x.protocol(); v != protocol20250326 {
			x.outcome = outcomeInvalid
			x.writeJSON(http.StatusBadRequest, jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest,
				"Invalid Request: MCP revision "+v+" has no JSON-RPC batches; send one message per request", nil))
			return
		}
	}
	if hasRequest(msgs) {
		if !x.sess.acquire(x.ctx, x.rt.cfg.MaxStreams, x.rt.cfg.IdleTimeout.D()) {
			x.busy(msgs)
			return
		}
		defer x.sess.release()
	}

	fwd, local, hold := x.sort(msgs, bad)
	if hold != nil {
		x.confirm(hold)
		return
	}
	if x.gone != nil {
		x.outcome = outcomeUpstreamError
		x.rt.pipe.Write(x.w, http.StatusNotFound, x.gone.header, x.gone.body)
		return
	}
	if len(local) > 0 && x.outcome == outcomePass {
		x.outcome = outcomeEscalated
	}
	if len(fwd) == 0 {
		if len(local) == 0 {
			x.rt.pipe.Write(x.w, http.StatusAccepted, nil, nil)
			return
		}
		x.writeLocal(local)
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
	x.forward(out, fwd, local)
}

// sort decides each message of a POST: answered by toolgate (a refusal or
// an error), consumed (an answer to toolgate's own question), held for a
// person's yes, or forwarded.
func (x *exchange) sort(msgs []message, bad []rpcError) (fwd []message, local [][]byte, hold *held) {
	for _, e := range bad {
		local = append(local, jsonrpc.ErrorResponse(e.id, e.code, e.msg, nil))
	}
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.kind == kindResponse && x.sess.deliver(m):
		case m.kind == kindNotification && m.method == "notifications/cancelled" && x.sess.cancelHeld(m.params):
		case m.kind == kindNotification && m.method == "tools/call":
			// A call without an id would get no answer, and a lax server
			// might still run it; it is neither judged nor forwarded.
			local = append(local, jsonrpc.ErrorResponse(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: tools/call is a request and needs an id", nil))
		case m.kind == kindRequest && m.method == "tools/call":
			ans, h := x.judge(m)
			switch {
			case ans != nil:
				local = append(local, ans)
			case h != nil && x.batch:
				local = append(local, x.refuseUnconfirmed(h, "a call that needs a person's yes cannot be part of a batch"))
			case h != nil:
				// Only a single message is held, so nothing else waits.
				return nil, nil, h
			default:
				fwd = append(fwd, *m)
			}
		default:
			x.trackRequest(m)
			fwd = append(fwd, *m)
		}
	}
	return fwd, local, nil
}

// trackRequest notes a forwarded request whose answer toolgate reads.
func (x *exchange) trackRequest(m *message) {
	if m.kind != kindRequest {
		return
	}
	switch m.method {
	case "tools/list":
		x.tracked[m.idKey()] = tracked{kind: trackList, cursor: listCursor(m.params)}
	case "initialize":
		x.tracked[m.idKey()] = tracked{kind: trackInit, elicit: declaresElicitation(m.params)}
	case "server/discover":
		x.tracked[m.idKey()] = tracked{kind: trackDiscover}
	case "tasks/result":
		// The result of a judged call that runs as a task: checked
		// against the tool's outputSchema like the call's own result.
		if t, ok := x.sess.task(taskIDParam(m.params)); ok {
			x.tracked[m.idKey()] = t
			if x.sess.id != "" {
				x.sess.track(m.idKey(), t)
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
func (x *exchange) busy(msgs []message) {
	if x.ctx.Err() != nil {
		x.outcome = outcomeCancelled
		return
	}
	x.outcome = outcomeLimited
	msg := fmt.Sprintf("this session already has %d calls in flight, the most mcp_servers[].max_streams allows, and none ended within %s",
		x.rt.cfg.MaxStreams, x.rt.cfg.IdleTimeout.D())
	var local [][]byte
	for _, m := range msgs {
		if m.kind == kindRequest {
			local = append(local, jsonrpc.ErrorResponse(m.id, codeBusy, msg, nil))
		}
	}
	x.writeLocal(local)
}

// protocol is the revision this request speaks: its header, else what the
// session negotiated, else 2025-03-26, which the specification says to
// assume when a client sends no header.
func (x *exchange) protocol() string {
	if v := x.r.Header.Get(hdrProtocol); v != "" {
		return v
	}
	if v, _ := x.sess.info(); v != "" {
		return v
	}
	return protocol20250326
}

// listening reports a stateless subscriptions/listen: a stream, not a call.
func (x *exchange) listening() bool { return x.modern && x.method == "subscriptions/listen" }

// forward sends the messages toolgate let through and relays the answer,
// with local answers (refusals) joined to it.
func (x *exchange) forward(body []byte, fwd []message, local [][]byte) {
	resp, done, err := x.sendTimed(body)
	if err != nil {
		x.upstreamDown(fwd, local, err)
		return
	}
	defer done()
	x.upstreamSession = resp.Header.Get(hdrSession)
	ct := mediaType(resp.Header)
	switch {
	case resp.StatusCode == http.StatusOK && ct == "application/json":
		x.answerJSON(resp, fwd, local)
	case resp.StatusCode == http.StatusOK && ct == "text/event-stream":
		x.copyHeader(resp.Header, false)
		x.w.WriteHeader(http.StatusOK)
		for _, l := range local {
			_, _ = x.w.Write(jsonrpc.Event(nil, l))
		}
		if x.listening() {
			_ = http.NewResponseController(x.w).Flush()
		}
		x.pipeSSE(resp.Body, fwd)
	case resp.StatusCode/100 == 2 && len(local) > 0:
		// The server took the rest (notifications, responses) and had
		// nothing to say; toolgate's own answers still go out.
		x.writeLocal(local)
	default:
		x.passthrough(resp)
	}
}

// sendTimed posts body to the server for the client. done closes the
// answer and observes the upstream duration up to that point.
func (x *exchange) sendTimed(body []byte) (*http.Response, func(), error) {
	start := time.Now()
	// A stateless client's subscriptions/listen is the stream the server's
	// notifications come on, quiet for as long as nothing changes, as a
	// session's GET stream is: idle_timeout does not end it.
	resp, cancel, err := x.send(http.MethodPost, body, !x.listening())
	if err != nil {
		return nil, nil, err
	}
	x.sessionStatus(resp)
	return resp, func() {
		resp.Body.Close()
		cancel()
		x.rt.g.deps.Metrics.UpstreamDuration.WithLabelValues(apiMCP, "original").Observe(time.Since(start).Seconds())
	}, nil
}

// sessionStatus forgets a session the server no longer knows, so toolgate
// does not keep judging by a tool list from before.
func (x *exchange) sessionStatus(resp *http.Response) {
	if resp.StatusCode == http.StatusNotFound {
		if sid := x.r.Header.Get(hdrSession); sid != "" {
			x.rt.st.drop(sid)
		}
	}
}

// other forwards GET (the server's stream) and DELETE (end of session).
func (x *exchange) other() {
	sid := x.r.Header.Get(hdrSession)
	x.sess = x.rt.st.get(sid, true)
	// The server's own stream may stay quiet for hours; only a POST's
	// answer is held to idle_timeout. It is not a call, so max_streams
	// does not count it.
	resp, cancel, err := x.send(x.r.Method, nil, false)
	if err != nil {
		if x.ctx.Err() != nil {
			x.outcome = outcomeCancelled // the client left while the server had not answered yet
			return
		}
		x.outcome = outcomeUpstreamError
		x.log().Warn("mcp server unreachable", zap.Error(err))
		x.writeJSON(http.StatusBadGateway, x.failure(nil, upstreamFailure(x.downMessage())))
		return
	}
	defer cancel()
	defer resp.Body.Close()
	x.sessionStatus(resp)
	if x.r.Method == http.MethodDelete && resp.StatusCode/100 == 2 && sid != "" {
		x.rt.st.drop(sid)
	}
	if x.r.Method == http.MethodGet && resp.StatusCode == http.StatusOK && mediaType(resp.Header) == "text/event-stream" {
		x.copyHeader(resp.Header, false)
		x.w.WriteHeader(http.StatusOK)
		// The stream may stay quiet for long: the client learns it is open
		// now, not with the first event.
		_ = http.NewResponseController(x.w).Flush()
		x.pipeSSE(resp.Body, nil)
		return
	}
	x.passthrough(resp)
}

// send makes the upstream request with the client's headers. The cancel
// func ends the request; with idle set, a body that goes silent for
// idle_timeout fails instead of hanging.
func (x *exchange) send(method string, body []byte, idle bool, edit ...func(http.Header)) (*http.Response, func(), error) {
	ctx, cancel := context.WithCancelCause(x.ctx)
	t := *x.rt.target
	t.RawQuery = x.r.URL.RawQuery
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.String(), rd)
	if err != nil {
		cancel(err)
		return nil, nil, err
	}
	req.Header = outboundHeader(x.r.Header)
	for _, f := range edit {
		f(req.Header)
	}
	if body != nil {
		req.ContentLength = int64(len(body))
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if x.rt.key != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+x.rt.key)
	}
	sent := time.Now()
	x.calls++
	resp, err := x.rt.client.Do(req)
	// The server's time to answer is not toolgate's: the report's
	// overhead leaves it out.
	x.upWait += time.Since(sent)
	if err != nil {
		cancel(err)
		return nil, nil, httpx.WithoutURL(err)
	}
	if idle {
		resp.Body = httpx.NewIdleBody(resp.Body, x.rt.cfg.IdleTimeout.D(), cancel)
	}
	return resp, func() { cancel(context.Canceled) }, nil
}

// upstreamDown answers every forwarded request with a JSON-RPC error, so
// a client never waits on a server that is not there.
func (x *exchange) upstreamDown(fwd []message, local [][]byte, err error) {
	if x.ctx.Err() != nil {
		x.outcome = outcomeCancelled // the client left; nobody reads an answer
		return
	}
	x.outcome = outcomeUpstreamError
	x.log().Warn("mcp server unreachable", zap.Error(err))
	for _, m := range fwd {
		if m.kind == kindRequest {
			local = append(local, x.failure(m.id, upstreamFailure(x.downMessage())))
		}
	}
	if len(local) == 0 {
		x.writeJSON(http.StatusBadGateway, x.failure(nil, upstreamFailure(x.downMessage())))
		return
	}
	x.writeLocal(local)
}

func (x *exchange) downMessage() string {
	return "the MCP server " + strconv.Quote(x.rt.cfg.Name) + " could not be reached or did not answer in time"
}

// writeLocal answers with toolgate's own messages: one object, or an
// array for a batch.
func (x *exchange) writeLocal(local [][]byte) {
	if x.batch {
		x.writeJSON(http.StatusOK, joinBatch(local))
		return
	}
	x.writeJSON(http.StatusOK, local[0])
}

func (x *exchange) writeJSON(status int, body []byte) { x.rt.pipe.Write(x.w, status, nil, body) }

// readBody reads the POST body within limits.max_request_bytes.
func (x *exchange) readBody() ([]byte, bool) {
	limit := x.rt.snap.Config.Limits.MaxRequestBytes
	tooLarge := func() ([]byte, bool) {
		x.outcome = outcomeLimited
		x.w.Header().Set("Connection", "close")
		f := neutral.Failure{Status: http.StatusRequestEntityTooLarge, Code: neutral.CodeRequestTooLarge,
			Message: fmt.Sprintf("Invalid Request: the body exceeds %d bytes", limit), Refusal: true}
		x.writeJSON(f.Status, x.failure(nil, f))
		return nil, false
	}
	if x.r.ContentLength > limit {
		return tooLarge()
	}
	b, err := io.ReadAll(http.MaxBytesReader(x.w, x.r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge()
		}
		x.outcome = outcomeInvalid
		x.writeJSON(http.StatusBadRequest, jsonrpc.ErrorResponse(nil, jsonrpc.CodeParseError, "Parse error: the body could not be read", nil))
		return nil, false
	}
	return b, true
}

// passthrough relays the server's answer as it is.
func (x *exchange) passthrough(resp *http.Response) {
	if resp.StatusCode >= 400 && x.outcome == outcomePass {
		x.outcome = outcomeUpstreamError
	}
	x.copyHeader(resp.Header, true)
	x.w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(x.w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := x.w.Write(buf[:n]); werr != nil {
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
