package proxy

import "context"

type ctxKey int

const (
	requestIDKey ctxKey = iota
	contextValuesKey
)

func withRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// requestID returns the id toolgate gave the request, or "".
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

func withContextValues(ctx context.Context, v map[string]string) context.Context {
	return context.WithValue(ctx, contextValuesKey, v)
}

// contextValues returns the request's catalog.context values by name, or
// nil when the config declares none.
func contextValues(ctx context.Context) map[string]string {
	v, _ := ctx.Value(contextValuesKey).(map[string]string)
	return v
}
