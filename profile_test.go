package retry_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

// statusErr is an HTTP-like error carrying its status code.
type statusErr struct{ code int }

func (e *statusErr) Error() string   { return fmt.Sprintf("HTTP %d", e.code) }
func (e *statusErr) StatusCode() int { return e.code }

// byStatus is the classifier an HTTP client derives from a policy: an error
// with a status is retried when the policy's StatusCodes hold it.
func byStatus(p retry.Policy) func(error) bool {
	return func(err error) bool {
		var s interface{ StatusCode() int }
		if errors.As(err, &s) {
			return p.RetriesStatus(s.StatusCode())
		}
		return true
	}
}

func TestProfileValues(t *testing.T) {
	gen := []int{408, 429, 500, 502, 503, 504}
	for _, tc := range []struct {
		name                          string
		attempts                      int
		initial, max, jitter          time.Duration
		deadline, attemptTimeout      time.Duration
		codes                         []int
		budget                        bool
		retries429, retries503, other bool // other: retries 400
	}{
		{"standard", 5, time.Second, time.Minute, time.Second, 0, 0, gen, false, true, true, false},
		{"flex", 3, time.Second, time.Minute, time.Second, 0, 10 * time.Minute, gen, false, true, true, false},
		{"priority", 5, time.Second, time.Minute, time.Second, 0, 0, gen, true, true, true, false},
		{"provisioned", 5, time.Second, time.Minute, time.Second, 0, 0, []int{408, 500, 502, 503, 504}, false, false, true, false},
		{"realtime", 3, 500 * time.Millisecond, 2 * time.Second, 500 * time.Millisecond, 10 * time.Second, 0, gen, false, true, true, false},
		{"batch", 1, time.Second, time.Minute, time.Second, 0, 0, gen, false, true, true, false},
		{"model-armor", 15, time.Second, 32 * time.Second, time.Second, 300 * time.Second, 0, []int{500, 502, 503, 504}, false, false, true, false},
	} {
		p, err := retry.Profile(tc.name)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: invalid: %v", tc.name, err)
		}
		r := p.Resolved()
		got := fmt.Sprint(r.Attempts, r.InitialDelay, r.MaxDelay, r.ExpBase, r.Jitter, r.Deadline, r.AttemptTimeout, r.Shape, r.Codes(), p.Budget != nil)
		want := fmt.Sprint(tc.attempts, tc.initial, tc.max, 2.0, tc.jitter, tc.deadline, tc.attemptTimeout, retry.ShapeGoogle, tc.codes, tc.budget)
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
		if p.RetriesStatus(429) != tc.retries429 || p.RetriesStatus(503) != tc.retries503 || p.RetriesStatus(400) != tc.other {
			t.Errorf("%s: retries 429/503/400 = %v/%v/%v", tc.name, p.RetriesStatus(429), p.RetriesStatus(503), p.RetriesStatus(400))
		}
		if p.Throttle != nil || p.Retryable != nil || p.Observer != nil || p.Rand != nil {
			t.Errorf("%s: sets a Throttle, Retryable, Observer or Rand", tc.name)
		}
	}
}

func TestProfileNamedLikeConstructors(t *testing.T) {
	std, _ := retry.Profile("standard")
	if !reflect.DeepEqual(std, retry.Google()) {
		t.Errorf("standard = %+v, want Google()", std)
	}
	ma, _ := retry.Profile("Model-Armor")
	if !reflect.DeepEqual(ma, retry.ModelArmor()) {
		t.Errorf("model-armor = %+v, want ModelArmor()", ma)
	}
}

func TestProfileNames(t *testing.T) {
	names := retry.ProfileNames()
	want := []string{"standard", "flex", "priority", "provisioned", "realtime", "batch", "model-armor"}
	if !slices.Equal(names, want) {
		t.Fatalf("ProfileNames() = %v", names)
	}
	names[0] = "changed"
	if retry.ProfileNames()[0] != "standard" {
		t.Fatal("ProfileNames returns the package's own slice")
	}
	for _, n := range want {
		if _, err := retry.Profile(strings.ToUpper(n)); err != nil {
			t.Errorf("Profile(%q): %v", strings.ToUpper(n), err)
		}
	}
	for _, bad := range []string{"", "premium", "model_armor", " flex"} {
		_, err := retry.Profile(bad)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) || !strings.Contains(err.Error(), "standard, flex, priority") {
			t.Errorf("Profile(%q) error = %v, want one naming it and listing the profiles", bad, err)
		}
	}
}

// Each Profile("priority") is a new client with its own budget; copies of
// one Policy value share it.
func TestPriorityBudgetPerPolicyValue(t *testing.T) {
	a, _ := retry.Profile("priority")
	b, _ := retry.Profile("priority")
	if a.Budget == b.Budget {
		t.Fatal("two Profile calls share one budget")
	}
	c := a
	if c.Budget != a.Budget {
		t.Fatal("a copy does not share the budget")
	}
	m := a.Merge(retry.Policy{Attempts: 2})
	if m.Budget != a.Budget {
		t.Fatal("Merge dropped the budget")
	}
}

// Provisioned throughput: a 429 is returned at once, a 503 is retried.
func TestProvisionedDoesNotRetry429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := retry.Profile("provisioned")
		p.Retryable = byStatus(p)
		for _, tc := range []struct {
			code, wantCalls int
		}{{429, 1}, {503, 5}, {408, 5}, {400, 1}} {
			calls := 0
			err := retry.Run(t.Context(), p, func(context.Context) error { calls++; return &statusErr{tc.code} })
			if calls != tc.wantCalls {
				t.Errorf("provisioned, HTTP %d: %d calls, want %d (err %v)", tc.code, calls, tc.wantCalls, err)
			}
			var s *statusErr
			if !errors.As(err, &s) || s.code != tc.code {
				t.Errorf("HTTP %d: err %v does not keep the status", tc.code, err)
			}
		}
		// The standard profile retries the same 429.
		std, _ := retry.Profile("standard")
		std.Retryable = byStatus(std)
		calls := 0
		retry.Run(t.Context(), std, func(context.Context) error { calls++; return &statusErr{429} })
		if calls != 5 {
			t.Errorf("standard, HTTP 429: %d calls, want 5", calls)
		}
	})
}

func TestBatchSubmitsOnce(t *testing.T) {
	p, _ := retry.Profile("batch")
	calls := 0
	err := retry.Run(t.Context(), p, func(context.Context) error { calls++; return &statusErr{503} })
	var re *retry.Error
	if calls != 1 || !errors.As(err, &re) || re.Reason != retry.ReasonAttempts || re.Attempts != 1 {
		t.Fatalf("batch: %d calls, err %v; want one call and ReasonAttempts", calls, err)
	}
}

func TestRealtimeFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := retry.Profile("realtime")
		p.Rand = retry.NewRand(7)
		var at []time.Duration
		start := time.Now()
		err := retry.Run(t.Context(), p, func(context.Context) error {
			at = append(at, time.Since(start))
			return &statusErr{503}
		})
		if len(at) != 3 || !strings.Contains(err.Error(), "(attempts)") {
			t.Fatalf("realtime: %d attempts, err %v", len(at), err)
		}
		if w := at[1] - at[0]; w < 500*time.Millisecond || w >= time.Second {
			t.Errorf("first wait %v, want [0.5s, 1s)", w)
		}
		if w := at[2] - at[1]; w < time.Second || w >= 1500*time.Millisecond {
			t.Errorf("second wait %v, want [1s, 1.5s)", w)
		}

		// A hanging backend: the 10 s deadline ends the call.
		start = time.Now()
		err = retry.Run(t.Context(), p, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || time.Since(start) != 10*time.Second {
			t.Fatalf("hanging backend: err %v after %v; want ReasonDeadline at 10s", err, time.Since(start))
		}
	})
}

func TestFlexLongAttemptsFewRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			override retry.Policy
			want     time.Duration
		}{
			{retry.Policy{}, 10 * time.Minute},
			{retry.Policy{AttemptTimeout: 30 * time.Minute}, 30 * time.Minute},
		} {
			p, _ := retry.Profile("flex")
			p = p.Merge(tc.override)
			var lasted []time.Duration
			err := retry.Run(t.Context(), p, func(ctx context.Context) error {
				t0 := time.Now()
				<-ctx.Done() // a slow Flex request that never answers
				lasted = append(lasted, time.Since(t0))
				return ctx.Err()
			})
			if len(lasted) != 3 || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("flex: %d attempts, err %v; want 3 timed-out attempts", len(lasted), err)
			}
			for i, d := range lasted {
				if d != tc.want {
					t.Errorf("flex attempt %d lasted %v, want %v", i+1, d, tc.want)
				}
			}
		}
	})
}

// Priority retries 429 with backoff but under its budget: 1000 failing
// calls make 1200 attempts (20 % of 1000, more than the floor of 100), where
// the standard profile makes 5000.
func TestPriorityStaysWithinBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := retry.Policy{InitialDelay: retry.Zero, MaxDelay: retry.Zero, Jitter: retry.Zero}
		count := func(name string) (attempts, budget int) {
			p, _ := retry.Profile(name)
			p = p.Merge(fast)
			p.Retryable = byStatus(p)
			for range 1000 {
				err := retry.Run(t.Context(), p, func(context.Context) error { attempts++; return &statusErr{429} })
				if errors.Is(err, retry.ErrBudgetExhausted) {
					budget++
				}
			}
			return attempts, budget
		}
		// The first 25 calls get all 4 retries from the floor; then the
		// budget refuses and only every 5th call gets one retry.
		if n, b := count("priority"); n != 1200 || b < 950 {
			t.Errorf("priority: %d attempts, %d budget give-ups; want 1200 and most calls", n, b)
		}
		if n, b := count("standard"); n != 5000 || b != 0 {
			t.Errorf("standard: %d attempts, %d budget give-ups; want 5000 and 0", n, b)
		}
	})
}
