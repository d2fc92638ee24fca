package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/backoffkit/retry/httpretry"
)

// ParseFlags parses args with fs and reports whether help was asked for.
// fs's output must be io.Discard: errors come back, already worded for a user
// (see FlagMessage).
func ParseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	err = fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return true, nil
	}
	if err != nil {
		return false, &UsageError{FlagMessage(err.Error(), fs, args)}
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

// FlagMessage rewrites the flag package's message for a user: a flag is
// named as users type it, -H for a one-letter flag and --max-time for a
// long one (the flag package writes one dash for both), and an unknown
// flag exactly as it was typed in args (-nope, --nope); the value of a
// flag that may hold a secret (-H, -u, a URL, ...) is not quoted, and any
// other is quoted with its URL credentials redacted.
func FlagMessage(msg string, fs *flag.FlagSet, args []string) string {
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

// typedFlag returns how the flag name was typed: DashName(name) for a flag
// fs defines, else the word of args (before "--") that named it, without
// its "=value".
func typedFlag(name string, fs *flag.FlagSet, args []string) string {
	if fs != nil && fs.Lookup(name) != nil {
		return DashName(name)
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
	return DashName(name)
}

// UnwrapPath drops the path from an *os.PathError (the caller names it).
func UnwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// PrintFlags prints fs's flags, sorted, as users type them: -H, --max-time.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if arg == "value" {
			arg = ""
		}
		if _, ok := f.Value.(interface{ IsBoolFlag() bool }); ok {
			arg = ""
		}
		line := "  " + DashName(f.Name)
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, usage)
	})
}

// DashName writes a flag name as users type it: one dash for a one-letter
// flag (-H), two for a long one (--max-time), as curl and GNU tools do.
func DashName(name string) string {
	name = strings.TrimLeft(name, "-")
	if len([]rune(name)) == 1 {
		return "-" + name
	}
	return "--" + name
}
