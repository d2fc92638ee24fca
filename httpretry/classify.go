package httpretry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"syscall"
)

// h2StreamError mirrors the fields of net/http's bundled (unexported)
// http2StreamError and of golang.org/x/net/http2.StreamError. Both have an
// As method that fills any struct with the same field names and convertible
// types, so errors.As can read them without naming their unexported types.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string { return "http2 stream error" } // only to satisfy errors.As

// HTTP/2 error code REFUSED_STREAM (RFC 9113 section 7): the server did not
// process the stream, so the request was never handled.
const h2ErrCodeRefusedStream = 0x7

// HTTP/2 error codes INTERNAL_ERROR and CANCEL in a RST_STREAM from the
// server: the stream was abandoned, like a connection reset.
const (
	h2ErrCodeInternal = 0x2
	h2ErrCodeCancel   = 0x8
)

// classification is what classify learns from a transport error.
type classification struct {
	class     string
	retryable bool
	neverSent bool // the error proves the request never reached the server
}

// classify turns a transport error into a class, by the error's type and
// value (never its message). timedOut says the attempt's own timeout ended
// it.
func classify(err error, timedOut bool) classification {
	// Not retryable: the server's certificate or the TLS setup is wrong.
	var (
		certErr  *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalid  x509.CertificateInvalidError
		recErr   tls.RecordHeaderError
		alertErr tls.AlertError
	)
	if errors.As(err, &certErr) || errors.As(err, &unknown) || errors.As(err, &hostErr) ||
		errors.As(err, &invalid) || errors.As(err, &recErr) || errors.As(err, &alertErr) {
		return classification{class: ClassTLS}
	}

	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return classification{class: ClassDNS, retryable: !dnsErr.IsNotFound && (dnsErr.IsTimeout || dnsErr.IsTemporary), neverSent: true}
	}

	var se h2StreamError
	if errors.As(err, &se) {
		switch se.Code {
		case h2ErrCodeRefusedStream:
			return classification{class: ClassRefusedStream, retryable: true, neverSent: true}
		case h2ErrCodeInternal, h2ErrCodeCancel:
			// The server reset the stream (a Go server does so when its
			// handler panics or aborts): the HTTP/2 form of a connection
			// reset, so retried like one, but the request may have been
			// processed.
			return classification{class: ClassReset, retryable: true}
		}
	}
	if isGoAway(err) {
		return classification{class: ClassGoAway, retryable: true}
	}

	// Not retryable: the address itself is wrong (a port above 65535 in a
	// URL or a redirect's Location): every attempt would fail the same way.
	var addrErr *net.AddrError
	if errors.As(err, &addrErr) {
		return classification{class: ClassDial, neverSent: true}
	}

	var opErr *net.OpError
	dial := errors.As(err, &opErr) && (opErr.Op == "dial" || opErr.Op == "proxyconnect")
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return classification{class: ClassRefused, retryable: true, neverSent: true}
	case dial:
		if opErr.Timeout() {
			return classification{class: ClassTimeout, retryable: true, neverSent: true}
		}
		return classification{class: ClassDial, retryable: true, neverSent: true}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return classification{class: ClassReset, retryable: true}
	case errors.Is(err, syscall.EPIPE):
		return classification{class: ClassBrokenPipe, retryable: true}
	}

	var netErr net.Error
	if timedOut || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return classification{class: ClassTimeout, retryable: true}
	}
	switch {
	case errors.Is(err, net.ErrClosed):
		return classification{class: ClassClosed, retryable: true}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return classification{class: ClassEOF, retryable: true}
	}
	return classification{class: ClassOther}
}

// isGoAway reports whether err's chain holds an HTTP/2 GOAWAY error: net/http's
// bundled http2GoAwayError or golang.org/x/net/http2.GoAwayError. Neither can
// be named from here (the first is unexported, the second would be a
// dependency), so they are recognised by their type's package path and name.
func isGoAway(err error) bool {
	for _, e := range chain(err, nil) {
		t := reflect.TypeOf(e)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t.PkgPath() == "net/http" && t.Name() == "http2GoAwayError",
			t.PkgPath() == "golang.org/x/net/http2" && t.Name() == "GoAwayError":
			return true
		}
	}
	return false
}

// chain appends every error of err's tree to list, depth first.
func chain(err error, list []error) []error {
	for err != nil {
		list = append(list, err)
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				list = chain(e, list)
			}
			return list
		default:
			return list
		}
	}
	return list
}
