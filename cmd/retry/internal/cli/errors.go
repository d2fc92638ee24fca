package cli

import (
	"errors"
	"fmt"
	"io"
)

// Exit codes shared by every mode.
const (
	ExitOK       = 0
	ExitGaveUp   = 1 // retry http: gave up on a retryable status; retry demo: failed
	ExitUsage    = 2 // bad usage or config
	ExitTimeout  = 124
	ExitNoExec   = 126
	ExitNotFound = 127
)

// UsageError is bad usage or config: one line on stderr, exit 2.
type UsageError struct{ Msg string }

// Error returns the message.
func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a UsageError with the message formatted as fmt.Sprintf does.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Sprintf(format, args...)}
}

// ExitError is an error that ends retry with its own exit status (curl's
// 3 for a malformed URL, 1 for an unsupported protocol, 26 for a body file
// that cannot be read), one line on stderr.
type ExitError struct {
	Code int
	Msg  string
}

// Error returns the message.
func (e *ExitError) Error() string { return e.Msg }

// ExitErrorf returns an ExitError with exit status code and the message
// formatted as fmt.Sprintf does.
func ExitErrorf(code int, format string, args ...any) error {
	return &ExitError{code, fmt.Sprintf(format, args...)}
}

// Fail prints one "PROG: ..." line for err on stderr and returns the exit code
// for it: 2 for usage errors, 1 otherwise.
func Fail(stderr io.Writer, prog string, err error) int {
	var ue *UsageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %s (see '%s --help')\n", prog, OneLine(err.Error()), prog)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", prog, OneLine(err.Error()))
	return ExitGaveUp
}
