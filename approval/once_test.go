package approval

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// UseOnce answers true once per key within its ttl, from either handle on
// a store (two redis clients, as two replicas have), and true again once
// the ttl has passed.
func TestStoreUseOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, c *clock) {
		for i, want := range []struct {
			s    Store
			key  string
			want bool
		}{{p.a, "k1", true}, {p.b, "k1", false}, {p.a, "k1", false}, {p.b, "k2", true}, {p.a, "k2", false}} {
			got, err := want.s.UseOnce(ctx, want.key, time.Minute)
			if err != nil || got != want.want {
				t.Fatalf("step %d: UseOnce(%s) = %v, %v; want %v", i, want.key, got, err, want.want)
			}
		}
		// Memory and file read the store's clock; redis its own, which
		// the test cannot move, so a short ttl runs out for real.
		if got, _ := p.a.UseOnce(ctx, "short", 40*time.Millisecond); !got {
			t.Fatal("a new key was used already")
		}
		c.Add(time.Second)
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			got, err := p.b.UseOnce(ctx, "short", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if got {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a key past its ttl stays used")
			}
		}
		if got, _ := p.a.UseOnce(ctx, "short", time.Minute); got {
			t.Fatal("a key taken again after its ttl was not marked")
		}
	})
}

// Two replicas racing for one key: exactly one wins, every round.
func TestStoreUseOnceRace(t *testing.T) {
	eachStore(t, func(t *testing.T, p pair, _ *clock) {
		for i := 0; i < 100; i++ {
			key := fmt.Sprintf("race-%d", i)
			var won atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, s := range []Store{p.a, p.b, p.a, p.b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					ok, err := s.UseOnce(ctx, key, time.Minute)
					if err != nil {
						t.Error(err)
					}
					if ok {
						won.Add(1)
					}
				}()
			}
			close(start)
			wg.Wait()
			if won.Load() != 1 {
				t.Fatalf("round %d: %d winners", i, won.Load())
			}
		}
	})
}

// A stopped redis answers ErrUnavailable, never a yes.
func TestRedisUseOnceUnavailable(t *testing.T) {
	srv := startRedis(t)
	s := openRedis(t, srv.Addr, Options{})
	srv.Stop()
	ok, err := s.UseOnce(ctx, "k", time.Minute)
	if ok || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("UseOnce with redis stopped = %v, %v", ok, err)
	}
}
