package exchange

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/catalog/strict"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/upstream"
	"github.com/toolgate/toolgate/recovery"
)

// strictRun is what strict mode (docs/strict.md) did to one request: the tools it
// marked, so that a refusal can be undone and their calls counted apart.
type strictRun struct {
	marker   api.Codec
	provider strict.Provider
	tools    []strict.Tool
	marked   map[string]bool
}

// strictProviders maps each API to the strict subset of its provider.
var strictProviders = map[string]strict.Provider{
	"chat":      strict.OpenAI,
	"responses": strict.OpenAI,
	"messages":  strict.Anthropic,
	"gemini":    strict.Gemini,
}

// strictOn reports whether this request may be marked: catalog.strict is
// auto and the mode is not shadow (where requests reach the upstream as
// sent). Whether the API has a flag is markStrict's to find.
func (x *exchange) strictOn() bool {
	return x.gen.Snap.Config.Catalog.Strict == catalog.StrictAuto && !x.settings.Shadow
}

// markStrict asks the provider to constrain decoding for every offered
// function tool whose schema fits its strict subset, and returns the body
// to send: the client's with only the flags spliced in. Nothing changes
// for a request toolgate could not read or whose tools fit nowhere.
func (x *exchange) markStrict(body []byte) []byte {
	m := x.codec
	provider, known := strictProviders[x.api.Name()]
	if !known || x.parsed.unread {
		return body
	}
	offered := m.StrictTools()
	if len(offered) == 0 {
		return body
	}
	tools := make([]strict.Tool, len(offered))
	for i, t := range offered {
		tools[i] = strict.Tool{Name: t.Name, Schema: t.Schema, Client: t.Client}
	}
	plan := x.gen.Snap.PlanStrict(provider, tools, m.StrictPerRequest())
	nb, err := body, error(nil)
	if len(plan.Mark) > 0 {
		nb, err = m.MarkStrict(plan.Mark)
	}
	for _, r := range plan.Results {
		if err != nil && r == strict.Marked {
			r = strict.Unfit
		}
		x.env.Metrics.StrictTools.WithLabelValues(x.api.Name(), string(r)).Inc()
	}
	if err != nil {
		x.env.Log.Warn("strict marking failed", zap.String("request_id", x.requestID), zap.String("api", x.api.Name()), zap.Error(err))
		return body
	}
	if len(plan.Mark) == 0 {
		return body
	}
	run := &strictRun{marker: m, provider: provider, tools: tools, marked: make(map[string]bool, len(plan.Mark))}
	for _, n := range plan.Mark {
		run.marked[n] = true
	}
	x.strict = run
	return nb
}

// StrictMarked reports whether toolgate marked the named tool strict on
// this request.
func (x *exchange) StrictMarked(name string) bool {
	return x.strict != nil && x.strict.marked[name]
}

// maxRefusalBytes bounds the error body read to see whether it refuses
// the marking; an error body is small.
const maxRefusalBytes = 64 << 10

// strictFallback looks at the upstream's answer to a marked request. A
// 400 that refuses the marking (its message names the schema or the strict
// flag) is answered by sending the request once more exactly as the client
// sent it, with the refused tools remembered for this catalog version. Any
// other answer is handed back to be served as usual, unread.
func (x *exchange) strictFallback(ctx context.Context, c *upstream.Call, client []byte) (*upstream.Call, error) {
	if x.strict == nil || c.Resp.StatusCode != http.StatusBadRequest || undecoded(c.Resp.Header) {
		return c, nil
	}
	b, err := io.ReadAll(io.LimitReader(c.Body, maxRefusalBytes))
	if err != nil {
		c.Close()
		return nil, err
	}
	msg, tool := x.strict.marker.UpstreamError(b)
	// A refusal that points at a tool toolgate did not mark (one the client
	// marked itself) is the client's to see, as it would be without toolgate.
	if !refusesStrict(msg) || (tool != "" && !x.strict.marked[tool]) {
		rest := c.Body
		c.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), rest), rest}
		return c, nil
	}
	c.Close()
	x.forgetStrict(tool)
	x.env.Log.Info("upstream refused the strict marking; sent as the client sent it",
		zap.String("request_id", x.requestID), zap.String("api", x.api.Name()), zap.String("tool", x.toolLabelOf(tool)))
	// A fresh codec reads the client's request again, so re-queries start
	// from it and not from the marked one.
	x.strict = nil
	x.codec = x.api.NewCodec()
	x.useRequest(x.parseRequest(client))
	body := client
	if x.abstainOn() {
		body = x.offerAbstain(body)
	}
	return x.send(ctx, recovery.KindOriginal, body)
}

// forgetStrict remembers the refused tool, one toolgate marked, or every
// marked tool when the refusal names none (or the flag is the request's),
// and counts them.
func (x *exchange) forgetStrict(tool string) {
	run := x.strict
	for _, t := range run.tools {
		if !run.marked[t.Name] || (tool != "" && t.Name != tool) {
			continue
		}
		x.gen.Snap.RefuseStrict(run.provider, t)
		x.env.Metrics.StrictTools.WithLabelValues(x.api.Name(), string(strict.Refused)).Inc()
	}
}

// toolLabelOf bounds a tool name for a log line: a catalog name as is,
// anything else as _request.
func (x *exchange) toolLabelOf(name string) string {
	if _, ok := x.gen.Snap.Tools[name]; ok || name == "" {
		return name
	}
	return "_request"
}

// refusesStrict reports an error message that names the schema or the
// strict flag (or Gemini's VALIDATED mode): a refusal of the marking
// rather than of something else in the request.
func refusesStrict(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "strict") || strings.Contains(m, "schema") || strings.Contains(m, "validated")
}
