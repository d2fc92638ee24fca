package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/fleetmodel"
)

// The fleet's limiters on the simulator's clock, as redisretry makes them,
// with Redis as a map that every process reaches at once: the state each
// keeps in Redis changes only through the Go model of its script
// (internal/fleetmodel, held to the Lua scripts by a test in redisretry).
// What the simulator leaves out is the leases: a process here calls the
// script once per decision (a lease of 1, a round trip of 0). redisretry's
// leases trade a little fairness and up to Slack of the quota for fewer
// round trips (see docs/fleet.md).

// Defaults of the fleet limiters in the simulator: redisretry's.
const (
	fleetCooldownCache  = time.Second      // redisretry.DefaultCooldownCache
	fleetCooldownJitter = time.Second      // redisretry.DefaultCooldownJitter
	fleetCooldownMax    = time.Minute      // redisretry.DefaultCooldownMax
	fleetBudgetSlots    = 20               // redisretry's budget window: 20 slots
	fleetEpoch          = time.Millisecond // the scripts' clocks tick in ms (budget, cooldown) or µs (GCRA)
)

// fleetBudget is redisretry.Budget without its leases: a [retry.Limiter]
// whose every decision is one call of the budget script's model on the
// fleet's shared window.
type fleetBudget struct {
	w   *fleetmodel.BudgetWindow
	now func() time.Time
}

// newFleetWindow returns the budget window of redisretry.BudgetConfig{}:
// retries <= 20 % of the fleet's requests over 10 s in 20 slots, with a floor
// of 10 retries per second of the window, for the whole fleet.
func newFleetWindow() *fleetmodel.BudgetWindow {
	window := retry.DefaultBudgetWindow
	return &fleetmodel.BudgetWindow{
		Slot: (window / fleetBudgetSlots).Truncate(fleetEpoch), Slots: fleetBudgetSlots,
		Ratio: retry.DefaultBudgetRatio, Floor: retry.DefaultBudgetMinPerSecond * window.Seconds(),
	}
}

func (b *fleetBudget) Admit(isRetry bool) bool {
	if !isRetry {
		b.w.Apply(b.now(), fleetmodel.BudgetCall{Add: 1})
		return true
	}
	return b.w.Apply(b.now(), fleetmodel.BudgetCall{Want: 1}).Granted > 0
}

func (b *fleetBudget) Record(bool) {}

// fleetQuota is redisretry.Quota without its leases: a [retry.Pacer] that
// reserves each attempt's slot with the GCRA script's model on the fleet's
// shared schedule (burst 1: pure pacing).
type fleetQuota struct {
	tat *time.Time // the fleet's schedule (the zero Time: no key yet)
	inc time.Duration
	now func() time.Time
}

func (q *fleetQuota) Reserve(_ context.Context, earliest, deadline time.Time) (time.Time, error) {
	now := q.now()
	maxWait := time.Duration(-1)
	if !deadline.IsZero() {
		maxWait = max(deadline.Sub(now), 0)
	}
	r := fleetmodel.GCRA(*q.tat, now, q.inc, 0, maxWait)
	if !r.OK {
		return time.Time{}, fmt.Errorf("sim: the fleet quota would need a wait of %v: %w", r.Wait, retry.ErrPastDeadline)
	}
	*q.tat = r.To
	return later(earliest, now.Add(r.Wait)), nil
}

func (q *fleetQuota) Record(error) {}

// fleetCooldown is one process's redisretry.Cooldown: it publishes a
// server's hint into the fleet's cooldown (the cooldown script's model),
// reads the fleet's at most once per Cache, and makes an attempt wait for
// the end it knows, plus jitter.
type fleetCooldown struct {
	shared  *time.Time // the fleet's cooldown in "Redis"
	until   time.Time  // this process's knowledge
	fetched time.Time  // when it last read the fleet's
	now     func() time.Time
	rand    func() float64
}

func (d *fleetCooldown) Reserve(_ context.Context, earliest, deadline time.Time) (time.Time, error) {
	now := d.now()
	if d.fetched.IsZero() || now.Sub(d.fetched) >= fleetCooldownCache {
		d.fetched = now
		d.until = later(d.until, *d.shared)
	}
	if !d.until.After(earliest) {
		return earliest, nil
	}
	t := d.until.Add(time.Duration(d.rand() * float64(fleetCooldownJitter)))
	if !deadline.IsZero() && !t.Before(deadline) {
		return time.Time{}, fmt.Errorf("sim: the fleet cooldown lasts %v: %w", t.Sub(now), retry.ErrPastDeadline)
	}
	return t, nil
}

func (d *fleetCooldown) Record(err error) {
	hint, ok := retry.RetryAfter(err)
	if hint = min(hint, fleetCooldownMax); !ok || hint <= 0 {
		return
	}
	now := d.now()
	*d.shared = fleetmodel.CooldownUntil(*d.shared, now, hint)
	d.until = later(d.until, later(now.Add(hint), *d.shared)) // the script answers with the fleet's end
	d.fetched = now
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
