package proxy

import (
	"io"
	"net/http"
	"strconv"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/recovery"
)

// reply is what a judged request answers, known in full before a byte of
// it is written: the upstream's bytes relayed, an answer as it came or
// re-encoded, an escalation, one of toolgate's failures, or the tail of a
// stream whose head may have gone out already. Everything that decides
// builds one; write alone sends it.
type reply struct {
	status int
	// label is the outcome header's value once decided, else what ended
	// the request; it labels the request metrics and the log line.
	label string
	// decided: the label is the whole answer's outcome, so the outcome
	// headers go out with it; a stream's tail has none, its headers went
	// out (or go out now) as a stream's, before it was decided.
	decided bool
	// upstream are the upstream answer's headers to pass on (copyHeader);
	// encoded keeps its content encoding, for bytes relayed undecoded.
	upstream http.Header
	encoded  bool
	// The reply's own headers, set over the upstream's: Content-Type,
	// X-Should-Retry: false, Retry-After and Cache-Control: no-cache.
	contentType string
	noRetry     bool
	retryAfter  string
	noCache     bool
	body        []byte
	// from, when set, is read to the client in place of body, up to limit
	// bytes: an upstream's own error, relayed as it arrives.
	from  io.Reader
	limit int64
	// tail, when set, makes body the end of a stream: it goes out through
	// the stream's writer, after whatever that sent, on the stream's
	// status and headers.
	tail *streamWriter
	// escalation marks an escalation's 422, which the request's retries
	// get again (replay.go).
	escalation bool
}

// write sends a reply and reports the request: conclude, headers, status,
// body, report, once, in that order. It is the one place a judged route's
// answer is written.
func (x *exchange) write(rp reply) {
	x.conclude(rp.status, rp.label)
	if rp.tail != nil {
		if len(rp.body) == 0 {
			// Even an answer with no events reaches the client as a stream.
			rp.tail.start()
		} else {
			_ = rp.tail.write(rp.body)
		}
		x.report()
		return
	}
	if rp.escalation {
		x.keepReplay(&rp)
	}
	rp.send(x.w, func(h http.Header) { x.headers(h, rp.decided) })
	x.report()
}

// send writes a whole reply to w: the upstream's headers to pass on, the
// reply's own, those stamp adds (the request's X-Toolgate headers:
// docs/routes.md, "Headers"), then the status and the body. A model route's write and an MCP route's own
// answers (mcpPipeline.Write) both go out through it.
func (rp *reply) send(w http.ResponseWriter, stamp func(http.Header)) {
	h := w.Header()
	if rp.upstream != nil {
		copyHeader(h, rp.upstream)
		if rp.encoded {
			keepEncoding(h, rp.upstream)
		}
	}
	rp.setHeaders(h)
	if stamp != nil {
		stamp(h)
	}
	w.WriteHeader(rp.status)
	if rp.from != nil {
		_, _ = io.Copy(w, io.LimitReader(rp.from, rp.limit))
	} else {
		_, _ = w.Write(rp.body)
	}
}

// setHeaders sets the reply's own headers. Keys are written canonical:
// Set would canonicalise each one on every answer.
func (rp *reply) setHeaders(h http.Header) {
	if rp.contentType != "" {
		h["Content-Type"] = []string{rp.contentType}
	}
	if rp.noRetry {
		h["X-Should-Retry"] = []string{"false"}
	}
	if rp.retryAfter != "" {
		h["Retry-After"] = []string{rp.retryAfter}
	}
	if rp.noCache {
		h["Cache-Control"] = []string{"no-cache"}
	}
	if rp.from == nil {
		h["Content-Length"] = []string{strconv.Itoa(len(rp.body))}
	}
}

// answerReply is a whole answer that goes out: the upstream's bytes or
// their re-encoding, under the upstream's headers.
func answerReply(upHeader http.Header, body []byte, o recovery.Outcome) reply {
	return reply{status: http.StatusOK, label: string(o), decided: true, upstream: upHeader, body: body}
}

// relayReply passes a non-success upstream answer on as it is: the SDK
// knows what to do with the provider's own errors and retry-after.
func (x *exchange) relayReply(c *upstream.Call) reply {
	return reply{status: c.Resp.StatusCode, label: labelUpstreamStatus, upstream: c.Resp.Header, encoded: true,
		from: c.Body, limit: x.rt.snap.Config.Limits.MaxResponseBytes}
}

// handBackReply passes a retryable re-query failure to the client as the
// provider sent it. It carries no outcome header: nothing was decided,
// and the SDK's retry will be judged afresh.
func (x *exchange) handBackReply(ue *recovery.UpstreamError) reply {
	if ue.Status == 0 {
		return x.failureReply(pipeline.RepairFailure(ue, false))
	}
	return reply{status: ue.Status, label: string(neutral.CodeUpstream), upstream: ue.Header, encoded: true, body: ue.Body}
}

// failureReply is one of toolgate's own errors in the API's envelope.
func (x *exchange) failureReply(f neutral.Failure) reply {
	return reply{status: f.Status, label: string(f.Code), contentType: "application/json", noRetry: !f.Retryable,
		retryAfter: pipeline.RetryAfterOf(f), body: x.cd.EncodeError(f)}
}

// escalationReply answers in error mode (docs/escalations.md).
func (x *exchange) escalationReply(e *neutral.Escalated, o recovery.Outcome) reply {
	return reply{status: pipeline.StatusEscalated, label: string(o), decided: true, contentType: "application/json",
		noRetry: true, body: x.cd.EncodeEscalation(e), escalation: true}
}

// tailReply ends a stream with body; decided when the stream's answer
// was judged whole.
func tailReply(sw *streamWriter, body []byte, label string, decided bool) reply {
	return reply{status: http.StatusOK, label: label, decided: decided, tail: sw, body: body}
}
