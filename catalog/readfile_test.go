package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO with no writer blocks open(2) forever; readFile must refuse it
// without opening it.
func TestReadFileRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "prompt.fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := readFile(p); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err = %v, want a refusal", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("readFile blocked on a FIFO")
	}
}

func TestReadFileBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the size is real to read(2) without writing 32 MiB.
	if err := f.Truncate(maxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := readFile(p); err == nil || !strings.Contains(err.Error(), "larger than 32 MiB") {
		t.Fatalf("err = %v, want the size bound", err)
	}
	if err := os.Truncate(p, maxFileBytes); err != nil {
		t.Fatal(err)
	}
	if data, err := readFile(p); err != nil || len(data) != maxFileBytes {
		t.Fatalf("at the bound: %d bytes, %v", len(data), err)
	}
	if _, err := LoadConfig(p + ".missing"); !os.IsNotExist(err) {
		t.Fatalf("missing config: %v, want a not-exist error", err)
	}
}
