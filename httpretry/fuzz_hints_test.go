package httpretry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/chaos"
)

// Fuzz targets for httpretry's parsers and its retry decision. Their seed
// corpora are under testdata/fuzz; scripts/fuzz.sh runs each for a bounded
// time.

func FuzzParseRetryAfter(f *testing.F) {
	for _, v := range []string{"0", "1", "120", "-5", "1000000000", "99999999999999999999999", "soon",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Wednesday, 21-Oct-15 07:28:00 GMT", "Wed Oct 21 07:28:00 2015",
		" 7 ", "", "1.5", "+3", "0x10"} {
		f.Add(v, int64(1445412480)) // 2015-10-21 07:28:00 UTC
	}
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		now := time.Unix(nowUnix%(1<<40), 0)
		d, ok := httpretry.ParseRetryAfter(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %v, false: want 0 when not ok", v, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v: negative wait", v, d)
		}
		s := strings.TrimSpace(v)
		if s != "" && strings.Trim(s, "0123456789") == "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err == nil && n <= uint64(math.MaxInt64/int64(time.Second)) && d != time.Duration(n)*time.Second {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %ds", v, d, n)
			}
			return
		}
		at, err := http.ParseTime(s)
		if err != nil {
			t.Fatalf("ParseRetryAfter(%q) accepted a value that is neither digits nor an HTTP-date", v)
		}
		if want := max(at.Sub(now), 0); d != want {
			t.Fatalf("ParseRetryAfter(%q, %v) = %v, want %v", v, now, d, want)
		}
	})
}

func FuzzParseRetryInfo(f *testing.F) {
	for _, b := range []string{
		`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"25s"}]}}`,
		`[{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}]`,
		`{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.000000001s"}]}`,
		`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1000000000s"}]}}`,
		`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-3s"}]}}`,
		`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"soo`,
		`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED"}]}}`,
		`null`, `[]`, `{}`, `"x"`, ``,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, ok := httpretry.ParseRetryInfo(body)
		if ok && d < 0 {
			t.Fatalf("ParseRetryInfo(%q) = %v: negative wait", body, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryInfo(%q) = %v, false: want 0 when not ok", body, d)
		}
	})
}

// FuzzRetryInfoRoundTrip builds a valid RetryInfo body from a delay and
// checks that the parser returns exactly that delay, in each body shape.
func FuzzRetryInfoRoundTrip(f *testing.F) {
	f.Add(uint32(25), uint32(0), uint8(0))
	f.Add(uint32(1), uint32(500000000), uint8(1))
	f.Add(uint32(0), uint32(1), uint8(2))
	f.Add(uint32(1000000000), uint32(999999999), uint8(0))
	f.Fuzz(func(t *testing.T, secs, nanos uint32, shape uint8) {
		nanos %= 1e9
		want := time.Duration(secs)*time.Second + time.Duration(nanos)
		delay := strconv.FormatUint(uint64(secs), 10)
		if nanos != 0 {
			delay += strings.TrimRight(fmt.Sprintf(".%09d", nanos), "0")
		}
		detail := `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + delay + `s"}`
		var body string
		switch shape % 3 {
		case 0:
			body = `{"error":{"code":429,"details":[` + detail + `]}}`
		case 1:
			body = `[{"error":{"code":429,"details":[` + detail + `]}}]`
		default:
			body = `{"details":[` + detail + `]}`
		}
		d, ok := httpretry.ParseRetryInfo([]byte(body))
		if !ok || d != want {
			t.Fatalf("ParseRetryInfo(%s) = %v, %v; want %v", body, d, ok, want)
		}
	})
}

// FuzzTransportDecision drives the transport with a base that always
// answers the same fuzzed response (status, Retry-After, body) to a fuzzed
// method, with or without an Idempotency-Key, in virtual time. Whatever the
// input: a request that is not idempotent is sent once, unless refused (a
// 429, or a 503 with a hint: then it is retried like any other); a status
// outside the policy's codes is not retried; no wait exceeds the hint cap;
// and the caller gets the last response with its body unchanged, never an
// error.
func FuzzTransportDecision(f *testing.F) {
	f.Add("GET", 503, false, "", []byte("unavailable"), false)
	f.Add("POST", 429, false, "1", []byte(`{"error":{}}`), true)
	f.Add("POST", 429, true, "1000000000", []byte(""), true)
	f.Add("PATCH", 500, true, "Wed, 21 Oct 2015 07:28:00 GMT", []byte("x"), false)
	f.Add("PUT", 429, false, "", []byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"99999s"}]}}`), true)
	f.Add("DELETE", 404, false, "3", []byte("not found"), false)
	f.Add("POST", 503, false, "2", []byte("busy"), false)
	f.Add("POST", 503, false, "soon", []byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`), true)
	f.Add("PATCH", 503, false, "soon", []byte("busy"), false)
	f.Add("POST", 500, false, "2", []byte("oops"), false)
	f.Fuzz(func(t *testing.T, method string, status int, key bool, retryAfter string, body []byte, jsonCT bool) {
		if status < 100 || status > 599 {
			return
		}
		const (
			attempts = 3
			capHint  = 5 * time.Second
		)
		synctest.Test(t, func(t *testing.T) {
			var calls atomic.Int32
			base := fuzzRT(func(r *http.Request) (*http.Response, error) {
				calls.Add(1)
				if r.Body != nil {
					io.Copy(io.Discard, r.Body)
					r.Body.Close()
				}
				h := http.Header{}
				if retryAfter != "" {
					h.Set("Retry-After", retryAfter)
				}
				if jsonCT {
					h.Set("Content-Type", "application/json")
				}
				return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body)),
					ContentLength: int64(len(body)), Request: r}, nil
			})
			p := retry.Policy{Attempts: attempts, InitialDelay: time.Second, MaxDelay: 2 * time.Second,
				Jitter: retry.Zero, MaxRetryAfter: capHint}
			req, err := http.NewRequestWithContext(context.Background(), method, "http://fuzz.example/x", strings.NewReader("payload"))
			if err != nil {
				return // not a valid method
			}
			if key {
				req.Header.Set("Idempotency-Key", "k")
			}
			method = req.Method // "" means GET
			start := time.Now()
			// Stream peeking off: a 2xx JSON array whose first element is an
			// error would be retried (FuzzStreamPeek covers that).
			resp, err := httpretry.NewTransport(base, p, httpretry.WithStreamPeek(false)).RoundTrip(req)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("%s %d: error %v, want the response", method, status, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, body) || resp.StatusCode != status {
				t.Fatalf("%s %d: got status %d body %q (%v), want the response unchanged", method, status, resp.StatusCode, got, err)
			}
			n := int(calls.Load())
			retryable := p.RetriesStatus(status)
			idem := key || method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "TRACE" || method == "PUT" || method == "DELETE"
			// A refusal, a 429 or a 503 with a hint (a Retry-After that
			// parses, else a RetryInfo in the body's first 16 KiB), is
			// retried whatever the method.
			_, ra := httpretry.ParseRetryAfter(retryAfter, time.Now())
			_, ri := httpretry.ParseRetryInfo(body[:min(len(body), 16<<10)])
			refused := status == http.StatusTooManyRequests || (status == http.StatusServiceUnavailable && (ra || ri))
			switch {
			case !retryable && n != 1:
				t.Fatalf("%s %d: sent %d times, status not retryable", method, status, n)
			case !idem && !refused && n != 1:
				t.Fatalf("%s %d without key: sent %d times", method, status, n)
			case retryable && (idem || refused) && n != attempts:
				t.Fatalf("%s %d (refused: %v): sent %d times, want %d", method, status, refused, n, attempts)
			}
			if max := time.Duration(n-1) * capHint; took > max {
				t.Fatalf("%s %d (Retry-After %q): waited %v, more than %d × the %v cap", method, status, retryAfter, took, n-1, capHint)
			}
		})
	})
}

type fuzzRT func(*http.Request) (*http.Response, error)

func (f fuzzRT) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzStreamPeek sends a GET whose first answer is a 200 stream of fuzzed
// bytes (SSE, NDJSON, JSON, or not a stream), delivered in reads of a fuzzed
// size, maybe ending with a reset; the second answer is a good stream. It
// checks that the caller gets one of the two byte for byte (the first with
// its error after it), that the decision does not depend on how the bytes
// were cut into reads, and that a retry happens only when chaos.Events, an
// independent parser, finds no complete first event, or finds one that is
// an error object.
func FuzzStreamPeek(f *testing.F) {
	f.Add(uint8(0), []byte("data: {\"error\":{\"code\":429}}\r\n\r\n"), uint8(3), false)
	f.Add(uint8(0), []byte("data: {\"seq\":0}\r\n\r\ndata: {\"error\":{\"code\":503}}\r\n\r\n"), uint8(1), true)
	f.Add(uint8(0), []byte(": ping\n\nevent: x\ndata: [1,\ndata: 2]\n\n"), uint8(0), false)
	f.Add(uint8(1), []byte("\n{\"error\":{\"status\":\"UNAVAILABLE\"}}\n{\"a\":1}\n"), uint8(2), false)
	f.Add(uint8(1), []byte("{\"a\":1}"), uint8(7), true)
	f.Add(uint8(2), []byte("[{\"error\":{\"code\":8,\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"3s\"}]}}]"), uint8(5), false)
	f.Add(uint8(2), []byte(" [ \"a\\\"]\" , 1 ]"), uint8(0), false)
	f.Add(uint8(2), []byte("{\"error\":{\"code\":503}}"), uint8(0), false)
	f.Add(uint8(3), []byte("data: {\"error\":{\"code\":429}}\n\n"), uint8(0), false)
	f.Add(uint8(0), []byte("\ufeffdata: {\"error\":{\"code\":429}}\r\r"), uint8(1), false)
	f.Add(uint8(2), []byte(""), uint8(0), false)
	f.Fuzz(func(t *testing.T, kind uint8, body []byte, chunk uint8, reset bool) {
		if len(body) > 100<<10 {
			return
		}
		ct := [...]string{"text/event-stream", "application/x-ndjson", "application/json", "text/plain"}[kind%4]
		const good = "data: {\"seq\":0}\r\n\r\n"
		errReset := errors.New("connection reset by peer (fuzz)")
		run := func(size int) (got []byte, readErr error, calls int) {
			synctest.Test(t, func(t *testing.T) {
				base := fuzzRT(func(r *http.Request) (*http.Response, error) {
					calls++
					h := http.Header{"Content-Type": {ct}}
					if calls > 1 {
						return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader(good)), ContentLength: -1, Request: r}, nil
					}
					var rd io.Reader = bytes.NewReader(body)
					if size > 0 {
						rd = &chunkReader{r: rd, n: size}
					}
					if reset {
						rd = io.MultiReader(rd, iotest.ErrReader(errReset))
					}
					return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(rd), ContentLength: -1, Request: r}, nil
				})
				p := retry.Policy{Attempts: 2, InitialDelay: time.Millisecond, Jitter: retry.Zero, MaxRetryAfter: time.Second}
				req, _ := http.NewRequest(http.MethodGet, "http://fuzz.example/v1/m:streamGenerateContent", nil) // a stream path: JSON is peeked
				resp, err := httpretry.NewTransport(base, p).RoundTrip(req)
				if err != nil {
					t.Fatalf("error %v, want a response", err)
				}
				got, readErr = io.ReadAll(resp.Body)
				resp.Body.Close()
			})
			return got, readErr, calls
		}
		got, readErr, calls := run(0)
		switch calls {
		case 1:
			if !bytes.Equal(got, body) || (readErr != nil) != reset {
				t.Fatalf("not retried: got %q (err %v), want the first body %q (reset %v)", got, readErr, body, reset)
			}
		case 2:
			if string(got) != good || readErr != nil {
				t.Fatalf("retried: got %q (err %v), want the second body", got, readErr)
			}
			if evs, ok := chaos.Events(ct, body, !reset); ok && len(evs) > 0 && !isErrorObject(evs[0]) {
				t.Fatalf("%s %q: retried although its first event %q is complete and not an error", ct, body, evs[0])
			}
		default:
			t.Fatalf("%d attempts", calls)
		}
		if _, _, c := run(int(chunk%16) + 1); c != calls {
			t.Fatalf("%s %q: %d attempts when read at once, %d in reads of %d bytes", ct, body, calls, c, chunk%16+1)
		}
	})
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// isErrorObject reports whether a JSON event has an "error" member.
func isErrorObject(ev []byte) bool {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(ev, &e) == nil && e.Error != nil
}
