package retry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestHangingBackendIsRecorded: an attempt cut short by a deadline (the
// context's or the policy's) is a failure for the limiters; a cancelled one
// is not counted.
func TestHangingBackendIsRecorded(t *testing.T) {
	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	tests := []struct {
		name     string
		ctx      func(context.Context) (context.Context, context.CancelFunc)
		p        Policy
		wantFail int32
	}{
		{"context deadline", func(c context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(c, time.Second)
		}, Policy{}, 1},
		{"policy deadline", func(c context.Context) (context.Context, context.CancelFunc) {
			return context.WithCancel(c)
		}, Policy{Deadline: time.Second}, 1},
		{"cancelled", func(c context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(c)
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, Policy{}, 0},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			l := &fakeLimiter{}
			tt.p.Budget, tt.p.Throttle = l, l
			ctx, cancel := tt.ctx(t.Context())
			defer cancel()
			Run(ctx, tt.p, hang)
			if got := l.fails.Load(); got != 2*tt.wantFail || l.oks.Load() != 0 {
				t.Fatalf("%s: %d failures, %d oks recorded; want %d failures", tt.name, got, l.oks.Load(), 2*tt.wantFail)
			}
		})
	}
}

func TestPermanentAfterDeadlineIsReturnedAsIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := errors.New("400 bad request")
		l := &fakeLimiter{}
		rec := newRecorder()
		err := Run(t.Context(), Policy{Deadline: 20 * time.Millisecond, Budget: l, Observer: rec.Observe}, func(context.Context) error {
			time.Sleep(30 * time.Millisecond)
			return Permanent(bad)
		})
		if err != bad || l.oks.Load() != 1 {
			t.Fatalf("err %v (want it as is), %d oks", err, l.oks.Load())
		}
		if g := rec.Of(EventGiveUp); len(g) != 1 || g[0].Reason != ReasonPermanent {
			t.Fatalf("events %+v", rec.Events())
		}
	})
}

// TestNoAttemptStartsAfterTheDeadline: time spent in an observer or a pacer
// counts; the loop gives up instead of starting an attempt late.
func TestNoAttemptStartsAfterTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		p := Policy{Deadline: 60 * time.Millisecond, InitialDelay: 50 * time.Millisecond, Jitter: Zero,
			Observer: func(_ context.Context, e Event) {
				if e.Kind == EventRetry {
					time.Sleep(70 * time.Millisecond) // past the deadline
				}
			}}
		err := Run(t.Context(), p, func(context.Context) error { calls++; return errFlaky })
		var re *Error
		if calls != 1 || !errors.As(err, &re) || re.Reason != ReasonDeadline || re.Attempts != 1 || !errors.Is(err, errFlaky) {
			t.Fatalf("calls %d, err %v: want one attempt, then a deadline give-up", calls, err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// A pacer whose Reserve takes 50 ms grants a slot 60 ms after the
		// start: the attempt starts at its slot, not 50 ms after it.
		begin := time.Now()
		slow := pacerFunc(func(_ context.Context, earliest, _ time.Time) (time.Time, error) {
			time.Sleep(50 * time.Millisecond)
			return begin.Add(60 * time.Millisecond), nil
		})
		var at time.Duration
		err := Run(t.Context(), Policy{Deadline: 100 * time.Millisecond, Pacer: slow}, func(context.Context) error {
			at = time.Since(begin)
			return nil
		})
		if err != nil || at != 60*time.Millisecond {
			t.Fatalf("err %v, attempt at %v; want at its slot, 60ms", err, at)
		}
	})
}

// pacerFunc is a Pacer from a Reserve function.
type pacerFunc func(ctx context.Context, earliest, deadline time.Time) (time.Time, error)

func (f pacerFunc) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	return f(ctx, earliest, deadline)
}

func (pacerFunc) Record(error) {}

func TestDeadlineGiveUpIsATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, p := range []Policy{{Deadline: 1500 * time.Millisecond, Jitter: Zero}, {Jitter: Zero}} {
			ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
			err := Run(ctx, p, func(context.Context) error { return errFlaky })
			cancel()
			var re *Error
			if !errors.As(err, &re) || re.Reason != ReasonDeadline || !re.Timeout() || !errors.Is(err, context.DeadlineExceeded) ||
				!errors.Is(err, ErrPastDeadline) || !strings.Contains(err.Error(), "next wait (2s)") {
				t.Fatalf("%+v: err %v: want a deadline give-up that is a timeout and names the wait", p, err)
			}
		}
		// A cancellation is not a timeout, even after an attempt that timed out.
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(1500*time.Millisecond, cancel)
		err := Run(ctx, Policy{AttemptTimeout: time.Second}, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonContext || re.Timeout() {
			t.Fatalf("cancelled: err %v, Timeout %v", err, re.Timeout())
		}
	})
}

func TestModelArmorDeadlineEndsTheLoop(t *testing.T) {
	p := ModelArmor()
	var sum time.Duration
	for n := range p.Attempts - 1 {
		sum += p.Backoff(n, 0, 0) // no jitter: the shortest waits
	}
	if sum < p.Deadline {
		t.Fatalf("%d attempts wait at least %v in all, under the %v deadline: the count ends the loop", p.Attempts, sum, p.Deadline)
	}
}
