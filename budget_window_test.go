package retry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

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

func TestWindowClockSkipsEpochZero(t *testing.T) {
	origin := time.Unix(0, 0)
	now := origin
	c := newWindowClock(func() time.Time { return now }, minWindow) // 1 ms slots
	now = origin.Add(time.Duration(1<<32-1) * time.Millisecond)     // uint32 + 1 wraps here
	if e := c.epoch(); e == 0 {
		t.Fatal("epoch 0 (the unused marker) after 2^32 slots")
	}
}
