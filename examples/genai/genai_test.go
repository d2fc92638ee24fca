package main

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
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

const wantText = "Hello from the fake Gemini."

// recorder is a retry.Observer that keeps the events it sees.
type recorder = testkit.Recorder[retry.Event, retry.EventKind]

func newRecorder() *recorder {
	return testkit.NewRecorder(func(e retry.Event) retry.EventKind { return e.Kind })
}

// captureLogs sends slog.Default and the standard logger to a buffer for
// the test, so that a secret logged by anyone (us or the SDK) is caught.
func captureLogs(t *testing.T) *testkit.Buffer {
	t.Helper()
	buf := &testkit.Buffer{}
	oldSlog, oldFlags, oldOut := slog.Default(), log.Flags(), log.Writer()
	slog.SetDefault(slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log.SetOutput(buf)
	t.Cleanup(func() {
		slog.SetDefault(oldSlog)
		log.SetOutput(oldOut)
		log.SetFlags(oldFlags)
	})
	return buf
}

// records parses JSON log lines.
func records(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// checkHits asserts the statuses the fake answered and that every request
// carried the API key to the expected path.
func checkHits(t *testing.T, hits []hit, want ...int) {
	t.Helper()
	if len(hits) != len(want) {
		t.Fatalf("server hits = %d (%+v), want %d", len(hits), hits, len(want))
	}
	for i, h := range hits {
		if h.status != want[i] {
			t.Errorf("hit %d: status %d, want %d", i+1, h.status, want[i])
		}
		if h.apiKey != demoAPIKey || h.method != http.MethodPost || h.path != "/v1beta/models/"+model+":generateContent" {
			t.Errorf("hit %d: %s %s key %q", i+1, h.method, h.path, h.apiKey)
		}
	}
}

// checkHintedRetry asserts a retry event: its status, the server's hint and
// where it came from, and a wait of at least the hint.
func checkHintedRetry(t *testing.T, e retry.Event, status int, hint time.Duration, source string) {
	t.Helper()
	var ae *httpretry.AttemptError
	if e.Kind != retry.EventRetry || !errors.As(e.Err, &ae) {
		t.Fatalf("event %+v: want a retry after an *httpretry.AttemptError", e)
	}
	if ae.Status != status || ae.HintSource != source {
		t.Errorf("attempt %d: status %d hint source %q, want %d %q", e.Attempt, ae.Status, ae.HintSource, status, source)
	}
	if e.Hint != hint {
		t.Errorf("attempt %d: hint %v, want %v", e.Attempt, e.Hint, hint)
	}
	if e.Wait < hint {
		t.Errorf("attempt %d: wait %v is shorter than the server's hint %v", e.Attempt, e.Wait, hint)
	}
}

// TestGenerateContentHonoursHints is the scenario on loopback: a 429
// with RetryInfo (0.3s), a 503 with Retry-After: 1, then a valid response.
func TestGenerateContentHonoursHints(t *testing.T) {
	global := captureLogs(t)
	fake := newFakeGemini(reply429, reply503, replyOK)
	srv := httptest.NewServer(fake)
	defer srv.Close()

	var logs testkit.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	rec := newRecorder()
	p := demoPolicy()
	p.Rand = retry.NewRand(1)
	p.Observer = rec.Observe
	hc, err := httpretry.NewClient(p, httpretry.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()

	ctx := context.Background()
	c, err := newClient(ctx, srv.URL, hc, nil)
	if err != nil {
		t.Fatal(err)
	}
	text, err := generate(ctx, c)
	if err != nil || text != wantText {
		t.Fatalf("generate = %q, %v", text, err)
	}
	checkHits(t, fake.Hits(), 429, 503, 200)

	if len(rec.Events()) != 3 || rec.Events()[2].Kind != retry.EventSuccess || rec.Events()[2].Attempt != 3 {
		t.Fatalf("events = %+v, want two retries and a success at attempt 3", rec.Events())
	}
	checkHintedRetry(t, rec.Events()[0], 429, 300*time.Millisecond, httpretry.HintRetryInfo)
	checkHintedRetry(t, rec.Events()[1], 503, time.Second, httpretry.HintRetryAfter)

	// The log shows each retry, with the hint, and no secret.
	recs := records(t, logs.String())
	if len(recs) != 2 {
		t.Fatalf("log records = %d, want 2:\n%s", len(recs), logs.String())
	}
	wantLog := []struct {
		status float64
		hint   time.Duration
		source string
	}{{429, 300 * time.Millisecond, "retryinfo"}, {503, time.Second, "retry-after"}}
	for i, r := range recs {
		w := wantLog[i]
		if r["msg"] != "httpretry: retry" || r["status"] != w.status || r["hint"] != float64(w.hint) ||
			r["hint_source"] != w.source || r["attempt"] != float64(i+1) || r["wait"].(float64) < float64(w.hint) {
			t.Errorf("log record %d = %v, want a retry after %v with hint %v from %s", i+1, r, w.status, w.hint, w.source)
		}
	}
	for name, s := range map[string]string{"transport log": logs.String(), "default loggers": global.String()} {
		if strings.Contains(s, demoAPIKey) {
			t.Errorf("the API key reached the %s:\n%s", name, s)
		}
	}
}

// TestGoogleDefaultsVirtualTime runs the scenario with Google's default
// policy and the original 25 s RetryInfo, in a synctest bubble over an
// in-memory transport: the waits are real waits of virtual time.
func TestGoogleDefaultsVirtualTime(t *testing.T) {
	body25, err := os.ReadFile("testdata/google-error-429-25s.json")
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		fake := newFakeGemini(reply{status: 429, body: string(body25)}, reply503, replyOK)
		rec := newRecorder()
		p := retry.Google()
		p.Rand = retry.NewRand(2)
		p.Observer = rec.Observe
		hc := &http.Client{Transport: httpretry.NewTransport(handlerTransport{fake}, p)}

		ctx := context.Background()
		c, err := newClient(ctx, "http://gemini.test", hc, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		text, err := generate(ctx, c)
		elapsed := time.Since(start)
		if err != nil || text != wantText {
			t.Fatalf("generate = %q, %v", text, err)
		}
		checkHits(t, fake.Hits(), 429, 503, 200)
		if len(rec.Events()) != 3 {
			t.Fatalf("events = %+v", rec.Events())
		}
		checkHintedRetry(t, rec.Events()[0], 429, 25*time.Second, httpretry.HintRetryInfo)
		checkHintedRetry(t, rec.Events()[1], 503, time.Second, httpretry.HintRetryAfter)
		// The hint is a floor plus jitter (at most 1 s); the second wait is
		// the backoff's 2 s + jitter, above the 1 s hint.
		if w := rec.Events()[0].Wait; w >= 26*time.Second {
			t.Errorf("first wait %v, want [25s, 26s)", w)
		}
		if w := rec.Events()[1].Wait; w < 2*time.Second || w >= 3*time.Second {
			t.Errorf("second wait %v, want the backoff [2s, 3s)", w)
		}
		if want := rec.Events()[0].Wait + rec.Events()[1].Wait; elapsed != want {
			t.Errorf("virtual time spent %v, want the waits %v", elapsed, want)
		}
	})
}

// handlerTransport serves requests with a handler, in memory.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	if r.Body != nil {
		r.Body.Close()
	}
	resp := w.Result()
	resp.Request = r
	return resp, nil
}

func ptr[T any](v T) *T { return &v }

// TestDoubleRetries counts the server hits when the SDK's retries, ours, or
// both are on, against an endpoint that always answers 503.
func TestDoubleRetries(t *testing.T) {
	sdkRetries := &genai.HTTPRetryOptions{
		Attempts: ptr(int32(3)), InitialDelay: ptr(0.001), MaxDelay: ptr(0.001), ExpBase: ptr(1.0), Jitter: ptr(0.0),
	}
	ours := retry.Policy{Attempts: 3, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond, Jitter: retry.Zero}
	tests := []struct {
		name string
		sdk  *genai.HTTPRetryOptions
		hc   *http.Client
		hits int
	}{
		{"ours only (recommended)", nil, &http.Client{Transport: httpretry.NewTransport(nil, ours)}, 3},
		{"the SDK's only", sdkRetries, &http.Client{}, 3},
		{"both: every SDK attempt is a retried call of ours", sdkRetries, &http.Client{Transport: httpretry.NewTransport(nil, ours)}, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeGemini(reply{status: http.StatusServiceUnavailable, body: error503})
			srv := httptest.NewServer(fake)
			defer srv.Close()
			defer tt.hc.CloseIdleConnections()
			c, err := newClient(context.Background(), srv.URL, tt.hc, tt.sdk)
			if err != nil {
				t.Fatal(err)
			}
			_, err = generate(context.Background(), c)
			var apiErr genai.APIError
			if !errors.As(err, &apiErr) || apiErr.Code != http.StatusServiceUnavailable {
				t.Fatalf("err = %v, want the 503 as a genai.APIError", err)
			}
			if got := len(fake.Hits()); got != tt.hits {
				t.Errorf("server hits = %d, want %d", got, tt.hits)
			}
		})
	}
}

// TestREADMESetupRetriesUnmarkedCalls is issue 28 as a Gemini user meets
// it: the README's setup (httpretry.NewClient, the client in
// genai.ClientConfig.HTTPClient, the SDK's retries off), a plain context,
// real loopback connections. generateContent is a POST, yet it is retried
// after a 429 (waiting at least its RetryInfo), a 503 and a 500, because
// httpretry knows it changes no server state. With Google's rule off a 500
// is not retried; a 429 still is (a refusal); NotIdempotent stops both.
func TestREADMESetupRetriesUnmarkedCalls(t *testing.T) {
	plain := func(ctx context.Context) context.Context { return ctx }
	ruleOff := []httpretry.Option{httpretry.WithGoogleReadOnly(false)}
	reply500 := reply{status: http.StatusInternalServerError, body: `{"error": {"code": 500, "message": "Internal error.", "status": "INTERNAL"}}`}
	for _, tt := range []struct {
		name    string
		opts    []httpretry.Option
		ctx     func(context.Context) context.Context
		script  []reply
		hits    []int
		minWait time.Duration // the server's hint: the retry waits at least this
	}{
		{"429 with RetryInfo", nil, plain, []reply{reply429, replyOK}, []int{429, 200}, 300 * time.Millisecond},
		{"503", nil, plain, []reply{{status: 503, body: error503}, replyOK}, []int{503, 200}, 0},
		{"500", nil, plain, []reply{reply500, replyOK}, []int{500, 200}, 0},
		{"Google's rule off: a 500 is not retried", ruleOff, plain, []reply{reply500, replyOK}, []int{500}, 0},
		{"Google's rule off: a 429 is, a refusal", ruleOff, plain, []reply{reply429, replyOK}, []int{429, 200}, 300 * time.Millisecond},
		{"NotIdempotent: not even a 429", nil, httpretry.NotIdempotent, []reply{reply429, replyOK}, []int{429}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeGemini(tt.script...)
			srv := httptest.NewServer(fake)
			defer srv.Close()
			var logs testkit.Buffer
			rec := newRecorder()
			p := retry.Policy{Attempts: 3, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxRetryAfter: time.Second, Jitter: retry.Zero, Observer: rec.Observe}
			hc, err := httpretry.NewClient(p, append(tt.opts, httpretry.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))...)
			if err != nil {
				t.Fatal(err)
			}
			defer hc.CloseIdleConnections()
			c, err := newClient(context.Background(), srv.URL, hc, nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			resp, err := c.Models.GenerateContent(tt.ctx(context.Background()), model, genai.Text("Say hello."), nil)
			took := time.Since(start)
			checkHits(t, fake.Hits(), tt.hits...)
			if last := tt.hits[len(tt.hits)-1]; last != http.StatusOK {
				var apiErr genai.APIError
				if !errors.As(err, &apiErr) || apiErr.Code != last {
					t.Fatalf("err = %v, want the %d", err, last)
				}
				if !strings.Contains(logs.String(), `"skipped":"not idempotent"`) {
					t.Errorf("the log does not say why the %d was not retried:\n%s", last, logs.String())
				}
				return
			}
			if err != nil || resp.Text() != wantText {
				t.Fatalf("GenerateContent = %v", err)
			}
			if r := rec.Events()[0]; r.Kind != retry.EventRetry || r.Wait < tt.minWait || took < tt.minWait {
				t.Errorf("first event %+v, took %v: want a retry after at least the hint %v", r, took, tt.minWait)
			}
		})
	}
}

// TestRun runs the command's code path, on real loopback connections: the
// retried generateContent, the stream retried before its first event (a
// 429 event with RetryInfo, then a TCP reset), the stream cut after its
// first chunk (not retried), and the priority and flex profiles on Vertex
// AI (a 503 retried, every request with the profile's headers). Its log has one record per retry, the API key
// in none, and no goroutine is left behind.
func TestRun(t *testing.T) {
	global := captureLogs(t)
	before := chaos.SnapshotGoroutines()
	var out, logs testkit.Buffer
	if err := run(&out, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	b := out.String()
	for _, want := range []string{
		"model says: " + wantText + "\n",
		"server hits: 3,",
		`stream chunks: ["Hello" " from" " the fake" " Gemini."]` + "\n",
		"stream server hits: 3,",
		`cut stream chunks: ["Hello"], then error 429 RESOURCE_EXHAUSTED` + "\n",
		"cut stream server hits: 1,",
		`profile priority: 2 requests, each with X-Vertex-AI-LLM-Request-Type [] and X-Vertex-AI-LLM-Shared-Request-Type ["priority"]; served as ON_DEMAND_PRIORITY` + "\n",
		`profile flex: 2 requests, each with X-Vertex-AI-LLM-Request-Type ["shared"] and X-Vertex-AI-LLM-Shared-Request-Type ["flex"]; served as ON_DEMAND_FLEX` + "\n",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("output lacks %q:\n%s", want, b)
		}
	}
	l := logs.String()
	if n := strings.Count(l, `msg="httpretry: retry"`); n != 6 {
		t.Errorf("%d retries logged, want 6:\n%s", n, l)
	}
	for _, want := range []string{
		"status=429 class=stream-error", "hint=300ms hint_source=retryinfo",
		"class=reset error=\"the stream failed before its first event",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("the log lacks %q:\n%s", want, l)
		}
	}
	checkNoKey(t, map[string]*testkit.Buffer{"transport log": &logs, "default loggers": global})
	if leaked := before.Leaked(2 * time.Second); len(leaked) > 0 {
		t.Errorf("%d goroutines left behind:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}
