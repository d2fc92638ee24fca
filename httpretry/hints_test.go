package httpretry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"120", 120 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"1000000000", 1e9 * time.Second, true},
		{"99999999999999999999999", time.Duration(math.MaxInt64), true},
		{"9223372037", time.Duration(math.MaxInt64), true},        // just past the largest Duration in seconds
		{"Mon, 30 Nov 2026 12:00:30 GMT", 30 * time.Second, true}, // RFC 1123 (note: weekday not checked)
		{"Monday, 30-Nov-26 12:01:00 GMT", time.Minute, true},     // RFC 850
		{"Mon Nov 30 12:00:05 2026", 5 * time.Second, true},       // ANSI C asctime
		{"Mon, 30 Nov 2026 11:00:00 GMT", 0, true},                // in the past
		{"", 0, false}, {"soon", 0, false}, {"-5", 0, false}, {"+5", 0, false},
		{"1.5", 0, false}, {"5s", 0, false}, {"2026-11-30T12:00:30Z", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseRetryInfo(t *testing.T) {
	spec, err := os.ReadFile("testdata/google-error-429.json")
	if err != nil {
		t.Fatal(err)
	}
	ri := func(delay string) string {
		return `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + delay + `"}]}}`
	}
	tests := []struct {
		name, body string
		want       time.Duration
		ok         bool
	}{
		{"spec file", string(spec), 25 * time.Second, true},
		{"fraction", ri("1.5s"), 1500 * time.Millisecond, true},
		{"nanos", ri("0.000000001s"), 1, true},
		{"zero", ri("0s"), 0, true},
		{"array", "[" + ri("3s") + "]", 3 * time.Second, true},
		{"top-level details", `{"code":8,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"4s"}]}`, 4 * time.Second, true},
		{"huge", ri("99999999999999s"), time.Duration(math.MaxInt64), true},
		{"negative", ri("-3s"), 0, false},
		{"minutes", ri("1m"), 0, false},
		{"milliseconds", ri("5ms"), 0, false},
		{"too precise", ri("0.0000000001s"), 0, false},
		{"no retry info", `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"}]}}`, 0, false},
		{"other type", `{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","retryDelay":"3s"}]}}`, 0, false},
		{"truncated", string(spec[:len(spec)/2]), 0, false},
		{"not json", "<html>busy</html>", 0, false},
		{"empty", "", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryInfo([]byte(tt.body))
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: ParseRetryInfo = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// sequence returns an in-memory RoundTripper that answers with the n-th
// response of resps (repeating the last), recording the virtual time of each
// attempt.
func sequence(calls *[]time.Time, resps ...func(*http.Request) (*http.Response, error)) http.RoundTripper {
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		n := len(*calls)
		*calls = append(*calls, time.Now())
		return resps[min(n, len(resps)-1)](r)
	})
}

func reply(code int, body string, kv ...string) func(*http.Request) (*http.Response, error) {
	return func(r *http.Request) (*http.Response, error) { return response(r, code, body, kv...), nil }
}

// TestHints runs in virtual time: each case's waits are measured between
// attempts on the bubble's clock and checked against the events.
func TestHints(t *testing.T) {
	spec, err := os.ReadFile("testdata/google-error-429.json")
	if err != nil {
		t.Fatal(err)
	}
	// The bubble's clock starts at 2000-01-01 00:00:00 UTC.
	date := time.Date(2000, 1, 1, 0, 0, 30, 0, time.UTC).Format(http.TimeFormat)
	tests := []struct {
		name     string
		first    func(*http.Request) (*http.Response, error)
		policy   retry.Policy
		wantWait time.Duration
		wantHint time.Duration
		source   string
	}{
		{"no hint", reply(503, ""), retry.Policy{}, time.Second, 0, ""},
		{"seconds", reply(429, "", "Retry-After", "7"), retry.Policy{}, 7 * time.Second, 7 * time.Second, HintRetryAfter},
		{"seconds below the backoff", reply(503, "", "Retry-After", "0"), retry.Policy{}, time.Second, 0, HintRetryAfter},
		{"date", reply(503, "", "Retry-After", date), retry.Policy{}, 30 * time.Second, 30 * time.Second, HintRetryAfter},
		{"garbage", reply(503, "", "Retry-After", "tomorrow-ish"), retry.Policy{}, time.Second, 0, ""},
		{"huge capped by MaxDelay", reply(429, "", "Retry-After", "1000000000"), retry.Policy{}, 60 * time.Second, 1e9 * time.Second, HintRetryAfter},
		{"capped by MaxRetryAfter", reply(429, "", "Retry-After", "100"), retry.Policy{MaxRetryAfter: 20 * time.Second}, 20 * time.Second, 100 * time.Second, HintRetryAfter},
		{"hints ignored", reply(429, "", "Retry-After", "100"), retry.Policy{MaxRetryAfter: retry.Zero}, time.Second, 0, HintRetryAfter},
		{"on 500 too", reply(500, "", "Retry-After", "3"), retry.Policy{}, 3 * time.Second, 3 * time.Second, HintRetryAfter},
		{"retryinfo", reply(429, string(spec), "Content-Type", "application/json; charset=UTF-8"), retry.Policy{}, 25 * time.Second, 25 * time.Second, HintRetryInfo},
		{"retryinfo without content type", reply(429, string(spec)), retry.Policy{}, 25 * time.Second, 25 * time.Second, HintRetryInfo},
		{"retryinfo, content type in capitals", reply(429, string(spec), "Content-Type", "Application/JSON"), retry.Policy{}, 25 * time.Second, 25 * time.Second, HintRetryInfo},
		{"retryinfo, content type in capitals with a charset", reply(429, string(spec), "Content-Type", "APPLICATION/JSON; charset=UTF-8"), retry.Policy{}, 25 * time.Second, 25 * time.Second, HintRetryInfo},
		{"retryinfo, problem+json", reply(429, string(spec), "Content-Type", "application/problem+json"), retry.Policy{}, 25 * time.Second, 25 * time.Second, HintRetryInfo},
		{"retryinfo, json only in a parameter", reply(429, string(spec), "Content-Type", "text/plain; profile=json"), retry.Policy{}, time.Second, 0, ""},
		{"retryinfo in html ignored", reply(429, string(spec), "Content-Type", "text/html"), retry.Policy{}, time.Second, 0, ""},
		{"header wins over body", reply(429, string(spec), "Retry-After", "2"), retry.Policy{}, 2 * time.Second, 2 * time.Second, HintRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls []time.Time
				ev := newEvents()
				p := tt.policy
				p.Jitter = retry.Zero
				p.Observer = ev.Observe
				rt := NewTransport(sequence(&calls, tt.first, reply(200, "ok")), p)
				resp := get(t, rt, "https://example.com/v1/models")
				if body := readAll(t, resp); body != "ok" || len(calls) != 2 {
					t.Fatalf("got %q after %d attempts", body, len(calls))
				}
				if waited := calls[1].Sub(calls[0]); waited != tt.wantWait {
					t.Errorf("waited %v between attempts, want %v", waited, tt.wantWait)
				}
				e, ae := onlyRetry(t, ev)
				if e.Wait != tt.wantWait || (e.Hint != tt.wantHint && tt.policy.MaxRetryAfter != retry.Zero) || ae.HintSource != tt.source {
					t.Errorf("event wait %v hint %v source %q; want %v %v %q", e.Wait, e.Hint, ae.HintSource, tt.wantWait, tt.wantHint, tt.source)
				}
			})
		})
	}
}

func TestHintWithJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		rt := NewTransport(sequence(&calls, reply(429, "", "Retry-After", "7"), reply(200, "")), retry.Policy{Rand: retry.NewRand(42)})
		readAll(t, get(t, rt, "https://example.com/"))
		if w := calls[1].Sub(calls[0]); w < 7*time.Second || w >= 8*time.Second {
			t.Fatalf("waited %v, want the 7 s hint plus up to 1 s of jitter", w)
		}
	})
}

// TestHintPastDeadline: a hint that would end after the deadline stops the
// loop at once and returns the response, body intact (it was peeked).
func TestHintPastDeadline(t *testing.T) {
	spec, err := os.ReadFile("testdata/google-error-429.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, source := range []string{HintRetryAfter, HintRetryInfo} {
		t.Run(source, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls []time.Time
				ev := newEvents()
				first := reply(429, string(spec), "Content-Type", "application/json")
				if source == HintRetryAfter {
					first = reply(429, string(spec), "Retry-After", "25")
				}
				p := retry.Policy{Deadline: 20 * time.Second, Observer: ev.Observe}
				resp := get(t, NewTransport(sequence(&calls, first, reply(200, "")), p), "https://example.com/")
				if body := readAll(t, resp); resp.StatusCode != 429 || body != string(spec) || len(calls) != 1 {
					t.Fatalf("got %d (%d bytes) after %d attempts, want the 429 with its body after 1", resp.StatusCode, len(body), len(calls))
				}
				if e := ev.Last(); e.Kind != retry.EventGiveUp || e.Reason != retry.ReasonDeadline {
					t.Fatalf("last event %+v, want a give-up on the deadline", e)
				}
			})
		})
	}
}

// TestDeadlineReturnsLast503: waits of 1 s then 2 s; the second would end at
// the 3 s deadline, so the loop stops after 2 attempts and returns the last
// 503 with its body.
func TestDeadlineReturnsLast503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		ev := newEvents()
		p := retry.Policy{Deadline: 3 * time.Second, Jitter: retry.Zero, Observer: ev.Observe}
		resp := get(t, NewTransport(sequence(&calls, reply(503, "busy 1"), reply(503, "busy 2"), reply(200, "")), p), "https://example.com/")
		if body := readAll(t, resp); resp.StatusCode != 503 || body != "busy 2" || len(calls) != 2 {
			t.Fatalf("got %d %q after %d attempts, want the second 503", resp.StatusCode, body, len(calls))
		}
		if e := ev.Last(); e.Kind != retry.EventGiveUp || e.Reason != retry.ReasonDeadline {
			t.Fatalf("last event %+v", e)
		}
	})
}

// countingBody is a response body that counts Close calls.
type countingBody struct {
	io.Reader
	closed *atomic.Int32
}

func (b countingBody) Close() error { b.closed.Add(1); return nil }

// TestDiscardedBodiesClosed: every response the caller does not get is
// closed exactly once, and the one it gets is left open.
func TestDiscardedBodiesClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var closed [4]atomic.Int32
		n := 0
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			code := 503
			if n == 3 {
				code = 200
			}
			resp := response(r, code, strings.Repeat("x", 100<<10))
			resp.Body = countingBody{resp.Body, &closed[n]}
			n++
			return resp, nil
		}), retry.Policy{Attempts: 4})
		resp := get(t, rt, "https://example.com/")
		for i := range 3 {
			if c := closed[i].Load(); c != 1 {
				t.Errorf("response %d closed %d times, want 1", i+1, c)
			}
		}
		if closed[3].Load() != 0 {
			t.Fatal("the returned response was closed")
		}
		resp.Body.Close()
	})
}

func TestAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		ev := newEvents()
		hang := func(r *http.Request) (*http.Response, error) {
			<-r.Context().Done()
			return nil, r.Context().Err()
		}
		p := retry.Policy{Jitter: retry.Zero, Observer: ev.Observe}
		rt := NewTransport(sequence(&calls, hang, reply(200, "ok")), p, WithAttemptTimeout(10*time.Second))
		resp := get(t, rt, "https://example.com/")
		if len(calls) != 2 || calls[1].Sub(calls[0]) != 11*time.Second { // 10 s timeout + 1 s backoff
			t.Fatalf("%d attempts, %v apart", len(calls), calls[len(calls)-1].Sub(calls[0]))
		}
		var ae *AttemptError
		if r := ev.Of(retry.EventRetry); len(r) != 1 || !errors.As(r[0].Err, &ae) || ae.Class != ClassTimeout {
			t.Fatalf("retry events %+v, want one timeout", r)
		}
		// The returned response's context lives until its body is closed.
		ctx := resp.Request.Context()
		if ctx.Err() != nil {
			t.Fatal("the response's context ended before its body was read")
		}
		if body := readAll(t, resp); body != "ok" {
			t.Fatalf("body %q", body)
		}
		if ctx.Err() == nil {
			t.Fatal("the attempt's context was not released when the body was closed")
		}
	})
}

// TestAttemptTimeoutBoundsBody: the attempt timeout also bounds reading the
// returned body, like http.Client.Timeout.
func TestAttemptTimeoutBoundsBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			resp := response(r, 200, "")
			resp.Body = io.NopCloser(ctxReader{r.Context()})
			return resp, nil
		}), retry.Policy{}, WithAttemptTimeout(5*time.Second))
		resp := get(t, rt, "https://example.com/")
		start := time.Now()
		_, err := io.ReadAll(resp.Body)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Fatalf("read ended after %v with %v", time.Since(start), err)
		}
		resp.Body.Close()
	})
}

// ctxReader blocks until its context ends, like a stalled stream.
type ctxReader struct{ ctx context.Context }

func (r ctxReader) Read([]byte) (int, error) { <-r.ctx.Done(); return 0, r.ctx.Err() }

// TestDeadlineDoesNotCutReturnedBody: the core cancels its attempt context
// when the attempt returns; the transport must not hand out a response tied
// to it.
func TestDeadlineDoesNotCutReturnedBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		rt := NewTransport(sequence(&calls, reply(503, ""), reply(200, "ok")), retry.Policy{Deadline: time.Minute})
		resp := get(t, rt, "https://example.com/")
		if resp.Request.Context().Err() != nil {
			t.Fatal("the response's context is already done")
		}
		if body := readAll(t, resp); body != "ok" {
			t.Fatalf("body %q", body)
		}
	})
}

func TestCallerCancel(t *testing.T) {
	t.Run("during a wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var closed atomic.Int32
			var calls []time.Time
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(500*time.Millisecond, cancel)
			busy := func(r *http.Request) (*http.Response, error) {
				resp := response(r, 503, "busy")
				resp.Body = countingBody{resp.Body, &closed}
				return resp, nil
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://example.com/", nil)
			_, err := NewTransport(sequence(&calls, busy), retry.Policy{}).RoundTrip(req)
			var re *retry.Error
			if !errors.Is(err, context.Canceled) || !errors.As(err, &re) || re.Reason != retry.ReasonContext || len(calls) != 1 {
				t.Fatalf("err = %v after %d attempts", err, len(calls))
			}
			if closed.Load() != 1 {
				t.Fatalf("the last response was closed %d times, want 1", closed.Load())
			}
		})
	})
	t.Run("during an attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var calls []time.Time
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			hang := func(r *http.Request) (*http.Response, error) {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://example.com/", nil)
			_, err := NewTransport(sequence(&calls, hang), retry.Policy{}).RoundTrip(req)
			if !errors.Is(err, context.Canceled) || len(calls) != 1 {
				t.Fatalf("err = %v after %d attempts, want context.Canceled after 1", err, len(calls))
			}
		})
	})
	t.Run("context deadline shorter than the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var calls []time.Time
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://example.com/", nil)
			resp, err := NewTransport(sequence(&calls, reply(503, "busy")), retry.Policy{}).RoundTrip(req)
			if err != nil || resp.StatusCode != 503 || len(calls) != 1 || readAll(t, resp) != "busy" {
				t.Fatalf("err = %v after %d attempts, want the 503 at once", err, len(calls))
			}
		})
	})
}

func TestThrottledFirstAttemptClosesBody(t *testing.T) {
	cc := &closeCounter{Reader: bytes.NewReader([]byte("x"))}
	req, _ := http.NewRequest("PUT", "https://example.com/", cc)
	_, err := NewTransport(rtFunc(func(*http.Request) (*http.Response, error) {
		t.Fatal("no attempt expected")
		return nil, nil
	}), retry.Policy{Throttle: refuseAll{}}).RoundTrip(req)
	if !errors.Is(err, retry.ErrThrottled) || cc.closed.Load() != 1 {
		t.Fatalf("err = %v, closed %d", err, cc.closed.Load())
	}
}

type refuseAll struct{}

func (refuseAll) Admit(bool) bool { return false }
func (refuseAll) Record(bool)     {}

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
