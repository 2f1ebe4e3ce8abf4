package approval

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"
)

// DefaultTTL is approvals.ttl's default.
const DefaultTTL = 15 * time.Minute

// Event is one state change, for the audit trail (a sink record): which
// approval, for which escalation and call, who, when.
type Event struct {
	Result       string    `json:"result"`
	ApprovalID   string    `json:"approval_id"`
	EscalationID string    `json:"escalation_id,omitempty"`
	CallDigest   string    `json:"call_digest,omitempty"`
	By           string    `json:"by,omitempty"`
	At           time.Time `json:"at"`
	// Code is a refused resume's §5a code.
	Code RefusalCode `json:"code,omitempty"`
	// Chain, Seq and Prev link the events one process wrote: Chain names
	// the process's chain, Seq counts its events from 1 and Prev is the
	// digest of the event before (chain.go), so a removed or altered
	// record shows.
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq"`
	Prev  string `json:"prev"`
}

// Config wires a Service.
type Config struct {
	Store Store
	// TTL is how long a pending or approved call may wait (DefaultTTL).
	TTL     time.Duration
	Metrics *Metrics
	// Notifier, when set, hears of each new pending operator approval.
	Notifier *Notifier
	// Audit, when set, receives every event. It must not block.
	Audit func(Event)
	// Redact blanks what escalation.redact names in a call's arguments
	// before the admin API or a notification shows them. Nil shows them
	// as they are.
	Redact func(tool string, args json.RawMessage) json.RawMessage
	Now    func() time.Time
	// NotifyFormat is the notification's body: "json" (default) or
	// "slack"; PageURL is the approvals page a slack message links to.
	NotifyFormat string
	PageURL      string
	// PinDecided, when set, hears of each drifted tool definition a
	// person accepted or rejected (docs/pins.md, "Held drift: the admin API").
	PinDecided func(Drift)
}

// Service is approvals as the rest of toolgate uses them: the store's
// operations with their metrics, audit events and notifications.
type Service struct {
	cfg Config
	// ttl is c.TTL, which a reload may change while requests hold calls.
	ttl   atomic.Int64
	chain chain
}

// New returns a Service on c.Store.
func New(c Config) *Service {
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	s := &Service{cfg: c, chain: chain{id: "chn_" + random()}}
	s.ttl.Store(int64(c.TTL))
	return s
}

// Pins is the store's pinned tool definitions, nil when it keeps none.
func (s *Service) Pins() *PinStore { return PinsOf(s.cfg.Store) }

// SetTTL changes how long calls held from now on may wait (a reload of
// approvals.ttl); records already held keep their expiry.
func (s *Service) SetTTL(d time.Duration) {
	if d > 0 {
		s.ttl.Store(int64(d))
	}
}

// Store is the service's store.
func (s *Service) Store() Store { return s.cfg.Store }

func (s *Service) emit(result string, r *Record, by string, at time.Time, code RefusalCode) {
	s.cfg.Metrics.count(result)
	if s.cfg.Audit != nil {
		s.chain.link(Event{Result: result, ApprovalID: r.ID, EscalationID: r.EscalationID,
			CallDigest: r.CallDigest(), By: by, At: at.UTC(), Code: code}, s.cfg.Audit)
	}
}

// refreshPending sets the gauge from the store, which counts what every
// replica sharing it holds.
func (s *Service) refreshPending(ctx context.Context) {
	if n, err := s.cfg.Store.Pending(ctx); err == nil {
		s.cfg.Metrics.pending(n)
	}
}

// Request holds an answer: it stores a pending record and returns it with
// the secret a caller approval hands out (zero otherwise).
func (s *Service) Request(ctx context.Context, spec HeldAnswer) (*Record, Secret, error) {
	r, sec := NewRecord(spec, s.cfg.Now(), time.Duration(s.ttl.Load()))
	if err := s.cfg.Store.Put(ctx, r); err != nil {
		return nil, Secret{}, err
	}
	s.emit(ResultRequested, r, "", r.Created, "")
	s.refreshPending(ctx)
	if s.cfg.Notifier != nil && r.Approver == Operator {
		if body, err := s.notification(r); err == nil {
			s.cfg.Notifier.Notify(body)
		}
	}
	return r, sec, nil
}

type notification struct {
	Type     string `json:"type"`
	Approval View   `json:"approval"`
}

// notification is the body announcing r: the view as JSON, or a message
// a person reads in a chat tool. Neither carries the user's message.
func (s *Service) notification(r *Record) ([]byte, error) {
	v := s.view(r)
	v.LastUserMessage = ""
	if s.cfg.NotifyFormat == "slack" {
		return json.Marshal(struct {
			Text string `json:"text"`
		}{Text: slackText(v, s.cfg.PageURL)})
	}
	return json.Marshal(notification{Type: "approval.pending", Approval: v})
}

// Get returns a record as it reads now.
func (s *Service) Get(ctx context.Context, id string) (*Record, error) {
	return s.cfg.Store.Get(ctx, id)
}

// Decide records a person's decision.
func (s *Service) Decide(ctx context.Context, id string, d Decision) (*Record, error) {
	// A person closing the tab must not cut a decision off between the
	// store and its audit record: it completes, or never starts.
	ctx = context.WithoutCancel(ctx)
	r, err := s.cfg.Store.Decide(ctx, id, d)
	if err != nil {
		return nil, err
	}
	result := ResultDenied
	if r.State == Approved {
		result = ResultApproved
	}
	s.emit(result, r, d.By, r.DecidedAt, "")
	s.refreshPending(ctx)
	return r, nil
}

// Claim releases an approval once (see Store.Claim). A refusal is counted
// and audited; an unreachable store is neither, since nothing happened.
func (s *Service) Claim(ctx context.Context, id string, m Match) (*Record, error) {
	r, err := s.cfg.Store.Claim(ctx, id, m)
	if err != nil {
		if rf, ok := AsRefusal(err); ok {
			s.emit(ResultRefused, &Record{ID: id}, "", s.cfg.Now(), rf.Code)
		}
		return nil, err
	}
	// A caller approval has no decision: the app that held the secret is
	// who said yes.
	by := r.DecidedBy
	if by == "" && r.Approver == Caller {
		by = string(Caller)
	}
	s.emit(ResultReleased, r, by, r.ReleasedAt, "")
	s.refreshPending(ctx)
	return r, nil
}

// Refuse counts and audits a resume refused before its claim: a stored
// call that no longer passes the catalog (CodeStale).
func (s *Service) Refuse(r *Record, code RefusalCode) {
	s.emit(ResultRefused, r, "", s.cfg.Now(), code)
}

// Sweep expires what is past its ttl, counting each expiry once across
// replicas, and refreshes the pending gauge.
func (s *Service) Sweep(ctx context.Context) error {
	expired, err := s.cfg.Store.Sweep(ctx)
	for _, r := range expired {
		s.emit(ResultExpired, r, "", r.ExpiresAt, "")
	}
	s.refreshPending(ctx)
	return err
}

// Run sweeps every interval until ctx ends. errs hears of sweeps that
// failed (nil: nobody).
func (s *Service) Run(ctx context.Context, every time.Duration, errs func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Sweep(ctx); err != nil && errs != nil && !errors.Is(err, context.Canceled) {
				errs(err)
			}
		}
	}
}
