package fleetsim

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/redisretry"
)

// The review of the fleet (findings 1 to 7) reproduced on the real limiters,
// and the bounds issue 21 sets for the redesign. Each test runs a scenario,
// logs today's figures beside the review's (which came from synctest
// reproductions on the same code), and checks the bounds with
// pending: until the redesign of a limiter lands a bound not met skips the
// test with the bound and today's figure; then its flag is set and the
// bounds become failures. Run them with -v to see the figures.

// The bounds, from pending into required: the quota's (findings 1
// to 4 and 7, the healthy fleet, a stall), the budget's and the
// cooldown's (findings 5 and 6).
const (
	phase2Quota          = true
	phase2BudgetCooldown = true // the budget probes from first attempts, the cooldown keeps monotonic times and caps its wait
)

// bounds collects a test's checks of the bounds.
type bounds struct {
	t        *testing.T
	required bool
	missed   []string
}

// newBounds starts the checks of a test; required says whether the bounds
// not met fail it (phase 2 landed for the limiter) or skip it.
func newBounds(t *testing.T, required bool) *bounds { return &bounds{t: t, required: required} }

// pending checks one bound: what it is ("≤ 1.25 slots per admitted
// request"), whether today's figure got meets it, and got.
func (b *bounds) pending(bound string, ok bool, got string) {
	b.t.Helper()
	if ok {
		b.t.Logf("bound met: %s (today %s)", bound, got)
		return
	}
	b.missed = append(b.missed, fmt.Sprintf("%s: today %s", bound, got))
}

// holds checks a bound the code meets already: it must not regress, phase 2
// or not.
func (b *bounds) holds(bound string, ok bool, got string) {
	b.t.Helper()
	if !ok {
		b.t.Errorf("%s: today %s (it held before the redesign)", bound, got)
	}
}

// done ends the test: a skip naming every bound not met (before phase 2),
// a failure after.
func (b *bounds) done() {
	b.t.Helper()
	if len(b.missed) == 0 {
		return
	}
	msg := "issue 21 bounds not met yet (phase 2):\n  " + strings.Join(b.missed, "\n  ")
	if b.required {
		b.t.Error("issue 21 bounds not met:\n  " + strings.Join(b.missed, "\n  "))
		return
	}
	b.t.Skip(msg)
}

func run(t *testing.T, c Config) *Result {
	t.Helper()
	r, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func perSecond(n int64, r *Result) float64 { return float64(n) / r.Measured }

// limitersOnly is a server that answers 429 only beyond 11 times the quota:
// the review's reproductions measured what the limiters let start, with no
// server pushing the callers back (a 429 makes a caller back off and retry).
var limitersOnly = Server{Grace: 10}

// The scenarios.

// sparseFleet: procs processes each making a call, then waiting about gap
// (uniform 0.5 to 1.5 times it) before the next, 30 s deadlines, quota
// 600/1m, 10 virtual minutes (review finding 1).
func sparseFleet(procs int, gap time.Duration, lease int64) Config {
	return Config{
		Name: fmt.Sprintf("lease %d", lease), Processes: procs, Duration: 10 * time.Minute, Seed: 1,
		Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "sparse"}, Limit: redisretry.PerMinute(600), Lease: lease},
		Demand: Demand{Callers: 1, Shape: Jittered, Think: gap, Deadline: 30 * time.Second},
		Server: limitersOnly,
	}
}

// saturatedFleet: procs processes of callers callers each calling in a
// loop, 30 s deadlines, a refused caller pausing 1 s, quota 600/1m (review
// findings 2 and 3).
func saturatedFleet(procs, callers int, d time.Duration, lease int64, faults ...Fault) Config {
	return Config{
		Name: fmt.Sprintf("lease %d", lease), Processes: procs, Duration: d, Seed: 1,
		Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "saturated"}, Limit: redisretry.PerMinute(600), Lease: lease},
		Demand: Demand{Callers: callers, Deadline: 30 * time.Second, Pause: time.Second},
		Server: limitersOnly,
		Faults: faults,
	}
}

// healthyFleet: 1,000 processes, Poisson demand at load times the quota of
// 6,000/1m, 10 virtual minutes (1 of warmup), 30 s deadlines.
func healthyFleet(load float64) Config {
	return Config{
		Name: fmt.Sprintf("%.0f %%", load*100), Processes: 1000, Duration: 10 * time.Minute, Warmup: time.Minute, Seed: 1,
		Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "healthy"}, Limit: redisretry.PerMinute(6000)},
		Demand: Demand{Rate: load * 100 / 1000, Deadline: 30 * time.Second},
	}
}

func TestHealthyFleet(t *testing.T) {
	t.Parallel()
	b := newBounds(t, phase2Quota)
	for _, load := range []float64{0.5, 1.5} {
		r := run(t, healthyFleet(load))
		t.Logf("%.0f %% of 6,000/1m: utilisation %.3f, wait p50 %v p99 %v, refused %.1f %% (meetable %.1f %%, with a slot to spare %.2f %%), Jain %.3f (of the shares started %.3f), slots/attempt %.2f, ahead %.1fs, max %d/s (%d seconds over), %.2f round trips/attempt, %d × 429",
			load*100, r.Utilisation, secs(r.WaitP50), secs(r.WaitP99), 100*r.RefusedShare, 100*r.MeetableShare, 100*r.ClearShare, r.Jain, r.JainShare,
			r.SlotsPerAttempt, r.AheadMax, r.MaxSecond, r.SecondsOver, r.PerAttempt, r.Rejected)
		at := fmt.Sprintf("at %.0f %%: ", load*100)
		b.holds(at+"0 seconds over quota + 2 %", r.SecondsOver == 0, fmt.Sprint(r.SecondsOver))
		b.pending(at+"utilisation ≥ 99 %", r.Utilisation >= 0.99, pct(r.Utilisation))
		b.pending(at+"≤ 1.05 slots reserved per admitted request", r.SlotsPerAttempt <= 1.05, fmt.Sprintf("%.2f", r.SlotsPerAttempt))
		if load < 1 {
			b.pending(at+"wait p50 ≤ 50ms", r.WaitP50 <= 0.05, secs(r.WaitP50))
			b.pending(at+"wait p99 ≤ 1s", r.WaitP99 <= 1, secs(r.WaitP99))
		} else {
			// Over the quota with Poisson demand, the attempts per
			// process cannot be fairer than the calls each drew (their
			// Jain index: 0.987 here), and one FIFO queue for the whole
			// fleet, the reference of "could have met", gets 0.981: the
			// bound is on the share of its own calls each process got
			// started (JainShare). And a call the reference would have
			// started within one slot of its deadline is a tie that the
			// round trip decides (see Result.RefusedClear): the bound
			// counts the refusals of calls it would have started with a
			// slot to spare. Both raw figures are logged above.
			b.pending(at+"Jain ≥ 0.99 (of each process's share of its calls started)", r.JainShare >= 0.99, fmt.Sprintf("%.3f (raw %.3f)", r.JainShare, r.Jain))
			b.pending(at+"≤ 1 % refused at a deadline it could have met (with a slot to spare)", r.ClearShare <= 0.01, fmt.Sprintf("%s (%s within a slot of it)", pct(r.ClearShare), pct(r.MeetableShare)))
		}
	}
	b.done()
}

func TestFinding1SparseFleetWastesTheQuota(t *testing.T) {
	t.Parallel()
	b := newBounds(t, phase2Quota)
	for _, tc := range []struct {
		procs          int
		gap            time.Duration
		review         string
		reviewLeaseOne string
	}{
		{200, 40 * time.Second, "2.39 slots, 4.17/s of 5/s, p50 7.1s, p99 29.7s", "1.00 slot, 5.02/s, p50 4ms, p99 295ms"},
		{200, 25 * time.Second, "2.40 slots, 4.35/s of 8/s, p50 22.1s, p99 29.9s", "1.00 slot, 7.99/s, p50 107ms"},
		{20, 2500 * time.Millisecond, "2.51 slots, 4.00/s of 8/s, p50 2.6s, p99 4.9s", "1.00 slot, 7.74/s, p50 78ms"},
	} {
		name := fmt.Sprintf("%d processes, a call every %v", tc.procs, tc.gap)
		def, one := run(t, sparseFleet(tc.procs, tc.gap, 0)), run(t, sparseFleet(tc.procs, tc.gap, 1))
		for _, x := range []struct {
			r      *Result
			review string
		}{{def, tc.review}, {one, tc.reviewLeaseOne}} {
			t.Logf("%s, %s: %.2f slots, %.2f/s of %.2f/s, p50 %s, p99 %s, %.2f round trips/attempt; review: %s",
				name, x.r.Name, x.r.SlotsPerAttempt, perSecond(x.r.Admitted, x.r), x.r.Offered, secs(x.r.WaitP50), secs(x.r.WaitP99), x.r.PerAttempt, x.review)
		}
		// Lease 1 holds no slot it does not use: the harness must find
		// what the review found for it.
		if one.SlotsPerAttempt > 1.02 || perSecond(one.Admitted, one) < 0.97*one.Offered {
			t.Errorf("%s, Lease 1: %.2f slots per attempt, %.2f/s admitted of %.2f/s: want about 1.00 and all (review: %s)",
				name, one.SlotsPerAttempt, perSecond(one.Admitted, one), one.Offered, tc.reviewLeaseOne)
		}
		if tc.procs == 200 && tc.gap == 40*time.Second {
			b.pending("200 sparse processes: ≤ 1.25 slots per admitted request", def.SlotsPerAttempt <= 1.25, fmt.Sprintf("%.2f", def.SlotsPerAttempt))
			b.pending("200 sparse processes: median wait ≤ 1.4s", def.WaitP50 <= 1.4, secs(def.WaitP50))
		}
	}
	b.done()
}

func TestFinding2PrefetchIgnoresDeadlines(t *testing.T) {
	t.Parallel()
	b := newBounds(t, phase2Quota)
	def, one := run(t, saturatedFleet(50, 2, 2*time.Minute, 0)), run(t, saturatedFleet(50, 2, 2*time.Minute, 1))
	wide := run(t, saturatedFleet(200, 1, 2*time.Minute, 0))
	for _, x := range []struct {
		what   string
		r      *Result
		review string
	}{
		{"50 × 2, default Lease", def, "1m35s ahead, 1,236 admitted, 5,380 refused (81 %)"},
		{"50 × 2, Lease 1", one, "10s ahead, none refused"},
		{"200 × 1, default Lease", wide, "2m8s ahead"},
	} {
		t.Logf("%s: schedule %s ahead, %d admitted, %d refused (%.0f %%); review: %s",
			x.what, secs(x.r.AheadMax), x.r.Admitted, x.r.RefusedDeadline, 100*x.r.RefusedShare, x.review)
	}
	if one.RefusedDeadline != 0 || one.AheadMax > 11 {
		t.Errorf("Lease 1: %d refused, %s ahead: want none and about 10s (100 callers × 100ms)", one.RefusedDeadline, secs(one.AheadMax))
	}
	b.pending("50 × 2 at saturation: schedule ≤ 40s ahead", def.AheadMax <= 40, secs(def.AheadMax))
	b.pending("50 × 2 at saturation: ≤ 5 % refused", def.RefusedShare <= 0.05, pct(def.RefusedShare))
	b.done()
}

func TestFinding3FlushOvershootLasts(t *testing.T) {
	t.Parallel()
	b := newBounds(t, phase2Quota)
	flush := Fault{Kind: Flush, At: 2 * time.Minute}
	def := run(t, saturatedFleet(50, 2, 5*time.Minute, 0, flush))
	one := run(t, saturatedFleet(50, 2, 5*time.Minute, 1, flush))
	wide := run(t, saturatedFleet(200, 1, 5*time.Minute, 0, flush))
	for _, x := range []struct {
		what   string
		r      *Result
		review string
	}{
		{"50 × 2, default Lease", def, "94 seconds over, up to 20 in one"},
		{"50 × 2, Lease 1", one, "11 seconds over"},
		{"200 × 1, default Lease", wide, "128 seconds over"},
	} {
		t.Logf("%s, flushed at 2m: %d seconds over the quota, up to %d in one (%d answered 429); review: %s",
			x.what, x.r.SecondsOverStarts, x.r.MaxSecondStarts, x.r.Rejected, x.review)
	}
	if one.SecondsOverStarts > def.SecondsOverStarts {
		t.Errorf("Lease 1 overshot longer than the default lease after a flush (%d, %d seconds)", one.SecondsOverStarts, def.SecondsOverStarts)
	}
	b.pending("after a flush: ≤ 35 seconds over the quota", def.SecondsOverStarts <= 35, fmt.Sprint(def.SecondsOverStarts))
	b.done()
}

// lateFleet: 8 processes × 4 callers at 40/1s; at 3 s one reply of each of
// k processes comes 30ms late (the Timeout is 20ms); review finding 4.
func lateFleet(k int) Config {
	c := Config{
		Name: fmt.Sprintf("%d of 8 late", k), Processes: 8, Duration: 10 * time.Second, Seed: 1,
		Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "late"}, Limit: redisretry.PerSecond(40)},
		Demand: Demand{Callers: 4},
		Server: limitersOnly,
	}
	if k > 0 {
		c.Faults = []Fault{{Kind: SlowReplies, At: 3 * time.Second, Procs: k, Count: 1, Delay: 30 * time.Millisecond}}
	}
	return c
}

func TestFinding4LateRepliesOverAdmit(t *testing.T) {
	t.Parallel()
	b := newBounds(t, phase2Quota)
	var seven *Result
	for _, tc := range []struct {
		k      int
		review string
	}{{0, "40 (none late)"}, {1, "41"}, {4, "50-55"}, {7, "57-60"}} {
		r := run(t, lateFleet(tc.k))
		t.Logf("%d of 8 processes with one reply 30ms late: %d starts in one second (%d decided without Redis); review: %s",
			tc.k, r.MaxSecondStarts, r.Local, tc.review)
		if tc.k == 0 && r.MaxSecondStarts > 41 {
			t.Errorf("no late reply: %d starts in one second for a quota of 40", r.MaxSecondStarts)
		}
		if tc.k == 7 {
			seven = r
		}
	}
	part := Config{
		Processes: 4, Duration: 15 * time.Second, Seed: 1,
		Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "part"}, Limit: redisretry.PerSecond(40)},
		Demand: Demand{Callers: 4},
		Server: limitersOnly,
		Faults: []Fault{{Kind: Partition, At: 3 * time.Second, For: 3 * time.Second, Procs: 3}},
	}
	r := run(t, part)
	// During the partition the 3 pace at their share beside the one on
	// Redis, which takes the whole schedule: up to (1 + 3/4) × the quota
	// (inherent: nothing tells the one on Redis). What they let start is
	// reserved when they reach Redis again: the fleet's average over the
	// partition and the 5 s after it is the quota's.
	var during float64
	for _, n := range r.Starts[3:11] {
		during += n
	}
	t.Logf("3 of 4 processes partitioned from Redis for 3s: %d starts in one second (review: 70); per second %v; %.0f from 3 s to 11 s, the quota's %d", r.MaxSecondStarts, r.Starts[:12], during, 8*40)
	if r.MaxSecondStarts > 40*7/4+1 || during > 8*40*1.02 {
		t.Errorf("a partition of 3 of 4 processes: %d in one second (at most %d), %.0f in the 8 s from its start (at most %.0f)", r.MaxSecondStarts, 40*7/4+1, during, 8*40*1.02)
	}
	b.pending("late replies in 7 of 8 processes: ≤ 46 starts in any second (quota + 15 %)", seven.MaxSecondStarts <= 46, fmt.Sprint(seven.MaxSecondStarts))
	b.done()
}

func TestFinding5BudgetRecoversWithoutRetries(t *testing.T) {
	// The budget's bound: phase2BudgetCooldown.
	t.Parallel()
	// One process: a 429 at 2 s makes a retry, which finds Redis
	// unreachable (2 s to 4 s); then 10 s of first attempts only.
	c := Config{
		Processes: 1, Duration: 14 * time.Second, Seed: 1,
		Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "budget"}, Limit: redisretry.PerSecond(1000)},
		Budget: &redisretry.BudgetConfig{Settings: redisretry.Settings{Key: "budget"}},
		Demand: Demand{Shape: Constant, Rate: 20},
		Faults: []Fault{
			{Kind: Overload, At: 2 * time.Second, For: 30 * time.Millisecond},
			{Kind: Partition, At: 2 * time.Second, For: 2 * time.Second},
		},
	}
	c.Warmup = 4 * time.Second // the counts are of the last 10 s
	r := run(t, c)
	t.Logf("budget after Redis came back at 4s: %d in fallback at the end, last back on Redis at %vs, %d of the %d requests of the last 10s counted in Redis; review: fallback, 0 of 200 counted",
		r.InFallback.Budget, r.Recovered.Budget, r.BudgetCounted, r.Calls)
	if r.InFallback.Quota != 0 {
		t.Errorf("the quota, which is called on every attempt, did not come back (%d in fallback)", r.InFallback.Quota)
	}
	b := newBounds(t, phase2BudgetCooldown)
	back := r.InFallback.Budget == 0 && r.Recovered.Budget >= 4 && r.Recovered.Budget <= 6
	b.pending("a budget returns to Redis within 2 probe intervals of Redis returning, retries or not", back,
		fmt.Sprintf("in fallback: %d, back at %vs (-1: never)", r.InFallback.Budget, r.Recovered.Budget))
	b.pending("its requests are counted in the fleet's window again: ≥ 100 of the last 10s's 200", r.BudgetCounted >= 100 && r.Calls == 200,
		fmt.Sprintf("%d of %d", r.BudgetCounted, r.Calls))
	b.done()
}

func TestFinding6CooldownSurvivesAWallClockStep(t *testing.T) {
	t.Parallel()
	// A 429 with a RetryInfo of 30s at 1s starts a cooldown; at 3s the
	// process's clock is set back an hour.
	c := Config{
		Processes: 1, Duration: 40 * time.Second, Seed: 1,
		Quota:    &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "step"}, Limit: redisretry.PerSecond(100)},
		Cooldown: &redisretry.CooldownConfig{Settings: redisretry.Settings{Key: "step"}},
		Demand:   Demand{Shape: Constant, Rate: 2},
		Faults: []Fault{
			{Kind: Overload, At: time.Second, For: time.Second, Delay: 30 * time.Second},
			{Kind: ClockStep, At: 3 * time.Second, Delay: -time.Hour},
		},
	}
	r := run(t, c)
	wait := time.Duration(r.CooldownWaitMax * float64(time.Second)).Round(time.Millisecond)
	t.Logf("a 30s cooldown, the clock set back 1h: the longest wait asked %v, %d calls refused at the deadline; review: 1h0m30s", wait, r.RefusedDeadline)
	if r.CooldownWaitMax == 0 || r.Rejected == 0 {
		t.Fatalf("the 429s (%d) with a RetryInfo made no cooldown wait", r.Rejected)
	}
	b := newBounds(t, phase2BudgetCooldown)
	limit := redisretry.DefaultCooldownMax + redisretry.DefaultCooldownJitter
	b.pending(fmt.Sprintf("a wall-clock step never makes a wait longer than Max + jitter (%v)", limit), wait <= limit, wait.String())
	b.done()
}

func TestFinding7ColdStartPacesAtTheWholeQuota(t *testing.T) {
	t.Parallel()
	b := newBounds(t, phase2Quota)
	cold := func(f Fault, fleet int) Config {
		return Config{
			Processes: 8, Duration: 5 * time.Second, Seed: 1,
			Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "cold"}, Limit: redisretry.PerSecond(10), FleetSize: fleet},
			Demand: Demand{Callers: 2, Together: true},
			Server: limitersOnly,
			Faults: []Fault{f},
		}
	}
	for _, tc := range []struct {
		what   string
		c      Config
		review string
	}{
		{"each one's first reply 30ms late", cold(Fault{Kind: SlowReplies, Count: 1, Delay: 30 * time.Millisecond}, 0), "review: 80, 104"},
		{"each one's first connection taking 30ms (a TLS handshake)", cold(Fault{Kind: SlowConnect, Delay: 30 * time.Millisecond}, 0), ""},
	} {
		r := run(t, tc.c)
		t.Logf("8 processes × 2 callers cold-starting, %s: %d starts in one second, %d decided without Redis, %d \"unavailable\" lines; %s",
			tc.what, r.MaxSecondStarts, r.Local, r.Unavailable, tc.review)
		if r.Admitted < 40 || r.Local != 0 || r.Unavailable != 0 {
			t.Errorf("%s: %d calls admitted in 5s at 10/s, %d decided without Redis, %d \"unavailable\" lines: want the first calls to wait for the connection", tc.what, r.Admitted, r.Local, r.Unavailable)
		}
		b.pending("cold start of 8 processes, "+tc.what+": ≤ 12 starts in any second (quota + 20 %)", r.MaxSecondStarts <= 12, fmt.Sprint(r.MaxSecondStarts))
	}
	// Redis down from the start: a process that never reached Redis paces
	// at Rate/FleetSize, or a tenth of the quota if FleetSize is unset. Each
	// share's pacer lets a start through at once: in any second, at most
	// the processes' shares plus one start each (their phases are random).
	for _, fleet := range []int{0, 8} {
		r := run(t, cold(Fault{Kind: Restart, For: 3 * time.Second}, fleet))
		size := cmp.Or(fleet, redisretry.DefaultColdFleetSize)
		limit := int64(math.Ceil(8*10/float64(size))) + 8
		t.Logf("8 processes × 2 callers cold-starting, Redis down for the first 3s, FleetSize %d: %d starts in one second, %d decided without Redis, %d \"unavailable\" lines (at most %d: the shares and one start each)",
			fleet, r.MaxSecondStarts, r.Local, r.Unavailable, limit)
		if r.MaxSecondStarts > limit || r.Admitted < 20 {
			t.Errorf("Redis down at the start, FleetSize %d: %d starts in one second (at most %d), %d admitted", fleet, r.MaxSecondStarts, limit, r.Admitted)
		}
	}
	b.done()
}

// TestStallAcrossTheFleet: issue 29's stall (Redis stopped for 1.5 s, SIGSTOP,
// under a saturated fleet of 4 processes × 8 callers at 40/1s): the slots
// decided without Redis during the stall and the blocks from Redis after it
// must not add up.
func TestStallAcrossTheFleet(t *testing.T) {
	t.Parallel()
	b := newBounds(t, phase2Quota)
	for _, stall := range []time.Duration{50 * time.Millisecond, 1500 * time.Millisecond, 5 * time.Second} {
		c := Config{
			Name: "stall", Processes: 4, Duration: 15 * time.Second, Seed: 1,
			Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "stall"}, Limit: redisretry.PerSecond(40)},
			Demand: Demand{Callers: 8},
			Server: limitersOnly,
			Faults: []Fault{{Kind: Stall, At: 3 * time.Second, For: stall}},
		}
		r := run(t, c)
		t.Logf("Redis stalled %v: %d starts in one second, %d decided without Redis, %d fallbacks, %d admitted", stall, r.MaxSecondStarts, r.Local, r.Fallbacks, r.Admitted)
		if stall > time.Second && r.Fallbacks == 0 {
			t.Errorf("a stall of %v: no limiter fell back", stall)
		}
		b.pending(fmt.Sprintf("a stall of %v: ≤ 46 starts in any second (quota + 15 %%)", stall), r.MaxSecondStarts <= 46, fmt.Sprint(r.MaxSecondStarts))
	}
	b.done()
}

// TestStarvedProcessLateReplies: the processes starved of CPU of issue 29's
// stall test (their Redis replies come after the Timeout while Redis
// answers the others at once) in the stall's fleet (4 × 8 callers at
// 40/1s), or 2 × 16: they decide without Redis at their share while the
// others draw the schedule. What they let start is reserved where it
// started: at once where the others drew the schedule up to it (pushing
// their next blocks within the same second), when the schedule's end
// reaches it where their share put it further ahead (after a fallback of
// a ProbeInterval their share's pacer runs ahead), and a late block pays
// only for the starts near it. ≤ quota + 15 % in any second, and the
// schedule not wasted (each debt reserved once).
func TestStarvedProcessLateReplies(t *testing.T) {
	t.Parallel()
	stall := Fault{Kind: Stall, At: 3 * time.Second, For: 1500 * time.Millisecond}
	for _, tc := range []struct {
		what      string
		procs     int
		faults    []Fault
		before    string
		minStarts int64
	}{
		{"the first one's replies 900ms late for 1s", 4, []Fault{{Kind: SlowReplies, At: 3 * time.Second, For: time.Second, Procs: 1, Delay: 900 * time.Millisecond}}, "47", 595},
		{"the first one's replies 900ms late for 300ms", 2, []Fault{{Kind: SlowReplies, At: 3 * time.Second, For: 300 * time.Millisecond, Procs: 1, Delay: 900 * time.Millisecond}}, "49", 595},
		{"a 1.5s stall, then every reply 30ms late for 200ms, 1.1s after it", 4, []Fault{stall, {Kind: SlowReplies, At: 5600 * time.Millisecond, For: 200 * time.Millisecond, Delay: 30 * time.Millisecond}}, "55", 585},
		{"a 1.5s stall, then 3 of 4 processes' replies 30ms late for 200ms, 0.8s after it", 4, []Fault{stall, {Kind: SlowReplies, At: 5300 * time.Millisecond, For: 200 * time.Millisecond, Procs: 3, Delay: 30 * time.Millisecond}}, "47", 585},
	} {
		c := Config{
			Processes: tc.procs, Duration: 15 * time.Second, Seed: 1,
			Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "starved"}, Limit: redisretry.PerSecond(40)},
			Demand: Demand{Callers: 32 / tc.procs},
			Server: limitersOnly,
			Faults: tc.faults,
		}
		r := run(t, c)
		t.Logf("%d × %d callers, %s: %d starts in one second (before: %s), %d decided without Redis, %d admitted",
			tc.procs, 32/tc.procs, tc.what, r.MaxSecondStarts, tc.before, r.Local, r.Admitted)
		if r.Local == 0 {
			t.Errorf("%s: none decided without Redis: the replies were not late", tc.what)
		}
		if r.MaxSecondStarts > 46 {
			t.Errorf("%s: %d starts in one second, quota 40 (+15 %% = 46)", tc.what, r.MaxSecondStarts)
		}
		if r.Admitted < tc.minStarts {
			t.Errorf("%s: %d admitted in 15 s of a quota of 40/1s: at least %d (the debt reserved once)", tc.what, r.Admitted, tc.minStarts)
		}
	}
}

// TestQuotaSurvivesAWallClockStep: the clock of every process steps an hour
// forward or back, once while Redis is partitioned from them all (the quota
// decides locally: its share's pacer, its debt, its next probe) and once on
// Redis (its lease). The harness's clocks have no monotonic reading, so the
// step moves every reading: what a Quota whose Now returns wall times sees,
// and more than what time.Now's readings let a step do. The Quota holds its
// times on a steady clock: a step back is a moment in which time stands
// still, a step forward is time passing. Compared with the same run without
// a step: no call refused at its deadline, waits within 200 ms at the 99th
// percentile, every Quota back on Redis within 2 probe intervals of the
// partition's end, and the starts in any second within the quota + 2 %, or
// for a step forward the starts each process had granted ahead once more
// (its callers': the pacer's grants ahead are passed by the step).
func TestQuotaSurvivesAWallClockStep(t *testing.T) {
	t.Parallel()
	b := newBounds(t, phase2Quota)
	const procs, callers = 8, 2
	cfg := func(step time.Duration, at time.Duration) Config {
		c := Config{
			Processes: procs, Duration: time.Minute, Seed: 1,
			Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "step"}, Limit: redisretry.PerSecond(40)},
			Demand: Demand{Callers: callers, Deadline: 30 * time.Second},
			Server: limitersOnly,
			Faults: []Fault{{Kind: Partition, At: 10 * time.Second, For: 20 * time.Second, Procs: procs}},
		}
		if step != 0 {
			c.Faults = append(c.Faults, Fault{Kind: ClockStep, At: at, Delay: step, Procs: procs})
		}
		return c
	}
	ref := run(t, cfg(0, 0))
	t.Logf("no step: wait p50 %.3fs p99 %.3fs, %d starts in one second, %d refused at the deadline, back on Redis at %.2fs", ref.WaitP50, ref.WaitP99, ref.MaxSecondStarts, ref.RefusedDeadline, ref.Recovered.Quota)
	for _, at := range []time.Duration{20 * time.Second, 40 * time.Second} {
		for _, step := range []time.Duration{-time.Hour, time.Hour} {
			r := run(t, cfg(step, at))
			what := fmt.Sprintf("a step of %v at %v (%s)", step, at, map[bool]string{true: "partitioned", false: "on Redis"}[at < 30*time.Second])
			t.Logf("%s: wait p50 %.3fs p99 %.3fs, %d starts in one second, %d refused at the deadline, back on Redis at %.2fs, %d in fallback at the end",
				what, r.WaitP50, r.WaitP99, r.MaxSecondStarts, r.RefusedDeadline, r.Recovered.Quota, r.InFallback.Quota)
			b.pending(what+": no call refused at its deadline", r.RefusedDeadline == ref.RefusedDeadline, fmt.Sprint(r.RefusedDeadline))
			b.pending(what+": wait p99 within 200ms of the run without a step", math.Abs(r.WaitP99-ref.WaitP99) <= 0.2, fmt.Sprintf("%.3fs (%.3fs)", r.WaitP99, ref.WaitP99))
			b.pending(what+": back on Redis within 2 probe intervals of the partition's end", r.InFallback.Quota == 0 && r.Recovered.Quota <= 32, fmt.Sprintf("%.2fs, %d in fallback", r.Recovered.Quota, r.InFallback.Quota))
			limit := int64(40 + 1) // the quota + 2 % (40.8), whole starts
			if step > 0 {
				limit += procs * callers
			}
			b.pending(fmt.Sprintf("%s: ≤ %d starts in any second", what, limit), r.MaxSecondStarts <= limit, fmt.Sprint(r.MaxSecondStarts))
		}
	}
	b.done()
}
