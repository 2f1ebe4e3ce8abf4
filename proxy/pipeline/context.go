package pipeline

import "context"

// The request's own values travel in its context: the id toolgate gave it
// and its catalog.context values, which the server takes off the request's
// headers before any route sees them.

type contextKey int

const (
	requestIDKey contextKey = iota
	contextValuesKey
)

// WithRequestID is ctx carrying the request's id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID returns the id toolgate gave the request, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// WithContextValues is ctx carrying the request's catalog.context values.
func WithContextValues(ctx context.Context, v map[string]string) context.Context {
	return context.WithValue(ctx, contextValuesKey, v)
}

// ContextValues returns the request's catalog.context values by name, or
// nil when the config declares none.
func ContextValues(ctx context.Context) map[string]string {
	v, _ := ctx.Value(contextValuesKey).(map[string]string)
	return v
}
