package schema

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time the process has used. Reported per operation
// beside ns/op (wall time), it stays meaningful on a machine whose cores
// other work shares; it includes the garbage collector's workers.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}
