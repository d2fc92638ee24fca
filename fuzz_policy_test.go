package retry_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

// Fuzz targets for the core's parsers and decisions (FuzzBackoff, for the
// wait formula, is in shape_test.go). Seed corpora are under testdata/fuzz;
// scripts/fuzz.sh runs each for a bounded time.

func FuzzParseShape(f *testing.F) {
	for _, s := range retry.Shapes() {
		f.Add(s.String())
	}
	f.Add("")
	f.Add("GOOGLE")
	f.Add("full ")
	f.Fuzz(func(t *testing.T, name string) {
		s, err := retry.ParseShape(name)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseShape(%q): empty error message", name)
			}
			return
		}
		if s.String() != name {
			t.Fatalf("ParseShape(%q) = %v, whose name differs", name, s)
		}
	})
}

// fuzzPolicy builds a Policy from fuzzed fields; a duration of -1 stands for
// retry.Zero.
func fuzzPolicy(attempts int, initial, maxd, jitter, deadline, maxRA int64, base float64, shape uint8) retry.Policy {
	d := func(v int64) time.Duration {
		if v == -1 {
			return retry.Zero
		}
		return time.Duration(v)
	}
	return retry.Policy{Attempts: attempts, InitialDelay: d(initial), MaxDelay: d(maxd), Jitter: d(jitter),
		Deadline: d(deadline), MaxRetryAfter: d(maxRA), ExpBase: base, Shape: retry.Shape(shape)}
}

// FuzzPolicyMergeValidate checks that Validate, Resolved and Merge never
// panic, that a valid policy resolves to usable values, and that Merge takes
// exactly the fields set in the override.
func FuzzPolicyMergeValidate(f *testing.F) {
	f.Add(0, int64(0), int64(0), int64(0), int64(0), int64(0), 0.0, uint8(0), 3, int64(-1), int64(0), 2.5)
	f.Add(5, int64(time.Second), int64(time.Minute), int64(-1), int64(300*time.Second), int64(-1), 2.0, uint8(6), 0, int64(0), int64(time.Hour), 0.0)
	f.Add(-1, int64(-5), int64(1), int64(1<<62), int64(-1), int64(7), 0.5, uint8(200), 1, int64(1), int64(-2), 1e308)
	f.Fuzz(func(t *testing.T, attempts int, initial, maxd, jitter, deadline, maxRA int64, base float64, shape uint8,
		oAttempts int, oInitial, oMaxRA int64, oBase float64) {
		p := fuzzPolicy(attempts, initial, maxd, jitter, deadline, maxRA, base, shape)
		o := retry.Policy{Attempts: oAttempts, InitialDelay: time.Duration(oInitial), MaxRetryAfter: time.Duration(oMaxRA), ExpBase: oBase}
		if oInitial == -1 {
			o.InitialDelay = retry.Zero
		}
		m := p.Merge(o)
		m.Validate()
		m.Resolved()
		wantAttempts := p.Attempts
		if o.Attempts != 0 {
			wantAttempts = o.Attempts
		}
		wantInitial := p.InitialDelay
		if o.InitialDelay != 0 {
			wantInitial = o.InitialDelay
		}
		if m.Attempts != wantAttempts || m.InitialDelay != wantInitial || m.MaxDelay != p.MaxDelay || m.Jitter != p.Jitter {
			t.Fatalf("Merge(%+v, %+v) = %+v: fields taken wrongly", p, o, m)
		}
		err := p.Validate()
		if err != nil {
			var ve *retry.ValidationError
			if !errors.As(err, &ve) || ve.Field == "" || ve.Reason == "" {
				t.Fatalf("Validate(%+v) = %v: want a *ValidationError naming the field", p, err)
			}
			return
		}
		r := p.Resolved()
		if r.Attempts < 1 || r.ExpBase < 1 || r.MaxDelay < r.InitialDelay || r.InitialDelay < 0 || r.Jitter < 0 ||
			r.Deadline < 0 || r.MaxRetryAfter < 0 {
			t.Fatalf("valid %+v resolves to unusable %+v", p, r)
		}
	})
}

// FuzzDoHintBounds runs Do in virtual time with a function that always fails
// with a fuzzed server hint, under fuzzed jitter, and checks the loop's
// decision: every wait is at most max(MaxDelay, MaxRetryAfter) and, when
// hinted, at least min(hint, MaxRetryAfter) (no hint when MaxRetryAfter is
// Zero); the waits end before the policy's Deadline; the attempts stop at the
// policy's count.
func FuzzDoHintBounds(f *testing.F) {
	f.Add(int64(time.Second), int64(0), int64(0), uint8(5), true, int64(0))
	f.Add(int64(1e18), int64(2*time.Second), int64(10*time.Second), uint8(10), true, int64(time.Millisecond))
	f.Add(int64(-5), int64(-1), int64(0), uint8(3), false, int64(-1))
	f.Add(int64(9e18), int64(1<<62), int64(time.Hour), uint8(20), true, int64(time.Second))
	f.Add(int64(math.MaxInt64), int64(0), int64(0), uint8(2), true, int64(time.Second))       // hint + jitter overflowed
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(0), uint8(2), true, int64(1<<62)) // both huge
	f.Fuzz(func(t *testing.T, hint, maxRA, deadline int64, attempts uint8, hinted bool, jitter int64) {
		attempts = attempts%20 + 1
		p := retry.Policy{Attempts: int(attempts), InitialDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond,
			Jitter: time.Duration(jitter), MaxRetryAfter: time.Duration(maxRA), Deadline: time.Duration(deadline),
			Rand: retry.NewRand(uint64(hint))}
		if maxRA == -1 {
			p.MaxRetryAfter = retry.Zero
		}
		if jitter == -1 {
			p.Jitter = retry.Zero
		}
		if p.Validate() != nil {
			return
		}
		r := p.Resolved()
		limit := max(r.MaxDelay, r.MaxRetryAfter)
		floor := time.Duration(0)
		if hinted && r.MaxRetryAfter > 0 {
			floor = min(max(time.Duration(hint), 0), r.MaxRetryAfter)
		}
		synctest.Test(t, func(t *testing.T) {
			var waits []time.Duration
			p.Observer = func(_ context.Context, e retry.Event) {
				if e.Kind == retry.EventRetry {
					waits = append(waits, e.Wait)
				}
			}
			calls := 0
			start := time.Now()
			err := retry.Run(context.Background(), p, func(context.Context) error {
				calls++
				e := errors.New("overloaded")
				if hinted {
					return retry.After(e, time.Duration(hint))
				}
				return e
			})
			took := time.Since(start)
			if err == nil || calls > int(attempts) || calls < 1 {
				t.Fatalf("err %v after %d calls of %d", err, calls, attempts)
			}
			var sum time.Duration
			// The runtime's clock saturates near 2^63 ns (about 290 years from
			// the bubble's start): compare the sum only below 2^62 ns.
			saturated := false
			for _, w := range waits {
				if w < floor || w > limit {
					t.Fatalf("wait %v outside [%v, %v] (hint %v, policy %+v)", w, floor, limit, time.Duration(hint), r)
				}
				if w >= 1<<62 || sum >= 1<<62-w {
					saturated = true
				} else {
					sum += w
				}
			}
			if !saturated && took != sum {
				t.Fatalf("took %v, waits sum to %v", took, sum)
			}
			if r.Deadline > 0 && took >= r.Deadline {
				t.Fatalf("waited %v, past the %v deadline", took, r.Deadline)
			}
		})
	})
}

// FuzzHinted checks Policy.Hinted's bounds for any wait, hint, draw and
// policy: the result is at least the computed wait and, when hints are on,
// at least min(hint, MaxRetryAfter), and it never exceeds
// max(wait, MaxRetryAfter).
func FuzzHinted(f *testing.F) {
	f.Add(int64(time.Second), int64(math.MaxInt64), 0.5, int64(0), int64(0))
	f.Add(int64(0), int64(math.MaxInt64-1), 0.999999, int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(int64(5), int64(-7), math.NaN(), int64(-1), int64(-1))
	f.Fuzz(func(t *testing.T, wait, hint int64, u float64, jitter, maxRA int64) {
		d := func(v int64) time.Duration {
			if v == -1 {
				return retry.Zero
			}
			return time.Duration(v)
		}
		p := retry.Policy{Jitter: d(jitter), MaxRetryAfter: d(maxRA), MaxDelay: math.MaxInt64}
		if p.Validate() != nil || wait < 0 {
			return
		}
		r := p.Resolved()
		got := p.Hinted(time.Duration(wait), time.Duration(hint), u)
		lo := time.Duration(wait)
		if r.MaxRetryAfter > 0 {
			lo = max(lo, min(max(time.Duration(hint), 0), r.MaxRetryAfter))
		}
		hi := max(time.Duration(wait), r.MaxRetryAfter)
		if got < lo || got > hi {
			t.Fatalf("Hinted(%d, %d, %v) with %+v = %d, outside [%d, %d]", wait, hint, u, r, got, lo, hi)
		}
	})
}
