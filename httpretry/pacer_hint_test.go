package httpretry

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoffkit/retry"
)

// hintRecorder is a Pacer that admits every attempt and keeps the server
// hints its Record calls carry, as a fleet cooldown learns them.
type hintRecorder struct {
	mu    sync.Mutex
	hints []time.Duration
}

func (h *hintRecorder) Reserve(_ context.Context, earliest, _ time.Time) (time.Time, error) {
	return earliest, nil
}

func (h *hintRecorder) Record(err error) {
	if d, ok := retry.RetryAfter(err); ok {
		h.mu.Lock()
		h.hints = append(h.hints, d)
		h.mu.Unlock()
	}
}

// TestPacerLearnsEveryHint: a Pacer is told the server's hint of every
// attempt, the last one and one that is not retried (a POST marked
// NotIdempotent) included: a cooldown shared by a fleet must learn "retry
// in 25 s" even from the process that gives up on it. The loop itself has
// no use for those hints.
func TestPacerLearnsEveryHint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		ctx      func(context.Context) context.Context
		attempts int
		want     []time.Duration
	}{
		{"last attempt", http.MethodGet, nil, 1, []time.Duration{7 * time.Second}},
		{"not idempotent", http.MethodPost, NotIdempotent, 3, []time.Duration{7 * time.Second}},
		{"a refusal to a POST is retried", http.MethodPost, nil, 2, []time.Duration{7 * time.Second, 7 * time.Second}},
		{"every attempt", http.MethodGet, nil, 2, []time.Duration{7 * time.Second, 7 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &hintRecorder{}
			p := fast
			p.Attempts, p.MaxRetryAfter, p.Pacer = tc.attempts, retry.Zero, rec // no wait for the hint itself
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				return response(r, http.StatusTooManyRequests, "slow down", "Retry-After", "7"), nil
			})
			client := &http.Client{Transport: NewTransport(base, p)}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx(ctx)
			}
			req, _ := http.NewRequestWithContext(ctx, tc.method, "http://example.test/", strings.NewReader("x"))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("status %d", resp.StatusCode)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.hints) != len(tc.want) || (len(tc.want) > 0 && rec.hints[len(rec.hints)-1] != tc.want[0]) {
				t.Errorf("the pacer learnt the hints %v, want %v", rec.hints, tc.want)
			}
		})
	}
}
