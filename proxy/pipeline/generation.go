package pipeline

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/recovery"
)

// Generation is what one config generation gives every route: the
// snapshot, the ladder's settings, the validators and the tracer, built at
// load and swapped whole. A request keeps the generation it began with.
type Generation struct {
	Snap     *catalog.Snapshot
	Settings recovery.Settings
	// Validators call the snapshot's validators.
	Validators *judge.Validators
	// Tracer starts the generation's spans; nil with tracing off.
	Tracer trace.Tracer
}

// RecoveryObserver receives the recovery steps of every judged answer: the
// steps the "recovery attempt" log lines and the recovery metrics count.
// They carry what neither the answer nor an escalation shows when a
// substitute was used: the decision's confidence. toolgate eval reads them
// to sweep thresholds over what serve itself decided.
type RecoveryObserver interface {
	// ObserveRecovery is called once per judged answer, before any byte of
	// it is written, with the request's id (X-Toolgate-Request-Id) and the
	// steps of all its choices in order; no steps when every call passed.
	// It runs on the request's goroutine and must not block. Steps hold
	// names and sizes, never argument values.
	ObserveRecovery(requestID string, steps []recovery.Event)
}
