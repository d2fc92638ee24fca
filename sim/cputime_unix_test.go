//go:build unix

package sim

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time this process has used, user and system,
// the garbage collector's included; ok is false where it is not known.
func processCPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
