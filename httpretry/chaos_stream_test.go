package httpretry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
)

// TestChaosStreams sends a seeded mix of stream requests (SSE as Gemini's
// alt=sse, NDJSON, streamed JSON arrays; GETs and POSTs marked Idempotent,
// 1 to 40 events) through httpretry to a chaos server that faults half of
// the attempts with every fault, the stream faults included (an error
// event first, a reset before or after the first event, a slow first
// event), over HTTP/1.1 and HTTP/2 on in-memory pipes in virtual time,
// with Google's waits and a 10 s attempt timeout. It checks:
//
//   - no caller ever receives an event twice, out of order, or with one
//     missing (chaos.ReadStream; a stream that ends cleanly has them all);
//   - a stream whose first event may have reached the caller is never sent
//     again: it is the last attempt the server saw;
//   - a stream that failed before its first event (an error event, a reset,
//     a stall past the attempt timeout) reaches the caller only when no
//     attempt is left;
//   - a stream request that ends without its events ends visibly: a read
//     error, the error event of its last attempt, a retryable status, or a
//     RoundTrip error;
//   - no goroutine is left (the bubble) and no connection stays open.
func TestChaosStreams(t *testing.T) {
	testkit.InBubbleOverHTTP1And2(t, func(t *testing.T, h2 bool) { chaosStreams(t, h2, 600) })
}

func chaosStreams(t *testing.T, h2 bool, n int) {
	const (
		seed     = 13
		workers  = 8
		attempts = 6
	)
	s, err := chaos.Start(chaos.Config{
		Seed: seed, FaultRate: 0.5, HTTP2: h2, Listener: chaos.NewPipeListener(),
		RetryAfter: 2 * time.Second, StallMax: 15 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	base := s.Transport(workers)
	rt := httpretry.NewTransport(base, retry.Policy{Attempts: attempts, AttemptTimeout: 10 * time.Second, Rand: retry.NewRand(seed)})
	formats := []string{chaos.StreamSSE, chaos.StreamNDJSON, chaos.StreamJSON}

	type outcome struct {
		res      chaos.StreamResult
		readErr  error // ReadStream's own error (corruption)
		rtErr    error
		status   int
		events   int
		complete bool
	}
	results := make([]outcome, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				id := "s" + strconv.Itoa(i)
				events := 1 + i*7%40
				method := http.MethodGet
				ctx := context.Background()
				if i%2 == 1 {
					method, ctx = http.MethodPost, httpretry.Idempotent(ctx) // generateContent
				}
				req, _ := http.NewRequestWithContext(ctx, method, "http://chaos/v1/m:streamGenerateContent", strings.NewReader(`{"contents":[]}`))
				req.Header.Set(chaos.HeaderID, id)
				req.Header.Set(chaos.HeaderStream, formats[i%3])
				req.Header.Set(chaos.HeaderEvents, strconv.Itoa(events))
				o := outcome{events: events}
				resp, err := rt.RoundTrip(req)
				if err != nil {
					o.rtErr = err
				} else if o.status = resp.StatusCode; o.status != http.StatusOK {
					resp.Body.Close()
				} else {
					o.res, o.readErr = chaos.ReadStream(resp)
					o.complete = o.readErr == nil && o.res.Err == nil && !o.res.ErrorEvent && len(o.res.Seqs) == events
				}
				results[i] = o
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Second)
	if open, err := s.CloseClientConns(wctx, base); err != nil {
		t.Errorf("%d connections still open", open)
	}
	cancel()
	st := s.Stats()
	s.Close()

	var (
		complete, cut, errorEvents, statuses, rtErrs, retried int
		violations                                            []string
	)
	bad := func(format string, args ...any) {
		if len(violations) < 20 {
			violations = append(violations, fmt.Sprintf(format, args...))
		}
	}
	for i, o := range results {
		id := "s" + strconv.Itoa(i)
		rec, _ := s.Record(id)
		if len(rec.Attempts) > 1 {
			retried++
		}
		for k, a := range rec.Attempts[:max(len(rec.Attempts)-1, 0)] {
			if a.Events > 0 {
				bad("%s: attempt %d (%v) delivered %d events, yet attempt %d followed", id, k+1, a.Fault, a.Events, k+2)
			}
		}
		switch {
		case o.readErr != nil:
			bad("%s: %v", id, o.readErr)
		case o.complete:
			complete++
		case o.rtErr != nil:
			rtErrs++
		case o.status != http.StatusOK:
			statuses++
		case o.res.ErrorEvent:
			errorEvents++
			if last := rec.Attempts[len(rec.Attempts)-1]; last.Fault != chaos.StreamErrorFirst {
				bad("%s: an error event, but the last attempt's fault was %v", id, last.Fault)
			}
			if len(rec.Attempts) < attempts {
				bad("%s: the caller got an error event after %d of %d attempts: it was not retried", id, len(rec.Attempts), attempts)
			}
		case o.res.Err != nil:
			cut++
			if len(o.res.Seqs) == 0 && len(rec.Attempts) < attempts {
				bad("%s: the stream failed before its first event after %d of %d attempts: it was not retried", id, len(rec.Attempts), attempts)
			}
		default:
			bad("%s: ended cleanly with %d of %d events", id, len(o.res.Seqs), o.events)
		}
		if o.rtErr != nil && !errors.As(o.rtErr, new(*retry.Error)) && !errors.As(o.rtErr, new(*httpretry.AttemptError)) {
			bad("%s: RoundTrip error %v of an unexpected type", id, o.rtErr)
		}
	}
	for _, v := range violations {
		t.Error(v)
	}
	t.Logf("%d stream requests (HTTP/2 %v): %d complete, %d cut after their start (visible), %d ended on an error event, %d on a retryable status, %d RoundTrip errors; %d retried; server: %d attempts, faults %v",
		n, h2, complete, cut, errorEvents, statuses, rtErrs, retried, st.Requests, st.Faults)
	if complete < n/2 {
		t.Errorf("only %d of %d streams complete", complete, n)
	}
}
