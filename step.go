package retry

import (
	"time"

	"github.com/backoffkit/retry/internal/errchain"
)

// Step is the loop's decision after a failed attempt; see [Policy.Next].
type Step struct {
	// Reason is ReasonNone to retry after Wait, otherwise why to give up.
	Reason Reason
	// Wait is the wait before the next attempt: the Shape's wait, raised by
	// a server hint when there is one.
	Wait time.Duration
	// Shaped is the Shape's wait alone, before any hint: pass it as prev to
	// the next call of Next (ShapeDecorrelated grows from it).
	Shaped time.Duration
	// Hint is the server hint found in the error, 0 if none (or ignored).
	Hint time.Duration
}

// Begin admits a call's first attempt: the Throttle may refuse it (false:
// fail fast with [ErrThrottled]); the Budget is told a request starts and never
// refuses. Begin does not consult the Pacer: a loop that drives Next itself
// calls Policy.Pacer's Reserve and Record around each attempt. [Do] calls it; a loop that drives [Policy.Next] itself calls it
// once per call, before the first attempt.
func (p Policy) Begin() bool {
	if p.Throttle != nil && !p.Throttle.Admit(false) {
		return false
	}
	if p.Budget != nil {
		p.Budget.Admit(false) // never refuses a first attempt; lets ratio budgets count requests
	}
	return true
}

// Succeeded records a successful attempt with the Throttle and the Budget.
func (p Policy) Succeeded() { p.record(true) }

func (p *Policy) record(ok bool) {
	if p.Throttle != nil {
		p.Throttle.Record(ok)
	}
	if p.Budget != nil {
		p.Budget.Record(ok)
	}
}

// Next decides what follows attempt number attempt (from 1) that failed with
// err at time now. prev is the Shaped wait of the previous Step (0 before the
// first retry); deadline is the earliest deadline that applies (the
// context's, the policy's Deadline measured from the first attempt), zero for
// none.
//
// In order, it: gives up with ReasonPermanent if err is not retryable
// ([Permanent], [Unretryable], Policy.Retryable), recording it with the
// limiters as a non-overload outcome (a failure for Unretryable); records the failure; gives up with ReasonAttempts when
// attempt reaches Attempts; computes the wait with [Policy.Backoff] and a
// server hint with [Policy.Hinted]; gives up with ReasonDeadline if the wait
// would not end before deadline; asks the Budget (ReasonBudget) and then the
// Throttle (ReasonThrottled) to admit the retry, giving it back to the Budget
// when the Throttle refuses it (see [Limiter]).
//
// This is the one step [Do] takes between attempts, exported for loops that
// cannot call Do: a gax.Retryer, the simulator's virtual clock. Such a loop
// calls [Policy.Begin] before the first attempt and [Policy.Succeeded] after a
// success. Next does not look at contexts: the caller handles cancellation.
func (p Policy) Next(attempt int, prev time.Duration, err error, now, deadline time.Time) Step {
	p.resolveInPlace()
	return p.next(attempt, prev, err, now, deadline)
}

func (p *Policy) next(attempt int, prev time.Duration, err error, now, deadline time.Time) Step {
	if halt, ok := p.halts(err); halt {
		p.record(ok)
		return Step{Reason: ReasonPermanent}
	}
	return p.retryable(attempt, prev, err, now, deadline)
}

// halts reports whether err stops the loop as it is ([Permanent],
// [Unretryable], Policy.Retryable) and, if so, how the limiters record it.
func (p *Policy) halts(err error) (halt, ok bool) {
	if m := errchain.Find(err, asPermanent); m.found {
		return true, m.pe == nil || !m.pe.transient
	}
	if p.Retryable != nil && !p.Retryable(err) {
		return true, true
	}
	return false, false
}

// retryable is Next for an error that does not halt the loop.
func (p *Policy) retryable(attempt int, prev time.Duration, err error, now, deadline time.Time) Step {
	p.record(false)
	if attempt >= p.Attempts {
		return Step{Reason: ReasonAttempts}
	}
	s := Step{Shaped: p.backoff(attempt-1, prev, p.rand())}
	s.Wait = s.Shaped
	if hint, ok := RetryAfter(err); ok && p.MaxRetryAfter > 0 {
		s.Hint = hint
		s.Wait = p.hinted(s.Wait, hint, p.rand())
	}
	// Never begin a wait that would end after a deadline.
	if !deadline.IsZero() && !now.Add(s.Wait).Before(deadline) {
		s.Reason = ReasonDeadline
		return s
	}
	// The budget first: a retry it refuses is never sent, so the throttle
	// must not count it as a request. A retry the throttle refuses is given
	// back to the budget.
	if p.Budget != nil && !p.Budget.Admit(true) {
		s.Reason = ReasonBudget
		return s
	}
	if p.Throttle != nil && !p.Throttle.Admit(true) {
		cancelAdmit(p.Budget, true)
		s.Reason = ReasonThrottled
	}
	return s
}

// cancelAdmitted tells the limiters that the attempt they admitted (a retry,
// or a call's first attempt) is not made after all.
func (p *Policy) cancelAdmitted(retry bool) {
	cancelAdmit(p.Budget, retry)
	cancelAdmit(p.Throttle, retry)
}

func cancelAdmit(l Limiter, retry bool) {
	if c, ok := l.(interface{ Cancel(retry bool) }); ok {
		c.Cancel(retry)
	}
}
