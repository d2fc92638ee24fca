// Command retry runs a command, an HTTP request or a demo with Google's
// truncated exponential backoff with jitter (package
// github.com/backoffkit/retry).
//
// Usage:
//
//	retry [flags] -- COMMAND [ARGS...]   run COMMAND, retry it while it fails
//	retry http [flags] URL               a curl-like client that retries
//	retry demo [flags]                   a flaky loopback server, strategies side by side
//	retry sim EXPERIMENT [flags]         the strategy simulator
//	retry help [SUBCOMMAND]              the manual
//	retry --version
//
// Run "retry --help" or "retry help SUBCOMMAND" for the flags and exit codes.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/command"
	"github.com/backoffkit/retry/cmd/retry/internal/demo"
	"github.com/backoffkit/retry/cmd/retry/internal/httpcmd"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
	"github.com/backoffkit/retry/cmd/retry/internal/simcmd"
)

// subcommands maps a subcommand name to its entry point.
var subcommands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"http": httpcmd.Run,
	"demo": demo.Run,
	"sim":  simcmd.Run,
}

func main() {
	switch {
	case proc.IsWatchdog():
		os.Exit(proc.WatchdogMain())
	case proc.IsGroupHolder():
		os.Exit(proc.GroupHolderMain())
	}
	proc.WholeProcess = true
	proc.ExitProcess(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the whole command, minus os.Exit: it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if sub, ok := subcommands[args[0]]; ok {
			return sub(args[1:], stdout, stderr)
		}
		switch args[0] {
		case "help": // "retry help", "retry help http": a command named help runs with "retry -- help"
			if len(args) > 1 && args[1] != "help" { // "retry help help" is "retry help"
				if sub, ok := subcommands[args[1]]; ok {
					return sub([]string{"--help"}, stdout, stderr)
				}
				fmt.Fprintf(stderr, "retry: no help for %q (subcommands: %s; see 'retry --help')\n", args[1], strings.Join(subcommandNames(), ", "))
				return cli.ExitUsage
			}
			return command.Run([]string{"--help"}, stdin, stdout, stderr, subcommandNames())
		case "version":
			fmt.Fprintln(stdout, cli.VersionLine())
			return cli.ExitOK
		}
	}
	return command.Run(args, stdin, stdout, stderr, subcommandNames())
}

// subcommandNames returns the names in subcommands, sorted.
func subcommandNames() []string {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
