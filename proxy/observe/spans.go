package observe

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// UpstreamSent records on sp, the client span of one upstream call (nil
// untraced), how the upstream answered c, or, with c nil, the class of the
// failure that left no answer. The cause is classified, never quoted: an
// error may hold a URL.
func UpstreamSent(sp trace.Span, c *upstream.Call, failed neutral.FailureCode) {
	if sp == nil {
		return
	}
	if c == nil {
		sp.SetStatus(codes.Error, string(failed))
		sp.End()
		return
	}
	sp.SetAttributes(attribute.Int("http.response.status_code", c.Resp.StatusCode))
	if c.Resp.StatusCode >= 400 {
		sp.SetStatus(codes.Error, http.StatusText(c.Resp.StatusCode))
	}
	c.EndWith(sp)
}

// TraceIDs are the log line's fields naming the request's span, or none.
func TraceIDs(ctx context.Context) []zap.Field {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []zap.Field{zap.String("trace_id", sc.TraceID().String()), zap.String("span_id", sc.SpanID().String())}
}
