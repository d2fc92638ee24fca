//go:build unix

package redistest

import (
	"os"
	"syscall"
	"testing"
)

func pause(_ testing.TB, p *os.Process) { p.Signal(syscall.SIGSTOP) }

func resume(p *os.Process) { p.Signal(syscall.SIGCONT) }
