package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/testkit"
)

// recLimiter is a retry.Limiter that admits everything and records the
// outcomes it is told.
type recLimiter struct {
	mu  sync.Mutex
	oks []bool
}

func (l *recLimiter) Admit(bool) bool { return true }
func (l *recLimiter) Record(ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.oks = append(l.oks, ok)
}
func (l *recLimiter) outcomes() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.oks)
}

// TestUnretriedOverloadIsAFailure: an overload signal (a retryable status or
// a retryable network failure) answered to a request the transport may not
// repeat is recorded by the Budget and the Throttle as a failed attempt,
// not as a success. The table covers every place a retry is skipped.
// postX makes a POST of "x" to url, without an Idempotency-Key.
func postX(url string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
	return r
}

func TestUnretriedOverloadIsAFailure(t *testing.T) {
	boom := errors.New("GetBody failed")
	tests := []struct {
		name     string
		handlers []func(w http.ResponseWriter, r *http.Request)
		req      func(url string) *http.Request
		opts     []Option
		want     []bool // Record calls, in order
		skip     error  // what the give-up matches
	}{
		{
			name:     "503 to a POST without a key",
			handlers: []func(http.ResponseWriter, *http.Request){testkit.Status(503, "busy")},
			req:      postX,
			want:     []bool{false}, skip: ErrNotIdempotent,
		},
		{
			name:     "429 to a body that cannot be replayed",
			handlers: []func(http.ResponseWriter, *http.Request){testkit.Status(429, "slow down")},
			req: func(url string) *http.Request {
				r, _ := http.NewRequest(http.MethodPut, url, opaqueBody{strings.NewReader("0123456789")})
				return r
			},
			opts: []Option{MaxBufferedBody(4)},
			want: []bool{false}, skip: ErrBodyNotReplayable,
		},
		{
			name:     "reset of a POST without a key",
			handlers: []func(http.ResponseWriter, *http.Request){hijackClose("")},
			req:      postX,
			want:     []bool{false}, skip: ErrNotIdempotent,
		},
		{
			name:     "GetBody fails after a 503",
			handlers: []func(http.ResponseWriter, *http.Request){testkit.Status(503, "busy")},
			req: func(url string) *http.Request {
				r, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("x"))
				r.GetBody = func() (io.ReadCloser, error) { return nil, boom }
				return r
			},
			// The 503, whose retry is skipped at once: GetBody is asked
			// for the next body before the wait, and fails.
			want: []bool{false}, skip: ErrBodyNotReplayable,
		},
		{
			name:     "a 200 is a success",
			handlers: []func(http.ResponseWriter, *http.Request){testkit.Status(200, "ok")},
			req:      postX,
			want:     []bool{true},
		},
		{
			name:     "a 400 to a POST is not an overload",
			handlers: []func(http.ResponseWriter, *http.Request){testkit.Status(400, "bad")},
			req:      postX,
			want:     []bool{true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hs []http.HandlerFunc
			for _, h := range tt.handlers {
				hs = append(hs, h)
			}
			srv := testkit.NewScript(t, hs...)
			var thr, bud recLimiter
			ev := newEvents()
			p := fast
			p.Throttle, p.Budget, p.Observer = &thr, &bud, ev.Observe
			resp, err := NewTransport(srv.Client().Transport, p, tt.opts...).RoundTrip(tt.req(srv.URL))
			if err == nil {
				resp.Body.Close()
			}
			if got := thr.outcomes(); !slices.Equal(got, tt.want) {
				t.Errorf("throttle recorded %v, want %v", got, tt.want)
			}
			if got := bud.outcomes(); !slices.Equal(got, tt.want) {
				t.Errorf("budget recorded %v, want %v", got, tt.want)
			}
			if tt.skip != nil {
				if e := ev.Last(); e.Kind != retry.EventGiveUp || !errors.Is(e.Err, tt.skip) || e.Reason != retry.ReasonPermanent {
					t.Errorf("last event %+v, want a give-up matching %v", e, tt.skip)
				}
			}
		})
	}
}

// TestFortyPOSTsAnswered503 is the scenario with the real limiters:
// forty POSTs without a key, each answered 503 (and so never retried), must
// leave an AdaptiveThrottle rejecting most requests and a TokenBucket empty,
// as forty failures would.
func TestFortyPOSTsAnswered503(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(503, "busy"))
	post := func(rt http.RoundTripper) error {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(`{"q":1}`))
		resp, err := rt.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 503 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		return err
	}

	t.Run("AdaptiveThrottle", func(t *testing.T) {
		thr := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Rand: retry.NewRand(1)})
		p := fast
		p.Throttle = thr
		rt := NewTransport(srv.Client().Transport, p)
		throttled := 0
		for range 40 {
			if err := post(rt); errors.Is(err, retry.ErrThrottled) {
				throttled++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		// 40 requests, no accept: p = 40/41 whichever were sent.
		if pr := thr.RejectProbability(); pr < 0.9 || throttled == 0 {
			t.Fatalf("after 40 POSTs answered 503: reject probability %.3f, %d throttled; want the throttle rejecting (p > 0.9)", pr, throttled)
		}
	})
	t.Run("TokenBucket", func(t *testing.T) {
		bucket := retry.NewTokenBucket(10, 0.1)
		p := fast
		p.Budget = bucket
		rt := NewTransport(srv.Client().Transport, p)
		for range 40 {
			if err := post(rt); err != nil {
				t.Fatal(err)
			}
		}
		if tok := bucket.Tokens(); tok != 0 {
			t.Fatalf("after 40 POSTs answered 503 the bucket holds %v tokens, want 0 (drained)", tok)
		}
	})
}
