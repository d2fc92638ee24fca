//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proc

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The watchdog ends the running attempt's process group when retry dies
// without a word (kill -9, a crash): the command and what it started in its
// group would run on, orphaned. (The kernel's parent-death signal, on
// Linux, reaches the command alone.) It is a second retry process, in a
// process group of its own so that no signal meant for retry's job reaches
// it, which reads the number of the running attempt's group from a pipe.
// Only retry holds the pipe's writing end (close-on-exec keeps it from the
// commands): when retry dies, however, the watchdog reads the pipe's end and
// kills the last group it was told of with SIGKILL. retry tells it 0 once an
// attempt is over and its group dealt with, so that what a finished
// attempt left running (a daemon it started) is left alone, as timeout(1)
// leaves it, and the watchdog exits with retry.
//
// The watchdog learns the attempt's group before the command exists: a
// GroupHolder makes the group, the watchdog is told of it, then the
// command starts in it. (Told the command's own group once it had
// started, the watchdog missed what the command started in the moment
// before: 1 run in 17 of a test that kills retry at once, under load.)

// WatchdogEnv, set to 1 in the watchdog's environment, makes the retry
// binary the watchdog (see IsWatchdog).
const watchdogEnv = "RETRY_INTERNAL_WATCHDOG"

// WatchdogFD is the watchdog's file descriptor of the pipe.
const watchdogFD = 3

// holderEnv, set to 1 in a group holder's environment, makes the retry
// binary a group holder (see GroupHolder).
const holderEnv = "RETRY_INTERNAL_GROUP_HOLDER"

// Watchdog is retry's end of the watchdog's pipe. A nil *watchdog (none
// could be started) does nothing.
type Watchdog struct {
	mu     sync.Mutex
	w      *os.File
	exited <-chan struct{} // closed once the watchdog has exited and been reaped
}

// StartWatchdog starts the watchdog, with /dev/null for its stdin, stdout
// and stderr: it holds none of retry's pipes open. It returns nil if the
// Watchdog cannot be started (retry then runs without it).
func StartWatchdog() *Watchdog {
	exe, err := selfExecutable()
	if err != nil {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	cmd := exec.Command(exe)
	cmd.Args = []string{"retry (watchdog)"}
	cmd.Env = append(os.Environ(), watchdogEnv+"=1")
	cmd.ExtraFiles = []*os.File{r} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait() // (or retry's reaper reaps it first: see children)
		close(exited)
	}()
	return &Watchdog{w: w, exited: exited}
}

// Watch tells the watchdog the process group of the attempt just started.
func (d *Watchdog) Watch(pgid int) { d.send(pgid) }

// Forget tells the watchdog that no attempt's group is to be killed.
func (d *Watchdog) Forget() { d.send(0) }

func (d *Watchdog) send(pgid int) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, _ = d.w.WriteString(strconv.Itoa(pgid) + "\n") // a Watchdog killed meanwhile: EPIPE, nothing to do
}

// Close ends the watchdog (it reads the pipe's end with no group to kill)
// and waits a second at most for it to exit: reaped by retry, it leaves no
// zombie to an init that does not reap orphans (a container's).
func (d *Watchdog) Close() {
	if d == nil {
		return
	}
	d.Forget()
	d.w.Close()
	select {
	case <-d.exited:
	case <-time.After(time.Second):
	}
}

// IsWatchdog reports whether this process was started as the watchdog:
// WatchdogEnv is 1 and watchdogFD is a pipe.
func IsWatchdog() bool {
	if os.Getenv(watchdogEnv) != "1" {
		return false
	}
	var st syscall.Stat_t
	return syscall.Fstat(watchdogFD, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// WatchdogMain is the watchdog: it reads process groups from its pipe
// until retry is gone, then kills the last one with SIGKILL. The signals a
// terminal, a shell or a supervisor send to retry's job are ignored.
func WatchdogMain() int {
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGTSTP,
		syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGALRM, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	sc := bufio.NewScanner(os.NewFile(watchdogFD, "retry-watchdog"))
	pgid := 0
	for sc.Scan() {
		n, err := strconv.Atoi(sc.Text())
		if err == nil && n >= 0 {
			pgid = n
		}
	}
	if pgid > 1 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}

// GroupHolder is a process that makes an attempt's process group before
// the attempt exists: the retry binary again, leading a group of its own,
// that waits for its stdin to end. The command joins the group; release
// then kills the holder (SIGKILL: a holder that a signal to the group
// stopped, a SIGTTIN when the command read the terminal, dies all the
// same). Its group outlives it as long as the command or what it started
// is in it. If retry dies first, the holder reads its stdin's end (or gets
// the parent-death signal) and exits.
type GroupHolder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// NewGroupHolder starts a group holder.
func NewGroupHolder() (*GroupHolder, error) {
	exe, err := selfExecutable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Args = []string{"retry (group holder)"}
	cmd.Env = append(os.Environ(), holderEnv+"=1")
	Prepare(cmd, true, 0)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &GroupHolder{cmd: cmd, stdin: stdin}, nil
}

// Pgid is the group the holder leads.
func (h *GroupHolder) Pgid() int { return h.cmd.Process.Pid }

// Release kills the holder and waits for it (or for retry's reaper to
// have reaped it).
func (h *GroupHolder) Release() {
	h.cmd.Process.Kill()
	h.stdin.Close()
	h.cmd.Wait()
}

// IsGroupHolder reports whether this process was started as a group
// holder.
func IsGroupHolder() bool { return os.Getenv(holderEnv) == "1" }

// GroupHolderMain is a group holder: it waits for its stdin to end.
func GroupHolderMain() int {
	io.Copy(io.Discard, os.Stdin)
	return 0
}
