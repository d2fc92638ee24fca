//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proc

import (
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Process is one running attempt. In its own process group (the default),
// every signal retry sends goes to the whole group, so a shell's children
// and grandchildren are stopped with it; in the terminal's process group
// (--foreground) only the command itself is signalled, as timeout
// --foreground does.
type Process struct {
	cmd   *exec.Cmd
	group bool // the command is in a process group of its own
	// pgid is that group when the command joined one made for it (see
	// GroupHolder); 0 when the command leads it.
	pgid int
}

// id returns the attempt's process group.
func (p *Process) id() int {
	if p.pgid != 0 {
		return p.pgid
	}
	return p.cmd.Process.Pid
}

// Prepare sets up cmd to start in a process group of its own (group), or
// not: a new one it leads (pgid 0), or the one pgid (see GroupHolder).
// Where the system can, the command is killed if retry dies (kill -9).
func Prepare(cmd *exec.Cmd, group bool, pgid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group, Pgid: pgid}
	setDeathSignal(cmd.SysProcAttr)
}

// JobSignals are the job-control signals retry passes on to the attempt:
// Ctrl-Z (SIGTSTP) suspends it, then retry; SIGCONT (fg, bg) resumes it. In
// a process group of its own, the attempt would get neither.
var JobSignals = []os.Signal{syscall.SIGTSTP, syscall.SIGCONT}

// Suspend stops the attempt: SIGTSTP to its group, or to the command.
func (p *Process) Suspend() { p.send(syscall.SIGTSTP) }

// Resume continues a suspended attempt.
func (p *Process) Resume() { p.send(syscall.SIGCONT) }

// send sends s to the attempt's group, or to the command, and nothing else
// (signal also sends SIGCONT).
func (p *Process) send(s syscall.Signal) {
	if p.group {
		_ = syscall.Kill(-p.id(), s)
		return
	}
	_ = p.cmd.Process.Signal(s)
}

// KilledBySIGKILL reports whether the command, which ended with err
// (cmd.Wait's), was killed by SIGKILL; known is false if its status does
// not say.
func KilledBySIGKILL(err error) (killed, known bool) {
	if err == nil {
		return false, true
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false, false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok {
		return false, false
	}
	return ws.Signaled() && ws.Signal() == syscall.SIGKILL, true
}

// IsSuspend reports whether s is Ctrl-Z's SIGTSTP.
func IsSuspend(s os.Signal) bool { return s == syscall.SIGTSTP }

// IsTTYStop reports whether s stops a process that uses the terminal from
// a background process group (SIGTTIN, SIGTTOU).
func IsTTYStop(s syscall.Signal) bool { return s == syscall.SIGTTIN || s == syscall.SIGTTOU }

// StopSelf stops retry, as SIGTSTP's default action would have.
func StopSelf() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGSTOP) }

// Signal sends s to the attempt: to its process group, or to the command.
// To a group it then sends SIGCONT, as timeout(1) does, so that a stopped
// process (Ctrl-Z, SIGSTOP) gets the signal now rather than when someone
// resumes it: without it a stopped attempt held retry forever with
// --kill-after 0.
func (p *Process) Signal(s syscall.Signal) {
	if p.group {
		_ = syscall.Kill(-p.id(), s)
		if s != syscall.SIGKILL && s != syscall.SIGCONT {
			_ = syscall.Kill(-p.id(), syscall.SIGCONT)
		}
		return
	}
	_ = p.cmd.Process.Signal(s)
}

// groupLeft reports whether a process of the attempt's group is still
// there, after reaping those of its members that retry has inherited (see
// BecomeSubreaper). Call it only once the command itself has been waited for.
func (p *Process) groupLeft() bool {
	if !p.group {
		return false
	}
	pgid := p.id()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
	}
	return syscall.Kill(-pgid, 0) == nil
}

// CleanGroup waits, after the command was stopped (timeout, deadline,
// interrupt) and has exited, for the rest of its process group to exit,
// and sends SIGKILL to what is left at killAt (at once if killAt has
// passed). It returns whether it had to. It gives up waiting a second after
// the SIGKILL (a process in uninterruptible sleep cannot be hurried).
func (p *Process) CleanGroup(killAt time.Time) (killed bool) {
	if !p.group {
		return false
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var giveUp time.Time
	for p.groupLeft() {
		now := time.Now()
		switch {
		case !giveUp.IsZero() && now.After(giveUp):
			return killed
		case giveUp.IsZero() && !now.Before(killAt):
			p.Signal(syscall.SIGKILL)
			killed, giveUp = true, now.Add(time.Second)
		}
		<-tick.C
	}
	return killed
}

// TerminalForeground reports whether retry's process group is the
// foreground process group of its controlling terminal (whatever stdin is):
// then the terminal's Ctrl-C (SIGINT), Ctrl-\ (SIGQUIT), Ctrl-Z and hangup
// reach a command run with --foreground directly, and retry must not
// forward them again.
func TerminalForeground() bool {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false // no controlling terminal
	}
	defer tty.Close()
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, tty.Fd(), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
	return errno == 0 && int(pgrp) == syscall.Getpgrp()
}

// ForwardedSignals are the signals retry relays to the running attempt.
var ForwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// IgnoredByShell reports whether s, ignored when retry started, was
// ignored by a shell for a background job rather than by the user: a
// non-interactive shell starts "cmd &" with SIGINT and SIGQUIT ignored
// (POSIX), so that the terminal's Ctrl-C does not reach it. retry catches
// those anyway, as timeout(1) does, so that "kill -INT" of a background
// retry, and with --foreground an INT sent to the job's process group,
// reach the command, which starts with them at their default. A SIGHUP or
// SIGTERM ignored at start (nohup) is the user's choice and stays ignored,
// for retry and the command.
func IgnoredByShell(s os.Signal) bool { return s == syscall.SIGINT || s == syscall.SIGQUIT }

// AlarmSignal is SIGALRM, which timeout(1) takes for its own timer: sent
// to retry, it ends the running attempt as if its --attempt-timeout had
// come.
var AlarmSignal os.Signal = syscall.SIGALRM

// ExitBySignal ends retry by s with the signal's default action (see
// ExitProcess), after a second to let another thread take it. It returns
// only where it cannot: SIGQUIT where its default cannot be restored (Go's
// own handler would print a stack trace and exit 2), or where the core
// dump that its default action makes cannot be turned off.
func ExitBySignal(s syscall.Signal) {
	signal.Reset(s) // no longer to a channel
	if s == syscall.SIGQUIT && !noCoreDump() {
		return
	}
	// Elsewhere than SIGQUIT, Go's own handler ends the process by the
	// signal (INT, TERM, HUP) once nothing is notified of it.
	if !defaultAction(s) && s == syscall.SIGQUIT {
		return
	}
	raise(s)
	time.Sleep(time.Second)
}

// Shell runs an executable file that the kernel cannot (ENOEXEC: a script
// without "#!"), as execvp does.
const Shell = "/bin/sh"

// ClosedPipe reports whether w is a file nobody reads any more: a pipe or
// socket whose reading end is closed, a terminal that hung up.
func ClosedPipe(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, 0)
		closed = err == nil && n == 1 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
	})
	return closed
}

// FromTerminal reports whether a terminal sends s to its foreground group.
func FromTerminal(s os.Signal) bool {
	return s == syscall.SIGINT || s == syscall.SIGHUP || s == syscall.SIGQUIT
}

// signalByName returns the signal of the platform called name (upper
// case, without "SIG"): every name kill -l lists, as timeout -s takes them.
func signalByName(name string) (syscall.Signal, bool) {
	if s := unix.SignalNum("SIG" + name); s != 0 {
		return s, true
	}
	if s, ok := signalAliases[name]; ok {
		return s, true
	}
	return rtSignalByName(name)
}

// validSignal reports whether n is a signal number of the platform.
func validSignal(n int) bool {
	return n > 0 && (unix.SignalName(syscall.Signal(n)) != "" || (n >= sigRTMin && n <= sigRTMax))
}

// platformSignalName returns the name of s without "SIG" (TERM,
// RTMIN+2), or "" if s has none.
func platformSignalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return strings.TrimPrefix(name, "SIG")
	}
	n := int(s)
	switch {
	case n < sigRTMin || n > sigRTMax:
		return ""
	case n == sigRTMin:
		return "RTMIN"
	case n == sigRTMax:
		return "RTMAX"
	case n <= (sigRTMin+sigRTMax)/2: // as kill -l splits them
		return "RTMIN+" + strconv.Itoa(n-sigRTMin)
	}
	return "RTMAX-" + strconv.Itoa(sigRTMax-n)
}

// rtSignalByName parses RTMIN, RTMAX, RTMIN+N and RTMAX-N.
func rtSignalByName(name string) (syscall.Signal, bool) {
	if sigRTMin > sigRTMax {
		return 0, false
	}
	base, sign, off := name, 1, "0"
	if b, o, ok := strings.Cut(name, "+"); ok {
		base, off = b, o
	} else if b, o, ok := strings.Cut(name, "-"); ok {
		base, sign, off = b, -1, o
	}
	if off == "" || strings.Trim(off, "0123456789") != "" {
		return 0, false
	}
	k, err := strconv.Atoi(off)
	if err != nil {
		return 0, false
	}
	var n int
	switch {
	case base == "RTMIN" && sign > 0:
		n = sigRTMin + k
	case base == "RTMAX" && (sign < 0 || k == 0):
		n = sigRTMax - k
	default:
		return 0, false
	}
	if n < sigRTMin || n > sigRTMax {
		return 0, false
	}
	return syscall.Signal(n), true
}
