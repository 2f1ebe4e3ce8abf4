package approval

import "github.com/prometheus/client_golang/prometheus"

// Results of toolgate_approvals_total (docs/metrics.md): one per state change,
// and refused for a resume that released nothing.
const (
	ResultRequested = "requested"
	ResultApproved  = "approved"
	ResultDenied    = "denied"
	ResultExpired   = "expired"
	ResultReleased  = "released"
	ResultRefused   = "refused"
)

var results = []string{ResultRequested, ResultApproved, ResultDenied, ResultExpired, ResultReleased, ResultRefused}

// Metrics are the approval series. A nil *Metrics counts nothing.
type Metrics struct {
	Total   *prometheus.CounterVec
	Pending prometheus.Gauge
	// NotifyDropped counts notifications dropped on a full queue,
	// NotifyFailures those the webhook never took.
	NotifyDropped  prometheus.Counter
	NotifyFailures prometheus.Counter
}

// NewMetrics makes the series and registers them with reg, when not nil.
// Every result starts at 0, so a dashboard's rate() sees the first one.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_approvals_total", Help: "Approval state changes, and resumes refused.",
		}, []string{"result"}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolgate_approvals_pending", Help: "Approvals waiting for a decision, unexpired (the whole store's, as this replica last read it).",
		}),
		NotifyDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_approvals_notify_dropped_total", Help: "Pending-approval notifications dropped because the queue was full.",
		}),
		NotifyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_approvals_notify_failures_total", Help: "Pending-approval notifications the webhook did not take after every retry.",
		}),
	}
	for _, r := range results {
		m.Total.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.Total, m.Pending, m.NotifyDropped, m.NotifyFailures)
	}
	return m
}

func (m *Metrics) count(result string) {
	if m != nil {
		m.Total.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) pending(n int) {
	if m != nil {
		m.Pending.Set(float64(n))
	}
}

func (m *Metrics) dropped() {
	if m != nil {
		m.NotifyDropped.Inc()
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.NotifyFailures.Inc()
	}
}
