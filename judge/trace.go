package judge

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/validate"
)

// maxNameAttr bounds a tool name on a span: the model chose it, and an
// invented one may be any length.
const maxNameAttr = 128

// callSpans are the spans of one batch's judged calls, one per position,
// each with the context its validators are called under. Without a
// recording span in the caller's context there are none, and the judge
// costs nothing more.
type callSpans struct {
	ctxs  []context.Context
	spans []trace.Span
}

func (j *Judge) startSpans(ctx context.Context, batch []validate.ToolCall, at []int) *callSpans {
	if !telemetry.Recording(ctx) {
		return nil
	}
	tr := telemetry.Tracer(ctx)
	cs := &callSpans{ctxs: make([]context.Context, len(at)), spans: make([]trace.Span, len(at))}
	for k, i := range at {
		name := telemetry.Clip(batch[i].Name, maxNameAttr)
		cs.ctxs[k], cs.spans[k] = tr.Start(ctx, "judge_tool "+name, trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "judge_tool"),
			attribute.String("gen_ai.tool.name", name),
			attribute.String("gen_ai.tool.call.id", telemetry.Clip(batch[i].ID, maxNameAttr)),
			attribute.String("toolgate.catalog_version", j.CatalogVersion),
		))
	}
	return cs
}

// ctx is the context position k's validators are called under.
func (cs *callSpans) ctx(ctx context.Context, k int) context.Context {
	if cs == nil {
		return ctx
	}
	return cs.ctxs[k]
}

// end records each call's report: the catalog tool it resolved to and
// its finding codes, never a message or a value.
func (cs *callSpans) end(out []validate.CallReport) {
	if cs == nil {
		return
	}
	for k, sp := range cs.spans {
		v := &out[k]
		found := make([]string, len(v.Findings))
		for n, f := range v.Findings {
			found[n] = string(f.Code)
		}
		sp.SetAttributes(attribute.StringSlice("toolgate.findings", found), attribute.Bool("toolgate.valid", v.Valid()))
		if v.Tool != nil {
			sp.SetAttributes(attribute.String("toolgate.tool", v.Tool.Name))
		}
		sp.End()
	}
}

// validatorSpan is the client span of one validator call.
func validatorSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	if !telemetry.Recording(ctx) {
		return ctx, nil
	}
	return telemetry.Tracer(ctx).Start(ctx, "validator "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("toolgate.validator", name)))
}

func endValidatorSpan(sp trace.Span, result string) {
	if sp == nil {
		return
	}
	sp.SetAttributes(attribute.String("toolgate.validator.result", result))
	if result == ResultError || result == ResultTimeout {
		sp.SetStatus(codes.Error, result)
	}
	sp.End()
}
