package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/testkit"
)

// payloadRequest returns a request of method to url with the body
// "payload", its context made by ctx (nil: context.Background()) and the
// Idempotency-Key key (none if "").
func payloadRequest(ctx func(context.Context) context.Context, method, url, key string) *http.Request {
	c := context.Background()
	if ctx != nil {
		c = ctx(c)
	}
	req, _ := http.NewRequestWithContext(c, method, url, strings.NewReader("payload"))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return req
}

// TestGoogleReadOnly: which requests Google's rule takes for idempotent.
func TestGoogleReadOnly(t *testing.T) {
	const (
		gemini = "https://generativelanguage.googleapis.com"
		vertex = "https://us-central1-aiplatform.googleapis.com"
		pub    = "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash"
	)
	tests := []struct {
		method, url string
		want        bool
	}{
		// Every method, on the Gemini API and on Vertex AI.
		{"POST", gemini + "/v1beta/models/gemini-2.5-flash:generateContent", true},
		{"POST", gemini + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", true},
		{"POST", gemini + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=json", true},
		{"POST", gemini + "/v1beta/models/gemini-2.5-flash:countTokens", true},
		{"POST", gemini + "/v1beta/models/gemini-embedding-001:embedContent", true},
		{"POST", gemini + "/v1beta/models/gemini-embedding-001:batchEmbedContents", true},
		{"POST", gemini + "/v1beta/models/imagen-4.0-generate-001:predict", true},
		{"POST", gemini + "/v1beta/tunedModels/my-model:generateContent", true},
		{"POST", vertex + pub + ":generateContent", true},
		{"POST", vertex + pub + ":streamGenerateContent?alt=sse", true},
		{"POST", vertex + pub + ":countTokens", true},
		{"POST", vertex + pub + ":computeTokens", true},
		{"POST", vertex + "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-embedding-001:embedContent", true},
		{"POST", vertex + "/v1/projects/p/locations/us-central1/publishers/google/models/text-embedding-005:predict", true},
		{"POST", vertex + "/v1/projects/p/locations/us-central1/endpoints/1234:predict", true},
		{"POST", vertex + "/v1/projects/p/locations/us-central1/endpoints/1234:rawPredict", true},
		{"POST", vertex + "/v1/projects/p/locations/us-central1/publishers/anthropic/models/claude:rawPredict", true},
		{"POST", "https://aiplatform.googleapis.com/v1/publishers/google/models/gemini-2.5-flash:generateContent", true},
		// Any host: a proxy, a Gemini-compatible server, loopback.
		{"POST", "http://127.0.0.1:8080/v1beta/models/gemini-2.5-flash:generateContent", true},
		{"POST", "https://proxy.example/gemini/v1beta/models/m:countTokens?key=k", true},
		// An escaped colon is the same path to the server.
		{"POST", gemini + "/v1beta/models/m%3AgenerateContent", true},

		// Methods that create something.
		{"POST", gemini + "/upload/v1beta/files", false},
		{"POST", gemini + "/upload/v1beta/files?uploadType=resumable", false},
		{"POST", gemini + "/v1beta/files:register", false},
		{"POST", gemini + "/v1beta/cachedContents", false},
		{"POST", gemini + "/v1beta/tunedModels", false},
		{"POST", gemini + "/v1beta/models/gemini-2.5-flash:batchGenerateContent", false},
		{"POST", gemini + "/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent", false},
		{"POST", gemini + "/v1beta/models/veo-3.0-generate-001:predictLongRunning", false},
		{"POST", vertex + "/v1/projects/p/locations/us-central1/batchPredictionJobs", false},
		{"POST", vertex + "/v1/projects/p/locations/us-central1/tuningJobs", false},
		// Near misses: another method, another case, another collection.
		{"POST", gemini + "/v1beta/files:generateContentUpload", false},
		{"POST", gemini + "/v1beta/models/m:generateContentUpload", false},
		{"POST", gemini + "/v1beta/models/m:GenerateContent", false},
		{"POST", gemini + "/v1beta/models/m:generatecontent", false},
		{"POST", gemini + "/v1beta/Models/m:generateContent", false},
		{"POST", gemini + "/v1beta/files:generateContent", false},
		{"POST", gemini + "/v1beta/cachedContents/c:generateContent", false},
		{"POST", gemini + "/v1beta/models/m:generateContent/", false},
		{"POST", gemini + "/v1beta/models/:generateContent", false},
		{"POST", gemini + "/v1beta/models/m:", false},
		{"POST", gemini + "/v1beta/models/m", false},
		{"POST", gemini + "/models:generateContent", false},
		{"POST", gemini + "/m:generateContent", false},
		{"POST", gemini + "/v1beta/models/m:generateContent.json", false},
		{"POST", gemini + "/v1beta/models/m:streamGenerateContent%2F", false},
		{"POST", gemini + "/v1beta/x?path=/models/m:generateContent", false},
		{"POST", gemini + "/v1beta/x#/models/m:generateContent", false},
		{"POST", vertex + "/v1/projects/p/locations/l/endpoints/1234:streamRawPredict", false}, // not on the list
		// Only a POST: Google's methods are all POSTs.
		{"PATCH", gemini + "/v1beta/models/m:generateContent", false},
		{"PUT", gemini + "/v1beta/models/m:generateContent", false},
		{"GET", gemini + "/v1beta/models/m:generateContent", false},
		{"post", gemini + "/v1beta/models/m:generateContent", false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := GoogleReadOnly(&http.Request{Method: tt.method, URL: u}); got != tt.want {
			t.Errorf("GoogleReadOnly(%s %s) = %v, want %v", tt.method, tt.url, got, tt.want)
		}
	}
	if GoogleReadOnly(nil) || GoogleReadOnly(&http.Request{Method: "POST"}) {
		t.Error("GoogleReadOnly of a nil request or URL = true")
	}
}

// TestIdempotencyPrecedence is the decision of the package documentation,
// case by case: the context mark (innermost wins), the Idempotency-Key
// header, AllowNonIdempotent, the rules (Google's, IdempotentIf's), the
// method. Every request fails with a 500, which proves nothing about
// whether the server acted: it is retried (3 attempts) only when the
// request is idempotent.
func TestIdempotencyPrecedence(t *testing.T) {
	const (
		plain  = "/v1/items"
		google = "/v1beta/models/gemini-2.5-flash:generateContent"
		chat   = "/v1/chat/completions"
	)
	isChat := func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == chat }
	never := func(*http.Request) bool { return false }
	idem, notIdem := Idempotent, NotIdempotent
	nested := func(outer, inner func(context.Context) context.Context) func(context.Context) context.Context {
		return func(ctx context.Context) context.Context { return inner(outer(ctx)) }
	}
	tests := []struct {
		name    string
		method  string
		path    string
		ctx     func(context.Context) context.Context
		key     string
		opts    []Option
		retried bool
	}{
		// 5. the method.
		{name: "GET", method: "GET", path: plain, retried: true},
		{name: "PUT", method: "PUT", path: plain, retried: true},
		{name: "POST", method: "POST", path: plain},
		{name: "PATCH", method: "PATCH", path: plain},
		// 4. the rules.
		{name: "POST generateContent", method: "POST", path: google, retried: true},
		{name: "POST generateContent, Google's rule off", method: "POST", path: google, opts: []Option{WithGoogleReadOnly(false)}},
		{name: "POST generateContent, Google's rule off then on", method: "POST", path: google,
			opts: []Option{WithGoogleReadOnly(false), WithGoogleReadOnly(true)}, retried: true},
		{name: "POST generateContent, Google's rule off, back as a rule", method: "POST", path: google,
			opts: []Option{WithGoogleReadOnly(false), IdempotentIf(GoogleReadOnly)}, retried: true},
		{name: "PATCH generateContent", method: "PATCH", path: google},
		{name: "POST a rule matches", method: "POST", path: chat, opts: []Option{IdempotentIf(isChat)}, retried: true},
		{name: "POST the second rule matches", method: "POST", path: chat, opts: []Option{IdempotentIf(never), IdempotentIf(isChat)}, retried: true},
		{name: "POST no rule matches", method: "POST", path: plain, opts: []Option{IdempotentIf(isChat)}},
		{name: "GET a rule says no: the method decides", method: "GET", path: plain, opts: []Option{IdempotentIf(never)}, retried: true},
		{name: "GET Google's rule off: the method decides", method: "GET", path: google, opts: []Option{WithGoogleReadOnly(false)}, retried: true},
		// 3. AllowNonIdempotent.
		{name: "POST AllowNonIdempotent", method: "POST", path: plain, opts: []Option{AllowNonIdempotent()}, retried: true},
		{name: "POST AllowNonIdempotent, Google's rule off", method: "POST", path: google,
			opts: []Option{AllowNonIdempotent(), WithGoogleReadOnly(false)}, retried: true},
		// 2. the Idempotency-Key header.
		{name: "POST with a key", method: "POST", path: plain, key: "k", retried: true},
		{name: "POST with an added key", method: "POST", path: plain, opts: []Option{AddIdempotencyKey()}, retried: true},
		{name: "POST with a key, Google's rule off", method: "POST", path: google, key: "k", opts: []Option{WithGoogleReadOnly(false)}, retried: true},
		// 1. the context mark, innermost wins.
		{name: "POST Idempotent", method: "POST", path: plain, ctx: idem, retried: true},
		{name: "POST Idempotent, Google's rule off", method: "POST", path: google, ctx: idem, opts: []Option{WithGoogleReadOnly(false)}, retried: true},
		{name: "POST Idempotent, a rule says no", method: "POST", path: plain, ctx: idem, opts: []Option{IdempotentIf(never)}, retried: true},
		{name: "GET NotIdempotent", method: "GET", path: plain, ctx: notIdem},
		{name: "POST generateContent NotIdempotent", method: "POST", path: google, ctx: notIdem},
		{name: "POST a rule matches, NotIdempotent", method: "POST", path: chat, ctx: notIdem, opts: []Option{IdempotentIf(isChat)}},
		{name: "POST AllowNonIdempotent, NotIdempotent", method: "POST", path: plain, ctx: notIdem, opts: []Option{AllowNonIdempotent()}},
		{name: "POST with a key, NotIdempotent", method: "POST", path: plain, ctx: notIdem, key: "k"},
		{name: "POST AddIdempotencyKey, NotIdempotent", method: "POST", path: plain, ctx: notIdem, opts: []Option{AddIdempotencyKey()}},
		{name: "POST generateContent, Idempotent inside NotIdempotent", method: "POST", path: google, ctx: nested(notIdem, idem), retried: true},
		{name: "POST generateContent, NotIdempotent inside Idempotent", method: "POST", path: google, ctx: nested(idem, notIdem)},
		{name: "GET, NotIdempotent inside Idempotent", method: "GET", path: plain, ctx: nested(idem, notIdem)},
	}
	p := fast
	p.Attempts = 3
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewScript(t, testkit.Status(500, "oops"))
			ev := newEvents()
			p := p
			p.Observer = ev.Observe
			req := payloadRequest(tt.ctx, tt.method, srv.URL+tt.path, tt.key)
			rt := NewTransport(srv.Client().Transport, p, tt.opts...)
			if err := rt.Err(); err != nil {
				t.Fatal(err)
			}
			resp := roundTrip(t, rt, req)
			readAll(t, resp)
			if got, want := srv.Hits(), wantHits(tt.retried); got != want || resp.StatusCode != 500 {
				t.Fatalf("%d after %d requests, want the 500 after %d", resp.StatusCode, got, want)
			}
			for i, s := range srv.Requests() {
				if s.Body != "payload" {
					t.Errorf("attempt %d: body %q", i+1, s.Body)
				}
			}
			if e := ev.Last(); !tt.retried && (e.Kind != retry.EventGiveUp || !errors.Is(e.Err, ErrNotIdempotent)) {
				t.Errorf("last event %+v: want a give-up matching ErrNotIdempotent", e)
			}
		})
	}
}

// TestIdempotentIfRule: a rule sees the caller's request, is asked once per
// call (not per attempt), and is not asked when an earlier step decided.
func TestIdempotentIfRule(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(503, "busy"), testkit.Status(503, "busy"), testkit.Status(200, "ok"))
	var asked atomic.Int32
	var got *http.Request
	rule := func(r *http.Request) bool {
		asked.Add(1)
		got = r
		return r.URL.Path == "/v1/chat/completions"
	}
	rt := NewTransport(srv.Client().Transport, fast, IdempotentIf(rule))
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader("{}"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != 200 || srv.Hits() != 3 || asked.Load() != 1 || got != req {
		t.Fatalf("%d after %d requests, the rule asked %d times (with the caller's request: %v); want 200 after 3, asked once",
			resp.StatusCode, srv.Hits(), asked.Load(), got == req)
	}
	for _, ctx := range []context.Context{Idempotent(context.Background()), NotIdempotent(context.Background())} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader("{}"))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/v1beta/models/m:generateContent", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k")
	resp, err = rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := asked.Load(); n != 1 {
		t.Errorf("the rule was asked %d times in all, want 1: a mark or a key decides first", n)
	}
}

// TestIdempotentIfNil: a nil rule is an invalid option, reported by Err and
// by every RoundTrip, which sends nothing.
func TestIdempotentIfNil(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(200, "ok"))
	rt := NewTransport(srv.Client().Transport, fast, IdempotentIf(nil))
	if err := rt.Err(); err == nil || !strings.Contains(err.Error(), "IdempotentIf") {
		t.Fatalf("Err() = %v, want an error naming IdempotentIf", err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	if _, err := rt.RoundTrip(req); err == nil || srv.Hits() != 0 {
		t.Fatalf("RoundTrip = %v after %d requests, want the error and none sent", err, srv.Hits())
	}
	if _, err := NewClient(fast, IdempotentIf(nil)); err == nil {
		t.Fatal("NewClient accepted a nil rule")
	}
}

// TestZeroTransportGoogleReadOnly: the zero Transport applies Google's rule,
// as NewTransport does by default. (Its policy is Google's, made fast for
// the test with WithPolicy.)
func TestZeroTransportGoogleReadOnly(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(500, "oops"), testkit.Status(200, "ok"))
	ctx := WithPolicy(context.Background(), fast)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1beta/models/m:countTokens", strings.NewReader("{}"))
	resp, err := (&http.Client{Transport: &Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || body != "ok" || srv.Hits() != 2 {
		t.Fatalf("%d %q after %d requests, want 200 after 2", resp.StatusCode, body, srv.Hits())
	}
}

// TestRefusalRetried: a 429, or a 503 with a Retry-After or a RetryInfo,
// says the server did not act on the request: it is retried whatever the
// method, unless marked NotIdempotent, and only with a body that can be
// sent again. Any other retryable status to a POST is not retried. Each
// request goes to a plain path (no rule applies); the server answers the
// first attempt with the status, the next ones with 200.
func TestRefusalRetried(t *testing.T) {
	const retryInfo = `{"error": {"code": 503, "status": "UNAVAILABLE", "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0s"}]}}`
	past := "Wed, 21 Oct 2015 07:28:00 GMT"
	ok := testkit.Status(200, "ok")
	boom := errors.New("GetBody failed")
	tests := []struct {
		name    string
		method  string
		first   http.HandlerFunc
		ctx     func(context.Context) context.Context
		opaque  bool // a body without GetBody
		getBody func() (io.ReadCloser, error)
		codes   []int // the policy's StatusCodes, nil for the default
		hits    int32
		code    int   // the status the caller gets
		skip    error // what the give-up matches, nil if none
	}{
		{name: "429", method: "POST", first: testkit.Status(429, "quota"), hits: 2, code: 200},
		{name: "429 with Retry-After", method: "POST", first: testkit.Status(429, "quota", "Retry-After", "0"), hits: 2, code: 200},
		{name: "429 to a PATCH", method: "PATCH", first: testkit.Status(429, "quota"), hits: 2, code: 200},
		{name: "429 to a custom method", method: "PURGE", first: testkit.Status(429, "quota"), hits: 2, code: 200},
		{name: "503 with Retry-After", method: "POST", first: testkit.Status(503, "busy", "Retry-After", "0"), hits: 2, code: 200},
		{name: "503 with a past Retry-After date", method: "POST", first: testkit.Status(503, "busy", "Retry-After", past), hits: 2, code: 200},
		{name: "503 with RetryInfo", method: "POST", first: testkit.Status(503, retryInfo, "Content-Type", "application/json"), hits: 2, code: 200},

		{name: "503 without a hint", method: "POST", first: testkit.Status(503, "busy"), hits: 1, code: 503, skip: ErrNotIdempotent},
		{name: "503 with a malformed Retry-After", method: "POST", first: testkit.Status(503, "busy", "Retry-After", "soon"), hits: 1, code: 503, skip: ErrNotIdempotent},
		{name: "503 with RetryInfo in an HTML body", method: "POST", first: testkit.Status(503, retryInfo, "Content-Type", "text/html"), hits: 1, code: 503, skip: ErrNotIdempotent},
		{name: "500 with Retry-After", method: "POST", first: testkit.Status(500, "oops", "Retry-After", "0"), hits: 1, code: 500, skip: ErrNotIdempotent},
		{name: "502 with Retry-After", method: "POST", first: testkit.Status(502, "bad gateway", "Retry-After", "0"), hits: 1, code: 502, skip: ErrNotIdempotent},
		{name: "504 with Retry-After", method: "POST", first: testkit.Status(504, "timeout", "Retry-After", "0"), hits: 1, code: 504, skip: ErrNotIdempotent},
		{name: "408 with Retry-After", method: "POST", first: testkit.Status(408, "timeout", "Retry-After", "0"), hits: 1, code: 408, skip: ErrNotIdempotent},

		{name: "429, NotIdempotent", method: "POST", ctx: NotIdempotent, first: testkit.Status(429, "quota"), hits: 1, code: 429, skip: ErrNotIdempotent},
		{name: "503 with Retry-After, NotIdempotent", method: "POST", ctx: NotIdempotent, first: testkit.Status(503, "busy", "Retry-After", "0"), hits: 1, code: 503, skip: ErrNotIdempotent},
		{name: "429 to a GET, NotIdempotent", method: "GET", ctx: NotIdempotent, first: testkit.Status(429, "quota"), hits: 1, code: 429, skip: ErrNotIdempotent},
		{name: "429, a body sent that cannot be sent again", method: "POST", opaque: true, first: testkit.Status(429, "quota"), hits: 1, code: 429, skip: ErrBodyNotReplayable},
		{name: "429, GetBody fails", method: "POST", getBody: func() (io.ReadCloser, error) { return nil, boom }, first: testkit.Status(429, "quota"), hits: 1, code: 429, skip: ErrBodyNotReplayable},
		{name: "429, not one of the policy's codes", method: "POST", codes: []int{503}, first: testkit.Status(429, "quota"), hits: 1, code: 429},
		{name: "429 every time: the attempts are used up", method: "POST", first: testkit.Status(429, "quota"), hits: 3, code: 429},
	}
	const payload = "payload"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			second := ok
			if tt.name == "429 every time: the attempts are used up" {
				second = tt.first
			}
			srv := testkit.NewScript(t, tt.first, second)
			ev := newEvents()
			p := fast
			p.Attempts, p.StatusCodes, p.Observer = 3, tt.codes, ev.Observe
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			var body io.Reader = strings.NewReader(payload)
			if tt.opaque {
				body = opaqueBody{body}
			}
			req, _ := http.NewRequestWithContext(ctx, tt.method, srv.URL+"/v1/orders", body)
			if tt.getBody != nil {
				req.GetBody = tt.getBody
			}
			resp, err := NewTransport(srv.Client().Transport, p).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			if got := srv.Hits(); got != tt.hits || resp.StatusCode != tt.code {
				t.Fatalf("%d after %d requests, want %d after %d", resp.StatusCode, got, tt.code, tt.hits)
			}
			for i, s := range srv.Requests() {
				if s.Method != tt.method || s.Body != payload {
					t.Errorf("attempt %d: %s with body %q, want %s %q", i+1, s.Method, s.Body, tt.method, payload)
				}
			}
			e := ev.Last()
			switch {
			case tt.skip != nil:
				if e.Kind != retry.EventGiveUp || !errors.Is(e.Err, tt.skip) {
					t.Errorf("last event %+v: want a give-up matching %v", e, tt.skip)
				}
			case errors.Is(e.Err, ErrNotIdempotent) || errors.Is(e.Err, ErrBodyNotReplayable):
				t.Errorf("last event %+v: a skipped retry", e)
			}
			if tt.hits > 1 {
				var ae *AttemptError
				r := ev.Of(retry.EventRetry)
				if len(r) == 0 || !errors.As(r[0].Err, &ae) || ae.Method != tt.method || ae.Class != ClassStatus {
					t.Errorf("retry events %+v: want the first one with the AttemptError of the %s", r, tt.method)
				}
			}
		})
	}
}

// TestRefusalWaitsForTheHint: a POST refused with a 503 and Retry-After: 7
// is sent again after the hint (virtual time), with its whole body.
func TestRefusalWaitsForTheHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bodies []string
		var at []time.Duration
		start := time.Now()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			bodies = append(bodies, string(b))
			at = append(at, time.Since(start))
			if len(bodies) == 1 {
				return response(r, http.StatusServiceUnavailable, "busy", "Retry-After", "7"), nil
			}
			return response(r, http.StatusCreated, "made"), nil
		})
		p := retry.Policy{InitialDelay: time.Second, Jitter: retry.Zero}
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/orders", strings.NewReader("order 42"))
		resp, err := NewTransport(base, p).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || len(bodies) != 2 || bodies[0] != "order 42" || bodies[1] != "order 42" {
			t.Fatalf("%d after %q, want 201 after the body twice", resp.StatusCode, bodies)
		}
		if at[1] != 7*time.Second {
			t.Errorf("the retry was sent after %v, want the 7s hint", at[1])
		}
	})
}

// BenchmarkGoogleReadOnly: the cost of Google's rule for a request that
// matches and one that does not (allocations: none).
func BenchmarkGoogleReadOnly(b *testing.B) {
	for _, u := range []string{
		"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		"https://api.example.com/v1/orders/12345/items",
	} {
		req, _ := http.NewRequest(http.MethodPost, u, nil)
		b.Run(req.URL.Host, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				GoogleReadOnly(req)
			}
		})
	}
}

// TestRulesConcurrent: one transport, its rules and Google's, 200 callers
// at once (run with -race): each request is decided by its own path, and
// a POST refused with a 429 is sent again whatever its path.
func TestRulesConcurrent(t *testing.T) {
	var hits sync.Map // path -> *atomic.Int32
	srv := testkit.NewScript(t, func(w http.ResponseWriter, r *http.Request) {
		v, _ := hits.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n := v.(*atomic.Int32).Add(1)
		switch {
		case strings.HasSuffix(r.URL.Path, "/refused") && n == 1:
			w.WriteHeader(http.StatusTooManyRequests)
		case n == 1:
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	chat := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/chat/") }
	rt := NewTransport(srv.Client().Transport, fast, IdempotentIf(chat))
	paths := []struct {
		prefix string
		hits   int32
	}{
		{"/v1beta/models/m%d:generateContent", 2}, // Google's rule
		{"/chat/%d", 2},           // the caller's rule
		{"/orders/%d", 1},         // no rule: the 500 is not retried
		{"/orders/%d/refused", 2}, // a refusal
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			path := fmt.Sprintf(paths[i%len(paths)].prefix, i)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("x"))
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	for i := range 200 {
		p := paths[i%len(paths)]
		path := fmt.Sprintf(p.prefix, i)
		v, ok := hits.Load(path)
		if !ok || v.(*atomic.Int32).Load() != p.hits {
			t.Errorf("%s: %v hits, want %d", path, v, p.hits)
		}
	}
}
