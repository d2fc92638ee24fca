package redisretry

import (
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
		mem := newMem()
		cfg := BudgetConfig{Key: "k", MinPerSecond: -1, Logger: discard}
		var bs []*Budget
		for range 3 {
			b, err := newBudget(mem, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			bs = append(bs, b)
		}
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
