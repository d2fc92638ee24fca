package redisretry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

func TestBudgetFleetRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Three processes share a budget of 20 % without a floor. Process 0
		// makes every request; processes 1 and 2 only retry: a fleet budget
		// lets them use the fleet's allowance, and the fleet as a whole never
		// retries more than 20 % of its requests.
		leaks := noLeaks(t)
		mem := newMem()
		cfg := BudgetConfig{Key: "k", MinPerSecond: -1, Logger: discard}
		var bs []*Budget
		for range 3 {
			b, err := newBudget(mem, cfg)
			if err != nil {
				t.Fatal(err)
			}
			bs = append(bs, b)
		}
		defer func() {
			for _, b := range bs {
				b.Close()
			}
			leaks() // flushes and refills are over
		}()
		admitted := 0
		for range 100 { // 10 s, one request per 10 ms
			for range 10 {
				bs[0].Admit(false)
				time.Sleep(10 * time.Millisecond)
			}
			for _, b := range bs[1:] {
				for range 3 {
					if b.Admit(true) {
						admitted++
					}
				}
			}
		}
		// 1000 requests in the last 10 s window: 200 retries at most (plus
		// those of requests not yet flushed, which only lower it).
		if admitted > 200 || admitted < 150 {
			t.Fatalf("%d retries admitted for 1000 fleet requests, want about 200 and never more", admitted)
		}
		// A per-process RatioBudget of processes 1 and 2 would have admitted
		// none of them: they made no requests.
		local := retry.NewRatioBudget(retry.RatioBudgetConfig{MinPerSecond: -1})
		if local.Admit(true) {
			t.Fatal("a local budget without requests admitted a retry")
		}
		var rts int64
		for _, b := range bs {
			rts += b.Stats().RoundTrips
		}
		t.Logf("%d retries admitted, %d round trips for 1000 requests and 600 retry attempts", admitted, rts)
		if rts > 200 {
			t.Fatalf("%d round trips: the budget should batch requests and lease permits", rts)
		}
	})
}

func TestBudgetFirstAttemptsNeverRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		mem.setFail(errTestDown)
		for _, mode := range []FailureMode{FailLocal, FailOpen, FailClosed} {
			b, _ := newBudget(mem, BudgetConfig{Key: "k", OnFailure: mode, Logger: discard})
			for range 1000 {
				if !b.Admit(false) {
					t.Fatalf("%v: a first attempt was refused", mode)
				}
			}
			b.Close()
		}
	})
}

func TestBudgetFailureModes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			mode FailureMode
			want int // retries admitted of 50 with 100 requests made
		}{
			{FailLocal, 20}, // the local RatioBudget: 20 % of 100, no floor
			{FailOpen, 50},
			{FailClosed, 0},
		} {
			mem := newMem()
			mem.setFail(errTestDown)
			b, _ := newBudget(mem, BudgetConfig{Key: "k", OnFailure: tc.mode, MinPerSecond: -1, Logger: discard})
			for range 100 {
				b.Admit(false)
			}
			got := 0
			for range 50 {
				if b.Admit(true) {
					got++
				}
			}
			if got != tc.want || b.State() != StateFallback {
				t.Errorf("%v: %d retries admitted in state %v, want %d in fallback", tc.mode, got, b.State(), tc.want)
			}
			b.Close()
		}
	})
}

func TestBudgetGivesBackUnusedPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		// A floor of 10 per window of 1 s: 10 permits for the fleet.
		cfg := BudgetConfig{Key: "k", Window: time.Second, MinPerSecond: 10, Lease: 8, Logger: discard}
		a, _ := newBudget(mem, cfg)
		b, _ := newBudget(mem, cfg)
		defer b.Close()
		for range 4 { // a's lease grows to 8
			if !a.Admit(true) {
				t.Fatal("refused")
			}
			time.Sleep(60 * time.Millisecond) // the lease expires: a slot is 50 ms
		}
		a.Admit(true)
		// a holds a lease of unused permits; Close gives them back.
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for b.Admit(true) {
			n++
		}
		// 10 in the window, minus what a used (5).
		if n != 5 {
			t.Fatalf("b got %d permits after a closed, want the 5 a did not use", n)
		}
	})
}

func TestBudgetCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A floor of 10 retries per window for the fleet (no requests). Process
		// a is admitted 10 retries that are never made (a pacer refused
		// them): Cancel gives the permits back, so process b can still use
		// the fleet's 10.
		mem := newMem()
		cfg := BudgetConfig{Key: "k", Window: 10 * time.Second, MinPerSecond: 1, Logger: discard}
		a, _ := newBudget(mem, cfg)
		b, _ := newBudget(mem, cfg)
		defer b.Close()
		for i := range 10 {
			if !a.Admit(true) {
				t.Fatalf("retry %d refused", i)
			}
			a.Cancel(true)
		}
		a.Close() // gives its lease back
		n := 0
		for b.Admit(true) {
			n++
		}
		if n != 10 {
			t.Fatalf("b was admitted %d retries after a cancelled all of its own, want the fleet's 10", n)
		}
	})
}

func TestBudgetCancelThroughTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Each call's retry is admitted by the budget and then refused by
		// the pacer (past the deadline): the loop cancels it, so the
		// fleet's budget is not used up by retries never sent.
		mem := newMem()
		cfg := BudgetConfig{Key: "k", Window: 10 * time.Second, MinPerSecond: 1, Logger: discard}
		bu, _ := newBudget(mem, cfg)
		p := retry.Policy{Budget: bu, Pacer: &refuseRetries{}, Jitter: retry.Zero, InitialDelay: time.Millisecond}
		for range 30 {
			retry.Run(t.Context(), p, func(context.Context) error { return errors.New("flaky") })
		}
		bu.Close()
		other, _ := newBudget(mem, cfg)
		defer other.Close()
		n := 0
		for other.Admit(true) {
			n++
		}
		if n != 10 {
			t.Fatalf("%d retries left for the fleet after 30 retries that were never sent, want all 10", n)
		}
	})
}

func TestBudgetCancelFirstAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 100 requests admitted, 50 of them cancelled (never sent): the
		// fleet counts 50, so 20 % of them are 10 retries.
		mem := newMem()
		cfg := BudgetConfig{Key: "k", MinPerSecond: -1, Logger: discard}
		a, _ := newBudget(mem, cfg)
		for range 100 {
			a.Admit(false)
		}
		for range 50 {
			a.Cancel(false)
		}
		a.Close() // flushes
		b, _ := newBudget(mem, cfg)
		defer b.Close()
		n := 0
		for b.Admit(true) {
			n++
		}
		if n != 10 {
			t.Fatalf("%d retries for 100 requests of which 50 were cancelled, want 10", n)
		}
	})
}

// refuseRetries is a Pacer for calls made one after the other that fail
// once: it lets every first attempt start and refuses every retry as past
// the deadline.
type refuseRetries struct{ n int }

func (p *refuseRetries) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	if p.n++; p.n%2 == 0 {
		return time.Time{}, retry.ErrPastDeadline
	}
	return earliest, nil
}
func (*refuseRetries) Record(error) {}
