package sim

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backoffkit/retry"
)

// smallFleet is a quick fleet experiment: 4 processes of 5 clients, a
// backlog of 400 calls against 60 requests per 10 s.
func smallFleet() FleetConfig {
	c := DefaultFleet()
	c.Processes, c.Clients, c.Jobs = 4, 5, 20
	c.Quota, c.Window = 60, 10*time.Second
	c.Horizon, c.Bin = 10*time.Minute, time.Second
	c.Seed = 1
	return c
}

func runFleet(t *testing.T, c FleetConfig) map[string]FleetResult {
	t.Helper()
	res, err := RunFleet(c)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]FleetResult{}
	for _, r := range res {
		m[r.Strategy] = r
	}
	return m
}

func TestFleetDeterministic(t *testing.T) {
	c := smallFleet()
	var outs [][]byte
	for _, workers := range []int{1, 3} {
		c.Workers = workers
		res, err := RunFleet(c)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteJSON(&buf, res); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, buf.Bytes())
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("same seed, different JSON:\n%s\n%s", outs[0], outs[1])
	}
	for _, k := range []string{`"strategy":`, `"share_429":`, `"amplification":`, `"goodput":`, `"fairness":`, `"drain_s":`, `"max_window":`} {
		if !bytes.Contains(outs[0], []byte(k)) {
			t.Errorf("JSON lacks %s", k)
		}
	}
	c.Seed = 2
	res, _ := RunFleet(c)
	var other bytes.Buffer
	WriteJSON(&other, res)
	if bytes.Equal(other.Bytes(), outs[0]) {
		t.Error("seeds 1 and 2 gave the same JSON")
	}
}

// TestFleetConservation: every job succeeds once, every attempt is either
// served (a success) or answered 429, and the series add up.
func TestFleetConservation(t *testing.T) {
	for _, ri := range []time.Duration{0, -1, 3 * time.Second} {
		c := smallFleet()
		c.RetryInfo = ri
		for name, r := range runFleet(t, c) {
			if r.DrainS < 0 || r.Succeeded != r.Jobs || r.Jobs != 400 {
				t.Errorf("retry-info %v, %s: %d of %d jobs done, drain %v", ri, name, r.Succeeded, r.Jobs, r.DrainS)
			}
			if r.Attempts != r.Succeeded+r.Rejected {
				t.Errorf("retry-info %v, %s: %d attempts != %d successes + %d 429s", ri, name, r.Attempts, r.Succeeded, r.Rejected)
			}
			var load, rejects float64
			for i := range r.Load {
				load += r.Load[i] * r.BinS
				rejects += r.Rejects[i] * r.BinS
			}
			if int64(load+0.5) != r.Attempts || int64(rejects+0.5) != r.Rejected || r.Backlog[len(r.Backlog)-1] != 0 || r.Backlog[0] > float64(r.Jobs) {
				t.Errorf("retry-info %v, %s: series add up to %.0f attempts, %.0f 429s, backlog %v..%v", ri, name, load, rejects, r.Backlog[0], r.Backlog[len(r.Backlog)-1])
			}
			if r.Fairness <= 0 || r.Fairness > 1.0000001 {
				t.Errorf("%s: fairness %v", name, r.Fairness)
			}
		}
	}
}

// TestFleetQuotaAndCooldown: processes on their own overshoot the quota and
// collect 429s; the fleet's cooldown cuts the 429s; the fleet's quota
// keeps every window within the quota, with no 429, at the quota's rate.
func TestFleetQuotaAndCooldown(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		c := smallFleet()
		c.Seed = seed
		m := runFleet(t, c)
		local, cool, quota, all := m["local"], m["fleet-cooldown"], m["fleet-quota"], m["fleet"]
		if local.MaxWindow <= int64(c.Quota) || local.Rejected == 0 {
			t.Errorf("seed %d: local saw at most %d requests in a window and %d 429s: the quota is never hit", seed, local.MaxWindow, local.Rejected)
		}
		if cool.Rejected*2 > local.Rejected {
			t.Errorf("seed %d: the fleet cooldown got %d 429s, local %d: want at most half", seed, cool.Rejected, local.Rejected)
		}
		for _, r := range []FleetResult{quota, all} {
			if r.Rejected != 0 || r.MaxWindow > int64(c.Quota) {
				t.Errorf("seed %d, %s: %d 429s, %d requests in a window (quota %d)", seed, r.Strategy, r.Rejected, r.MaxWindow, c.Quota)
			}
			// Paced at the quota's rate: the last job ends about when the
			// rate allows, not sooner.
			if r.DrainS < r.IdealS-float64(c.Window/time.Second) || r.DrainS > r.IdealS*1.05 {
				t.Errorf("seed %d, %s: drained in %.1f s, the quota's rate needs %.1f s", seed, r.Strategy, r.DrainS, r.IdealS)
			}
		}
	}
}

// TestFleetBudgetScope: with no RetryInfo, retries follow the backoff; one
// budget for the fleet (a floor of 10 retries/s for all) refuses more than
// a budget per process (that floor for each), and a refused retry is a job
// back in the backlog.
func TestFleetBudgetScope(t *testing.T) {
	c := DefaultFleet()
	c.Jobs, c.Seed, c.RetryInfo = 15, 1, -1
	m := runFleet(t, c)
	local, perProc, fleet := m["local"], m["local-budget"], m["fleet-budget"]
	if fleet.GaveUp <= perProc.GaveUp || fleet.GaveUp <= local.GaveUp {
		t.Errorf("gave up: fleet budget %d, per-process %d, none %d: want the fleet's budget to refuse the most", fleet.GaveUp, perProc.GaveUp, local.GaveUp)
	}
}

// TestFleetLimitersFollowTheModels checks the simulator's limiters against
// what the scripts' models say, step by step.
func TestFleetLimitersFollowTheModels(t *testing.T) {
	now := simEpoch
	clock := func() time.Time { return now }
	ctx := context.Background()

	// Quota: 10/s, burst 1: one slot every 100 ms, shared by the fleet.
	var tat time.Time
	q1 := &fleetQuota{tat: &tat, inc: 100 * time.Millisecond, now: clock}
	q2 := &fleetQuota{tat: &tat, inc: 100 * time.Millisecond, now: clock}
	for i, q := range []*fleetQuota{q1, q2, q1} {
		got, err := q.Reserve(ctx, now, time.Time{})
		if want := now.Add(time.Duration(i) * 100 * time.Millisecond); err != nil || !got.Equal(want) {
			t.Fatalf("reservation %d: %v, %v; want %v", i, got, err, want)
		}
	}
	if _, err := q2.Reserve(ctx, now, now.Add(250*time.Millisecond)); !errors.Is(err, retry.ErrPastDeadline) {
		t.Fatalf("a slot 300 ms away before a deadline 250 ms away: %v", err)
	}
	if got, _ := q2.Reserve(ctx, now, time.Time{}); !got.Equal(now.Add(300 * time.Millisecond)) {
		t.Fatalf("the refused reservation took a slot: next is %v", got.Sub(now))
	}

	// Cooldown: one process's hint reaches the other at its next read, at
	// most a second later; the wait ends at the hint plus jitter.
	var shared time.Time
	half := func() float64 { return 0.5 }
	a := &fleetCooldown{shared: &shared, now: clock, rand: half}
	b := &fleetCooldown{shared: &shared, now: clock, rand: half}
	if got, _ := b.Reserve(ctx, now, time.Time{}); !got.Equal(now) {
		t.Fatalf("no cooldown: %v", got.Sub(now))
	}
	a.Record(retry.After(errors.New("429"), 25*time.Second))
	if got, _ := a.Reserve(ctx, now, time.Time{}); !got.Equal(now.Add(25*time.Second + 500*time.Millisecond)) {
		t.Fatalf("the process that got the hint waits %v", got.Sub(now))
	}
	if got, _ := b.Reserve(ctx, now, time.Time{}); !got.Equal(now) {
		t.Fatalf("the other process knew the hint before its cache expired: waits %v", got.Sub(now))
	}
	now = now.Add(time.Second)
	if got, _ := b.Reserve(ctx, now, time.Time{}); !got.Equal(simEpoch.Add(25*time.Second + 500*time.Millisecond)) {
		t.Fatalf("a second later the other process waits until %v", got.Sub(simEpoch))
	}
	if _, err := b.Reserve(ctx, now, now.Add(10*time.Second)); !errors.Is(err, retry.ErrPastDeadline) {
		t.Fatalf("a cooldown past the deadline: %v", err)
	}
	a.Record(retry.After(errors.New("429"), time.Hour))
	if want := now.Add(fleetCooldownMax); !shared.Equal(want) {
		t.Fatalf("a hint of 1 h is published as %v, want capped at %v", shared.Sub(now), fleetCooldownMax)
	}

	// Budget: one window for the fleet, a floor of 100 retries per 10 s.
	w := newFleetWindow()
	b1, b2 := &fleetBudget{w: w, now: clock}, &fleetBudget{w: w, now: clock}
	granted := 0
	for i := range 150 {
		if []*fleetBudget{b1, b2}[i%2].Admit(true) {
			granted++
		}
	}
	if granted != 100 {
		t.Fatalf("the fleet's two processes got %d retries with no request, want the floor, 100", granted)
	}
	for range 1000 {
		b1.Admit(false)
	}
	if !b2.Admit(true) {
		t.Fatal("1,000 requests of one process did not raise the fleet's budget for the other")
	}
}

func TestFleetConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		change func(*FleetConfig)
		want   string
	}{
		{func(c *FleetConfig) { c.Processes = 0 }, "processes = 0"},
		{func(c *FleetConfig) { c.Clients = -1 }, "clients = -1"},
		{func(c *FleetConfig) { c.Processes, c.Clients = 100_000, 100 }, "at most 1,000,000 clients"},
		{func(c *FleetConfig) { c.Jobs = 0 }, "jobs = 0"},
		{func(c *FleetConfig) { c.Jobs = 1 << 40 }, "jobs = "},
		{func(c *FleetConfig) { c.Quota = 0 }, "quota = 0"},
		{func(c *FleetConfig) { c.Window = 0 }, "window = 0s"},
		{func(c *FleetConfig) { c.Service = -time.Second }, "service = -1s"},
		{func(c *FleetConfig) { c.NetSD = -1 }, "network delay"},
		{func(c *FleetConfig) { c.NetMean = 0 }, "want a mean above 0"},
		{func(c *FleetConfig) { c.Horizon = 0 }, "horizon = 0s"},
		{func(c *FleetConfig) { c.Bin = time.Nanosecond }, "bin = 1ns"},
		{func(c *FleetConfig) { c.Strategies = []FleetStrategy{{Name: "a"}, {Name: "a"}} }, `"a" is empty or repeated`},
		{func(c *FleetConfig) {
			c.Strategies = []FleetStrategy{{Name: "d", Policy: retry.Policy{Deadline: time.Second}}}
		}, "no deadlines"},
		{func(c *FleetConfig) { c.Strategies = []FleetStrategy{{Name: "b", Budget: 7}} }, "unknown budget 7"},
		{func(c *FleetConfig) { c.Strategies = []FleetStrategy{} }, "no strategies"},
	} {
		c := smallFleet()
		tc.change(&c)
		if _, err := RunFleet(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error with %q, got %v", tc.want, err)
		}
	}
	if _, err := FleetStrategyByName("bogus"); err == nil || !strings.Contains(err.Error(), "local, local-budget") {
		t.Errorf("unknown strategy: %v", err)
	}
}

// TestFleetHorizon: a backlog the quota cannot drain in time is reported
// as not drained, with the series up to the horizon.
func TestFleetHorizon(t *testing.T) {
	c := smallFleet()
	c.Horizon = time.Minute
	c.Strategies = nil
	for name, r := range runFleet(t, c) {
		if r.DrainS != -1 || r.Succeeded >= r.Jobs || len(r.Load) != 60 {
			t.Errorf("%s: drain %v, %d of %d done, %d bins", name, r.DrainS, r.Succeeded, r.Jobs, len(r.Load))
		}
	}
}

func TestFleetPlotsAndReport(t *testing.T) {
	c := smallFleet()
	res, err := RunFleet(c)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := WriteFleetPlots(dir, "", c, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatalf("paths %v", paths)
	}
	for _, p := range paths {
		checkReadable(t, p, "4 processes × 5 clients, 400 calls of 500ms", "quota 60/10s", "rest of the window")
	}
	if _, err := WriteFleetPlots(dir, "x", c, nil); err == nil {
		t.Error("no rows: no error")
	}
	if p, _ := WriteFleetPlots(dir, "20", c, res); len(p) != 3 || filepath.Base(p[0]) != "fleet-load-20.svg" {
		t.Errorf("suffixed paths %v", p)
	}
	var buf bytes.Buffer
	if err := WriteFleetReport(&buf, c, res); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	for _, want := range []string{"share_429", "fairness   Jain's index", "drain_s    when the last job succeeded",
		"Conclusion: fleet-budget had 22.6 % of its requests answered 429", "kept every window within the quota with 0.0 %"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "\n") != 1+len(res)+1+7+1 {
		t.Errorf("report has %d lines:\n%s", strings.Count(s, "\n"), s)
	}
	// The table fits 80 columns.
	table, _, _ := strings.Cut(s, "\n\n")
	for _, l := range strings.Split(table, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("a table line is %d columns: %q", n, l)
		}
	}
}

// TestFleetWastedPlot: the third fleet plot shows what the conclusion
// under it says: the attempts each strategy wasted on 429s so far, ending
// at its attempts less its successes (0 for the fleet's quota, the most for
// the strategy the conclusion names first). The old plot, of the backlog,
// showed the strategies that burst through each window's quota finishing
// first.
func TestFleetWastedPlot(t *testing.T) {
	c := smallFleet()
	res, err := RunFleet(c)
	if err != nil {
		t.Fatal(err)
	}
	_, _, plot := fleetPlots(c, res)
	if !strings.Contains(plot.Title, "wasted") || !strings.HasPrefix(plot.Caption, "Fleet-budget had 22.6 %") {
		t.Errorf("title %q, caption %q", plot.Title, plot.Caption)
	}
	last := map[string]float64{}
	for _, s := range plot.Series {
		last[s.Name] = s.Y[len(s.Y)-1]
		if !slices.IsSorted(s.Y) {
			t.Errorf("%s: the wasted attempts so far go down: %v", s.Name, s.Y)
		}
	}
	for _, r := range res {
		if want := float64(r.Attempts - r.Succeeded); last[r.Strategy] != want {
			t.Errorf("%s: %v wasted at the end, want %v (attempts %d - successes %d)", r.Strategy, last[r.Strategy], want, r.Attempts, r.Succeeded)
		}
	}
	if last["fleet"] != 0 || last["fleet-quota"] != 0 || last["fleet-budget"] <= last["local"] {
		t.Errorf("wasted at the end: %v; want none for the fleet's quota and the most for fleet-budget", last)
	}
}

func TestJainWindows(t *testing.T) {
	j := jainWindows{count: make([]int64, 4)}
	w := int64(10)
	for p := range 4 { // window 0: even shares
		j.add(1, w, p)
		j.add(2, w, p)
	}
	j.add(15, w, 0) // window 1: process 0 gets everything
	j.add(16, w, 0)
	j.add(25, w, 1) // window 2 starts, then the measure stops: it is left out
	j.stop()
	j.add(26, w, 2)
	j.add(35, w, 3)
	if got, want := j.mean(), (1+0.25)/2; got < want-1e-9 || got > want+1e-9 {
		t.Errorf("mean = %v, want %v", got, want)
	}
	if (&jainWindows{}).mean() != 1 {
		t.Error("no window: want 1")
	}
}
