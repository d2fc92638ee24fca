package httpretry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

// lateDone is a context whose deadline is dl while its Done closes a
// moment later (when the embedded context ends): the moment between a
// deadline and the timer that ends the context, which a busy machine
// stretches, and in which the transport's own timers may fire first.
type lateDone struct {
	context.Context
	dl time.Time
}

func (c lateDone) Deadline() (time.Time, bool) { return c.dl, true }

// TestCallerDeadlineReasonIsDeterministic: when the caller's deadline ends
// an attempt (a stalled stream peek, a stalled RetryInfo peek, a transport
// error at the deadline), the give-up's reason is the caller's context,
// whichever timer fired first: never a wait "that would end after the
// deadline" (0s, -1ms away), and a peek the transport cut is not blamed on
// the connection it closed (review 3, finding 9). In virtual time, the
// context ends 1 ms after its deadline.
func TestCallerDeadlineReasonIsDeterministic(t *testing.T) {
	const dl = 400 * time.Millisecond
	for _, tc := range []struct {
		name     string
		base     func(*http.Request) (*http.Response, error)
		lastDL   bool // Last is the context's deadline error
		lastCode int  // else Last is an AttemptError with this status (0: any error)
	}{
		{"stream peek stalls", func(r *http.Request) (*http.Response, error) {
			resp := response(r, 200, "", "Content-Type", ctSSE)
			resp.Body, resp.ContentLength = newBlockingBody(), -1
			return resp, nil
		}, true, 0},
		{"RetryInfo peek stalls", func(r *http.Request) (*http.Response, error) {
			resp := response(r, 503, "", "Content-Type", "application/json")
			resp.Body, resp.ContentLength = newBlockingBody(), -1
			return resp, nil
		}, false, 503},
		{"transport error at the deadline", func(r *http.Request) (*http.Response, error) {
			time.Sleep(dl)
			return nil, resetErr
		}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				inner, cancel := context.WithTimeout(context.Background(), dl+time.Millisecond)
				defer cancel()
				ctx := lateDone{inner, time.Now().Add(dl)}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, streamURL, nil)
				resp, err := NewTransport(rtFunc(tc.base), fast).RoundTrip(req)
				if resp != nil {
					resp.Body.Close()
					t.Fatalf("a response (%d), want the caller's deadline", resp.StatusCode)
				}
				var re *retry.Error
				if !errors.As(err, &re) || re.Reason != retry.ReasonContext || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err %v, want a give-up on the caller's context (its deadline)", err)
				}
				if msg := err.Error(); strings.Contains(msg, "would end after") || strings.Contains(msg, "closed") {
					t.Errorf("message %q", msg)
				}
				var ae *AttemptError
				switch {
				case tc.lastDL:
					if re.Last != context.DeadlineExceeded {
						t.Errorf("Last %v, want context.DeadlineExceeded", re.Last)
					}
				case tc.lastCode != 0:
					if !errors.As(re.Last, &ae) || ae.Status != tc.lastCode {
						t.Errorf("Last %v, want the %d's AttemptError", re.Last, tc.lastCode)
					}
				}
			})
		})
	}
}
