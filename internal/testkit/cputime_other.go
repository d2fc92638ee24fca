//go:build !unix

package testkit

import (
	"os"
	"testing"
	"time"
)

// CPUTime skips tb: the process's CPU time is read with getrusage (a Unix
// system).
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	tb.Skip("the process's CPU time needs getrusage (a Unix system)")
	return 0
}

// ChildUsage skips tb: a child's CPU time and memory are read from its
// rusage (a Unix system).
func ChildUsage(tb testing.TB, _ *os.ProcessState) (time.Duration, int64) {
	tb.Helper()
	tb.Skip("a child's CPU time and memory need its rusage (a Unix system)")
	return 0, 0
}
