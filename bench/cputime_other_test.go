//go:build !unix

package bench

import (
	"os"
	"testing"
	"time"
)

// processCPU skips the benchmark: the process's CPU time is read with getrusage
// (a Unix system).
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	tb.Skip("the process's CPU time needs getrusage (a Unix system)")
	return 0
}

// childUsage skips the test: a child's resource usage is read from its
// rusage (a Unix system).
func childUsage(tb testing.TB, _ *os.ProcessState) (time.Duration, int64) {
	tb.Helper()
	tb.Skip("a child's CPU time and memory need its rusage (a Unix system)")
	return 0, 0
}
