// Package observe holds the proxy's observers that need no exchange: the
// Prometheus collectors (docs/metrics.md), the trace exporter of the live
// config, the server span of a request and the client span of an
// upstream call (docs/tracing.md).
package observe

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/judge"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/route"
	"github.com/toolgate/toolgate/recovery"
)

// Metrics are toolgate's Prometheus collectors (docs/metrics.md). They are built on
// an injected Registerer so tests use a fresh registry and nothing is global.
// Every label value is bounded: API names, outcomes, finding codes, catalog
// versions and catalog tool names, never a value a client or model chose.
type Metrics struct {
	Requests          *prometheus.CounterVec
	ToolCalls         *prometheus.CounterVec
	Hallucinations    *prometheus.CounterVec
	Recoveries        *prometheus.CounterVec
	RecoveryConf      prometheus.Histogram
	Escalations       *prometheus.CounterVec
	UpstreamDuration  *prometheus.HistogramVec
	UpstreamTokens    *prometheus.CounterVec
	AddedLatency      *prometheus.HistogramVec
	Unvalidated       *prometheus.CounterVec
	CatalogInfo       *prometheus.GaugeVec
	CatalogTools      *prometheus.GaugeVec
	ConfigReloads     *prometheus.CounterVec
	SinkDropped       *prometheus.CounterVec
	SinkFailures      *prometheus.CounterVec
	PanicsRecovered   prometheus.Counter
	StreamsHeldEvents prometheus.Histogram
	ValidatorRequests *prometheus.CounterVec
	ValidatorDuration *prometheus.HistogramVec
	RouteRefusals     *prometheus.CounterVec
	MCPOutput         *prometheus.CounterVec
	// ToolDrift counts MCP tool definitions unlike their pins (docs/pins.md, "Drift").
	ToolDrift *prometheus.CounterVec
	// StrictTools and StrictCalls follow strict mode (docs/strict.md): what
	// became of each offered function tool, and the verdicts on calls to
	// the tools toolgate marked.
	StrictTools       *prometheus.CounterVec
	StrictCalls       *prometheus.CounterVec
	TraceSpansDropped prometheus.Counter
	// EscalationReplays counts retries answered with an escalation kept
	// from the same request (proxy/exchange/replay.go).
	EscalationReplays *prometheus.CounterVec
	// ToolResults counts the tool results judged before the model reads
	// them (docs/results.md), by what became of each.
	ToolResults *prometheus.CounterVec
}

// NewMetrics creates and registers the collectors on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_requests_total", Help: "Validated requests by API and outcome.",
		}, []string{"api", "outcome"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_tool_calls_total", Help: "Tool calls in upstream answers, by verdict.",
		}, []string{"api", "catalog_version", "tool", "result"}),
		Hallucinations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_hallucinations_total", Help: "Calls to tools that do not exist.",
		}, []string{"api", "catalog_version"}),
		Recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_recoveries_total", Help: "Repair attempts by strategy and result.",
		}, []string{"catalog_version", "strategy", "result"}),
		RecoveryConf: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "toolgate_recovery_confidence", Help: "Confidence of recovery decisions.",
			Buckets: prometheus.LinearBuckets(0.1, 0.1, 10),
		}),
		Escalations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_escalations_total", Help: "Escalations by reason.",
		}, []string{"catalog_version", "reason"}),
		UpstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolgate_upstream_duration_seconds", Help: "Upstream call time until the answer is read.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160},
		}, []string{"api", "kind"}),
		UpstreamTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_upstream_tokens_total", Help: "Tokens reported by the upstream.",
		}, []string{"api", "kind", "type"}),
		AddedLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolgate_added_latency_seconds", Help: "Time spent in toolgate per request, upstream waits excluded.",
			// From 10µs to ~1.3s: the hot path is tens of microseconds.
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 18),
		}, []string{"api"}),
		Unvalidated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_unvalidated_total", Help: "Requests, answers or tool calls toolgate could not judge in full, by reason.",
		}, []string{"reason"}),
		CatalogInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolgate_catalog_info", Help: "The live catalog version (value 1).",
		}, []string{"catalog_version"}),
		CatalogTools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolgate_catalog_tools", Help: "Tools in the live catalog.",
		}, []string{"catalog_version"}),
		ConfigReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_config_reloads_total", Help: "Config reloads by result.",
		}, []string{"result"}),
		SinkDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_sink_dropped_total", Help: "Escalation records a sink dropped.",
		}, []string{"sink"}),
		SinkFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_sink_failures_total", Help: "Failed escalation deliveries (retried or not).",
		}, []string{"sink"}),
		PanicsRecovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_panics_total", Help: "Handler panics turned into 502 answers.",
		}),
		StreamsHeldEvents: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "toolgate_stream_held_events", Help: "Events held back per stream while calls were validated.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		ValidatorRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_validator_requests_total", Help: "Calls to the operator's validators by result.",
		}, []string{"validator", "result"}),
		ValidatorDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolgate_validator_duration_seconds", Help: "Time of one validator call, until its answer is read or it fails.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"validator"}),
		RouteRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_route_refusals_total", Help: "Requests the path guard refused, by reason.",
		}, []string{"reason"}),
		MCPOutput: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_mcp_output_violations_total", Help: "MCP tool results whose structuredContent failed the outputSchema, replaced by error results.",
		}, []string{"catalog_version", "tool"}),
		TraceSpansDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_trace_spans_dropped_total", Help: "Spans dropped because the export queue was full (a slow or absent collector).",
		}),
	}
	m.StrictTools, m.StrictCalls, m.ToolResults = strictMetrics()
	m.EscalationReplays = replayMetric()
	m.register(reg)
	return m
}

// replayMetric counts escalation replays (proxy/exchange/replay.go).
func replayMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolgate_escalation_replays_total",
		Help: "Retries answered with the escalation the same request got before, from memory."}, []string{"api"})
}

// resultsMetric counts judged tool results (docs/results.md, "Metrics").
func resultsMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolgate_tool_results_total",
		Help: "Tool results judged before the model reads them: clean, redacted or a finding code."}, []string{"api", "result"})
}

// strictMetrics are strict mode's counters (docs/strict.md, "Metrics"),
// and with them the count of judged tool results.
func strictMetrics() (tools, calls, results *prometheus.CounterVec) {
	tools = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_strict_tools_total", Help: "Offered function tools under catalog.strict auto: marked, unfit, client or refused.",
	}, []string{"api", "result"})
	calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_strict_calls_total", Help: "Calls to tools toolgate marked strict, by verdict.",
	}, []string{"api", "result"})
	return tools, calls, resultsMetric()
}

// driftMetric counts MCP tool definitions unlike their pins (docs/pins.md, "Drift").
func driftMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_tool_definition_drift_total", Help: "MCP tool definitions unlike their pins, by what became of them: blocked, held, warned or accepted.",
	}, []string{"server", "tool", "action"})
}

// register registers every collector and creates the refusal series at
// zero.
func (m *Metrics) register(reg prometheus.Registerer) {
	m.ToolDrift = driftMetric()
	reg.MustRegister(m.Requests, m.ToolCalls, m.Hallucinations, m.Recoveries, m.RecoveryConf,
		m.Escalations, m.UpstreamDuration, m.UpstreamTokens, m.AddedLatency, m.Unvalidated,
		m.CatalogInfo, m.CatalogTools, m.ConfigReloads, m.SinkDropped, m.SinkFailures,
		m.PanicsRecovered, m.StreamsHeldEvents, m.ValidatorRequests, m.ValidatorDuration, m.RouteRefusals, m.MCPOutput, m.ToolDrift,
		m.StrictTools, m.StrictCalls, m.TraceSpansDropped, m.EscalationReplays, m.ToolResults)
	for _, r := range route.Reasons() {
		m.RouteRefusals.WithLabelValues(string(r))
	}
}

// CountUnvalidated counts a request, an answer or a call toolgate could
// not judge in full, for reason.
func (m *Metrics) CountUnvalidated(reason string) {
	m.Unvalidated.WithLabelValues(reason).Inc()
}

// InitValidators creates each validator's series at zero, so that rate()
// sees its first call, as SetCatalog does for the tool series.
func (m *Metrics) InitValidators(names []string) {
	for _, n := range names {
		for _, r := range []string{judge.ResultAllowed, judge.ResultDenied, judge.ResultError, judge.ResultTimeout} {
			m.ValidatorRequests.WithLabelValues(n, r)
		}
	}
}

// ObserveValidator records one validator call. The validator label is a
// configured name, so it is bounded like the catalog's tool names.
func (m *Metrics) ObserveValidator(ctx context.Context, validator, result string, d time.Duration) {
	m.ValidatorRequests.WithLabelValues(validator, result).Inc()
	Record(ctx, m.ValidatorDuration.WithLabelValues(validator), d.Seconds())
}

// Record observes v on o, with the trace id of the span in ctx as its
// exemplar when that span is sampled, so a slow bucket links to a trace.
func Record(ctx context.Context, o prometheus.Observer, v float64) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	o.Observe(v)
}

// maxInitTools bounds the per-tool series created ahead of traffic.
const maxInitTools = 256

// SetCatalog makes version the only one toolgate_catalog_info shows, and
// creates the rate metrics' series at zero for each of apis. A counter
// series that first appears already at 1 hides that first increment from
// rate() and skews the hallucination ratio of a fresh catalog version; at
// zero it counts.
func (m *Metrics) SetCatalog(version string, names, apis []string) {
	m.CatalogInfo.Reset()
	m.CatalogTools.Reset()
	m.CatalogInfo.WithLabelValues(version).Set(1)
	m.CatalogTools.WithLabelValues(version).Set(float64(len(names)))
	for _, api := range apis {
		m.Hallucinations.WithLabelValues(api, version)
		m.ToolCalls.WithLabelValues(api, version, "_unknown", "unknown_tool")
		for i, n := range names {
			if i == maxInitTools {
				break
			}
			m.ToolCalls.WithLabelValues(api, version, n, "valid")
		}
	}
}

// APISeries are the series every passing request of one API touches,
// resolved once per route: WithLabelValues hashes the labels and takes a
// lock on every call, several times per request.
type APISeries struct {
	m         *Metrics
	api       string
	upstream  prometheus.Observer // upstream duration, kind original
	tokensIn  prometheus.Counter  // kind original
	tokensOut prometheus.Counter
	// Added is toolgate's own time per request (toolgate_added_latency_seconds).
	Added prometheus.Observer
	// passed (requests, outcome pass) is resolved on first use so that
	// no outcome series exists before a request had that outcome.
	passOnce sync.Once
	passed   prometheus.Counter
}

// ForAPI resolves the series of one API's route.
func (m *Metrics) ForAPI(api string) *APISeries {
	k := string(neutral.KindOriginal)
	return &APISeries{
		m:         m,
		api:       api,
		upstream:  m.UpstreamDuration.WithLabelValues(api, k),
		tokensIn:  m.UpstreamTokens.WithLabelValues(api, k, "input"),
		tokensOut: m.UpstreamTokens.WithLabelValues(api, k, "output"),
		Added:     m.AddedLatency.WithLabelValues(api),
	}
}

// UpstreamDuration is the upstream duration series of one kind of call.
func (a *APISeries) UpstreamDuration(kind neutral.QueryKind) prometheus.Observer {
	if kind == neutral.KindOriginal {
		return a.upstream
	}
	return a.m.UpstreamDuration.WithLabelValues(a.api, string(kind))
}

// Tokens are the input and output token series of one kind of call.
func (a *APISeries) Tokens(kind neutral.QueryKind) (in, out prometheus.Counter) {
	if kind == neutral.KindOriginal {
		return a.tokensIn, a.tokensOut
	}
	return a.m.UpstreamTokens.WithLabelValues(a.api, string(kind), "input"),
		a.m.UpstreamTokens.WithLabelValues(a.api, string(kind), "output")
}

// Requests is the request counter of one outcome.
func (a *APISeries) Requests(outcome string) prometheus.Counter {
	if outcome == string(recovery.Pass) {
		a.passOnce.Do(func() { a.passed = a.m.Requests.WithLabelValues(a.api, outcome) })
		return a.passed
	}
	return a.m.Requests.WithLabelValues(a.api, outcome)
}
