package exchange

import (
	"net/http"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/internal/httpx"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/proxy/pipeline"
)

// outcome is what one request came to. perform fills in what the
// verdict's effects produced (the escalation and approval ids, the
// findings) and write concludes it; everything that reports the request
// reads it, here: the X-Toolgate response headers (docs/routes.md,
// "Headers"), the request metrics and the one log line. Escalations reach
// the sinks in perform (effects.go), through the pipeline's Recorder.
type outcome struct {
	// label is the X-Toolgate-Outcome value once the answer is decided,
	// else what ended the request (an error code, upstream_status); it
	// labels toolgate_requests_total and the log line.
	label  string
	status int
	// escalationID is the escalation the answer carries, if any.
	escalationID string
	// approvalID is the approval the answer was held under or released
	// by, if any.
	approvalID string
	// findings are every finding code and operator note of the answer.
	findings []string
}

// copyHeader copies an upstream answer's headers except framing and
// encoding, which toolgate redoes, hop-by-hop ones and toolgate's own.
func copyHeader(dst, src http.Header) {
	for k, v := range src {
		if httpx.IsToolgateHeader(k) {
			// toolgate's namespace is its own: an upstream (a second
			// toolgate, or a hostile server) cannot speak in its name.
			continue
		}
		dst[k] = append([]string(nil), v...)
	}
	httpx.RemoveHop(dst)
	dst.Del("Content-Length")
	dst.Del("Content-Encoding")
}

// conclude records how the request ends.
func (x *exchange) conclude(status int, label string) {
	x.out.status, x.out.label = status, label
}

// headers sets the X-Toolgate headers (docs/routes.md, "Headers") from the
// outcome. Outcome headers only
// exist once the whole answer is known (decided): a stream's headers go
// out before it is.
func (x *exchange) headers(h http.Header, decided bool) {
	// Keys are written already canonical: Set would canonicalise each one
	// on every answer.
	// One backing array for every value, cut with full slice expressions
	// so that a later append to one header cannot spill into the next: a
	// []string literal per header was one allocation each.
	vals := make([]string, 7)
	vals[0], vals[1] = x.requestID, x.gen.Snap.Version
	h["X-Toolgate-Request-Id"] = vals[0:1:1]
	h["X-Toolgate-Catalog-Version"] = vals[1:2:2]
	if x.out.escalationID != "" {
		vals[2] = x.out.escalationID
		h["X-Toolgate-Escalation-Id"] = vals[2:3:3]
	}
	if !decided {
		return
	}
	vals[3], vals[4], vals[5], vals[6] = x.out.label, strconv.Itoa(x.account.calls), millis(x.account.overhead()), x.account.usageJSON()
	h["X-Toolgate-Outcome"] = vals[3:4:4]
	h["X-Toolgate-Upstream-Calls"] = vals[4:5:5]
	h["X-Toolgate-Overhead-Ms"] = vals[5:6:6]
	h["X-Toolgate-Usage"] = vals[6:7:7]
}

// millis formats d in milliseconds with three decimals ("0.042").
func millis(d time.Duration) string {
	us := d.Microseconds()
	var b [32]byte
	out := strconv.AppendInt(b[:0], us/1000, 10)
	frac := us % 1000
	out = append(out, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return string(out)
}

// overhead is the request's time so far less what it waited on the
// upstream.
func (sp *account) overhead() time.Duration {
	d := time.Since(sp.start) - sp.upWait
	if d < 0 {
		return 0
	}
	return d
}

// usageJSON is the X-Toolgate-Usage value: the tokens of every upstream
// call, in total and call by call.
func (sp *account) usageJSON() string {
	var in, out int64
	for _, u := range sp.usage {
		in += u.Input
		out += u.Output
	}
	b := make([]byte, 0, 64+48*len(sp.usage))
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, in, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, out, 10)
	b = append(b, `,"calls":[`...)
	for i, u := range sp.usage {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"kind":`...)
		b = jsonx.AppendString(b, string(u.Kind))
		b = append(b, `,"input":`...)
		b = strconv.AppendInt(b, u.Input, 10)
		b = append(b, `,"output":`...)
		b = strconv.AppendInt(b, u.Output, 10)
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	return string(b)
}

// report counts the request and writes its one log line. Header values
// and bodies are never logged.
func (x *exchange) report() {
	o := &x.out
	observe.Record(x.r.Context(), x.series.Added, x.account.overhead().Seconds())
	traceFields := x.traceOutcome()
	x.series.Requests(o.label).Inc()
	model := ""
	if x.parsed.req != nil {
		model = x.parsed.req.Model
	}
	x.env.Recorder.LogRequest(&pipeline.RequestLine{RequestID: x.requestID, API: x.api.Name(), Route: x.r.URL.Path, Model: model, Status: o.status,
		Outcome: o.label, Findings: o.findings, Calls: x.account.calls, Duration: time.Since(x.account.start), Overhead: x.account.overhead(), Trace: traceFields})
}
