package otelretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// typed has an ErrorType method, the OpenTelemetry convention.
type typed struct{ t string }

func (e typed) Error() string     { return "typed" }
func (e typed) ErrorType() string { return e.t }

// gaxLike has an HTTPCode method as gax's *apierror.APIError (-1 when the
// error came from gRPC), and a GRPCStatus for its mapped code.
type gaxLike struct {
	http int
	err  error
}

func (e *gaxLike) Error() string              { return "api error" }
func (e *gaxLike) HTTPCode() int              { return e.http }
func (e *gaxLike) GRPCStatus() *status.Status { return status.New(codes.Internal, "mapped") }
func (e *gaxLike) Unwrap() error              { return e.err }

// oddStatus has a GRPCStatus method of another shape: not a gRPC status.
type oddStatus struct{}

func (oddStatus) Error() string      { return "odd" }
func (oddStatus) GRPCStatus() string { return "UNAVAILABLE" }

// panicky's GRPCStatus panics.
type panicky struct{}

func (panicky) Error() string { return "panicky" }
func (panicky) GRPCStatus() *status.Status {
	panic("boom")
}

// uncomparable cannot be compared with ==.
type uncomparable struct{ s []string }

func (uncomparable) Error() string { return "uncomparable" }

func TestErrorType(t *testing.T) {
	const pkg = "github.com/backoffkit/retry/otelretry"
	attempt := func(status int, class string, err error) *httpretry.AttemptError {
		return &httpretry.AttemptError{Method: "GET", URL: "https://x/", Status: status, Class: class, Err: err}
	}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	unavailable := status.Error(codes.Unavailable, "busy")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, "_OTHER"},
		// The core's marks are wrappers: the failure inside is named.
		{"retry.After of errors.New", retry.After(errors.New("boom"), time.Second), "*errors.errorString"},
		{"retry.Permanent of an OpError", retry.Permanent(reset), "*net.OpError"},
		{"retry.After of retry.Permanent", retry.After(retry.Permanent(errors.New("x")), 0), "*errors.errorString"},
		{"fmt wrapper of retry.After", fmt.Errorf("calling: %w", retry.After(errors.New("x"), 0)), "*errors.errorString"},
		// HTTP: the status code.
		{"AttemptError 503", attempt(503, httpretry.ClassStatus, nil), "503"},
		{"AttemptError 429 with a hint", retry.After(attempt(429, httpretry.ClassStatus, nil), 3*time.Second), "429"},
		{"retry.Error of AttemptError 503", &retry.Error{Attempts: 3, Reason: retry.ReasonAttempts, Last: attempt(503, httpretry.ClassStatus, nil)}, "503"},
		{"gax APIError from HTTP", &gaxLike{http: 504}, "504"},
		{"gax APIError from gRPC, HTTP inside", &gaxLike{http: -1, err: &gaxLike{http: 500}}, "500"},
		// HTTP without a status: the class.
		{"AttemptError reset", attempt(0, httpretry.ClassReset, reset), "reset"},
		{"AttemptError timeout", retry.After(attempt(0, httpretry.ClassTimeout, context.DeadlineExceeded), time.Second), "timeout"},
		{"AttemptError refused", attempt(0, httpretry.ClassRefused, reset), "refused"},
		// gRPC: the code's canonical name.
		{"grpc UNAVAILABLE", unavailable, "UNAVAILABLE"},
		{"grpc RESOURCE_EXHAUSTED with a hint", retry.After(status.Error(codes.ResourceExhausted, "quota"), time.Second), "RESOURCE_EXHAUSTED"},
		{"grpc CANCELLED", status.Error(codes.Canceled, "x"), "CANCELLED"},
		{"grpc DEADLINE_EXCEEDED", status.Error(codes.DeadlineExceeded, "x"), "DEADLINE_EXCEEDED"},
		{"grpc wrapped in retry.Error", &retry.Error{Attempts: 2, Last: unavailable}, "UNAVAILABLE"},
		{"grpc code out of range", status.Error(codes.Code(42), "x"), "42"},
		{"gax APIError from gRPC", &gaxLike{http: -1}, "INTERNAL"},
		{"GRPCStatus of another shape", oddStatus{}, pkg + ".oddStatus"},
		{"GRPCStatus that panics", panicky{}, pkg + ".panicky"},
		{"nil *status.Status", &nilStatusErr{}, "*otelretry.nilStatusErr"},
		{"typed nil AttemptError", (*httpretry.AttemptError)(nil), "*httpretry.AttemptError"},
		{"typed nil AttemptError, wrapped", retry.After((*httpretry.AttemptError)(nil), 0), "*httpretry.AttemptError"},
		{"typed nil gax error", (*gaxLike)(nil), "*otelretry.gaxLike"},
		{"typed nil status error in retry.Error", &retry.Error{Last: (*nilStatusErr)(nil)}, "*retry.Error"},
		// Timeouts and cancellations.
		{"context deadline", &url.Error{Op: "Get", URL: "https://x", Err: context.DeadlineExceeded}, "timeout"},
		{"i/o timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, "timeout"},
		{"context canceled", retry.After(context.Canceled, 0), "canceled"},
		// An ErrorType method wins.
		{"ErrorType method", retry.After(typed{"quota_exceeded"}, 0), "quota_exceeded"},
		{"empty ErrorType method", typed{""}, pkg + ".typed"},
		// Anything else: semconv's name of the first type that is not ours.
		{"OpError", reset, "*net.OpError"},
		{"url.Error of an OpError", &url.Error{Op: "Get", URL: "https://x", Err: reset}, "*net.OpError"},
		{"url.Error of retry.After", &url.Error{Op: "Get", URL: "https://x", Err: retry.After(reset, 0)}, "*net.OpError"},
		{"uncomparable", uncomparable{[]string{"x"}}, pkg + ".uncomparable"},
		{"joined", errors.Join(errors.New("a"), errors.New("b")), "*errors.joinError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorType(tt.err); got != tt.want {
				t.Errorf("ErrorType(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

// nilStatusErr's GRPCStatus returns nil, as grpc-go's does for a nil status.
type nilStatusErr struct{}

func (*nilStatusErr) Error() string              { return "nil status" }
func (*nilStatusErr) GRPCStatus() *status.Status { return nil }

// BenchmarkErrorType measures naming the error of a span event: the chain
// walks, and for gRPC the reflective calls.
func BenchmarkErrorType(b *testing.B) {
	for _, bc := range []struct {
		name string
		err  error
	}{
		{"http-503", retry.After(&httpretry.AttemptError{Status: 503, Class: httpretry.ClassStatus}, time.Second)},
		{"grpc", retry.After(status.Error(codes.Unavailable, "busy"), time.Second)},
		{"other", retry.Permanent(errors.New("boom"))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ErrorType(bc.err) == "" {
					b.Fatal("empty")
				}
			}
		})
	}
}
