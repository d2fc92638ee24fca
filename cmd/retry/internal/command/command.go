package command

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
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/policy"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
)

// defaultKillAfter is how long a stopped attempt has between --signal and
// SIGKILL when --kill-after is not given.
const defaultKillAfter = time.Second

// commandFlags are the flags of the command mode.
type commandFlags struct {
	fs         *flag.FlagSet
	pf         *policy.Flags
	onExit     []int
	stdinFile  string
	stopSig    syscall.Signal
	killAfter  time.Duration
	killSet    bool // --kill-after was given
	foreground bool
	preserve   bool // --preserve-status
	version    bool
}

func newCommandFlags() *commandFlags {
	fs := flag.NewFlagSet("retry", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &commandFlags{fs: fs, pf: policy.AddFlags(fs, false), stopSig: syscall.SIGTERM, killAfter: defaultKillAfter}
	fs.Func("on-exit-codes", "exit `CODES` that are transient, e.g. 1,75 (default: any non-zero)", func(s string) error {
		codes, err := cli.ParseExitCodes(s)
		c.onExit = codes
		return err
	})
	fs.StringVar(&c.stdinFile, "stdin-file", "", "`FILE` given as stdin to every attempt (replayable), instead of passing stdin through once")
	fs.Func("signal", "`SIG` sent to a timed-out attempt: a name of kill -l (TERM, INT, HUP, KILL, ...), a number, or 0 (EXIT) for none (default TERM)", func(s string) error {
		sig, err := proc.ParseSignal(s)
		c.stopSig = sig
		return err
	})
	fs.Func("kill-after", "send SIGKILL if the attempt still runs this long after --signal; `DURATION` (default 1s)", func(s string) error {
		d, err := cli.ParseDuration(s)
		c.killAfter, c.killSet = d, true
		return err
	})
	fs.BoolVar(&c.preserve, "preserve-status", false, "exit with the command's own status when its last attempt was stopped by a timeout, not 124 (as timeout --preserve-status)")
	fs.BoolVar(&c.foreground, "foreground", false, "run the command in retry's process group, for commands that read the terminal (its children are not signalled on a timeout)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	return c
}

// Run is the command-wrapping mode: retry [flags] -- COMMAND [ARGS...]. It
// returns the exit code; verbs are retry's subcommands, which the usage
// error for a missing COMMAND names.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer, verbs []string) int {
	const prog = "retry"
	c := newCommandFlags()
	fs, pf := c.fs, c.pf
	stdinFile, stopSig, killAfter, onExit := &c.stdinFile, &c.stopSig, &c.killAfter, &c.onExit
	foreground, version := &c.foreground, &c.version

	help, err := cli.ParseFlags(fs, args)
	if help {
		printCommandHelp(stdout, fs)
		return cli.ExitOK
	}
	log := policy.NewEventLog(stderr, prog, pf, nil)
	if err != nil {
		log.JSON = policy.ScanLogFormat(fs, args, false) == "json" // the error may come before --log-format
		return log.Fail(err)
	}
	if *version {
		fmt.Fprintln(stdout, cli.VersionLine())
		return cli.ExitOK
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return log.Fail(cli.Usagef("no command given (usage: retry [flags] -- COMMAND [ARGS...]; subcommands: %s)", strings.Join(verbs, ", ")))
	}
	p, err := pf.Build()
	if err != nil {
		return log.Fail(err)
	}
	if *stdinFile != "" {
		f, err := os.Open(*stdinFile)
		if err != nil {
			return log.Fail(cli.Usagef("--stdin-file %s: cannot read: %v", *stdinFile, cli.UnwrapPath(err)))
		}
		fi, err := f.Stat()
		f.Close()
		if err == nil && fi.IsDir() {
			return log.Fail(cli.Usagef("--stdin-file %s: is a directory", *stdinFile))
		}
	}

	resolved := p.Resolved()
	r := &cmdRunner{
		argv: argv, stdin: stdin, stdinFile: *stdinFile,
		stdout: stdout, stderr: stderr, onExit: *onExit,
		attemptTimeout: resolved.AttemptTimeout,
		stopSig:        *stopSig, killAfter: *killAfter,
		group: !*foreground, preserveStatus: c.preserve,
	}
	if c.killSet {
		r.interruptGrace = *killAfter
	}
	if !*foreground && proc.BecomeSubreaper() && proc.WholeProcess {
		// Reap the orphans retry adopts as they exit, not when it exits.
		r.children.Reap = true
		defer proc.WatchChildren(&r.children)()
	}
	// A deadline is a deadline: the grace between --signal and SIGKILL
	// counts inside it. The loop's deadline comes --kill-after (at most half
	// the deadline) early; SIGKILL, if needed, lands at the deadline itself.
	if d := resolved.Deadline; d > 0 {
		p.Deadline = signalAt(d, *killAfter, *stopSig)
		now := time.Now()
		r.hardDeadline = now.Add(d)
		r.loopDeadline = now.Add(p.Deadline)
	}
	log.Describe = r.describe
	log.Hint(resolved)
	r.onInterrupt = func(s os.Signal) {
		name, key := s.String(), ""
		if sig, ok := s.(syscall.Signal); ok {
			name = "SIG" + proc.SignalName(sig)
			key = terminalKey(sig)
		}
		if r.interruptGrace > 0 {
			now := time.Now()
			grace := max(r.killBy(now, r.interruptGrace).Sub(now), 0)
			log.Note("interrupt", fmt.Sprintf("%s: waiting up to %v (--kill-after) for the command to end; send %s%s again to kill it now", name, cli.RoundDur(grace), name, key))
			return
		}
		log.Note("interrupt", fmt.Sprintf("%s: waiting for the command to end; send %s%s again to kill it", name, name, key))
	}
	p.Observer = log.Observer()
	p.Retryable = r.retryable
	fl, err := policy.OpenFleet(pf.Fleet, p.Deadline, log)
	if err != nil {
		return log.Fail(err)
	}
	defer fl.Close()
	fl.Apply(&p, log)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 4)
	stop := proc.NotifySignals(sigs)
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go r.relay(sigs, cancel, done)
	if len(proc.JobSignals) > 0 { // (a Ctrl-Z ignored at start cannot be told: see proc.NotifySignals)
		jobs := make(chan os.Signal, 2)
		signal.Notify(jobs, proc.JobSignals...)
		defer signal.Stop(jobs)
		go r.jobControl(jobs, done)
	}
	if proc.AlarmSignal != nil {
		alarms := make(chan os.Signal, 1)
		signal.Notify(alarms, proc.AlarmSignal)
		defer signal.Stop(alarms)
		go r.alarmRelay(alarms, done, log)
	}
	if r.group && proc.WholeProcess {
		// kill -9 of retry ends the attempt's group too.
		r.watchdog = proc.StartWatchdog()
		defer r.watchdog.Close()
	}

	err = r.run(ctx, p)
	var ce *cmdError
	if err != nil && !errors.As(err, &ce) && !r.interrupted() && !log.GaveUp {
		log.Fail(err) // not an attempt's failure: nothing said it yet
	}
	return r.exitCode(err)
}

// run is retry.Run, except that a loop deadline (counted from retry's
// start) already passed refuses before the first attempt, as the loop
// refuses an attempt that would start at or after its deadline: retry.Run
// counts its Deadline from its own start and would run one attempt.
func (r *cmdRunner) run(ctx context.Context, p retry.Policy) error {
	if !r.loopDeadline.IsZero() {
		if !time.Now().Before(r.loopDeadline) {
			e := &retry.Error{Reason: retry.ReasonDeadline, Cause: context.DeadlineExceeded}
			if p.Observer != nil {
				p.Observer(ctx, retry.Event{Kind: retry.EventGiveUp, MaxAttempts: p.Attempts, Reason: retry.ReasonDeadline})
			}
			return e
		}
	}
	return retry.Run(ctx, p, r.attempt)
}

// terminalKey names the key that sends sig from a terminal, " (Ctrl-C)",
// or "" if none.
func terminalKey(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return " (Ctrl-C)"
	case syscall.SIGQUIT:
		return ` (Ctrl-\)`
	}
	return ""
}

// signalAt returns when, within a --deadline d, the loop's deadline falls:
// when the last attempt gets --signal sig, so that its grace, --kill-after
// but at most half of d, ends at d. With --kill-after 0 (never kill) or
// --signal KILL (no grace) it is d.
func signalAt(d, killAfter time.Duration, sig syscall.Signal) time.Duration {
	if sig == syscall.SIGKILL {
		return d
	}
	return d - min(killAfter, d/2)
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
	stopSig        syscall.Signal // --signal
	killAfter      time.Duration  // --kill-after
	hardDeadline   time.Time      // --deadline from the start; zero if none
	loopDeadline   time.Time      // the loop's: hardDeadline less the grace of --kill-after
	group          bool           // each attempt in its own process group
	// interruptGrace is how long an attempt has after a signal retry passed
	// on before SIGKILL: --kill-after if given (as timeout -k), else 0 for
	// never (a second signal kills it).
	interruptGrace time.Duration
	onInterrupt    func(os.Signal) // called once the first signal has been passed on to a running attempt
	preserveStatus bool            // --preserve-status

	children proc.Children
	watchdog *proc.Watchdog // kills the running attempt's group if retry is killed; nil if none

	mu       sync.Mutex
	proc     *proc.Process // the running attempt, nil between attempts
	alarm    chan struct{} // the running attempt's SIGALRM (see alarmRelay)
	sig      os.Signal     // the first signal received, nil if none
	forced   bool          // a second signal came: the attempt was killed
	attempts int
}

// cmdError is a failed attempt.
type cmdError struct {
	code     int    // the exit status to report for it
	what     string // "exit code 3", "timed out after 2s (--attempt-timeout)"
	timedOut bool   // stopped by us at --attempt-timeout or --deadline
	start    bool   // the command could not be started
	whyStop  string // why it is not retried, if not for its exit code
	err      error
}

func (e *cmdError) Error() string { return e.what }
func (e *cmdError) Unwrap() error { return e.err }

// relay handles the signals retry receives: the first stops the loop and
// goes to the running attempt (once: not when the terminal already sent it
// to the command itself); a second one kills the attempt with SIGKILL.
func (r *cmdRunner) relay(sigs <-chan os.Signal, cancel context.CancelFunc, done <-chan struct{}) {
	var (
		window <-chan time.Time // the first signal's repeat window
		armed  bool             // it has passed: a signal now kills
	)
	for {
		select {
		case s := <-sigs:
			r.mu.Lock()
			first := r.sig == nil
			if first {
				r.sig = s
				proc.NoteSignal(s)
			}
			child := r.proc
			if !first && !armed && s == r.sig { // the same keypress, twice: ignored
				r.mu.Unlock()
				continue
			}
			if !first {
				r.forced = true
			}
			r.mu.Unlock()
			cancel()
			switch {
			case child == nil:
			case !first:
				child.Signal(syscall.SIGKILL)
			case !r.group && proc.FromTerminal(s) && proc.TerminalForeground():
				// --foreground, and retry's group has the terminal: the
				// terminal sent it to the command too.
			default:
				if sig, ok := s.(syscall.Signal); ok {
					child.Signal(sig)
				}
			}
			if first {
				window = time.After(repeatWindow)
			}
		case <-window:
			window, armed = nil, true
			r.mu.Lock()
			s, running := r.sig, r.proc != nil
			r.mu.Unlock()
			if running && r.onInterrupt != nil {
				r.onInterrupt(s)
			}
		case <-done:
			return
		}
	}
}

// repeatWindow is how long after a first signal the same signal again is
// taken for the same keypress or event (a terminal's and a parent's
// SIGINT, the kernel's and the shell's SIGHUP on a hang-up): it does not
// kill the attempt. It is shorter than any two presses of a key (a held
// key repeats every 30ms or more, after a delay). retry's line saying to
// send it again comes after it.
const repeatWindow = 50 * time.Millisecond

// jobControl passes Ctrl-Z on: SIGTSTP suspends the running attempt, then
// retry itself (the shell then sees the job stopped); SIGCONT (fg, bg)
// resumes the attempt.
func (r *cmdRunner) jobControl(sigs <-chan os.Signal, done <-chan struct{}) {
	suspended := false // retry sent the command SIGTSTP itself
	for {
		select {
		case s := <-sigs:
			r.mu.Lock()
			child := r.proc
			r.mu.Unlock()
			switch {
			case proc.IsSuspend(s):
				if !proc.CanStop() {
					continue // an orphaned process group ignores Ctrl-Z
				}
				// With --foreground, a Ctrl-Z at the terminal stopped the
				// command too: in retry's process group, so does fg's SIGCONT.
				suspended = child != nil && (r.group || !proc.TerminalForeground())
				if suspended {
					child.Suspend()
				}
				proc.StopSelf()
			case child != nil && (r.group || suspended):
				suspended = false
				child.Resume()
			}
		case <-done:
			return
		}
	}
}

// alarmRelay passes SIGALRM on to the running attempt, which ends as if
// its --attempt-timeout had come, as timeout(1) takes SIGALRM for its own
// timer firing (an outer "timeout -s ALRM" or a supervisor saying time is
// up). Between attempts there is nothing to end: it says so.
func (r *cmdRunner) alarmRelay(alarms <-chan os.Signal, done <-chan struct{}, log *policy.EventLog) {
	for {
		select {
		case <-alarms:
			r.mu.Lock()
			alarm := r.alarm
			r.mu.Unlock()
			if alarm == nil {
				log.Note("alarm", "SIGALRM between attempts: no attempt to end")
				continue
			}
			select {
			case alarm <- struct{}{}:
			default: // one is pending
			}
		case <-done:
			return
		}
	}
}

// command returns the exec.Cmd of one attempt of argv, in the process
// group pgid if not 0 (see prepare).
func (r *cmdRunner) command(argv []string, stdin io.Reader, pgid int) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, r.stdout, r.stderr
	cmd.WaitDelay = time.Second // bounds the copy of output left open by orphans
	proc.Prepare(cmd, r.group, pgid)
	return cmd
}

// start starts an attempt of the command, and runs a file that is not an
// executable (a script without "#!") with the shell, as execvp and
// timeout(1) do. With a watchdog, the attempt's process group is made
// first and the watchdog told of it (see proc.GroupHolder): the command, and
// all it starts, are in a group the watchdog knows from their first
// instruction. It returns the attempt's group if it is not the command's
// own (0).
func (r *cmdRunner) start(stdin io.Reader) (*exec.Cmd, int, error) {
	pgid := 0
	if r.group && r.watchdog != nil {
		if h, err := proc.NewGroupHolder(); err == nil {
			r.watchdog.Watch(h.Pgid())
			defer h.Release() // once the command is in the group
			pgid = h.Pgid()
		}
	}
	cmd := r.command(r.argv, stdin, pgid)
	err := r.children.Start(cmd)
	if errors.Is(err, syscall.ENOEXEC) && proc.Shell != "" && cmd.Path != "" {
		cmd = r.command(append([]string{proc.Shell, cmd.Path}, r.argv[1:]...), stdin, pgid)
		err = r.children.Start(cmd)
	}
	if err == nil && r.group && pgid == 0 {
		r.watchdog.Watch(cmd.Process.Pid)
	}
	return cmd, pgid, err
}

// attempt runs the command once.
func (r *cmdRunner) attempt(ctx context.Context) error {
	var stdin io.Reader
	switch {
	case r.stdinFile != "":
		f, err := os.Open(r.stdinFile)
		if err != nil {
			return retry.Permanent(&cmdError{code: cli.ExitNoExec, start: true, what: fmt.Sprintf("cannot open --stdin-file: %v", err), err: err})
		}
		defer f.Close()
		stdin = f
	case r.attempts == 0 || proc.IsTerminal(r.stdin):
		// A pipe or a file is used up by the first attempt (a retried one
		// gets an empty stdin); a terminal is there for every attempt.
		stdin = r.stdin
	}

	r.mu.Lock()
	if r.sig != nil {
		r.mu.Unlock()
		return context.Canceled
	}
	r.attempts++
	cmd, pgid, err := r.start(stdin)
	child := proc.NewProcess(cmd, r.group, pgid)
	alarm := make(chan struct{}, 1)
	if err == nil {
		r.proc, r.alarm = child, alarm
	} else if r.group {
		r.watchdog.Forget()
	}
	r.mu.Unlock()
	if err != nil {
		code := cli.ExitNoExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = cli.ExitNotFound
		}
		return retry.Permanent(&cmdError{code: code, start: true, what: fmt.Sprintf("cannot run %q: %v", r.argv[0], unwrapExec(err)), err: err})
	}

	waited := make(chan error, 1)
	go func() { waited <- r.children.Wait(cmd) }()
	// In a process group of its own, the command cannot use the terminal:
	// reading it (or setting its modes) stops it for good. SIGCHLD tells of
	// a stop.
	var ttyStop syscall.Signal // SIGTTIN or SIGTTOU stopped the command
	checkStop := func() {
		if s, ok := child.StoppedBy(); ok && proc.IsTTYStop(s) {
			ttyStop = s
			child.Signal(syscall.SIGKILL)
		}
	}
	var stops <-chan os.Signal
	if r.group {
		c, stop := proc.NotifyChildStops()
		defer stop()
		stops = c
		checkStop() // a stop before Notify signalled nobody; waitid still reports it
	}
	var (
		timedOut, killed bool
		alarmed          bool      // SIGALRM ended it
		stoppedAt        time.Time // when --signal was sent
		killAt           time.Time // zero: never (--kill-after 0)
		killTimer        *time.Timer
		killC            <-chan time.Time
		ctxDone          = ctx.Done()
	)
	// timeUp stops the attempt whose time is up: --signal, then SIGKILL if
	// it lingers (unless --kill-after 0 said never, as timeout -k 0).
	timeUp := func() {
		timedOut = true
		child.Signal(r.stopSig)
		stoppedAt = time.Now()
		if r.stopSig == syscall.SIGKILL {
			killed = true // exit 137, as timeout -s KILL
			return
		}
		if r.killAfter == 0 {
			return
		}
		killAt = r.killBy(stoppedAt, r.killAfter)
		killTimer = time.NewTimer(time.Until(killAt))
		killC = killTimer.C
	}
	defer func() {
		if killTimer != nil {
			killTimer.Stop()
		}
	}()
wait:
	for {
		select {
		case err = <-waited:
			break wait
		case <-alarm:
			alarm = nil
			if !timedOut && !r.interrupted() {
				alarmed = true
				timeUp()
			}
		case <-ctxDone:
			ctxDone = nil
			if r.interrupted() {
				// The relay has forwarded the signal: the attempt has
				// --kill-after to end, as timeout -k gives it.
				if r.interruptGrace > 0 && !timedOut {
					stoppedAt = time.Now()
					killAt = r.killBy(stoppedAt, r.interruptGrace)
					if killTimer != nil {
						killTimer.Stop()
					}
					killTimer = time.NewTimer(time.Until(killAt))
					killC = killTimer.C
				}
				continue
			}
			if !timedOut { // not already by SIGALRM
				timeUp()
			}
		case <-killC:
			killC = nil
			if child.Exited() {
				// It ended on the signal; its Wait is on the way. What it
				// left is killed after, by the clean-up (and said so).
				continue
			}
			killed = true
			child.Signal(syscall.SIGKILL)
		case <-stops:
			checkStop()
		}
	}
	// The kill timer may fire after the command ended on the signal, before
	// its end was seen (a loaded machine): the SIGKILL then reached nothing
	// of it, and its exit status says what ended it. (What it started and
	// left is dealt with below.)
	if killed && r.stopSig != syscall.SIGKILL {
		if byKill, known := proc.KilledBySIGKILL(err); known && !byKill {
			killed = false
		}
	}
	r.mu.Lock()
	forced := r.forced
	r.mu.Unlock()
	// Stopped by retry: what the command started goes with it (with
	// --kill-after 0, what ignored the signal is left running). r.proc stays
	// set meanwhile: a second signal kills what is left at once.
	leftKilled := false // what the command left running was killed
	switch {
	case forced:
		child.CleanGroup(time.Time{})
	case timedOut && r.stopSig == syscall.SIGKILL:
		child.CleanGroup(time.Time{})
	case timedOut && !killAt.IsZero():
		leftKilled = child.CleanGroup(killAt)
	case r.interrupted() && r.interruptGrace > 0:
		if killAt.IsZero() {
			killAt = r.killBy(time.Now(), r.interruptGrace)
		}
		child.CleanGroup(killAt)
	}
	r.mu.Lock()
	r.proc, r.alarm = nil, nil
	r.mu.Unlock()
	if r.group {
		r.watchdog.Forget()
	}

	if ttyStop != 0 {
		return retry.Permanent(&cmdError{code: 128 + int(ttyStop), what: "stopped by SIG" + proc.SignalName(ttyStop) + ": it uses the terminal, from a process group of its own",
			whyStop: "a command that reads the terminal needs --foreground", err: err})
	}
	if err == nil && !timedOut {
		return nil
	}
	if killed && !timedOut { // interrupted, and the --kill-after grace ran out
		return &cmdError{code: 128 + int(syscall.SIGKILL), what: fmt.Sprintf("still running %v after %s: killed with SIGKILL (--kill-after)", cli.RoundDur(max(killAt.Sub(stoppedAt), 0)), r.signalText()), err: err}
	}
	if timedOut {
		what := "stopped by the --deadline"
		if early := r.hardDeadline.Sub(r.loopDeadline); early > 0 {
			what = fmt.Sprintf("stopped by the --deadline (%s %v before it, for --kill-after)", r.stopText(), cli.RoundDur(early))
		}
		// The core cancels an attempt at --attempt-timeout with the cause
		// context.DeadlineExceeded itself, and at the policy's deadline with
		// its own error, which only matches it through errors.Is.
		switch {
		case alarmed:
			what = "stopped by SIGALRM (time is up, as for timeout(1))"
		case r.attemptTimeout > 0 && context.Cause(ctx) == context.DeadlineExceeded:
			what = fmt.Sprintf("timed out after %v (--attempt-timeout)", r.attemptTimeout)
		}
		code := cli.ExitTimeout
		switch {
		case killed && r.stopSig == syscall.SIGKILL:
			what += "; killed with SIGKILL (--signal)"
			code = 128 + int(syscall.SIGKILL)
		case killed:
			what += fmt.Sprintf("; still running %v after %s: killed with SIGKILL", cli.RoundDur(max(killAt.Sub(stoppedAt), 0)), r.stopText())
			code = 128 + int(syscall.SIGKILL)
		case leftKilled:
			// The command ended on the signal; a process it started did
			// not (timeout(1) would have left it running): still 124.
			what += fmt.Sprintf("; a process it started was still running %v after %s: killed with SIGKILL", cli.RoundDur(max(killAt.Sub(stoppedAt), 0)), r.stopText())
		}
		if r.preserveStatus { // the command's own, as timeout --preserve-status
			code = commandStatus(err)
		}
		return &cmdError{code: code, timedOut: true, what: what, err: ctx.Err()}
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return &cmdError{code: cli.ExitGaveUp, what: err.Error(), err: err}
	}
	ce := &cmdError{code: ee.ExitCode(), what: fmt.Sprintf("exit code %d", ee.ExitCode()), err: err}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		ce.code, ce.what = 128+int(ws.Signal()), "killed by signal "+proc.SignalName(ws.Signal())
	}
	// Output nobody reads any more: a shell loop would end here. (An
	// interrupted run ends anyway, and says so.)
	switch {
	case r.interrupted():
	case proc.ClosedPipe(r.stdout):
		ce.whyStop = "retry's stdout is a closed pipe"
		return retry.Permanent(ce)
	case ok && ws.Signaled() && ws.Signal() == syscall.SIGPIPE && !cli.ContainsInt(r.onExit, ce.code):
		ce.whyStop = "SIGPIPE: what reads its output has gone"
		return retry.Permanent(ce)
	}
	return ce
}

// commandStatus is the exit status a shell would give the command that
// ended with err (cmd.Wait's): its exit code, or 128+N if signal N killed
// it.
func commandStatus(err error) int {
	var ee *exec.ExitError
	if err == nil {
		return cli.ExitOK
	}
	if !errors.As(err, &ee) {
		return cli.ExitGaveUp
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// stopText names what a timed-out attempt got: "SIGTERM", or for --signal
// 0 nothing.
func (r *cmdRunner) stopText() string {
	if r.stopSig == 0 {
		return "its time was up (--signal 0: no signal)"
	}
	return "SIG" + proc.SignalName(r.stopSig)
}

// killBy returns when an attempt signalled at from is killed if it still
// runs: grace later, but by the --deadline (a deadline is a deadline).
func (r *cmdRunner) killBy(from time.Time, grace time.Duration) time.Time {
	t := from.Add(grace)
	if !r.hardDeadline.IsZero() && r.hardDeadline.Before(t) {
		return r.hardDeadline
	}
	return t
}

// signalText names the signal retry received ("SIGTERM").
func (r *cmdRunner) signalText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sig.(syscall.Signal); ok {
		return "SIG" + proc.SignalName(s)
	}
	return "the signal"
}

func (r *cmdRunner) interrupted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sig != nil
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
	return cli.ContainsInt(r.onExit, ce.code)
}

// describe turns an attempt error into log fields.
func (r *cmdRunner) describe(err error) policy.AttemptInfo {
	var ce *cmdError
	if !errors.As(err, &ce) {
		return policy.AttemptInfo{What: err.Error(), Error: err.Error()}
	}
	info := policy.AttemptInfo{What: ce.what}
	switch {
	case ce.start:
		info.Error = ce.what
		info.WhyStop = "the command cannot be started"
		info.Start = true
	case ce.timedOut:
		info.Error = ce.what
	default:
		code := ce.code
		info.ExitCode = &code
		if strings.HasPrefix(ce.what, "killed") {
			info.Error = ce.what
		}
		if ce.whyStop != "" {
			info.WhyStop = ce.whyStop
		} else if r.onExit != nil && !cli.ContainsInt(r.onExit, code) {
			info.WhyStop = fmt.Sprintf("exit code %d is not in --on-exit-codes", code)
		}
	}
	return info
}

// exitCode is the exit status of retry for the loop's result.
func (r *cmdRunner) exitCode(err error) int {
	if err == nil {
		return cli.ExitOK
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
	var re *retry.Error
	if errors.As(err, &re) && re.Attempts == 0 && re.Reason == retry.ReasonDeadline {
		// The --deadline passed before the first attempt, or the fleet's
		// quota or cooldown would need a wait past it: either way the
		// deadline cannot be met and nothing ran, a timeout (124), as a
		// script that tells "out of time" from "failed" expects.
		return cli.ExitTimeout
	}
	var ce *cmdError
	if errors.As(err, &ce) {
		return ce.code
	}
	return cli.ExitGaveUp
}

// unwrapExec shortens exec's start errors ("exec: "x": executable file not
// found in $PATH" becomes "executable file not found in $PATH").
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return cli.UnwrapPath(err)
}

// Flags returns the flag set of the command mode: every flag Run accepts,
// as it parses them (the manual lists each one).
func Flags() *flag.FlagSet { return newCommandFlags().fs }
