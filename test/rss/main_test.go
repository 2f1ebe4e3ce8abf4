package main

import (
	"strings"
	"syscall"
	"testing"
)

func TestRaiseFileLimitReachesWhatTheStreamsNeed(t *testing.T) {
	if err := raiseFileLimit(10); err != nil {
		t.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < 10*fdsPerStream+fdSpare {
		t.Fatalf("soft limit %d after raising for 10 streams", lim.Cur)
	}
}

// TestRaiseFileLimitAboveTheHardLimit lowers this test process's hard
// limit (which any process may do, and cannot undo without privilege) and
// asks for more: either the process may raise it and the soft limit
// follows, or the run must stop with an error naming the limit.
func TestRaiseFileLimitAboveTheHardLimit(t *testing.T) {
	low := syscall.Rlimit{Cur: 100, Max: 200}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("cannot lower the file limit here: %v", err)
	}
	err := raiseFileLimit(1000)
	var lim syscall.Rlimit
	if gerr := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); gerr != nil {
		t.Fatal(gerr)
	}
	need := uint64(1000*fdsPerStream + fdSpare)
	switch {
	case err == nil && lim.Cur < need:
		t.Fatalf("no error, but the soft limit is %d of the %d needed", lim.Cur, need)
	case err != nil && !strings.Contains(err.Error(), "hard RLIMIT_NOFILE is 200"):
		t.Fatalf("error does not name the hard limit: %v", err)
	}
}
