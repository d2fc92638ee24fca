//go:build unix

package testkit

import (
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// CPUTime returns the CPU time this process has used (user and system).
// Elsewhere than on a Unix system it skips tb: it reads getrusage.
func CPUTime(testing.TB) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ChildUsage returns the CPU time (user and system) and the peak resident
// memory (bytes) of the ended child process ps. Elsewhere than on a Unix
// system it skips tb: it reads the child's rusage.
func ChildUsage(tb testing.TB, ps *os.ProcessState) (cpu time.Duration, maxRSS int64) {
	tb.Helper()
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		tb.Fatalf("no rusage for process %d", ps.Pid())
	}
	maxRSS = int64(ru.Maxrss) * 1024 // KiB on Linux and the BSDs
	if runtime.GOOS == "darwin" {
		maxRSS = int64(ru.Maxrss) // bytes
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), maxRSS
}
