package httpretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/backoffkit/retry"
)

// TestResponseWithErrorIsClosed: a base RoundTripper that returns a
// response and an error (net/http's Client ignores such a response): the
// transport closes that response's body, on every attempt.
func TestResponseWithErrorIsClosed(t *testing.T) {
	var bodies []*closeCounter
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		b := &closeCounter{Reader: strings.NewReader("lost")}
		bodies = append(bodies, b)
		resp := response(r, 200, "")
		resp.Body = b
		return resp, errors.New("connection reset by peer (and a response)")
	})
	p := fast
	p.Attempts = 3
	req, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
	if _, err := NewTransport(base, p, RetryAllErrors()).RoundTrip(req); err == nil {
		t.Fatal("no error")
	}
	if len(bodies) != 3 {
		t.Fatalf("%d attempts, want 3", len(bodies))
	}
	for i, b := range bodies {
		if n := b.closed.Load(); n != 1 {
			t.Errorf("attempt %d: its response body was closed %d times, want 1", i+1, n)
		}
	}
}

// panicky returns a Policy whose Observer panics with "observer" on events
// of kind k.
func panicky(k retry.EventKind) retry.Policy {
	p := fast
	p.Observer = func(_ context.Context, e retry.Event) {
		if e.Kind == k {
			panic("observer")
		}
	}
	return p
}

// roundTripPanic runs rt.RoundTrip(req) and returns what it panicked with.
func roundTripPanic(rt http.RoundTripper, req *http.Request) (v any) {
	defer func() { v = recover() }()
	rt.RoundTrip(req)
	return nil
}

// TestObserverPanicClosesBodies: an Observer that panics leaves nothing of
// the call open: the retryable response it was told of, the next
// attempt's request body (from GetBody), the caller's request body, the
// successful response the caller never gets; the panic goes on unchanged.
func TestObserverPanicClosesBodies(t *testing.T) {
	t.Run("retry: the 503 and GetBody's body", func(t *testing.T) {
		resp503 := &closeCounter{Reader: strings.NewReader("busy")}
		first := &closeCounter{Reader: strings.NewReader("{}")}
		var next []*closeCounter
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			r.Body.Close() // as net/http does
			resp := response(r, 503, "")
			resp.Body = resp503
			return resp, nil
		})
		req, _ := http.NewRequest(http.MethodPut, "https://example.com/", nil)
		req.Body = first
		req.GetBody = func() (io.ReadCloser, error) {
			b := &closeCounter{Reader: strings.NewReader("{}")}
			next = append(next, b)
			return b, nil
		}
		if v := roundTripPanic(NewTransport(base, panicky(retry.EventRetry)), req); v != "observer" {
			t.Fatalf("recovered %v, want the observer's panic", v)
		}
		if n := resp503.closed.Load(); n != 1 {
			t.Errorf("the 503's body was closed %d times, want 1", n)
		}
		if len(next) != 1 || next[0].closed.Load() != 1 || first.closed.Load() != 1 {
			t.Errorf("GetBody called %d times; the request bodies closed %d times (first) and %v (next), want once each", len(next), first.closed.Load(), next)
		}
	})
	t.Run("retry: the caller's streamed body", func(t *testing.T) {
		body := &closeCounter{Reader: strings.NewReader("{}")}
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			r.Body.Close() // untouched: net/http when the dial failed
			return nil, refusedErr()
		})
		req, _ := http.NewRequest(http.MethodPost, "https://example.com/", nil)
		req.Body = body // no GetBody, not buffered: streamed
		if v := roundTripPanic(NewTransport(base, panicky(retry.EventRetry), MaxBufferedBody(0)), req); v != "observer" {
			t.Fatalf("recovered %v, want the observer's panic", v)
		}
		if n := body.closed.Load(); n != 1 {
			t.Errorf("the caller's body was closed %d times, want 1", n)
		}
	})
	t.Run("success: the response nobody gets", func(t *testing.T) {
		ok := &closeCounter{Reader: strings.NewReader("ok")}
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			resp := response(r, 200, "")
			resp.Body = ok
			return resp, nil
		})
		req, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
		if v := roundTripPanic(NewTransport(base, panicky(retry.EventSuccess)), req); v != "observer" {
			t.Fatalf("recovered %v, want the observer's panic", v)
		}
		if n := ok.closed.Load(); n != 1 {
			t.Errorf("the 200's body was closed %d times, want 1", n)
		}
	})
}

// refusedErr is a connection refused, as the dialer reports it.
func refusedErr() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}
