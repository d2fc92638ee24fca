package chaos

import (
	"bytes"
	"runtime"
	"strings"
	"time"
)

// Goroutines is a snapshot of the running goroutines, for leak checks of
// tests that cannot run in a testing/synctest bubble (real loopback I/O).
type Goroutines map[string]bool

// SnapshotGoroutines returns the goroutines running now, by id.
func SnapshotGoroutines() Goroutines {
	g := Goroutines{}
	for _, st := range stacks() {
		g[goid(st)] = true
	}
	return g
}

// Leaked returns the stacks of goroutines running now that were not in the
// snapshot, waiting up to grace for goroutines that are on their way out
// (closed connections are noticed asynchronously). An empty result means no
// leak.
func (g Goroutines) Leaked(grace time.Duration) []string {
	deadline := time.Now().Add(grace)
	for {
		var leaked []string
		for _, st := range stacks() {
			if !g[goid(st)] && !ignorable(st) {
				leaked = append(leaked, st)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(5 * time.Millisecond) // let exiting goroutines finish
	}
}

func stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, st := range bytes.Split(buf, []byte("\n\n")) {
		if s := strings.TrimSpace(string(st)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// goid returns the "goroutine N" prefix of a stack.
func goid(st string) string {
	if i := strings.Index(st, " ["); i > 0 {
		return st[:i]
	}
	return st
}

// ignorable reports the goroutine calling Leaked itself. Everything else
// that was running before the snapshot is excluded by id, so run leak-checked
// tests without t.Parallel.
func ignorable(st string) bool {
	return strings.Contains(st, "chaos.stacks(")
}
