package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

// traceLimiter logs every call and answers Admit from a script.
type traceLimiter struct {
	name  string
	log   *[]string
	admit []bool // answers to successive Admit calls; true once exhausted
}

func (l *traceLimiter) Admit(retry bool) bool {
	ok := true
	if len(l.admit) > 0 {
		ok, l.admit = l.admit[0], l.admit[1:]
	}
	*l.log = append(*l.log, fmt.Sprintf("%s.Admit(%v)=%v", l.name, retry, ok))
	return ok
}

func (l *traceLimiter) Record(ok bool) {
	*l.log = append(*l.log, fmt.Sprintf("%s.Record(%v)", l.name, ok))
}

type loopCase struct {
	name     string
	policy   retry.Policy
	outcomes []bool // attempt i succeeds?
	budget   []bool // Admit answers
	throttle []bool
}

var loopCases = []loopCase{
	{name: "fail twice then succeed", outcomes: []bool{false, false, true}},
	{name: "attempts used up", outcomes: []bool{false, false, false, false, false}},
	{name: "budget refuses the second retry", outcomes: []bool{false, false, false}, budget: []bool{true, true, false}},
	{name: "throttle refuses the first attempt", outcomes: []bool{true}, throttle: []bool{false}},
	{name: "throttle refuses a retry", outcomes: []bool{false, false}, throttle: []bool{true, true, false}},
	{name: "both refuse", outcomes: []bool{false}, budget: []bool{true, false}, throttle: []bool{true, false}},
	{name: "503 not retryable", policy: retry.Policy{StatusCodes: []int{429}}, outcomes: []bool{false}},
	{name: "deadline before the second wait", policy: retry.Policy{Deadline: 2500 * time.Millisecond}, outcomes: []bool{false, false, false}},
}

// TestLoopMatchesDo checks that the overload model's client runs the very
// loop of retry.Do: the same calls to the budget and the throttle in the
// same order, the same waits, the same number of attempts, for scripted
// attempt outcomes. retry.Do runs in a synctest bubble (virtual time).
func TestLoopMatchesDo(t *testing.T) {
	for _, tc := range loopCases {
		t.Run(tc.name, func(t *testing.T) {
			base := retry.Policy{Attempts: 5, InitialDelay: time.Second, MaxDelay: 60 * time.Second, Shape: retry.ShapeNone}
			pol := base.Merge(tc.policy)

			doLog, doWaits, doAttempts := runDo(t, pol, tc)
			simLog, simWaits, simAttempts := runSimLoop(t, pol, tc)
			if !slices.Equal(doLog, simLog) {
				t.Errorf("limiter calls differ\nretry.Do: %q\nsim:      %q", doLog, simLog)
			}
			if !slices.Equal(doWaits, simWaits) {
				t.Errorf("waits differ: retry.Do %v, sim %v", doWaits, simWaits)
			}
			if doAttempts != simAttempts {
				t.Errorf("attempts: retry.Do %d, sim %d", doAttempts, simAttempts)
			}
		})
	}
}

var err503 = errors.New("503")

func runDo(t *testing.T, pol retry.Policy, tc loopCase) (log []string, waits []time.Duration, attempts int) {
	synctest.Test(t, func(t *testing.T) {
		p := pol
		if tc.budget != nil {
			p.Budget = &traceLimiter{name: "budget", log: &log, admit: slices.Clone(tc.budget)}
		}
		if tc.throttle != nil {
			p.Throttle = &traceLimiter{name: "throttle", log: &log, admit: slices.Clone(tc.throttle)}
		}
		retries503 := pol.RetriesStatus(503)
		p.Retryable = func(error) bool { return retries503 }
		p.Observer = func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry {
				waits = append(waits, e.Wait)
			}
		}
		retry.Run(context.Background(), p, func(context.Context) error {
			attempts++
			if tc.outcomes[attempts-1] {
				return nil
			}
			return err503
		})
	})
	return log, waits, attempts
}

func runSimLoop(t *testing.T, pol retry.Policy, tc loopCase) (log []string, waits []time.Duration, attempts int) {
	cfg := DefaultOverload()
	cfg.Clients, cfg.Hosts = 1, 1
	cfg.NetMean, cfg.NetSD = time.Millisecond, 0
	s := OverloadStrategy{Name: "trace", Policy: pol}
	if tc.budget != nil || tc.throttle != nil {
		s.NewLimiters = func(func() time.Time, func() float64) (b, th retry.Limiter) {
			if tc.budget != nil {
				b = &traceLimiter{name: "budget", log: &log, admit: slices.Clone(tc.budget)}
			}
			if tc.throttle != nil {
				th = &traceLimiter{name: "throttle", log: &log, admit: slices.Clone(tc.throttle)}
			}
			return b, th
		}
	}
	o := newOverloadSim(&cfg, &s)
	o.newRequest(0)
	for o.flights.len() > 0 {
		e := o.flights.pop()
		o.now = e.at
		if kind := e.seq & (1<<kindBits - 1); kind != oServer {
			t.Fatalf("unexpected event kind %d", kind)
		}
		// The scripted server answers at once.
		status := st503
		if tc.outcomes[attempts] {
			status = stOK
		}
		attempts++
		o.reply(&e.p, status)
		if o.flights.len() > 0 { // the next attempt's event
			waits = append(waits, time.Duration(o.flights.peek().p.sent-o.now))
		}
	}
	if o.live != 0 {
		t.Errorf("%d requests still live", o.live)
	}
	if o.res.Succeeded+o.res.Failed+o.res.GaveUp != 1 {
		t.Errorf("the request ended %d times", o.res.Succeeded+o.res.Failed+o.res.GaveUp)
	}
	return log, waits, attempts
}
