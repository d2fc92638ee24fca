package retry

import (
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Policy{Attempts: 3, Jitter: Zero}
	tests := []struct {
		name     string
		p        Policy
		attempt  int
		err      error
		deadline time.Time
		want     Step
	}{
		{"first retry", p, 1, errFlaky, time.Time{}, Step{Wait: time.Second, Shaped: time.Second}},
		{"second retry", p, 2, errFlaky, time.Time{}, Step{Wait: 2 * time.Second, Shaped: 2 * time.Second}},
		{"attempts used up", p, 3, errFlaky, time.Time{}, Step{Reason: ReasonAttempts}},
		{"permanent", p, 1, Permanent(errFlaky), time.Time{}, Step{Reason: ReasonPermanent}},
		{"classifier", Policy{Retryable: func(error) bool { return false }}, 1, errFlaky, time.Time{}, Step{Reason: ReasonPermanent}},
		{"hint raises the wait", p, 1, After(errFlaky, 7*time.Second), time.Time{}, Step{Wait: 7 * time.Second, Shaped: time.Second, Hint: 7 * time.Second}},
		{"wait ends at the deadline", p, 1, errFlaky, t0.Add(time.Second), Step{Reason: ReasonDeadline, Wait: time.Second, Shaped: time.Second}},
		{"wait ends before the deadline", p, 1, errFlaky, t0.Add(time.Second + 1), Step{Wait: time.Second, Shaped: time.Second}},
		{"budget refuses", Policy{Jitter: Zero, Budget: &fakeLimiter{refuseRetry: true}}, 1, errFlaky, time.Time{}, Step{Reason: ReasonBudget, Wait: time.Second, Shaped: time.Second}},
		{"throttle refuses", Policy{Jitter: Zero, Throttle: &fakeLimiter{refuseRetry: true}}, 1, errFlaky, time.Time{}, Step{Reason: ReasonThrottled, Wait: time.Second, Shaped: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Next(tt.attempt, 0, tt.err, t0, tt.deadline); got != tt.want {
				t.Fatalf("Next = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNextRecordsOutcomes(t *testing.T) {
	b, th := &fakeLimiter{refuseRetry: true}, &fakeLimiter{}
	p := Policy{Budget: b, Throttle: th}
	if !p.Begin() {
		t.Fatal("Begin refused")
	}
	p.Next(1, 0, errFlaky, time.Now(), time.Time{}) // budget refuses: the throttle is not asked
	p.Next(1, 0, Permanent(errFlaky), time.Now(), time.Time{})
	p.Succeeded()
	if b.admits.Load() != 2 || th.admits.Load() != 1 {
		t.Fatalf("admits: budget %d, throttle %d; want 2, 1", b.admits.Load(), th.admits.Load())
	}
	if b.fails.Load() != 1 || b.oks.Load() != 2 || th.fails.Load() != 1 || th.oks.Load() != 2 {
		t.Fatalf("records: budget %d/%d, throttle %d/%d", b.oks.Load(), b.fails.Load(), th.oks.Load(), th.fails.Load())
	}
	if (Policy{Throttle: &fakeLimiter{refuseFirst: true}}).Begin() {
		t.Fatal("Begin admitted what the throttle refused")
	}
}
