package approval

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is the default store: one replica's, lost on restart.
type Memory struct {
	opts    Options
	mu      sync.Mutex
	records map[string]*Record
	// once holds UseOnce's keys and their expiries.
	once map[string]time.Time
	// pins are the pinned tool definitions and drifts (pins.go).
	pins memHashes
}

// NewMemory returns an empty memory store.
func NewMemory(o Options) *Memory {
	return &Memory{opts: o.withDefaults(), records: map[string]*Record{}}
}

// Put implements Store.
func (s *Memory) Put(_ context.Context, r *Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[r.ID] = clone(r, true)
	return nil
}

// Get implements Store.
func (s *Memory) Get(_ context.Context, id string) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return nil, refuse(CodeUnknown, "")
	}
	return clone(r, true).asOf(s.opts.Now()), nil
}

// List implements Store.
func (s *Memory) List(_ context.Context, st State) ([]*Record, error) {
	now := s.opts.Now()
	s.mu.Lock()
	var out []*Record
	for _, r := range s.records {
		if c := clone(r, false).asOf(now); st == "" || c.State == st {
			out = append(out, c)
		}
	}
	s.mu.Unlock()
	sortRecords(out)
	return out, nil
}

// sortRecords orders records oldest first, ties by id.
func sortRecords(rs []*Record) {
	slices.SortFunc(rs, func(a, b *Record) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
}

// Decide implements Store.
func (s *Memory) Decide(_ context.Context, id string, d Decision) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return nil, refuse(CodeUnknown, "")
	}
	// The rules run on a copy: a refusal must leave the record as it was.
	c := clone(r, true)
	if err := decide(c, d, s.opts.Now()); err != nil {
		return nil, err
	}
	s.records[id] = c
	return clone(c, false), nil
}

// Claim implements Store.
func (s *Memory) Claim(_ context.Context, id string, m Match) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return nil, refuse(CodeUnknown, "")
	}
	now := s.opts.Now()
	c := clone(r, true)
	if err := checkRelease(c, m, now); err != nil {
		return nil, err
	}
	release(c, now)
	out := clone(c, true)
	c.Held = nil
	s.records[id] = c
	return out, nil
}

// Sweep implements Store.
func (s *Memory) Sweep(context.Context) ([]*Record, error) {
	now := s.opts.Now()
	s.mu.Lock()
	var expired []*Record
	for id, r := range s.records {
		if r.live(now) {
			continue
		}
		if r.State == Pending || r.State == Approved {
			r.asOf(now)
			expired = append(expired, clone(r, false))
		}
		if now.After(r.ExpiresAt.Add(s.opts.Linger)) {
			delete(s.records, id)
		}
	}
	s.mu.Unlock()
	sortRecords(expired)
	return expired, nil
}

// Pending implements Store.
func (s *Memory) Pending(context.Context) (int, error) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.records {
		if r.State == Pending && r.live(now) {
			n++
		}
	}
	return n, nil
}

// Close implements Store.
func (s *Memory) Close() error { return nil }
