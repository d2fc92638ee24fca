package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Tests for review 3's finding 8 (the core's part): a panic in an Observer
// or in fn leaves no limiter count or pacer record behind. Each failed on
// the code before its fix.

// panicOn returns an Observer that panics with v on events of kind k.
func panicOn(k EventKind, v any) Observer {
	return func(_ context.Context, e Event) {
		if e.Kind == k {
			panic(v)
		}
	}
}

// recoverFrom runs f and returns what it panicked with (nil if it did not).
func recoverFrom(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestObserverPanicGivesTheRetryBack: an Observer that panics on the retry
// event ends the call before the retry the Budget and the Throttle admitted
// is made: the retry is given back to both (their Cancel), and the panic
// goes on up to the caller, unchanged.
func TestObserverPanicGivesTheRetryBack(t *testing.T) {
	b := NewRatioBudget(RatioBudgetConfig{Ratio: 0.1, MinPerSecond: 0.1, Window: 10 * time.Second})
	before := b.Available() // 1: the floor, 0.1/s over 10 s
	th := &cancelCounter{}
	calls := 0
	p := Policy{Budget: b, Throttle: th, InitialDelay: time.Nanosecond, Jitter: Zero,
		Observer: panicOn(EventRetry, "observer")}
	v := recoverFrom(func() {
		Run(context.Background(), p, func(context.Context) error { calls++; return errFlaky })
	})
	if v != "observer" || calls != 1 {
		t.Fatalf("recovered %v after %d calls, want the observer's panic after 1", v, calls)
	}
	if got := b.Available(); got != before || before != 1 {
		t.Errorf("the budget admits %d retries after the panic, %d before: the admitted retry was not given back", got, before)
	}
	if th.cancels != 1 || th.retryAdmits != 1 {
		t.Errorf("the throttle admitted %d retries and had %d cancelled, want 1 and 1", th.retryAdmits, th.cancels)
	}
}

// TestObserverPanicOnSuccessCancelsNothing: a panic on any other event
// gives nothing back (nothing was admitted that is not made).
func TestObserverPanicOnSuccessCancelsNothing(t *testing.T) {
	th := &cancelCounter{}
	n := 0
	p := Policy{Throttle: th, InitialDelay: time.Nanosecond, Jitter: Zero, Observer: panicOn(EventSuccess, "ok")}
	v := recoverFrom(func() {
		Run(context.Background(), p, func(context.Context) error {
			if n++; n == 1 {
				return errFlaky
			}
			return nil
		})
	})
	if v != "ok" || th.cancels != 0 || th.retryAdmits != 1 {
		t.Fatalf("recovered %v, %d cancels, %d retries admitted; want the panic, 0, 1", v, th.cancels, th.retryAdmits)
	}
}

// TestFnPanicIsRecorded: fn that panics is an attempt that the Pacer let
// start: the Pacer is told (a non-nil error), then the panic goes on.
func TestFnPanicIsRecorded(t *testing.T) {
	for _, p := range []Policy{{}, {Deadline: time.Hour}} {
		pc := &recordingPacer{}
		p.Pacer = pc
		v := recoverFrom(func() {
			Run(context.Background(), p, func(context.Context) error { panic("fn") })
		})
		if v != "fn" {
			t.Fatalf("recovered %v, want fn's panic", v)
		}
		if pc.reserves != 1 || len(pc.records) != 1 || pc.records[0] == nil {
			t.Fatalf("%d reserves, records %v; want 1 reserve and one failure recorded", pc.reserves, pc.records)
		}
		if !errors.Is(pc.records[0], errAttemptPanicked) {
			t.Errorf("recorded %v, want errAttemptPanicked", pc.records[0])
		}
	}
}

// cancelCounter is a Limiter that admits everything and counts retries
// admitted and cancelled.
type cancelCounter struct{ retryAdmits, cancels int }

func (c *cancelCounter) Admit(retry bool) bool {
	if retry {
		c.retryAdmits++
	}
	return true
}
func (c *cancelCounter) Record(bool) {}
func (c *cancelCounter) Cancel(retry bool) {
	if retry {
		c.cancels++
	}
}

// recordingPacer lets every attempt start at once and keeps what Record
// was told.
type recordingPacer struct {
	reserves int
	records  []error
}

func (p *recordingPacer) Reserve(_ context.Context, earliest, _ time.Time) (time.Time, error) {
	p.reserves++
	return earliest, nil
}
func (p *recordingPacer) Record(err error) { p.records = append(p.records, err) }
