package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// zombiesOf returns the zombie children of pid.
func zombiesOf(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// TestOrphansReaped: the orphans an attempt leaves (retry adopts them as
// the subreaper) are reaped as they exit, not only after a timeout, and
// the command's own exit status is kept.
func TestOrphansReaped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--attempts", "1", "--", "sh", "-c",
		`for i in 1 2 3 4 5; do (sh -c 'exit 0' &); done; echo ready; read x; exit 7`)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("read %q, %v", l, err)
	}
	// Wait (bounded) for retry to reap the five orphans.
	var z []int
	for z = zombiesOf(t, cmd.Process.Pid); len(z) > 0 && ctx.Err() == nil; z = zombiesOf(t, cmd.Process.Pid) {
		time.Sleep(10 * time.Millisecond) // polling the process table; the bound is ctx
	}
	if len(z) > 0 {
		t.Errorf("zombies of retry left: %v", z)
	}
	stdin.Close()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Errorf("exit: %v, want 7 (the command's); stderr:\n%s", err, errb.String())
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
// command that ignores --signal runs on until it ends by itself.
func TestKillAfterZero(t *testing.T) {
	s := startRetry(t, []string{"EXIT_ON=HUP"}, nil, nil, "--attempts", "1", "--attempt-timeout", "200ms", "--kill-after", "0")
	if l := s.line(t); l != "sig TERM" {
		t.Fatalf("child said %q, want sig TERM", l)
	}
	syscall.Kill(s.pid, syscall.SIGHUP) // answered only if it was not killed
	code, rest := s.wait(t)
	if code != exitTimeout || strings.TrimSpace(rest) != "sig HUP" {
		t.Errorf("exit %d, child said %q; want 124 and sig HUP (alive after SIGTERM); stderr:\n%s", code, rest, s.stderr)
	}
}

// TestSignalKILL: --signal KILL exits 137, as timeout -s KILL does.
func TestSignalKILL(t *testing.T) {
	r := runRetry(t, "", nil, "--attempts", "1", "--attempt-timeout", "100ms", "--signal", "KILL", "--", "sleep", "30")
	if r.code != 137 {
		t.Errorf("exit %d, want 137; stderr %q", r.code, r.stderr)
	}
}

// TestSignalNames: every signal the platform has, by name (with or
// without SIG, any case) or number, as timeout -s.
func TestSignalNames(t *testing.T) {
	for in, want := range map[string]syscall.Signal{
		"SEGV": syscall.SIGSEGV, "cont": syscall.SIGCONT, "SIGSTOP": syscall.SIGSTOP, "sigwinch": syscall.SIGWINCH,
		"TSTP": syscall.SIGTSTP, "CHLD": syscall.SIGCHLD, "IO": syscall.SIGIO, "PWR": syscall.SIGPWR,
		"SYS": syscall.SIGSYS, "XCPU": syscall.SIGXCPU, "URG": syscall.SIGURG, "TTOU": syscall.SIGTTOU,
		"9": syscall.SIGKILL, "RTMIN": 34, "RTMIN+1": 35, "SIGRTMAX": 64, "RTMAX-2": 62, "64": 64,
		"iot": syscall.SIGABRT, "SIGCLD": syscall.SIGCHLD, "rtmax": 64, "RTMIN+0": 34,
	} {
		if got, err := parseSignal(in); err != nil || got != want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "NOPE", "0", "65", "-1", "RTMIN+31", "RTMAX-31", "RTMIN+x", "SIG", "RTMIN-1", "RTMAX+1", "RTMIN+-1", "RTMIN++1", "SIGSIG", " TERM"} {
		if _, err := parseSignal(bad); err == nil {
			t.Errorf("parseSignal(%q) accepted", bad)
		}
	}
	for sig, want := range map[syscall.Signal]string{syscall.SIGWINCH: "WINCH", 34: "RTMIN", 35: "RTMIN+1", 49: "RTMIN+15", 50: "RTMAX-14", 64: "RTMAX", 32: "32"} {
		if n := signalName(sig); n != want {
			t.Errorf("signalName(%d) = %q, want %q", int(sig), n, want)
		}
	}
}

// TestStopsWhenStdoutIsClosed: "retry -- yes | head -1": once retry's own
// stdout is a closed pipe, an attempt that failed (killed by SIGPIPE) is
// not retried: no further attempt could write anything.
func TestStopsWhenStdoutIsClosed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args(fast, []string{"--", "yes"})...)
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
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGPIPE) {
		t.Errorf("exit: %v, want 141; stderr:\n%s", err, errb.String())
	}
	if n := len(lines(errb.String(), "retrying in")); n != 0 || !strings.Contains(errb.String(), "stdout is a closed pipe") {
		t.Errorf("%d retries, want none and a line saying why:\n%s", n, errb.String())
	}
}

// TestStdinFileAndPastDeadline: --stdin-file naming a directory is a usage
// error before anything runs; a --deadline that has passed before the
// first attempt runs nothing and exits 124, as a timeout.
func TestStdinFileAndPastDeadline(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	r := runRetry(t, "", nil, "--stdin-file", t.TempDir(), "--", "touch", mark)
	if _, err := os.Stat(mark); r.code != exitUsage || err == nil || !strings.Contains(r.stderr, "--stdin-file") {
		t.Errorf("--stdin-file DIR: exit %d, stderr %q, ran: %v", r.code, r.stderr, err == nil)
	}
	r = runRetry(t, "", nil, "--deadline", "1ns", "--", "touch", mark)
	if _, err := os.Stat(mark); r.code != exitTimeout || err == nil || !strings.Contains(r.stderr, "before the first attempt") {
		t.Errorf("--deadline 1ns: exit %d, stderr %q, ran: %v; want 124, nothing run", r.code, r.stderr, err == nil)
	}
}
