package sim

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

// tracePacer logs a pacer's calls, with times relative to t0.
type tracePacer struct {
	p   retry.Pacer
	t0  func() time.Time
	log *[]string
}

func (tp *tracePacer) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	t, err := tp.p.Reserve(ctx, earliest, deadline)
	*tp.log = append(*tp.log, fmt.Sprintf("Reserve(%v)=%v %v", earliest.Sub(tp.t0()), t.Sub(tp.t0()), err))
	return t, err
}

func (tp *tracePacer) Record(err error) {
	hint, _ := retry.RetryAfter(err)
	*tp.log = append(*tp.log, fmt.Sprintf("Record(%v, hint %v)", err != nil, hint))
	tp.p.Record(err)
}

// fleetLoopCase scripts the server's answers to one call's attempts: 0 a
// success, > 0 a 429 with that hint, < 0 a 429 without one; and the
// budget's answers to Admit.
type fleetLoopCase struct {
	name     string
	outcomes []time.Duration
	budget   []bool
}

var fleetLoopCases = []fleetLoopCase{
	{name: "hint then backoff then success", outcomes: []time.Duration{2 * time.Second, -1, 0}},
	{name: "hints longer than the backoff", outcomes: []time.Duration{5 * time.Second, 3 * time.Second, 0}},
	{name: "attempts used up", outcomes: []time.Duration{-1, -1, -1, -1, -1}},
	{name: "budget refuses the second retry", outcomes: []time.Duration{-1, -1, -1}, budget: []bool{true, true, false}},
}

// TestFleetLoopMatchesDo checks that a client of the fleet model runs the
// loop of retry.Do with the fleet's pacers (the cooldown, then the quota):
// the same pacer and limiter calls at the same times, the same attempts,
// for scripted answers. retry.Do runs in a synctest bubble.
func TestFleetLoopMatchesDo(t *testing.T) {
	for _, tc := range fleetLoopCases {
		t.Run(tc.name, func(t *testing.T) {
			pol := retry.Policy{Attempts: 5, InitialDelay: time.Second, MaxDelay: 60 * time.Second, Jitter: retry.Zero, Shape: retry.ShapeNone}
			doLog, doTimes := runFleetDo(t, pol, tc)
			simLog, simTimes := runFleetSimLoop(t, pol, tc)
			if !slices.Equal(doLog, simLog) {
				t.Errorf("calls differ\nretry.Do: %q\nsim:      %q", doLog, simLog)
			}
			if !slices.Equal(doTimes, simTimes) {
				t.Errorf("attempt times differ: retry.Do %v, sim %v", doTimes, simTimes)
			}
		})
	}
}

// fleetPacers returns the cooldown and the quota (10/s) of one process on
// the clock now, with a fixed jitter draw.
func fleetPacers(now func() time.Time) retry.Pacer {
	var tat, shared time.Time
	return retry.Pacers(
		&fleetCooldown{shared: &shared, now: now, rand: func() float64 { return 0.25 }},
		&fleetQuota{tat: &tat, inc: 100 * time.Millisecond, now: now},
	)
}

func fleetErr(hint time.Duration) error {
	if hint > 0 {
		return retry.After(errQuota, hint)
	}
	return errQuota
}

func runFleetDo(t *testing.T, pol retry.Policy, tc fleetLoopCase) (log []string, times []time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		t0 := func() time.Time { return start }
		p := pol
		p.Pacer = &tracePacer{p: fleetPacers(time.Now), t0: t0, log: &log}
		if tc.budget != nil {
			p.Budget = &traceLimiter{name: "budget", log: &log, admit: slices.Clone(tc.budget)}
		}
		n := 0
		retry.Run(context.Background(), p, func(context.Context) error {
			times = append(times, time.Since(start))
			n++
			if o := tc.outcomes[n-1]; o != 0 {
				return fleetErr(o)
			}
			return nil
		})
	})
	return log, times
}

func runFleetSimLoop(t *testing.T, pol retry.Policy, tc fleetLoopCase) (log []string, times []time.Duration) {
	cfg := DefaultFleet()
	cfg.Processes, cfg.Clients, cfg.Jobs = 1, 1, 1
	cfg.NetMean, cfg.NetSD, cfg.Service = 0, 0, 0 // the scripted server answers at once (newFleetSim does not validate)
	s := FleetStrategy{Name: "trace", Policy: pol}
	f := newFleetSim(&cfg, &s)
	clock := f.clock
	f.pacers[0] = &tracePacer{p: fleetPacers(clock), t0: func() time.Time { return simEpoch }, log: &log}
	if tc.budget != nil {
		f.hosts[0].Budget = &traceLimiter{name: "budget", log: &log, admit: slices.Clone(tc.budget)}
	}
	f.clients[0].left = 1
	f.startCall(0)
	n := 0
	for f.q.len() > 0 {
		e := f.q.pop()
		f.now = e.at
		switch e.kind {
		case fAttempt:
			f.attempt(e.who)
		case fServer: // the scripted server answers at once
			times = append(times, time.Duration(f.now))
			n++
			o := tc.outcomes[n-1]
			f.clients[e.who].hint = -1
			if o > 0 {
				f.clients[e.who].hint = int64(o)
			}
			if o == 0 {
				f.reply(e.who, true)
			} else {
				f.reply(e.who, false)
			}
		case fStart: // after a give-up: the next job, not part of this call
			if f.res.GaveUp == 0 {
				t.Fatal("a new call started without a give-up")
			}
			return log, times
		default:
			t.Fatalf("unexpected event kind %d", e.kind)
		}
	}
	return log, times
}
