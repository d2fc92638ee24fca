package proc

import (
	"bytes"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER, <linux/prctl.h>

// BecomeSubreaper makes retry the reaper of the orphaned descendants of its
// commands (a shell killed on a timeout leaves its children to their
// grandparent, not to init), so that retry can reap them and tell when an
// attempt's process group is gone, even where init does not reap orphans.
// It reports whether retry is one now.
func BecomeSubreaper() bool {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	return errno == 0
}

// WatchChildren reaps c's orphans on every SIGCHLD until stop is called.
func WatchChildren(c *Children) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-sigs:
				c.reapOrphans()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-ended
	}
}

// siginfo is the start of the kernel's siginfo_t, as waitid fills it.
type siginfo struct {
	signo, errno, code int32
	_                  [unsafe.Sizeof(uintptr(0)) - 4]byte // the union is pointer-aligned
	pid, uid, status   int32
	_                  [128 - 12 - (unsafe.Sizeof(uintptr(0)) - 4) - 12]byte
}

const (
	pAll       = 0          // P_ALL
	pPID       = 1          // P_PID
	wNoWait    = 0x01000000 // WNOWAIT
	cldStopped = 5          // CLD_STOPPED, siginfo's code for a child stopped by a signal
)

// CanStop reports whether Ctrl-Z may stop retry: whether its process group
// is not orphaned, that is, a member's parent is in another group of the
// same session (the shell, which will continue it). In an orphaned group
// (under setsid, a service manager) the kernel ignores SIGTSTP, since
// nothing would ever continue it; retry does too. Its members are found in
// /proc; if /proc cannot be read, retry may stop.
func CanStop() bool {
	me, sid := syscall.Getpgrp(), getsid(0)
	entries, err := os.ReadDir("/proc")
	if err != nil || sid < 0 {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, pgrp, _, ok := procStat(pid)
		if !ok || pgrp != me {
			continue
		}
		if _, ppgrp, psid, ok := procStat(ppid); ok && ppgrp != me && psid == sid {
			return true
		}
	}
	return false
}

// getsid returns the session of pid (0 for retry), -1 if unknown.
func getsid(pid int) int {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if errno != 0 {
		return -1
	}
	return int(sid)
}

// procStat reads the parent, process group and session of pid from
// /proc/PID/stat.
func procStat(pid int) (ppid, pgrp, sid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')') // comm may hold spaces and parentheses
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(b[i+1:])) // state ppid pgrp session ...
	if len(f) < 4 {
		return 0, 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	sid, err3 := strconv.Atoi(f[3])
	return ppid, pgrp, sid, err1 == nil && err2 == nil && err3 == nil
}

// setDeathSignal has the command killed if retry dies (kill -9 retry): it
// would run on, orphaned, in its own process group.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// NotifyChildStops relays SIGCHLD, which also comes when a child stops.
func NotifyChildStops() (<-chan os.Signal, func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGCHLD)
	return c, func() { signal.Stop(c) }
}

// StoppedBy reports whether the command is stopped, and by which signal
// (SIGTTIN: it read the terminal from a background process group). It
// consumes the stop's report (cmd.Wait ignores stops).
func (p *Process) StoppedBy() (syscall.Signal, bool) {
	var info siginfo
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(p.cmd.Process.Pid), uintptr(unsafe.Pointer(&info)), syscall.WSTOPPED|syscall.WNOHANG, 0, 0)
	if errno != 0 || info.pid == 0 || info.code != cldStopped {
		return 0, false
	}
	return syscall.Signal(info.status), true
}

// Exited reports whether the command has ended and not been waited for
// yet (waitid with WNOWAIT: its Wait still gets its status).
func (p *Process) Exited() bool {
	var info siginfo
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(p.cmd.Process.Pid), uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOHANG|wNoWait, 0, 0)
	return errno == 0 && info.pid != 0
}

// reapZombies reaps the zombie children of retry, until it meets one for
// which keep reports true (an attempt, left to its own Wait, which reaps
// it and calls reapZombies again) or none is left. waitid(WNOWAIT) shows a
// zombie without reaping it; wait4 then reaps only that one.
func reapZombies(keep func(pid int) bool) {
	for {
		var info siginfo
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOHANG|wNoWait, 0, 0)
		if errno != 0 || info.pid == 0 || keep(int(info.pid)) {
			return // no child, none exited, or an attempt
		}
		var ws syscall.WaitStatus
		if pid, err := syscall.Wait4(int(info.pid), &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
			return
		}
	}
}

// sigRTMin and sigRTMax are the real-time signals as C programs and kill -l
// number them (glibc keeps 32 and 33 for itself).
const sigRTMin, sigRTMax = 34, 64

// signalAliases are the other names Linux's signals have.
var signalAliases = map[string]syscall.Signal{"IOT": syscall.SIGABRT, "CLD": syscall.SIGCHLD, "POLL": syscall.SIGIO}

// defaultAction sets the action of s to its default (SIG_DFL) in the
// kernel, under Go's runtime, and reports whether it could.
func defaultAction(s syscall.Signal) bool {
	var act [64]byte                        // a zero struct sigaction: SIG_DFL, no flags, no mask, whatever the architecture's layout
	for _, size := range []uintptr{8, 16} { // the kernel's sigset_t: 8 bytes, 16 on MIPS
		_, _, errno := syscall.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(s), uintptr(unsafe.Pointer(&act)), 0, size, 0, 0)
		if errno == 0 {
			return true
		}
		if errno != syscall.EINVAL {
			return false
		}
	}
	return false
}

// noCoreDump keeps retry from dumping core when it ends by a signal whose
// default action does (SIGQUIT), as timeout(1) does; it reports whether it
// could.
func noCoreDump() bool { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) == nil }

// raise sends s to the calling thread, which takes it before tgkill
// returns.
func raise(s syscall.Signal) {
	runtime.LockOSThread()
	_ = unix.Tgkill(unix.Getpid(), unix.Gettid(), s)
	_ = unix.Kill(unix.Getpid(), s)
}

// selfExecutable is the path that runs retry's binary again: the kernel's
// link to it, which holds even if the file was replaced or removed.
func selfExecutable() (string, error) { return "/proc/self/exe", nil }
