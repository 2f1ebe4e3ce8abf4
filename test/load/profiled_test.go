package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/test/internal/proc"
)

// TestProfiledToolgateServesAndWritesBothProfiles runs the profiled
// toolgate of -profile in this process against the mock: it must answer
// a fixture request exactly as the mock sent it, and leave a CPU and an
// allocation profile (gzip-compressed protocol buffers, as pprof reads
// them) once told to stop.
func TestProfiledToolgateServesAndWritesBothProfiles(t *testing.T) {
	mock := httptest.NewServer(mockHandler(&mockStats{}))
	defer mock.Close()
	listen, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := toolgateConfig(listen, admin, mock.URL, "error")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		done <- profileToolgate(path, dir, stop)
		close(exited)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := proc.WaitReady(ctx, "http://"+admin+"/readyz", exited); err != nil {
		close(stop)
		t.Fatalf("profiled toolgate not ready: %v (%v)", err, <-done)
	}
	d := newDriver(10 * time.Second)
	for _, stream := range []bool{false, true} {
		if s := d.one(ctx, "http://"+listen, scenario{Stream: stream, Workload: fixtureWorkload}, time.Now()); s.out != okExact {
			t.Errorf("stream=%v: outcome %d, want the mock's bytes", stream, s.out)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cpu.prof", "allocs.prof"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s is %d bytes and not a gzip-compressed profile", name, len(b))
		}
	}
}
