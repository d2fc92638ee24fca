package httpretry

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/testkit"
)

// TestMaxBufferedBodyMaxInt64: the largest limit buffers the body like any
// other (reading one byte more than the limit must not overflow into
// reading nothing): every attempt sends it whole.
func TestMaxBufferedBodyMaxInt64(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(r.Body)
			got = append(got, string(b))
			if len(got) == 1 {
				return response(r, 503, "busy"), nil
			}
			return response(r, 200, "ok"), nil
		}), fast, MaxBufferedBody(math.MaxInt64))
		if rt.Err() != nil {
			t.Fatal(rt.Err())
		}
		req, _ := http.NewRequest(http.MethodPut, "https://example.com/o", opaqueBody{strings.NewReader("hello world")})
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(got) != 2 || got[0] != "hello world" || got[1] != "hello world" {
			t.Fatalf("the attempts sent %q, want the body twice", got)
		}
	})
}

// TestRequestBodyFailureIsClassBody: an attempt that fails because the
// request body does (a read error, io.ErrUnexpectedEOF, a length other than
// its ContentLength) is ClassBody and never retried, not even with
// RetryAllErrors: GetBody is never asked for a replay. The error is a
// *retry.Error whose chain holds the body's error, over HTTP/1.1 and
// HTTP/2. (A body shorter than its ContentLength is HTTP/1.1's error only:
// HTTP/2 sends it, with END_STREAM, and leaves the server to complain.)
func TestRequestBodyFailureIsClassBody(t *testing.T) {
	boom := errors.New("disk read failed")
	bodies := []struct {
		name string
		body func() io.ReadCloser
		cl   int64
		is   error // what the error must match, if anything
		h1   bool  // an error of HTTP/1.1 only
	}{
		{"read error", func() io.ReadCloser { return io.NopCloser(io.MultiReader(strings.NewReader("part"), errReader{boom})) }, 100, boom, false},
		{"read error, unknown length", func() io.ReadCloser {
			return io.NopCloser(io.MultiReader(strings.NewReader("part"), errReader{boom}))
		}, 0, boom, false},
		{"unexpected EOF", func() io.ReadCloser {
			return io.NopCloser(io.MultiReader(strings.NewReader("part"), errReader{io.ErrUnexpectedEOF}))
		}, 100, io.ErrUnexpectedEOF, false},
		{"shorter than its ContentLength", func() io.ReadCloser { return io.NopCloser(strings.NewReader("hello world")) }, 100, nil, true},
		{"longer than its ContentLength", func() io.ReadCloser { return io.NopCloser(strings.NewReader("hello world")) }, 5, nil, false},
		{"opaque, shorter than its ContentLength", func() io.ReadCloser {
			return io.NopCloser(opaqueBody{strings.NewReader("hello world")})
		}, 100, nil, true},
	}
	for _, h2 := range []bool{false, true} {
		// The server answers only once the client gave up on the request:
		// a body longer than its ContentLength is complete for an HTTP/1.1
		// server after ContentLength bytes, and net/http returns an answer
		// that comes before its own write error.
		stop := make(chan struct{})
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}))
		testkit.Start(t, srv, h2)
		for _, b := range bodies {
			for _, all := range []bool{false, true} {
				if h2 && b.h1 {
					continue
				}
				name := b.name
				if h2 {
					name += "/HTTP2"
				}
				if all {
					name += "/RetryAllErrors"
				}
				t.Run(name, func(t *testing.T) {
					var opts []Option
					if all {
						opts = append(opts, RetryAllErrors())
					}
					ev := newEvents()
					p := fast
					p.Observer = ev.Observe
					rt := NewTransport(srv.Client().Transport, p, opts...)
					var gets atomic.Int32
					req, _ := http.NewRequest(http.MethodPut, srv.URL+"/o?key=SECRET", b.body())
					req.ContentLength = b.cl
					req.GetBody = func() (io.ReadCloser, error) { gets.Add(1); return b.body(), nil }
					_, err := rt.RoundTrip(req)
					var (
						re *retry.Error
						ae *AttemptError
					)
					if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != retry.ReasonPermanent || !errors.As(err, &ae) {
						t.Fatalf("err %v (%T), want a *retry.Error after 1 attempt, permanent, holding an *AttemptError", err, err)
					}
					if ae.Class != ClassBody || (b.is != nil && !errors.Is(err, b.is)) || strings.Contains(err.Error(), "SECRET") {
						t.Errorf("class %q, err %v; want %q matching %v", ae.Class, err, ClassBody, b.is)
					}
					if gets.Load() != 0 || len(ev.Of(retry.EventRetry)) != 0 {
						t.Errorf("GetBody called %d times, %d retries; want none", gets.Load(), len(ev.Of(retry.EventRetry)))
					}
				})
			}
		}
		close(stop)
	}
}

// TestRequestBodyClosedIsNotItsFailure: a read that fails because the
// transport closed the body (the request failed for another reason) is
// not the body's failure: the attempt keeps the transport's class and is
// retried.
func TestRequestBodyClosedIsNotItsFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ev := newEvents()
		p := fast
		p.Observer = ev.Observe
		n := 0
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			if n == 1 {
				r.Body.Close()
				r.Body.Read(make([]byte, 1)) // fails: closed
				return nil, resetErr
			}
			io.ReadAll(r.Body)
			return response(r, 200, "ok"), nil
		}), p)
		req, _ := http.NewRequest(http.MethodPut, "https://example.com/o", io.NopCloser(opaqueBody{strings.NewReader("hello")}))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(opaqueBody{strings.NewReader("hello")}), nil }
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var ae *AttemptError
		if r := ev.Of(retry.EventRetry); len(r) != 1 || !errors.As(r[0].Err, &ae) || ae.Class != ClassReset {
			t.Fatalf("retries %+v, want one after a reset", r)
		}
	})
}

// TestGetBodyFailureKeepsTheAttemptError: when GetBody fails for the retry
// of an attempt that failed, the call ends at once (no wait for a retry
// that cannot be sent) with that attempt's error in the chain, next to
// ErrBodyNotReplayable and GetBody's error.
func TestGetBodyFailureKeepsTheAttemptError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("cannot reopen the file")
		var calls []time.Time
		ev := newEvents()
		rt := NewTransport(sequence(&calls, func(*http.Request) (*http.Response, error) { return nil, resetErr }),
			retry.Policy{Observer: ev.Observe})
		req, _ := http.NewRequest(http.MethodPut, "https://example.com/o", strings.NewReader("x"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, boom }
		start := time.Now()
		_, err := rt.RoundTrip(req)
		var (
			re *retry.Error
			ae *AttemptError
		)
		if !errors.As(err, &re) || re.Attempts != 1 || !errors.As(err, &ae) || ae.Class != ClassReset {
			t.Fatalf("err %v, want a *retry.Error after 1 attempt holding the reset", err)
		}
		for _, want := range []error{syscall.ECONNRESET, ErrBodyNotReplayable, boom} {
			if !errors.Is(err, want) {
				t.Errorf("err %v does not match %v", err, want)
			}
		}
		if len(calls) != 1 || time.Since(start) != 0 || len(ev.Of(retry.EventRetry)) != 0 {
			t.Errorf("%d attempts, %v, %d retry events; want 1 attempt, no wait, no retry", len(calls), time.Since(start), len(ev.Of(retry.EventRetry)))
		}
	})
}

// TestGetBodyNilBody: a GetBody that returns no body and no error cannot
// replay the body: the retry is skipped, never sent without its body.
func TestGetBodyNilBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bodies []string
		ev := newEvents()
		p := fast
		p.Observer = ev.Observe
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			var b []byte
			if r.Body != nil {
				b, _ = io.ReadAll(r.Body)
			}
			bodies = append(bodies, string(b))
			return response(r, 503, "busy"), nil
		}), p)
		req, _ := http.NewRequest(http.MethodPut, "https://example.com/o", strings.NewReader("payload"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, nil }
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(bodies) != 1 || bodies[0] != "payload" || !errors.Is(ev.Last().Err, ErrBodyNotReplayable) {
			t.Fatalf("bodies sent %q, last event %+v; want the payload once, then a skipped retry", bodies, ev.Last())
		}
	})
}

// TestGiveUpIsRetryError: every error RoundTrip returns after an attempt is
// a *retry.Error (errors.As), whatever stopped the loop, and errors.Is
// still reaches the causes.
func TestGiveUpIsRetryError(t *testing.T) {
	weird := errors.New("something unheard of")
	tlsErr := &tls.CertificateVerificationError{Err: errors.New("bad certificate")}
	for _, tc := range []struct {
		name     string
		method   string
		err      error
		ctx      func(context.Context) context.Context
		attempts int
		reason   retry.Reason
		class    string
		is       []error
	}{
		{"GET reset, attempts used up", http.MethodGet, resetErr, nil, 3, retry.ReasonAttempts, ClassReset, []error{syscall.ECONNRESET}},
		{"POST reset, not idempotent", http.MethodPost, resetErr, nil, 1, retry.ReasonPermanent, ClassReset, []error{syscall.ECONNRESET, ErrNotIdempotent}},
		{"GET reset, NotIdempotent", http.MethodGet, resetErr, NotIdempotent, 1, retry.ReasonPermanent, ClassReset, []error{ErrNotIdempotent}},
		{"an error of no known class", http.MethodGet, weird, nil, 1, retry.ReasonPermanent, ClassOther, []error{weird}},
		{"a TLS error", http.MethodGet, tlsErr, nil, 1, retry.ReasonPermanent, ClassTLS, []error{tlsErr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := fast
				p.Attempts = 3
				var calls []time.Time
				rt := NewTransport(sequence(&calls, func(*http.Request) (*http.Response, error) { return nil, tc.err }), p)
				ctx := context.Background()
				if tc.ctx != nil {
					ctx = tc.ctx(ctx)
				}
				req, _ := http.NewRequestWithContext(ctx, tc.method, "https://example.com/o", strings.NewReader("x"))
				_, err := rt.RoundTrip(req)
				var (
					re *retry.Error
					ae *AttemptError
				)
				if !errors.As(err, &re) || re.Attempts != tc.attempts || re.Reason != tc.reason || len(calls) != tc.attempts {
					t.Fatalf("err %v (%T) after %d attempts; want a *retry.Error, %d attempts, %v", err, err, len(calls), tc.attempts, tc.reason)
				}
				if !errors.As(err, &ae) || ae.Class != tc.class {
					t.Errorf("AttemptError %+v, want class %q", ae, tc.class)
				}
				for _, want := range tc.is {
					if !errors.Is(err, want) {
						t.Errorf("err %v does not match %v", err, want)
					}
				}
			})
		})
	}
}

// TestGiveUpElapsed: the *retry.Error made of an error the loop returns as
// is counts the whole call, the first attempt included.
func TestGiveUpElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := NewTransport(rtFunc(func(*http.Request) (*http.Response, error) {
			time.Sleep(3 * time.Second) // a slow handshake
			return nil, &tls.CertificateVerificationError{Err: errors.New("bad certificate")}
		}), fast)
		req, _ := http.NewRequest(http.MethodGet, "https://example.com/", nil)
		_, err := rt.RoundTrip(req)
		var re *retry.Error
		if !errors.As(err, &re) || re.Elapsed != 3*time.Second || re.Attempts != 1 {
			t.Fatalf("err %v (%+v), want a *retry.Error after 1 attempt in 3s", err, re)
		}
	})
}
