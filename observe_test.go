package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestObserversOfNothingIsNil(t *testing.T) {
	if Observers() != nil || Observers(nil, nil) != nil {
		t.Fatal("Observers of no observer is not nil: it would silence the default log")
	}
}

func TestThrottledFirstAttemptIsObserved(t *testing.T) {
	for _, withDeadline := range []bool{false, true} {
		rec := newRecorder()
		p := Policy{Throttle: &fakeLimiter{refuseFirst: true}, Observer: rec.Observe}
		if withDeadline {
			p.Deadline = time.Minute
		}
		calls := 0
		err := Run(context.Background(), p, func(context.Context) error { calls++; return nil })
		g := rec.Of(EventGiveUp)
		if calls != 0 || !errors.Is(err, ErrThrottled) || len(rec.Events()) != 1 || len(g) != 1 ||
			g[0].Reason != ReasonThrottled || g[0].Attempt != 0 {
			t.Fatalf("calls %d, err %v, events %+v: want one give-up (throttled, attempt 0)", calls, err, rec.Events())
		}
	}
}
