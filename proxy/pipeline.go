package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// exchange is the state of one validated request, from the client's body to
// the answer it gets. It is the single place where the pipeline's steps are
// sequenced; adapters translate and the ladder decides.
type exchange struct {
	s  *Server
	rt *runtime
	up *upstream
	ad api.Adapter
	// series are the route's pre-resolved metric series.
	series *apiSeries
	w      http.ResponseWriter
	r      *http.Request
	rid    string
	path   string
	// query is the query string sent upstream: the client's, less any key
	// toolgate's own replaces.
	query string

	start    time.Time
	upWait   time.Duration
	calls    int
	usage    []usageEntry
	upIDs    []string
	req      *api.Request
	eff      *catalog.Effective
	settings recovery.Settings
	header   http.Header
	vctx     validate.Context
	jd       *judge.Judge
	findings []string
}

type usageEntry struct {
	Kind   recovery.Kind `json:"kind"`
	Input  int64         `json:"input"`
	Output int64         `json:"output"`
}

// validated returns the handler for a route whose answers are judged.
func (s *Server) validated(rt *runtime, u *upstream, ad api.Adapter, prefix string) http.HandlerFunc {
	series := s.metrics.forAPI(ad.Name())
	return func(w http.ResponseWriter, r *http.Request) {
		x := &exchange{s: s, rt: rt, up: u, ad: ad, series: series, w: w, r: r, start: time.Now(),
			rid: requestID(r.Context()), path: strings.TrimPrefix(r.URL.EscapedPath(), prefix)}
		x.serve()
	}
}

func (x *exchange) serve() {
	snap := x.rt.snap
	body, ok := readBody(x.w, x.r, snap.Config.Limits.MaxRequestBytes, x.writeOwnError)
	if !ok {
		return
	}
	x.settings = recovery.SettingsFrom(snap)
	x.header = outboundHeader(x.r.Header, false)
	x.query = x.up.applyKey(x.header, x.r.URL.RawQuery, x.ad.Name())

	var c *call
	var err error
	if x.abstainOn() {
		// The abstain exit is added to the request's tools, so the
		// request must be read before it is sent.
		x.parseRequest(body)
		body = x.offerAbstain(body)
		c, err = x.send(x.r.Context(), recovery.KindOriginal, body)
	} else {
		// Nothing sent upstream depends on the request's content, so it
		// is read while the upstream works on it: the parse is then off
		// the path to the first byte. The body is only read by both.
		parsed := make(chan struct{})
		var crash any
		go func() {
			defer func() {
				crash = recover()
				close(parsed)
			}()
			x.parseRequest(body)
		}()
		c, err = x.send(x.r.Context(), recovery.KindOriginal, body)
		<-parsed
		if crash != nil {
			// Panics belong to the handler, whose recovery answers 502.
			if c != nil {
				c.Close()
			}
			panic(crash)
		}
	}
	if err != nil {
		x.failUpstream(err)
		return
	}
	defer c.Close()
	if c.resp.StatusCode < 200 || c.resp.StatusCode > 299 {
		x.relay(c)
		return
	}
	if undecoded(c.resp.Header) {
		// A body toolgate cannot decode can be neither judged nor passed on.
		x.failUpstream(errEncoding)
		return
	}
	// The answer's own framing decides the path, not the request's stream
	// flag: an upstream may ignore stream: true, and a request toolgate
	// could not read may still have asked for a stream.
	if f, ok := x.ad.(api.Framer); ok {
		if st, rd, ok := f.NewFramedStream(x.req, x.path, c.resp.Header, c.body); ok {
			x.serveStream(c, st, rd)
			return
		}
	}
	if strings.HasPrefix(c.resp.Header.Get("Content-Type"), "text/event-stream") {
		x.serveStream(c, x.ad.NewStream(x.req), nil)
		return
	}
	x.serveAnswer(c)
}

// serveAnswer judges a whole (non-streamed) answer and writes the result.
func (x *exchange) serveAnswer(c *call) {
	answer, err := x.readAnswer(c)
	if err != nil {
		x.failUpstream(err)
		return
	}
	resp, ok := x.parseAnswer(answer)
	if !ok {
		return
	}
	x.note(recovery.KindOriginal, resp.Usage, c.resp.Header)
	results, ok := x.judge(resp.Choices, &asker{x: x, prev: resp}, false)
	if !ok {
		return
	}
	x.finish(resp, c.resp.Header, results)
}

// parseResponse decodes an answer, with the request when the adapter needs it.
func (x *exchange) parseResponse(answer []byte) (*api.Response, error) {
	if p, ok := x.ad.(api.ResponseParser); ok {
		return p.ParseResponseFor(x.req, answer)
	}
	return x.ad.ParseResponse(answer)
}

// judge runs the ladder on every choice of an answer. It reports false when
// the client went away during a re-query; nothing is then written.
func (x *exchange) judge(turns []*recovery.Turn, ask recovery.Asker, committed bool) ([]*recovery.Result, bool) {
	if n, ok := x.ad.(api.Noter); ok {
		for _, t := range turns {
			for _, note := range n.Notes(t) {
				x.findings = append(x.findings, note)
				x.s.metrics.unvalidated(note)
			}
		}
	}
	results := make([]*recovery.Result, len(turns))
	for i, turn := range turns {
		res, err := recovery.Run(x.r.Context(), &recovery.Input{
			Turn:     turn,
			Judge:    x.jd.Batch,
			Eff:      x.eff,
			Settings: &x.settings,
			Ask:      ask,
			Stateful: x.req.Stateful || committed,
			UserText: x.req.UserText,
		})
		if err != nil {
			x.s.log.Info("client went away during recovery", zap.String("request_id", x.rid))
			return nil, false
		}
		results[i] = res
	}
	return results, true
}

// errNotUTF8 reports an answer that is not UTF-8, which JSON between
// systems must be (RFC 8259 §8.1). Go's decoder reads invalid bytes as
// U+FFFD, so toolgate would judge one call while the unchanged bytes it
// forwards make a strict client parser fail or read another.
var errNotUTF8 = errors.New("the upstream answer is not valid UTF-8")

// errFoldedKey reports an answer with a key that differs from a protocol
// key only by case ("Choices", "Tool_calls"). Go's decoder would read it as
// the real key while the agent's SDK ignores it (or the reverse), so what
// toolgate judged and what the agent runs could differ.
var errFoldedKey = errors.New("the upstream answer has a key that differs from a protocol key only in letter case")

// protocolKeys are the keys of the three APIs that carry tool calls, text
// and their framing.
var protocolKeys = jsonx.NewKeyFold(
	"choices", "message", "delta", "tool_calls", "function", "custom", "name", "arguments", "input",
	"id", "type", "index", "content", "finish_reason", "usage", "error", "output", "call_id", "item",
	"output_index", "content_block", "partial_json", "stop_reason", "response", "status", "role", "text",
)

// foldedKey reports a key that differs from a protocol key only in letter
// case, where the adapter reads keys if it knows, else anywhere.
func (x *exchange) foldedKey(data []byte) bool {
	if k, ok := x.ad.(api.KeyChecker); ok {
		return k.FoldedKey(data)
	}
	return protocolKeys.In(data)
}

// errNoCallID reports a function call without an id. The agent answers a
// call by its id and a re-query must too, so such a call can be neither
// run nor repaired.
var errNoCallID = errors.New("the upstream answer has a tool call without an id")

// parseAnswer decodes a whole upstream answer. When it cannot be read, or
// (enforce mode) holds a call no agent could answer, the client gets a 502
// and false.
func (x *exchange) parseAnswer(answer []byte) (*api.Response, bool) {
	var resp *api.Response
	err := errNotUTF8
	switch {
	case !utf8.Valid(answer):
	case x.foldedKey(answer):
		err = errFoldedKey
	default:
		resp, err = x.parseResponse(answer)
	}
	if err == nil && !x.settings.Shadow && missingCallID(resp.Choices) {
		err = errNoCallID
	}
	if err == nil {
		return resp, true
	}
	x.s.metrics.unvalidated("response_unreadable")
	x.s.log.Warn("upstream answer unreadable", zap.String("request_id", x.rid), zap.String("api", x.ad.Name()), zap.Error(err))
	msg := "toolgate could not read the upstream answer, so it was not forwarded"
	if errors.Is(err, errNotUTF8) || errors.Is(err, errNoCallID) || errors.Is(err, errFoldedKey) {
		msg = err.Error() + ", so it was not forwarded"
	}
	x.writeFinalError(http.StatusBadGateway, "upstream_error", msg)
	return nil, false
}

// missingCallID reports a judged call without an id in any complete turn.
// A turn cut off by the token limit escalates as truncated anyway.
func missingCallID(turns []*recovery.Turn) bool {
	for _, t := range turns {
		if t == nil || t.Truncated {
			continue
		}
		for _, c := range t.Calls {
			if c.Kind != validate.Other && c.ID == "" {
				return true
			}
		}
	}
	return false
}

// abstainDescription tells the model when the exit is the right answer.
const abstainDescription = "Call this instead of any other tool when none of the available tools can do what is needed, " +
	"or when doing it would mean guessing a tool or an argument. Give the reason in one sentence; the user will see it."

var abstainSchema = []byte(`{"type":"object","properties":{"reason":{"type":"string","description":"Why no available tool fits, in one sentence for the user."}},"required":["reason"],"additionalProperties":false}`)

// abstainOn reports whether the config offers the abstain exit to this
// request's mode.
func (x *exchange) abstainOn() bool {
	return x.rt.snap.Config.Abstain.Enabled && !x.settings.Shadow
}

// offerAbstain appends the virtual "no tool fits" tool to the upstream
// request when the model is free to choose (tool_choice auto). The caller
// has checked abstainOn (config on, not shadow mode, where the request must
// reach the upstream unchanged). Never over a client tool of the same name.
// The injected body becomes the request's body, so re-queries keep exactly
// the tools the upstream saw first.
func (x *exchange) offerAbstain(body []byte) []byte {
	cfg := x.rt.snap.Config.Abstain
	if x.req.Choice.Kind != catalog.ChoiceAuto || len(x.req.Offered) == 0 {
		return body
	}
	for _, o := range x.req.Offered {
		if o.Name == cfg.ToolName {
			return body
		}
	}
	inj, ok := x.ad.(api.ToolInjector)
	if !ok {
		return body
	}
	nb, err := inj.InjectTool(x.req, catalog.Offered{Name: cfg.ToolName, Description: abstainDescription, Parameters: abstainSchema})
	if err != nil {
		return body
	}
	x.req.Body = nb
	x.settings.AbstainTool = cfg.ToolName
	return nb
}

// verdict is the pipeline's decision on a whole answer, before any byte of
// it is written. Streams and plain answers share it.
type verdict struct {
	outcome recovery.Outcome
	// upstream is a retryable re-query failure to hand to the client.
	upstream *recovery.UpstreamError
	// escalation, when set, replaces the whole answer (error mode).
	escalation *api.Escalated
	finals     []api.Final
	// changed is false when the upstream's bytes can go out as they are.
	changed bool
}

// decide turns the ladder's results into one verdict, counting and
// recording what happened.
func (x *exchange) decide(results []*recovery.Result) verdict {
	v := verdict{outcome: recovery.Pass}
	if x.settings.Shadow {
		v.outcome = recovery.ShadowPass
	}
	for _, r := range results {
		v.outcome = recovery.Worse(v.outcome, r.Outcome)
	}
	x.account(results)
	x.observe(results)
	for _, r := range results {
		if r.Upstream != nil {
			v.upstream = r.Upstream
			return v
		}
	}
	if x.settings.Shadow {
		return v
	}
	v.finals = make([]api.Final, len(results))
	for i, r := range results {
		v.finals[i].Result = r
		if r.Outcome != recovery.Pass || r.AnyChanged() {
			v.changed = true
		}
		if r.Escalation == nil {
			continue
		}
		e := x.escalated(i, r)
		if x.rt.snap.Config.Escalation.Mode != catalog.EscalationMessage || x.req.StructuredOutput {
			v.escalation = e
			return v
		}
		v.finals[i].Escalated = e
		x.w.Header().Set("X-Toolgate-Escalation-Id", e.Escalation.ID)
	}
	return v
}

// finish writes a plain answer according to the verdict.
func (x *exchange) finish(resp *api.Response, upHeader http.Header, results []*recovery.Result) {
	v := x.decide(results)
	switch {
	case v.upstream != nil:
		x.writeUpstreamError(v.upstream)
	case v.escalation != nil:
		x.writeEscalation(v.escalation, v.outcome)
	case !v.changed:
		// The common case: every call valid, the upstream's bytes go out as is.
		x.writeAnswer(http.StatusOK, upHeader, resp.Body, v.outcome)
	default:
		body, err := x.ad.Render(x.req, resp, v.finals)
		if err != nil {
			x.s.log.Error("render failed", zap.String("request_id", x.rid), zap.Error(err))
			x.writeFinalError(http.StatusBadGateway, "toolgate_internal_error", "toolgate could not build the repaired answer")
			return
		}
		x.writeAnswer(http.StatusOK, upHeader, body, v.outcome)
	}
}

// asker sends re-queries for one answer through the exchange.
type asker struct {
	x    *exchange
	prev *api.Response
}

func (a *asker) Ask(ctx context.Context, q *recovery.Query) (*recovery.Turn, error) {
	x := a.x
	body, err := x.ad.FollowUp(x.req, a.prev, q)
	if err != nil {
		return nil, fmt.Errorf("building the re-query: %w", err)
	}
	c, err := x.send(ctx, q.Kind, body)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &recovery.UpstreamError{Err: err}
	}
	defer c.Close()
	if c.resp.StatusCode < 200 || c.resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(c.body, 1<<20))
		return nil, &recovery.UpstreamError{Status: c.resp.StatusCode, Header: c.resp.Header.Clone(), Body: b}
	}
	answer, err := x.readAnswer(c)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errTooLarge) || errors.Is(err, errEncoding) {
			return nil, err
		}
		// The connection failed inside the body (idle timeout, reset): a
		// transport failure like one before the headers, which the
		// client's retry may well not meet again.
		return nil, &recovery.UpstreamError{Err: err}
	}
	if x.foldedKey(answer) {
		return nil, fmt.Errorf("%w: %v", recovery.ErrBadAnswer, errFoldedKey)
	}
	resp, err := x.parseResponse(answer)
	if err != nil || len(resp.Choices) == 0 {
		return nil, fmt.Errorf("%w: %v", recovery.ErrBadAnswer, err)
	}
	x.note(q.Kind, resp.Usage, c.resp.Header)
	return resp.Choices[0], nil
}

// parseRequest reads the client's request and derives what judging the
// answer needs. A request toolgate cannot read goes upstream all the same:
// the upstream is its judge, and the answer is still held to the config
// catalog.
func (x *exchange) parseRequest(body []byte) {
	snap := x.rt.snap
	var req *api.Request
	var err error
	if rr, ok := x.ad.(api.RouteReader); ok {
		req, err = rr.ParseRequestAt(x.path, body)
	} else {
		req, err = x.ad.ParseRequest(body)
	}
	parsed := err == nil
	if !parsed {
		x.s.metrics.unvalidated("request_unreadable")
		req = &api.Request{Body: body}
	}
	x.req = req
	x.eff = snap.Effective(req.Offered, req.Choice, parsed)
	x.vctx = validate.Context{Eff: x.eff, Evidence: req.Evidence, HistoryUpstream: req.HistoryUpstream,
		History: req.History, Values: contextValues(x.r.Context())}
	x.jd = &judge.Judge{Local: &x.vctx, Validators: x.rt.validators, RequestID: x.rid, CatalogVersion: snap.Version}
}

// send makes one upstream call and times it.
func (x *exchange) send(ctx context.Context, kind recovery.Kind, body []byte) (*call, error) {
	t := time.Now()
	x.calls++
	// The transport only reads the header map, and the upstream calls of
	// one request are sequential, so all of them share it.
	path, query := x.path, x.query
	if fr, ok := x.ad.(api.FollowUpRouter); ok && kind != recovery.KindOriginal {
		path, query = fr.FollowUpRoute(path, query)
	}
	c, err := x.up.do(ctx, http.MethodPost, path, query, x.header, body)
	d := time.Since(t)
	x.upWait += d
	x.series.upstreamDuration(x.s.metrics, kind).Observe(d.Seconds())
	return c, err
}

// errTooLarge reports an upstream answer over max_response_bytes.
var errTooLarge = errors.New("the upstream answer exceeds max_response_bytes")

// errEncoding reports a compressed answer the transport did not decode.
var errEncoding = errors.New("the upstream answer uses a content encoding toolgate cannot read")

// readAnswer reads a whole non-streaming answer within the response limit.
func (x *exchange) readAnswer(c *call) ([]byte, error) {
	t := time.Now()
	defer func() { x.upWait += time.Since(t) }()
	if undecoded(c.resp.Header) {
		return nil, errEncoding
	}
	limit := x.rt.snap.Config.Limits.MaxResponseBytes
	b, err := readAll(io.LimitReader(c.body, limit+1), c.resp.ContentLength)
	if err != nil {
		if cause := context.Cause(c.ctx); errors.Is(cause, errIdle) {
			return nil, errIdle
		}
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// undecoded reports a body still under a content encoding: the transport
// removes the header of a gzip body it decoded itself, so any encoding
// left is one it did not undo.
func undecoded(h http.Header) bool {
	enc := h.Get("Content-Encoding")
	return enc != "" && !strings.EqualFold(enc, "identity")
}

// keepEncoding restores the content encoding of a body relayed as raw
// bytes, which copyHeader drops: without it the client would read
// compressed bytes as plain ones.
func keepEncoding(dst, src http.Header) {
	if undecoded(src) {
		dst["Content-Encoding"] = append([]string(nil), src.Values("Content-Encoding")...)
	}
}

// note records an upstream answer's usage and request id.
func (x *exchange) note(kind recovery.Kind, u recovery.Usage, h http.Header) {
	x.usage = append(x.usage, usageEntry{Kind: kind, Input: u.Input, Output: u.Output})
	if id := upstreamRequestID(h); id != "" {
		x.upIDs = append(x.upIDs, id)
	}
	in, out := x.series.tokens(x.s.metrics, kind)
	in.Add(float64(u.Input))
	out.Add(float64(u.Output))
}

func upstreamRequestID(h http.Header) string {
	for _, k := range []string{"X-Request-Id", "Request-Id", "Apim-Request-Id"} {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return ""
}

// failUpstream answers when the upstream could not be used at all.
func (x *exchange) failUpstream(err error) {
	if x.r.Context().Err() != nil {
		return
	}
	status, msg := http.StatusBadGateway, "the upstream could not be reached"
	switch {
	case errors.Is(err, errTooLarge):
		msg = err.Error()
	case errors.Is(err, errEncoding):
		msg = err.Error()
	case errors.Is(err, errIdle), isTimeout(err):
		status, msg = http.StatusGatewayTimeout, "the upstream did not answer in time"
	}
	x.s.log.Warn("upstream failed", zap.String("request_id", x.rid), zap.String("api", x.ad.Name()), zap.Error(withoutURL(err)))
	x.writeFinalError(status, "upstream_error", msg)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// relay passes a non-success upstream answer to the client as is: the SDK
// knows what to do with the provider's own errors and retry-after.
func (x *exchange) relay(c *call) {
	h := x.w.Header()
	copyHeader(h, c.resp.Header)
	keepEncoding(h, c.resp.Header)
	x.toolgateHeaders(h, "")
	x.w.WriteHeader(c.resp.StatusCode)
	_, _ = io.Copy(x.w, io.LimitReader(c.body, x.rt.snap.Config.Limits.MaxResponseBytes))
	x.logDone(c.resp.StatusCode, "upstream_status")
}

// writeUpstreamError passes a retryable re-query failure to the client as
// the provider sent it. It carries no outcome header: nothing was decided,
// and the SDK's retry will be judged afresh.
func (x *exchange) writeUpstreamError(ue *recovery.UpstreamError) {
	if ue.Status == 0 {
		x.writeFinalError(http.StatusGatewayTimeout, "upstream_error", "the upstream failed while toolgate was repairing a tool call; retry the request")
		return
	}
	h := x.w.Header()
	copyHeader(h, ue.Header)
	keepEncoding(h, ue.Header)
	h.Set("Content-Length", strconv.Itoa(len(ue.Body)))
	x.toolgateHeaders(h, "")
	x.w.WriteHeader(ue.Status)
	_, _ = x.w.Write(ue.Body)
	x.logDone(ue.Status, "upstream_error")
}

func (x *exchange) writeFinalError(status int, typ, msg string) {
	h := x.w.Header()
	x.toolgateHeaders(h, "")
	x.writeOwnError(x.w, status, typ, msg)
	x.logDone(status, typ)
}

// writeOwnError writes one of toolgate's own errors in the route's
// envelope where the adapter has one, else the OpenAI-style one.
func (x *exchange) writeOwnError(w http.ResponseWriter, status int, typ, msg string) {
	if e, ok := x.ad.(api.PlainErrorer); ok {
		writeErrorBody(w, status, e.PlainError(status, typ, msg))
		return
	}
	writeError(w, status, typ, msg)
}

func (x *exchange) writeAnswer(status int, upHeader http.Header, body []byte, outcome recovery.Outcome) {
	h := x.w.Header()
	copyHeader(h, upHeader)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	x.toolgateHeaders(h, outcome)
	x.w.WriteHeader(status)
	_, _ = x.w.Write(body)
	x.logDone(status, string(outcome))
}

// copyHeader copies an upstream answer's headers except framing and
// encoding, which toolgate redoes, hop-by-hop ones and toolgate's own.
func copyHeader(dst, src http.Header) {
	for k, v := range src {
		if isToolgateHeader(k) {
			// toolgate's namespace is its own: an upstream (a second
			// toolgate, or a hostile server) cannot speak in its name.
			continue
		}
		dst[k] = append([]string(nil), v...)
	}
	removeHop(dst)
	dst.Del("Content-Length")
	dst.Del("Content-Encoding")
}

// toolgateHeaders sets SPEC §6 headers. Outcome headers only exist once the
// whole answer is known.
func (x *exchange) toolgateHeaders(h http.Header, outcome recovery.Outcome) {
	// Keys are written already canonical: Set would canonicalise each one
	// on every answer.
	h["X-Toolgate-Request-Id"] = []string{x.rid}
	h["X-Toolgate-Catalog-Version"] = []string{x.rt.snap.Version}
	if outcome == "" {
		return
	}
	h["X-Toolgate-Outcome"] = []string{string(outcome)}
	h["X-Toolgate-Upstream-Calls"] = []string{strconv.Itoa(x.calls)}
	h["X-Toolgate-Overhead-Ms"] = []string{millis(x.overhead())}
	h["X-Toolgate-Usage"] = []string{x.usageJSON()}
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

func (x *exchange) overhead() time.Duration {
	d := time.Since(x.start) - x.upWait
	if d < 0 {
		return 0
	}
	return d
}

func (x *exchange) usageJSON() string {
	var in, out int64
	for _, u := range x.usage {
		in += u.Input
		out += u.Output
	}
	b := make([]byte, 0, 64+48*len(x.usage))
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, in, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, out, 10)
	b = append(b, `,"calls":[`...)
	for i, u := range x.usage {
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

// logDone writes the request's one log line. Header values and bodies are
// never logged.
func (x *exchange) logDone(status int, outcome string) {
	x.series.added.Observe(x.overhead().Seconds())
	x.series.requests(x.s.metrics, outcome).Inc()
	model := ""
	if x.req != nil {
		model = x.req.Model
	}
	x.s.log.Info("request",
		zap.String("request_id", x.rid),
		zap.String("api", x.ad.Name()),
		zap.String("route", x.r.URL.Path),
		zap.String("model", model),
		zap.Int("status", status),
		zap.String("outcome", outcome),
		zap.Strings("findings", x.findings),
		zap.Int("upstream_calls", x.calls),
		zap.Duration("duration", time.Since(x.start)),
		zap.Duration("overhead", x.overhead()),
	)
}
