package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
)

// retry --attempts 1 as a drop-in for timeout(1), and what a shell around
// it sees (issues 22 and 27): real processes, the real binary, and
// /usr/bin/timeout's exit statuses beside retry's where it is there. Every
// wait is for an event (a line, an exit); the durations only bound a hang.

// timeoutBinary returns the path of timeout(1), skipping the test if the
// machine has none.
func timeoutBinary(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("timeout")
	if err != nil {
		t.Skip("no timeout(1) here to compare with")
	}
	return path
}

// waitAsleep waits for pid, a timeout(1) whose command has started, to
// sleep: coreutils' timeout has a race of its own, in which a signal that
// comes after its fork but before it stored the child's pid makes it
// _exit(128+N) and leave its command running (seen under load). Asleep, it
// is in its loop, past that.
func waitAsleep(t *testing.T, s *started, pid int) {
	t.Helper()
	awaitState(s.ctx, t, func() string { return fmt.Sprintf("timeout(1) %d never went to sleep (state %q)", pid, state(t, pid)) },
		func() bool { return state(t, pid) == "S" })
}

// TestDiesByTheSignal: an interrupted retry ends by the signal it got
// (SIGINT, SIGTERM, SIGHUP, SIGQUIT), once the attempt is gone and the
// closing line written, as timeout(1) does: a parent sees a death by the
// signal, not an exit status of 128+N. No core dump for SIGQUIT. (It exited
// 130, 143, 129, 131.)
func TestDiesByTheSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		t.Run(proc.SignalName(sig), func(t *testing.T) {
			s := startRetry(t, []string{"EXIT_ON=INT,TERM,HUP,QUIT"}, nil, nil, "--attempts", "3")
			s.cmd.Process.Signal(sig)
			code, rest := s.wait(t)
			if got := signaledBy(s.status); got != sig {
				t.Errorf("retry ended with %v (status %d), want a death by %v; stderr:\n%s", s.status, code, sig, s.stderr)
			}
			ws, _ := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.CoreDump() {
				t.Errorf("retry dumped core on %v", sig)
			}
			if strings.TrimSpace(rest) != "sig "+proc.SignalName(sig) || !strings.Contains(s.stderr.String(), "(interrupted)") {
				t.Errorf("the child said %q; want the forwarded signal, then the closing line; stderr:\n%s", rest, s.stderr)
			}
		})
	}
}

// TestShellLoopStopsOnCtrlC: Ctrl-C during "for ...; do retry ...; done"
// in a bash script stops the loop. bash takes a child's exit status of 130
// for a command that handled Ctrl-C itself and goes on (it took one Ctrl-C
// per iteration); a death by SIGINT ends the script too. The test sends
// SIGINT to the script's process group, as the terminal's Ctrl-C does.
func TestShellLoopStopsOnCtrlC(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := `for i in 1 2 3; do "$RETRY" --attempts 3 -- "$CHILD"; echo "next $i $?"; done; echo end`
	s := startProcess(t, bash, []string{"RETRY=" + bin, "CHILD=" + self, "RETRY_TEST_CHILD=signals", "EXIT_ON=INT"},
		&syscall.SysProcAttr{Setpgid: true}, nil, "-c", script)
	shell := s.cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-shell, syscall.SIGKILL) })
	syscall.Kill(-shell, syscall.SIGINT)
	for {
		l, err := s.out.ReadString('\n')
		if err != nil {
			break // every writer of the pipe has gone
		}
		if strings.HasPrefix(l, "next") || strings.HasPrefix(l, "ready") || strings.HasPrefix(l, "end") {
			t.Fatalf("the loop went on after Ctrl-C: %q; stderr:\n%s", l, s.stderr)
		}
	}
	s.wait(t)
	if got := signaledBy(s.status); got != syscall.SIGINT {
		t.Errorf("the script ended with %v, want a death by SIGINT; stderr:\n%s", s.status, s.stderr)
	}
}

// TestRetriedAttemptReadsTheTerminal: with --foreground, a retried attempt
// of a command that reads the terminal reads it again (it got /dev/null,
// read nothing, and "succeeded" on an empty answer). A pipe or a file is
// still used up by the first attempt (TestCommandStdinOnlyFirstAttempt).
func TestRetriedAttemptReadsTheTerminal(t *testing.T) {
	master, slave := openPTY(t)
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	script := `echo ready $$ $$; read x; echo "got $x"; [ "$x" = again ]`
	s := startRetryArgs(t, nil, attr, slave, "--attempts", "2", "--foreground", "--initial-delay", "10ms", "--jitter", "0",
		"--", "sh", "-c", script)
	io.WriteString(master, "first\n")
	if l := s.line(t); l != "got first" {
		t.Fatalf("attempt 1 said %q, want got first", l)
	}
	if l := s.line(t); !strings.HasPrefix(l, "ready ") {
		t.Fatalf("attempt 2 said %q, want its ready line", l)
	}
	io.WriteString(master, "again\n")
	if l := s.line(t); l != "got again" {
		t.Errorf("attempt 2 said %q, want got again (it reads the terminal too)", l)
	}
	if code, _ := s.wait(t); code != 0 {
		t.Errorf("exit %d, want 0; stderr:\n%s", code, s.stderr)
	}
}

// TestKilledRetryTakesTheAttemptsGroup: kill -9 of retry ends what the
// command started in its process group too, not only the command (the
// parent-death signal reaches the command alone: its child ran on,
// orphaned). The watchdog kills the group: a child of the command, and a
// child of that child, are gone. With --foreground (retry's own group,
// which the watchdog must not kill) the command alone is killed, by the
// parent-death signal; what it starts runs on (documented).
func TestKilledRetryTakesTheAttemptsGroup(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		// "ready PID": the PID of the process that must be gone.
		{"the command's child", nil, []string{"--", "sh", "-c", `sleep 1000 & echo ready $! $$; wait`}},
		{"a child's child", nil, []string{"--", "sh", "-c", `sh -c 'sleep 1000 & echo ready $! $$; wait' & wait`}},
		{"--foreground: the command", []string{"RETRY_TEST_CHILD=signals"}, []string{"--foreground", "--", self}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startRetryArgs(t, tc.env, nil, nil, append([]string{"--attempts", "3"}, tc.args...)...)
			s.cmd.Process.Kill()
			// Every process of the command holds the stdout pipe: it reads
			// EOF once all have gone (the event). Only s.ctx's end (30 s)
			// would kill the one named (s.pid) otherwise, and fail the
			// test.
			io.Copy(io.Discard, s.out)
			if s.ctx.Err() != nil {
				t.Fatalf("%d outlived retry", s.pid)
			}
			s.cmd.Wait()
		})
	}
}

// TestDaysAsTimeout: a duration in days means what it means to timeout(1):
// 0.000002d is 172.8ms (both stop a sleep 30 and exit 124), and 1d lets a
// quick command end (its own status). Bad days are refused (retry: exit 2,
// timeout: 125).
func TestDaysAsTimeout(t *testing.T) {
	to := timeoutBinary(t)
	for _, tc := range []struct {
		limit   string
		command []string
		code    int
	}{
		{"0.000002d", []string{"sleep", "30"}, cli.ExitTimeout},
		{"1d", []string{"sh", "-c", "exit 3"}, 3},
		{".5d", []string{"true"}, 0},
	} {
		for _, argv := range [][]string{
			append([]string{to, tc.limit}, tc.command...),
			append([]string{bin, "--attempts", "1", "--attempt-timeout", tc.limit, "--"}, tc.command...),
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := exec.CommandContext(ctx, argv[0], argv[1:]...).Run()
			if ctx.Err() != nil {
				t.Errorf("%q did not end within 20s", argv)
			} else if code := shellStatus(err); code != tc.code {
				t.Errorf("%q: exit %d, want %d", argv, code, tc.code)
			}
			cancel()
		}
	}
	for _, limit := range []string{"1D", "-1d", "d"} {
		if code := shellStatus(exec.Command(to, limit, "true").Run()); code != 125 {
			t.Errorf("timeout %s: exit %d, want 125 (refused)", limit, code)
		}
		if r := runRetry(t, "", nil, "--attempt-timeout", limit, "--", "true"); r.code != 2 || !strings.Contains(r.stderr, "--attempt-timeout") {
			t.Errorf("retry --attempt-timeout %s: exit %d, stderr %q; want 2 naming the flag", limit, r.code, r.stderr)
		}
	}
}

// TestSignalZero: --signal 0 (or EXIT) sends nothing at the timeout, only
// --kill-after's SIGKILL, as timeout -s 0: exit 137 after the kill; 124 if
// the command ends by itself meanwhile. The command traps every signal it
// could get, and says so if one comes.
func TestSignalZero(t *testing.T) {
	to := timeoutBinary(t)
	trap := `trap "echo got a signal" TERM INT HUP ALRM USR1; `
	for _, tc := range []struct {
		name     string
		timeout  []string
		retry    []string
		command  string
		code     int
		wantSaid string
	}{
		{"killed", []string{"-s0", "-k0.5", "0.2"}, []string{"--signal", "0", "--kill-after", "0.5", "--attempt-timeout", "0.2"},
			trap + `sleep 30 & wait; echo woke`, 137, ""},
		{"ends by itself", []string{"-s", "EXIT", "-k0", "0.1"}, []string{"--signal", "EXIT", "--kill-after", "0", "--attempt-timeout", "0.1"},
			trap + `sleep 0.5; echo done`, cli.ExitTimeout, "done\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, argv := range [][]string{
				append(append([]string{to}, tc.timeout...), "sh", "-c", tc.command),
				append(append([]string{bin, "--attempts", "1"}, tc.retry...), "--", "sh", "-c", tc.command),
			} {
				cmd := exec.Command(argv[0], argv[1:]...)
				out, err := cmd.Output()
				if code := shellStatus(err); code != tc.code || string(out) != tc.wantSaid {
					t.Errorf("%q: exit %d, output %q; want %d and %q (no signal)", argv, code, out, tc.code, tc.wantSaid)
				}
			}
		})
	}
}

// TestSIGALRMEndsTheAttempt: SIGALRM to retry is its time up now, as for
// timeout(1): in "X -s ALRM 300 X -s INT 250 CMD", an ALRM to the outer one
// makes it signal the inner one, which sends INT to the command, and both
// exit 124 (retry ignored it: the command ran on until the inner limit).
// The limits are far beyond the test's 30 s bound: only the ALRM can end
// the run in time. retry runs as timeout without -k: --kill-after 0 (its
// default 1s grace killed the inner retry, slow to exit on a loaded
// machine: 137 once in 20 runs beside two CPU burners).
func TestSIGALRMEndsTheAttempt(t *testing.T) {
	to := timeoutBinary(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrappers := map[string]func(sig, d string) []string{
		"timeout": func(sig, d string) []string { return []string{to, "-s", sig, d} },
		"retry": func(sig, d string) []string {
			return []string{bin, "--attempts", "1", "--attempt-timeout", d, "--signal", sig, "--kill-after", "0", "--"}
		},
	}
	for _, name := range []string{"timeout", "retry"} {
		t.Run(name, func(t *testing.T) {
			wrap := wrappers[name]
			argv := append(append(wrap("ALRM", "300"), wrap("INT", "250")...), self)
			s := startProcess(t, argv[0], []string{"RETRY_TEST_CHILD=signals", "EXIT_ON=INT"}, nil, nil, argv[1:]...)
			if name == "timeout" {
				waitAsleep(t, s, s.cmd.Process.Pid)
			}
			s.cmd.Process.Signal(syscall.SIGALRM)
			code, rest := s.wait(t)
			if code != cli.ExitTimeout || !strings.HasPrefix(strings.TrimSpace(rest), "sig INT") {
				t.Errorf("exit %d, the command said %q; want 124 and sig INT; stderr:\n%s", code, rest, s.stderr)
			}
			if n := len(lines(s.stderr.String(), "failed: stopped by SIGALRM")); name == "retry" && n != 2 {
				t.Errorf("%d lines say an attempt was stopped by SIGALRM, want 2 (inner and outer); stderr:\n%s", n, s.stderr)
			}
		})
	}
	// Between attempts there is nothing to end: retry says so and goes on.
	s := startRetryArgs(t, nil, nil, nil, "--attempts", "2", "--initial-delay", "1m", "--jitter", "0",
		"--", "sh", "-c", `echo ready $$ $$; exit 3`)
	s.stderrLine(t, "retrying in")
	s.cmd.Process.Signal(syscall.SIGALRM)
	s.stderrLine(t, "SIGALRM between attempts: no attempt to end")
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := s.wait(t); code != 143 {
		t.Errorf("exit %d after SIGTERM, want 143; stderr:\n%s", code, s.stderr)
	}
}

// TestBackgroundJobGetsInt: a non-interactive shell starts "X ... &" with
// SIGINT and SIGQUIT ignored. timeout(1) catches them anyway, so the
// command starts with them at their default: an INT or QUIT sent to the
// job's process group (with --foreground) or to the wrapper reaches the
// command, which can trap it. retry did as if the user had ignored INT
// (nohup): it and the command ignored it, and the command ran on to its
// time limit (124 after 20 s). The command is a shell that traps both:
// POSIX has a shell ignore a trap for a signal ignored on entry, so its
// line "trapped" shows the signal came in at its default. Its status is 3
// under timeout, which exits with its command's; retry ends by the signal
// it got (see TestDiesByTheSignal): 128+N. The job's status comes from a
// subshell.
func TestBackgroundJobGetsInt(t *testing.T) {
	to := timeoutBinary(t)
	script := `trap "echo the shell got a signal" INT QUIT; ( "$@"; echo "exit $?" ) & wait; wait`
	// Ready, it waits in the wait builtin, which a trapped signal ends at
	// once (a signal before sleep's exec did not reach sleep, and the trap
	// ran only once sleep ended). Its sleep, started with INT and QUIT
	// ignored, is killed by the trap.
	command := []string{"sh", "-c", `trap 'echo trapped; kill $!; exit 3' INT QUIT; sleep 30 >/dev/null & echo ready $$ $$; wait`}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT} {
		for _, tc := range []struct {
			name    string
			wrapper []string
			group   bool // the signal to the job's process group, else to the wrapper
		}{
			{"timeout --foreground", []string{to, "--foreground", "20"}, true},
			{"retry --foreground", []string{bin, "--attempts", "1", "--attempt-timeout", "20", "--foreground", "--"}, true},
			{"timeout", []string{to, "20"}, false},
			{"retry", []string{bin, "--attempts", "1", "--attempt-timeout", "20", "--"}, false},
		} {
			t.Run(proc.SignalName(sig)+" "+tc.name, func(t *testing.T) {
				argv := append(append([]string{"-c", script, "sh"}, tc.wrapper...), command...)
				s := startProcess(t, "/bin/sh", nil, &syscall.SysProcAttr{Setpgid: true}, nil, argv...)
				shell := s.cmd.Process.Pid
				t.Cleanup(func() { syscall.Kill(-shell, syscall.SIGKILL) })
				wrapper := parentOf(t, s.pid)
				if strings.HasPrefix(tc.name, "timeout") {
					waitAsleep(t, s, wrapper)
				}
				if tc.group {
					syscall.Kill(-shell, sig)
				} else {
					syscall.Kill(wrapper, sig)
				}
				var status string
				trapped := false
				for sc := bufio.NewScanner(s.out); sc.Scan(); {
					trapped = trapped || sc.Text() == "trapped"
					if _, err := fmt.Sscanf(sc.Text(), "exit %s", &status); err == nil {
						break
					}
				}
				want := []string{fmt.Sprint(128 + int(sig))}
				switch {
				case strings.HasPrefix(tc.name, "timeout"):
					want = []string{"3"}
				case tc.group:
					// retry and the command got the signal at once: retry
					// dies by it if it took it before the command's exit
					// came, else it exits with the command's 3, as
					// timeout does (the kernel does not order the two).
					want = append(want, "3")
				}
				if !trapped || !slices.Contains(want, status) {
					t.Errorf("the command trapped the signal: %v; the job's status is %q; want true and one of %q; stderr:\n%s",
						trapped, status, want, s.stderr)
				}
				if alive(t, s.pid) {
					t.Errorf("the command %d outlived retry", s.pid)
				}
				s.wait(t)
			})
		}
	}
}

// TestPreserveStatus: --preserve-status exits with the command's own
// status when the timeout stopped it (3 for a command that exits 3 on
// SIGTERM, 143 if SIGTERM killed it), as timeout --preserve-status; 124
// without it.
func TestPreserveStatus(t *testing.T) {
	to := timeoutBinary(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"timeout", []string{to, "--preserve-status", "0.3", self}},
		{"retry", []string{bin, "--attempts", "1", "--attempt-timeout", "0.3", "--kill-after", "0", "--preserve-status", "--", self}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
			cmd.Env = append(os.Environ(), "RETRY_TEST_CHILD=signals", "EXIT_ON=TERM")
			var errb strings.Builder
			cmd.Stderr = &errb
			out, err := cmd.Output()
			// The child exits 3 on SIGTERM once its handler is in; a SIGTERM
			// before (a slow start) kills it: 143.
			want := 143
			if strings.Contains(string(out), "sig TERM") {
				want = 3
			}
			if code := shellStatus(err); code != want {
				t.Errorf("exit %d, the child said %q; want %d (its own status); stderr:\n%s", code, out, want, errb.String())
			}
		})
	}
	r := runRetry(t, "", nil, "--attempts", "1", "--attempt-timeout", "0.1", "--", "sleep", "5")
	if r.code != cli.ExitTimeout {
		t.Errorf("without --preserve-status: exit %d, want 124", r.code)
	}
}

// TestDemoEndsBySignalAfterSummary: an interrupted demo writes its summary
// for the time run, then ends by the signal, as the command mode does.
func TestDemoEndsBySignalAfterSummary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--duration", "50s", "--clients", "4")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(out)
	if _, err := br.ReadString('\n'); err != nil { // the header: the demo runs
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := io.ReadAll(br)
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatal("the demo did not end after SIGTERM")
	}
	if signaledBy(err) != syscall.SIGTERM || !strings.Contains(errb.String(), "interrupted; the summary covers the time run") || !strings.Contains(string(rest), "strategy") {
		t.Errorf("ended with %v; want a death by SIGTERM after the summary; stdout:\n%s\nstderr:\n%s", err, rest, errb.String())
	}
}
