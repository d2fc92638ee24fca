package httpretry

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
)

// ErrNotIdempotent says a retry was skipped because the request is not safe
// to repeat and may have been acted on: a POST or PATCH without an
// Idempotency-Key header, neither marked with [Idempotent] nor made
// idempotent by [AllowNonIdempotent] or a rule (see [GoogleReadOnly] and
// [IdempotentIf]), or a request marked with [NotIdempotent], that failed in
// a way that proves neither that it never reached the server nor that the
// server refused it (see "Idempotency" in the package documentation). It
// is reachable with errors.Is from the Err of the give-up event the
// policy's Observer receives, and from the error RoundTrip returns when the
// attempt failed with a transport error.
var ErrNotIdempotent = errors.New("httpretry: not retried: the request is not idempotent (POST/PATCH without an Idempotency-Key header, not marked idempotent, no rule)")

// ErrBodyNotReplayable says a retry was skipped because the request body
// cannot be sent again: it has no GetBody, was not buffered (longer than
// [MaxBufferedBody], or a request that is not idempotent) and had already
// been read, or GetBody failed (its error is in the chain too) or returned
// no body. It is reachable like [ErrNotIdempotent].
var ErrBodyNotReplayable = errors.New("httpretry: not retried: the request body cannot be replayed (no GetBody, not buffered, already sent)")

// Classes of [AttemptError].
const (
	ClassStatus        = "status"         // a response with a retryable status code
	ClassStreamError   = "stream-error"   // a streamed answer whose first event is an error with a retryable status
	ClassRefused       = "refused"        // connection refused (never sent)
	ClassDial          = "dial"           // another dial failure (never sent); not retried when the address is invalid (a port above 65535)
	ClassDNS           = "dns"            // a host name lookup failure (never sent)
	ClassReset         = "reset"          // connection reset or aborted
	ClassBrokenPipe    = "broken-pipe"    // broken pipe while sending
	ClassClosed        = "closed"         // the connection was closed under the request
	ClassEOF           = "eof"            // EOF before a complete response
	ClassTimeout       = "timeout"        // a network timeout or the attempt timeout
	ClassGoAway        = "goaway"         // HTTP/2 GOAWAY
	ClassRefusedStream = "refused-stream" // HTTP/2 REFUSED_STREAM (never sent)
	ClassTLS           = "tls"            // a TLS certificate or handshake error (not retried)
	ClassBody          = "body"           // the request body failed: a read error, or a length other than its ContentLength (never retried)
	ClassOther         = "other"          // any other error (not retried)
)

// Hint sources of [AttemptError].
const (
	HintRetryAfter = "retry-after" // the Retry-After header
	HintRetryInfo  = "retryinfo"   // google.rpc.RetryInfo in the JSON body
)

// AttemptError describes one failed HTTP attempt. It is what
// retry.Event.Err carries for each attempt (find it with errors.As), and what
// the [*retry.Error] RoundTrip returns on giving up keeps in its Last error
// (see "Errors" in the package documentation). Its message is redacted (see
// [Redact]).
type AttemptError struct {
	Method string // the request method
	URL    string // the attempt's URL, redacted
	// Endpoint is the scheme://host[:port] that served the attempt (with
	// [WithEndpoints], the endpoint chosen for it).
	Endpoint string
	// Status is the response's status code, 0 for a transport error. For
	// ClassStreamError it is the status the stream's first event stands
	// for (its "code", or the HTTP status of its gRPC "status").
	Status int
	// Class says what went wrong: ClassStatus for a retryable status,
	// ClassStreamError for a stream whose first event is a retryable error,
	// else the transport error's class (ClassReset, ClassTimeout, ...),
	// also when a stream failed before its first event was complete.
	Class string
	// HintSource says where the server's hint for the next wait came from:
	// HintRetryAfter, HintRetryInfo, or "" for none.
	HintSource string
	// Err is the transport error (nil for a status), or what the stream's
	// first event said.
	Err error

	host, path string // of the attempt's URL, for logs
}

// Error returns "httpretry: METHOD URL: " followed by the status ("503
// Service Unavailable") or the class and the transport error, with the URL
// redacted ([Redact]) and the error's text too ([RedactText]).
func (e *AttemptError) Error() string {
	msg := "httpretry: " + e.Method + " " + e.URL + ": "
	if e.Class == ClassStatus {
		return msg + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	}
	msg += e.Class
	if e.Status != 0 {
		msg += " " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	}
	if e.Err != nil {
		err := e.Err
		var ue *url.Error // never print a URL we did not redact
		if errors.As(err, &ue) {
			err = ue.Err
		}
		msg += " (" + RedactText(err.Error()) + ")"
	}
	return msg
}

// Unwrap returns Err.
func (e *AttemptError) Unwrap() error { return e.Err }

// Timeout reports whether the attempt timed out (its Class is ClassTimeout,
// or Err is a timeout), so that checks such as (*url.Error).Timeout, which
// http.Client's errors answer by asking the error they wrap, see through
// it.
func (e *AttemptError) Timeout() bool {
	if e.Class == ClassTimeout {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// skipError is an attempt error whose retry was skipped for reason
// (ErrNotIdempotent or ErrBodyNotReplayable).
type skipError struct {
	reason error
	err    *AttemptError
	cause  error // e.g. GetBody's error, may be nil
}

func (e *skipError) Error() string {
	msg := e.reason.Error() + ": " + e.err.Error()
	if e.cause != nil {
		msg += ": " + e.cause.Error()
	}
	return msg
}

// Timeout reports whether the attempt whose retry was skipped timed out.
func (e *skipError) Timeout() bool { return e.err.Timeout() }

func (e *skipError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.reason, e.err, e.cause}
	}
	return []error{e.reason, e.err}
}
