package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// shortWait is the longest wait slept on the goroutine's own runtime timer
// (time.Sleep: no allocation, not interruptible; the context is checked right
// after). Longer waits use one stoppable timer per call that returns as soon
// as the context ends.
const shortWait = time.Millisecond

// errPolicyDeadline is the cause of an attempt context cancelled by
// Policy.Deadline, and of an [*Error] that gave up when it passed.
var errPolicyDeadline error = policyDeadlineError{}

// policyDeadlineError is a timeout, and matches context.DeadlineExceeded.
type policyDeadlineError struct{}

func (policyDeadlineError) Error() string   { return "retry: policy deadline exceeded" }
func (policyDeadlineError) Timeout() bool   { return true }
func (policyDeadlineError) Temporary() bool { return true }
func (policyDeadlineError) Is(target error) bool {
	return target == context.DeadlineExceeded
}

// Do calls fn until it succeeds or the policy says to stop, and returns fn's
// last result and error.
//
// It stops on: success; an error that is not retryable (marked with
// [Permanent], or refused by Policy.Retryable), returned as is; the attempts
// used up; the policy's Deadline; the context ending; a budget or throttle
// refusal. It never starts a wait that would end after the context's or the
// policy's deadline: it gives up at once instead. Except for errors returned as
// is, giving up returns an [*Error] that keeps the last error and the cause.
// An invalid policy returns its [*ValidationError] without calling fn.
//
// A context that is already done returns its cause at once, without calling
// fn. Waits use one timer per call, stopped when ctx ends; Do starts no
// goroutine. A panic in fn or in the Observer goes on up to the caller: Do
// does not recover it, but first records the attempt with the Pacer (fn)
// or gives back to the limiters the retry they admitted (the Observer's
// retry event).
//
// The success path allocates nothing and reads the clock once (so that
// [Error.Elapsed] counts every attempt; once more with an Observer, for the
// success event), except that a policy Deadline or AttemptTimeout that ends
// before the context's own deadline gives each attempt a context of its own,
// cancelled when the attempt returns. fn sees in it what
// context.WithDeadlineCause would give (the deadline, ctx's values, the
// cause described at Policy.AttemptTimeout; context.Cause and
// context.AfterFunc work on it), at this cost per attempt: when ctx can never
// be cancelled (its Done returns nil: context.Background, say), one
// allocation (96 bytes) and a second, monotonic clock read when the attempt
// returns, plus 5 allocations if fn asks for its Done channel, as net/http
// and gRPC do (the standard library's own context then takes over); when ctx
// can be cancelled, context.WithDeadlineCause: 4 allocations (272 bytes).
// Budgets, throttles and pacers that allocate nothing themselves add no
// allocation, only their own time. docs/benchmarks.md has the figures.
func Do[T any](ctx context.Context, p Policy, fn func(context.Context) (T, error)) (T, error) {
	var out T
	err := loop(ctx, &p, func(ctx context.Context) error {
		v, err := fn(ctx)
		out = v
		return err
	})
	return out, err
}

// Run is [Do] for a function without a result.
func Run(ctx context.Context, p Policy, fn func(context.Context) error) error {
	return loop(ctx, &p, fn)
}

// loop is the one retry loop of the module. p is Do's or Run's own copy of
// the caller's policy, validated and resolved here once per call.
func loop(ctx context.Context, p *Policy, fn func(context.Context) error) error {
	if err := p.validate(); err != nil {
		return err
	}
	p.resolveInPlace()
	if ctx.Err() != nil {
		// Never call fn with a context that is already done.
		e := &Error{Reason: ReasonContext, Cause: context.Cause(ctx)}
		observe(ctx, p, Event{Kind: EventGiveUp, MaxAttempts: p.Attempts, Reason: ReasonContext})
		return e
	}
	start := time.Now() // Error.Elapsed and Event.Elapsed count from here
	if p.Throttle != nil || p.Budget != nil || p.Pacer != nil {
		return retrying(ctx, p, fn, start, nil)
	}
	// Fast path: a first attempt with nothing to ask before it, one clock
	// read. Nothing has run since that read, so it is the attempt's start:
	// the deadline, if any, is after it.
	var err error
	if p.Deadline > 0 || p.AttemptTimeout > 0 {
		var deadline time.Time
		if p.Deadline > 0 {
			deadline = start.Add(p.Deadline)
		}
		err = call(ctx, p, fn, deadline, start)
	} else {
		err = fn(ctx)
	}
	if err == nil {
		if p.Observer != nil {
			p.Observer(ctx, Event{Kind: EventSuccess, Attempt: 1, MaxAttempts: p.Attempts, Elapsed: time.Since(start)})
		}
		return nil
	}
	return retrying(ctx, p, fn, start, err)
}

// retrying runs the loop from the start (first == nil) or after a first
// attempt that failed with first. start is when the call began.
func retrying(ctx context.Context, p *Policy, fn func(context.Context) error, start time.Time, first error) error {
	var (
		deadline time.Time // the policy's, zero if none
		timer    *time.Timer
		prev     time.Duration
		last     error // the previous attempt's error
	)
	if p.Deadline > 0 {
		deadline = start.Add(p.Deadline)
	}
	// dl is the earliest deadline that applies: the context's or the policy's.
	dl := deadline
	if d, ok := ctx.Deadline(); ok && (dl.IsZero() || d.Before(dl)) {
		dl = d
	}
	// stop gives up before attempt number n is made (n-1 were), giving back
	// what the limiters admitted for it.
	stop := func(n int, r Reason, cause error) error {
		p.cancelAdmitted(n > 1)
		e := &Error{Attempts: n - 1, Elapsed: time.Since(start), Reason: r, Last: last, Cause: cause}
		observe(ctx, p, Event{Kind: EventGiveUp, Attempt: n - 1, MaxAttempts: p.Attempts, Err: last, Elapsed: e.Elapsed, Reason: r})
		return e
	}
	if first == nil {
		if !p.Begin() {
			observe(ctx, p, Event{Kind: EventGiveUp, MaxAttempts: p.Attempts, Elapsed: time.Since(start), Reason: ReasonThrottled})
			return &Error{Elapsed: time.Since(start), Reason: ReasonThrottled, Last: ErrThrottled}
		}
	}

	for attempt := 1; ; attempt++ {
		err := first
		if attempt > 1 || first == nil {
			// The pacer is asked right before the attempt, after any
			// backoff wait: a shared schedule (GCRA) cannot hold a slot in
			// the future without blocking every slot before it.
			if p.Pacer != nil {
				until, r, cause := p.pace(ctx, time.Now(), dl)
				if r == ReasonNone {
					r, cause = sleepUntil(ctx, &timer, until)
				}
				if r != ReasonNone {
					return stop(attempt, r, cause)
				}
			}
			// No attempt starts at or after the policy's deadline (a slow
			// pacer or observer may have used up what the wait left).
			var now time.Time // the attempt's start, for AttemptTimeout
			if !deadline.IsZero() || p.AttemptTimeout > 0 {
				now = time.Now()
				if !deadline.IsZero() && !now.Before(deadline) {
					return stop(attempt, ReasonDeadline, errPolicyDeadline)
				}
			}
			if p.Pacer != nil {
				err = callPaced(ctx, p, fn, deadline, now)
			} else {
				err = call(ctx, p, fn, deadline, now)
			}
		}
		if p.Pacer != nil {
			p.Pacer.Record(err)
		}
		if err == nil {
			p.Succeeded()
			if p.Observer != nil {
				p.Observer(ctx, Event{Kind: EventSuccess, Attempt: attempt, MaxAttempts: p.Attempts, Elapsed: time.Since(start)})
			}
			return nil
		}
		last = err
		now := time.Now()
		giveUp := func(r Reason, cause error) error {
			e := &Error{Attempts: attempt, Elapsed: now.Sub(start), Reason: r, Last: err, Cause: cause}
			observe(ctx, p, Event{Kind: EventGiveUp, Attempt: attempt, MaxAttempts: p.Attempts, Err: err, Elapsed: e.Elapsed, Reason: r})
			return e
		}

		// An error that is not retryable is returned as is, whatever else
		// has happened meanwhile.
		if halt, ok := p.halts(err); halt {
			p.record(ok)
			observe(ctx, p, Event{Kind: EventGiveUp, Attempt: attempt, MaxAttempts: p.Attempts, Err: err, Elapsed: now.Sub(start), Reason: ReasonPermanent})
			if pe, ok := err.(*permanentError); ok {
				return pe.err
			}
			return err
		}
		// The caller's context ended: its error is not the attempt's fault,
		// but an attempt cut short by a deadline is a failure for the
		// limiters (a backend that hangs must count); a cancelled one is not
		// counted at all.
		if ctx.Err() != nil {
			if ctx.Err() == context.DeadlineExceeded {
				p.record(false)
			}
			return giveUp(ReasonContext, context.Cause(ctx))
		}
		if !deadline.IsZero() && !now.Before(deadline) {
			p.record(false)
			return giveUp(ReasonDeadline, errPolicyDeadline)
		}
		step := p.retryable(attempt, prev, err, now, dl)
		switch step.Reason {
		case ReasonNone:
		case ReasonDeadline:
			return giveUp(ReasonDeadline, &waitPastDeadline{wait: step.Wait, left: dl.Sub(now)})
		default:
			return giveUp(step.Reason, nil)
		}
		until, hint := now.Add(step.Wait), step.Hint
		prev = step.Shaped
		observeRetry(ctx, p, Event{Kind: EventRetry, Attempt: attempt, MaxAttempts: p.Attempts, Wait: until.Sub(now), Hint: hint, Err: err, Elapsed: now.Sub(start)})
		if r, cause := sleepUntil(ctx, &timer, until); r != ReasonNone {
			p.cancelAdmitted(true)
			now = time.Now()
			return giveUp(r, cause)
		}
	}
}

// pace asks the policy's Pacer when an attempt that could start at earliest
// (now) may start. A refusal, or a start that would not be before the deadline dl
// (a pacer that did not check it), gives a Reason to give up and the cause;
// a refusal while the context ends is the context's.
func (p *Policy) pace(ctx context.Context, earliest, dl time.Time) (time.Time, Reason, error) {
	t, err := p.Pacer.Reserve(ctx, earliest, dl)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return t, ReasonContext, context.Cause(ctx)
		case errors.Is(err, ErrPastDeadline):
			return t, ReasonDeadline, err
		}
		return t, ReasonThrottled, err
	}
	if t.Before(earliest) {
		t = earliest
	}
	if !dl.IsZero() && !t.Before(dl) {
		return t, ReasonDeadline, fmt.Errorf("%w: the pacer's start is %v away, the deadline %v",
			ErrPastDeadline, time.Until(t).Round(time.Millisecond), time.Until(dl).Round(time.Millisecond))
	}
	return t, ReasonNone, nil
}

// sleepUntil waits until t, or until ctx ends (then it returns ReasonContext
// and the context's cause). Waits up to shortWait sleep on the goroutine's
// own runtime timer (no allocation, not interruptible; the context is checked
// right after); longer ones use *timer, created on first use and reused.
func sleepUntil(ctx context.Context, timer **time.Timer, t time.Time) (Reason, error) {
	switch d := time.Until(t); {
	case d > shortWait:
		if *timer == nil {
			*timer = time.NewTimer(d)
		} else {
			(*timer).Reset(d)
		}
		select {
		case <-(*timer).C:
		case <-ctx.Done():
			(*timer).Stop()
			return ReasonContext, context.Cause(ctx)
		}
	case d > 0:
		time.Sleep(d)
	}
	if ctx.Err() != nil {
		return ReasonContext, context.Cause(ctx)
	}
	return ReasonNone, nil
}

// waitPastDeadline is the cause of a give-up because the next wait would
// have ended after the deadline.
type waitPastDeadline struct{ wait, left time.Duration }

func (e *waitPastDeadline) Error() string {
	return fmt.Sprintf("retry: the next wait (%v) would end after the deadline (%v away)",
		e.wait.Round(time.Millisecond), e.left.Round(time.Millisecond))
}
func (e *waitPastDeadline) Unwrap() error { return ErrPastDeadline }
func (e *waitPastDeadline) Timeout() bool { return true }

// call runs one attempt under the policy's deadline (zero for none) and
// AttemptTimeout counted from now, the attempt's start, whichever ends first,
// with one derived context at most. The context is not derived when the
// caller's own deadline comes first (the attempt ends then anyway), so a call
// whose context has a deadline before the policy's allocates nothing more for
// it. A caller's context that can never be cancelled gets an [attemptCtx]
// (one allocation, no timer unless fn asks for Done); one that can be gets
// context.WithDeadlineCause. Either is cancelled when fn returns.
func call(ctx context.Context, p *Policy, fn func(context.Context) error, deadline, now time.Time) error {
	dl, cause := deadline, errPolicyDeadline
	if p.AttemptTimeout > 0 {
		if t := now.Add(p.AttemptTimeout); dl.IsZero() || t.Before(dl) {
			dl, cause = t, context.DeadlineExceeded
		}
	}
	if dl.IsZero() {
		return fn(ctx)
	}
	if d, ok := ctx.Deadline(); ok && !d.After(dl) {
		return fn(ctx)
	}
	if ctx.Done() != nil {
		actx, cancel := context.WithDeadlineCause(ctx, dl, cause)
		defer cancel()
		return fn(actx)
	}
	actx := &attemptCtx{parent: ctx, deadline: dl, cause: cause}
	defer actx.end()
	return fn(actx)
}

func observe(ctx context.Context, p *Policy, e Event) {
	if p.Observer != nil {
		p.Observer(ctx, e)
		return
	}
	defaultObserve(ctx, e)
}

func (p *Policy) rand() float64 {
	if p.Rand != nil {
		return p.Rand()
	}
	return rand.Float64()
}

// errAttemptPanicked is what the Pacer's Record is told of an attempt whose
// fn panicked.
var errAttemptPanicked = errors.New("retry: the attempt panicked")

// callPaced is call for a policy with a Pacer: an attempt whose fn panics
// is recorded with the Pacer (as a failure) before the panic goes on, as
// any attempt the Pacer let start is. (A deferred call in a function of
// its own, not in the loop: it allocates nothing.)
func callPaced(ctx context.Context, p *Policy, fn func(context.Context) error, deadline, now time.Time) error {
	returned := false
	defer func() {
		if !returned {
			p.Pacer.Record(errAttemptPanicked)
		}
	}()
	err := call(ctx, p, fn, deadline, now)
	returned = true
	return err
}

// observeRetry tells the Observer about a retry the limiters have admitted.
// An Observer that panics ends the call before that retry is made: it is
// given back to the limiters first (as when the wait is cut short), then
// the panic goes on.
func observeRetry(ctx context.Context, p *Policy, e Event) {
	returned := false
	defer func() {
		if !returned {
			p.cancelAdmitted(true)
		}
	}()
	observe(ctx, p, e)
	returned = true
}
