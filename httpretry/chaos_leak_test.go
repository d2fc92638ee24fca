package httpretry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
)

// TestChaosNoLeakInBubble runs a seeded mix of 400 requests through httpretry
// with Google's default waits (1 s, 2 s, 4 s ... in virtual time) and a 10 s
// attempt timeout against a chaos server on an in-memory pipe that faults
// half of the attempts with every fault, over HTTP/1.1 and HTTP/2. Some
// callers cancel their context mid-request. Once every response is closed
// and the idle connections too, the server must hold no connection, and
// synctest.Test fails the test if any goroutine of the transport, the
// server or the caller is left blocked.
func TestChaosNoLeakInBubble(t *testing.T) {
	testkit.InBubbleOverHTTP1And2(t, func(t *testing.T, h2 bool) {
		const n, workers = 400, 8
		s, err := chaos.Start(chaos.Config{
			Seed: 7, FaultRate: 0.5, Dedupe: true, HTTP2: h2,
			RetryAfter: 3 * time.Second, StallMax: time.Minute, HugeBody: 64 << 10,
			Listener: chaos.NewPipeListener(),
		})
		if err != nil {
			t.Fatal(err)
		}
		base := s.Transport(workers)
		rt := httpretry.NewTransport(base, retry.Policy{AttemptTimeout: 10 * time.Second, Rand: retry.NewRand(7)},
			httpretry.AddIdempotencyKey())
		reqs := chaosMix(7, n)
		var (
			wg       sync.WaitGroup
			next     = make(chan int)
			mu       sync.Mutex
			canceled int
			ok       int
		)
		for range workers {
			wg.Go(func() {
				for i := range next {
					q := reqs[i]
					q.body.Len = min(q.body.Len, 64<<10)
					q.respLen = min(q.respLen, 64<<10)
					ctx, cancel := context.WithCancel(context.Background())
					if i%10 == 0 {
						time.AfterFunc(1500*time.Millisecond, cancel) // mid-wait or mid-attempt
					}
					r := chaosDo(ctx, t, rt, rt, "http://chaos", q)
					cancel()
					mu.Lock()
					if ctx.Err() != nil && i%10 == 0 {
						canceled++
					}
					if r.err == nil && r.bodyErr == nil && r.corrupt == nil {
						ok++
					}
					mu.Unlock()
					if r.corrupt != nil {
						t.Errorf("%s: %v", q.id, r.corrupt)
					}
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		base.CloseIdleConnections()
		// Over HTTP/2 a connection can still be busy when
		// CloseIdleConnections runs (a GOAWAY'd one the server closes
		// after its 1 s grace, or one whose cancelled stream is still
		// being settled); net/http then closes it at the transport's
		// IdleConnTimeout (1 min). Wait for that in virtual time, and
		// no longer: a connection still open after it is a leak.
		closing := time.Now()
		wctx, wcancel := context.WithTimeout(context.Background(), time.Minute+time.Second)
		open, err := s.WaitConns(wctx, 0)
		wcancel()
		if err != nil {
			t.Errorf("%d server connections open past the idle timeout after every response was closed", open)
		}
		closedIn := time.Since(closing)
		st := s.Stats()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if st.BodyMismatches != 0 {
			t.Errorf("%d bodies received corrupted", st.BodyMismatches)
		}
		t.Logf("%d requests (%d cancelled by their caller, %d complete successes), %d attempts, %d faults, %d connections; %d open %v (virtual) after closing the idle ones",
			n, canceled, ok, st.Requests, chaosTotal(st.Faults), st.Conns, open, closedIn)
	})
}

func chaosTotal(m map[chaos.Fault]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
