package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Tests for the defects found by the adversarial reviews of the core: each
// failed on the code before its fix.

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

// TestBackoffBoundsExtremePolicies: every shape stays in [0, MaxDelay] for
// every n, with a cap at MaxInt64 and a base that overflows at once.
func TestBackoffBoundsExtremePolicies(t *testing.T) {
	policies := []Policy{
		{MaxDelay: math.MaxInt64},
		{MaxDelay: math.MaxInt64, ExpBase: 1e300},
		{MaxDelay: math.MaxInt64, InitialDelay: math.MaxInt64, Jitter: math.MaxInt64},
		{MaxDelay: math.MaxInt64 - 1, InitialDelay: 1 << 62, ExpBase: math.MaxFloat64},
		{ExpBase: 1e300},
		{MaxDelay: 1<<53 + 1, InitialDelay: 1<<53 + 1},
	}
	for _, base := range policies {
		for _, s := range Shapes() {
			p := base
			p.Shape = s
			r := p.Resolved()
			for _, n := range []int{0, 1, 2, 39, 40, 41, 63, 64, 1023, 1024, 1025, 1 << 20, math.MaxInt} {
				for _, prev := range []time.Duration{0, -1, math.MaxInt64, math.MaxInt64 / 3} {
					for _, u := range []float64{0, 0.5, 0.999999} {
						if w := p.Backoff(n, prev, u); w < 0 || w > r.MaxDelay {
							t.Fatalf("%v, MaxDelay %d, base %g: Backoff(%d, %d, %v) = %d, outside [0, %d]",
								s, p.MaxDelay, p.ExpBase, n, prev, u, w, r.MaxDelay)
						}
					}
				}
			}
		}
	}
}

// TestDoNeverRetriesInATightLoop: with a cap at MaxInt64 the wait is huge,
// never negative, so a call with a deadline gives up at once.
func TestDoNeverRetriesInATightLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		calls := 0
		err := Run(ctx, Policy{Attempts: 5, MaxDelay: math.MaxInt64, ExpBase: 1e300}, func(context.Context) error {
			calls++
			return errFlaky
		})
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonDeadline || calls != 2 {
			t.Fatalf("calls %d, err %v: want 2 calls (the 1 s wait, then a huge one past the deadline)", calls, err)
		}
	})
}

func TestBackoffZeroInitialDelayStaysZero(t *testing.T) {
	for _, s := range Shapes() {
		p := Policy{Shape: s, InitialDelay: Zero, Jitter: Zero}
		for _, n := range []int{0, 1, 1023, 1024, 1025, 1 << 30} {
			if w := p.Backoff(n, 0, 0.5); w != 0 {
				t.Errorf("%v: Backoff(%d) with InitialDelay Zero and no jitter = %v, want 0", s, n, w)
			}
		}
	}
	// With jitter, the google shape waits the jitter only.
	p := Policy{InitialDelay: Zero, Jitter: 100 * time.Millisecond}
	if w := p.Backoff(5000, 0, 0.5); w != 50*time.Millisecond {
		t.Errorf("google, InitialDelay Zero: Backoff(5000, u=.5) = %v, want 50ms", w)
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

// sliceErr is an error of an uncomparable type.
type sliceErr []string

func (e sliceErr) Error() string { return strings.Join(e, ",") }

func TestErrorMessageUncomparable(t *testing.T) {
	e := &Error{Attempts: 1, Reason: ReasonContext, Last: sliceErr{"last"}, Cause: sliceErr{"cause"}}
	if got := e.Error(); !strings.Contains(got, "last") || !strings.Contains(got, "(cause: cause)") {
		t.Fatalf("Error() = %q", got)
	}
	// The cause is not repeated when the last error already holds it.
	e = &Error{Attempts: 1, Reason: ReasonContext, Last: fmt.Errorf("get: %w", context.Canceled), Cause: context.Canceled}
	if got := e.Error(); strings.Contains(got, "cause") {
		t.Fatalf("Error() = %q repeats the cause", got)
	}
	e = &Error{Reason: ReasonThrottled, Cause: sliceErr{"only cause"}}
	if got := e.Error(); !strings.Contains(got, "(cause: only cause)") {
		t.Fatalf("Error() = %q", got)
	}
}

func TestDoneContextNeverCallsFn(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	why := errors.New("shutting down")
	cancel(why)
	for _, p := range []Policy{{}, {Deadline: time.Minute}, {AttemptTimeout: time.Second}, {Budget: &fakeLimiter{}}, {Pacer: &fakePacer{}}} {
		rec := newRecorder()
		p.Observer = rec.Observe
		calls := 0
		v, err := Do(ctx, p, func(context.Context) (int, error) { calls++; return 1, nil })
		var re *Error
		if calls != 0 || v != 0 || !errors.As(err, &re) || re.Reason != ReasonContext || re.Attempts != 0 ||
			!errors.Is(err, why) {
			t.Fatalf("%+v: calls %d, v %d, err %v: want no call and the context's cause", p, calls, v, err)
		}
		if g := rec.Of(EventGiveUp); len(g) != 1 || g[0].Reason != ReasonContext {
			t.Fatalf("events %+v, want one give-up", rec.Events())
		}
	}
}

// TestElapsedIncludesEveryAttempt: Error.Elapsed and the events' Elapsed
// count the attempts that ran, the first included, with or without a
// Deadline.
func TestElapsedIncludesEveryAttempt(t *testing.T) {
	for _, p := range []Policy{
		{Attempts: 1},
		{Attempts: 1, Deadline: time.Hour},
		{Attempts: 2, Jitter: Zero},
		{Attempts: 2, Jitter: Zero, Budget: &fakeLimiter{}},
	} {
		synctest.Test(t, func(t *testing.T) {
			rec := newRecorder()
			p.Observer = rec.Observe
			err := Run(t.Context(), p, func(context.Context) error {
				time.Sleep(500 * time.Millisecond) // virtual
				return errFlaky
			})
			want := 500 * time.Millisecond // one attempt
			if p.Attempts == 2 {
				want = 2*500*time.Millisecond + time.Second // two attempts and the 1 s wait
			}
			var re *Error
			if !errors.As(err, &re) || re.Elapsed != want {
				t.Fatalf("%+v: err %v, want Elapsed %v", p, err, want)
			}
			if g := rec.Of(EventGiveUp); len(g) != 1 || g[0].Elapsed != want {
				t.Fatalf("give-up events %+v, want Elapsed %v", g, want)
			}
			if r := rec.Of(EventRetry); p.Attempts == 2 && (len(r) != 1 || r[0].Elapsed != 500*time.Millisecond) {
				t.Fatalf("retry events %+v, want Elapsed 500ms", r)
			}
		})
	}
	// The success event too.
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		Run(t.Context(), Policy{Observer: rec.Observe}, func(context.Context) error {
			time.Sleep(300 * time.Millisecond)
			return nil
		})
		if s := rec.Of(EventSuccess); len(s) != 1 || s[0].Elapsed != 300*time.Millisecond {
			t.Fatalf("success events %+v, want Elapsed 300ms", s)
		}
	})
}

// timeoutErr is a net.Error-like timeout.
type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func TestErrorTimeout(t *testing.T) {
	opTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		name string
		e    *Error
		want bool
	}{
		{"last is DeadlineExceeded", &Error{Last: context.DeadlineExceeded}, true},
		{"last wraps a net timeout", &Error{Last: fmt.Errorf("get: %w", opTimeout)}, true},
		{"last is a timeout type", &Error{Last: timeoutErr{}}, true},
		{"cause is DeadlineExceeded", &Error{Last: errFlaky, Cause: context.DeadlineExceeded}, true},
		{"cause is the policy deadline", &Error{Last: errFlaky, Cause: errPolicyDeadline}, true},
		{"plain error", &Error{Last: errFlaky}, false},
		{"cancelled", &Error{Last: errFlaky, Cause: context.Canceled}, false},
		{"nothing", &Error{}, false},
	}
	for _, tt := range tests {
		if got := tt.e.Timeout(); got != tt.want {
			t.Errorf("%s: Timeout() = %v, want %v", tt.name, got, tt.want)
		}
		// url.Error (what http.Client returns) asks its Err directly.
		if got := (&url.Error{Op: "Get", URL: "http://x", Err: tt.e}).Timeout(); got != tt.want {
			t.Errorf("%s: url.Error.Timeout() = %v, want %v", tt.name, got, tt.want)
		}
	}
	// A policy deadline that cuts an attempt short is a timeout, and a deadline.
	synctest.Test(t, func(t *testing.T) {
		err := Run(t.Context(), Policy{Deadline: time.Second}, func(ctx context.Context) error {
			<-ctx.Done()
			return errFlaky // hides the context's error on purpose
		})
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonDeadline || !re.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v: want a deadline give-up that is a timeout", err)
		}
	})
}

func TestAllocationsOnSuccess(t *testing.T) {
	ok := func(context.Context) error { return nil }
	usesDone := func(ctx context.Context) error { _ = ctx.Done(); return nil }
	short, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cancellable, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		p    Policy
		fn   func(context.Context) error
		max  float64
	}{
		{"default policy", context.Background(), Policy{}, ok, 0},
		{"limiters", context.Background(), Policy{Budget: &fakeLimiter{}, Throttle: &fakeLimiter{}}, ok, 0},
		{"pacer", context.Background(), Policy{Pacer: &fakePacer{}}, ok, 0},
		{"deadline after the context's", short, Policy{Deadline: time.Hour}, ok, 0},
		{"deadline", context.Background(), Policy{Deadline: time.Hour}, ok, 1},
		{"attempt timeout", context.Background(), Policy{AttemptTimeout: time.Hour}, ok, 1},
		{"deadline and attempt timeout: one context", context.Background(), Policy{Deadline: time.Hour, AttemptTimeout: time.Minute}, ok, 1},
		{"deadline, limiters and pacer", context.Background(), Policy{Deadline: time.Hour, Budget: &fakeLimiter{}, Pacer: &fakePacer{}}, ok, 1},
		// The standard library's context and its channel (5), and the
		// attempt's own context that derived it.
		{"deadline, fn asks for Done", context.Background(), Policy{Deadline: time.Hour}, usesDone, 6},
		{"deadline, a context that can be cancelled", cancellable, Policy{Deadline: time.Hour}, ok, 4},
		{"deadline, a context that can be cancelled, fn asks for Done", cancellable, Policy{Deadline: time.Hour}, usesDone, 5},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(200, func() { Run(tt.ctx, tt.p, tt.fn) }); got > tt.max {
			t.Errorf("%s: %v allocations per successful call, want at most %v", tt.name, got, tt.max)
		}
	}
}

func TestMergeRules(t *testing.T) {
	five := 5 * time.Second
	// MaxRetryAfter follows MaxDelay whether the base is resolved or not.
	for _, base := range []Policy{{}, Policy{}.Resolved(), Google(), Google().Resolved()} {
		m := base.Merge(Policy{MaxDelay: five}).Resolved()
		if m.MaxRetryAfter != five || m.MaxDelay != five {
			t.Errorf("%+v.Merge(MaxDelay 5s): MaxRetryAfter %v, MaxDelay %v; want both 5s", base, m.MaxRetryAfter, m.MaxDelay)
		}
	}
	// A MaxRetryAfter set by either side stays.
	if m := (Policy{MaxRetryAfter: time.Minute}).Resolved().Merge(Policy{MaxDelay: five}).Resolved(); m.MaxRetryAfter != time.Minute {
		t.Errorf("explicit base MaxRetryAfter: got %v, want 1m", m.MaxRetryAfter)
	}
	if m := (Policy{}).Resolved().Merge(Policy{MaxDelay: five, MaxRetryAfter: Zero}).Resolved(); m.MaxRetryAfter != 0 {
		t.Errorf("override MaxRetryAfter Zero: got %v, want 0", m.MaxRetryAfter)
	}
	// An override can switch Shape back to google, resolved base or not.
	for _, base := range []Policy{{Shape: ShapeFull}, Policy{Shape: ShapeFull}.Resolved()} {
		if m := base.Merge(Policy{Shape: ShapeGoogle}); m.Resolved().Shape != ShapeGoogle {
			t.Errorf("%v.Merge(ShapeGoogle).Shape = %v", base.Shape, m.Resolved().Shape)
		}
		if m := base.Merge(Policy{}); m.Resolved().Shape != ShapeFull {
			t.Errorf("Merge(zero Shape) changed %v to %v", base.Shape, m.Resolved().Shape)
		}
	}
	// The zero Shape resolves to google and behaves as it.
	if r := (Policy{}).Resolved(); r.Shape != ShapeGoogle || r.Shape.String() != "google" || Shape(0).String() != "google" {
		t.Errorf("zero shape resolves to %v", r.Shape)
	}
	if a, b := (Policy{}).Backoff(2, 0, 0.3), (Policy{Shape: ShapeGoogle}).Backoff(2, 0, 0.3); a != b {
		t.Errorf("zero Shape %v vs ShapeGoogle %v", a, b)
	}
	// Pacer merges like the other interfaces.
	pc := &fakePacer{}
	if m := (Policy{}).Merge(Policy{Pacer: pc}); m.Pacer != pc {
		t.Error("Merge dropped the Pacer")
	}
}

func TestJitterAtCapEqualsGoogleOnlyBelowCapMinusJitter(t *testing.T) {
	g := Policy{InitialDelay: time.Second, MaxDelay: 10 * time.Second, Jitter: 2 * time.Second}
	j := g
	j.Shape = ShapeJitterAtCap
	for n := range 3 { // 1, 2, 4 s: at most cap − J = 8 s
		if a, b := g.Backoff(n, 0, 0.7), j.Backoff(n, 0, 0.7); a != b {
			t.Errorf("n=%d: google %v, jitter-at-cap %v: want equal below cap − J", n, a, b)
		}
	}
	// exp = 9 s, between cap − J and the cap: google waits the cap, jitter-at-cap
	// spreads over [8 s, 10 s).
	g.ExpBase, j.ExpBase = 9, 9
	if a, b := g.Backoff(1, 0, 0.7), j.Backoff(1, 0, 0.7); a == b || b != 8*time.Second+1400*time.Millisecond || a != 10*time.Second {
		t.Errorf("exp 9 s: google %v (want the cap), jitter-at-cap %v (want 9.4s)", a, b)
	}
}
