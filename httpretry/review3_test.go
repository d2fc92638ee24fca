package httpretry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

// Tests for review 3 of streams and httpretry (findings 6 to 9); each
// failed on the code before its fix.

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

// TestRedactTextCredentials: credentials a server may quote in its error
// text, outside any URL, are hidden by RedactText; the words around them
// and text that only looks alike are kept.
func TestRedactTextCredentials(t *testing.T) {
	const key = "AIzaSyA0123456789abcdefghijklmnopq_-XYZ" // the shape of a real key: 39 characters
	tests := []struct{ in, want string }{
		{"API key " + key + " not valid", "API key REDACTED not valid"},
		{"key AIzaSyTOPSECRET0123456789 expired", "key REDACTED expired"}, // shorter than a real key: hidden too
		{"AIza is a prefix", "AIza is a prefix"},
		{"token Bearer ya29.a0AfB_TOPSECRET-3== rejected", "token Bearer REDACTED rejected"},
		{"got bearer eyJhbGciOi.eyJzdWIi.SflKxw", "got bearer REDACTED"},
		{"x-goog-api-key: TOPSECRET5 is not allowed", "x-goog-api-key: REDACTED is not allowed"},
		{"X-Goog-Api-Key:TOPSECRET5", "X-Goog-Api-Key:REDACTED"},
		{`{"x-goog-api-key": "TOPSECRET5", "a": 1}`, `{"x-goog-api-key": "REDACTED", "a": 1}`},
		{"authorization: Bearer ya29.TOPSECRET3, then", "authorization: REDACTED, then"},
		{"Authorization: Basic dXNlcjpwYXNz", "Authorization: REDACTED"},
		{"Proxy-Authorization=TOPSECRET6 used", "Proxy-Authorization=REDACTED used"},
		{"header x-api-key: K1; api-key: K2", "header x-api-key: REDACTED; api-key: REDACTED"},
		{"Cookie: sid=S1; theme=S2\nnext line", "Cookie: REDACTED\nnext line"},
		{"the authorization header is missing", "the authorization header is missing"},
		{"a key: value pair", "a key: value pair"},
		{"x-goog-api-key: REDACTED", "x-goog-api-key: REDACTED"}, // stable when applied twice
	}
	for _, tt := range tests {
		got := RedactText(tt.in)
		if got != tt.want {
			t.Errorf("RedactText(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
		if again := RedactText(got); again != got {
			t.Errorf("RedactText is not stable on %q: %q", got, again)
		}
	}
	// A transport error's text, in an AttemptError's message.
	u, _ := url.Parse("https://example.com/v1")
	c := &call{req: &http.Request{Method: "GET", URL: u}, ep: -1}
	msg := c.attemptError(u, 0, ClassOther, errors.New("proxy: x-goog-api-key: TOPSECRET1 refused")).Error()
	if strings.Contains(msg, "TOPSECRET") || !strings.Contains(msg, "x-goog-api-key: REDACTED refused") {
		t.Errorf("AttemptError message %q", msg)
	}
}

// TestStreamErrorTextRedacted: a server's error event that quotes an API
// key, a bearer token and credential headers (in its message and its
// status): none of them reaches the AttemptError, the *retry.Error, the
// Observer's events or the transport's log.
func TestStreamErrorTextRedacted(t *testing.T) {
	const (
		key = "AIzaSyA0123456789abcdefghijklmnopq_-XYZ"
		msg = "API key " + key + " and Bearer ya29.TOPSECRET3 and x-goog-api-key: TOPSECRET5 and authorization: Basic TOPSECRET6"
	)
	ev := `{"error":{"code":503,"status":"UNAVAILABLE Bearer TOPSECRET7","message":"` + msg + `",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3600s"}]}}`
	var texts []string
	// A retry (the hint ignored), then a give-up (the hint past the deadline).
	for _, p := range []retry.Policy{{Attempts: 2, MaxRetryAfter: retry.Zero, InitialDelay: retry.Zero, Jitter: retry.Zero}, {Deadline: time.Minute}} {
		var (
			evs events
			log strings.Builder
		)
		p.Observer = evs.observe
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			return streamReply(ctSSE, nil, sseOf(ev))(r)
		}), p, WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		req, _ := http.NewRequest(http.MethodGet, streamURL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(evs.list) == 0 || evs.list[0].Err == nil {
			t.Fatalf("events %+v, want a retry or a give-up with the error first", evs.list)
		}
		texts = append(texts, evs.list[0].Err.Error(), log.String())
	}
	if !strings.Contains(texts[0], "API key REDACTED and Bearer REDACTED and x-goog-api-key: REDACTED") {
		t.Errorf("the message lost its words: %q", texts[0])
	}
	for _, s := range texts {
		for _, secret := range []string{"AIzaSy", "TOPSECRET"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q in %q", secret, s)
			}
		}
	}
	if !strings.Contains(texts[0], "API key REDACTED and Bearer REDACTED") {
		t.Errorf("the message lost its words: %q", texts[0])
	}
}

// TestRetryAfterDateAgainstServerClock: a Retry-After date is in the
// server's clock, which the response's Date header gives: the wait is
// their difference, whatever this machine's clock says. Without a valid
// Date, the local clock is used. In virtual time (the bubble's clock
// starts at 2000-01-01 00:00:00 UTC).
func TestRetryAfterDateAgainstServerClock(t *testing.T) {
	for _, tt := range []struct {
		name     string
		skew     time.Duration // the server's clock minus ours
		date     string        // the Date header; "" for the server's clock, "-" for none
		after    time.Duration // Retry-After: the server's clock plus this
		wantWait time.Duration // 0: no retry (the loop gives up at once)
	}{
		{"server 1h ahead", time.Hour, "", 3 * time.Second, 3 * time.Second},
		{"server 1h behind", -time.Hour, "", 3 * time.Second, 3 * time.Second},
		{"same clock", 0, "", 3 * time.Second, 3 * time.Second},
		{"date in the past for the server", time.Hour, "", -5 * time.Second, time.Second}, // the backoff only
		{"no Date: the local clock", 0, "-", 5 * time.Second, 5 * time.Second},
		{"invalid Date: the local clock", 0, "yesterday", 5 * time.Second, 5 * time.Second},
		{"no Date, server ahead: the local clock (past the deadline)", time.Hour, "-", 3 * time.Second, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				server := time.Now().Add(tt.skew)
				kv := []string{"Retry-After", server.Add(tt.after).UTC().Format(http.TimeFormat)}
				switch tt.date {
				case "":
					kv = append(kv, "Date", server.UTC().Format(http.TimeFormat))
				case "-":
				default:
					kv = append(kv, "Date", tt.date)
				}
				var calls []time.Time
				rt := NewTransport(sequence(&calls, reply(503, "", kv...), reply(200, "ok")),
					retry.Policy{Deadline: 30 * time.Second, Jitter: retry.Zero})
				resp := get(t, rt, "https://example.com/")
				resp.Body.Close()
				if tt.wantWait == 0 {
					if len(calls) != 1 || resp.StatusCode != 503 {
						t.Fatalf("%d attempts, status %d; want the 503 at once", len(calls), resp.StatusCode)
					}
					return
				}
				if len(calls) != 2 || calls[1].Sub(calls[0]) != tt.wantWait {
					t.Fatalf("%d attempts, %v apart; want 2, %v apart", len(calls), calls[len(calls)-1].Sub(calls[0]), tt.wantWait)
				}
			})
		})
	}
}
