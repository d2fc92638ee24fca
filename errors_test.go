package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// sliceErr is an error of an uncomparable type.
type sliceErr []string

func (e sliceErr) Error() string { return strings.Join(e, ",") }

func TestErrorMessageUncomparable(t *testing.T) {
	e := &Error{Attempts: 1, Reason: ReasonContext, Last: sliceErr{"last"}, Cause: sliceErr{"cause"}}
	if got := e.Error(); !strings.Contains(got, "last") || !strings.Contains(got, "(cause: cause)") {
		t.Fatalf("Error() = %q", got)
	}
	// The cause is not repeated when the last error already holds it.
	e = &Error{Attempts: 1, Reason: ReasonContext, Last: fmt.Errorf("get: %w", context.Canceled), Cause: context.Canceled}
	if got := e.Error(); strings.Contains(got, "cause") {
		t.Fatalf("Error() = %q repeats the cause", got)
	}
	e = &Error{Reason: ReasonThrottled, Cause: sliceErr{"only cause"}}
	if got := e.Error(); !strings.Contains(got, "(cause: only cause)") {
		t.Fatalf("Error() = %q", got)
	}
}

// timeoutErr is a net.Error-like timeout.
type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }

func (timeoutErr) Timeout() bool { return true }

func TestErrorTimeout(t *testing.T) {
	opTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		name string
		e    *Error
		want bool
	}{
		{"last is DeadlineExceeded", &Error{Last: context.DeadlineExceeded}, true},
		{"last wraps a net timeout", &Error{Last: fmt.Errorf("get: %w", opTimeout)}, true},
		{"last is a timeout type", &Error{Last: timeoutErr{}}, true},
		{"cause is DeadlineExceeded", &Error{Last: errFlaky, Cause: context.DeadlineExceeded}, true},
		{"cause is the policy deadline", &Error{Last: errFlaky, Cause: errPolicyDeadline}, true},
		{"plain error", &Error{Last: errFlaky}, false},
		{"cancelled", &Error{Last: errFlaky, Cause: context.Canceled}, false},
		{"nothing", &Error{}, false},
	}
	for _, tt := range tests {
		if got := tt.e.Timeout(); got != tt.want {
			t.Errorf("%s: Timeout() = %v, want %v", tt.name, got, tt.want)
		}
		// url.Error (what http.Client returns) asks its Err directly.
		if got := (&url.Error{Op: "Get", URL: "http://x", Err: tt.e}).Timeout(); got != tt.want {
			t.Errorf("%s: url.Error.Timeout() = %v, want %v", tt.name, got, tt.want)
		}
	}
	// A policy deadline that cuts an attempt short is a timeout, and a deadline.
	synctest.Test(t, func(t *testing.T) {
		err := Run(t.Context(), Policy{Deadline: time.Second}, func(ctx context.Context) error {
			<-ctx.Done()
			return errFlaky // hides the context's error on purpose
		})
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonDeadline || !re.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v: want a deadline give-up that is a timeout", err)
		}
	})
}
