package retry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Tests for the defects found by the second review of the core; each failed
// on the code before its fix.

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

func TestZeroAfterResolved(t *testing.T) {
	r := Google().Resolved()
	r.Jitter = Zero
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if w := r.Backoff(3, 0, 0.5); w != 8*time.Second {
		t.Fatalf("Backoff(3) = %v, want 8s (no jitter)", w)
	}
	r = Google().Resolved()
	r.MaxDelay, r.InitialDelay = Zero, Zero
	if err := r.Validate(); err != nil {
		t.Fatalf("Zero delays on a resolved policy: %v", err)
	}
	if w := r.Backoff(3, 0, 0.5); w != 0 {
		t.Fatalf("Backoff(3) = %v, want 0", w)
	}
	synctest.Test(t, func(t *testing.T) {
		r := Google().Resolved()
		r.Jitter, r.Attempts = Zero, 3
		begin := time.Now()
		Run(t.Context(), r, func(context.Context) error { return errFlaky })
		if got := time.Since(begin); got != 3*time.Second {
			t.Fatalf("waited %v, want 1s + 2s", got)
		}
	})
}

func TestMergeKeepsExplicitMaxRetryAfter(t *testing.T) {
	r := Policy{}.Resolved()
	r.MaxRetryAfter = 10 * time.Second
	if m := r.Merge(Policy{Attempts: 3}).Resolved(); m.MaxRetryAfter != 10*time.Second {
		t.Fatalf("MaxRetryAfter set after Resolved: %v after Merge, want 10s", m.MaxRetryAfter)
	}
	r = Policy{}.Resolved()
	r.MaxRetryAfter = Zero
	if got := r.Merge(Policy{}).Hinted(0, 30*time.Second, 0); got != 0 {
		t.Fatalf("hints off after Resolved: Merge turned them on (%v)", got)
	}
	r = Policy{}.Resolved()
	r.MaxDelay = 5 * time.Second // MaxRetryAfter stays the 60 s it resolved to
	if m := r.Merge(Policy{}).Resolved(); m.MaxRetryAfter != 60*time.Second {
		t.Fatalf("MaxDelay changed after Resolved: MaxRetryAfter %v after Merge, want 60s as before", m.MaxRetryAfter)
	}
}

// TestValidateWideNegatives: negative durations whose low 32 bits are zero
// (they passed the fast path on 32-bit platforms: run with GOARCH=386).
func TestValidateWideNegatives(t *testing.T) {
	for _, p := range []Policy{
		{Jitter: -(1 << 32)}, {Deadline: -(1 << 32)}, {AttemptTimeout: -(5 << 32)}, {MaxRetryAfter: -(1 << 33)},
	} {
		if p.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", p)
		}
	}
}

func TestPacerCancelledIsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blocking := pacerFunc(func(ctx context.Context, _, _ time.Time) (time.Time, error) {
			<-ctx.Done()
			return time.Time{}, ctx.Err()
		})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(20*time.Millisecond, cancel)
		err := Run(ctx, Policy{Pacer: blocking}, func(context.Context) error { return nil })
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonContext || errors.Is(err, ErrThrottled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v: want ReasonContext", err)
		}
	})
}

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

func TestRatioBudgetGivenBack(t *testing.T) {
	newBudget := func() *RatioBudget {
		return NewRatioBudget(RatioBudgetConfig{Ratio: 1, MinPerSecond: -1, Now: func() time.Time { return time.Unix(0, 0) }})
	}
	synctest.Test(t, func(t *testing.T) {
		// The throttle refuses the retry: the budget gets it back.
		b := newBudget()
		Run(t.Context(), Policy{Budget: b, Throttle: &fakeLimiter{refuseRetry: true}}, func(context.Context) error { return errFlaky })
		if got := b.Available(); got != 1 {
			t.Fatalf("after a retry the throttle refused: Available %d, want 1", got)
		}
		// The pacer refuses the retry.
		b = newBudget()
		n := 0
		refuse := pacerFunc(func(_ context.Context, earliest, _ time.Time) (time.Time, error) {
			if n++; n > 1 {
				return time.Time{}, errors.New("closed")
			}
			return earliest, nil
		})
		Run(t.Context(), Policy{Budget: b, Pacer: refuse}, func(context.Context) error { return errFlaky })
		if got := b.Available(); got != 1 {
			t.Fatalf("after a retry the pacer refused: Available %d, want 1", got)
		}
		// The context ends during the wait.
		b = newBudget()
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		Run(ctx, Policy{Budget: b}, func(context.Context) error { return errFlaky })
		if got := b.Available(); got != 1 {
			t.Fatalf("after a wait cut short: Available %d, want 1", got)
		}
		// The first attempt refused by the pacer: its request is taken back.
		b = newBudget()
		Run(t.Context(), Policy{Budget: b, Pacer: pacerFunc(func(context.Context, time.Time, time.Time) (time.Time, error) {
			return time.Time{}, errors.New("closed")
		})}, func(context.Context) error { return nil })
		if got := b.Available(); got != 0 {
			t.Fatalf("after a first attempt the pacer refused: Available %d, want 0 (no request counted)", got)
		}
	})
}

func TestBackoffInvalidNegativeCap(t *testing.T) {
	p := Policy{MaxDelay: -5}
	if w := p.Backoff(0, 0, 0.5); w != 0 {
		t.Fatalf("Backoff with MaxDelay -5 = %v, want 0", w)
	}
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

func TestShapeText(t *testing.T) {
	b, err := json.Marshal(struct{ S, Z Shape }{ShapeFull, 0})
	if err != nil || string(b) != `{"S":"full","Z":"google"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var v struct{ S Shape }
	if err := json.Unmarshal([]byte(`{"S":"decorrelated"}`), &v); err != nil || v.S != ShapeDecorrelated {
		t.Fatalf("Unmarshal = %v, %v", v.S, err)
	}
	if err := json.Unmarshal([]byte(`{"S":"nope"}`), &v); err == nil {
		t.Fatal("Unmarshal of an unknown shape: no error")
	}
	if _, err := Shape(200).MarshalText(); err == nil {
		t.Fatal("MarshalText of an unknown shape: no error")
	}
}

func TestObserversOfNothingIsNil(t *testing.T) {
	if Observers() != nil || Observers(nil, nil) != nil {
		t.Fatal("Observers of no observer is not nil: it would silence the default log")
	}
}

func TestWindowClockSkipsEpochZero(t *testing.T) {
	origin := time.Unix(0, 0)
	now := origin
	c := newWindowClock(func() time.Time { return now }, minWindow) // 1 ms slots
	now = origin.Add(time.Duration(1<<32-1) * time.Millisecond)     // uint32 + 1 wraps here
	if e := c.epoch(); e == 0 {
		t.Fatal("epoch 0 (the unused marker) after 2^32 slots")
	}
}
