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
	"strconv"
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
			evs = newEvents()
			log strings.Builder
		)
		p.Observer = evs.Observe
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			return streamReply(ctSSE, nil, sseOf(ev))(r)
		}), p, WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		req, _ := http.NewRequest(http.MethodGet, streamURL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(evs.Events()) == 0 || evs.Events()[0].Err == nil {
			t.Fatalf("events %+v, want a retry or a give-up with the error first", evs.Events())
		}
		texts = append(texts, evs.Events()[0].Err.Error(), log.String())
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

// errorEvent returns an SSE event of exactly n bytes, from its data line
// to its blank line: a 503 error whose message pads it.
func errorEvent(n int) string {
	const head, tail = `data: {"error":{"code":503,"status":"UNAVAILABLE","message":"`, `"}}` + "\n\n"
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// pings returns SSE keep-alive comment lines, at least n bytes of them.
func pings(n int) string { return strings.Repeat(": ping\n", (n+6)/7) }

// TestStreamPeekBounds: the 64 KiB bound of the first event counts the
// event only, from its first data line: comments (keep-alive pings),
// retry:, id: and event: fields, blank lines and a byte order mark before
// it have a bound of their own (256 KiB). An event within both is looked
// at (an error retried); one out of either is handed over byte for byte,
// whatever the sizes of the reads.
func TestStreamPeekBounds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ct      string
		body    string
		retried bool
	}{
		// Before the fix, everything read counted: all of these but the
		// last three were handed over.
		{"64 KiB of pings, then a small error event (review 3)", ctSSE, pings(64<<10) + errorEvent(100), true},
		{"10 KiB of pings, then an error event of 64 KiB", ctSSE, pings(10<<10) + errorEvent(64<<10), true},
		{"a BOM, retry:, id:, event:, then an error event of 64 KiB", ctSSE,
			"\ufeffretry: 100\nid: 7\n\n: hello\n\nevent: error\n" + errorEvent(64<<10), true},
		{"256 KiB of pings, then an error event of 64 KiB", ctSSE, pings(256<<10-7) + errorEvent(64<<10), true},
		{"100 KiB of blank lines, then an NDJSON error line", ctNDJSON,
			strings.Repeat("\n", 100<<10) + `{"error":{"code":503,"status":"UNAVAILABLE"}}` + "\n", true},
		// Out of bounds: handed over.
		{"an error event of 64 KiB + 1 after pings", ctSSE, pings(10<<10) + errorEvent(64<<10+1), false},
		{"more than 256 KiB of pings, then an error event", ctSSE, pings(256<<10+8) + errorEvent(100), false},
		{"one comment line of 400 KiB, then an error event", ctSSE, ":" + strings.Repeat("p", 400<<10) + "\n" + errorEvent(100), false},
	} {
		for _, chunk := range []int{1 << 20, 4096, 1000} {
			t.Run(tc.name+"/reads of "+strconv.Itoa(chunk), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var chunks []string
					for b := tc.body; b != ""; b = b[min(chunk, len(b)):] {
						chunks = append(chunks, b[:min(chunk, len(b))])
					}
					var calls []time.Time
					rt := NewTransport(sequence(&calls, streamReply(tc.ct, nil, chunks...), streamReply(ctSSE, nil, sseOf(chunk1))), fast)
					got := readAll(t, get(t, rt, streamURL))
					if tc.retried {
						if len(calls) != 2 || got != sseOf(chunk1) {
							t.Fatalf("%d attempts, got %d bytes; want the error retried", len(calls), len(got))
						}
						return
					}
					if len(calls) != 1 || got != tc.body {
						t.Fatalf("%d attempts, got %d bytes (%d sent, same: %v); want the first answer byte for byte", len(calls), len(got), len(tc.body), got == tc.body)
					}
				})
			})
		}
	}
}

// TestStreamSubscriptionHandedOverAtOnce: a GET answered with a stream
// that sends keep-alive comments long before its first event (a
// subscription, quiet by design) is handed over with its headers at once,
// and the caller reads each comment as it comes (its idle watchdog can
// run); a streamed call (a POST, or a GET naming a streaming method) is
// still held until its first event, the comments with it. Before the fix
// every one of them was held until the first event (1.5 s here).
func TestStreamSubscriptionHandedOverAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		url    string
		ct     string
		held   bool
	}{
		{"GET feed, SSE", http.MethodGet, "https://example.com/v1/events", ctSSE, false},
		{"GET feed, NDJSON", http.MethodGet, "https://example.com/v1/events", ctNDJSON, false},
		{"GET streamGenerateContent", http.MethodGet, streamURL, ctSSE, true},
		{"POST", http.MethodPost, "https://example.com/v1/chat/completions", ctSSE, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pr, pw := io.Pipe()
				rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
					resp := response(r, 200, "", "Content-Type", tc.ct, "X-Request-Id", "r1")
					resp.Body, resp.ContentLength = pr, -1
					return resp, nil
				}), retry.Policy{})
				ping, first := ": ping\n\n", sseOf(chunk1)
				if tc.ct == ctNDJSON {
					ping, first = "\n", chunk1+"\n"
				}
				go func() {
					for range 15 { // every 100 ms, then the first event at 1.5 s
						io.WriteString(pw, ping)
						time.Sleep(100 * time.Millisecond)
					}
					io.WriteString(pw, first)
					pw.Close()
				}()
				start := time.Now()
				req, _ := http.NewRequestWithContext(Idempotent(context.Background()), tc.method, tc.url, nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				at := time.Since(start)
				if want := map[bool]time.Duration{false: 0, true: 1500 * time.Millisecond}[tc.held]; at != want || resp.Header.Get("X-Request-Id") != "r1" {
					t.Fatalf("the response came after %v, want %v", at, want)
				}
				if !tc.held {
					b := make([]byte, len(ping))
					if _, err := io.ReadFull(resp.Body, b); err != nil || string(b) != ping || time.Since(start) != 0 {
						t.Fatalf("first read %q (%v) at %v, want the first comment at once", b, err, time.Since(start))
					}
				}
				rest, err := io.ReadAll(resp.Body)
				if err != nil || !strings.HasSuffix(string(rest), first) || time.Since(start) != 1500*time.Millisecond {
					t.Fatalf("read %q (%v) by %v", rest, err, time.Since(start))
				}
			})
		})
	}
}

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
