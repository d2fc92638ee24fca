//go:build !unix

package redisretry

import (
	"testing"
	"time"
)

// cpuTime skips the benchmark: the process's CPU time is read with getrusage
// (a Unix system).
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	tb.Skip("the process's CPU time needs getrusage (a Unix system)")
	return 0
}
