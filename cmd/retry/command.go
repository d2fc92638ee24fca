package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/backoffkit/retry"
)

// killGrace is how long a timed-out attempt has between SIGTERM and SIGKILL.
const killGrace = 5 * time.Second

// notifySignals relays SIGINT and SIGTERM to c until stop is called.
var notifySignals = func(c chan<- os.Signal) (stop func()) {
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	return func() { signal.Stop(c) }
}

const commandUsage = `Usage: retry [flags] -- COMMAND [ARGS...]
       retry SUBCOMMAND [flags] ...     (subcommands: %s)

Runs COMMAND and runs it again while it fails, waiting between attempts with
truncated exponential backoff with jitter: before retry n (from 0) the wait is
min(initial_delay * exp_base^n + U(0, jitter), max_delay) (Google's formula).
Each retry is logged on stderr; the command's own output is untouched.

Durations take Go syntax (1.5s, 250ms, 2m) or a bare number of seconds.
Precedence: defaults (or --profile) < --config file < flags.

The command's stdin is passed through on the first attempt only: a retried
command gets an empty stdin, unless --stdin-file names a file to replay on
every attempt.

Ctrl-C (SIGINT) and SIGTERM are forwarded to the running attempt and no
further attempt starts.

Exit status:
  the command's last exit code (0 once it succeeds)
  2    bad usage or config (a command may also exit 2)
  124  the last attempt was stopped by --attempt-timeout or --deadline
  126  the command could not be run (permission denied); not retried
  127  the command was not found; not retried
  130  interrupted by SIGINT; 143 by SIGTERM
  128+N  the last attempt was killed by signal N

Flags:
`

// runCommand is the command-wrapping mode: retry [flags] -- COMMAND [ARGS...].
func runCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const prog = "retry"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pf := addPolicyFlags(fs, false)
	var onExit []int
	fs.Func("on-exit-codes", "exit `CODES` that are transient, e.g. 1,75 (default: any non-zero)", func(s string) error {
		c, err := parseExitCodes(s)
		onExit = c
		return err
	})
	var stdinFile string
	fs.StringVar(&stdinFile, "stdin-file", "", "`FILE` given as stdin to every attempt (replayable), instead of passing stdin through once")

	help, err := parseFlags(fs, args)
	if help {
		fmt.Fprintf(stdout, commandUsage, strings.Join(subcommandNames(), ", "))
		printFlags(stdout, fs)
		return exitOK
	}
	if err != nil {
		return fail(stderr, prog, err)
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fail(stderr, prog, usagef("no command given (usage: retry [flags] -- COMMAND [ARGS...]; subcommands: %s)", strings.Join(subcommandNames(), ", ")))
	}
	p, err := pf.build()
	if err != nil {
		return fail(stderr, prog, err)
	}
	if stdinFile != "" {
		f, err := os.Open(stdinFile)
		if err != nil {
			return fail(stderr, prog, usagef("--stdin-file %s: cannot read: %v", stdinFile, unwrapPath(err)))
		}
		f.Close()
	}

	r := &cmdRunner{
		argv: argv, stdin: stdin, stdinFile: stdinFile,
		stdout: stdout, stderr: stderr, onExit: onExit,
		attemptTimeout: p.AttemptTimeout,
	}
	log := newEventLog(stderr, prog, pf, r.describe)
	p.Observer = log.observer()
	p.Retryable = r.retryable

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 4)
	stop := notifySignals(sigs)
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go r.relay(sigs, cancel, done)

	err = retry.Run(ctx, p, r.attempt)
	return r.exitCode(err)
}

// cmdRunner runs the attempts of one command and forwards signals to the
// attempt that is running.
type cmdRunner struct {
	argv           []string
	stdin          io.Reader
	stdinFile      string
	stdout, stderr io.Writer
	onExit         []int // transient exit codes; nil means any non-zero
	attemptTimeout time.Duration

	mu       sync.Mutex
	proc     *os.Process // the running attempt, nil between attempts
	sig      os.Signal   // the first signal received, nil if none
	attempts int
}

// cmdError is a failed attempt.
type cmdError struct {
	code     int    // the exit status to report for it
	what     string // "exit code 3", "timed out after 2s (--attempt-timeout)"
	timedOut bool   // stopped by us at --attempt-timeout or --deadline
	start    bool   // the command could not be started
	err      error
}

func (e *cmdError) Error() string { return e.what }
func (e *cmdError) Unwrap() error { return e.err }

// relay forwards each signal to the running attempt and stops the loop.
func (r *cmdRunner) relay(sigs <-chan os.Signal, cancel context.CancelFunc, done <-chan struct{}) {
	for {
		select {
		case s := <-sigs:
			r.mu.Lock()
			if r.sig == nil {
				r.sig = s
			}
			proc := r.proc
			r.mu.Unlock()
			cancel()
			if proc != nil {
				_ = proc.Signal(s)
			}
		case <-done:
			return
		}
	}
}

// attempt runs the command once.
func (r *cmdRunner) attempt(ctx context.Context) error {
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	cmd.WaitDelay = time.Second // bounds the copy of output left open by orphans
	switch {
	case r.stdinFile != "":
		f, err := os.Open(r.stdinFile)
		if err != nil {
			return retry.Permanent(&cmdError{code: exitNoExec, start: true, what: fmt.Sprintf("cannot open --stdin-file: %v", err), err: err})
		}
		defer f.Close()
		cmd.Stdin = f
	case r.attempts == 0:
		cmd.Stdin = r.stdin
	}

	r.mu.Lock()
	if r.sig != nil {
		r.mu.Unlock()
		return context.Canceled
	}
	r.attempts++
	err := cmd.Start()
	if err == nil {
		r.proc = cmd.Process
	}
	r.mu.Unlock()
	if err != nil {
		code := exitNoExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return retry.Permanent(&cmdError{code: code, start: true, what: fmt.Sprintf("cannot run %q: %v", r.argv[0], unwrapExec(err)), err: err})
	}

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var timedOut bool
	select {
	case err = <-waited:
	case <-ctx.Done():
		r.mu.Lock()
		interrupted := r.sig != nil
		r.mu.Unlock()
		if !interrupted { // the attempt's time is up: stop it
			timedOut = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err = <-waited:
			case <-time.After(killGrace):
				_ = cmd.Process.Kill()
				err = <-waited
			}
		} else {
			err = <-waited // the signal was forwarded; let it end
		}
	}
	r.mu.Lock()
	r.proc = nil
	r.mu.Unlock()

	if err == nil && !timedOut {
		return nil
	}
	if timedOut {
		what := "stopped at the --deadline"
		if r.attemptTimeout > 0 && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			what = fmt.Sprintf("timed out after %v (--attempt-timeout)", r.attemptTimeout)
		}
		return &cmdError{code: exitTimeout, timedOut: true, what: what, err: ctx.Err()}
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return &cmdError{code: exitGaveUp, what: err.Error(), err: err}
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &cmdError{code: 128 + int(ws.Signal()), what: "killed by signal " + ws.Signal().String(), err: err}
	}
	code := ee.ExitCode()
	return &cmdError{code: code, what: fmt.Sprintf("exit code %d", code), err: err}
}

// retryable says whether a failed attempt is worth another.
func (r *cmdRunner) retryable(err error) bool {
	var ce *cmdError
	if !errors.As(err, &ce) {
		return true
	}
	if ce.timedOut || r.onExit == nil {
		return true
	}
	return containsInt(r.onExit, ce.code)
}

// describe turns an attempt error into log fields.
func (r *cmdRunner) describe(err error) attemptInfo {
	var ce *cmdError
	if !errors.As(err, &ce) {
		return attemptInfo{What: err.Error(), Error: err.Error()}
	}
	info := attemptInfo{What: ce.what}
	switch {
	case ce.start:
		info.Error = ce.what
		info.WhyStop = "the command cannot be started"
	case ce.timedOut:
		info.Error = ce.what
	default:
		code := ce.code
		info.ExitCode = &code
		if strings.HasPrefix(ce.what, "killed") {
			info.Error = ce.what
		}
		if r.onExit != nil && !containsInt(r.onExit, code) {
			info.WhyStop = fmt.Sprintf("exit code %d is not in --on-exit-codes", code)
		}
	}
	return info
}

// exitCode is the exit status of retry for the loop's result.
func (r *cmdRunner) exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	r.mu.Lock()
	sig := r.sig
	r.mu.Unlock()
	if sig != nil {
		if s, ok := sig.(syscall.Signal); ok {
			return 128 + int(s)
		}
		return 128 + int(syscall.SIGINT)
	}
	var ce *cmdError
	if errors.As(err, &ce) {
		return ce.code
	}
	fmt.Fprintf(r.stderr, "retry: %s\n", oneLine(err.Error()))
	return exitGaveUp
}

// unwrapExec shortens exec's start errors ("exec: "x": executable file not
// found in $PATH" becomes "executable file not found in $PATH").
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return unwrapPath(err)
}
