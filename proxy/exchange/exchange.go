package exchange

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/httpx"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// exchange is the state of one validated request, from the client's body to
// the answer it gets. It is the single place where the pipeline's steps are
// sequenced; codecs translate and the ladder decides.
type exchange struct {
	env *Env
	gen *pipeline.Generation
	up  *upstream.Upstream
	// api names the wire format; codec translates this request's exchange.
	api   api.API
	codec api.Codec
	// series are the route's pre-resolved metric series.
	series    *observe.APISeries
	w         http.ResponseWriter
	r         *http.Request
	requestID string
	path      string
	// body is the client's request as it came, which an approval binds.
	body []byte
	// query is the query string sent upstream: the client's, less any key
	// toolgate's own replaces.
	query string

	// parsed is what was read of the client's request: set whole once
	// the upstream has the request (useRequest), and read-only after.
	parsed parsedRequest
	// account is what the request's upstream calls took, which the
	// outcome headers, the log line and escalations report.
	account account
	// callJudge judges this request's calls with its evidence and context.
	callJudge *judge.Judge
	settings  recovery.Settings
	header    http.Header
	// sw writes the stream's events once a streamed answer's run began;
	// a reply's tail goes out through it.
	sw *streamWriter
	// strict is what strict mode marked on this request, or nil.
	strict *strictRun
	// out is what the request comes to, filled in as it is decided.
	out outcome
	// key names the request for escalation replays, once worked out.
	key *replayKey
}

// parsedRequest is what the pipeline read of the client's request and
// what judging its answer needs. parseRequest makes it, on a goroutine of
// its own while the upstream works on the request, and hands it back
// whole; nothing changes it after.
type parsedRequest struct {
	req       *neutral.Request
	effective *catalog.Effective
	// local is what the local checks read; the judge points into the
	// exchange's copy.
	local validate.Context
	// unread is set when the client's request could not be decoded.
	unread bool
}

// account is what a request's upstream calls took: their number, the
// time spent waiting on them (toolgate's overhead is the rest), their
// usage and the request ids the upstream gave them.
type account struct {
	start  time.Time
	upWait time.Duration
	calls  int
	usage  []usageEntry
	upIDs  []string
	// upSpan is the client span of the latest upstream call; respModel
	// the model its answer named.
	upSpan    trace.Span
	respModel string
}

type usageEntry struct {
	Kind   recovery.QueryKind `json:"kind"`
	Input  int64              `json:"input"`
	Output int64              `json:"output"`
}

// Env is what every model route's exchanges share, across config
// generations: the books, approvals, the replay memory and the logger.
type Env struct {
	Log      *zap.Logger
	Metrics  *observe.Metrics
	Recorder *pipeline.Recorder
	// Approvals holds confirm calls for a person; nil escalates them with
	// nothing to approve.
	Approvals *approval.Service
	Replays   *Replays
	// Keepalive is the interval of keepalives on held streams.
	Keepalive time.Duration
	// Observer, when set, receives every judged answer's recovery steps.
	Observer pipeline.RecoveryObserver
}

// Route is one model API's judged route under one upstream and config
// generation: what every exchange on it starts from.
type Route struct {
	env    *Env
	gen    *pipeline.Generation
	up     *upstream.Upstream
	api    api.API
	series *observe.APISeries
	prefix string
}

// NewRoute is the handler of a route whose answers are judged.
func NewRoute(env *Env, gen *pipeline.Generation, up *upstream.Upstream, a api.API, prefix string) *Route {
	return &Route{env: env, gen: gen, up: up, api: a, series: env.Metrics.ForAPI(a.Name()), prefix: prefix}
}

// ServeHTTP implements http.Handler, itself rather than through a
// HandlerFunc: each wrapper would be a frame more under a held stream.
func (rt *Route) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.exchange(w, r).serve() }

// exchange begins one request's exchange. Out of line, what it takes to
// build one is no part of Route.ServeHTTP's frame.
//
//go:noinline
func (rt *Route) exchange(w http.ResponseWriter, r *http.Request) *exchange {
	return &exchange{env: rt.env, gen: rt.gen, up: rt.up, api: rt.api, codec: rt.api.NewCodec(), series: rt.series, w: w, r: r,
		account: account{start: time.Now()}, requestID: pipeline.RequestID(r.Context()), path: strings.TrimPrefix(r.URL.EscapedPath(), rt.prefix)}
}

func (x *exchange) serve() {
	c, ok := x.open()
	if !ok {
		return
	}
	defer c.Close()
	if r := x.answerPath(c); r != nil {
		x.serveStream(r)
	}
}

// answerPath serves an answer that is not a stream, and begins the run of
// one that is. It is apart from serve so that none of it takes a place in
// the frame a held stream waits under (see serveStream).
//
//go:noinline
func (x *exchange) answerPath(c *upstream.Call) *streamRun {
	if c.Resp.StatusCode < 200 || c.Resp.StatusCode > 299 {
		x.write(pipeline.RelayReply(c.Resp.StatusCode, c.Resp.Header, c.Body, x.gen.Snap.Config.Limits.MaxResponseBytes))
		return nil
	}
	if undecoded(c.Resp.Header) {
		// A body toolgate cannot decode can be neither judged nor passed on.
		x.fail(pipeline.ErrEncoding)
		return nil
	}
	// The answer's own framing decides the path, not the request's stream
	// flag: an upstream may ignore stream: true, and a request toolgate
	// could not read may still have asked for a stream.
	if st, rd, ok := x.codec.NewFramedStream(c.Resp.Header, c.Body); ok {
		return newStreamRun(x, c, st, rd)
	}
	if strings.HasPrefix(c.Resp.Header.Get("Content-Type"), "text/event-stream") {
		return newStreamRun(x, c, x.codec.NewStream(), nil)
	}
	x.serveAnswer(c)
	return nil
}

// open reads the request and sends it upstream. It is false when the
// exchange is over already (a failure written, or a resumed approval); it
// is apart from serve so that its frame is gone while a stream is held
// (see serveStream).
func (x *exchange) open() (*upstream.Call, bool) {
	snap := x.gen.Snap
	body, err := ReadBody(x.w, x.r, snap.Config.Limits.MaxRequestBytes)
	if err != nil {
		// Written even when the connection's read failed: a client that
		// is still there (a slow body, not a gone one) learns why.
		x.write(pipeline.FailureReply(x.codec, pipeline.Classify(err)))
		return nil, false
	}
	x.body = body
	if resumeAsked(x.r) {
		x.resume(body)
		return nil, false
	}
	if x.replay() {
		return nil, false
	}
	x.settings = x.gen.Settings
	x.header = upstream.OutboundHeader(x.r.Header, false)
	x.query = x.up.ApplyKey(x.header, x.r.URL.RawQuery, x.api.Name())

	var c *upstream.Call
	if x.abstainOn() || x.strictOn() || x.resultsOn() {
		c, err = x.sendRead(body)
	} else {
		c, err = x.sendParsing(body)
	}
	if err == errResultRefused {
		return nil, false
	}
	if err != nil {
		x.fail(err)
		return nil, false
	}
	return c, true
}

// parsing is what parseRequest hands back from its goroutine: the parsed
// request, or the panic it met.
type parsing struct {
	p     parsedRequest
	crash any
}

// sendParsing sends the client's body as it came and reads it meanwhile:
// nothing sent upstream depends on the request's content, so the parse is
// off the path to the first byte. The body is only read by both; the
// parsed request comes back over a channel, and the exchange takes it once
// both are done.
func (x *exchange) sendParsing(body []byte) (*upstream.Call, error) {
	done := make(chan parsing, 1)
	go func() {
		var out parsing
		defer func() {
			out.crash = recover()
			done <- out
		}()
		out.p = x.parseRequest(body)
	}()
	c, err := x.send(x.r.Context(), recovery.KindOriginal, body)
	res := <-done
	if res.crash != nil {
		// Panics belong to the handler, whose recovery answers 502.
		if c != nil {
			c.Close()
		}
		panic(res.crash)
	}
	x.useRequest(res.p)
	return c, err
}

// sendRead reads the request, then sends it with the strict flags and the
// abstain exit, which go into its tools, and handles a refused marking.
func (x *exchange) sendRead(body []byte) (*upstream.Call, error) {
	x.useRequest(x.parseRequest(body))
	if x.resultsOn() {
		var ok bool
		if body, ok = x.judgeParsedResults(body); !ok {
			return nil, errResultRefused
		}
	}
	client := body
	if x.strictOn() {
		body = x.markStrict(body)
	}
	if x.abstainOn() {
		body = x.offerAbstain(body)
	}
	c, err := x.send(x.r.Context(), recovery.KindOriginal, body)
	if err != nil {
		return nil, err
	}
	return x.strictFallback(x.r.Context(), c, client)
}

// serveAnswer judges a whole (non-streamed) answer and writes the result.
func (x *exchange) serveAnswer(c *upstream.Call) {
	answer, err := x.readAnswer(c)
	if err != nil {
		x.fail(err)
		return
	}
	resp, err := x.parseAnswer(answer)
	if err != nil {
		x.refuseAnswer(err)
		return
	}
	x.answerModel(answer)
	x.countUsage(recovery.KindOriginal, resp.Usage, c.Resp.Header)
	results, ok := x.judge(resp.Choices, &asker{x: x, prev: resp}, false)
	if !ok {
		return
	}
	x.finish(resp, c.Resp.Header, results)
}

// judge runs the ladder on every choice of an answer. It reports false when
// the client went away during a re-query; nothing is then written.
func (x *exchange) judge(turns []*neutral.Turn, ask recovery.Asker, committed bool) ([]*recovery.Result, bool) {
	for _, t := range turns {
		for _, note := range x.codec.Notes(t) {
			x.out.findings = append(x.out.findings, note)
			x.env.Metrics.CountUnvalidated(note)
		}
	}
	results := make([]*recovery.Result, len(turns))
	for i, turn := range turns {
		res, err := recovery.Run(x.r.Context(), &recovery.Input{
			Turn:          turn,
			Judge:         x.callJudge.Batch,
			Effective:     x.parsed.effective,
			Settings:      &x.settings,
			Ask:           ask,
			Stateful:      x.parsed.req.Stateful || committed,
			StoresAnswers: x.parsed.req.StoresAnswers,
			UserText:      x.parsed.req.UserText,
		})
		if err != nil {
			x.env.Log.Info("client went away during recovery", zap.String("request_id", x.requestID))
			return nil, false
		}
		results[i] = res
	}
	return results, true
}

// parseAnswer decodes a whole upstream answer. An error means it cannot
// be read, or (enforce mode) holds a call no agent could answer.
func (x *exchange) parseAnswer(answer []byte) (*neutral.Answer, error) {
	resp, err := x.codec.DecodeAnswer(answer)
	if err != nil {
		return nil, answerError(err)
	}
	if !x.settings.Shadow && missingCallID(resp.Choices) {
		return nil, pipeline.ErrNoCallID
	}
	return resp, nil
}

// answerError is DecodeAnswer's error as the pipeline's: an answer whose
// bytes could be read one way by toolgate and another by the agent (not
// UTF-8, or a key that folds onto a protocol key) is refused as such; the
// codec checks both in the pass that reads it, first and original answer
// and every re-query's alike.
func answerError(err error) error {
	switch {
	case errors.Is(err, api.ErrNotUTF8):
		return pipeline.ErrNotUTF8
	case errors.Is(err, api.ErrFoldedKey):
		return pipeline.ErrFoldedKey
	case errors.Is(err, api.ErrTwoForms):
		return pipeline.ErrTwoForms
	}
	return fmt.Errorf("%w: %w", pipeline.ErrUnreadable, err)
}

// refuseAnswer answers an upstream answer toolgate cannot judge: it is
// not forwarded.
func (x *exchange) refuseAnswer(err error) {
	x.env.Metrics.CountUnvalidated(pipeline.UnreadableResponse)
	x.env.Log.Warn("upstream answer unreadable", zap.String("request_id", x.requestID), zap.String("api", x.api.Name()), zap.Error(err))
	x.write(pipeline.FailureReply(x.codec, pipeline.Classify(err)))
}

// missingCallID reports a judged call without an id in any complete turn.
// A turn cut off by the token limit escalates as truncated anyway.
func missingCallID(turns []*neutral.Turn) bool {
	for _, t := range turns {
		if t == nil || t.Truncated() {
			continue
		}
		for _, c := range t.Calls {
			if c.Kind != neutral.Other && c.ID == "" {
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
	return x.gen.Snap.Config.Abstain.Enabled && !x.settings.Shadow
}

// offerAbstain appends the virtual "no tool fits" tool to the upstream
// request when the model is free to choose (tool_choice auto). The caller
// has checked abstainOn (config on, not shadow mode, where the request must
// reach the upstream unchanged). Never over a client tool of the same name.
// The injected body becomes the request's body, so re-queries keep exactly
// the tools the upstream saw first.
func (x *exchange) offerAbstain(body []byte) []byte {
	cfg := x.gen.Snap.Config.Abstain
	if x.parsed.req.Choice.Kind != neutral.ChoiceAuto || len(x.parsed.req.Offered) == 0 {
		return body
	}
	for _, o := range x.parsed.req.Offered {
		if o.Name == cfg.ToolName {
			return body
		}
	}
	nb, err := x.codec.InjectTool(neutral.Offered{Name: cfg.ToolName, Description: abstainDescription, Parameters: abstainSchema})
	if err != nil {
		return body
	}
	x.settings.AbstainTool = cfg.ToolName
	return nb
}

// asker sends re-queries for one answer through the exchange.
type asker struct {
	x    *exchange
	prev *neutral.Answer
}

func (a *asker) Ask(ctx context.Context, q *neutral.Query) (*neutral.Turn, error) {
	x := a.x
	body, err := x.codec.ReQuery(a.prev, q)
	if err != nil {
		return nil, fmt.Errorf("building the re-query: %w", err)
	}
	c, err := x.send(ctx, q.Kind, body)
	if err != nil {
		return nil, pipeline.RequeryFailure(ctx, err)
	}
	defer c.Close()
	if c.Resp.StatusCode < 200 || c.Resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(c.Body, 1<<20))
		return nil, pipeline.StatusFailure(c.Resp.StatusCode, c.Resp.Header.Clone(), b)
	}
	answer, err := x.readAnswer(c)
	if err != nil {
		return nil, pipeline.RequeryFailure(ctx, err)
	}
	// A re-query's calls go to the client as repairs.
	resp, err := x.codec.DecodeAnswer(answer)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", recovery.ErrBadAnswer, answerError(err))
	}
	if len(resp.Choices) == 0 {
		return nil, fmt.Errorf("%w: no choice", recovery.ErrBadAnswer)
	}
	x.answerModel(answer)
	x.countUsage(q.Kind, resp.Usage, c.Resp.Header)
	return resp.Choices[0], nil
}

// parseRequest reads the client's request and derives what judging the
// answer needs. A request toolgate cannot read goes upstream all the same:
// the upstream is its judge, and the answer is still held to the config
// catalog. It writes nothing of the exchange: it runs beside send.
func (x *exchange) parseRequest(body []byte) parsedRequest {
	snap := x.gen.Snap
	req, err := x.codec.DecodeRequest(x.path, body)
	p := parsedRequest{req: req}
	var evidence validate.Evidence
	if err == nil {
		evidence = validate.NewCorpus(req.Vouching)
	} else {
		x.env.Metrics.CountUnvalidated(pipeline.UnreadableRequest)
		p.req = &neutral.Request{Body: body}
		p.unread = true
	}
	p.effective = snap.Effective(p.req.Offered, p.req.Choice, !p.unread)
	p.local = validate.Context{Effective: p.effective, Evidence: evidence, HistoryUpstream: p.req.HistoryUpstream,
		History: validate.HistoryOf(p.req.History), Values: pipeline.ContextValues(x.r.Context())}
	return p
}

// useRequest makes p the exchange's request and sets up the judge for it.
func (x *exchange) useRequest(p parsedRequest) {
	x.parsed = p
	snap := x.gen.Snap
	x.callJudge = &judge.Judge{Local: &x.parsed.local, Validators: x.gen.Validators, RequestID: x.requestID, CatalogVersion: snap.Version}
	x.traceRequest()
}

// send makes one upstream call and times it.
func (x *exchange) send(ctx context.Context, kind neutral.QueryKind, body []byte) (*upstream.Call, error) {
	t := time.Now()
	x.account.calls++
	// The transport only reads the header map, and the upstream calls of
	// one request are sequential, so all of them share it.
	path, query := x.path, x.query
	if kind != neutral.KindOriginal {
		path, query = x.codec.FollowUpRoute(path, query)
	}
	ctx, sp, header := x.startUpstream(ctx, kind)
	c, err := x.up.Do(ctx, http.MethodPost, path, query, header, body)
	d := time.Since(t)
	x.account.upWait += d
	observe.Record(ctx, x.series.UpstreamDuration(kind), d.Seconds())
	var failed neutral.FailureCode
	if err != nil {
		failed = pipeline.Classify(err).Code
	}
	observe.UpstreamSent(sp, c, failed)
	x.account.upSpan = sp
	return c, err
}

// readAnswer reads a whole non-streaming answer within the response limit.
func (x *exchange) readAnswer(c *upstream.Call) ([]byte, error) {
	t := time.Now()
	defer func() { x.account.upWait += time.Since(t) }()
	if undecoded(c.Resp.Header) {
		return nil, pipeline.ErrEncoding
	}
	limit := x.gen.Snap.Config.Limits.MaxResponseBytes
	b, err := readAll(io.LimitReader(c.Body, limit+1), c.Resp.ContentLength)
	if err != nil {
		if cause := c.Cause(); errors.Is(cause, upstream.ErrIdle) {
			return nil, upstream.ErrIdle
		}
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, pipeline.ErrTooLarge
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

// countUsage records an upstream answer's usage and request id.
func (x *exchange) countUsage(kind recovery.QueryKind, u recovery.Usage, h http.Header) {
	x.account.usage = append(x.account.usage, usageEntry{Kind: kind, Input: u.Input, Output: u.Output})
	x.traceUsage(u)
	if id := upstreamRequestID(h); id != "" {
		x.account.upIDs = append(x.account.upIDs, id)
	}
	in, out := x.series.Tokens(kind)
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

// fail answers a request that cannot be completed with one of toolgate's
// own errors, unless the client is gone.
func (x *exchange) fail(err error) {
	if x.r.Context().Err() != nil {
		return
	}
	x.env.Log.Warn("upstream failed", zap.String("request_id", x.requestID), zap.String("api", x.api.Name()), zap.Error(httpx.WithoutURL(err)))
	x.write(pipeline.FailureReply(x.codec, pipeline.Classify(err)))
}
