package httpretry_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
)

// flaky starts a loopback server that answers the first `fail` requests with
// status code and the others with 200 "ok", printing nothing.
func flaky(fail int32, code int) *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= fail {
			http.Error(w, http.StatusText(code), code)
			return
		}
		io.WriteString(w, "ok")
	}))
}

// quick is Google's policy with millisecond waits, so that the examples run
// fast.
var quick = retry.Policy{InitialDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, Jitter: retry.Zero}

func show(resp *http.Response, err error) {
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s\n", resp.StatusCode, strings.TrimSpace(string(b)))
}

// Wrapping http.DefaultClient: keep its settings, retry under its transport.
func Example() {
	srv := flaky(2, http.StatusServiceUnavailable)
	defer srv.Close()

	client := *http.DefaultClient // a copy: leave the global alone
	client.Transport = httpretry.NewTransport(http.DefaultClient.Transport, retry.Policy{
		Attempts:     5,
		InitialDelay: time.Millisecond, // Google's default is 1 s
		Jitter:       retry.Zero,
	})
	show(client.Get(srv.URL))
	// Output: 200 ok
}

func ExampleNewClient() {
	srv := flaky(1, http.StatusTooManyRequests)
	defer srv.Close()

	client, err := httpretry.NewClient(quick) // http.DefaultTransport with retries
	if err != nil {
		fmt.Println(err) // an invalid policy or option
		return
	}
	show(client.Get(srv.URL))

	_, err = httpretry.NewClient(retry.Policy{Attempts: -1})
	fmt.Println(err != nil)
	// Output:
	// 200 ok
	// true
}

func ExampleNewTransport() {
	srv := flaky(1, http.StatusBadGateway)
	defer srv.Close()

	base := &http.Transport{MaxIdleConnsPerHost: 4}
	client := &http.Client{Transport: httpretry.NewTransport(base, quick), Timeout: 10 * time.Second}
	show(client.Get(srv.URL))
	// Output: 200 ok
}

// A per-request override is merged over the client's policy field by field:
// here it changes the attempts only (a real-time call that must fail fast),
// the waits stay the client's.
func ExampleWithPolicy() {
	srv := flaky(3, http.StatusServiceUnavailable)
	defer srv.Close()
	client, err := httpretry.NewClient(quick) // 5 attempts
	if err != nil {
		log.Fatal(err)
	}

	ctx := httpretry.WithPolicy(context.Background(), retry.Policy{Attempts: 2})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	show(client.Do(req)) // the last response is returned when retries run out
	show(client.Get(srv.URL))
	// Output:
	// 503 Service Unavailable
	// 200 ok
}

// A search changes no server state, so its POST is safe to retry, but no
// rule of the transport knows it: mark the call idempotent.
func ExampleIdempotent() {
	srv := flaky(1, http.StatusInternalServerError)
	defer srv.Close()
	client, err := httpretry.NewClient(quick)
	if err != nil {
		log.Fatal(err)
	}

	ctx := httpretry.Idempotent(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/search", strings.NewReader(`{"q":"retry"}`))
	show(client.Do(req))
	// Output: 200 ok
}

// The calls of Gemini and Vertex AI that change no server state are
// idempotent by rule: this generateContent is retried after a 500 without
// a mark; the file upload, which creates a file, is not.
func ExampleGoogleReadOnly() {
	for _, u := range []string{
		"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
		"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		"https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/endpoints/42:rawPredict",
		"https://generativelanguage.googleapis.com/upload/v1beta/files",
		"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:batchGenerateContent",
	} {
		req, _ := http.NewRequest(http.MethodPost, u, nil)
		fmt.Println(httpretry.GoogleReadOnly(req), req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:])
	}

	srv := flaky(1, http.StatusInternalServerError)
	defer srv.Close()
	client, err := httpretry.NewClient(quick)
	if err != nil {
		log.Fatal(err)
	}
	show(client.Post(srv.URL+"/v1beta/models/gemini-2.5-flash:generateContent", "application/json", strings.NewReader(`{"contents":[]}`)))
	// Output:
	// true gemini-2.5-flash:generateContent
	// true gemini-2.5-flash:streamGenerateContent
	// true 42:rawPredict
	// false files
	// false gemini-2.5-flash:batchGenerateContent
	// 200 ok
}

// Google's rule applies whatever the host. To apply it to Google's hosts
// only, turn it off and add it back as a rule of your own.
func ExampleWithGoogleReadOnly() {
	srv := flaky(1, http.StatusInternalServerError) // not a Google host
	defer srv.Close()
	googleOnly := func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Hostname(), ".googleapis.com") && httpretry.GoogleReadOnly(r)
	}
	client, err := httpretry.NewClient(quick, httpretry.WithGoogleReadOnly(false), httpretry.IdempotentIf(googleOnly))
	if err != nil {
		log.Fatal(err)
	}
	show(client.Post(srv.URL+"/v1beta/models/gemini-2.5-flash:generateContent", "application/json", strings.NewReader(`{"contents":[]}`)))
	// Output: 500 Internal Server Error
}

// The chat completions of an OpenAI-compatible server change no server
// state: a rule makes them idempotent, with no mark on each call.
func ExampleIdempotentIf() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 1 { // every other request fails
			http.Error(w, "Bad Gateway", http.StatusBadGateway)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	chat := func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions"
	}
	client, err := httpretry.NewClient(quick, httpretry.IdempotentIf(chat))
	if err != nil {
		log.Fatal(err)
	}
	show(client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[]}`)))
	show(client.Post(srv.URL+"/v1/files", "application/json", strings.NewReader(`{}`)))
	// Output:
	// 200 ok
	// 502 Bad Gateway
}

// A 429 says the server did not act on the request: even a POST that is not
// idempotent is sent again, after the server's Retry-After.
func Example_refusal() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "order 42")
	}))
	defer srv.Close()
	client, err := httpretry.NewClient(quick)
	if err != nil {
		log.Fatal(err)
	}
	show(client.Post(srv.URL+"/v1/orders", "application/json", strings.NewReader(`{"item":"book"}`)))
	fmt.Println(n.Load(), "requests")
	// Output:
	// 201 order 42
	// 2 requests
}

// A POST that creates a resource is not retried; the observer sees why.
func ExampleNotIdempotent() {
	srv := flaky(1, http.StatusServiceUnavailable)
	defer srv.Close()
	p := quick
	p.Observer = func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventGiveUp && errors.Is(e.Err, httpretry.ErrNotIdempotent) {
			fmt.Println("not retried: the request is not idempotent")
		}
	}
	client, err := httpretry.NewClient(p, httpretry.AllowNonIdempotent())
	if err != nil {
		log.Fatal(err)
	}

	ctx := httpretry.NotIdempotent(context.Background()) // wins over AllowNonIdempotent
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/tuningJobs", strings.NewReader("{}"))
	show(client.Do(req))
	// Output:
	// not retried: the request is not idempotent
	// 503 Service Unavailable
}

func ExampleAllowNonIdempotent() {
	srv := flaky(1, http.StatusServiceUnavailable)
	defer srv.Close()
	client, err := httpretry.NewClient(quick, httpretry.AllowNonIdempotent())
	if err != nil {
		log.Fatal(err)
	}
	show(client.Post(srv.URL, "application/json", strings.NewReader("{}")))
	// Output: 200 ok
}

func ExampleAddIdempotencyKey() {
	var keys []string
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	client, err := httpretry.NewClient(quick, httpretry.AddIdempotencyKey())
	if err != nil {
		log.Fatal(err)
	}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, len(keys), "attempts, same key:", keys[0] == keys[1], "length:", len(keys[0]))
	// Output: 200 2 attempts, same key: true length: 36
}

// A CLI prints one line per retry and the reason of a give-up from the
// events, with the HTTP details of each attempt.
func ExampleAttemptError() {
	srv := flaky(2, http.StatusServiceUnavailable)
	defer srv.Close()
	p := quick
	p.Observer = func(_ context.Context, e retry.Event) {
		var ae *httpretry.AttemptError
		if e.Kind != retry.EventRetry || !errors.As(e.Err, &ae) {
			return
		}
		u, _ := url.Parse(ae.URL)
		fmt.Printf("attempt %d/%d: %s %s: %d (%s), retrying in %v\n", e.Attempt, e.MaxAttempts, ae.Method, u.Path, ae.Status, ae.Class, e.Wait)
	}
	client, err := httpretry.NewClient(p)
	if err != nil {
		log.Fatal(err)
	}
	show(client.Get(srv.URL + "/v1/models?key=SECRET"))
	// Output:
	// attempt 1/5: GET /v1/models: 503 (status), retrying in 1ms
	// attempt 2/5: GET /v1/models: 503 (status), retrying in 2ms
	// 200 ok
}

func ExampleMaxBufferedBody() {
	srv := flaky(1, http.StatusServiceUnavailable)
	defer srv.Close()
	p := quick
	p.Observer = func(_ context.Context, e retry.Event) {
		if errors.Is(e.Err, httpretry.ErrBodyNotReplayable) {
			fmt.Println("not retried: the body cannot be replayed")
		}
	}
	client, err := httpretry.NewClient(p, httpretry.MaxBufferedBody(4))
	if err != nil {
		log.Fatal(err)
	}
	// io.MultiReader hides the type, so the request has no GetBody; 10 bytes
	// are more than the 4 that may be buffered.
	req, _ := http.NewRequest(http.MethodPut, srv.URL, io.MultiReader(strings.NewReader("0123456789")))
	show(client.Do(req))
	// Output:
	// not retried: the body cannot be replayed
	// 503 Service Unavailable
}

func ExampleWithAttemptTimeout() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-r.Context().Done() // the first attempt hangs
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	client, err := httpretry.NewClient(quick, httpretry.WithAttemptTimeout(100*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	show(client.Get(srv.URL))
	fmt.Println("attempts:", n.Load())
	// Output:
	// 200 ok
	// attempts: 2
}

func ExampleWithLogger() {
	srv := flaky(1, http.StatusServiceUnavailable)
	defer srv.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key { // drop what changes from run to run
			case slog.TimeKey, "host", "endpoint", "elapsed":
				return slog.Attr{}
			}
			return a
		},
	}))
	client, err := httpretry.NewClient(quick, httpretry.WithLogger(logger))
	if err != nil {
		log.Fatal(err)
	}
	show(client.Get(srv.URL + "/v1/models?key=SECRET"))
	// Output:
	// level=INFO msg="httpretry: retry" method=GET path=/v1/models status=503 attempt=1 max_attempts=5 wait=1ms
	// 200 ok
}

// Fall back from an overloaded regional endpoint to the next one: the 429
// moves the retry, path and query stay.
func ExampleWithEndpoints() {
	regional := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "quota", http.StatusTooManyRequests)
	}))
	defer regional.Close()
	global := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "served %s?%s", r.URL.Path, r.URL.RawQuery)
	}))
	defer global.Close()

	client, err := httpretry.NewClient(quick, httpretry.WithEndpoints([]string{regional.URL, global.URL}, time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	show(client.Get("https://us-central1-aiplatform.googleapis.com/v1/models?alt=sse"))
	// Output: 200 served /v1/models?alt=sse
}

func ExampleParseRetryAfter() {
	// A response's headers: a date is measured from the response's Date
	// (the server's clock), whatever this machine's clock says.
	h := http.Header{"Date": {"Mon, 30 Nov 2026 12:00:00 GMT"}}
	now, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		now = time.Now()
	}
	for _, v := range []string{"120", "Mon, 30 Nov 2026 12:00:30 GMT", "soon"} {
		d, ok := httpretry.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 0s false
}

func ExampleParseRetryInfo() {
	body := []byte(`{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
	  {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "25s"}]}}`)
	fmt.Println(httpretry.ParseRetryInfo(body))
	// Output: 25s true
}

func ExampleRedact() {
	u, _ := url.Parse("https://user:pw@generativelanguage.googleapis.com/v1beta/models?key=AIza123&pageSize=5")
	fmt.Println(httpretry.Redact(u))
	// Output: https://generativelanguage.googleapis.com/v1beta/models?key=REDACTED&pageSize=5
}

// A server's error text, quoted in an error message, may hold credentials
// anywhere: URLs' secret parameters, API keys, tokens, credential headers.
func ExampleRedactText() {
	msg := `Post "https://example.com/v1/m:generateContent?key=AIzaSyA0123456789abcdefghijklmnopq_-XYZ": ` +
		`the server said: "API key AIzaSyA0123456789abcdefghijklmnopq_-XYZ not valid; ` +
		`x-goog-api-key: AIzaSyA0123456789abcdefghijklmnopq_-XYZ; Authorization: Bearer ya29.a0secret"`
	fmt.Println(httpretry.RedactText(msg))
	// Output: Post "https://example.com/v1/m:generateContent?key=REDACTED": the server said: "API key REDACTED not valid; x-goog-api-key: REDACTED; Authorization: REDACTED"
}

func ExampleRedactHeader() {
	h := http.Header{"Authorization": {"Bearer ya29.abc"}, "Content-Type": {"application/json"}}
	r := httpretry.RedactHeader(h)
	fmt.Println(r.Get("Authorization"), r.Get("Content-Type"))
	// Output: REDACTED application/json
}

func ExampleTransport_Err() {
	t := httpretry.NewTransport(nil, retry.Policy{}, httpretry.WithEndpoints([]string{"ftp://mirror"}, time.Minute))
	fmt.Println(t.Err())
	// Output: httpretry: WithEndpoints: endpoint 0 "ftp://mirror": the scheme must be http or https
}

// geminiStream starts a loopback server that streams like Gemini's
// streamGenerateContent?alt=sse: the first request's stream begins with a
// quota error (RetryInfo asks for 10 ms), later ones stream two chunks.
func geminiStream() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if n.Add(1) == 1 {
			io.WriteString(w, `data: {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [`+
				`{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.01s"}]}}`+"\r\n\r\n")
			return
		}
		for _, text := range []string{"Hello", " world"} {
			fmt.Fprintf(w, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": %q}]}}]}\r\n\r\n", text)
			w.(http.Flusher).Flush()
		}
	}))
}

// A stream whose first event is a quota error is retried, after the wait its
// RetryInfo asks for; the caller only sees the good stream.
func ExampleWithStreamPeek() {
	srv := geminiStream()
	defer srv.Close()
	p := quick
	p.Observer = func(_ context.Context, e retry.Event) {
		var ae *httpretry.AttemptError
		if e.Kind == retry.EventRetry && errors.As(e.Err, &ae) {
			fmt.Println("retry after:", ae.Class, ae.Status, ae.HintSource)
		}
	}
	client, err := httpretry.NewClient(p) // peeking is on; WithStreamPeek(false) turns it off
	if err != nil {
		log.Fatal(err)
	}
	// generateContent changes no server state: safe to repeat.
	req, _ := http.NewRequestWithContext(httpretry.Idempotent(context.Background()), http.MethodPost,
		srv.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", strings.NewReader(`{"contents": []}`))
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Print(strings.ReplaceAll(string(b), "\r\n", "\n"))
	// Output:
	// retry after: stream-error 429 retryinfo
	// data: {"candidates": [{"content": {"parts": [{"text": "Hello"}]}}]}
	//
	// data: {"candidates": [{"content": {"parts": [{"text": " world"}]}}]}
}

// Peeking can be turned off for one request: the caller then sees the error
// event itself, as the server sent it.
func ExampleStreamPeek() {
	srv := geminiStream()
	defer srv.Close()
	client, err := httpretry.NewClient(quick)
	if err != nil {
		log.Fatal(err)
	}
	ctx := httpretry.StreamPeek(context.Background(), false)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/stream", nil)
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	first, _ := bufio.NewReader(resp.Body).ReadString('\n')
	fmt.Println(resp.StatusCode, strings.Contains(first, "RESOURCE_EXHAUSTED"))
	// Output: 200 true
}

// The headers of a profile, for a client that sets its own, such as the Gen
// AI SDK's genai.HTTPOptions.Headers.
func ExampleProfileHeader() {
	for _, name := range []string{"flex", "priority", "standard"} {
		h, err := httpretry.ProfileHeader(name)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %v\n", name, h)
	}
	_, err := httpretry.ProfileHeader("premium")
	fmt.Println(err)
	// Output:
	// flex: map[X-Vertex-Ai-Llm-Request-Type:[shared] X-Vertex-Ai-Llm-Shared-Request-Type:[flex]]
	// priority: map[X-Vertex-Ai-Llm-Shared-Request-Type:[priority]]
	// standard: map[]
	// httpretry: ProfileHeader: unknown profile "premium" (want one of standard, flex, priority, provisioned, realtime, batch, model-armor)
}

// The flex profile: its policy (3 attempts of up to 10 minutes each) from
// retry.Profile, its headers from WithProfile. A header the caller sets
// wins.
func ExampleWithProfile() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "Request-Type=%s Shared-Request-Type=%s",
			r.Header.Get("X-Vertex-AI-LLM-Request-Type"), r.Header.Get("X-Vertex-AI-LLM-Shared-Request-Type"))
	}))
	defer srv.Close()

	p, err := retry.Profile("flex")
	if err != nil {
		log.Fatal(err)
	}
	client, err := httpretry.NewClient(p, httpretry.WithProfile("flex"))
	if err != nil {
		log.Fatal(err)
	}
	show(client.Get(srv.URL))

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("X-Vertex-AI-LLM-Request-Type", "dedicated") // the caller's
	show(client.Do(req))
	// Output:
	// 200 Request-Type=shared Shared-Request-Type=flex
	// 200 Request-Type=dedicated Shared-Request-Type=flex
}

// offline is a base transport that sends nothing.
type offline struct{}

func (offline) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("offline: nothing is sent")
}

// Priority (and Flex) pay-as-you-go exist on Vertex AI's global endpoint
// only: the priority profile refuses a fallback list that names a region,
// and a request to a regional host.
func ExampleWithProfile_priority() {
	p, err := retry.Profile("priority")
	if err != nil {
		log.Fatal(err)
	}
	_, err = httpretry.NewClient(p, httpretry.WithProfile("priority"), httpretry.WithEndpoints([]string{
		"https://aiplatform.googleapis.com",
		"https://us-central1-aiplatform.googleapis.com",
	}, time.Minute))
	fmt.Println(errors.Is(err, httpretry.ErrRegionalEndpoint))
	fmt.Println(err)

	// A request to a multi-region is refused before it is sent (offline, the
	// base transport here, would refuse to send it anyway).
	client := &http.Client{Transport: httpretry.NewTransport(offline{}, p, httpretry.WithProfile("priority"))}
	_, err = client.Post("https://aiplatform.eu.rep.googleapis.com/v1/projects/p/locations/eu/publishers/google/models/gemini-2.5-pro:generateContent",
		"application/json", strings.NewReader(`{"contents": []}`))
	fmt.Println(errors.Is(err, httpretry.ErrRegionalEndpoint))
	// Output:
	// true
	// httpretry: WithProfile("priority"): WithEndpoints: endpoint 1 "https://us-central1-aiplatform.googleapis.com": us-central1-aiplatform.googleapis.com is a regional Vertex AI endpoint; Priority PayGo is served by the global endpoint (aiplatform.googleapis.com) only
	// true
}
