package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
	"google.golang.org/genai"
)

// The stream tests run the real genai client and a real net/http Transport
// and Server, connected in memory (chaos.PipeListener), in a synctest
// bubble: every wait is a wait of virtual time, exact, and the bubble fails
// the test if a goroutine is left behind.

// streamPath is the path of streamGenerateContent for the demo's model.
const streamPath = "/v1beta/models/" + model + ":streamGenerateContent"

// pipeClient returns a genai client of the Gemini API whose requests go
// through pipeHTTPClient(t, h, p, opts...), and the buffer the transport
// logs to (JSON). Call it inside a synctest bubble.
func pipeClient(t *testing.T, h http.Handler, p retry.Policy, opts ...httpretry.Option) (*genai.Client, *testkit.Buffer) {
	t.Helper()
	hc, logs := pipeHTTPClient(t, h, p, opts...)
	c, err := newClient(context.Background(), "http://gemini.test", hc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, logs
}

// pipeHTTPClient returns the client httpretry.NewClient(p, opts...) makes,
// but over a net/http Transport connected in memory to h, and the buffer
// the transport logs to (JSON). Call it inside a synctest bubble; the
// server and connections are closed by t.Cleanup.
func pipeHTTPClient(t *testing.T, h http.Handler, p retry.Policy, opts ...httpretry.Option) (*http.Client, *testkit.Buffer) {
	t.Helper()
	ln := chaos.NewPipeListener()
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	base := &http.Transport{DialContext: ln.DialContext}
	t.Cleanup(func() {
		srv.Close()
		base.CloseIdleConnections()
	})
	logs := &testkit.Buffer{}
	opts = append(opts, httpretry.WithLogger(slogJSON(logs)))
	rt := httpretry.NewTransport(base, p, opts...)
	if err := rt.Err(); err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: rt}, logs
}

// slogJSON returns a logger writing JSON lines to w.
func slogJSON(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// checkStreamHits asserts that fake saw one streamGenerateContent request
// (POST, alt=sse, the API key) per element of events, each answered 200
// with that many events. Call it in the bubble: it first waits for the
// fake's goroutines to be done (a stream's last event may reach the client
// before the fake has counted it).
func checkStreamHits(t *testing.T, fake *fakeGemini, events ...int) {
	t.Helper()
	synctest.Wait()
	hits := fake.Hits()
	if len(hits) != len(events) {
		t.Fatalf("server hits = %d (%+v), want %d", len(hits), hits, len(events))
	}
	for i, h := range hits {
		if h.method != http.MethodPost || h.path != streamPath || h.query != "alt=sse" || h.apiKey != demoAPIKey || h.status != http.StatusOK {
			t.Errorf("hit %d: %s %s?%s key %q status %d, want a POST to %s?alt=sse with the key, answered 200",
				i+1, h.method, h.path, h.query, h.apiKey, h.status, streamPath)
		}
		if h.events != events[i] {
			t.Errorf("hit %d: %d events sent, want %d", i+1, h.events, events[i])
		}
	}
}

// checkNoKey asserts that the API key appears in none of the logs.
func checkNoKey(t *testing.T, logs map[string]*testkit.Buffer) {
	t.Helper()
	for name, b := range logs {
		if s := b.String(); strings.Contains(s, demoAPIKey) {
			t.Errorf("the API key reached the %s:\n%s", name, s)
		}
	}
}

// body25 returns the real-format 429 of Google's documentation (RetryInfo
// retryDelay 25s), on one line, as a stream's event.
func body25(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/google-error-429-25s.json")
	if err != nil {
		t.Fatal(err)
	}
	return oneLine(b)
}

// TestGenerateContentStreamRetriedBeforeFirstEvent is item 6 of issue 13 with
// the real GenerateContentStream: the first stream's first event is the 429
// with RetryInfo 25s, the second connection is cut after the headers, before
// any event, the third stream is good. With Google's defaults the range loop
// gets every chunk exactly once and no error; the first wait is the hint
// (plus jitter), the second the backoff; the virtual time spent is exactly
// the waits; no log holds the API key.
func TestGenerateContentStreamRetriedBeforeFirstEvent(t *testing.T) {
	global := captureLogs(t)
	quota := streamOf(body25(t))
	synctest.Test(t, func(t *testing.T) {
		fake := newFakeGemini(quota, streamReset, streamOK)
		rec := newRecorder()
		p := retry.Google()
		p.Rand = retry.NewRand(3)
		p.Observer = rec.Observe
		c, logs := pipeClient(t, fake, p)

		start := time.Now()
		texts, err := stream(context.Background(), c)
		elapsed := time.Since(start)
		if err != nil || !slices.Equal(texts, chunks) {
			t.Fatalf("stream = %q, %v; want %q and no error", texts, err, chunks)
		}
		checkStreamHits(t, fake, 1, 0, len(chunks))

		if len(rec.Events()) != 3 || rec.Events()[2].Kind != retry.EventSuccess || rec.Events()[2].Attempt != 3 {
			t.Fatalf("events = %+v, want two retries and a success at attempt 3", rec.Events())
		}
		// 1: the first event is the 429: retried after its RetryInfo.
		checkHintedRetry(t, rec.Events()[0], http.StatusTooManyRequests, 25*time.Second, httpretry.HintRetryInfo)
		if ae := attemptError(t, rec.Events()[0]); ae.Class != httpretry.ClassStreamError {
			t.Errorf("attempt 1: class %q, want %q", ae.Class, httpretry.ClassStreamError)
		}
		if w := rec.Events()[0].Wait; w >= 26*time.Second {
			t.Errorf("first wait %v, want the hint plus jitter, [25s, 26s)", w)
		}
		// 2: the body ended before its first event: retried after the
		// backoff (2 s + jitter), no hint.
		ae := attemptError(t, rec.Events()[1])
		if ae.Class != httpretry.ClassEOF || ae.Status != 0 || ae.HintSource != "" || rec.Events()[1].Hint != 0 {
			t.Errorf("attempt 2: class %q status %d hint %v (%q), want %q with no status and no hint",
				ae.Class, ae.Status, rec.Events()[1].Hint, ae.HintSource, httpretry.ClassEOF)
		}
		if w := rec.Events()[1].Wait; w < 2*time.Second || w >= 3*time.Second {
			t.Errorf("second wait %v, want the backoff [2s, 3s)", w)
		}
		if want := rec.Events()[0].Wait + rec.Events()[1].Wait; elapsed != want {
			t.Errorf("virtual time spent %v, want the waits %v", elapsed, want)
		}

		// The transport's log: one record per retry, the first with the hint.
		recs := records(t, logs.String())
		if len(recs) != 2 {
			t.Fatalf("log records = %d, want 2:\n%s", len(recs), logs.String())
		}
		if r := recs[0]; r["class"] != httpretry.ClassStreamError || r["status"] != float64(429) ||
			r["hint"] != float64(25*time.Second) || r["hint_source"] != "retryinfo" || r["path"] != streamPath {
			t.Errorf("first log record = %v, want the stream error with its 25s RetryInfo", r)
		}
		if r := recs[1]; r["class"] != httpretry.ClassEOF || r["hint"] != nil {
			t.Errorf("second log record = %v, want an EOF without a hint", r)
		}
		checkNoKey(t, map[string]*testkit.Buffer{"transport log": logs, "default loggers": global})
	})
}

// attemptError returns the *httpretry.AttemptError of a retry event.
func attemptError(t *testing.T, e retry.Event) *httpretry.AttemptError {
	t.Helper()
	var ae *httpretry.AttemptError
	if !errors.As(e.Err, &ae) {
		t.Fatalf("event %+v: want an *httpretry.AttemptError", e)
	}
	return ae
}

// TestGenerateContentStreamNotRetriedAfterFirstEvent: once the first chunk
// has reached the range loop, nothing is retried, whatever follows: the
// loop gets the chunk, then the error, from exactly one request, at once.
func TestGenerateContentStreamNotRetriedAfterFirstEvent(t *testing.T) {
	global := captureLogs(t)
	for _, tt := range []struct {
		name   string
		script reply
		events int  // events the fake sends
		api    bool // the error is the SDK's APIError for the event (else the read error)
	}{
		{"a 429 with RetryInfo after the first chunk", streamCut, 2, true},
		{"a reset after the first chunk", reply{stream: true, events: chunkEvents(chunks)[:1], reset: true}, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFakeGemini(tt.script, streamOK)
				rec := newRecorder()
				p := retry.Google()
				p.Observer = rec.Observe
				c, logs := pipeClient(t, fake, p)

				start := time.Now()
				texts, err := stream(context.Background(), c)
				if !slices.Equal(texts, chunks[:1]) || err == nil {
					t.Fatalf("stream = %q, %v; want %q, then an error", texts, err, chunks[:1])
				}
				var apiErr genai.APIError
				if isAPI := errors.As(err, &apiErr); isAPI != tt.api ||
					(tt.api && (apiErr.Code != http.StatusTooManyRequests || apiErr.Status != "RESOURCE_EXHAUSTED")) {
					t.Errorf("err = %v (an APIError: %v), want an APIError: %v", err, isAPI, tt.api)
				}
				checkStreamHits(t, fake, tt.events)
				if len(rec.Events()) != 1 || rec.Events()[0].Kind != retry.EventSuccess || rec.Events()[0].Attempt != 1 {
					t.Errorf("events = %+v, want one success at attempt 1 (the stream was handed over)", rec.Events())
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("took %v of virtual time, want no wait", d)
				}
				if logs.String() != "" {
					t.Errorf("the transport logged a retry:\n%s", logs.String())
				}
				checkNoKey(t, map[string]*testkit.Buffer{"transport log": logs, "default loggers": global})
			})
		})
	}
}

// TestGenerateContentStreamEdges: what the range loop gets, how many
// requests the fake sees and how long it takes, when Google's rule is off
// or the call is marked NotIdempotent, peeking is off, the first event is
// not retryable, every first event is a 429, the hint passes the deadline,
// the first event stalls past the attempt timeout, or the context is
// already cancelled. No context carries the Idempotent mark: none needs it.
func TestGenerateContentStreamEdges(t *testing.T) {
	global := captureLogs(t)
	invalid := streamOf(oneLine([]byte(`{"error": {"code": 400, "message": "Invalid JSON payload.", "status": "INVALID_ARGUMENT"}}`)))
	quota25 := streamOf(body25(t))
	plain := func(ctx context.Context) context.Context { return ctx } // no mark
	cancelled := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return ctx
	}
	for _, tt := range []struct {
		name   string
		ctx    func(context.Context) context.Context
		policy retry.Policy // over demoPolicy's fields, with zero jitter
		opts   []httpretry.Option
		script []reply
		events []int // the fake's hits and the events each was sent

		chunks  int           // chunks received
		code    int           // the APIError's code, 0 for none
		err     error         // else an error matching this, nil for none
		elapsed time.Duration // virtual time spent
	}{
		{name: "Google's rule off: the stream is not peeked, the 429 reaches the loop",
			ctx: plain, opts: []httpretry.Option{httpretry.WithGoogleReadOnly(false)}, script: []reply{quota25, streamOK},
			events: []int{1}, code: 429},
		{name: "NotIdempotent: the stream is not peeked, the 429 reaches the loop",
			ctx: httpretry.NotIdempotent, script: []reply{quota25, streamOK},
			events: []int{1}, code: 429},
		{name: "Idempotent: the mark changes nothing", ctx: httpretry.Idempotent, script: []reply{quota25, streamOK},
			events: []int{1, len(chunks)}, chunks: len(chunks), elapsed: 5 * time.Second},
		{name: "peeking off for the request", ctx: func(ctx context.Context) context.Context { return httpretry.StreamPeek(plain(ctx), false) },
			script: []reply{quota25, streamOK}, events: []int{1}, code: 429},
		{name: "peeking off for the client", ctx: plain, opts: []httpretry.Option{httpretry.WithStreamPeek(false)},
			script: []reply{quota25, streamOK}, events: []int{1}, code: 429},
		{name: "peeking off for the client, on for the request", ctx: func(ctx context.Context) context.Context { return httpretry.StreamPeek(plain(ctx), true) },
			opts: []httpretry.Option{httpretry.WithStreamPeek(false)}, script: []reply{quota25, streamOK},
			events: []int{1, len(chunks)}, chunks: len(chunks), elapsed: 5 * time.Second},
		{name: "a first event that is not retryable (400)", ctx: plain, script: []reply{invalid, streamOK},
			events: []int{1}, code: 400},
		{name: "every first event a 429: the last one reaches the loop", ctx: plain, policy: retry.Policy{Attempts: 3},
			script: []reply{quota25}, events: []int{1, 1, 1}, code: 429, elapsed: 10 * time.Second},
		{name: "a hint past the deadline ends the loop at once", ctx: plain, policy: retry.Policy{Deadline: 4 * time.Second},
			script: []reply{quota25, streamOK}, events: []int{1}, code: 429},
		{name: "a first event that stalls past the attempt timeout", ctx: plain, policy: retry.Policy{AttemptTimeout: 10 * time.Second},
			script: []reply{{stream: true, stall: true}, streamOK}, events: []int{0, len(chunks)}, chunks: len(chunks),
			elapsed: 10*time.Second + 10*time.Millisecond},
		{name: "an already cancelled context", ctx: cancelled, script: []reply{streamOK}, err: context.Canceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFakeGemini(tt.script...)
				p := demoPolicy()
				p.Jitter = retry.Zero
				p = p.Merge(tt.policy)
				c, logs := pipeClient(t, fake, p, tt.opts...)

				ctx := tt.ctx(context.Background())
				start := time.Now()
				n := 0
				var err error
				for chunk, e := range c.Models.GenerateContentStream(ctx, model, genai.Text("Say hello."), nil) {
					if e != nil {
						err = e
						break
					}
					if got, want := chunk.Text(), chunks[n]; got != want {
						t.Errorf("chunk %d = %q, want %q", n, got, want)
					}
					n++
				}
				elapsed := time.Since(start)

				var apiErr genai.APIError
				switch {
				case tt.code != 0:
					if !errors.As(err, &apiErr) || apiErr.Code != tt.code {
						t.Errorf("err = %v, want an APIError %d", err, tt.code)
					}
					if tt.code == 429 && !strings.Contains(apiErr.Error(), "retryDelay:25s") {
						t.Errorf("the 429 reached the loop without its RetryInfo: %v", apiErr)
					}
				case tt.err != nil:
					if !errors.Is(err, tt.err) {
						t.Errorf("err = %v, want %v", err, tt.err)
					}
				case err != nil:
					t.Errorf("err = %v, want none", err)
				}
				if n != tt.chunks {
					t.Errorf("%d chunks, want %d", n, tt.chunks)
				}
				checkStreamHits(t, fake, tt.events...)
				if elapsed != tt.elapsed {
					t.Errorf("took %v of virtual time, want %v", elapsed, tt.elapsed)
				}
				checkNoKey(t, map[string]*testkit.Buffer{"transport log": logs, "default loggers": global})
			})
		})
	}
}
