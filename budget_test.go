package retry_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoffkit/retry"
)

// limClock is a settable clock for the limiters' Now.
type limClock struct{ ns atomic.Int64 }

func (c *limClock) Now() time.Time {
	return time.Unix(1_700_000_000, 0).Add(time.Duration(c.ns.Load()))
}
func (c *limClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// concurrently calls f n times on each of g goroutines and waits for them
// all.
func concurrently(g, n int, f func()) {
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for range n {
				f()
			}
		})
	}
	wg.Wait()
}

var errLimTransient = errors.New("503 transient")

// noWait retries at once: the budgets, not the waits, are under test.
var noWait = retry.Policy{InitialDelay: retry.Zero, MaxDelay: retry.Zero, Jitter: retry.Zero}

func TestTokenBucketArithmetic(t *testing.T) {
	b := retry.NewTokenBucket(10, 0.1)
	steps := []struct {
		op         string // "fail", "ok"
		times      int
		wantTokens float64
		wantRetry  bool // Admit(true) afterwards
	}{
		{"", 0, 10, true},
		{"fail", 4, 6, true},
		{"fail", 1, 5, false}, // exactly half: gRPC needs more than half
		{"ok", 1, 5.1, true},
		{"fail", 1, 4.1, false},
		{"fail", 10, 0, false}, // floors at 0
		{"ok", 3, 0.3, false},  // exact thousandths, no float drift
		{"ok", 47, 5, false},
		{"ok", 1, 5.1, true},
		{"ok", 1000, 10, true}, // caps at maxTokens
	}
	for i, s := range steps {
		for range s.times {
			b.Record(s.op == "ok")
		}
		if got := b.Tokens(); got != s.wantTokens {
			t.Fatalf("step %d (%d×%s): tokens = %v, want %v", i, s.times, s.op, got, s.wantTokens)
		}
		if got := b.Admit(true); got != s.wantRetry {
			t.Fatalf("step %d: Admit(retry) = %v at %v tokens, want %v", i, got, b.Tokens(), s.wantRetry)
		}
		if !b.Admit(false) {
			t.Fatalf("step %d: a first attempt was refused", i)
		}
	}
}

func TestTokenBucketAdmitTakesNoToken(t *testing.T) {
	b := retry.NewTokenBucket(3, 0.5)
	for range 100 {
		b.Admit(true)
		b.Admit(false)
	}
	if b.Tokens() != 3 {
		t.Fatalf("tokens = %v after admits only, want 3", b.Tokens())
	}
}

func TestTokenBucketConcurrent(t *testing.T) {
	b := retry.NewTokenBucket(10, 0.1)
	const G, N = 8, 50
	concurrently(G, N, func() {
		b.Admit(true)
		b.Record(false)
	})
	if b.Tokens() != 0 {
		t.Fatalf("tokens = %v after %d failures, want 0", b.Tokens(), G*N)
	}
	concurrently(G, 10, func() {
		b.Record(true)
	})
	// 80 successes of 0.1: exactly 8 tokens, no update lost.
	if b.Tokens() != 8 {
		t.Fatalf("tokens = %v after %d successes, want 8", b.Tokens(), G*10)
	}
}

func TestNewTokenBucketRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		max, ratio float64
		want       string
	}{
		{0, 0.1, "maxTokens = 0"},
		{-1, 0.1, "maxTokens = -1"},
		{1001, 0.1, "maxTokens = 1001"},
		{10, 0, "tokenRatio = 0"},
		{10, 11, "tokenRatio = 11"},
		{10, -0.1, "tokenRatio = -0.1"},
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.want) {
					t.Errorf("NewTokenBucket(%v, %v) panicked with %q, want it to name %q", tc.max, tc.ratio, msg, tc.want)
				}
			}()
			retry.NewTokenBucket(tc.max, tc.ratio)
		}()
	}
}

func TestRatioBudgetArithmetic(t *testing.T) {
	var clk limClock
	b := retry.NewRatioBudget(retry.RatioBudgetConfig{Ratio: 0.2, Window: 10 * time.Second, MinPerSecond: -1, Now: clk.Now})
	if b.Admit(true) {
		t.Fatal("a retry was admitted with no request and no floor")
	}
	for range 100 {
		if !b.Admit(false) {
			t.Fatal("a request was refused")
		}
	}
	if got := b.Available(); got != 20 {
		t.Fatalf("Available = %d after 100 requests, want 20", got)
	}
	for i := range 20 {
		if !b.Admit(true) {
			t.Fatalf("retry %d of 20 refused", i+1)
		}
	}
	if b.Admit(true) || b.Available() != 0 {
		t.Fatalf("21st retry admitted (available %d)", b.Available())
	}
	// A refused retry is not counted: 5 more requests make room for one.
	for range 5 {
		b.Admit(false)
	}
	if !b.Admit(true) || b.Admit(true) {
		t.Fatal("5 more requests should allow exactly one more retry")
	}

	// The window: everything above happened at t=0 and is remembered for
	// exactly 10 s.
	clk.Advance(10*time.Second - time.Millisecond)
	if b.Admit(true) {
		t.Fatal("retry admitted at 9.999s: the window forgot too early")
	}
	clk.Advance(time.Millisecond)
	if got := b.Available(); got != 0 {
		t.Fatalf("Available = %d with an empty window and no floor", got)
	}
	for range 10 {
		b.Admit(false)
	}
	if got := b.Available(); got != 2 {
		t.Fatalf("Available = %d after 10 fresh requests, want 2", got)
	}
}

func TestRatioBudgetFloor(t *testing.T) {
	var clk limClock
	// Defaults: 20 %, 10 s, at least 10 retries per second → a floor of 100.
	b := retry.NewRatioBudget(retry.RatioBudgetConfig{Now: clk.Now})
	if got := b.Available(); got != 100 {
		t.Fatalf("Available = %d on a quiet client, want the floor of 100", got)
	}
	for range 50 {
		b.Admit(false)
	}
	n := 0
	for b.Admit(true) {
		n++
	}
	if n != 100 {
		t.Fatalf("admitted %d retries after 50 requests, want max(0.2·50, 10·10) = 100", n)
	}
	// Busy: the ratio takes over from the floor (the floor is not added).
	clk.Advance(5 * time.Second)
	for range 1000 {
		if !b.Admit(false) {
			t.Fatal("request refused")
		}
	}
	if got := b.Available(); got != 110 {
		t.Fatalf("Available = %d, want 0.2·1050 − 100 = 110", got)
	}
	// Slots expire one by one: at 10 s the requests and retries of t=0 are
	// gone, those of t=5s remain.
	clk.Advance(5 * time.Second)
	if got := b.Available(); got != 200 {
		t.Fatalf("Available = %d at 10s, want 0.2·1000 = 200", got)
	}
}

func TestRatioBudgetConcurrentNeverOverAdmits(t *testing.T) {
	var clk limClock
	b := retry.NewRatioBudget(retry.RatioBudgetConfig{Ratio: 0.25, MinPerSecond: 0.5, Now: clk.Now})
	const G = 8
	concurrently(G, 100, func() {
		b.Admit(false)
	})
	const limit = 0.25 * G * 100 // 200 > the floor of 0.5·10
	var admitted atomic.Int64
	concurrently(G, 100, func() {
		if b.Admit(true) {
			admitted.Add(1)
		}
	})
	if admitted.Load() > limit {
		t.Fatalf("admitted %d concurrent retries, limit %d", admitted.Load(), int(limit))
	}
	// Racing retries may refuse each other for a moment, never lose room.
	for b.Admit(true) {
		admitted.Add(1)
	}
	if admitted.Load() != limit {
		t.Fatalf("admitted %d retries in all, want exactly %d", admitted.Load(), int(limit))
	}
}

func TestRatioBudgetConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c    retry.RatioBudgetConfig
		want string // "" = valid
	}{
		{retry.RatioBudgetConfig{}, ""},
		{retry.RatioBudgetConfig{Ratio: 1.5, Window: time.Minute, MinPerSecond: -1}, ""},
		{retry.RatioBudgetConfig{Ratio: -0.2}, "Ratio = -0.2"},
		{retry.RatioBudgetConfig{Window: -time.Second}, "Window = -1s"},
		{retry.RatioBudgetConfig{Window: time.Millisecond}, "Window = 1ms"},
		{retry.RatioBudgetConfig{MinPerSecond: nan()}, "MinPerSecond = NaN"},
	} {
		err := tc.c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one naming %q", tc.c, err, tc.want)
		}
	}
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "Ratio = -1") {
			t.Errorf("NewRatioBudget panicked with %q", msg)
		}
	}()
	retry.NewRatioBudget(retry.RatioBudgetConfig{Ratio: -1})
}

func nan() float64 { var z float64; return z / z }

// A budget refusal makes Do give up with ReasonBudget.
func TestDoGivesUpWhenTokenBucketRefuses(t *testing.T) {
	b := retry.NewTokenBucket(4, 1)
	var events []retry.Event
	p := noWait
	p.Budget = b
	p.Observer = func(_ context.Context, e retry.Event) { events = append(events, e) }
	calls := 0
	err := retry.Run(t.Context(), p, func(context.Context) error { calls++; return errLimTransient })
	// 4 tokens → fail → 3 (> 2: retry) → fail → 2 (not > 2: refused).
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonBudget || re.Attempts != 2 || calls != 2 {
		t.Fatalf("err = %v (calls %d), want a budget give-up after 2 attempts", err, calls)
	}
	if !errors.Is(err, retry.ErrBudgetExhausted) || !errors.Is(err, errLimTransient) {
		t.Fatalf("errors.Is fails on %v", err)
	}
	if last := events[len(events)-1]; last.Kind != retry.EventGiveUp || last.Reason != retry.ReasonBudget {
		t.Fatalf("last event %+v, want a give-up for the budget", last)
	}
	if b.Tokens() != 2 {
		t.Fatalf("tokens = %v, want 2", b.Tokens())
	}
	// A success refills by tokenRatio and retries resume.
	if err := retry.Run(t.Context(), p, func(context.Context) error { return nil }); err != nil || b.Tokens() != 3 || !b.Admit(true) {
		t.Fatalf("after a success: err %v, tokens %v", err, b.Tokens())
	}
}

func TestDoGivesUpWhenRatioBudgetRefuses(t *testing.T) {
	var clk limClock
	p := noWait
	p.Budget = retry.NewRatioBudget(retry.RatioBudgetConfig{Ratio: 0.5, MinPerSecond: -1, Now: clk.Now})
	// Each call is one request; a retry needs 2 requests per retry.
	for i, want := range []int{1, 2, 1, 2, 1} {
		calls := 0
		err := retry.Run(t.Context(), p, func(context.Context) error { calls++; return errLimTransient })
		if calls != want || !errors.Is(err, retry.ErrBudgetExhausted) {
			t.Fatalf("call %d: %d attempts, err %v; want %d and a budget give-up", i+1, calls, err, want)
		}
	}
}

// Many goroutines share one budget through retry.Do: the load amplification
// stays within the budget (run with -race).
func TestBudgetSharedByConcurrentCalls(t *testing.T) {
	var clk limClock
	p := noWait
	p.Budget = retry.NewRatioBudget(retry.RatioBudgetConfig{Now: clk.Now, MinPerSecond: -1})
	const G, N = 8, 100
	var attempts atomic.Int64
	var wg sync.WaitGroup
	for range G {
		wg.Go(func() {
			for range N {
				retry.Run(context.Background(), p, func(context.Context) error {
					attempts.Add(1)
					return errLimTransient
				})
			}
		})
	}
	wg.Wait()
	if got := attempts.Load(); got > G*N*12/10 || got < G*N {
		t.Fatalf("%d attempts for %d calls: amplification %.2f, want at most 1.2", got, G*N, float64(got)/(G*N))
	}
}
