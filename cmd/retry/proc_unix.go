//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"os"
	"os/exec"
	"syscall"
	"time"
	"unsafe"
)

// process is one running attempt. In its own process group (the default),
// every signal retry sends goes to the whole group, so a shell's children
// and grandchildren are stopped with it; in the terminal's process group
// (--foreground) only the command itself is signalled, as timeout
// --foreground does.
type process struct {
	cmd   *exec.Cmd
	group bool // the command leads its own process group
}

// prepare sets up cmd to start in its own process group, or not.
func prepare(cmd *exec.Cmd, group bool) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
}

// signal sends s to the attempt: to its process group, or to the command.
func (p *process) signal(s syscall.Signal) {
	if p.group {
		_ = syscall.Kill(-p.cmd.Process.Pid, s)
		return
	}
	_ = p.cmd.Process.Signal(s)
}

// groupLeft reports whether a process of the attempt's group is still
// there, after reaping those of its members that retry has inherited (see
// becomeSubreaper). Call it only once the command itself has been waited for.
func (p *process) groupLeft() bool {
	if !p.group {
		return false
	}
	pgid := p.cmd.Process.Pid
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
	}
	return syscall.Kill(-pgid, 0) == nil
}

// cleanGroup waits, after the command was stopped (timeout, deadline,
// interrupt) and has exited, for the rest of its process group to exit,
// and sends SIGKILL to what is left at killAt (at once if killAt has
// passed). It returns whether it had to. It gives up waiting a second after
// the SIGKILL (a process in uninterruptible sleep cannot be hurried).
func (p *process) cleanGroup(killAt time.Time) (killed bool) {
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
			p.signal(syscall.SIGKILL)
			killed, giveUp = true, now.Add(time.Second)
		}
		<-tick.C
	}
	return killed
}

// terminalForeground reports whether retry's process group is the
// foreground process group of the terminal on stdin: then the terminal's
// Ctrl-C (SIGINT), Ctrl-\ (SIGQUIT) and hangup (SIGHUP) reach a command run
// with --foreground directly, and retry must not forward them again.
func terminalForeground() bool {
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, os.Stdin.Fd(), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
	return errno == 0 && int(pgrp) == syscall.Getpgrp()
}

// forwardedSignals are the signals retry relays to the running attempt.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// fromTerminal reports whether a terminal sends s to its foreground group.
func fromTerminal(s os.Signal) bool {
	return s == syscall.SIGINT || s == syscall.SIGHUP || s == syscall.SIGQUIT
}

// signalNames are the names --signal accepts (with or without "SIG").
var signalNames = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "ABRT": syscall.SIGABRT,
	"KILL": syscall.SIGKILL, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "PIPE": syscall.SIGPIPE,
	"ALRM": syscall.SIGALRM, "TERM": syscall.SIGTERM,
}
