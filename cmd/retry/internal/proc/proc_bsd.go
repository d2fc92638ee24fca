//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package proc

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// CanStop: Ctrl-Z stops retry here (the orphaned-group check reads Linux's
// /proc).
func CanStop() bool { return true }

// setDeathSignal: no parent-death signal here.
func setDeathSignal(*syscall.SysProcAttr) {}

// NotifyChildStops: stops are not watched here (see proc_linux.go).
func NotifyChildStops() (<-chan os.Signal, func()) { return nil, func() {} }

func (p *Process) StoppedBy() (syscall.Signal, bool) { return 0, false }

// Exited: not known here before Wait.
func (p *Process) Exited() bool { return false }

// No real-time signal names here (sigRTMin > sigRTMax).
const sigRTMin, sigRTMax = 1, 0

// signalAliases are the other names the signals have.
var signalAliases = map[string]syscall.Signal{"IOT": syscall.SIGABRT}

// defaultAction: the kernel's action cannot be set under Go's runtime here.
func defaultAction(syscall.Signal) bool { return false }

// noCoreDump keeps retry from dumping core when it ends by a signal.
func noCoreDump() bool { return unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}) == nil }

// raise sends s to retry.
func raise(s syscall.Signal) { _ = syscall.Kill(syscall.Getpid(), s) }

// selfExecutable is the path of retry's binary.
func selfExecutable() (string, error) { return os.Executable() }
