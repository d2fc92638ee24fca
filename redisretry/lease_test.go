package redisretry

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

// The lease's rules (lease.go), each on the in-memory Redis in virtual time.

// reservedSlots returns the slots of one request reserved on the schedule so
// far.
func reservedSlots(mem *memBackend, l Limit) float64 {
	return float64(mem.store.Stats().Reserved) / float64(l.Interval(1)/time.Microsecond)
}

func TestQuietProcessHoldsNoSlotAhead(t *testing.T) {
	// A process whose requests are further apart than the Slack (1.2 s at
	// 600/1m) takes one slot per request: nothing ahead of need, which it
	// would lose. (The old lease took 2.4 slots per request here.)
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		l := PerMinute(600)
		q := quotaOnMem(t, mem, QuotaConfig{Limit: l})
		for range 30 {
			if err := q.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
		}
		if got := reservedSlots(mem, l); got != 30 {
			t.Fatalf("%v slots reserved for 30 requests 3 s apart, want 30", got)
		}
		if s := q.Stats(); s.RoundTrips != 31 { // and the first, connecting
			t.Fatalf("%d round trips for 30 requests, want 31", s.RoundTrips)
		}
	})
}

func TestBusyProcessAmortises(t *testing.T) {
	// A process alone at 1,000 requests a second under a quota of 2,000 (a
	// Slack of 20 ms: 20 requests' worth) takes its slots ahead of need and
	// wastes few.
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		l := PerSecond(2000)
		q := quotaOnMem(t, mem, QuotaConfig{Limit: l})
		const n = 5000
		for range n {
			if _, err := q.Reserve(t.Context(), time.Now(), time.Time{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		rts := q.Stats().RoundTrips
		slots := reservedSlots(mem, l)
		t.Logf("%d requests: %d round trips, %.0f slots reserved", n, rts, slots)
		if rts > n/10 {
			t.Errorf("%d round trips for %d requests, want at most one per 10", rts, n)
		}
		if slots > n*1.1 {
			t.Errorf("%.0f slots reserved for %d requests, want at most 10 %% more", slots, n)
		}
	})
}

func TestBlockAheadNeverPastTheDeadline(t *testing.T) {
	// A lone process whose blocks follow each other grows what it holds
	// ahead of need, but a block ahead of need never starts past the
	// longest deadline of its recent calls: the schedule stays within it.
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		l := PerSecond(10)
		q := quotaOnMem(t, mem, QuotaConfig{Limit: l})
		var wg sync.WaitGroup
		stop := time.Now().Add(20 * time.Second)
		for range 20 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
					q.Wait(ctx)
					cancel()
				}
			})
		}
		var ahead time.Duration
		for time.Now().Before(stop) {
			time.Sleep(100 * time.Millisecond)
			if tat, ok := mem.store.TAT(q.keys, time.Now()); ok {
				ahead = max(ahead, time.UnixMicro(tat).Sub(time.Now()))
			}
		}
		wg.Wait()
		if ahead > 3*time.Second+time.Second { // the deadline, and one block of at most the Rate
			t.Fatalf("the schedule ran %v ahead with 3 s deadlines", ahead)
		}
	})
}

// lateOnce makes mem's replies to GCRA calls late by d, for the next one
// after arm is called (each way 0 otherwise). Call it before any limiter is
// made on mem.
func lateOnce(mem *memBackend, d time.Duration) (arm func()) {
	var armed atomic.Bool
	mem.latency = func() (time.Duration, time.Duration) {
		if armed.CompareAndSwap(true, false) {
			return 0, d
		}
		return 0, 0
	}
	return func() { armed.Store(true) }
}

func TestLateReplyKeepsItsBlock(t *testing.T) {
	// A refill's reply 30 ms late (Timeout 20 ms): the caller decides
	// without Redis at the Timeout (its start owed to the schedule); the
	// reply is a reply: Redis is available again at once, and its block
	// pays for that start. Nothing else is reserved, and the next request
	// takes the next slot.
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		arm := lateOnce(mem, 30*time.Millisecond)
		l := PerSecond(10)
		logs := &logCounter{}
		q := connectedQuota(t, mem, QuotaConfig{Settings: Settings{Key: "k", Logger: slog.New(logs)}, Limit: l})
		defer q.Close()
		arm()
		begin := time.Now()
		s, err := q.Reserve(t.Context(), begin, time.Time{})
		if err != nil || time.Since(begin) != DefaultTimeout || q.Stats().Local != 1 {
			t.Fatalf("start %v, %v after %v, %+v: want a local decision at the Timeout", s.Sub(begin), err, time.Since(begin), q.Stats())
		}
		time.Sleep(20 * time.Millisecond) // the late reply lands
		if q.State() != StateRedis {
			t.Fatalf("state %v after the late reply", q.State())
		}
		if debt, _ := debtOf(q); debt != 0 || reservedSlots(mem, l) != 2 {
			t.Fatalf("debt %d, %v slots reserved: want the late block to pay for the local start", debt, reservedSlots(mem, l))
		}
		s2, err := q.Reserve(t.Context(), time.Now(), time.Time{})
		if err != nil || s2.Sub(begin) < 100*time.Millisecond || reservedSlots(mem, l) != 3 {
			t.Fatalf("next start at %v (%v), %v slots: want the next slot, 100ms after the local one", s2.Sub(begin), err, reservedSlots(mem, l))
		}
		if l := logs.lines(); len(l) != 2 {
			t.Fatalf("log lines %q: want unavailable, then available again", l)
		}
	})
}

// backDelay makes mem's replies take the returned duration (ns) on their
// way back, 0 until it is set.
func backDelay(mem *memBackend) *atomic.Int64 {
	var d atomic.Int64
	mem.latency = func() (time.Duration, time.Duration) { return 0, time.Duration(d.Load()) }
	return &d
}

// connectedQuota returns a Quota on mem configured by c, connected: its
// first decision reached Redis (the next calls are bounded by the Timeout,
// not the dial's), and the clock a second past that start (a free slot
// now). It runs in a synctest bubble.
func connectedQuota(t *testing.T, mem *memBackend, c QuotaConfig) *Quota {
	t.Helper()
	q, err := newQuota(mem, c)
	if err != nil {
		t.Fatal(err)
	}
	first, err := q.Reserve(t.Context(), time.Now(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(first.Add(time.Second)))
	return q
}

// reserveAtOnce has n callers reserve a start on q at once, now, and
// returns their starts.
func reserveAtOnce(t *testing.T, q *Quota, n int) []time.Time {
	var mu sync.Mutex
	var starts []time.Time
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			start, err := q.Reserve(t.Context(), time.Now(), time.Time{})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			starts = append(starts, start)
			mu.Unlock()
		})
	}
	wg.Wait()
	return starts
}

// reserveIn8 has 8 callers reserve n starts on q between them (n/8 each,
// one after the other), now, and fails the test on an error.
func reserveIn8(t *testing.T, q *Quota, n int) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range n / 8 {
				if _, err := q.Reserve(t.Context(), time.Now(), time.Time{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// debtOf returns q's debt (units started without Redis, not reserved yet)
// and how much of it is being reserved now.
func debtOf(q *Quota) (debt, sending int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.debt, q.sending
}

// lateScene is the setting of the late-reply scenarios: a connected Quota
// at l, 10/s (Slack -1), on mem, whose replies take back ns on their way
// back.
type lateScene struct {
	mem  *memBackend
	back *atomic.Int64
	l    Limit
	q    *Quota
}

// runLateScene runs scenario in a synctest bubble on a fresh lateScene;
// scenario returns the starts its callers were given without Redis. The
// next start must come after all of them (each took a slot of the schedule
// of its own, paid by a block or by the debt), and nothing may leak.
func runLateScene(t *testing.T, scenario func(t *testing.T, s lateScene) (local []time.Time)) {
	synctest.Test(t, func(t *testing.T) {
		check := noLeaks(t)
		s := lateScene{mem: newMem(), l: PerSecond(10)}
		s.back = backDelay(s.mem)
		s.q = connectedQuota(t, s.mem, QuotaConfig{Settings: Settings{Key: "k", Logger: discard}, Limit: s.l, Slack: -1})
		local := scenario(t, s)
		next, err := s.q.Reserve(t.Context(), time.Now(), time.Time{})
		if err != nil || slices.ContainsFunc(local, func(at time.Time) bool { return !next.After(at) }) {
			t.Fatalf("next start %v (%v), the local ones at %v: want it after them", next, err, local)
		}
		s.q.Close()
		check()
	})
}

func TestLateRepliesEachPayTheDebt(t *testing.T) {
	// Four callers queue at once, each for a block of its own (four
	// refills in flight), and every reply comes 30 ms late (Timeout 20
	// ms): the four decide without Redis (four starts owed), and then the
	// four blocks land. Each block was reserved for one of those starts: it
	// pays for it. None is handed out again beside the start it paid for,
	// and nothing is reserved a second time. (Before, the first late block
	// paid one start and sent the rest of the debt to Redis at once, so the
	// three later blocks went to the lease: the next requests started in
	// the slots of the starts already made, 4 local starts + 3 from the
	// lease where the schedule held 4, and 3 slots more were reserved
	// after them: the stall test's 53 starts in one second for 40.)
	runLateScene(t, func(t *testing.T, s lateScene) []time.Time {
		q := s.q
		s.back.Store(int64(30 * time.Millisecond))
		before := q.Stats().RoundTrips
		starts := reserveAtOnce(t, q, 4)
		if q.Stats().Local != 4 || q.Stats().RoundTrips-before != 4 {
			t.Fatalf("%+v: want 4 refills in flight and 4 decisions without Redis", q.Stats())
		}
		s.back.Store(0)
		time.Sleep(time.Second) // the late replies land; a probe, a reconcile if any
		if debt, sending := debtOf(q); q.State() != StateRedis || debt != 0 || sending != 0 || reservedSlots(s.mem, s.l) != 5 {
			t.Fatalf("state %v, debt %d (%d being reserved), %v slots reserved: want the 4 late blocks to pay the 4 local starts, nothing more (5 with the first)",
				q.State(), debt, sending, reservedSlots(s.mem, s.l))
		}
		return starts
	})
}

func TestReplyInTimePaysTheDebtOfItsCallers(t *testing.T) {
	// A refill is on its way back (10 ms) when a second one fails at once:
	// Redis counts as failed, and both callers decide without it (two
	// starts owed). Then the first reply comes, in time: its block was
	// reserved for the first caller, who started already, so it pays for
	// that start instead of going to the lease, where the next request
	// would start in the same place of the schedule. (The same when a
	// caller stops waiting at its own time limit before the guard's.)
	runLateScene(t, func(t *testing.T, s lateScene) []time.Time {
		q := s.q
		s.back.Store(int64(10 * time.Millisecond))
		var starts [2]time.Time
		var wg sync.WaitGroup
		wg.Go(func() { starts[0], _ = q.Reserve(t.Context(), time.Now(), time.Time{}) })
		synctest.Wait() // the first refill ran on the server; its reply is on its way
		s.mem.setFail(errTestDown)
		wg.Go(func() { starts[1], _ = q.Reserve(t.Context(), time.Now(), time.Time{}) })
		synctest.Wait() // the second refill failed: both decided without Redis
		s.mem.setFail(nil)
		wg.Wait()
		if q.Stats().Local != 2 {
			t.Fatalf("%+v: want both callers decided without Redis", q.Stats())
		}
		time.Sleep(time.Second) // the first reply lands; the rest of the debt is reserved
		if debt, _ := debtOf(q); q.State() != StateRedis || debt != 0 || reservedSlots(s.mem, s.l) != 3 {
			t.Fatalf("state %v, debt %d, %v slots reserved: want the block to pay one start and the debt the other (3 with the first)", q.State(), debt, reservedSlots(s.mem, s.l))
		}
		return starts[:]
	})
}

func TestDebtReservedWhenRedisAnswers(t *testing.T) {
	// Redis fails for 3 s: the process decides at its share and owes what
	// it let start; when a probe gets an answer the debt is reserved,
	// placed back to when those started. Redis was down for everybody
	// (nobody reserved meanwhile): the debt takes no slot the schedule has
	// free now.
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		l := PerSecond(10)
		q := quotaOnMem(t, mem, QuotaConfig{Limit: l, FleetSize: 1})
		q.Wait(t.Context())
		mem.setFail(errTestDown)
		begin := time.Now()
		n := 0
		for time.Since(begin) < 3*time.Second {
			q.Wait(t.Context())
			n++
		}
		if q.State() != StateFallback || q.Stats().Local < 25 {
			t.Fatalf("state %v, %+v after 3 s of a failed Redis", q.State(), q.Stats())
		}
		mem.setFail(nil)
		before := reservedSlots(mem, l)
		for q.State() != StateRedis {
			q.Wait(t.Context())
			n++
		}
		time.Sleep(10 * time.Millisecond)
		debt, _ := debtOf(q)
		owed := reservedSlots(mem, l) - before
		tat, _ := mem.store.TAT(q.keys, time.Now())
		t.Logf("%d requests, %d local, %.0f slots reserved as debt, schedule %v ahead", n, q.Stats().Local, owed, time.UnixMicro(tat).Sub(time.Now()))
		if debt != 0 || owed < float64(q.Stats().Local) {
			t.Fatalf("debt %d left, %.0f slots reserved for %d local decisions", debt, owed, q.Stats().Local)
		}
		if ahead := time.UnixMicro(tat).Sub(time.Now()); ahead > time.Second {
			t.Fatalf("the debt pushed the schedule %v ahead: it should sit where the starts were", ahead)
		}
	})
}

func TestFlushReservesTheGrantedStartsAgain(t *testing.T) {
	// 20 callers queue at a quota of 10/s: the schedule runs 2 s ahead,
	// each start granted. Redis loses its data: the next reply shows it
	// (its block starts before this process's last one ended), and the
	// starts still ahead are reserved again, so that another process's
	// blocks come after them.
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		l := PerSecond(10)
		a := quotaOnMem(t, mem, QuotaConfig{Limit: l})
		last := slices.MaxFunc(reserveAtOnce(t, a, 20), time.Time.Compare)
		mem.store.Flush()
		// a's next round trip (a's lease may hold a few slots more).
		for rts := a.Stats().RoundTrips; a.Stats().RoundTrips == rts; {
			if _, err := a.Reserve(t.Context(), time.Now(), time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Millisecond) // the debt's round trip
		b := quotaOnMem(t, mem, QuotaConfig{Limit: l})
		s, err := b.Reserve(t.Context(), time.Now(), time.Time{})
		if err != nil || s.Before(last) {
			t.Fatalf("another process's first start at %v after a flush, before the last start granted (%v): %v", s.Sub(time.Now()), last.Sub(time.Now()), err)
		}
	})
}

func TestFirstCallWaitsForTheConnection(t *testing.T) {
	// A fresh process whose first reply (the dial, a TLS handshake, the
	// script's load) takes 30 ms, more than the Timeout: its first call
	// waits for it (within the dial's bound) and reaches Redis; it does
	// not decide alone.
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		mem.latency = func() (time.Duration, time.Duration) { return 15 * time.Millisecond, 15 * time.Millisecond }
		logs := &logCounter{}
		q, _ := newQuota(mem, QuotaConfig{Settings: Settings{Key: "k", Logger: slog.New(logs)}, Limit: PerSecond(10)})
		defer q.Close()
		if _, err := q.Reserve(t.Context(), time.Now(), time.Time{}); err != nil {
			t.Fatal(err)
		}
		if s := q.Stats(); s.Local != 0 || s.Fallbacks != 0 || len(logs.lines()) != 0 {
			t.Fatalf("%+v, log %q: the first call decided without Redis", s, logs.lines())
		}
	})
}

func TestColdCallsBoundedByTheDialTimeout(t *testing.T) {
	// Redis stalls from the start: the first call waits for it as long as
	// a connection may take to set up (DefaultDialTimeout for a client of
	// unknown kind), never past the deadline, then decides alone at a
	// tenth of the quota (the fleet's size is unknown: DefaultColdFleetSize),
	// and says so.
	leakFree(t, func(t *testing.T) {
		mem := newMem()
		release := mem.setHang()
		ev := newEvents()
		q, _ := newQuota(mem, QuotaConfig{Settings: Settings{Key: "k", Logger: discard, Observer: ev.Record}, Limit: PerSecond(100)})
		begin := time.Now()
		if _, err := q.Reserve(t.Context(), begin, begin.Add(300*time.Millisecond)); !errors.Is(err, retry.ErrPastDeadline) || time.Since(begin) != 300*time.Millisecond {
			t.Fatalf("%v after %v: want the deadline (300ms) first", err, time.Since(begin))
		}
		begin = time.Now()
		if _, err := q.Reserve(t.Context(), begin, time.Time{}); err != nil || time.Since(begin) > DefaultDialTimeout {
			t.Fatalf("%v after %v: want a local decision within %v", err, time.Since(begin), DefaultDialTimeout)
		}
		begin = time.Now()
		n := 0
		for time.Since(begin) < 2*time.Second {
			q.Wait(t.Context())
			n++
		}
		if n > 2*10+1 {
			t.Fatalf("%d starts in 2 s alone: want a tenth of 100/s", n)
		}
		var fb Event
		if f := ev.Of(EventFallback); len(f) > 0 {
			fb = f[len(f)-1]
		}
		if fb.FleetSize != DefaultColdFleetSize || !fb.Cold {
			t.Fatalf("fallback event %+v: want the cold fleet size said", fb)
		}
		release()
		q.Close()
	})
}

func TestExtremeRateAmortises(t *testing.T) {
	// A quota of a billion a second: a request's share of the schedule is
	// a nanosecond, below its unit (a microsecond). A block holds at least
	// a microsecond's worth (1,000 requests), handed out exactly: not a
	// round trip per request.
	synctest.Test(t, func(t *testing.T) {
		q := quotaOnMem(t, newMem(), QuotaConfig{Limit: PerSecond(1_000_000_000)})
		const n = 100_000
		reserveIn8(t, q, n)
		if rts := q.Stats().RoundTrips; rts > n/500 {
			t.Fatalf("%d round trips for %d requests at 1e9/s, want at most one per 500", rts, n)
		}
	})
}

func TestLeaseGrowsFarBelowTheQuota(t *testing.T) {
	// A process alone at 10,000 requests a second (issue 25 item 3): with
	// the default Lease, under a quota of a million a second (its demand a
	// hundredth of it), a round trip takes up to 80 requests' worth ahead
	// of need, not 20; under 20,000 a second (its demand half of it), 40;
	// under 11,000 a second, 22; an explicit Lease of 20 stays 20 at any
	// demand. In every case the slots reserved are those used, within 10 %.
	for _, tc := range []struct {
		name    string
		rate    int64
		lease   int64
		minPerR float64 // requests per round trip, at least
		maxPerR float64 // and at most
	}{
		{"1M/s, default Lease", 1_000_000, 0, 60, 81},
		{"1M/s, Lease 20", 1_000_000, 20, 15, 21},
		{"20,000/s, default Lease", 20_000, 0, 30, 41},
		{"11,000/s, default Lease", 11_000, 0, 15, 23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := newMem()
				l := PerSecond(tc.rate)
				q := quotaOnMem(t, mem, QuotaConfig{Limit: l, Lease: tc.lease})
				const n = 8000
				for range n {
					if _, err := q.Reserve(t.Context(), time.Now(), time.Time{}); err != nil {
						t.Fatal(err)
					}
					time.Sleep(100 * time.Microsecond)
				}
				rts := q.Stats().RoundTrips - 1 // the first connects
				perR := float64(n) / float64(rts)
				slots := reservedSlots(mem, l)
				t.Logf("%d requests: %d round trips (%.1f requests each), %.0f slots reserved", n, rts, perR, slots)
				if perR < tc.minPerR || perR > tc.maxPerR {
					t.Errorf("%.1f requests per round trip, want %v to %v", perR, tc.minPerR, tc.maxPerR)
				}
				if slots > n*1.1 {
					t.Errorf("%.0f slots reserved for %d requests, want at most 10 %% more", slots, n)
				}
			})
		})
	}
}
