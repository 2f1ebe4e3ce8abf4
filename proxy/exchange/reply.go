package exchange

import (
	"io"
	"net/http"
	"strconv"

	"github.com/toolgate/toolgate/proxy/pipeline"
)

// write sends a reply and reports the request: conclude, headers, status,
// body, report, once, in that order. It is the one place a judged route's
// answer is written.
func (x *exchange) write(rp pipeline.Reply) {
	x.conclude(rp.Status, rp.Label)
	if rp.Tail {
		if len(rp.Body) == 0 {
			// Even an answer with no events reaches the client as a stream.
			x.sw.start()
		} else {
			_ = x.sw.write(rp.Body)
		}
		x.report()
		return
	}
	if rp.Escalation {
		x.keepReplay(&rp)
	}
	Send(x.w, &rp, func(h http.Header) { x.headers(h, rp.Decided) })
	x.report()
}

// Send writes a whole reply to w: the upstream's headers to pass on, the
// reply's own, those stamp adds (the request's X-Toolgate headers:
// docs/routes.md, "Headers"), then the status and the body. A model route's write and an MCP route's own
// answers (mcpPipeline.Write) both go out through it.
func Send(w http.ResponseWriter, rp *pipeline.Reply, stamp func(http.Header)) {
	h := w.Header()
	if rp.Upstream != nil {
		copyHeader(h, rp.Upstream)
		if rp.Encoded {
			keepEncoding(h, rp.Upstream)
		}
	}
	setHeaders(h, rp)
	if stamp != nil {
		stamp(h)
	}
	w.WriteHeader(rp.Status)
	if rp.From != nil {
		_, _ = io.Copy(w, io.LimitReader(rp.From, rp.Limit))
	} else {
		_, _ = w.Write(rp.Body)
	}
}

// setHeaders sets rp's own headers. Keys are written canonical:
// Set would canonicalise each one on every answer.
func setHeaders(h http.Header, rp *pipeline.Reply) {
	if rp.ContentType != "" {
		h["Content-Type"] = []string{rp.ContentType}
	}
	if rp.NoRetry {
		h["X-Should-Retry"] = []string{"false"}
	}
	if rp.RetryAfter != "" {
		h["Retry-After"] = []string{rp.RetryAfter}
	}
	if rp.NoCache {
		h["Cache-Control"] = []string{"no-cache"}
	}
	if rp.From == nil {
		h["Content-Length"] = []string{strconv.Itoa(len(rp.Body))}
	}
}
