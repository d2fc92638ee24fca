//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package proc

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is one running attempt. Without process groups, only the
// command itself can be signalled.
type Process struct {
	cmd   *exec.Cmd
	group bool
	pgid  int
}

func Prepare(cmd *exec.Cmd, group bool, pgid int) {}

// Signal sends s to the command; where signals other than SIGKILL cannot be
// sent (Windows), the command is killed.
func (p *Process) Signal(s syscall.Signal) {
	if s == 0 {
		return // --signal 0: none
	}
	if err := p.cmd.Process.Signal(s); err != nil {
		_ = p.cmd.Process.Kill()
	}
}

func (p *Process) CleanGroup(time.Time) bool { return false }

// KilledBySIGKILL: an exit status says nothing of signals here.
func KilledBySIGKILL(error) (killed, known bool) { return false, false }

// No job control here.
var JobSignals []os.Signal

func (p *Process) Suspend()                          {}
func (p *Process) Resume()                           {}
func StopSelf()                                      {}
func IsSuspend(os.Signal) bool                       { return false }
func CanStop() bool                                  { return false }
func IsTTYStop(syscall.Signal) bool                  { return false }
func NotifyChildStops() (<-chan os.Signal, func())   { return nil, func() {} }
func (p *Process) StoppedBy() (syscall.Signal, bool) { return 0, false }
func (p *Process) Exited() bool                      { return false }

func TerminalForeground() bool { return false }

// Shell: none here (no fallback for ENOEXEC).
const Shell = ""

func ClosedPipe(io.Writer) bool { return false }

var ForwardedSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

func IgnoredByShell(os.Signal) bool { return false }

// AlarmSignal: none here.
var AlarmSignal os.Signal

// ExitBySignal: a process cannot end by a signal here; retry exits with
// 128+N.
func ExitBySignal(syscall.Signal) {}

func FromTerminal(s os.Signal) bool { return s == os.Interrupt }

// signalNames are the signals that can be sent here.
var signalNames = map[string]syscall.Signal{"INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM}

func signalByName(name string) (syscall.Signal, bool) {
	s, ok := signalNames[name]
	return s, ok
}

func validSignal(n int) bool { return platformSignalName(syscall.Signal(n)) != "" }

func platformSignalName(s syscall.Signal) string {
	for name, v := range signalNames {
		if v == s {
			return name
		}
	}
	return ""
}
