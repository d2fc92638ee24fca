package retry

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

func TestHintedHugeHintIsCapped(t *testing.T) {
	p := Policy{} // MaxRetryAfter follows MaxDelay: 60 s
	for _, hint := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - time.Second, 9223372036 * time.Second, 61 * time.Second, 60 * time.Second} {
		for _, u := range []float64{0, 0.5, 0.999999} {
			if got := p.Hinted(time.Second, hint, u); got != 60*time.Second {
				t.Errorf("Hinted(1s, %v, %v) = %v, want the cap 60s", hint, u, got)
			}
		}
	}
	// Within the cap the jitter is added; at the cap's edge it saturates.
	if got := p.Hinted(time.Second, 59*time.Second, 0.5); got != 59*time.Second+500*time.Millisecond {
		t.Errorf("Hinted(1s, 59s, .5) = %v, want 59.5s", got)
	}
	if got := p.Hinted(time.Second, 59*time.Second+600*time.Millisecond, 0.5); got != 60*time.Second {
		t.Errorf("Hinted(1s, 59.6s, .5) = %v, want 60s", got)
	}
	// Extreme policies: the result stays in [wait, MaxRetryAfter].
	for _, q := range []Policy{
		{MaxDelay: math.MaxInt64, Jitter: math.MaxInt64},
		{MaxDelay: math.MaxInt64, MaxRetryAfter: math.MaxInt64, Jitter: math.MaxInt64},
		{MaxRetryAfter: 1, Jitter: math.MaxInt64},
	} {
		r := q.Resolved()
		for _, hint := range []time.Duration{-1, 0, 1, math.MaxInt64 / 2, math.MaxInt64} {
			for _, u := range []float64{0, 0.5, 0.999999, math.NaN(), -1, 2} {
				got := q.Hinted(0, hint, u)
				if got < 0 || got > r.MaxRetryAfter || (hint > 0 && got < min(hint, r.MaxRetryAfter)) {
					t.Errorf("%+v: Hinted(0, %d, %v) = %d, outside [min(hint, %d), %d]", q, hint, u, got, r.MaxRetryAfter, r.MaxRetryAfter)
				}
			}
		}
	}
}

func TestDoHugeHintWaitsTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		calls := 0
		err := Run(t.Context(), Policy{Attempts: 2, MaxRetryAfter: 30 * time.Second, Observer: rec.Observe}, func(context.Context) error {
			calls++
			return After(errFlaky, math.MaxInt64)
		})
		if calls != 2 || err == nil {
			t.Fatalf("calls %d, err %v", calls, err)
		}
		r := rec.Of(EventRetry)
		if len(r) != 1 || r[0].Wait != 30*time.Second {
			t.Fatalf("retry events %+v, want one wait of 30s", r)
		}
	})
}
