package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backoffkit/retry/internal/enum"
	"github.com/backoffkit/retry/internal/errchain"
)

// Reason says why the loop stopped retrying.
type Reason uint8

const (
	// ReasonNone is the zero Reason: the loop has not given up.
	ReasonNone Reason = iota
	// ReasonAttempts: every allowed attempt was used.
	ReasonAttempts
	// ReasonDeadline: the policy's or the context's deadline has passed, or
	// the next wait would have ended after it.
	ReasonDeadline
	// ReasonContext: the caller's context was cancelled (or its deadline
	// passed) during an attempt or a wait.
	ReasonContext
	// ReasonPermanent: the error is not retryable ([Permanent], or
	// Policy.Retryable said no).
	ReasonPermanent
	// ReasonBudget: the retry budget refused the retry.
	ReasonBudget
	// ReasonThrottled: the client-side throttle refused the attempt.
	ReasonThrottled
)

var reasonNames = [...]string{"none", "attempts", "deadline", "context", "permanent", "budget", "throttled"}

// String returns the reason's name ("attempts", "deadline", ...).
func (r Reason) String() string { return enum.Name(r, "Reason", reasonNames[:]...) }

// ErrBudgetExhausted matches (with errors.Is) an [*Error] whose retry was
// refused by the policy's Budget.
var ErrBudgetExhausted = errors.New("retry: retry budget exhausted")

// ErrThrottled matches (with errors.Is) an [*Error] whose attempt was refused
// by the policy's Throttle before touching the network.
var ErrThrottled = errors.New("retry: throttled by the client")

// Error is returned by [Do] and [Run] when they give up on a retryable error.
// errors.Is and errors.As reach both the last attempt's error and the
// context's cause, so errors.Is(err, io.ErrUnexpectedEOF) and
// errors.Is(err, context.Canceled) both work.
type Error struct {
	// Attempts is the number of attempts made (0 if the first was throttled).
	Attempts int
	// Elapsed is the time from the start of the call (just before the first
	// attempt) to the give-up: every attempt and every wait included.
	Elapsed time.Duration
	// Reason says why the loop stopped.
	Reason Reason
	// Last is the last attempt's error (nil if no attempt was made).
	Last error
	// Cause is context.Cause of the caller's context when it ended the loop,
	// or of the policy deadline, else nil.
	Cause error
}

// Error says how many attempts were made, for how long, why the loop
// stopped, and the last error and cause.
func (e *Error) Error() string {
	msg := fmt.Sprintf("retry: gave up after %d attempt", e.Attempts)
	if e.Attempts != 1 {
		msg += "s"
	}
	msg += fmt.Sprintf(" in %v (%s)", e.Elapsed.Round(time.Millisecond), e.Reason)
	if e.Last != nil {
		msg += ": " + e.Last.Error()
	}
	// The cause is named unless the last error already holds it. errors.Is,
	// not !=: comparing two errors of one uncomparable type panics.
	if e.Cause != nil && (e.Last == nil || !errors.Is(e.Last, e.Cause)) {
		msg += " (cause: " + e.Cause.Error() + ")"
	}
	return msg
}

// Timeout reports whether the loop ended on a timeout, so that
// url.Error.Timeout and net.Error checks see through the retry loop as they
// would without it: always when it gave up on a deadline (ReasonDeadline);
// when the caller's context ended, if its cause is a timeout (its deadline,
// not a cancellation); otherwise, if the last attempt's error or the cause is
// one. An error is a timeout when its chain holds one with a method
// Timeout() bool that returns true, such as context.DeadlineExceeded or a
// net.Error that timed out.
func (e *Error) Timeout() bool {
	switch e.Reason {
	case ReasonDeadline:
		return true
	case ReasonContext:
		return isTimeout(e.Cause)
	}
	return isTimeout(e.Last) || isTimeout(e.Cause)
}

func isTimeout(err error) bool {
	return errchain.Find(err, func(e error) bool {
		t, ok := e.(interface{ Timeout() bool })
		return ok && t.Timeout()
	})
}

// Unwrap returns the last error and the cause, those that are set.
func (e *Error) Unwrap() []error {
	switch {
	case e.Last != nil && e.Cause != nil:
		return []error{e.Last, e.Cause}
	case e.Last != nil:
		return []error{e.Last}
	case e.Cause != nil:
		return []error{e.Cause}
	}
	return nil
}

// Is makes errors.Is(err, ErrBudgetExhausted), errors.Is(err, ErrThrottled)
// and errors.Is(err, context.DeadlineExceeded) true for the matching reasons
// (ReasonBudget, ReasonThrottled, ReasonDeadline).
func (e *Error) Is(target error) bool {
	return (target == ErrBudgetExhausted && e.Reason == ReasonBudget) ||
		(target == ErrThrottled && e.Reason == ReasonThrottled) ||
		(target == context.DeadlineExceeded && e.Reason == ReasonDeadline)
}

type permanentError struct {
	err       error
	transient bool // Unretryable: the limiters record a failure
}

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// permanentMark is what a walk of a chain finds of a [Permanent] mark: the
// mark itself, and found (so that a nil *permanentError, which no caller
// can make, is still a mark and its Unwrap is not called).
type permanentMark struct {
	pe    *permanentError
	found bool
}

// asPermanent returns e's mark, if e is a *permanentError.
func asPermanent(e error) permanentMark {
	pe, ok := e.(*permanentError)
	return permanentMark{pe, ok}
}

// Permanent marks err as not retryable: the loop stops at once and returns
// err itself (the mark removed). Permanent(nil) is nil. The mark is found
// anywhere in the error's chain, so fmt.Errorf("...: %w", Permanent(err))
// also stops the loop (and is returned as is).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// Unretryable marks err as a transient failure that must nevertheless not be
// retried: the service was unavailable or overloaded, but this request may
// not be repeated (it is not idempotent, or its body cannot be replayed). The
// loop stops and returns err itself, as with [Permanent], but the Budget and
// the Throttle record the attempt as failed, as they would a retryable error:
// an overload signal counts whether or not this request can be retried.
// Unretryable(nil) is nil; [IsPermanent] is true of the result.
func Unretryable(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err, transient: true}
}

// IsPermanent reports whether err's chain holds an error marked with
// [Permanent].
func IsPermanent(err error) bool {
	return errchain.Find(err, asPermanent).found
}

type hintError struct {
	err error
	d   time.Duration
}

func (h *hintError) Error() string             { return h.err.Error() }
func (h *hintError) Unwrap() error             { return h.err }
func (h *hintError) RetryAfter() time.Duration { return h.d }

// After wraps err with a server hint: the next wait will be at least d (plus
// jitter), capped by the policy's MaxRetryAfter, and checked against the
// deadlines like any wait. After(nil, d) is nil; a negative d is taken as 0.
//
// Any error in the chain with a method RetryAfter() time.Duration is a hint
// too, so integrations can attach hints to their own error types.
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &hintError{err, max(d, 0)}
}

// RetryAfter returns the server hint carried by err's chain, if any
// (see [After]).
func RetryAfter(err error) (time.Duration, bool) {
	h := errchain.Find(err, func(e error) interface{ RetryAfter() time.Duration } {
		h, _ := e.(interface{ RetryAfter() time.Duration })
		return h
	})
	if h == nil {
		return 0, false
	}
	return max(h.RetryAfter(), 0), true
}
