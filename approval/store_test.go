package approval

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now().Truncate(time.Millisecond)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const testTTL = 15 * time.Minute

// pair is two handles on one store: for redis, two clients, as two
// replicas have; for memory and file, the same store twice.
type pair struct{ a, b Store }

type storeKind struct {
	name string
	open func(t *testing.T, o Options) pair
}

var storeKinds = []storeKind{
	{"memory", func(t *testing.T, o Options) pair {
		s := NewMemory(o)
		return pair{s, s}
	}},
	{"file", func(t *testing.T, o Options) pair {
		s, err := OpenFile(filepath.Join(t.TempDir(), "approvals.db"), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return pair{s, s}
	}},
	{"redis", func(t *testing.T, o Options) pair {
		srv := startRedis(t)
		return pair{openRedis(t, srv.Addr, o), openRedis(t, srv.Addr, o)}
	}},
}

func openRedis(t *testing.T, addr string, o Options) *Redis {
	t.Helper()
	s, err := OpenRedis(context.Background(), addr, 0, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// eachStore runs f against every kind of store.
func eachStore(t *testing.T, f func(t *testing.T, p pair, c *clock)) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			c := newClock()
			f(t, k.open(t, Options{Now: c.Now, Linger: time.Hour}), c)
		})
	}
}

var ctx = context.Background()

func testRecord(t *testing.T, c *clock, who Approver) (*Record, Secret, Match) {
	t.Helper()
	call, err := NewCall("issue_refund", []byte(`{"order_id":"A1","amount_cents":500}`))
	if err != nil {
		t.Fatal(err)
	}
	r, sec := NewRecord(HeldAnswer{
		Approver: who, RequestDigest: "sha256:req", Route: "/v1/chat/completions", Upstream: "openai",
		CatalogVersion: "v1", EscalationID: "esc_1", Calls: []HeldCall{call}, Held: []byte("held answer bytes"),
	}, c.Now(), testTTL)
	return r, sec, Match{RequestDigest: "sha256:req", Route: "/v1/chat/completions", Upstream: "openai", Secret: sec}
}

func wantCode(t *testing.T, err error, code RefusalCode) {
	t.Helper()
	r, ok := AsRefusal(err)
	if !ok || r.Code != code {
		t.Fatalf("err = %v, want refusal %s", err, code)
	}
}

func put(t *testing.T, s Store, r *Record) {
	t.Helper()
	if err := s.Put(ctx, r); err != nil {
		t.Fatal(err)
	}
}

func TestStorePutGet(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		r, _, _ := testRecord(t, c, Operator)
		put(t, p.a, r)
		got, err := p.b.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != Pending || got.RequestDigest != r.RequestDigest || got.Route != r.Route ||
			got.Upstream != r.Upstream || got.CatalogVersion != "v1" || got.EscalationID != "esc_1" ||
			!got.ExpiresAt.Equal(r.ExpiresAt) || !got.Created.Equal(r.Created) || got.Approver != Operator ||
			len(got.Calls) != 1 || got.Calls[0].Tool != "issue_refund" || got.Calls[0].Digest != r.Calls[0].Digest ||
			string(got.Calls[0].Arguments) != `{"amount_cents":500,"order_id":"A1"}` ||
			!bytes.Equal(got.Held, r.Held) {
			t.Fatalf("got %+v\nwant %+v", got, r)
		}
		_, err = p.b.Get(ctx, "apr_00000000000000000000000000000000")
		wantCode(t, err, CodeUnknown)
	})
}

func TestStoreApproveThenClaimOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		r, _, m := testRecord(t, c, Operator)
		put(t, p.a, r)
		d, err := p.a.Decide(ctx, r.ID, Decision{Approve: true, By: "ana", Note: "ok"})
		if err != nil || d.State != Approved || d.DecidedBy != "ana" || d.Note != "ok" {
			t.Fatalf("decide = %+v, %v", d, err)
		}
		got, err := p.b.Claim(ctx, r.ID, m)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != Released || string(got.Held) != "held answer bytes" || got.DecidedBy != "ana" || got.ReleasedAt.IsZero() {
			t.Fatalf("claimed %+v", got)
		}
		_, err = p.a.Claim(ctx, r.ID, m)
		wantCode(t, err, CodeUsed)
		after, err := p.a.Get(ctx, r.ID)
		if err != nil || after.State != Released || after.Held != nil {
			t.Fatalf("after release: %+v, %v (the held answer must be dropped)", after, err)
		}
		_, err = p.b.Decide(ctx, r.ID, Decision{Approve: false, By: "bob"})
		wantCode(t, err, CodeDecided)
	})
}

func TestStoreDecideOnlyFromPending(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		r, _, m := testRecord(t, c, Operator)
		put(t, p.a, r)
		if _, err := p.a.Decide(ctx, r.ID, Decision{Approve: false, By: "ana"}); err != nil {
			t.Fatal(err)
		}
		_, err := p.b.Decide(ctx, r.ID, Decision{Approve: true, By: "bob"})
		wantCode(t, err, CodeDecided)
		if rf, _ := AsRefusal(err); rf.State != Denied {
			t.Errorf("refusal state = %s", rf.State)
		}
		_, err = p.b.Claim(ctx, r.ID, m)
		wantCode(t, err, CodeDenied)
		got, _ := p.a.Get(ctx, r.ID)
		if got.State != Denied || got.Held != nil || got.DecidedBy != "ana" {
			t.Fatalf("after deny: %+v", got)
		}
		_, err = p.a.Decide(ctx, "apr_ffffffffffffffffffffffffffffffff", Decision{Approve: true})
		wantCode(t, err, CodeUnknown)
	})
}

func TestStoreClaimRefusalsChangeNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		r, _, m := testRecord(t, c, Operator)
		put(t, p.a, r)
		_, err := p.b.Claim(ctx, r.ID, m)
		wantCode(t, err, CodePending)
		for _, bad := range []Match{
			{RequestDigest: "sha256:other", Route: m.Route, Upstream: m.Upstream},
			{RequestDigest: m.RequestDigest, Route: "/v1/responses", Upstream: m.Upstream},
			{RequestDigest: m.RequestDigest, Route: m.Route, Upstream: "other"},
		} {
			_, err = p.b.Claim(ctx, r.ID, bad)
			wantCode(t, err, CodeMismatch)
		}
		if _, err := p.a.Decide(ctx, r.ID, Decision{Approve: true, By: "ana"}); err != nil {
			t.Fatal(err)
		}
		_, err = p.b.Claim(ctx, r.ID, Match{RequestDigest: "sha256:other", Route: m.Route, Upstream: m.Upstream})
		wantCode(t, err, CodeMismatch)
		_, err = p.b.Claim(ctx, "apr_00000000000000000000000000000000", m)
		wantCode(t, err, CodeUnknown)
		if got, err := p.b.Claim(ctx, r.ID, m); err != nil || got.State != Released {
			t.Fatalf("claim after refusals = %+v, %v", got, err)
		}
	})
}

func TestStoreCallerApproval(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		r, sec, m := testRecord(t, c, Caller)
		if sec.IsZero() || len(r.SecretHash) == 0 {
			t.Fatal("a caller approval has no secret")
		}
		put(t, p.a, r)
		wrong := m
		wrong.Secret = SecretFrom("00000000000000000000000000000000")
		_, err := p.b.Claim(ctx, r.ID, wrong)
		wantCode(t, err, CodeSecret)
		none := m
		none.Secret = Secret{}
		_, err = p.b.Claim(ctx, r.ID, none)
		wantCode(t, err, CodeSecret)
		got, err := p.b.Claim(ctx, r.ID, m)
		if err != nil || got.State != Released || string(got.Held) != "held answer bytes" {
			t.Fatalf("claim with the secret = %+v, %v", got, err)
		}
		_, err = p.a.Claim(ctx, r.ID, m)
		wantCode(t, err, CodeUsed)

		// An operator may still deny a caller approval.
		r2, _, m2 := testRecord(t, c, Caller)
		put(t, p.a, r2)
		if _, err := p.a.Decide(ctx, r2.ID, Decision{By: "ops"}); err != nil {
			t.Fatal(err)
		}
		_, err = p.b.Claim(ctx, r2.ID, m2)
		wantCode(t, err, CodeDenied)
	})
}

func TestStoreExpiry(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		pend, _, m := testRecord(t, c, Operator)
		appr, _, _ := testRecord(t, c, Operator)
		done, _, _ := testRecord(t, c, Operator)
		for _, r := range []*Record{pend, appr, done} {
			put(t, p.a, r)
		}
		if _, err := p.a.Decide(ctx, appr.ID, Decision{Approve: true, By: "ana"}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.a.Decide(ctx, done.ID, Decision{Approve: true, By: "ana"}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.a.Claim(ctx, done.ID, m); err != nil {
			t.Fatal(err)
		}
		if n, _ := p.b.Pending(ctx); n != 1 {
			t.Fatalf("pending = %d, want 1", n)
		}
		c.Add(testTTL)
		if n, _ := p.b.Pending(ctx); n != 0 {
			t.Fatalf("pending after ttl = %d, want 0", n)
		}
		for _, id := range []string{pend.ID, appr.ID} {
			got, err := p.b.Get(ctx, id)
			if err != nil || got.State != Expired || got.Held != nil {
				t.Fatalf("Get after ttl = %+v, %v", got, err)
			}
			_, err = p.b.Claim(ctx, id, m)
			wantCode(t, err, CodeExpired)
			_, err = p.a.Decide(ctx, id, Decision{Approve: true, By: "late"})
			wantCode(t, err, CodeExpired)
		}
		if got, _ := p.a.Get(ctx, done.ID); got.State != Released {
			t.Fatalf("a released record read as %s after ttl", got.State)
		}
		exp, err := p.a.Sweep(ctx)
		if err != nil || len(exp) != 2 {
			t.Fatalf("sweep = %d records, %v; want the 2 live ones", len(exp), err)
		}
		if again, _ := p.b.Sweep(ctx); len(again) != 0 {
			t.Fatalf("a second sweep expired %d again", len(again))
		}
		if got, err := p.b.Get(ctx, pend.ID); err != nil || got.State != Expired {
			t.Fatalf("kept record = %+v, %v", got, err)
		}
		c.Add(time.Hour + time.Second)
		if exp, _ := p.a.Sweep(ctx); len(exp) != 0 {
			t.Fatalf("sweep past linger expired %d", len(exp))
		}
		for _, id := range []string{pend.ID, appr.ID, done.ID} {
			_, err := p.b.Get(ctx, id)
			wantCode(t, err, CodeUnknown)
		}
		if all, _ := p.b.List(ctx, ""); len(all) != 0 {
			t.Fatalf("list after linger = %d records", len(all))
		}
	})
}

func TestStoreSweepCountsARecordPastLingerOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		r, _, _ := testRecord(t, c, Operator)
		put(t, p.a, r)
		c.Add(testTTL + 2*time.Hour)
		exp, err := p.a.Sweep(ctx)
		if err != nil || len(exp) != 1 || exp[0].ID != r.ID || exp[0].State != Expired {
			t.Fatalf("sweep = %+v, %v", exp, err)
		}
		_, err = p.b.Get(ctx, r.ID)
		wantCode(t, err, CodeUnknown)
	})
}

func TestStoreList(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		var ids []string
		for i := 0; i < 3; i++ {
			r, _, _ := testRecord(t, c, Operator)
			put(t, p.a, r)
			ids = append(ids, r.ID)
			c.Add(time.Second)
		}
		if _, err := p.a.Decide(ctx, ids[1], Decision{Approve: true, By: "ana"}); err != nil {
			t.Fatal(err)
		}
		pend, err := p.b.List(ctx, Pending)
		if err != nil || len(pend) != 2 || pend[0].ID != ids[0] || pend[1].ID != ids[2] {
			t.Fatalf("pending = %v, %v", pend, err)
		}
		for _, r := range pend {
			if r.Held != nil {
				t.Fatal("List returned held answers")
			}
		}
		all, _ := p.b.List(ctx, "")
		if len(all) != 3 || all[1].State != Approved {
			t.Fatalf("all = %v", all)
		}
		if rel, _ := p.b.List(ctx, Released); len(rel) != 0 {
			t.Fatalf("released = %v", rel)
		}
	})
}

// TestStoreConcurrentClaimReleasesOnce claims one approval from many
// goroutines at once, through both handles.
func TestStoreConcurrentClaimReleasesOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		r, _, m := testRecord(t, c, Operator)
		put(t, p.a, r)
		if _, err := p.a.Decide(ctx, r.ID, Decision{Approve: true, By: "ana"}); err != nil {
			t.Fatal(err)
		}
		var won, used atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 32; i++ {
			s := p.a
			if i%2 == 1 {
				s = p.b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Claim(ctx, r.ID, m)
				if err == nil {
					won.Add(1)
				} else if rf, ok := AsRefusal(err); ok && rf.Code == CodeUsed {
					used.Add(1)
				} else {
					t.Errorf("claim: %v", err)
				}
			}()
		}
		wg.Wait()
		if won.Load() != 1 || used.Load() != 31 {
			t.Fatalf("released %d times, refused as used %d times", won.Load(), used.Load())
		}
	})
}

func TestFileStoreSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.db")
	c := newClock()
	o := Options{Now: c.Now}
	s, err := OpenFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	r, _, m := testRecord(t, c, Operator)
	put(t, s, r)
	if _, err := s.Decide(ctx, r.ID, Decision{Approve: true, By: "ana"}); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path, o); err == nil || !bytes.Contains([]byte(err.Error()), []byte("locked by another process")) {
		t.Fatalf("a second open of a locked file = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, err := s2.Claim(ctx, r.ID, m)
	if err != nil || string(got.Held) != "held answer bytes" || got.DecidedBy != "ana" {
		t.Fatalf("claim after reopen = %+v, %v", got, err)
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing", "a.db"), o); err == nil {
		t.Fatal("a store in a missing folder opened")
	}
}

// TestRedisReplicasDoubleClaim approves at one replica and claims from
// both at once, 100 times: each approval is released exactly once.
func TestRedisReplicasDoubleClaim(t *testing.T) {
	srv := startRedis(t)
	a, b := openRedis(t, srv.Addr, Options{}), openRedis(t, srv.Addr, Options{})
	for i := 0; i < 100; i++ {
		r, _, m := testRecord(t, newClock(), Operator)
		put(t, a, r)
		if _, err := a.Decide(ctx, r.ID, Decision{Approve: true, By: "ana"}); err != nil {
			t.Fatal(err)
		}
		var won atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, s := range []Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got, err := s.Claim(ctx, r.ID, m)
				switch rf, _ := AsRefusal(err); {
				case err == nil && string(got.Held) == "held answer bytes":
					won.Add(1)
				case rf != nil && rf.Code == CodeUsed:
				default:
					t.Errorf("claim: %+v, %v", got, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("round %d: released %d times", i, won.Load())
		}
	}
}

// TestRedisStoppedIsUnavailable stops the server: every call answers
// ErrUnavailable and nothing is released; a server back on the port
// serves again.
func TestRedisStoppedIsUnavailable(t *testing.T) {
	srv := startRedis(t)
	c := newClock()
	s := openRedis(t, srv.Addr, Options{Now: c.Now})
	r, _, m := testRecord(t, c, Operator)
	put(t, s, r)
	if _, err := s.Decide(ctx, r.ID, Decision{Approve: true, By: "ana"}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	got, err := s.Claim(ctx, r.ID, m)
	if !errors.Is(err, ErrUnavailable) || got != nil {
		t.Fatalf("claim with redis stopped = %+v, %v", got, err)
	}
	if _, ok := AsRefusal(err); ok {
		t.Fatal("an unreachable store answered a refusal")
	}
	r2, _, _ := testRecord(t, c, Operator)
	checks := map[string]error{"put": s.Put(ctx, r2)}
	_, checks["get"] = s.Get(ctx, r.ID)
	_, checks["list"] = s.List(ctx, "")
	_, checks["decide"] = s.Decide(ctx, r.ID, Decision{Approve: true})
	_, checks["sweep"] = s.Sweep(ctx)
	_, checks["pending"] = s.Pending(ctx)
	checks["ping"] = s.Ping(ctx)
	for op, err := range checks {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s with redis stopped = %v, want ErrUnavailable", op, err)
		}
	}
}

// An approval is bound to the caller that made the hold: another caller
// presenting the same request is refused and releases nothing, across
// replicas; the rightful caller still releases it once.
func TestStoreClaimBoundToCaller(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		for _, who := range []Approver{Operator, Caller} {
			a := Binding{Token: "token-a"}.Digest()
			call, _ := NewCall("issue_refund", []byte(`{"order_id":"A1"}`))
			r, sec := NewRecord(HeldAnswer{Approver: who, RequestDigest: "sha256:req", Route: "/r", Upstream: "u", Caller: a,
				Calls: []HeldCall{call}, Held: []byte("held")}, c.Now(), testTTL)
			put(t, p.a, r)
			if who == Operator {
				if _, err := p.a.Decide(ctx, r.ID, Decision{Approve: true, By: "ana"}); err != nil {
					t.Fatal(err)
				}
			}
			m := Match{RequestDigest: "sha256:req", Route: "/r", Upstream: "u", Secret: sec}
			for _, other := range []Binding{{Token: "token-b"}, {}, {Session: "token-a"}, {Token: "token-a", Session: "s1"}} {
				m.Caller = other.Digest()
				_, err := p.b.Claim(ctx, r.ID, m)
				wantCode(t, err, CodeMismatch)
			}
			if got, _ := p.a.Get(ctx, r.ID); got.State == Released || got.Held == nil {
				t.Fatalf("a refused claim changed the record: %+v", got)
			}
			m.Caller = a
			if got, err := p.b.Claim(ctx, r.ID, m); err != nil || string(got.Held) != "held" {
				t.Fatalf("the rightful caller's claim = %+v, %v", got, err)
			}
			_, err := p.a.Claim(ctx, r.ID, m)
			wantCode(t, err, CodeUsed)
		}
	})
}

func TestBindingDigest(t *testing.T) {
	if d := (Binding{}).Digest(); d != "" {
		t.Errorf("an empty binding digests to %q", d)
	}
	seen := map[string]Binding{}
	for _, b := range []Binding{{Token: "a"}, {Token: "b"}, {Session: "a"}, {Token: "a", Session: "a"}, {Token: "a\x00session"}} {
		d := b.Digest()
		if prev, ok := seen[d]; ok {
			t.Errorf("%+v and %+v share a digest", prev, b)
		}
		seen[d] = b
		if !strings.HasPrefix(d, "sha256:") || strings.Contains(d, "token") {
			t.Errorf("digest %q", d)
		}
	}
}
