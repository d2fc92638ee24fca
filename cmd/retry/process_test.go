//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// These tests run real processes under the retry binary and check the
// process table afterwards. They wait for events (a child's "ready" line, a
// pid file written before the attempt can time out, retry's exit), never for
// time; the timeouts below only bound a hang.

// alive reports whether pid is a live process (a zombie is dead: it only
// waits to be reaped).
func alive(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...; comm may hold spaces and parentheses.
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	f := strings.Fields(rest)
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// readPID reads the pid a script wrote to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the script wrote no pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestTimeoutStopsTheWholeProcessGroup: a timed-out attempt's grandchildren
// are stopped with it, whether they die of --signal or must be killed with
// SIGKILL after --kill-after; nothing is left running when retry exits.
func TestTimeoutStopsTheWholeProcessGroup(t *testing.T) {
	// --kill-after is what the processes that die of SIGTERM have to be
	// gone (a loaded machine took more than 200ms to run a dying sleep):
	// 5s when none should need SIGKILL, where retry is done as soon as they
	// are gone; 1s for the shell that dies of it beside the grandchild that
	// ignores it.
	for _, tc := range []struct {
		name, grandchild string
		killAfter        string
		code             int
		log              string
	}{
		{"grandchild dies of SIGTERM", `sleep 30`, "5s", cli.ExitTimeout, "timed out after 1s (--attempt-timeout); giving up"},
		// The command (sh) ends on SIGTERM, the grandchild needs SIGKILL:
		// still 124 as timeout's (which would leave it running), not 137.
		{"grandchild ignores SIGTERM", `(trap "" TERM; exec sleep 30)`, "1s", cli.ExitTimeout, "a process it started was still running 1s after SIGTERM: killed with SIGKILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			// The pid is written long before the 1s timeout (a shell starts in
			// milliseconds); the attempt's end is retry's, not ours.
			r := runRetry(t, "", []string{"PIDF=" + pidFile}, "--attempts", "1", "--attempt-timeout", "1s", "--kill-after", tc.killAfter,
				"--", "sh", "-c", tc.grandchild+` & echo $! > "$PIDF"; wait`)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if pid := readPID(t, pidFile); alive(t, pid) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("the grandchild %d still runs after retry exited (orphaned)", pid)
			}
			if !strings.Contains(r.stderr, tc.log) {
				t.Errorf("stderr lacks %q:\n%s", tc.log, r.stderr)
			}
		})
	}
}

// TestDeadlineIncludesTheGrace: a command that ignores SIGTERM is killed at
// the --deadline itself, not --kill-after later (it took deadline + 5 s).
// The bound is loose (the deadline plus half the grace), far below the old
// behaviour.
func TestDeadlineIncludesTheGrace(t *testing.T) {
	start := time.Now()
	r := runRetry(t, "", nil, "--deadline", "1s", "--kill-after", "5s", "--initial-delay", "10ms", "--jitter", "0",
		"--", "sh", "-c", `trap "" TERM; sleep 30`)
	took := time.Since(start)
	if r.code != 137 {
		t.Errorf("exit %d, want 137 (killed after the grace); stderr:\n%s", r.code, r.stderr)
	}
	if took > 3500*time.Millisecond {
		t.Errorf("retry --deadline 1s --kill-after 5s took %v: the grace must count inside the deadline", took)
	}
	if !strings.Contains(r.stderr, "stopped by the --deadline") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

// startRetry starts the retry binary with the test binary as the command
// (mode "signals"), and returns it with a reader of its stdout, after the
// child's "ready PID PGID" line.
type started struct {
	cmd        *exec.Cmd
	out        *bufio.Reader
	stderr     *lockedBuffer
	stderrC    chan string // retry's stderr, line by line
	pid, pgid  int
	stderrDone chan struct{}
	cancel     context.CancelFunc
	ctx        context.Context
	childLines []string
	status     error // cmd.Wait's, once wait returned
}

func startRetry(t *testing.T, env []string, attr *syscall.SysProcAttr, stdin *os.File, flags ...string) *started {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startRetryArgs(t, append(env, "RETRY_TEST_CHILD=signals"), attr, stdin, append(append(append([]string{}, flags...), "--"), self)...)
}

// startRetryArgs starts the retry binary with args, whose command's first
// line must be "ready PID PGID" (of the process to watch).
func startRetryArgs(t *testing.T, env []string, attr *syscall.SysProcAttr, stdin *os.File, args ...string) *started {
	t.Helper()
	return startProcess(t, bin, env, attr, stdin, args...)
}

// startProcess starts path with args, whose first line must be "ready PID
// PGID" (of the process to watch).
func startProcess(t *testing.T, path string, env []string, attr *syscall.SysProcAttr, stdin *os.File, args ...string) *started {
	t.Helper()
	return startProcessFiles(t, path, env, attr, stdin, nil, args...)
}

// startProcessFiles is startProcess with extra files for the process (fd 3
// and up).
func startProcessFiles(t *testing.T, path string, env []string, attr *syscall.SysProcAttr, stdin *os.File, extra []*os.File, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = attr
	cmd.ExtraFiles = extra
	if stdin != nil {
		cmd.Stdin = stdin
	}
	s := &started{cmd: cmd, stderr: &lockedBuffer{}, stderrC: make(chan string, 100), cancel: cancel, ctx: ctx}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			s.stderr.WriteString(sc.Text() + "\n")
			select {
			case s.stderrC <- sc.Text():
			default:
			}
		}
	}()
	s.stderrDone = stderrDone
	s.out = bufio.NewReader(out)
	line := s.line(t)
	if _, err := fmt.Sscanf(line, "ready %d %d", &s.pid, &s.pgid); err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	// A hang must fail the test, not block it: the child may hold the
	// pipes open after retry is gone.
	context.AfterFunc(ctx, func() {
		if ctx.Err() == context.DeadlineExceeded && alive(t, s.pid) {
			syscall.Kill(s.pid, syscall.SIGKILL)
		}
	})
	t.Cleanup(func() {
		if alive(t, s.pid) {
			syscall.Kill(s.pid, syscall.SIGKILL)
		}
	})
	return s
}

// line returns the child's next line (an event: it blocks until then).
func (s *started) line(t *testing.T) string {
	t.Helper()
	l, err := s.out.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's output: %v (after %q); stderr:\n%s", err, s.childLines, s.stderr)
	}
	s.childLines = append(s.childLines, strings.TrimSpace(l))
	return strings.TrimSpace(l)
}

// stderrLine waits for a line of retry's stderr containing sub (an event).
func (s *started) stderrLine(t *testing.T, sub string) {
	t.Helper()
	for {
		select {
		case l := <-s.stderrC:
			if strings.Contains(l, sub) {
				return
			}
		case <-s.ctx.Done():
			t.Fatalf("retry never wrote %q; stderr:\n%s", sub, s.stderr)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.WriteString(s)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// wait waits for retry to exit and returns its exit code and the rest of
// the child's output.
func (s *started) wait(t *testing.T) (int, string) {
	t.Helper()
	rest, _ := io.ReadAll(s.out)
	<-s.stderrDone // Wait closes the pipe: read it all first
	err := s.cmd.Wait()
	if s.ctx.Err() != nil {
		t.Fatalf("retry did not exit; child said %q%s; stderr:\n%s", s.childLines, rest, s.stderr)
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	s.status = err
	return shellStatus(err), string(rest)
}

// TestEachAttemptHasItsOwnProcessGroup: by default the command is in a
// process group of its own (made for it before it starts, see
// proc.GroupHolder: not retry's, and no other process of the test is in it);
// with --foreground it stays in retry's.
func TestEachAttemptHasItsOwnProcessGroup(t *testing.T) {
	s := startRetry(t, []string{"EXIT_ON=TERM"}, nil, nil, "--attempts", "1")
	if s.pgid == syscall.Getpgrp() || s.pgid == s.cmd.Process.Pid {
		t.Errorf("child %d is in process group %d, want one of its own (the test's is %d, retry is %d)", s.pid, s.pgid, syscall.Getpgrp(), s.cmd.Process.Pid)
	}
	// The holder (the group's leader, pid s.pgid) is killed once the
	// command is in the group, which may come after the command's first
	// line: wait for it to go.
	var members []int
	awaitState(s.ctx, t, func() string {
		return fmt.Sprintf("process group %d still holds %v, want the command %d alone (the holder gone)", s.pgid, members, s.pid)
	}, func() bool {
		members = groupMembers(t, s.pgid)
		for _, m := range members {
			if m != s.pid && m != s.pgid {
				t.Fatalf("process group %d holds %v: %d is neither the command %d nor the holder", s.pgid, members, m, s.pid)
			}
		}
		return slices.Equal(members, []int{s.pid})
	})
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := s.wait(t); code != 143 {
		t.Errorf("exit %d after SIGTERM, want 143", code)
	}

	s = startRetry(t, []string{"EXIT_ON=TERM"}, nil, nil, "--attempts", "1", "--foreground")
	if s.pgid != syscall.Getpgrp() {
		t.Errorf("--foreground: child %d is in process group %d, want retry's (%d)", s.pid, s.pgid, syscall.Getpgrp())
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code, rest := s.wait(t); code != 143 || !strings.Contains(rest, "sig TERM") {
		t.Errorf("--foreground: exit %d, child said %q; want 143 after the forwarded SIGTERM", code, rest)
	}
}

// TestSecondSignalKills: a command that ignores SIGINT (SIGTERM, SIGHUP)
// gets the first one (once), and the second kills it; retry exits 128+N
// without waiting for it. The line in between names the signal to send
// again, once.
func TestSecondSignalKills(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		code int
		want string // how the line says to kill it
	}{
		{syscall.SIGINT, "INT", 130, "send SIGINT (Ctrl-C) again to kill it"},
		{syscall.SIGTERM, "TERM", 143, "send SIGTERM again to kill it"},
		{syscall.SIGHUP, "HUP", 129, "send SIGHUP again to kill it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startRetry(t, nil, nil, nil, "--attempts", "3", "--kill-after", "0")
			s.cmd.Process.Signal(tc.sig)
			if l := s.line(t); l != "sig "+tc.name {
				t.Fatalf("child said %q, want the forwarded SIG%s", l, tc.name)
			}
			s.stderrLine(t, "SIG"+tc.name+": waiting for the command to end")
			s.cmd.Process.Signal(tc.sig)
			code, rest := s.wait(t)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			if strings.Contains(rest, "sig") || strings.Contains(rest, "ready") {
				t.Errorf("after the second SIG%s the child said %q (want it killed, and no new attempt)", tc.name, rest)
			}
			if alive(t, s.pid) {
				t.Errorf("the child %d still runs", s.pid)
			}
			said := lines(s.stderr.String(), "waiting for the command to end")
			if len(said) != 1 || !strings.HasSuffix(said[0], "; "+tc.want) {
				t.Errorf("want one line ending %q; stderr:\n%s", tc.want, s.stderr)
			}
		})
	}
}

// groupMembers returns the processes of group pgid that are not zombies,
// from /proc.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			out = append(out, pid)
		}
	}
	return out
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	ioctl := func(req uintptr, arg unsafe.Pointer) {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), req, uintptr(arg)); errno != 0 {
			m.Close()
			t.Skipf("pseudo-terminal ioctl %#x: %v", req, errno)
		}
	}
	var unlock int32
	ioctl(syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
	var n uint32
	ioctl(syscall.TIOCGPTN, unsafe.Pointer(&n))
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// TestCtrlCAtATerminal presses Ctrl-C on a real (pseudo-)terminal whose
// foreground process group is retry's, as in an interactive shell. The
// command must get one SIGINT per Ctrl-C (the terminal signals the
// foreground group; retry must not send it a second time), and the second
// Ctrl-C kills it: exit 130, nothing left running.
func TestCtrlCAtATerminal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"own process group", nil},
		{"--foreground", []string{"--foreground"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master, slave := openPTY(t)
			// A new session with the terminal as its controlling terminal:
			// retry's group is the terminal's foreground group.
			attr := &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			s := startRetry(t, nil, attr, slave, append([]string{"--attempts", "3", "--kill-after", "0"}, tc.flags...)...)
			if _, err := master.Write([]byte{3}); err != nil { // Ctrl-C
				t.Fatal(err)
			}
			if l := s.line(t); l != "sig INT" {
				t.Fatalf("child said %q after Ctrl-C, want sig INT", l)
			}
			// Two Ctrl-C at once would be one SIGINT (a pending signal is not
			// queued twice): press again once retry has taken the first.
			s.stderrLine(t, "send SIGINT (Ctrl-C) again to kill it")
			if _, err := master.Write([]byte{3}); err != nil {
				t.Fatal(err)
			}
			code, rest := s.wait(t)
			ints := 1 + strings.Count(rest, "sig INT")
			if code != 130 {
				t.Errorf("exit %d after two Ctrl-C, want 130; stderr:\n%s", code, s.stderr)
			}
			// One SIGINT per Ctrl-C at most: in its own group the command
			// gets only retry's (the second Ctrl-C kills it); with
			// --foreground only the terminal's.
			max := 1
			if len(tc.flags) > 0 {
				max = 2
			}
			if ints > max {
				t.Errorf("the command got %d SIGINTs for 2 Ctrl-C, want at most %d (double delivery)", ints, max)
			}
			if alive(t, s.pid) {
				t.Errorf("the child %d still runs", s.pid)
			}
		})
	}
}

// TestSignalAndKillAfter: --signal picks the signal a timed-out attempt
// gets (the command says which it got, and exits: 124, with --kill-after 0
// so that nothing races its answer); a command that ignores it is killed
// --kill-after later (exit 137, as timeout(1)). Whether that command had
// the time to say it got the signal before the SIGKILL is the scheduler's
// business (100ms under load): not asserted. The command installs its
// handlers before saying ready.
func TestSignalAndKillAfter(t *testing.T) {
	for _, tc := range []struct {
		flags  []string
		exitOn string
		code   int
		said   []string // what the command may say, one of
	}{
		{[]string{"--signal", "INT", "--kill-after", "0"}, "INT", cli.ExitTimeout, []string{"sig INT"}},
		{[]string{"--signal", "SIGHUP", "--kill-after", "0"}, "HUP", cli.ExitTimeout, []string{"sig HUP"}},
		{[]string{"--signal", "SIGHUP", "--kill-after", "100ms"}, "", 137, []string{"sig HUP", ""}},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			s := startRetry(t, []string{"EXIT_ON=" + tc.exitOn}, nil, nil, append([]string{"--attempts", "1", "--attempt-timeout", "1s"}, tc.flags...)...)
			code, rest := s.wait(t)
			if code != tc.code || !slices.Contains(tc.said, strings.TrimSpace(rest)) {
				t.Errorf("exit %d, child said %q; want %d and one of %q; stderr:\n%s", code, rest, tc.code, tc.said, s.stderr)
			}
		})
	}
}

// TestInterruptKillAfter: with --kill-after, a command that ignores the
// signal retry passed on gets that long to end, as with timeout -k, then
// SIGKILL: retry exits 128+N, says so, and starts no other attempt (it
// exited 0 once the command ended by itself). Within a --deadline, the
// deadline comes first. Without --kill-after nothing is killed: the
// command's own clean-up may take its time (a second signal kills).
func TestInterruptKillAfter(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--kill-after", "300ms"}, "still running 300ms after SIGTERM: killed with SIGKILL (--kill-after)"},
		// The deadline's own SIGTERM comes 1.5s in (for --kill-after,
		// at most half of it): a margin for the command to start before
		// the test's SIGTERM, which must come first. (With 1s, 0.5s: a
		// loaded machine started the test binary as the command later.)
		{[]string{"--kill-after", "1m", "--deadline", "3s"}, "after SIGTERM: killed with SIGKILL (--kill-after)"},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			s := startRetry(t, nil, nil, nil, append([]string{"--attempts", "3"}, tc.flags...)...)
			s.cmd.Process.Signal(syscall.SIGTERM)
			// The command says it got the SIGTERM, unless the kill came
			// first: 300ms, or a 1s --deadline counted from retry's start,
			// can pass on a loaded machine before the command answers (the
			// kill is what is promised, not the command's time to answer;
			// TestCommandSignalForwarded checks the forwarding).
			code, rest := s.wait(t)
			said := strings.TrimSpace(rest)
			if code != 143 || (said != "sig TERM" && said != "") || alive(t, s.pid) || !strings.Contains(s.stderr.String(), tc.want) {
				t.Errorf("exit %d, then the child said %q, alive %v; want 143, sig TERM, killed, and %q; stderr:\n%s", code, rest, alive(t, s.pid), tc.want, s.stderr)
			}
		})
	}
	// No --kill-after: the command ends by itself when it is done.
	s := startRetry(t, []string{"EXIT_ON=TERM"}, nil, nil, "--attempts", "3")
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code, rest := s.wait(t); code != 143 || strings.TrimSpace(rest) != "sig TERM" || strings.Contains(s.stderr.String(), "SIGKILL") {
		t.Errorf("exit %d, child said %q; want 143, the one SIGTERM, no SIGKILL; stderr:\n%s", code, rest, s.stderr)
	}
}

// TestSecondSignalDuringCleanup: once the command has ended on the first
// signal, a process it started that ignores it is given --kill-after; a
// second signal kills it at once, and retry exits (it waited out the whole
// grace: the attempt was no longer "running" for the relay).
func TestSecondSignalDuringCleanup(t *testing.T) {
	script := `(trap "" TERM; sh -c 'echo ready $$ 0; exec sleep 60') & wait`
	s := startRetryArgs(t, nil, nil, nil, "--attempts", "3", "--kill-after", "1m", "--", "sh", "-c", script)
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.stderrLine(t, "SIGTERM: waiting up to 1m0s (--kill-after)")
	s.cmd.Process.Signal(syscall.SIGTERM)
	code, _ := s.wait(t)
	if code != 143 || alive(t, s.pid) {
		t.Errorf("exit %d, the grandchild %d alive %v; want 143 and it killed; stderr:\n%s", code, s.pid, alive(t, s.pid), s.stderr)
	}
}

// TestTimeoutMessages: what the give-up line says of an attempt that retry
// stopped, and the exit status, as timeout(1)'s where it has one.
func TestTimeoutMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		// The last attempt is signalled --kill-after before the deadline.
		{"early", []string{"--deadline", "1s", "--kill-after", "300ms", "--", "sleep", "30"}, cli.ExitTimeout,
			"stopped by the --deadline (SIGTERM 300ms before it, for --kill-after)"},
		// SIGKILL keeps no grace: it comes at the deadline itself.
		{"kill", []string{"--deadline", "600ms", "--signal", "KILL", "--", "sleep", "30"}, 137,
			"stopped by the --deadline; killed with SIGKILL (--signal)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRetry(t, "", nil, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want %d and %q; stderr:\n%s", r.code, tc.code, tc.want, r.stderr)
			}
			if tc.name != "kill" {
				return
			}
			var took time.Duration
			if m := regexp.MustCompile(`giving up after (\S+) `).FindStringSubmatch(r.stderr); m != nil {
				took, _ = time.ParseDuration(m[1])
			}
			if took < 600*time.Millisecond {
				t.Errorf("gave up after %v, before the 600ms deadline: SIGKILL came early; stderr:\n%s", took, r.stderr)
			}
		})
	}
}

// TestInterruptDuringTheWait: a signal in the wait before a retry ends the
// run at once; the give-up line does not repeat the failure the retry line
// told, and the JSON log calls it "interrupted" as the text does.
func TestInterruptDuringTheWait(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			s := startRetryArgs(t, nil, nil, nil, "--attempts", "3", "--initial-delay", "1m", "--jitter", "0", "--log-format", format,
				"--", "sh", "-c", "echo ready $$ $$; exit 1")
			s.stderrLine(t, "retry")
			s.cmd.Process.Signal(syscall.SIGTERM)
			code, _ := s.wait(t)
			last := strings.TrimSpace(s.stderr.String())
			last = last[strings.LastIndex(last, "\n")+1:]
			ok := strings.HasPrefix(last, "retry: giving up before attempt 2/3 after ") && strings.HasSuffix(last, " (interrupted)")
			if format == "json" {
				ok = strings.Contains(last, `"event":"give-up","attempt":1,`) && strings.Contains(last, `"reason":"interrupted"`)
			}
			if code != 143 || !ok {
				t.Errorf("exit %d, last line %q; stderr:\n%s", code, last, s.stderr)
			}
		})
	}
}
