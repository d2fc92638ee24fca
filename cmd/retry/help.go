package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/backoffkit/retry"
)

// The manual pages of "retry --help" and "retry http --help". Each lists its
// flags by hand, grouped, as users type them; a test checks that every flag
// the parser accepts is listed.

const commandHelp = `NAME
    retry - run a command again while it fails, with exponential backoff and jitter

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

    Stdin is passed to the first attempt only: a retried command gets an
    empty stdin, unless --stdin-file names a file to give every attempt.

PROCESS CONTROL
    Like timeout(1), each attempt runs in a process group of its own. When
    --attempt-timeout or --deadline stops an attempt, the whole group gets
    --signal (SIGTERM), then SIGKILL if anything in it still runs
    --kill-after (1s) later, so a shell's children and grandchildren go with
    it. A deadline is a deadline: retry ends by --deadline, grace included
    (the signal comes --kill-after, at most half the deadline, before it).

    Ctrl-C (SIGINT), SIGTERM and SIGHUP are passed on to the attempt once,
    and no further attempt starts; a second one kills the attempt with
    SIGKILL and retry exits at once (130 after Ctrl-C).

    A command that reads the terminal (an editor, a password prompt) needs
    --foreground: it then runs in retry's own process group, gets the
    terminal's Ctrl-C itself (retry does not send it again), and only the
    command, not its children, is signalled on a timeout.

OPTIONS
  Retry policy (Gen AI SDK names):
    --attempts N             attempts in all, the first included (default 5)
    --initial-delay DURATION wait before the first retry, before jitter (default 1s)
    --max-delay DURATION     cap on any single wait (default 60s)
    --exp-base B             growth factor of the waits (default 2)
    --jitter DURATION        upper bound of the random extra per wait; 0 for none (default 1s)
    --jitter-shape SHAPE     %s (default google)
    --deadline DURATION      total time for all attempts and waits; 0 for none (default none)
    --attempt-timeout DURATION
                             time limit of one attempt; a hung attempt is stopped and
                             retried; 0 for none (default none)
    --profile NAME           start from a profile: %s
    --config FILE            JSON settings (see CONFIG FILE)
    --seed N                 seed of the jitter, for reproducible waits (default random)
  Command:
    --on-exit-codes CODES    exit codes worth a retry, e.g. 1,75 (default any non-zero)
    --stdin-file FILE        give FILE as stdin to every attempt
    --signal SIG             signal for a stopped attempt: TERM, INT, HUP, KILL, USR1, ...
                             or a number (default TERM)
    --kill-after DURATION    SIGKILL what still runs this long after --signal (default 1s)
    --foreground             run in retry's process group, for commands that read the
                             terminal (see PROCESS CONTROL)
  Output:
    --log-format FORMAT      text (default) or json: one JSON object per line on stderr,
                             with an RFC 3339 "time", the closing line included
    --quiet                  no retry log; a command that cannot be started is still reported
    --help                   this manual (also 'retry help')
    --version                the version

    DURATION is Go syntax (1.5s, 250ms, 2m) or a number of seconds (0.25).
    Precedence: defaults (or --profile) < --config < flags; an explicit 0
    for --deadline or --attempt-timeout means none, whatever the profile says.

CONFIG FILE
    A JSON object with the Gen AI SDK's HttpRetryOptions names, durations in
    seconds (or strings like "250ms"). Keys are case-sensitive and may appear
    once; snake_case and the JS SDK's camelCase are both accepted:
        %s
    A key set to null, an unknown key, or a value out of range is an error
    naming the file and the key.
        {"attempts": 8, "initial_delay": 0.5, "max_delay": 30, "deadline": 300}

EXIT STATUS
    the command's last exit code (0 once it succeeds)
    2      bad usage or config (a command may also exit 2)
    124    the last attempt was stopped by --attempt-timeout or --deadline
    126    the command could not be run (permission denied); not retried
    127    the command was not found; not retried
    128+N  the last attempt was killed by signal N; 137 when retry had to
           SIGKILL a stopped attempt after --kill-after
    130    interrupted by Ctrl-C (SIGINT); 143 by SIGTERM, 129 by SIGHUP

EXAMPLES
    retry --deadline 300s --attempts 8 -- ./deploy.sh
    retry --on-exit-codes 1,75 --attempt-timeout 30s -- make test
    retry --foreground -- ssh host uptime
`

// printCommandHelp prints the manual of the command mode.
func printCommandHelp(w io.Writer, _ *flag.FlagSet) {
	fmt.Fprintf(w, commandHelp, shapeList(), strings.Join(retry.ProfileNames(), ", "), configKeysText())
}

// configKeysText lists the config keys, aliases paired: "attempts,
// initial_delay (initialDelay), ...".
func configKeysText() string {
	var parts []string
	for i := 0; i < len(configKeys); i++ {
		k := configKeys[i]
		if i+1 < len(configKeys) && configKeys[i+1].field == k.field {
			parts = append(parts, k.name+" ("+configKeys[i+1].name+")")
			i++
			continue
		}
		parts = append(parts, k.name)
	}
	return wrap(strings.Join(parts, ", "), 72, "        ")
}

// wrap breaks s into lines of at most width characters, the second and later
// lines indented by indent.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		if i > 0 {
			if line+1+len(word) > width {
				b.WriteString("\n" + indent)
				line = 0
			} else {
				b.WriteByte(' ')
				line++
			}
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}
