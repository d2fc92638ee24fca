package command

import (
	"flag"
	"fmt"
	"io"

	"github.com/backoffkit/retry/cmd/retry/internal/policy"
)

// The manual page of "retry --help". It lists the flags by hand, grouped,
// as users type them; a test checks that every flag the parser accepts is
// listed.

const commandHelp = `NAME
    retry - run a command again while it fails, with exponential backoff
    and jitter

SYNOPSIS
    retry [OPTIONS] -- COMMAND [ARGS...]
    retry http [OPTIONS] URL        (see 'retry help http')
    retry demo | sim ...            (see 'retry help demo', 'retry help sim')
    retry help [SUBCOMMAND]
    retry --version

DESCRIPTION
    Runs COMMAND, and runs it again while it fails, waiting between attempts
    with Google's truncated exponential backoff with jitter: before retry n
    (from 0) the wait is min(initial_delay * exp_base^n + U(0, jitter),
    max_delay). It stops on success, after --attempts attempts, at the
    --deadline, or on an exit code not in --on-exit-codes, and exits with the
    command's last exit code. One line per retry goes to stderr; the
    command's own output is untouched.

    A pipe or a file on stdin is passed to the first attempt only: a
    retried command gets an empty stdin, unless --stdin-file names a file
    to give every attempt. A terminal is there for every attempt.

PROCESS CONTROL
    Like timeout(1), each attempt runs in a process group of its own. When
    --attempt-timeout or --deadline stops an attempt, the whole group gets
    --signal (SIGTERM), then SIGKILL if anything in it still runs
    --kill-after (1s) later, so a shell's children and grandchildren go with
    it. A deadline is a deadline: retry ends by --deadline, grace included
    (the signal comes --kill-after, at most half the deadline, before it;
    --signal KILL comes at the deadline). With --kill-after 0 the signal
    comes at the deadline itself and nothing is killed, as timeout(1)
    without -k: retry waits for a command that ignores it. --signal 0 (or
    EXIT) sends nothing: only --kill-after's SIGKILL comes, as timeout -s 0.
    SIGALRM sent to retry ends the running attempt as if its
    --attempt-timeout had come, as timeout(1) takes it for its own timer
    (so an outer "timeout -s ALRM" reaches the command through retry).

    Ctrl-C (SIGINT), Ctrl-\ (SIGQUIT), SIGTERM and SIGHUP go to the
    attempt once, and no further attempt starts; if --kill-after was given,
    what still runs that long later is killed, as timeout -k does. A second
    one kills the attempt with SIGKILL at once. Once the attempt is gone
    and its line written, retry ends by that signal itself (SIGQUIT: on
    Linux), as timeout(1) does: a shell shows 130 after Ctrl-C and stops
    its loop or script too.
    The same signal again within 50ms is the same keypress (a parent that
    passed it on too) and does nothing. A SIGHUP ignored when retry started
    (nohup) stays ignored, by retry and the command. SIGINT and SIGQUIT
    ignored at start are a shell's doing (it starts "cmd &" so in a
    script): as timeout(1), retry takes them anyway, and the command starts
    with them at their default. (A Go program cannot see that another
    signal was ignored at start: SIGTERM, SIGALRM and Ctrl-Z work as usual.)

    A command that reads the terminal (an editor, a password prompt) needs
    --foreground: it then runs in retry's own process group, gets the
    terminal's Ctrl-C itself (retry does not send it again: a SIGINT,
    SIGQUIT or SIGHUP sent to retry alone ends the command only with
    --kill-after's SIGKILL), and only the command, not its children, is
    signalled on a timeout. Without it, the
    terminal stops such a command (SIGTTIN, SIGTTOU): retry ends it and says
    so (exit 149 or 150, not retried) rather than wait for it for ever.

    Ctrl-Z (SIGTSTP) suspends the attempt, then retry; fg or bg (SIGCONT)
    resumes both. If retry is killed (kill -9), a watchdog process that it
    starts kills the attempt's process group with SIGKILL (Linux, macOS,
    the BSDs): the command and what it started, but not what left the
    group (setsid, a nested timeout(1)), as on a timeout. With
    --foreground, only the command itself is killed, and only on Linux
    (the parent-death signal): what it started runs on, as everything
    does on Windows.

OPTIONS
  Retry policy (Gen AI SDK names):
%s
    --deadline DURATION      total time for all attempts and waits; 0 for
                             none (default none)
    --attempt-timeout DURATION
                             time limit of one attempt; a hung attempt is
                             stopped and retried; 0 for none (default none)
    --profile NAME           %s
    --config FILE            JSON settings (see CONFIG FILE)
    --seed N                 seed of the jitter, for reproducible waits
                             (default random)
  Fleet (every retry process with the same --redis and --fleet; see FLEET):
    --redis URL              the Redis server the fleet shares, e.g.
                             redis://127.0.0.1:6379/0,
                             redis://:PASSWORD@host:6379/0,
                             rediss://host:6380 (TLS), unix:///run/redis.sock,
                             a cluster: redis://h1:p1?addr=h2:p2&addr=h3:p3
    --fleet NAME             the fleet's key, e.g. myproject:gemini-2.5-flash:
                             turns on the fleet's retry budget and its shared
                             cooldown
    --quota RATE             the fleet's quota, e.g. 40/1s or 600/1m: every
                             attempt of every process waits for its turn
                             (needs --fleet)
    --fleet-size N           the processes sharing --quota: while Redis is
                             unavailable each paces at RATE/N (default the
                             processes counted in Redis, 10 before any was)
    --redis-timeout DURATION time limit of each Redis call, at most a tenth of
                             --deadline; past it this process decides alone
                             (default 20ms)
    --redis-dial-timeout DURATION
                             time limit of a connection's setup (the dial,
                             the TLS handshake), at most a tenth of
                             --deadline: the first decisions wait for it
                             (default 1s)
    --redis-ca FILE          CA certificates (PEM) of a rediss:// Redis
                             (default the system's, SSL_CERT_FILE)
    --redis-cert FILE        client certificate (PEM), for a rediss:// Redis
                             that asks for one
    --redis-key FILE         the key (PEM) of --redis-cert
  Command:
    --on-exit-codes CODES    exit codes worth a retry, e.g. 1,75 (default any
                             non-zero)
    --stdin-file FILE        give FILE as stdin to every attempt
    --signal SIG             signal for a stopped attempt: TERM, INT, HUP,
                             KILL, USR1, ... or a number; 0 or EXIT for
                             none (default TERM)
    --kill-after DURATION    SIGKILL what still runs this long after --signal
                             (default 1s); 0: never, as timeout -k 0
    --foreground             run in retry's process group, for commands that
                             read the terminal (see PROCESS CONTROL)
    --preserve-status        when a timeout stopped the last attempt, exit
                             with the command's own status, not 124 (as
                             timeout --preserve-status)
  Output:
    --log-format FORMAT      text (default) or json: one JSON object per line
                             on stderr, with an RFC 3339 "time", the closing
                             line and usage errors included
    --quiet                  no retry log; a command that cannot be started
                             is still reported
    --help                   this manual (also 'retry help')
    --version                the version, and the VCS revision it was built
                             from when the build recorded it

    DURATION is Go syntax (1.5s, 250ms, 2m), a number of seconds (0.25) or
    of days (1d, as timeout(1)).
    Precedence: defaults (or --profile) < --config < flags; an explicit 0
    for --deadline or --attempt-timeout means none, whatever the profile says.

FLEET
    Processes on many machines (CI jobs, workers) that call one API share
    its quota: with --redis and --fleet, every retry process of the fleet
    keeps one retry budget (retries at most 20 %% of the fleet's requests
    over 10 s), honours one cooldown (a server's Retry-After or RetryInfo
    seen by any of them pauses all of them, up to 60s), and with --quota
    paces every attempt, the first included, so that the fleet stays under
    RATE. A wait that would end after --deadline is not begun: retry gives
    up at once. The fleet's budget replaces a profile's per-process one.
    Redis is a helper: if it is down, slow or refuses the password, the
    command runs all the same, decided by this process alone (one log
    line), and the fleet is used again when Redis answers. A password in the
    URL is never printed; a config file keeps it off the command line.

CONFIG FILE
    A JSON object with the Gen AI SDK's HttpRetryOptions names, durations in
    seconds (or strings like "250ms"). Keys are case-sensitive and may appear
    once; snake_case and the JS SDK's camelCase are both accepted:
        %s
    A key set to null, an unknown key, or a value out of range is an error
    naming the file and the key. redis, fleet, quota, fleet_size,
    redis_timeout, redis_dial_timeout, redis_ca, redis_cert and redis_key
    are the fleet flags (file names relative to the working directory).
        {"attempts": 8, "initial_delay": 0.5, "max_delay": 30, "deadline": 300}
        {"redis": "redis://ci-redis:6379/0", "fleet": "gemini-flash",
         "quota": "600/1m"}

EXIT STATUS
    the command's last exit code (0 once it succeeds)
    2      bad usage or config (a command may also exit 2)
    124    the last attempt was stopped by --attempt-timeout, --deadline
           or SIGALRM (with --preserve-status: the command's own status),
           or the --deadline passed before the first, or the fleet's
           quota or cooldown would need a wait past it (nothing was run)
    126    the command could not be run (permission denied); not retried
    127    the command was not found; not retried
    128+N  the last attempt was killed by signal N; 137 when retry had to
           SIGKILL a stopped command (--kill-after, --signal KILL), 124 if
           only what it started needed SIGKILL; 141 for
           SIGPIPE, not retried, nor any failure once retry's stdout is a
           closed pipe (retry -- yes | head -1)
    130    interrupted by Ctrl-C (SIGINT); 143 by SIGTERM, 129 by SIGHUP,
           131 by SIGQUIT: retry ends by the signal, which a shell shows so

EXAMPLES
    retry --deadline 300s --attempts 8 -- ./deploy.sh
    retry --on-exit-codes 2 --attempt-timeout 30s -- make test
        (GNU make exits 2 when a recipe fails, whatever the recipe's code)
    retry --foreground -- ssh host uptime
    retry --redis redis://127.0.0.1:6379/0 --fleet gemini --quota 600/1m \
        -- ./ask.sh
`

// printCommandHelp prints the manual of the command mode.
func printCommandHelp(w io.Writer, _ *flag.FlagSet) {
	fmt.Fprintf(w, commandHelp, policy.BackoffFlagsText(), policy.ProfileText(), policy.ConfigKeysText())
}
