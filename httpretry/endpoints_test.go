package httpretry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/testkit"
)

// withClock injects the clock the endpoint cool-down reads.
func withClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// refusedURL returns a loopback URL where nothing listens.
func refusedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func doReq(t *testing.T, rt http.RoundTripper, method, url string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader("payload"))
	req.Header.Set("X-Test", "kept")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	return resp
}

const apiURL = "https://aiplatform.example.invalid/v1/models/m:generateContent?alt=sse&key=SECRET"

func TestEndpointRotation(t *testing.T) {
	a := testkit.NewScript(t, testkit.Status(503, "A busy"))
	b := testkit.NewScript(t, testkit.Status(200, "B ok"))
	ev := newEvents()
	p := fast
	p.Observer = ev.Observe
	rt := NewTransport(nil, p, WithEndpoints([]string{a.URL, b.URL}, time.Minute))
	resp := doReq(t, rt, "GET", apiURL)
	if resp.StatusCode != 200 || a.Hits() != 1 || b.Hits() != 1 {
		t.Fatalf("got %d; hits A %d B %d, want 200 and 1/1", resp.StatusCode, a.Hits(), b.Hits())
	}
	s := b.Requests()[0]
	if s.Path != "/v1/models/m:generateContent" || s.RawQuery != "alt=sse&key=SECRET" || s.Header.Get("X-Test") != "kept" ||
		s.Body != "payload" || s.Host != strings.TrimPrefix(b.URL, "http://") {
		t.Fatalf("B saw %+v", s)
	}
	var ae *AttemptError
	r := ev.Of(retry.EventRetry)
	if len(r) != 1 || !errors.As(r[0].Err, &ae) || ae.Endpoint != a.URL || ae.Status != 503 ||
		ae.URL != a.URL+"/v1/models/m:generateContent?alt=sse&key=REDACTED" {
		t.Fatalf("retry events %+v (%+v)", r, ae)
	}
}

func TestEndpointStaysOnOtherErrors(t *testing.T) {
	a := testkit.NewScript(t, testkit.Status(500, ""), testkit.Status(200, "A ok"))
	b := testkit.NewScript(t, testkit.Status(200, "B ok"))
	rt := NewTransport(nil, fast, WithEndpoints([]string{a.URL, b.URL}, time.Minute))
	doReq(t, rt, "GET", apiURL)
	if a.Hits() != 2 || b.Hits() != 0 {
		t.Fatalf("hits A %d B %d, want 2/0: a 500 is not an overload signal", a.Hits(), b.Hits())
	}
}

func TestEndpointRefusedMoves(t *testing.T) {
	dead := refusedURL(t)
	b := testkit.NewScript(t, testkit.Status(200, "B ok"))
	ev := newEvents()
	p := fast
	p.Observer = ev.Observe
	rt := NewTransport(nil, p, WithEndpoints([]string{dead, b.URL}, time.Minute))
	// A POST too: connection refused proves it was never sent.
	resp := doReq(t, rt, "POST", apiURL)
	var ae *AttemptError
	r := ev.Of(retry.EventRetry)
	if resp.StatusCode != 200 || b.Hits() != 1 || len(r) != 1 || !errors.As(r[0].Err, &ae) || ae.Class != ClassRefused || ae.Endpoint != dead {
		t.Fatalf("got %d, B hits %d, retries %+v", resp.StatusCode, b.Hits(), r)
	}
}

// TestEndpointNotIdempotentStays: a POST that is not idempotent (not a
// method of Google's rule) answered 503 without a hint is not retried: it
// stays on the first endpoint. A 429 is a refusal: the retry moves on.
func TestEndpointNotIdempotentStays(t *testing.T) {
	const orders = "https://api.example.invalid/v1/orders"
	a := testkit.NewScript(t, testkit.Status(503, "A busy"))
	b := testkit.NewScript(t, testkit.Status(200, "B ok"))
	rt := NewTransport(nil, fast, WithEndpoints([]string{a.URL, b.URL}, time.Minute))
	if resp := doReq(t, rt, "POST", orders); resp.StatusCode != 503 || a.Hits() != 1 || b.Hits() != 0 {
		t.Fatalf("got %d, hits A %d B %d, want A's 503 and 1/0", resp.StatusCode, a.Hits(), b.Hits())
	}
	c := testkit.NewScript(t, testkit.Status(429, "C quota"))
	rt = NewTransport(nil, fast, WithEndpoints([]string{c.URL, b.URL}, time.Minute))
	if resp := doReq(t, rt, "POST", orders); resp.StatusCode != 200 || c.Hits() != 1 || b.Hits() != 1 {
		t.Fatalf("got %d, hits C %d B %d, want B's 200 and 1/1", resp.StatusCode, c.Hits(), b.Hits())
	}
}

func TestEndpointCooldown(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := testkit.NewScript(t, testkit.Status(429, "A quota"))
	b := testkit.NewScript(t, testkit.Status(200, "B ok"))
	rt := NewTransport(nil, fast, WithEndpoints([]string{a.URL, b.URL}, time.Minute), withClock(clock.now))

	doReq(t, rt, "GET", apiURL) // A: 429 (1 in a row) -> B
	doReq(t, rt, "GET", apiURL) // A: 429 (2 in a row: cools down) -> B
	if a.Hits() != 2 || b.Hits() != 2 {
		t.Fatalf("hits A %d B %d, want 2/2", a.Hits(), b.Hits())
	}
	doReq(t, rt, "GET", apiURL) // starts at B: A is cooling down
	clock.advance(59 * time.Second)
	doReq(t, rt, "GET", apiURL) // still cooling
	if a.Hits() != 2 || b.Hits() != 4 {
		t.Fatalf("during the cool-down: hits A %d B %d, want 2/4", a.Hits(), b.Hits())
	}
	clock.advance(time.Second)
	doReq(t, rt, "GET", apiURL) // A is tried again
	if a.Hits() != 3 || b.Hits() != 5 {
		t.Fatalf("after the cool-down: hits A %d B %d, want 3/5", a.Hits(), b.Hits())
	}
}

// TestEndpointCountResets: overload signals must be consecutive; a good
// response in between resets the count.
func TestEndpointCountResets(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := testkit.NewScript(t, testkit.Status(503, ""), testkit.Status(200, "A ok"), testkit.Status(503, ""), testkit.Status(200, "A ok"))
	b := testkit.NewScript(t, testkit.Status(200, "B ok"))
	rt := NewTransport(nil, fast, WithEndpoints([]string{a.URL, b.URL}, time.Minute), withClock(clock.now))
	doReq(t, rt, "GET", apiURL) // A 503 -> B
	doReq(t, rt, "GET", apiURL) // A 200: count reset
	doReq(t, rt, "GET", apiURL) // A 503 (1 in a row) -> B
	doReq(t, rt, "GET", apiURL) // A 200: A was not cooling
	if a.Hits() != 4 || b.Hits() != 2 {
		t.Fatalf("hits A %d B %d, want 4/2", a.Hits(), b.Hits())
	}
}

func TestEndpointWrap(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := testkit.NewScript(t, testkit.Status(503, "A"))
	b := testkit.NewScript(t, testkit.Status(503, "B"))
	p := fast
	p.Attempts = 4
	rt := NewTransport(nil, p, WithEndpoints([]string{a.URL, b.URL}, time.Minute), withClock(clock.now))
	// A, B, A (A cools down), B (B cools down): the last 503 is returned.
	if resp := doReq(t, rt, "GET", apiURL); resp.StatusCode != 503 || a.Hits() != 2 || b.Hits() != 2 {
		t.Fatalf("got %d, hits A %d B %d, want 503 and 2/2", resp.StatusCode, a.Hits(), b.Hits())
	}
}

func TestEndpointAllCoolingStartsAtFirst(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	eps := newEndpoints([]string{"http://a", "http://b", "http://c"}, time.Minute, clock.now)
	for i := range 3 {
		eps.record(i, true, true)
		eps.record(i, true, true)
	}
	if got := eps.start(); got != 0 {
		t.Fatalf("start() = %d with all cooling, want 0", got)
	}
	if got := eps.next(1); got != 2 {
		t.Fatalf("next(1) = %d with all cooling, want 2", got)
	}
	clock.advance(time.Minute)
	eps.record(0, true, true)
	eps.record(0, true, true) // only a cools down again
	if got := eps.start(); got != 1 {
		t.Fatalf("start() = %d, want 1", got)
	}
	if got := eps.next(2); got != 1 {
		t.Fatalf("next(2) = %d, want 1 (0 is cooling)", got)
	}
	if got := eps.next(1); got != 2 {
		t.Fatalf("next(1) = %d, want 2", got)
	}
	eps.record(1, false, false) // a transport error that is no overload: no change
	eps.record(2, true, true)
	eps.record(2, true, true)
	if got := eps.next(1); got != 1 {
		t.Fatalf("next(1) = %d, want 1, the only endpoint not cooling", got)
	}
}

var _ = context.Background
