package retry

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// chainCases are error chains for the queries that walk them
// (IsPermanent, RetryAfter, Error.Timeout): the mark deep under fmt.Errorf
// wrappers, behind an errors.Join, or absent.
func chainCases() []struct {
	name      string
	err       error
	permanent bool
	hint      time.Duration // -1: none
	timeout   bool
} {
	deep := Permanent(After(timeoutErr{}, 3*time.Second))
	for range 8 {
		deep = fmt.Errorf("layer: %w", deep)
	}
	return []struct {
		name      string
		err       error
		permanent bool
		hint      time.Duration
		timeout   bool
	}{
		{"nil", nil, false, -1, false},
		{"plain", io.EOF, false, -1, false},
		{"deep", deep, true, 3 * time.Second, true},
		{"joined, second branch", errors.Join(io.EOF, fmt.Errorf("w: %w", After(io.EOF, time.Second))), false, time.Second, false},
		{"joined, nothing", errors.Join(io.EOF, io.ErrUnexpectedEOF), false, -1, false},
	}
}

func TestChainQueries(t *testing.T) {
	for _, tt := range chainCases() {
		if got := IsPermanent(tt.err); got != tt.permanent {
			t.Errorf("%s: IsPermanent = %v, want %v", tt.name, got, tt.permanent)
		}
		d, ok := RetryAfter(tt.err)
		if want := tt.hint >= 0; ok != want || (ok && d != tt.hint) {
			t.Errorf("%s: RetryAfter = %v, %v; want %v, %v", tt.name, d, ok, tt.hint, want)
		}
		if got := (&Error{Reason: ReasonAttempts, Last: tt.err}).Timeout(); got != tt.timeout {
			t.Errorf("%s: Error.Timeout = %v, want %v", tt.name, got, tt.timeout)
		}
	}
}

// The queries walk a chain without allocating: the loop calls them on
// every failed attempt.
func TestChainQueriesDoNotAllocate(t *testing.T) {
	for _, tt := range chainCases() {
		e := &Error{Reason: ReasonAttempts, Last: tt.err}
		var p Policy
		if n := testing.AllocsPerRun(100, func() {
			IsPermanent(tt.err)
			RetryAfter(tt.err)
			e.Timeout()
			p.halts(tt.err)
		}); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", tt.name, n)
		}
	}
}

func BenchmarkChainQueries(b *testing.B) {
	for _, tt := range chainCases() {
		e := &Error{Reason: ReasonAttempts, Last: tt.err}
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				IsPermanent(tt.err)
				RetryAfter(tt.err)
				e.Timeout()
			}
		})
	}
}

// A nil *permanentError in a chain (no caller can make one: Permanent(nil)
// is nil) is still the mark, as before the walk moved to errchain: the
// query reports it and never calls its Unwrap, which would panic.
func TestIsPermanentOnANilMark(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", (*permanentError)(nil))
	if !IsPermanent(err) {
		t.Error("IsPermanent(a chain holding a nil *permanentError) = false, want true")
	}
	// The loop agrees (it panicked there before): the mark halts it, as a
	// failure the limiters record (not a transient one).
	var p Policy
	if halt, ok := p.halts(err); !halt || !ok {
		t.Errorf("halts(a chain holding a nil *permanentError) = %v, %v; want true, true", halt, ok)
	}
}
