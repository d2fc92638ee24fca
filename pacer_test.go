package retry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakePacer gives each attempt the next slot of a fixed interval (a local
// GCRA with a burst of 1), refusing a slot that would not start before the
// deadline, and records outcomes.
type fakePacer struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time // the next free slot
	refuse   error     // returned by every Reserve when set
	lie      time.Duration
	reserved int
	outcomes []error
}

func (f *fakePacer) Reserve(_ context.Context, earliest, deadline time.Time) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return time.Time{}, f.refuse
	}
	t := earliest
	if f.next.After(t) {
		t = f.next
	}
	if f.lie != 0 {
		return earliest.Add(f.lie), nil
	}
	if !deadline.IsZero() && !t.Before(deadline) {
		return time.Time{}, fmt.Errorf("fake pacer: a slot in %v: %w", t.Sub(earliest), ErrPastDeadline)
	}
	f.next = t.Add(f.interval)
	f.reserved++
	return t, nil
}

func (f *fakePacer) Record(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcomes = append(f.outcomes, err)
}

func TestPacerSpacesAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pc := &fakePacer{interval: 10 * time.Second}
		pc.next = time.Now().Add(3 * time.Second) // someone else holds the next 3 s
		rec := newRecorder()
		var starts []time.Duration
		begin := time.Now()
		n := 0
		err := Run(t.Context(), Policy{Pacer: pc, Jitter: Zero, Observer: rec.Observe}, func(context.Context) error {
			starts = append(starts, time.Since(begin))
			if n++; n < 3 {
				return errFlaky
			}
			return nil
		})
		// First attempt at 3 s (the pacer), then the backoff of 1 s, then the
		// pacer's slot at 13 s; then 2 s of backoff and the slot at 23 s.
		want := []time.Duration{3 * time.Second, 13 * time.Second, 23 * time.Second}
		if err != nil || fmt.Sprint(starts) != fmt.Sprint(want) {
			t.Fatalf("err %v, attempts started at %v, want %v", err, starts, want)
		}
		if r := rec.Of(EventRetry); len(r) != 2 || r[0].Wait != time.Second || r[1].Wait != 2*time.Second {
			t.Fatalf("retry events %+v: want the backoff waits (1s, 2s)", r)
		}
		if len(pc.outcomes) != 3 || pc.outcomes[0] != errFlaky || pc.outcomes[2] != nil {
			t.Fatalf("pacer saw outcomes %v", pc.outcomes)
		}
	})
}

func TestPacerBackoffLongerThanSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pc := &fakePacer{interval: 100 * time.Millisecond}
		begin := time.Now()
		var starts []time.Duration
		Run(t.Context(), Policy{Pacer: pc, Jitter: Zero, Attempts: 3}, func(context.Context) error {
			starts = append(starts, time.Since(begin))
			return errFlaky
		})
		if want := []time.Duration{0, time.Second, 3 * time.Second}; fmt.Sprint(starts) != fmt.Sprint(want) {
			t.Fatalf("attempts at %v, want %v: the backoff, not the sum of both", starts, want)
		}
	})
}

func TestPacerDeadlineRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first attempt: the slot is 30 s away, the deadline 10 s.
		pc := &fakePacer{interval: time.Second}
		pc.next = time.Now().Add(30 * time.Second)
		rec := newRecorder()
		calls := 0
		begin := time.Now()
		err := Run(t.Context(), Policy{Pacer: pc, Deadline: 10 * time.Second, Observer: rec.Observe}, func(context.Context) error {
			calls++
			return nil
		})
		var re *Error
		if calls != 0 || !errors.As(err, &re) || re.Reason != ReasonDeadline || re.Attempts != 0 ||
			!errors.Is(err, ErrPastDeadline) || time.Since(begin) != 0 || pc.reserved != 0 {
			t.Fatalf("calls %d, err %v after %v, %d reserved: want an immediate deadline give-up", calls, err, time.Since(begin), pc.reserved)
		}
		if g := rec.Of(EventGiveUp); len(g) != 1 || g[0].Reason != ReasonDeadline {
			t.Fatalf("events %+v", rec.Events())
		}

		// A retry: the context's deadline applies too.
		pc = &fakePacer{interval: 20 * time.Second}
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		calls = 0
		err = Run(ctx, Policy{Pacer: pc}, func(context.Context) error { calls++; return errFlaky })
		if calls != 1 || !errors.As(err, &re) || re.Reason != ReasonDeadline || !errors.Is(err, ErrPastDeadline) || !errors.Is(err, errFlaky) {
			t.Fatalf("retry: calls %d, err %v", calls, err)
		}
	})
}

func TestPacerThatLies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Past the deadline although asked not to: the loop gives up anyway.
		pc := &fakePacer{lie: time.Hour}
		calls := 0
		err := Run(t.Context(), Policy{Pacer: pc, Deadline: time.Minute}, func(context.Context) error { calls++; return nil })
		var re *Error
		if calls != 0 || !errors.As(err, &re) || re.Reason != ReasonDeadline || !errors.Is(err, ErrPastDeadline) {
			t.Fatalf("calls %d, err %v", calls, err)
		}
		// Before earliest: the loop waits the backoff all the same.
		pc = &fakePacer{lie: -time.Hour}
		begin := time.Now()
		var starts []time.Duration
		Run(t.Context(), Policy{Pacer: pc, Attempts: 2, Jitter: Zero}, func(context.Context) error {
			starts = append(starts, time.Since(begin))
			return errFlaky
		})
		if want := []time.Duration{0, time.Second}; fmt.Sprint(starts) != fmt.Sprint(want) {
			t.Fatalf("attempts at %v, want %v", starts, want)
		}
	})
}

func TestPacerRefusesAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		no := errors.New("fleet quota closed")
		calls := 0
		err := Run(t.Context(), Policy{Pacer: &fakePacer{refuse: no}}, func(context.Context) error { calls++; return nil })
		var re *Error
		if calls != 0 || !errors.As(err, &re) || re.Reason != ReasonThrottled || !errors.Is(err, no) || !errors.Is(err, ErrThrottled) {
			t.Fatalf("refused: calls %d, err %v", calls, err)
		}

		// Cancelled during the pacer's wait.
		pc := &fakePacer{interval: time.Second}
		pc.next = time.Now().Add(time.Minute)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(5*time.Second, cancel)
		begin := time.Now()
		err = Run(ctx, Policy{Pacer: pc}, func(context.Context) error { calls++; return nil })
		if calls != 0 || !errors.As(err, &re) || re.Reason != ReasonContext || !errors.Is(err, context.Canceled) || time.Since(begin) != 5*time.Second {
			t.Fatalf("cancelled: calls %d, err %v after %v", calls, err, time.Since(begin))
		}
	})
}

func TestPacersChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cool := &fakePacer{}
		cool.next = time.Now().Add(25 * time.Second) // a server asked for 25 s
		quota := &fakePacer{interval: time.Second}
		var asked time.Duration
		begin := time.Now()
		watch := pacerFunc(func(_ context.Context, now, _ time.Time) (time.Time, error) {
			asked = now.Sub(begin)
			if !now.Equal(time.Now()) {
				t.Errorf("the second pacer was asked for %v at %v", now.Sub(begin), time.Since(begin))
			}
			return now, nil
		})
		var at time.Duration
		err := Run(t.Context(), Policy{Pacer: Pacers(cool, nil, watch, quota)}, func(context.Context) error {
			at = time.Since(begin)
			return nil
		})
		// The quota was asked at 25 s, when the cooldown ended: its slot is
		// then, not 25 s ahead of everybody else's.
		if err != nil || at != 25*time.Second || asked != 25*time.Second || quota.next.Sub(begin) != 26*time.Second {
			t.Fatalf("err %v, attempt at %v, second pacer asked at %v, quota's next slot at %v", err, at, asked, quota.next.Sub(begin))
		}
		if len(cool.outcomes) != 1 || len(quota.outcomes) != 1 {
			t.Fatalf("outcomes %v %v", cool.outcomes, quota.outcomes)
		}

		// A first pacer's time past the deadline: no wait, no slot taken.
		cool.next = time.Now().Add(time.Hour)
		quota2 := &fakePacer{interval: time.Second}
		start := time.Now()
		err = Run(t.Context(), Policy{Pacer: Pacers(cool, quota2), Deadline: time.Minute}, func(context.Context) error { return nil })
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonDeadline || !errors.Is(err, ErrPastDeadline) || time.Since(start) != 0 || quota2.reserved != 0 {
			t.Fatalf("err %v after %v, %d slots taken: want an immediate deadline give-up", err, time.Since(start), quota2.reserved)
		}
	})
}

// TestPacerAskedAfterTheBackoff: the pacer is asked when the attempt could
// start, never for a time ahead: the backoff and the pacer's waits add up.
func TestPacerAskedAfterTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		var asked []time.Duration
		wait := pacerFunc(func(_ context.Context, now, _ time.Time) (time.Time, error) {
			if !now.Equal(time.Now()) {
				t.Errorf("asked for %v at %v", now.Sub(begin), time.Since(begin))
			}
			asked = append(asked, time.Since(begin))
			return now.Add(500 * time.Millisecond), nil
		})
		var starts []time.Duration
		Run(t.Context(), Policy{Pacer: wait, Attempts: 3, Jitter: Zero}, func(context.Context) error {
			starts = append(starts, time.Since(begin))
			return errFlaky
		})
		wantAsked := []time.Duration{0, 1500 * time.Millisecond, 4 * time.Second}
		wantStarts := []time.Duration{500 * time.Millisecond, 2 * time.Second, 4500 * time.Millisecond}
		if fmt.Sprint(asked) != fmt.Sprint(wantAsked) || fmt.Sprint(starts) != fmt.Sprint(wantStarts) {
			t.Fatalf("asked at %v, attempts at %v; want %v and %v", asked, starts, wantAsked, wantStarts)
		}
	})
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
