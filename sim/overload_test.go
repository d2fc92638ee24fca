package sim

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry"
)

// small is a quick overload experiment: 2,000 clients in 20 processes
// offering 800 requests/s to a server of 1,000/s, 60 s with a 20 s outage
// from 10 s.
func small() OverloadConfig {
	c := DefaultOverload()
	c.Clients, c.Hosts, c.Capacity, c.Queue = 2000, 20, 1000, 100
	c.OutageStart, c.Outage = 10*time.Second, 20*time.Second
	c.Seed = 1
	return c
}

// tiny is smaller still, for the tests that run every strategy: 500
// clients in 10 processes, 200 requests/s to a server of 250/s, 30 s with a
// 10 s outage from 5 s.
func tiny() OverloadConfig {
	c := small()
	c.Clients, c.Hosts, c.Capacity, c.Queue = 500, 10, 250, 25
	c.Duration, c.OutageStart, c.Outage = 30*time.Second, 5*time.Second, 10*time.Second
	return c
}

func strategies(t testing.TB, names ...string) []OverloadStrategy {
	t.Helper()
	var ss []OverloadStrategy
	for _, n := range names {
		s, err := OverloadStrategyByName(n)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	return ss
}

func runOverload(t *testing.T, c OverloadConfig) map[string]OverloadResult {
	t.Helper()
	res, err := RunOverload(c)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]OverloadResult{}
	for _, r := range res {
		m[r.Strategy] = r
	}
	return m
}

func TestOverloadDeterministic(t *testing.T) {
	c := tiny()
	c.Strategies = strategies(t, "none", "genai", "ratio-budget", "adaptive-throttle")
	var outs [][]byte
	for _, workers := range []int{1, 3} {
		c.Workers = workers
		res, err := RunOverload(c)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, jsonOf(t, res))
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("same seed, different JSON:\n%s\n%s", outs[0], outs[1])
	}
	for _, k := range []string{`"strategy":`, `"clients":`, `"runs":`, `"amplification":`, `"goodput":`, `"failed_ratio":`, `"recovery_s":`, `"p99_ms":`} {
		if !bytes.Contains(outs[0], []byte(k)) {
			t.Errorf("JSON lacks %s", k)
		}
	}
	c.Seed = 2
	res, _ := RunOverload(c)
	if bytes.Equal(jsonOf(t, res), outs[0]) {
		t.Error("seeds 1 and 2 gave identical results")
	}
}

// Every request ends exactly once, none is left in flight, and the outcomes
// add up, for every strategy, in both outage modes.
func TestOverloadConservation(t *testing.T) {
	for _, drop := range []bool{false, true} {
		// The books must balance whatever the size: 200 clients in 5
		// processes, 80 requests/s, 20 s with a 5 s outage, every
		// strategy (budgets, throttles, deadlines, profiles) in both kinds
		// of outage.
		c := tiny()
		c.Clients, c.Hosts, c.Capacity, c.Queue = 200, 5, 100, 10
		c.Duration, c.OutageStart, c.Outage = 20*time.Second, 5*time.Second, 5*time.Second
		c.Drop, c.Timeout = drop, 2*time.Second
		for _, s := range strategies(t, OverloadNames()...) {
			o := runOverloadOne(&c, &s)
			r := o.res
			if o.live != 0 || o.flights.len() != 0 || o.arrive.len() != 0 {
				t.Errorf("drop=%v %s: %d requests never ended, %d+%d events left", drop, s.Name, o.live, o.flights.len(), o.arrive.len())
			}
			if r.Succeeded+r.Failed+r.GaveUp != r.Requests {
				t.Errorf("drop=%v %s: %d succeeded + %d failed + %d gave up != %d requests", drop, s.Name, r.Succeeded, r.Failed, r.GaveUp, r.Requests)
			}
			var ended uint64
			for _, n := range o.latency {
				ended += uint64(n)
			}
			if ended != uint64(r.Requests) {
				t.Errorf("drop=%v %s: %d latencies recorded for %d requests", drop, s.Name, ended, r.Requests)
			}
			if o.endedAtt != r.Attempts || r.Attempts < r.Requests-r.Throttled {
				t.Errorf("drop=%v %s: attempts %d, of ended requests %d, requests %d", drop, s.Name, r.Attempts, o.endedAtt, r.Requests)
			}
		}
	}
}

// The Gen AI default (5 attempts) multiplies the load during an outage by
// about 5; no retries by exactly 1; a budget brings it close to 1; every
// strategy sees the very same requests.
func TestOverloadAmplification(t *testing.T) {
	c := small()
	c.Strategies = strategies(t, "none", "genai", "token-bucket", "ratio-budget")
	m := runOverload(t, c)
	for name, r := range m {
		t.Logf("%-13s amplification %.2f (total %.2f), peak %.2f×C, failed %.3f, recovery %.1f s, p99 %.0f ms",
			name, r.Amplification, r.AmplificationTotal, r.PeakLoad, r.FailedRatio, r.RecoveryS, r.P99Ms)
		if r.Requests != m["none"].Requests {
			t.Errorf("%s saw %d requests, none %d: arrivals must not depend on the strategy", name, r.Requests, m["none"].Requests)
		}
	}
	if a := m["none"].Amplification; a != 1 {
		t.Errorf("none: amplification %v, want exactly 1", a)
	}
	// Requests starting in the last 15 s of the outage succeed early once it
	// ends, so the mean is a little under 5.
	if a := m["genai"].Amplification; a < 4.3 || a > 5 {
		t.Errorf("genai: amplification %.2f, want about 5 (4.3 to 5)", a)
	}
	// Per process, 40 requests/s: the RatioBudget allows 20 % of the
	// requests, with a floor of 10 retries/s for quiet clients (1.25 here if
	// the floor is a max as in Envoy, 1.45 if a sum as in Finagle; the
	// window slides in 0.5 s steps: up to 1.5).
	if a := m["ratio-budget"].Amplification; a > 1.5 || a < 1.05 {
		t.Errorf("ratio-budget: amplification %.2f, want 1.2 plus the reserve (1.05 to 1.5)", a)
	}
	if a := m["token-bucket"].Amplification; a > 1.05 {
		t.Errorf("token-bucket: amplification %.2f, want at most 1.05", a)
	}
	if m["genai"].RecoveryS <= m["none"].RecoveryS {
		t.Errorf("genai recovered in %.1f s, no retries in %.1f s: want the retry storm to delay recovery", m["genai"].RecoveryS, m["none"].RecoveryS)
	}
	for _, name := range []string{"ratio-budget", "token-bucket"} {
		if r := m[name].RecoveryS; r < 0 || r > m["none"].RecoveryS {
			t.Errorf("%s recovered in %.1f s, no retries in %.1f s: want no worse", name, r, m["none"].RecoveryS)
		}
	}
}

// Without a reserve, the library's RatioBudget holds retries to its ratio.
func TestOverloadRatioBudgetBound(t *testing.T) {
	c := small()
	c.Hosts = 1
	s := OverloadStrategy{Name: "ratio-0.1", Policy: retry.Google(),
		NewLimiters: func(now func() time.Time, _ func() float64) (retry.Limiter, retry.Limiter) {
			return retry.NewRatioBudget(retry.RatioBudgetConfig{Ratio: 0.1, MinPerSecond: -1, Now: now}), nil
		}}
	c.Strategies = []OverloadStrategy{s}
	r := runOverload(t, c)["ratio-0.1"]
	if r.Amplification > 1.11 || r.Amplification < 1.05 {
		t.Errorf("amplification %.3f, want the budget's 1.1 (1.05 to 1.11)", r.Amplification)
	}
}

// No outage: nothing fails, nothing is retried, whatever the strategy.
// The adaptive throttle is the exception at start-up: a fresh throttle whose
// first few requests are still in flight has requests but no accepts yet,
// so p = (requests − 2·accepts)/(requests + 1) is already above 0 and it
// rejects a handful (11 of 48,001 here).
func TestOverloadNoOutage(t *testing.T) {
	c := small()
	c.Outage = 0
	c.Strategies = strategies(t, "none", "genai", "adaptive-throttle")
	for name, r := range runOverload(t, c) {
		cold := int64(0)
		if name == "adaptive-throttle" {
			cold = r.Requests / 1000
			t.Logf("adaptive-throttle: %d of %d requests rejected at start-up", r.Throttled, r.Requests)
		}
		if r.Failed != 0 || r.GaveUp != r.Throttled || r.Throttled > cold || r.Attempts != r.Requests-r.Throttled || r.RecoveryS != 0 {
			t.Errorf("%s: %d failed, %d gave up, %d throttled, %d attempts for %d requests, recovery %v: want every request to succeed at once",
				name, r.Failed, r.GaveUp, r.Throttled, r.Attempts, r.Requests, r.RecoveryS)
		}
		if want := 0.8 * c.Capacity; r.Goodput < 0.95*want || r.Goodput > 1.05*want {
			t.Errorf("%s: goodput %.0f/s, want about %.0f", name, r.Goodput, want)
		}
	}
}

// A policy Deadline bounds every request's latency, and a dropping outage
// makes clients wait for their timeout.
func TestOverloadDeadlineAndDrop(t *testing.T) {
	c := tiny()
	c.Drop, c.Timeout = true, 3*time.Second
	c.Strategies = strategies(t, "none", "profile:realtime")
	m := runOverload(t, c)
	if p := m["none"].P99Ms; p != 3000 {
		t.Errorf("none, dropping outage: p99 %.0f ms, want the 3 s timeout", p)
	}
	c.Drop = false
	m = runOverload(t, c)
	rt := m["profile:realtime"]
	if rt.P99Ms > 10000 || rt.Amplification < 2.5 || rt.Amplification > 3 {
		t.Errorf("realtime: p99 %.0f ms (want <= 10 s deadline), amplification %.2f (want up to 3 attempts)", rt.P99Ms, rt.Amplification)
	}
}

func TestOverloadConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*OverloadConfig)
		want string
	}{
		{"clients", func(c *OverloadConfig) { c.Clients = 0 }, "clients = 0"},
		{"hosts", func(c *OverloadConfig) { c.Hosts = c.Clients + 1 }, "hosts = 2001"},
		{"capacity", func(c *OverloadConfig) { c.Capacity = 0 }, "capacity = 0"},
		{"load", func(c *OverloadConfig) { c.Load = -1 }, "load = -1"},
		{"queue", func(c *OverloadConfig) { c.Queue = -1 }, "queue = -1"},
		{"outage past end", func(c *OverloadConfig) { c.Outage = time.Hour }, "must end within the duration"},
		{"drop needs timeout", func(c *OverloadConfig) { c.Drop, c.Timeout = true, 0 }, "timeout"},
		{"bin", func(c *OverloadConfig) { c.Bin = 0 }, "bin = 0s"},
		{"strategy", func(c *OverloadConfig) {
			c.Strategies = []OverloadStrategy{{Name: "x", Policy: retry.Policy{Attempts: -2}}}
		}, `strategy "x"`},
		{"no strategies", func(c *OverloadConfig) { c.Strategies = []OverloadStrategy{} }, "no strategies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := small()
			tc.edit(&c)
			_, err := RunOverload(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := OverloadStrategyByName("bogus"); err == nil || !strings.Contains(err.Error(), "profile:realtime") {
		t.Errorf("unknown strategy: %v, want the list of names", err)
	}
	if _, err := OverloadStrategyByName("profile:bogus"); err == nil || !strings.Contains(err.Error(), "unknown profile") {
		t.Errorf("unknown profile: %v", err)
	}
}

// BenchmarkOverload simulates the Gen AI default policy with 100,000
// clients for 60 s (30 s outage) and reports simulated events per second.
func BenchmarkOverload(b *testing.B) {
	b.ReportAllocs()
	c := DefaultOverload()
	c.Seed = 1
	c.Strategies = strategies(b, "genai")
	var events int64
	for b.Loop() {
		res, err := RunOverload(c)
		if err != nil {
			b.Fatal(err)
		}
		events += res[0].Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// Goodput counts the successes that land within Duration only. Policies
// whose requests finish long after the arrivals stop (flex: 10 min per
// attempt, under a dropping outage) must not look better for it: no strategy
// can deliver more than the offered load, and Goodput is the mean of the Good
// series.
func TestOverloadGoodputWithinDuration(t *testing.T) {
	c := tiny()
	c.Drop, c.Timeout = true, 2*time.Second
	c.Strategies = strategies(t, "none", "genai", "profile:flex")
	m := runOverload(t, c)
	offered := c.Load * c.Capacity
	for name, r := range m {
		var sum float64
		for _, g := range r.Good {
			sum += g
		}
		mean := sum * r.BinS / c.Duration.Seconds()
		if math.Abs(r.Goodput-mean) > 1e-6*mean {
			t.Errorf("%s: goodput %.1f/s, but the goodput series averages %.1f/s", name, r.Goodput, mean)
		}
		if r.Goodput > 1.05*offered {
			t.Errorf("%s: goodput %.1f/s above the offered %.0f/s: successes after the run were counted", name, r.Goodput, offered)
		}
	}
	if f, n := m["profile:flex"].Goodput, m["none"].Goodput; f > 1.05*n {
		t.Errorf("flex goodput %.0f/s vs none %.0f/s: flex's attempts hang for 10 min, its late successes must not count", f, n)
	}
}

// Without an outage nobody started a request during it: the amplification
// is that of the whole run (1.00 when nothing is retried), not 0.
func TestOverloadNoOutageAmplification(t *testing.T) {
	c := tiny()
	c.Outage = 0
	c.Strategies = strategies(t, "none", "genai")
	for name, r := range runOverload(t, c) {
		if r.Amplification != r.AmplificationTotal || r.Amplification < 1 {
			t.Errorf("%s: amplification %v, total %v: want the total (>= 1) without an outage", name, r.Amplification, r.AmplificationTotal)
		}
	}
}

// BenchmarkOverloadScale runs the Gen AI default policy through the default
// experiment (60 s, a 30 s outage) at 10k, 100k and 1M clients, the capacity
// a tenth of the clients per second, and reports the wall time and the
// process's CPU time (the garbage collector's included) per simulated event:
// neither should grow with the clients. On a shared machine the CPU time is
// the steadier of the two.
func BenchmarkOverloadScale(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			c := DefaultOverload()
			c.Clients, c.Capacity, c.Seed, c.Workers = n, float64(n/10), 1, 1
			c.Strategies = strategies(b, "genai")
			var events int64
			cpu0, ok := processCPU()
			for b.Loop() {
				res, err := RunOverload(c)
				if err != nil {
					b.Fatal(err)
				}
				events += res[0].Events
			}
			cpu1, _ := processCPU()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
			if ok {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(events), "cpu-ns/event")
			}
		})
	}
}
