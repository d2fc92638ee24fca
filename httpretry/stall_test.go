package httpretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
)

// ChaosOnPipe starts a chaos server configured by cfg on a new in-memory
// pipe (it replaces cfg.Listener), so that it runs in t's synctest bubble
// when t is a bubble's, and returns it with a transport to it that keeps up
// to idle connections alive. Both are closed when the test ends, the
// transport's idle connections first. A cfg that chaos.Start refuses fails
// the test. It is exported for the package's external tests
// (chaos_hints_test.go).
func ChaosOnPipe(t *testing.T, cfg chaos.Config, idle int) (*chaos.Server, *http.Transport) {
	t.Helper()
	cfg.Listener = chaos.NewPipeListener()
	s, err := chaos.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Transport(idle)
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.Close()
	})
	return s, tr
}

// stallServer starts, in the current synctest bubble, a chaos server on a
// pipe whose attempts get faults[n-1] (the last one repeated) for attempt n,
// and returns it with a transport to it; both are closed when the test ends.
func stallServer(t *testing.T, faults ...chaos.Fault) (*chaos.Server, *http.Transport) {
	t.Helper()
	return ChaosOnPipe(t, chaos.Config{StallMax: time.Hour, RetryAfter: 30 * time.Second, Decide: inTurn(faults...)}, 4)
}

// inTurn returns a chaos Decide that gives attempt n faults[n-1], the last
// one repeated.
func inTurn(faults ...chaos.Fault) func(string, int) chaos.Fault {
	return func(_ string, attempt int) chaos.Fault { return faults[min(attempt, len(faults))-1] }
}

// attemptTimes is an Observer that notes when each retry event happened.
type attemptTimes struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
	ev    []retry.Event
}

func (a *attemptTimes) observe(_ context.Context, e retry.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at = append(a.at, time.Since(a.start))
	a.ev = append(a.ev, e)
}

// TestStalledRetryableBodyDoesNotHoldTheRetry: a 503 whose headers arrive
// with half of a RetryInfo body, then nothing, must not hold the retry back
// until the server gives up (an hour here): the peek for RetryInfo waits at
// most maxBodyWait, the connection is closed (not reused), and the retry
// follows after the backoff. In virtual time the retry happens at exactly
// maxBodyWait + 1 s and the attempt count is 2; the bubble checks that no
// goroutine is left behind.
func TestStalledRetryableBodyDoesNotHoldTheRetry(t *testing.T) {
	testkit.InBubbleOverHTTP1And2(t, func(t *testing.T, h2 bool) {
		s, base := ChaosOnPipe(t, chaos.Config{
			StallMax: time.Hour, RetryAfter: 30 * time.Second, HTTP2: h2, Decide: inTurn(chaos.StallStatus, chaos.None),
		}, 4)
		at := &attemptTimes{start: time.Now()}
		rt := NewTransport(base, retry.Policy{Jitter: retry.Zero, Observer: at.observe})
		resp := getX(t, rt)
		if _, err := chaos.ReadChecked(resp); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d, body error %v", resp.StatusCode, err)
		}
		took := time.Since(at.start)
		if want := maxBodyWait + time.Second; took != want || s.Hits("x") != 2 {
			t.Fatalf("took %v and %d attempts; want %v (the peek bound and the 1 s backoff) and 2", took, s.Hits("x"), want)
		}
		var ae *AttemptError
		if len(at.ev) != 2 || at.ev[0].Kind != retry.EventRetry || !errors.As(at.ev[0].Err, &ae) || ae.Status != 503 || ae.HintSource != "" {
			t.Fatalf("events %+v: want a retry after the 503 (no hint: its body never came), then a success", at.ev)
		}
		if at.ev[1].Kind != retry.EventSuccess || at.ev[1].Attempt != 2 {
			t.Fatalf("last event %+v, want success on attempt 2", at.ev[1])
		}
		if !h2 && s.Stats().Conns != 2 {
			t.Errorf("%d connections over HTTP/1.1: the stalled one must be closed, not reused", s.Stats().Conns)
		}
	})
}

// getX sends GET http://chaos/x, of request ID "x", through rt; an error
// fails t.
func getX(t *testing.T, rt http.RoundTripper) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://chaos/x", nil)
	req.Header.Set(chaos.HeaderID, "x")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestStalledPeekBoundedByAttemptTimeout: the peek never waits past the
// attempt's own deadline, even when that is shorter than maxBodyWait.
func TestStalledPeekBoundedByAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, base := stallServer(t, chaos.StallStatus, chaos.None)
		start := time.Now()
		rt := NewTransport(base, retry.Policy{Jitter: retry.Zero}, WithAttemptTimeout(300*time.Millisecond))
		resp := getX(t, rt)
		resp.Body.Close()
		if took, want := time.Since(start), 300*time.Millisecond+time.Second; took != want || s.Hits("x") != 2 {
			t.Fatalf("took %v, %d attempts; want %v and 2", took, s.Hits("x"), want)
		}
	})
}

// TestStalledBodyAttemptCount: every attempt answered 503 with a stalled
// body: the transport makes all its attempts, each retry bounded, and hands
// the last 503 over (its body is the caller's to read).
func TestStalledBodyAttemptCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, base := stallServer(t, chaos.StallStatus)
		ev := newEvents()
		start := time.Now()
		rt := NewTransport(base, retry.Policy{Attempts: 3, Jitter: retry.Zero, Observer: ev.Observe})
		resp := getX(t, rt)
		resp.Body.Close()
		// Two bounded peeks, waits of 1 s and 2 s; the last answer is not peeked.
		if took, want := time.Since(start), 2*maxBodyWait+3*time.Second; took != want || s.Hits("x") != 3 || resp.StatusCode != 503 {
			t.Fatalf("took %v, %d attempts, status %d; want %v, 3, 503", took, s.Hits("x"), resp.StatusCode, want)
		}
		if e := ev.Last(); e.Kind != retry.EventGiveUp || e.Attempt != 3 || e.Reason != retry.ReasonAttempts {
			t.Fatalf("last event %+v, want a give-up after 3 attempts", e)
		}
	})
}

// stalledDrainHandler answers the first request 503 with Retry-After: 0 (so
// its body is not peeked: the hint is in the header) and a 64 KiB body of
// which it sends 1 KiB, then waits until the client leaves; later requests
// get 200 "ok". It counts connections.
type stalledDrainHandler struct {
	n, conns atomic.Int32
}

func (h *stalledDrainHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.n.Add(1) > 1 {
		io.WriteString(w, "ok")
		return
	}
	w.Header().Set("Retry-After", "0")
	w.Header().Set("Content-Length", strconv.Itoa(64<<10))
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, strings.Repeat("x", 1<<10))
	http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

// TestStalledDrainDoesNotHoldTheRetry: draining a discarded 503 whose body
// stalls (over a real net/http connection on a pipe) is cut after
// maxBodyWait; its connection is closed, not reused; the retry follows.
func TestStalledDrainDoesNotHoldTheRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &stalledDrainHandler{}
		ln := chaos.NewPipeListener()
		srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				h.conns.Add(1)
			}
		}}
		go srv.Serve(ln)
		defer srv.Close()
		base := &http.Transport{DialContext: ln.DialContext}
		defer base.CloseIdleConnections()
		start := time.Now()
		rt := NewTransport(base, retry.Policy{Jitter: retry.Zero})
		req, _ := http.NewRequest(http.MethodGet, "http://pipe/", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); body != "ok" {
			t.Fatalf("body %q", body)
		}
		// The 1 s backoff (Retry-After 0 is below it), then the bounded drain.
		if took, want := time.Since(start), time.Second+maxBodyWait; took != want || h.n.Load() != 2 {
			t.Fatalf("took %v, %d requests; want %v and 2", took, h.n.Load(), want)
		}
		if c := h.conns.Load(); c != 2 {
			t.Fatalf("%d connections: the stalled one must be closed, not reused", c)
		}
	})
}

// blockingBody is a response body whose Read blocks until Close.
type blockingBody struct {
	once   sync.Once
	closed chan struct{}
	n      atomic.Int32 // Close calls
}

func newBlockingBody() *blockingBody { return &blockingBody{closed: make(chan struct{})} }

func (b *blockingBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *blockingBody) Close() error {
	b.n.Add(1)
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestStalledBodyCustomTransport: a base RoundTripper that does not watch
// the request's context while its body is read: the bound still holds
// (the body is closed), for the peek and for the drain, and the caller's
// cancellation ends a drain at once.
func TestStalledBodyCustomTransport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header []string
		cancel time.Duration // cancel the caller's context after this, 0 never
		want   time.Duration
	}{
		{"peek", []string{"Content-Type", "application/json"}, 0, maxBodyWait + time.Second},
		{"drain", []string{"Retry-After", "0"}, 0, time.Second + maxBodyWait},
		{"drain cancelled", []string{"Retry-After", "0"}, time.Second + 100*time.Millisecond, time.Second + 100*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bodies := []*blockingBody{newBlockingBody(), newBlockingBody()}
				var calls []time.Time
				rt := NewTransport(sequence(&calls,
					func(r *http.Request) (*http.Response, error) {
						resp := response(r, 503, "", tc.header...)
						resp.Body = bodies[0]
						return resp, nil
					},
					func(r *http.Request) (*http.Response, error) {
						resp := response(r, 503, "", tc.header...)
						resp.Body = bodies[1]
						return resp, nil
					},
					reply(200, "ok")), retry.Policy{Jitter: retry.Zero, MaxDelay: time.Second})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.cancel > 0 {
					time.AfterFunc(tc.cancel, cancel)
				}
				start := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://example.com/", nil)
				resp, err := rt.RoundTrip(req)
				if tc.cancel > 0 {
					if !errors.Is(err, context.Canceled) || time.Since(start) != tc.want {
						t.Fatalf("err %v after %v, want the cancellation at %v", err, time.Since(start), tc.want)
					}
					if bodies[0].n.Load() == 0 {
						t.Fatal("the stalled body was not closed")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if len(calls) != 2 && len(calls) != 3 {
					t.Fatalf("%d attempts", len(calls))
				}
				if got := calls[1].Sub(calls[0]); got != tc.want {
					t.Fatalf("the second attempt came %v after the first, want %v", got, tc.want)
				}
				if bodies[0].n.Load() == 0 {
					t.Fatal("the stalled body was never closed")
				}
			})
		})
	}
}

// TestStalledBodyClosedOnce: a body the bound closed is never closed again
// (when the peek stalls, or when the caller's context ended before the
// drain), and one that did not stall is closed exactly once.
func TestStalledBodyClosedOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		header  []string
		stalled bool
	}{
		{"peek stalled", []string{"Content-Type", "application/json"}, true},
		{"drain stalled", []string{"Retry-After", "0"}, true},
		{"drain complete", []string{"Retry-After", "0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBlockingBody()
				if !tc.stalled {
					b.Close()
					b.n.Store(0)
				}
				var calls []time.Time
				rt := NewTransport(sequence(&calls,
					func(r *http.Request) (*http.Response, error) {
						resp := response(r, 503, "", tc.header...)
						resp.Body = b
						return resp, nil
					},
					reply(200, "ok")), retry.Policy{Jitter: retry.Zero})
				resp := get(t, rt, "https://example.com/")
				readAll(t, resp)
				// A stalled body is closed in the background, after the
				// loop went on (a Close may wait for the read): wait for
				// that goroutine (closed 0 times seen once in 240 runs).
				synctest.Wait()
				if n := b.n.Load(); n != 1 {
					t.Fatalf("the 503's body was closed %d times, want 1", n)
				}
			})
		})
	}
}

// TestPeekToEOFKeepsTheHint: with an attempt deadline, reading a RetryInfo
// body to its end ends the attempt's context (the transport's own cancel
// at EOF); that must not count as a stall that drops the hint. Repeated,
// since it was a race between the read and the context's watcher.
func TestPeekToEOFKeepsTheHint(t *testing.T) {
	const body = `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`
	for _, p := range []retry.Policy{{AttemptTimeout: time.Minute, Jitter: retry.Zero}, {Deadline: time.Hour, Jitter: retry.Zero}} {
		for i := range 200 {
			synctest.Test(t, func(t *testing.T) {
				var calls []time.Time
				rt := NewTransport(sequence(&calls, reply(429, body, "Content-Type", "application/json"), reply(200, "ok")), p)
				readAll(t, get(t, rt, "https://example.com/"))
				if len(calls) != 2 || calls[1].Sub(calls[0]) != 3*time.Second {
					t.Fatalf("run %d: %d attempts, %v apart; want 2, 3s apart (the hint)", i, len(calls), calls[len(calls)-1].Sub(calls[0]))
				}
			})
		}
	}
}
