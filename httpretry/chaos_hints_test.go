package httpretry_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
)

// waitLog records the waits the loop announced.
type waitLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *waitLog) observe(_ context.Context, e retry.Event) {
	if e.Kind == retry.EventRetry {
		w.mu.Lock()
		w.waits = append(w.waits, e.Wait)
		w.mu.Unlock()
	}
}

func (w *waitLog) sum() time.Duration {
	var s time.Duration
	for _, d := range w.waits {
		s += d
	}
	return s
}

// chaosBubble starts a chaos server on a pipe inside the current synctest
// bubble, where every attempt gets fault f, and returns it with a base
// transport; both are closed when the test ends.
func chaosBubble(t *testing.T, cfg chaos.Config, f chaos.Fault) (*chaos.Server, *http.Transport) {
	t.Helper()
	if cfg.Decide == nil {
		cfg.Decide = func(string, int) chaos.Fault { return f }
	}
	return httpretry.ChaosOnPipe(t, cfg, 2)
}

// TestChaosMaliciousHintsAreCapped answers every attempt with a 429 whose
// hint is well-formed but asks for an hour, an HTTP-date an hour ahead,
// malformed, negative, 10^9 seconds, or a RetryInfo body (valid, malformed,
// 10^9 s in a 1 MiB body). In virtual time, each wait must be at most the
// policy's MaxRetryAfter (2 s); unusable hints fall back to the backoff
// (100, 200, 200 ms); and the caller gets the last 429, body intact.
func TestChaosMaliciousHintsAreCapped(t *testing.T) {
	const capHint = 2 * time.Second
	backoff := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}
	capped := []time.Duration{capHint, capHint, capHint}
	for _, tc := range []struct {
		f     chaos.Fault
		waits []time.Duration // nil: either capped or backoff
	}{
		{chaos.RetryAfterSeconds, capped},
		{chaos.RetryAfterDate, capped},
		{chaos.RetryAfterMalformed, backoff},
		{chaos.RetryAfterNegative, backoff},
		{chaos.RetryAfterHuge, capped},
		{chaos.RetryInfo, capped},
		{chaos.RetryInfoMalformed, backoff},
		{chaos.RetryInfoHuge, nil}, // its retryDelay lies beyond the 16 KiB peeked
		{chaos.Status5xx, backoff},
	} {
		t.Run(tc.f.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, base := chaosBubble(t, chaos.Config{RetryAfter: time.Hour}, tc.f)
				var w waitLog
				rt := httpretry.NewTransport(base, retry.Policy{
					Attempts: 4, InitialDelay: 100 * time.Millisecond, MaxDelay: 200 * time.Millisecond,
					Jitter: retry.Zero, MaxRetryAfter: capHint, Observer: w.observe,
				})
				req, _ := http.NewRequest(http.MethodGet, "http://chaos/", nil)
				req.Header.Set(chaos.HeaderID, "x")
				start := time.Now()
				resp, err := rt.RoundTrip(req)
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				n, err := chaos.ReadChecked(resp)
				if err != nil || n != resp.ContentLength {
					t.Errorf("last response body: %d of %d bytes, %v", n, resp.ContentLength, err)
				}
				if got := resp.Header.Get(chaos.HeaderAttempt); got != "4" {
					t.Errorf("returned the response of attempt %s, want the last (4)", got)
				}
				if took != w.sum() {
					t.Errorf("took %v of virtual time, the waits sum to %v", took, w.sum())
				}
				for _, d := range w.waits {
					if d > capHint {
						t.Errorf("waited %v, above MaxRetryAfter %v", d, capHint)
					}
				}
				want := tc.waits
				if want == nil && len(w.waits) > 0 && w.waits[0] == capHint {
					want = capped
				} else if want == nil {
					want = backoff
				}
				if !slices.Equal(w.waits, want) {
					t.Errorf("waits %v, want %v", w.waits, want)
				}
				t.Logf("%v: waits %v, total %v", tc.f, w.waits, took)
			})
		})
	}
}

// TestChaosHintsNeverPassTheDeadline lets the hint cap be an hour: a hint of
// 10^9 s (or an hour) must then end the loop at once when the wait would pass
// the policy's Deadline or the context's deadline, returning the 429 without
// waiting at all.
func TestChaosHintsNeverPassTheDeadline(t *testing.T) {
	for _, f := range []chaos.Fault{chaos.RetryAfterHuge, chaos.RetryAfterSeconds, chaos.RetryAfterDate, chaos.RetryInfo, chaos.RetryInfoHuge} {
		for _, viaCtx := range []bool{false, true} {
			t.Run(f.String()+"/ctx="+strconv.FormatBool(viaCtx), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s, base := chaosBubble(t, chaos.Config{RetryAfter: time.Hour, HugeBody: 100}, f)
					p := retry.Policy{Attempts: 10, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond,
						Jitter: retry.Zero, MaxRetryAfter: 2 * time.Hour}
					var ctx context.Context
					ctx, p.Deadline = testkit.Deadline(t, context.Background(), viaCtx, 3*time.Second)
					rt := httpretry.NewTransport(base, p)
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://chaos/", nil)
					req.Header.Set(chaos.HeaderID, "x")
					start := time.Now()
					resp, err := rt.RoundTrip(req)
					took := time.Since(start)
					if err != nil {
						t.Fatalf("err %v, want the 429 returned", err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusTooManyRequests || took != 0 || s.Hits("x") != 1 {
						t.Errorf("status %d after %v and %d attempts; want 429 at once after 1", resp.StatusCode, took, s.Hits("x"))
					}
				})
			})
		}
	}
}

// TestChaosCancelDuringHintedWait cancels the caller's context during a
// (capped) one-hour wait: RoundTrip returns at once with the context's
// error and leaves no goroutine behind (the bubble checks).
func TestChaosCancelDuringHintedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, base := chaosBubble(t, chaos.Config{RetryAfter: time.Hour}, chaos.RetryAfterSeconds)
		rt := httpretry.NewTransport(base, retry.Policy{MaxRetryAfter: 2 * time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://chaos/", nil)
		req.Header.Set(chaos.HeaderID, "x")
		time.AfterFunc(10*time.Minute, cancel)
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("status %d, want the context's error", resp.StatusCode)
		}
		if took := time.Since(start); took != 10*time.Minute || ctx.Err() == nil {
			t.Errorf("returned after %v (err %v), want at the cancel, 10m", took, err)
		}
		if s.Hits("x") != 1 {
			t.Errorf("%d attempts, want 1", s.Hits("x"))
		}
	})
}
