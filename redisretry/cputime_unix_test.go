//go:build unix

package redisretry

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time this process has used (user and system).
func cpuTime(testing.TB) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
