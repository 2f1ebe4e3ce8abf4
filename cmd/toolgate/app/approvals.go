package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/webhook"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/sink"
)

// sweepEvery is how often expired approvals are swept.
const sweepEvery = 30 * time.Second

// approvals is the running approval service: its store, the admin API as
// the live config's token guards it, the sweeper and the notifier.
type approvals struct {
	svc      *approval.Service
	store    approval.Store
	notifier *approval.Notifier
	// spec is approvals.store at start: a store is opened once, so a
	// reload that changes it takes effect on restart.
	spec    string
	handler atomic.Pointer[http.Handler]
	stop    context.CancelFunc
	swept   chan struct{}
}

// openApprovals opens approvals.store and starts the sweeper. Every state
// change goes to audit (the escalation sinks).
func openApprovals(snap *catalog.Snapshot, baseDir string, reg prometheus.Registerer, log *zap.Logger,
	store *catalog.Store, audit func(approval.Event), pinDecided func(approval.Drift)) (*approvals, error) {
	cfg := snap.Config.Approvals
	spec, err := approval.ParseStore(cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("approvals.store: %w", err)
	}
	if spec.Path != "" && !filepath.IsAbs(spec.Path) && baseDir != "" {
		spec.Path = filepath.Join(baseDir, spec.Path)
	}
	st, err := approval.Open(context.Background(), spec, approval.Options{})
	if err != nil {
		return nil, fmt.Errorf("approvals.store: %w", err)
	}
	m := approval.NewMetrics(reg)
	ap := &approvals{store: st, spec: cfg.Store, swept: make(chan struct{})}
	if cfg.Notify != "" {
		ap.notifier = approval.NewNotifier(cfg.Notify, snap.Secrets.ApprovalsNotifySecret, webhook.DefaultRetry, m,
			func(err error) { log.Warn("approval notification given up", zap.Error(err)) })
	}
	ap.svc = approval.New(approval.Config{Store: st, TTL: cfg.TTL.D(), Metrics: m, Notifier: ap.notifier, Audit: audit,
		Redact: func(_ string, args json.RawMessage) json.RawMessage {
			return sink.RedactArgs(args, store.Load().Config.Escalation.Redact)
		},
		NotifyFormat: cfg.NotifyFormat, PageURL: cfg.PageURL, PinDecided: pinDecided})
	ap.setTokens(snap.Secrets)
	ctx, cancel := context.WithCancel(context.Background())
	ap.stop = cancel
	go func() {
		defer close(ap.swept)
		ap.svc.Run(ctx, sweepEvery, func(err error) { log.Warn("approval sweep failed", zap.Error(err)) })
	}()
	return ap, nil
}

func (ap *approvals) setTokens(sec catalog.Secrets) {
	t := approval.Tokens{Admin: sec.ApprovalsAdminToken}
	for _, n := range sec.ApprovalsAdminTokens {
		t.Named = append(t.Named, approval.NamedToken{Name: n.Name, Token: n.Token})
	}
	h := ap.svc.Handler(t)
	ap.handler.Store(&h)
}

// ServeHTTP serves the admin API and the page with the live tokens.
func (ap *approvals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*ap.handler.Load()).ServeHTTP(w, r)
}

// reload takes what may change while running: the ttl and the admin
// tokens. The store and the notification (target, format, page_url) stay
// as they started.
func (ap *approvals) reload(snap *catalog.Snapshot, log *zap.Logger) {
	cfg := snap.Config.Approvals
	ap.svc.SetTTL(cfg.TTL.D())
	ap.setTokens(snap.Secrets)
	if cfg.Store != ap.spec {
		log.Warn("approvals.store changed; it takes effect on restart", zap.String("store", ap.spec))
	}
}

func (ap *approvals) close() {
	ap.stop()
	<-ap.swept
	if ap.notifier != nil {
		ap.notifier.Close()
	}
	_ = ap.store.Close()
}

// auditApproval hands an approval's state change to the escalation sinks.
func auditApproval(s pipeline.Sink) func(approval.Event) {
	return func(e approval.Event) {
		s.Record(&pipeline.EscalationRecord{Time: e.At, API: "approvals", Approval: &e})
	}
}
