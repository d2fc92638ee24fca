package retry_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

// constRand returns u every time and counts the calls.
type constRand struct {
	u     float64
	calls atomic.Int64
}

func (r *constRand) Float64() float64 { r.calls.Add(1); return r.u }

// load records requests that ended, accepts of them accepted.
func load(t *retry.AdaptiveThrottle, requests, accepts int) {
	for i := range requests {
		t.Record(i < accepts)
	}
}

func TestThrottleProbabilityMatchesFormula(t *testing.T) {
	for _, tc := range []struct {
		requests, accepts int
		k                 float64
	}{
		{0, 0, 2},
		{1, 0, 2},
		{10, 5, 2},  // exactly K·accepts: no rejection
		{10, 4, 2},  // 2/11
		{3, 1, 2},   // 1/4
		{100, 0, 2}, // 100/101
		{100, 10, 1.1},
		{1000, 300, 3},
		{50, 40, 1},
	} {
		var clk limClock
		rnd := &constRand{u: 0.999999} // admit unless p is almost 1
		th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{K: tc.k, Now: clk.Now, Rand: rnd.Float64})
		load(th, tc.requests, tc.accepts)
		r, a := float64(tc.requests), float64(tc.accepts)
		want := math.Max(0, (r-tc.k*a)/(r+1))
		if got := th.RejectProbability(); math.Abs(got-want) > 1e-12 {
			t.Errorf("requests %d, accepts %d, K %v: p = %v, want %v", tc.requests, tc.accepts, tc.k, got, want)
		}
	}
}

func TestThrottleAdmitUsesTheProbability(t *testing.T) {
	var clk limClock
	rnd := &constRand{}
	th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: clk.Now, Rand: rnd.Float64})
	// While p is 0 the random source is not even consulted.
	for range 10 {
		th.Admit(false)
		th.Record(true)
	}
	if rnd.calls.Load() != 0 {
		t.Fatalf("Rand called %d times while p was 0", rnd.calls.Load())
	}
	// 10 requests and 10 accepts, then 29 requests that fail: p climbs to
	// (39 − 20)/40. Check both sides of it.
	for range 29 {
		rnd.u = 0.9999
		if !th.Admit(true) {
			t.Fatal("refused with u close to 1")
		}
		th.Record(false)
	}
	p := th.RejectProbability() // (39 − 20)/40
	if p != 19.0/40 {
		t.Fatalf("p = %v, want 19/40", p)
	}
	rnd.u = p - 0.001
	if th.Admit(true) {
		t.Fatalf("admitted with u %v < p %v", rnd.u, p)
	}
	p = th.RejectProbability() // the rejected request counts: (40 − 20)/41
	if p != 20.0/41 {
		t.Fatalf("p = %v after a local rejection, want 20/41", p)
	}
	rnd.u = p
	if !th.Admit(false) {
		t.Fatalf("refused with u %v = p", rnd.u)
	}
}

func TestThrottleWindowSlides(t *testing.T) {
	var clk limClock
	th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: clk.Now, Rand: (&constRand{u: 0.99999}).Float64})
	load(th, 100, 0)
	clk.Advance(time.Minute)
	load(th, 50, 50)
	// 150 requests, 50 accepts: (150 − 100)/151.
	if got := th.RejectProbability(); got != 50.0/151 {
		t.Fatalf("p = %v, want 50/151", got)
	}
	clk.Advance(time.Minute - time.Millisecond)
	if got := th.RejectProbability(); got != 50.0/151 {
		t.Fatalf("p = %v just before 2 minutes, want 50/151", got)
	}
	clk.Advance(time.Millisecond) // the first 100 requests leave the window
	if got := th.RejectProbability(); got != 0 {
		t.Fatalf("p = %v after the failures left the window, want 0", got)
	}
	clk.Advance(time.Minute)
	load(th, 7, 0)
	if got := th.RejectProbability(); got != 7.0/8 {
		t.Fatalf("p = %v on a fresh window, want 7/8", got)
	}
}

// With the default clock (nil Now) the throttle follows synctest's virtual time.
func TestThrottleDefaultClockVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Window: 10 * time.Second, Rand: retry.NewRand(1)})
		load(th, 9, 0)
		if got := th.RejectProbability(); got != 0.9 {
			t.Fatalf("p = %v, want 9/10", got)
		}
		time.Sleep(10 * time.Second)
		if got := th.RejectProbability(); got != 0 {
			t.Fatalf("p = %v after the window, want 0", got)
		}
	})
}

func TestThrottleConcurrentCounts(t *testing.T) {
	var clk limClock
	th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: clk.Now})
	const G, N = 8, 250
	concurrently(G, N, func() {
		th.Record(false)
	})
	if got := th.RejectProbability(); got != 2000.0/2001 {
		t.Fatalf("p = %v after %d concurrent requests, want 2000/2001: counts were lost", got, G*N)
	}
	concurrently(G, N/5, func() {
		th.Record(true)
		th.Record(false)
	})
	if got := th.RejectProbability(); got != (2800.0-2*400)/2801 {
		t.Fatalf("p = %v after 400 accepts and 400 more failures, want 2000/2801", got)
	}
}

// A client that starts with a burst of concurrent calls is not throttled
// before any reply: attempts in flight are not requests yet.
func TestThrottleColdStartBurst(t *testing.T) {
	var clk limClock
	rnd := &constRand{u: 0} // reject whenever p > 0
	th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: clk.Now, Rand: rnd.Float64})
	for i := range 100 {
		if !th.Admit(false) {
			t.Fatalf("attempt %d of a cold-start burst rejected before any reply", i+1)
		}
	}
	// The replies: all failures. Now the throttle sheds.
	for range 100 {
		th.Record(false)
	}
	if th.Admit(false) {
		t.Fatal("admitted with p = 100/101 and u = 0")
	}
}

func TestThrottleConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c    retry.ThrottleConfig
		want string
	}{
		{retry.ThrottleConfig{}, ""},
		{retry.ThrottleConfig{K: 1, Window: time.Second}, ""},
		{retry.ThrottleConfig{K: 0.5}, "K = 0.5"},
		{retry.ThrottleConfig{K: -2}, "K = -2"},
		{retry.ThrottleConfig{K: math.Inf(1)}, "K = +Inf"},
		{retry.ThrottleConfig{Window: -time.Minute}, "Window = -1m0s"},
		{retry.ThrottleConfig{Window: 10 * time.Millisecond}, "Window = 10ms"},
	} {
		err := tc.c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one naming %q", tc.c, err, tc.want)
		}
	}
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "ThrottleConfig.K = 0.5") {
			t.Errorf("NewAdaptiveThrottle panicked with %q", msg)
		}
	}()
	retry.NewAdaptiveThrottle(retry.ThrottleConfig{K: 0.5})
}

// A throttled first attempt fails fast, before fn is called.
func TestDoThrottledFailsFast(t *testing.T) {
	var clk limClock
	th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: clk.Now, Rand: (&constRand{u: 0.5}).Float64})
	load(th, 100, 0) // p = 100/101
	calls := 0
	_, err := retry.Do(t.Context(), retry.Policy{Throttle: th}, func(context.Context) (int, error) { calls++; return 1, nil })
	var re *retry.Error
	if calls != 0 || !errors.As(err, &re) || re.Reason != retry.ReasonThrottled || re.Attempts != 0 || !errors.Is(err, retry.ErrThrottled) {
		t.Fatalf("calls %d, err %v: want a fast ErrThrottled with 0 attempts", calls, err)
	}
	if errors.Is(err, retry.ErrBudgetExhausted) {
		t.Fatal("a throttle refusal matches ErrBudgetExhausted")
	}
}

// A retry can be throttled too: the loop gives up with ReasonThrottled.
func TestDoThrottledRetry(t *testing.T) {
	var clk limClock
	th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: clk.Now, Rand: (&constRand{u: 0.4}).Float64})
	p := noWait
	p.Throttle = th
	calls := 0
	err := retry.Run(t.Context(), p, func(context.Context) error { calls++; return errLimTransient })
	// Attempt 1: p = 0, made, failed. Retry: p = (1 − 0)/2 = 0.5 > 0.4: rejected.
	var re *retry.Error
	if calls != 1 || !errors.As(err, &re) || re.Reason != retry.ReasonThrottled || re.Attempts != 1 || !errors.Is(err, errLimTransient) {
		t.Fatalf("calls %d, err %v: want a throttled retry after 1 attempt", calls, err)
	}
}

// The SRE behaviour end to end: while the backend rejects everything the
// throttle lets only a trickle through; once it recovers (and the window
// forgets the outage) everything goes through again.
func TestThrottleShedsLoadDuringOutage(t *testing.T) {
	var clk limClock
	th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: clk.Now, Rand: retry.NewRand(42)})
	p := retry.Policy{Attempts: 1, Throttle: th}
	var down atomic.Bool
	down.Store(true)
	var backend atomic.Int64
	fn := func(context.Context) error {
		backend.Add(1)
		if down.Load() {
			return errLimTransient
		}
		return nil
	}
	const calls = 1000
	throttled := 0
	for range calls {
		if errors.Is(retry.Run(t.Context(), p, fn), retry.ErrThrottled) {
			throttled++
		}
	}
	// With no accepts the backend sees about Σ 1/(r+1) ≈ ln(1000) ≈ 7.5 requests.
	if got := backend.Load(); got < 1 || got > 30 || throttled != calls-int(got) {
		t.Fatalf("backend saw %d of %d calls during the outage (%d throttled)", got, calls, throttled)
	}
	down.Store(false)
	clk.Advance(2 * time.Minute)
	backend.Store(0)
	for range calls {
		if err := retry.Run(t.Context(), p, fn); err != nil {
			t.Fatalf("after recovery: %v", err)
		}
	}
	if backend.Load() != calls {
		t.Fatalf("backend saw %d of %d calls after recovery", backend.Load(), calls)
	}
}

// After a total outage the SRE rule (rejected requests count as requests)
// keeps p near 1 − 1/K: each second of recovery adds every attempted request
// but only the admitted ones as accepts, so p falls no lower than about ½
// until the window has rolled past the outage. SentOnly counts only the
// requests that were sent, and p falls to 0 once the backend has accepted
// as many requests as failed during the outage.
func TestThrottleSentOnlyRecovers(t *testing.T) {
	run := func(sentOnly bool) (pEnd float64, admittedLast int) {
		var clk limClock
		th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: clk.Now, Rand: retry.NewRand(7), SentOnly: sentOnly})
		// 30 s of total outage at 100 requests/s, then 60 s of a healthy
		// backend at the same rate: well within the 2 min window.
		for s := range 90 {
			admitted := 0
			for range 100 {
				if th.Admit(false) {
					admitted++
					th.Record(s >= 30)
				}
				clk.Advance(10 * time.Millisecond)
			}
			admittedLast = admitted
		}
		return th.RejectProbability(), admittedLast
	}
	p, last := run(false)
	if p < 0.4 || last > 60 {
		t.Errorf("SRE rule, 60 s after the outage: p = %.3f, %d of 100 admitted in the last second; want p stuck near ½ (rejections count)", p, last)
	}
	p, last = run(true)
	if p != 0 || last != 100 {
		t.Errorf("SentOnly, 60 s after the outage: p = %.3f, %d of 100 admitted in the last second; want p = 0, all admitted", p, last)
	}
}

// SentOnly leaves the formula alone for the requests that are sent and
// only stops counting local rejections.
func TestThrottleSentOnlyDoesNotCountRejections(t *testing.T) {
	var clk limClock
	rnd := &constRand{u: 0} // reject whenever p > 0
	for _, sentOnly := range []bool{false, true} {
		th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: clk.Now, Rand: rnd.Float64, SentOnly: sentOnly})
		load(th, 10, 0) // p = 10/11
		for range 5 {
			if th.Admit(false) {
				t.Fatalf("SentOnly %v: admitted with p > 0 and u = 0", sentOnly)
			}
		}
		want := 15.0 / 16 // the 5 rejections counted
		if sentOnly {
			want = 10.0 / 11
		}
		if got := th.RejectProbability(); got != want {
			t.Errorf("SentOnly %v: p = %v after 5 rejections, want %v", sentOnly, got, want)
		}
	}
}
