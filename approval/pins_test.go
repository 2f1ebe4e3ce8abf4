package approval

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestPinStores: on the memory and the file store, the first pin of a
// tool stays in force, a drift waits until accepted (then it is the pin)
// or is kept rejected.
func TestPinStores(t *testing.T) {
	f, err := OpenFile(filepath.Join(t.TempDir(), "a.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	for name, st := range map[string]Store{"memory": NewMemory(Options{}), "file": f} {
		ctx := context.Background()
		ps := PinsOf(st)
		if ps == nil {
			t.Fatalf("%s keeps no pins", name)
		}
		now := time.Now().UTC()
		first, err := ps.PinFirst(ctx, "orders", "t", Pin{Digest: "sha256:1", Definition: []byte(`{"name":"t"}`), At: now})
		if err != nil || first.Digest != "sha256:1" {
			t.Fatalf("%s: %v %+v", name, err, first)
		}
		if second, _ := ps.PinFirst(ctx, "orders", "t", Pin{Digest: "sha256:2", Definition: []byte(`{}`), At: now}); second.Digest != "sha256:1" {
			t.Fatalf("%s: a second first pin replaced the first: %+v", name, second)
		}
		if _, err := ps.Resolve(ctx, "orders", "t", true, "ana", now); err != ErrNoDrift {
			t.Fatalf("%s: a decision with no drift: %v", name, err)
		}
		for _, tool := range []string{"t", "u"} {
			if _, err := ps.Drifted(ctx, Drift{Server: "orders", Tool: tool, Digest: "sha256:2", Definition: []byte(`{"name":"` + tool + `"}`)}); err != nil {
				t.Fatal(err)
			}
		}
		if ds, _ := ps.Drifts(ctx); len(ds) != 2 || ds[0].Tool != "t" || ds[0].State != DriftPending {
			t.Fatalf("%s: drifts %+v", name, ds)
		}
		if d, err := ps.Resolve(ctx, "orders", "u", false, "ana", now); err != nil || d.State != DriftRejected {
			t.Fatalf("%s: reject %v %+v", name, err, d)
		}
		if d, _ := ps.Drifted(ctx, Drift{Server: "orders", Tool: "u", Digest: "sha256:2"}); d.State != DriftRejected {
			t.Fatalf("%s: the same definition listed again is no longer rejected: %+v", name, d)
		}
		if _, err := ps.Resolve(ctx, "orders", "t", true, "ana", now); err != nil {
			t.Fatal(err)
		}
		pins, _ := ps.Pins(ctx, "orders")
		if pins["t"].Digest != "sha256:2" || pins["t"].By != "ana" {
			t.Fatalf("%s: after accept the pin is %+v", name, pins["t"])
		}
		if ds, _ := ps.Drifts(ctx); len(ds) != 1 || ds[0].Tool != "u" {
			t.Fatalf("%s: after accept the drifts are %+v", name, ds)
		}
	}
}
