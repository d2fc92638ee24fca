package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// shortWait is the longest wait slept on the goroutine's own runtime timer
// (time.Sleep: no allocation, not interruptible; the context is checked right
// after). Longer waits use one stoppable timer per call that returns as soon
// as the context ends.
const shortWait = time.Millisecond

// errPolicyDeadline is the cause of an attempt context cancelled by
// Policy.Deadline.
var errPolicyDeadline = errors.New("retry: policy deadline exceeded")

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
// Waits use one timer per call, stopped when ctx ends; Do starts no
// goroutine. The success path allocates nothing.
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
	if p.Deadline > 0 || p.Throttle != nil || p.Budget != nil || p.AttemptTimeout > 0 {
		return retrying(ctx, p, fn, nil)
	}
	// Fast path: a plain first attempt, no clock read, nothing allocated.
	err := fn(ctx)
	if err == nil {
		if p.Observer != nil {
			p.Observer(ctx, Event{Kind: EventSuccess, Attempt: 1, MaxAttempts: p.Attempts})
		}
		return nil
	}
	return retrying(ctx, p, fn, err)
}

// retrying runs the loop from the start (first == nil) or after a first
// attempt that failed with first.
func retrying(ctx context.Context, p *Policy, fn func(context.Context) error, first error) error {
	var (
		start    time.Time // zero until the clock is first needed
		deadline time.Time // the policy's, zero if none
		actx     = ctx     // the attempts' context (bounded by the policy deadline)
	)
	if first == nil {
		if p.Deadline > 0 {
			start = time.Now()
			deadline = start.Add(p.Deadline)
			var cancel context.CancelFunc
			actx, cancel = context.WithDeadlineCause(ctx, deadline, errPolicyDeadline)
			defer cancel()
		}
		if !p.Begin() {
			return &Error{Reason: ReasonThrottled, Last: ErrThrottled}
		}
	}

	var (
		timer *time.Timer
		prev  time.Duration
	)
	for attempt := 1; ; attempt++ {
		err := first
		if attempt > 1 || first == nil {
			err = call(actx, p, fn)
		}
		if err == nil {
			p.Succeeded()
			if p.Observer != nil {
				p.Observer(ctx, Event{Kind: EventSuccess, Attempt: attempt, MaxAttempts: p.Attempts, Elapsed: since(start)})
			}
			return nil
		}
		now := time.Now()
		if start.IsZero() {
			start = now
		}
		giveUp := func(r Reason, cause error) error {
			e := &Error{Attempts: attempt, Elapsed: now.Sub(start), Reason: r, Last: err, Cause: cause}
			observe(ctx, p, Event{Kind: EventGiveUp, Attempt: attempt, MaxAttempts: p.Attempts, Err: err, Elapsed: e.Elapsed, Reason: r})
			return e
		}

		// The caller's context ended: its error is not the attempt's fault.
		if ctx.Err() != nil {
			return giveUp(ReasonContext, context.Cause(ctx))
		}
		if actx != ctx && actx.Err() != nil {
			return giveUp(ReasonDeadline, context.Cause(actx))
		}
		dl := deadline
		if d, ok := ctx.Deadline(); ok && (dl.IsZero() || d.Before(dl)) {
			dl = d
		}
		step := p.next(attempt, prev, err, now, dl)
		switch step.Reason {
		case ReasonNone:
		case ReasonPermanent:
			observe(ctx, p, Event{Kind: EventGiveUp, Attempt: attempt, MaxAttempts: p.Attempts, Err: err, Elapsed: now.Sub(start), Reason: ReasonPermanent})
			if pe, ok := err.(*permanentError); ok {
				return pe.err
			}
			return err
		default:
			return giveUp(step.Reason, nil)
		}
		wait, hint := step.Wait, step.Hint
		prev = step.Shaped
		observe(ctx, p, Event{Kind: EventRetry, Attempt: attempt, MaxAttempts: p.Attempts, Wait: wait, Hint: hint, Err: err, Elapsed: now.Sub(start)})

		switch {
		case wait > shortWait:
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				now = time.Now()
				return giveUp(ReasonContext, context.Cause(ctx))
			}
		case wait > 0:
			time.Sleep(wait)
		}
		if ctx.Err() != nil {
			return giveUp(ReasonContext, context.Cause(ctx))
		}
	}
}

// call runs one attempt, under AttemptTimeout when set.
func call(ctx context.Context, p *Policy, fn func(context.Context) error) error {
	if p.AttemptTimeout <= 0 {
		return fn(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, p.AttemptTimeout)
	defer cancel()
	return fn(actx)
}

func isPermanentErr(e error) bool { _, ok := e.(*permanentError); return ok }

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

func since(start time.Time) time.Duration {
	if start.IsZero() {
		return 0
	}
	return time.Since(start)
}
