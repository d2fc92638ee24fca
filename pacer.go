package retry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Pacer makes attempts wait for their turn instead of refusing them: a rate
// that many callers (or many processes) share, such as a project's quota, or
// a pause a server asked for, such as a cooldown after a 429 with RetryInfo.
// Set it as [Policy.Pacer]; [Do] and [Run] consult it before every attempt,
// the first included. Implementations must be safe for concurrent use.
//
// A budget or a throttle ([Limiter]) only admits or refuses; a Pacer says
// when. The loop's deadline rule applies to its waits as to any other: no
// wait is begun that would end after the context's or the policy's deadline.
//
// The loop asks the Pacer right before each attempt, after the backoff wait
// of a retry: the two waits add up. (A shared schedule such as GCRA cannot
// hold a slot in the future without blocking every slot before it, so a
// pacer is never asked for a time ahead of now.)
type Pacer interface {
	// Reserve is called right before each attempt, with now (earliest: the
	// attempt could start at once) and the call's deadline (the earlier of
	// the context's and the policy's; zero for none). It returns the time
	// the attempt may start, at or after earliest; the loop waits until then.
	//
	// When that time would not be before deadline, Reserve must take
	// nothing and return an error that wraps [ErrPastDeadline] and says how
	// long the attempt would have had to wait; the loop then gives up at
	// once with ReasonDeadline. Any other error refuses the attempt: the
	// loop gives up with ReasonThrottled. The error becomes the Cause of the
	// loop's [*Error]. Reserve should return promptly: it runs on the
	// caller's goroutine, under ctx.
	//
	// A reservation whose wait is cut short (the context ends first) is not
	// used and is not given back by the loop.
	Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error)

	// Record reports the outcome of an attempt that Reserve let start: err
	// is nil on success, else the attempt's error, which may carry a
	// server's hint ([RetryAfter]). A Pacer that shares hints (a cooldown)
	// learns from it.
	Record(err error)
}

// ErrPastDeadline matches (with errors.Is) a wait that would have ended after
// the deadline. [Pacer] implementations wrap it in the error they return from
// Reserve in that case, saying how long the wait would have been.
var ErrPastDeadline = errors.New("retry: the wait would end after the deadline")

// Pacers returns a Pacer that asks each non-nil pacer in turn, so the
// attempt waits for all of them. When one returns a time ahead, Pacers waits
// until then before it asks the next (its Reserve returns late, by design):
// like the loop, it never asks a pacer for a time ahead of now, and it gives
// up at once, with [ErrPastDeadline], when that time is not before the
// deadline. Put pacers that take nothing (a cooldown) before those that take
// a slot (a quota): a slot taken before a later pacer refuses is not given
// back. Record reports to each of them.
func Pacers(ps ...Pacer) Pacer {
	var list pacers
	for _, p := range ps {
		if p != nil {
			list = append(list, p)
		}
	}
	return list
}

type pacers []Pacer

func (ps pacers) Reserve(ctx context.Context, now, deadline time.Time) (time.Time, error) {
	t := now
	for i, p := range ps {
		if i > 0 && t.After(now) {
			if !deadline.IsZero() && !t.Before(deadline) {
				return time.Time{}, fmt.Errorf("%w: a pacer's start is %v away, the deadline %v",
					ErrPastDeadline, time.Until(t).Round(time.Millisecond), time.Until(deadline).Round(time.Millisecond))
			}
			var timer *time.Timer
			if r, err := sleepUntil(ctx, &timer, t); r != ReasonNone {
				return time.Time{}, err
			}
			now = time.Now()
		}
		next, err := p.Reserve(ctx, now, deadline)
		if err != nil {
			return time.Time{}, err
		}
		t = next
		if t.Before(now) {
			t = now
		}
	}
	return t, nil
}

func (ps pacers) Record(err error) {
	for _, p := range ps {
		p.Record(err)
	}
}
