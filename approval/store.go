package approval

import (
	"context"
	"crypto/subtle"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/storespec"
)

// Store keeps approval records. Every method is one atomic step, also
// across the replicas sharing a store: Decide only moves a pending record,
// and Claim releases an approval once, whoever asks and however often. A
// store that cannot be reached returns an error wrapping ErrUnavailable;
// the state machine's answers are *Refusal errors.
type Store interface {
	// Put stores a new pending record.
	Put(ctx context.Context, r *Record) error
	// Get returns the record as it reads now (a live one past expires_at
	// reads as expired), or a CodeUnknown refusal.
	Get(ctx context.Context, id string) (*Record, error)
	// List returns the records in state st ("" for all), oldest first,
	// without their held answers.
	List(ctx context.Context, st State) ([]*Record, error)
	// Decide moves a pending, unexpired record to approved or denied.
	Decide(ctx context.Context, id string, d Decision) (*Record, error)
	// Claim releases an approved (or, for a caller approval, pending)
	// record whose request and secret match m, and returns it with its
	// held answer. Anything else is a refusal and changes nothing.
	Claim(ctx context.Context, id string, m Match) (*Record, error)
	// Sweep marks the live records past expires_at expired, returning
	// them, and removes the records kept past their linger.
	Sweep(ctx context.Context) ([]*Record, error)
	// Pending counts the pending, unexpired records.
	Pending(ctx context.Context) (int, error)
	// UseOnce marks key used for ttl and reports whether it was unused:
	// of any number of calls with one key within ttl, across the replicas
	// sharing the store, exactly one gets true (once.go).
	UseOnce(ctx context.Context, key string, ttl time.Duration) (bool, error)
	Close() error
}

// Decision is a person's answer.
type Decision struct {
	Approve bool
	By      string
	Note    string
}

// Match is what a resume presents: the request it repeats and, for a
// caller approval, the secret.
type Match struct {
	RequestDigest string
	Route         string
	Upstream      string
	// Caller is the resuming caller's Binding.Digest.
	Caller string
	Secret Secret
}

// Options tune a store.
type Options struct {
	// Now is the clock (time.Now when nil). Replicas sharing a redis
	// store compare expires_at with their own clocks, which NTP keeps
	// close enough for minutes-long approvals.
	Now func() time.Time
	// Linger is how long a record stays after expires_at so a late resume
	// learns it was used, denied or expired rather than unknown. Its held
	// answer is dropped as soon as it is final. Default DefaultLinger.
	Linger time.Duration
}

// DefaultLinger keeps final records an hour past their expiry.
const DefaultLinger = time.Hour

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Linger <= 0 {
		o.Linger = DefaultLinger
	}
	return o
}

// StoreSpec is a parsed approvals.store value.
type StoreSpec = storespec.Spec

// ParseStore reads an approvals.store value: memory, file:PATH or
// redis://HOST:PORT/DB.
func ParseStore(s string) (StoreSpec, error) { return storespec.Parse(s) }

// Open opens the store spec names.
func Open(ctx context.Context, spec StoreSpec, o Options) (Store, error) {
	switch spec.Kind {
	case storespec.Memory:
		return NewMemory(o), nil
	case storespec.File:
		return OpenFile(spec.Path, o)
	case storespec.Redis:
		return OpenRedis(ctx, spec.Addr, spec.DB, o)
	}
	return nil, fmt.Errorf("approval: unknown store kind %q", spec.Kind)
}

// decide applies d to r at now, in place. The stores that hold a lock or a
// transaction around it (memory, file) share it; redis runs the same rules
// as one script.
func decide(r *Record, d Decision, now time.Time) error {
	if r.asOf(now).State != Pending {
		if r.State == Expired {
			return refuse(CodeExpired, r.State)
		}
		return refuse(CodeDecided, r.State)
	}
	r.State = Denied
	if d.Approve {
		r.State = Approved
	} else {
		r.Held = nil
	}
	r.DecidedBy, r.DecidedAt, r.Note = d.By, now.UTC(), d.Note
	return nil
}

// checkRelease says whether m may release r at now: the immutable fields
// first (the same request, the secret), then the state.
func checkRelease(r *Record, m Match, now time.Time) error {
	if err := checkMatch(r, m); err != nil {
		return err
	}
	return checkState(r, now)
}

// checkMatch compares what never changes in a record: the request, who
// made it and, for a caller approval, the secret.
func checkMatch(r *Record, m Match) error {
	if !r.Matches(m) {
		return refuse(CodeMismatch, r.State)
	}
	if r.Approver == Caller && !m.Secret.matches(r.SecretHash) {
		return refuse(CodeSecret, r.State)
	}
	return nil
}

// Matches reports whether m repeats the held request from the caller that
// made it: the same body, route, upstream and caller. It says nothing of
// the secret or the state.
func (r *Record) Matches(m Match) bool {
	return r.RequestDigest == m.RequestDigest && r.Route == m.Route && r.Upstream == m.Upstream &&
		subtle.ConstantTimeCompare([]byte(r.Caller), []byte(m.Caller)) == 1
}

// checkState says whether r may be released at now.
func checkState(r *Record, now time.Time) error {
	switch r.asOf(now).State {
	case Approved:
		return nil
	case Pending:
		if r.Approver == Caller {
			return nil
		}
		return refuse(CodePending, r.State)
	case Denied:
		return refuse(CodeDenied, r.State)
	case Expired:
		return refuse(CodeExpired, r.State)
	}
	return refuse(CodeUsed, r.State)
}

// release marks a checked record released.
func release(r *Record, now time.Time) {
	r.State = Released
	r.ReleasedAt = now.UTC()
}

// clone copies r deep enough that a caller's changes never reach a store's
// own copy.
func clone(r *Record, held bool) *Record {
	c := *r
	c.Calls = append([]HeldCall(nil), r.Calls...)
	c.SecretHash = append([]byte(nil), r.SecretHash...)
	c.Held = nil
	if held && r.Held != nil {
		c.Held = append([]byte(nil), r.Held...)
	}
	return &c
}
