package httpretry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"reflect"
	"syscall"
	"testing"
)

// fakeStreamError copies the As method net/http gives its unexported
// http2StreamError (src/net/http/h2_error.go), so REFUSED_STREAM can be
// tested without an HTTP/2 server (net/http retries REFUSED_STREAM itself,
// with backoff, before the error surfaces).
type fakeStreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e fakeStreamError) Error() string {
	return fmt.Sprintf("stream error: stream ID %d; %d", e.StreamID, e.Code)
}

func (e fakeStreamError) As(target any) bool {
	dst := reflect.ValueOf(target).Elem()
	if dst.Kind() != reflect.Struct || dst.NumField() != 3 {
		return false
	}
	src := reflect.ValueOf(e)
	for i := range 3 {
		if src.Type().Field(i).Name != dst.Type().Field(i).Name || !src.Field(i).Type().ConvertibleTo(dst.Field(i).Type()) {
			return false
		}
	}
	for i := range 3 {
		dst.Field(i).Set(src.Field(i).Convert(dst.Field(i).Type()))
	}
	return true
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	op := func(op string, err error) error { return &net.OpError{Op: op, Net: "tcp", Err: err} }
	tests := []struct {
		name     string
		err      error
		timedOut bool
		want     classification
	}{
		{"refused", op("dial", os.NewSyscallError("connect", syscall.ECONNREFUSED)), false, classification{ClassRefused, true, true}},
		{"dial unreachable", op("dial", os.NewSyscallError("connect", syscall.EHOSTUNREACH)), false, classification{ClassDial, true, true}},
		{"dial timeout", op("dial", timeoutErr{}), false, classification{ClassTimeout, true, true}},
		{"proxyconnect", op("proxyconnect", errors.New("x")), false, classification{ClassDial, true, true}},
		{"invalid port", op("dial", &net.AddrError{Err: "invalid port", Addr: "99999"}), false, classification{ClassDial, false, true}},
		{"too many colons", op("dial", &net.AddrError{Err: "too many colons in address", Addr: "a:b:c"}), false, classification{ClassDial, false, true}},
		{"reset", op("read", os.NewSyscallError("read", syscall.ECONNRESET)), false, classification{ClassReset, true, false}},
		{"aborted", op("read", os.NewSyscallError("read", syscall.ECONNABORTED)), false, classification{ClassReset, true, false}},
		{"broken pipe", op("write", os.NewSyscallError("write", syscall.EPIPE)), false, classification{ClassBrokenPipe, true, false}},
		{"wrapped reset", fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", op("read", syscall.ECONNRESET)), false, classification{ClassReset, true, false}},
		{"eof", io.EOF, false, classification{ClassEOF, true, false}},
		{"unexpected eof", fmt.Errorf("x: %w", io.ErrUnexpectedEOF), false, classification{ClassEOF, true, false}},
		{"net timeout", op("read", timeoutErr{}), false, classification{ClassTimeout, true, false}},
		{"deadline exceeded", op("read", os.ErrDeadlineExceeded), false, classification{ClassTimeout, true, false}},
		{"attempt timeout", context.DeadlineExceeded, true, classification{ClassTimeout, true, false}},
		{"closed", op("read", net.ErrClosed), false, classification{ClassClosed, true, false}},
		{"refused stream", fakeStreamError{StreamID: 3, Code: 0x7}, false, classification{ClassRefusedStream, true, true}},
		{"stream reset INTERNAL_ERROR", fakeStreamError{StreamID: 5, Code: 0x2}, false, classification{ClassReset, true, false}},
		{"stream reset CANCEL", fakeStreamError{StreamID: 5, Code: 0x8}, false, classification{ClassReset, true, false}},
		{"stream PROTOCOL_ERROR", fakeStreamError{StreamID: 5, Code: 0x1}, false, classification{ClassOther, false, false}},
		{"other stream error", fakeStreamError{StreamID: 3, Code: 0x1}, false, classification{ClassOther, false, false}},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, false, classification{ClassDNS, false, true}},
		{"dns temporary", &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, false, classification{ClassDNS, true, true}},
		{"dns timeout", op("dial", &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}), false, classification{ClassDNS, true, true}},
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false, classification{ClassTLS, false, false}},
		{"hostname", x509.HostnameError{Host: "x", Certificate: &x509.Certificate{}}, false, classification{ClassTLS, false, false}},
		{"expired", x509.CertificateInvalidError{Reason: x509.Expired}, false, classification{ClassTLS, false, false}},
		{"not tls", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false, classification{ClassTLS, false, false}},
		{"tls alert", fmt.Errorf("remote error: %w", tls.AlertError(42)), false, classification{ClassTLS, false, false}},
		{"unsupported scheme", errors.New(`unsupported protocol scheme "ftp"`), false, classification{ClassOther, false, false}},
		{"invalid url", &url.Error{Op: "parse", URL: "::", Err: errors.New("missing protocol scheme")}, false, classification{ClassOther, false, false}},
		{"too many redirects", errors.New("stopped after 10 redirects"), false, classification{ClassOther, false, false}},
		{"message says reset", errors.New("connection reset by peer"), false, classification{ClassOther, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err, tt.timedOut); got != tt.want {
				t.Fatalf("classify(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}
}
