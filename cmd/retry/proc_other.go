//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is one running attempt. Without process groups, only the
// command itself can be signalled.
type process struct {
	cmd   *exec.Cmd
	group bool
	pgid  int
}

func prepare(cmd *exec.Cmd, group bool, pgid int) {}

// signal sends s to the command; where signals other than SIGKILL cannot be
// sent (Windows), the command is killed.
func (p *process) signal(s syscall.Signal) {
	if s == 0 {
		return // --signal 0: none
	}
	if err := p.cmd.Process.Signal(s); err != nil {
		_ = p.cmd.Process.Kill()
	}
}

func (p *process) cleanGroup(time.Time) bool { return false }

// killedBySIGKILL: an exit status says nothing of signals here.
func killedBySIGKILL(error) (killed, known bool) { return false, false }

// No job control here.
var jobSignals []os.Signal

func (p *process) suspend()                          {}
func (p *process) resume()                           {}
func stopSelf()                                      {}
func isSuspend(os.Signal) bool                       { return false }
func canStop() bool                                  { return false }
func isTTYStop(syscall.Signal) bool                  { return false }
func notifyChildStops() (<-chan os.Signal, func())   { return nil, func() {} }
func (p *process) stoppedBy() (syscall.Signal, bool) { return 0, false }
func (p *process) exited() bool                      { return false }

func terminalForeground() bool { return false }

// shell: none here (no fallback for ENOEXEC).
const shell = ""

func closedPipe(io.Writer) bool { return false }

var forwardedSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

func ignoredByShell(os.Signal) bool { return false }

// alarmSignal: none here.
var alarmSignal os.Signal

// exitBySignal: a process cannot end by a signal here; retry exits with
// 128+N.
func exitBySignal(syscall.Signal) {}

func fromTerminal(s os.Signal) bool { return s == os.Interrupt }

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
