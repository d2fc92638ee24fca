package retry

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// attemptCtx is the context of one attempt under a policy Deadline or
// AttemptTimeout when the caller's context can never be cancelled (its Done
// returns nil: context.Background, TODO, WithoutCancel, values over them).
// It behaves as context.WithDeadlineCause(parent, deadline, cause) whose
// cancel func is called when the attempt returns, but costs one allocation
// instead of four, and no timer, as long as nobody asks for its Done channel.
//
// Until then, while the attempt runs, Err compares the clock with the
// deadline; when the attempt returns, end records which came first: the
// return (context.Canceled from then on) or the deadline
// (context.DeadlineExceeded; a return at the deadline's very instant counts
// as after it, as context.WithDeadline counts a deadline that is not after
// now as passed: TestAttemptContextTie). The first call of Done, or the lookup of the
// standard library's private key (which context.Cause, context.AfterFunc and
// the With functions make), derives the standard library's own context in the
// same state, and every method but Deadline and Value hands over to it: a
// timer for what is left before the deadline, children and AfterFunc
// registered on it without a goroutine, context.Cause answered by it. The
// state changes once, by a CompareAndSwap, so that end and Err take no lock:
// whichever of end, Err (seeing the deadline passed) and derive moves it
// first decides, and the others follow.
//
// A parent that can be cancelled gets context.WithDeadlineCause at once (see
// call): without a timer at the deadline, a parent cancelled while an attempt
// ran past the deadline without looking at its context would leave no trace
// of which came first, and the two orders give different errors
// (TestAttemptContextMatchesStdlib has both).
type attemptCtx struct {
	parent   context.Context // Done returns nil
	deadline time.Time
	cause    error // of the deadline: errPolicyDeadline or context.DeadlineExceeded

	state   atomic.Uint32 // attemptRunning until end, Err or derive moves it, once
	derived atomic.Bool   // inner and cancel are set, never to change

	mu     sync.Mutex // held by derive
	inner  context.Context
	cancel context.CancelFunc
}

const (
	attemptRunning  = iota
	attemptExpired  // returned at or after the deadline, or seen past it by Err: context.DeadlineExceeded
	attemptEnded    // returned before the deadline: context.Canceled
	attemptHandedOn // derived while running: inner decides, end cancels it
)

// Deadline returns the attempt's deadline.
func (c *attemptCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done returns the channel of the derived standard context, deriving it on
// first use.
func (c *attemptCtx) Done() <-chan struct{} { return c.derive().Done() }

// Err returns nil while the attempt runs before its deadline,
// context.DeadlineExceeded once the deadline has passed, and
// context.Canceled once the attempt has returned before its deadline.
func (c *attemptCtx) Err() error {
	for {
		if c.derived.Load() {
			return c.inner.Err()
		}
		switch c.state.Load() {
		case attemptRunning:
			if time.Until(c.deadline) > 0 {
				return nil
			}
			// Past the deadline: say so for good (the clock says so from
			// now on anyway), unless end or derive has just decided.
			if c.state.CompareAndSwap(attemptRunning, attemptExpired) {
				return context.DeadlineExceeded
			}
		case attemptExpired:
			return context.DeadlineExceeded
		case attemptEnded:
			return context.Canceled
		default: // being derived
			return c.derive().Err()
		}
	}
}

// Value returns the parent's value for key, except for the standard
// library's private key (see cancelCtxKey), answered by the derived context.
func (c *attemptCtx) Value(key any) any {
	if cancelCtxKey == nil || key == cancelCtxKey {
		return c.derive().Value(key)
	}
	return c.parent.Value(key)
}

// String names the context as the standard library's would be named.
func (c *attemptCtx) String() string {
	name := fmt.Sprintf("%T", c.parent)
	if s, ok := c.parent.(fmt.Stringer); ok {
		name = s.String()
	}
	return name + ".WithDeadline(" + c.deadline.String() + " [" + time.Until(c.deadline).String() + "])"
}

// derive returns the standard library's context in the attempt's state,
// deriving it on first use.
func (c *attemptCtx) derive() context.Context {
	if c.derived.Load() {
		return c.inner
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		s := c.state.Load()
		if s == attemptRunning && !c.state.CompareAndSwap(attemptRunning, attemptHandedOn) {
			s = c.state.Load() // end or Err decided first
		}
		if s == attemptEnded {
			c.inner, c.cancel = context.WithCancel(c.parent)
			c.cancel()
		} else {
			// Running: a timer for what is left, cancelled by end.
			// Expired: cancelled at once (the deadline has passed), with
			// the cause.
			c.inner, c.cancel = context.WithDeadlineCause(c.parent, c.deadline, c.cause)
		}
		c.derived.Store(true)
	}
	return c.inner
}

// end is the cancel func, called once, when the attempt returns: a context
// still running is cancelled (context.Canceled), unless its deadline has
// passed (context.DeadlineExceeded); one handed on to a derived context
// cancels that.
func (c *attemptCtx) end() {
	if c.state.Load() == attemptRunning {
		s := uint32(attemptEnded)
		// time.Until reads only the monotonic clock: half of time.Now.
		if time.Until(c.deadline) <= 0 {
			s = attemptExpired
		}
		if c.state.CompareAndSwap(attemptRunning, s) {
			return
		}
	}
	if c.state.Load() != attemptHandedOn {
		return // Err saw the deadline pass first
	}
	c.mu.Lock() // derive may still be at work
	cancel := c.cancel
	c.mu.Unlock()
	cancel()
}

// cancelCtxKey is the private key under which the standard library's
// contexts answer Value with their cancellation state: context.Cause looks it
// up to find the cause, context.AfterFunc and the With functions to register
// a child directly instead of starting a goroutine. It is learnt once by
// asking context.Cause about a context that records the key it is asked for.
// Should a future Go stop asking (nil here), every Value lookup goes to the
// derived context, which answers it correctly, only at the derived context's
// cost.
var cancelCtxKey = probeCancelCtxKey()

func probeCancelCtxKey() any {
	p := &keyProbe{}
	context.Cause(p)
	return p.key
}

// keyProbe is a cancelled context that records the key Value is asked for.
type keyProbe struct{ key any }

func (*keyProbe) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*keyProbe) Done() <-chan struct{}       { return nil }
func (*keyProbe) Err() error                  { return context.Canceled }
func (p *keyProbe) Value(key any) any         { p.key = key; return nil }
