package exchange

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/proxy/observe"
	"github.com/toolgate/toolgate/recovery"
)

// genAI names each API's operation and provider as the OpenTelemetry GenAI
// semantic conventions spell them.
var genAI = map[string][2]string{
	"chat":      {"chat", "openai"},
	"responses": {"chat", "openai"},
	"messages":  {"chat", "anthropic"},
	"gemini":    {"generate_content", "gcp.gemini"},
}

// maxModelAttr bounds the client-chosen model name on a span.
const maxModelAttr = 256

// spanName is "{operation} {model}", the GenAI conventions' span name.
func (x *exchange) spanName() string {
	op := genAI[x.api.Name()][0]
	if x.parsed.req != nil && x.parsed.req.Model != "" {
		return op + " " + telemetry.Clip(x.parsed.req.Model, maxModelAttr)
	}
	return op
}

// traceRequest names the server span once the request is read and gives
// it the request's attributes.
func (x *exchange) traceRequest() {
	sp := trace.SpanFromContext(x.r.Context())
	if !sp.IsRecording() {
		return
	}
	g := genAI[x.api.Name()]
	sp.SetName(x.spanName())
	sp.SetAttributes(
		attribute.String("gen_ai.operation.name", g[0]),
		attribute.String("gen_ai.provider.name", g[1]),
		attribute.String("gen_ai.request.model", telemetry.Clip(x.parsed.req.Model, maxModelAttr)),
		attribute.String("toolgate.api", x.api.Name()),
		attribute.String("toolgate.catalog_version", x.gen.Snap.Version),
	)
}

// startUpstream opens the client span of one upstream call and returns
// the headers to send: with tracing on, a copy carrying that span's
// context, so the upstream continues the trace under it.
func (x *exchange) startUpstream(ctx context.Context, kind recovery.QueryKind) (context.Context, trace.Span, http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil, x.header
	}
	g := genAI[x.api.Name()]
	ctx, sp := telemetry.Tracer(ctx).Start(ctx, g[0], trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("toolgate.upstream.kind", string(kind)),
			attribute.String("gen_ai.operation.name", g[0]),
			attribute.String("gen_ai.provider.name", g[1]),
			attribute.String("toolgate.upstream", x.up.Name()),
		))
	h := x.header.Clone()
	telemetry.Inject(ctx, h)
	return ctx, sp, h
}

// traceUsage puts one answer's model and token usage on its upstream
// call's span.
func (x *exchange) traceUsage(u recovery.Usage) {
	sp := x.account.upSpan
	if sp == nil || !sp.IsRecording() {
		return
	}
	sp.SetName(x.spanName())
	attrs := []attribute.KeyValue{
		attribute.Int64("gen_ai.usage.input_tokens", u.Input),
		attribute.Int64("gen_ai.usage.output_tokens", u.Output),
	}
	if x.parsed.req != nil {
		attrs = append(attrs, attribute.String("gen_ai.request.model", telemetry.Clip(x.parsed.req.Model, maxModelAttr)))
	}
	if x.account.respModel != "" {
		attrs = append(attrs, attribute.String("gen_ai.response.model", x.account.respModel))
	}
	sp.SetAttributes(attrs...)
}

// traceOutcome puts what the request came to on the server span, and
// returns the log fields that link the log line to the trace.
func (x *exchange) traceOutcome() []zap.Field {
	sp := trace.SpanFromContext(x.r.Context())
	sc := sp.SpanContext()
	if !sc.IsValid() {
		return nil
	}
	if sp.IsRecording() {
		var in, out int64
		for _, u := range x.account.usage {
			in += u.Input
			out += u.Output
		}
		attrs := []attribute.KeyValue{
			attribute.String("toolgate.outcome", x.out.label),
			attribute.Int("toolgate.upstream_calls", x.account.calls),
			attribute.Int64("gen_ai.usage.input_tokens", in),
			attribute.Int64("gen_ai.usage.output_tokens", out),
		}
		if x.out.escalationID != "" {
			attrs = append(attrs, attribute.String("toolgate.escalation_id", x.out.escalationID))
		}
		if x.out.approvalID != "" {
			attrs = append(attrs, attribute.String("toolgate.approval_id", x.out.approvalID))
		}
		sp.SetAttributes(attrs...)
	}
	return observe.TraceIDs(x.r.Context())
}

// answerModel notes the model an answer names ("model", or Gemini's
// "modelVersion"), for its upstream call's span. Only read while that
// span records.
func (x *exchange) answerModel(answer []byte) {
	x.account.respModel = ""
	if x.account.upSpan == nil || !x.account.upSpan.IsRecording() {
		return
	}
	obj, err := jsonx.SplitObject(answer)
	if err != nil {
		return
	}
	raw := obj.Get("model")
	if raw == nil {
		raw = obj.Get("modelVersion")
	}
	if m, ok := jsonx.Unquote(raw); ok {
		x.account.respModel = telemetry.Clip(m, maxModelAttr)
	}
}
