package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// Process control like timeout(1) (the third review's items 15-21, 29,
// 30): real processes under the retry binary, waiting for events.

// TestSIGQUITForwarded: Ctrl-\ (SIGQUIT) is passed on to the attempt like
// SIGINT and SIGTERM (no Go stack dump from retry, nothing orphaned), and
// retry exits 131 like timeout(1).
func TestSIGQUITForwarded(t *testing.T) {
	s := startRetry(t, []string{"EXIT_ON=QUIT"}, nil, nil, "--attempts", "3")
	s.cmd.Process.Signal(syscall.SIGQUIT)
	code, rest := s.wait(t)
	if code != 131 || strings.TrimSpace(rest) != "sig QUIT" || strings.Contains(s.stderr.String(), "goroutine") {
		t.Errorf("exit %d, child said %q; want 131 after one forwarded SIGQUIT; stderr:\n%s", code, rest, s.stderr)
	}
	if alive(t, s.pid) {
		t.Errorf("the child %d still runs", s.pid)
	}
}

// TestOrphansReaped: the orphans an attempt leaves (retry adopts them as
// the subreaper) are reaped as they exit, while the attempt still runs,
// not only after a timeout or when retry exits; and the attempts' own exit
// statuses are never taken by that reaping.
func TestOrphansReaped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--attempts", "1", "--", "sh", "-c",
		`for i in 1 2 3 4 5; do (sh -c 'echo $$' &); done; echo ready; read x; exit 7`)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Five orphans say their pid and exit; the attempt says ready (in any
	// order) and waits for stdin.
	var orphans []int
	ready := false
	for br := bufio.NewReader(out); len(orphans) < 5 || !ready; {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read %q, %v; stderr:\n%s", l, err, errb.String())
		}
		if l == "ready\n" {
			ready = true
		} else if pid, err := strconv.Atoi(strings.TrimSpace(l)); err == nil {
			orphans = append(orphans, pid)
		}
	}
	// Each is gone from the process table once reaped (a zombie stays in
	// it).
	for _, pid := range orphans {
		awaitState(ctx, t, func() string { return fmt.Sprintf("the orphan %d was never reaped while the attempt ran", pid) }, func() bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			return os.IsNotExist(err)
		})
	}
	stdin.Close()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Errorf("exit: %v, want 7 (the command's); stderr:\n%s", err, errb.String())
	}

	// Orphans exit as their attempt does, again and again: every attempt's
	// status must reach retry (else "no child processes", exit 1).
	r := runRetry(t, "", nil, "--attempts", "30", "--initial-delay", "1ms", "--max-delay", "1ms", "--jitter", "0",
		"--", "sh", "-c", "(true &); (true &); exit 7")
	if n := len(lines(r.stderr, "failed: exit code 7;")); r.code != 7 || n != 30 {
		t.Errorf("exit %d, %d of 30 attempts reported exit code 7; stderr:\n%s", r.code, n, r.stderr)
	}
}

// TestScriptWithoutShebang: an executable file without "#!" runs with
// /bin/sh, as execvp and timeout(1) do.
func TestScriptWithoutShebang(t *testing.T) {
	script := filepath.Join(t.TempDir(), "noshebang")
	os.WriteFile(script, []byte("echo ran \"$@\"\nexit 4\n"), 0o755)
	r := runRetry(t, "", nil, args([]string{"--attempts", "2"}, fast, []string{"--", script, "a b"})...)
	if r.code != 4 || r.stdout != "ran a b\nran a b\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 4 and two runs", r.code, r.stdout, r.stderr)
	}
}

// TestKillAfterZero: --kill-after 0 sends no SIGKILL (as timeout -k 0): a
// command that ignores --signal runs on until it ends by itself, and the
// run exits 124. retry starts with SIGHUP ignored (nohup), which it and
// the command keep, and --signal HUP: the command ignores it from its first
// instruction, so no start-up of a handler races the 200ms timeout (it
// did: the test binary as the command, killed by SIGTERM before its
// handler was in). Its sleep of 2s is the margin retry's timer has to fire
// before it ends.
func TestKillAfterZero(t *testing.T) {
	r := runRetryIn(t, []string{"sh", "-c", `trap "" HUP; exec "$@"`, "sh"},
		"--attempts", "1", "--attempt-timeout", "200ms", "--signal", "HUP", "--kill-after", "0",
		"--", "sh", "-c", "echo started; sleep 2; echo done")
	if r.code != cli.ExitTimeout || r.stdout != "started\ndone\n" || strings.Contains(r.stderr, "SIGKILL") {
		t.Errorf("exit %d, stdout %q; want 124 and the command's end (no SIGKILL); stderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestStoppedAttemptGetsTheSignal: an attempt that stopped itself (SIGSTOP)
// gets the timeout's signal at once, as timeout(1) does it (a SIGCONT after
// the signal), instead of holding retry until someone resumes it: with
// --kill-after 0 nothing else would ever end it.
func TestStoppedAttemptGetsTheSignal(t *testing.T) {
	r := runRetry(t, "", nil, "--attempts", "1", "--attempt-timeout", "200ms", "--kill-after", "0", "--", "sh", "-c", "kill -STOP $$; sleep 30")
	if r.code != cli.ExitTimeout {
		t.Errorf("exit %d, want 124; stderr %q", r.code, r.stderr)
	}
}

// TestSignalKILL: --signal KILL exits 137, as timeout -s KILL does.
func TestSignalKILL(t *testing.T) {
	r := runRetry(t, "", nil, "--attempts", "1", "--attempt-timeout", "100ms", "--signal", "KILL", "--", "sleep", "30")
	if r.code != 137 {
		t.Errorf("exit %d, want 137; stderr %q", r.code, r.stderr)
	}
}

// TestStopsWhenStdoutIsClosed: "retry -- yes | head -1": once retry's own
// stdout is a closed pipe, an attempt that failed (killed by SIGPIPE, or
// exiting on EPIPE) is not retried: no further attempt could write
// anything. A command killed by SIGPIPE is not retried either.
func TestStopsWhenStdoutIsClosed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command []string
		code    int
	}{
		{"killed by SIGPIPE", []string{"yes"}, 128 + int(syscall.SIGPIPE)},
		{"exits on EPIPE", []string{"sh", "-c", `trap "" PIPE; exec yes`}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args(fast, []string{"--"}, tc.command)...)
			out, _ := cmd.StdoutPipe()
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "y\n" {
				t.Fatalf("read %q, %v", l, err)
			}
			out.Close() // as head -1 exits
			err := cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != tc.code {
				t.Errorf("exit: %v, want %d; stderr:\n%s", err, tc.code, errb.String())
			}
			if n := len(lines(errb.String(), "retrying in")); n != 0 || !strings.Contains(errb.String(), "not retried: retry's stdout is a closed pipe") {
				t.Errorf("%d retries, want none and a line saying why:\n%s", n, errb.String())
			}
		})
	}
	r := runRetry(t, "", nil, args(fast, []string{"--", "sh", "-c", "kill -PIPE $$"})...)
	if n := len(lines(r.stderr, "retrying in")); r.code != 141 || n != 0 || !strings.Contains(r.stderr, "killed by signal PIPE; giving up") {
		t.Errorf("killed by SIGPIPE, stdout open: exit %d after %d retries, want 141 and none; stderr:\n%s", r.code, n, r.stderr)
	}
	// Unless --on-exit-codes asks for it.
	r = runRetry(t, "", nil, args(fast, []string{"--attempts", "2", "--on-exit-codes", "141", "--", "sh", "-c", "kill -PIPE $$"})...)
	if n := len(lines(r.stderr, "retrying in")); r.code != 141 || n != 1 {
		t.Errorf("--on-exit-codes 141: exit %d after %d retries, want 141 and 1; stderr:\n%s", r.code, n, r.stderr)
	}
}

// TestStdinFileAndPastDeadline: --stdin-file naming a directory is a usage
// error before anything runs; a --deadline that has passed before the
// first attempt runs nothing and exits 124, as a timeout.
func TestStdinFileAndPastDeadline(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	r := runRetry(t, "", nil, "--stdin-file", t.TempDir(), "--", "touch", mark)
	if _, err := os.Stat(mark); r.code != cli.ExitUsage || err == nil || !strings.Contains(r.stderr, "--stdin-file") {
		t.Errorf("--stdin-file DIR: exit %d, stderr %q, ran: %v", r.code, r.stderr, err == nil)
	}
	r = runRetry(t, "", nil, "--deadline", "1ns", "--", "touch", mark)
	if _, err := os.Stat(mark); r.code != cli.ExitTimeout || err == nil || !strings.Contains(r.stderr, "before the first attempt") {
		t.Errorf("--deadline 1ns: exit %d, stderr %q, ran: %v; want 124, nothing run", r.code, r.stderr, err == nil)
	}
}

// TestTerminalReadNeedsForeground: a command that reads the terminal, in a
// process group of its own, is stopped by SIGTTIN for good (it hung with
// no word): retry ends it, says it needs --foreground, and does not retry
// it (exit 128+SIGTTIN). With --foreground it reads the terminal.
func TestTerminalReadNeedsForeground(t *testing.T) {
	script := `echo ready $$ $$; read x; echo got $x`
	for _, fg := range []bool{false, true} {
		t.Run(fmt.Sprint("foreground=", fg), func(t *testing.T) {
			master, slave := openPTY(t)
			attr := &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			args := []string{"--attempts", "3"}
			if fg {
				args = append(args, "--foreground")
			}
			s := startRetryArgs(t, nil, attr, slave, append(args, "--", "sh", "-c", script)...)
			if fg {
				master.Write([]byte("hello\n"))
				if l := s.line(t); l != "got hello" {
					t.Errorf("--foreground: the command said %q, want got hello", l)
				}
			}
			code, rest := s.wait(t)
			want := 0
			if !fg {
				want = 128 + int(syscall.SIGTTIN)
			}
			if code != want || rest != "" {
				t.Errorf("exit %d, then the command said %q; want %d and nothing; stderr:\n%s", code, rest, want, s.stderr)
			}
			if !fg && (!strings.Contains(s.stderr.String(), "stopped by SIGTTIN") || !strings.Contains(s.stderr.String(), "needs --foreground") ||
				strings.Count(s.stderr.String(), "attempt ") != 1) {
				t.Errorf("want one attempt, stopped by SIGTTIN, and the advice to use --foreground; stderr:\n%s", s.stderr)
			}
		})
	}
}

// TestCtrlZSuspendsTheAttempt: Ctrl-Z at the terminal stops the attempt,
// then retry (the command ran on, printing, while retry was stopped); the
// shell's fg (SIGCONT to retry's group) resumes both. retry runs as a job of
// a shell (the test binary's "jobshell" mode) in the terminal's session.
func TestCtrlZSuspendsTheAttempt(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv, _ := json.Marshal([]string{bin, "--attempts", "3", "--", self})
	master, slave := openPTY(t)
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	sh := startProcess(t, self, []string{"RETRY_TEST_CHILD=jobshell", "JOB_ARGV=" + string(argv), "EXIT_ON=TERM"}, attr, slave)
	var retryPID, child, pgid int
	for retryPID == 0 || child == 0 { // retry's pid and its command's ready line, in either order
		l := sh.line(t)
		if _, err := fmt.Sscanf(l, "job %d", &retryPID); err != nil {
			if _, err := fmt.Sscanf(l, "ready %d %d", &child, &pgid); err != nil {
				t.Fatalf("the shell said %q", l)
			}
		}
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	if _, err := master.Write([]byte{0x1a}); err != nil { // Ctrl-Z
		t.Fatal(err)
	}
	if l := sh.line(t); l != "job stopped" {
		t.Fatalf("the shell said %q, want job stopped", l)
	}
	// The child got SIGTSTP before retry stopped itself.
	awaitState(sh.ctx, t, func() string {
		return fmt.Sprintf("the attempt %d runs on while retry is stopped (state %s)", child, state(t, child))
	}, func() bool { return state(t, child) == "T" })
	sh.cmd.Process.Signal(syscall.SIGUSR1)  // fg
	syscall.Kill(retryPID, syscall.SIGTERM) // the attempt runs again: it answers
	if l := sh.line(t); l != "sig TERM" {
		t.Fatalf("the child said %q, want sig TERM once resumed", l)
	}
	if code, _ := sh.wait(t); code != 143 {
		t.Errorf("exit %d, want 143; stderr:\n%s", code, sh.stderr)
	}
}

// TestKilledRetryTakesTheCommand: kill -9 of retry kills the command too
// (in its own process group, it ran on, orphaned).
func TestKilledRetryTakesTheCommand(t *testing.T) {
	s := startRetry(t, nil, nil, nil, "--attempts", "3")
	s.cmd.Process.Kill()
	// The command holds the stdout pipe and never closes it: its end reads
	// as EOF once the command exits (the event; /proc may still show it
	// exiting a moment longer). Only s.ctx's end would kill it otherwise,
	// and fail the test.
	io.Copy(io.Discard, s.out)
	if s.ctx.Err() != nil {
		t.Fatalf("the command %d outlived retry", s.pid)
	}
	s.cmd.Wait()
}

// state returns pid's state letter from /proc ("" if gone).
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// TestRepeatedSignalIsOne: the same signal twice at once (a terminal's
// SIGINT and a parent's that forwards it, the kernel's and the shell's
// SIGHUP on a hang-up) is one: passed on once, and it does not kill the
// command. Sent again after retry's line, it does.
func TestRepeatedSignalIsOne(t *testing.T) {
	s := startRetry(t, nil, nil, nil, "--attempts", "3")
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Process.Signal(syscall.SIGTERM)
	if l := s.line(t); l != "sig TERM" {
		t.Fatalf("child said %q, want the forwarded SIGTERM", l)
	}
	s.stderrLine(t, "SIGTERM: waiting for the command to end; send SIGTERM again to kill it")
	if !alive(t, s.pid) {
		t.Fatalf("the command was killed by the repeated signal; stderr:\n%s", s.stderr)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	code, rest := s.wait(t)
	if code != 143 || rest != "" || alive(t, s.pid) {
		t.Errorf("exit %d, then the child said %q; want 143, nothing more, and it killed", code, rest)
	}
}

// TestIgnoredSignalStaysIgnored: a signal ignored when retry starts (nohup,
// "cmd &" in a script) stays ignored, by retry and by the command, as a
// shell loop would leave it (Go's signal.Notify would catch it): a SIGHUP
// then neither ends the run nor reaches the command.
func TestIgnoredSignalStaysIgnored(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := startProcess(t, "/bin/sh", []string{"RETRY_TEST_CHILD=signals", "EXIT_ON=TERM"}, nil, nil,
		"-c", `trap "" HUP; exec "$0" "$@"`, bin, "--attempts", "3", "--", self)
	s.cmd.Process.Signal(syscall.SIGHUP) // sh has become retry
	s.cmd.Process.Signal(syscall.SIGTERM)
	code, rest := s.wait(t)
	if code != 143 || strings.TrimSpace(rest) != "sig TERM" {
		t.Errorf("exit %d, the child said %q; want 143 and only the SIGTERM; stderr:\n%s", code, rest, s.stderr)
	}
}

// TestDifferentSignalKills: a second signal of another kind (a
// supervisor's SIGTERM after a SIGINT) kills at once, however soon.
func TestDifferentSignalKills(t *testing.T) {
	s := startRetry(t, nil, nil, nil, "--attempts", "3")
	s.cmd.Process.Signal(syscall.SIGINT)
	// Two signals sent at once may reach retry in either order (taken by
	// two threads): the SIGTERM goes once retry has passed the SIGINT on.
	if l := s.line(t); l != "sig INT" {
		t.Fatalf("child said %q, want the forwarded SIGINT", l)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	code, _ := s.wait(t)
	if code != 130 || alive(t, s.pid) {
		t.Errorf("exit %d, the child alive %v; want 130 and it killed; stderr:\n%s", code, alive(t, s.pid), s.stderr)
	}
}

// TestTerminalForegroundWithoutTTYStdin: retry knows it has the terminal
// from its controlling terminal, also when stdin is not the terminal (< file,
// a pipe). It asked stdin, and with --foreground sent a Ctrl-C the command
// already had from the terminal again. (Counting the command's SIGINTs
// cannot tell: two pending SIGINTs are one.) The test binary, in a session
// of its own with the terminal as fd 3 and /dev/null as stdin, says what
// proc.TerminalForeground reports.
func TestTerminalForegroundWithoutTTYStdin(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, slave := openPTY(t)
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	s := startProcessFiles(t, self, []string{"RETRY_TEST_CHILD=fgcheck"}, attr, nil, []*os.File{slave})
	if l := s.line(t); l != "foreground true" {
		t.Errorf("terminalForeground() in the terminal's foreground group, stdin /dev/null: %q, want foreground true", l)
	}
	s.wait(t)
}

// TestCtrlZWhenTheParentSharesTheGroup: Ctrl-Z suspends retry's attempt
// when retry runs inside a script (its parent in its process group, the
// script's parent the shell): the group is not orphaned. (retry took its
// parent alone for the group and ignored Ctrl-Z.)
func TestCtrlZWhenTheParentSharesTheGroup(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv, _ := json.Marshal([]string{"/bin/sh", "-c", `"$0" "$@"; exit $?`, bin, "--attempts", "3", "--", self})
	master, slave := openPTY(t)
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	sh := startProcess(t, self, []string{"RETRY_TEST_CHILD=jobshell", "JOB_ARGV=" + string(argv), "EXIT_ON=TERM"}, attr, slave)
	var job, child, pgid int
	for job == 0 || child == 0 {
		l := sh.line(t)
		if _, err := fmt.Sscanf(l, "job %d", &job); err != nil {
			if _, err := fmt.Sscanf(l, "ready %d %d", &child, &pgid); err != nil {
				t.Fatalf("the shell said %q", l)
			}
		}
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	retryPID := parentOf(t, child)
	if _, err := master.Write([]byte{0x1a}); err != nil { // Ctrl-Z
		t.Fatal(err)
	}
	if l := sh.line(t); l != "job stopped" {
		t.Fatalf("the shell said %q, want job stopped", l)
	}
	awaitState(sh.ctx, t, func() string {
		return fmt.Sprintf("the attempt %d runs on while its job is stopped (state %s)", child, state(t, child))
	}, func() bool { return state(t, child) == "T" })
	sh.cmd.Process.Signal(syscall.SIGUSR1) // fg
	syscall.Kill(retryPID, syscall.SIGTERM)
	if l := sh.line(t); l != "sig TERM" {
		t.Fatalf("the child said %q, want sig TERM once resumed", l)
	}
	if code, _ := sh.wait(t); code != 143 {
		t.Errorf("exit %d, want 143; stderr:\n%s", code, sh.stderr)
	}
}

// parentOf returns pid's parent, from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
