package curl

import (
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"io"
	"net"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/httpretry"
)

// Exit codes of retry http, curl's where the cause is the same (see
// httpHelp). cli.ExitGaveUp (1) is ours: the server kept answering a retryable
// status until the attempts, the deadline or the budget ran out.
const (
	ExitUnsupported   = 1
	ExitURLMalformat  = 3
	ExitResolve       = 6
	ExitConnect       = 7
	ExitPartial       = 18
	ExitHTTPError     = 22
	ExitWrite         = 23
	ExitRead          = 26
	ExitTimeout       = 28
	ExitTLS           = 35
	ExitTooManyRedirs = 47
	ExitGotNothing    = 52
	ExitBadEncoding   = 61
	ExitCACertFile    = 77
	ExitSend          = 55
	ExitRecv          = 56
)

// ErrTooManyRedirects is the redirect chain's end past --max-redirs
// (curl's exit 47).
var ErrTooManyRedirects = errors.New("too many redirects")

// TransportExitCode maps the error of a request that got no response to
// curl's exit code for the same cause.
func TransportExitCode(err error) int {
	if errors.Is(err, ErrTooManyRedirects) {
		return ExitTooManyRedirs
	}
	var ee *cli.ExitError
	if errors.As(err, &ee) { // a redirect refused by checkRedirect or RoundTrip
		return ee.Code
	}
	var addrErr *net.AddrError
	if errors.As(err, &addrErr) { // a redirect to an invalid port
		return ExitURLMalformat
	}
	var ae *httpretry.AttemptError
	if errors.As(err, &ae) {
		switch ae.Class {
		case httpretry.ClassDNS:
			return ExitResolve
		case httpretry.ClassRefused, httpretry.ClassDial:
			return ExitConnect
		case httpretry.ClassTimeout:
			return ExitTimeout
		case httpretry.ClassTLS:
			return ExitTLS
		case httpretry.ClassBrokenPipe:
			return ExitSend
		case httpretry.ClassBody:
			return ExitRead
		case httpretry.ClassEOF:
			if errors.Is(err, io.EOF) { // closed before a byte of the answer
				return ExitGotNothing
			}
		}
		return ExitRecv
	}
	var re *retry.Error
	if errors.As(err, &re) && re.Last == nil { // refused before any attempt
		if re.Reason == retry.ReasonDeadline { // the fleet's wait would pass --deadline
			return ExitTimeout
		}
		return cli.ExitGaveUp
	}
	var to interface{ Timeout() bool }
	if errors.As(err, &to) && to.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return ExitTimeout
	}
	return ExitRecv
}

// BodyExitCode maps an error reading the response body to curl's code.
func BodyExitCode(err error) int {
	var to interface{ Timeout() bool }
	var corrupt flate.CorruptInputError
	var enc *encodingError
	switch {
	case errors.As(err, &enc):
		return ExitBadEncoding
	case errors.Is(err, gzip.ErrHeader), errors.Is(err, gzip.ErrChecksum), errors.Is(err, zlib.ErrHeader),
		errors.Is(err, zlib.ErrChecksum), errors.Is(err, zlib.ErrDictionary), errors.As(err, &corrupt):
		return ExitBadEncoding // --compressed: not what Content-Encoding says
	case errors.Is(err, io.ErrUnexpectedEOF):
		return ExitPartial
	case errors.As(err, &to) && to.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout
	}
	return ExitRecv
}
