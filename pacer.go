package retry

import (
	"context"
	"errors"
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

// Pacers returns a Pacer that asks each non-nil pacer in turn: the time one
// returns is the earliest time passed to the next, so the attempt waits for
// all of them. Put pacers that take nothing (a cooldown) before those that
// take a slot (a quota): a slot taken before a later pacer refuses is not
// given back. Record reports to each of them.
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

func (ps pacers) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	t := earliest
	for _, p := range ps {
		var err error
		if t, err = p.Reserve(ctx, t, deadline); err != nil {
			return time.Time{}, err
		}
	}
	return t, nil
}

func (ps pacers) Record(err error) {
	for _, p := range ps {
		p.Record(err)
	}
}
