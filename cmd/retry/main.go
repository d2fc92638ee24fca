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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"github.com/backoffkit/retry/cmd/retry/internal/proc"
	"github.com/backoffkit/retry/httpretry"
)

// subcommands maps a subcommand name to its entry point. Other files add to it
// from init (sim.go adds "sim").
var subcommands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"http": runHTTP,
	"demo": runDemo,
}

// Exit codes shared by every mode.
const (
	exitOK       = 0
	exitGaveUp   = 1 // retry http: gave up on a retryable status; retry demo: failed
	exitUsage    = 2 // bad usage or config
	exitTimeout  = 124
	exitNoExec   = 126
	exitNotFound = 127
)

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
				return exitUsage
			}
			return runCommand([]string{"--help"}, stdin, stdout, stderr)
		case "version":
			fmt.Fprintln(stdout, versionLine())
			return exitOK
		}
	}
	return runCommand(args, stdin, stdout, stderr)
}

// version returns what retry was built from, as debug.ReadBuildInfo says.
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi)
}

// versionOf returns the module version in bi (the tag when installed with
// "go install ...@vX.Y.Z" or built from a tagged checkout, a pseudo-version
// otherwise, "devel" when the go command stamped none) followed by the VCS
// revision, its time and "+dirty" for uncommitted changes when the build
// recorded them (go build -buildvcs, the default in a git checkout):
// "v1.2.0", "devel (revision 0123456789ab+dirty, 2026-11-30T20:30:00Z)".
func versionOf(bi *debug.BuildInfo) string {
	if bi == nil {
		return "devel"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if strings.HasSuffix(strings.TrimSuffix(v, "+dirty"), rev) {
		return v // a pseudo-version already ends with the revision
	}
	v += " (revision " + rev + dirty
	if when != "" {
		v += ", " + when
	}
	return v + ")"
}

// versionLine is what "retry --version" prints.
func versionLine() string {
	return fmt.Sprintf("retry %s (github.com/backoffkit/retry, %s %s/%s)", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
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

// usageError is bad usage or config: one line on stderr, exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// exitError is an error that ends retry with its own exit status (curl's
// 3 for a malformed URL, 1 for an unsupported protocol, 26 for a body file
// that cannot be read), one line on stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func exitErrorf(code int, format string, args ...any) error {
	return &exitError{code, fmt.Sprintf(format, args...)}
}

// parseFlags parses args with fs and reports whether help was asked for.
// fs's output must be io.Discard: errors come back, already worded for a user
// (see flagMessage).
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	err = fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return true, nil
	}
	if err != nil {
		return false, &usageError{flagMessage(err.Error(), fs, args)}
	}
	return false, nil
}

// The flag package's messages: "flag provided but not defined: -nope",
// "invalid value "x" for flag -H: ...", "invalid boolean value "x" for
// -quiet: ...", "flag needs an argument: -o".
var (
	flagUndefinedRE = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	flagInvalidRE   = regexp.MustCompile(`(?s)^invalid (boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-([^:]+): (.*)$`)
	flagNeedsArgRE  = regexp.MustCompile(`^flag needs an argument: -(.*)$`)
)

// secretFlags are the flags whose values may hold a secret (a header, a
// password, a URL with user info, a request body): an error about one
// never quotes its value.
var secretFlags = map[string]bool{
	"H": true, "header": true, "u": true, "user": true, "x": true, "proxy": true, "url": true,
	"redis": true, "F": true, "form": true, "d": true, "data": true, "data-binary": true,
	"data-urlencode": true, "json": true, "idempotency-key": true, "A": true, "user-agent": true,
}

// flagMessage rewrites the flag package's message for a user: a flag is
// named as users type it, -H for a one-letter flag and --max-time for a
// long one (the flag package writes one dash for both), and an unknown
// flag exactly as it was typed in args (-nope, --nope); the value of a
// flag that may hold a secret (-H, -u, a URL, ...) is not quoted, and any
// other is quoted with its URL credentials redacted.
func flagMessage(msg string, fs *flag.FlagSet, args []string) string {
	if m := flagUndefinedRE.FindStringSubmatch(msg); m != nil {
		return "flag provided but not defined: " + typedFlag(m[1], fs, args)
	}
	if m := flagNeedsArgRE.FindStringSubmatch(msg); m != nil {
		return "flag needs an argument: " + typedFlag(m[1], fs, args)
	}
	if m := flagInvalidRE.FindStringSubmatch(msg); m != nil {
		name, reason := m[3], m[4]
		if reason == "parse error" && fs != nil && fs.Lookup(name) != nil {
			reason = parseErrorReason(fs.Lookup(name).Value)
		}
		what, forFlag := "invalid value", "for flag"
		if m[1] != "" {
			what, forFlag = "invalid boolean value", "for"
		}
		if secretFlags[name] {
			return fmt.Sprintf("%s %s %s: %s", what, forFlag, typedFlag(name, fs, args), reason)
		}
		value, _ := strconv.Unquote(m[2])
		return fmt.Sprintf("%s %q %s %s: %s", what, httpretry.RedactText(value), forFlag, typedFlag(name, fs, args), reason)
	}
	return httpretry.RedactText(msg)
}

// parseErrorReason words the flag package's "parse error" for the kind of
// value the flag wants.
func parseErrorReason(v flag.Value) string {
	switch fmt.Sprintf("%T", v) {
	case "*flag.intValue", "*flag.int64Value", "*flag.uintValue", "*flag.uint64Value":
		return "not a whole number"
	case "*flag.float64Value":
		return "not a number"
	case "*flag.boolValue":
		return "want true or false"
	case "*flag.durationValue":
		return "not a duration (e.g. 1.5s or 250ms)"
	}
	return "parse error"
}

// typedFlag returns how the flag name was typed: dashName(name) for a flag
// fs defines, else the word of args (before "--") that named it, without
// its "=value".
func typedFlag(name string, fs *flag.FlagSet, args []string) string {
	if fs != nil && fs.Lookup(name) != nil {
		return dashName(name)
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		word, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(word, "-") && strings.TrimLeft(word, "-") == name {
			return word
		}
	}
	return dashName(name)
}

// fail prints one "PROG: ..." line for err on stderr and returns the exit code
// for it: 2 for usage errors, 1 otherwise.
func fail(stderr io.Writer, prog string, err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %s (see '%s --help')\n", prog, oneLine(err.Error()), prog)
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", prog, oneLine(err.Error()))
	return exitGaveUp
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
