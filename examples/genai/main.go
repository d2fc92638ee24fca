// Command genai shows the Gen AI SDK for Go (google.golang.org/genai) calling
// Gemini through an httpretry client, against a local fake Gemini endpoint,
// so it runs offline:
//
//	cd examples/genai && go run .
//
// The fake answers the first generateContent with a 429 carrying a
// google.rpc.RetryInfo (retryDelay 0.3s), the second with a 503 and
// Retry-After: 1, the third with a valid response. The log shows each retry
// with the server's hint, and no API key.
//
// What we recommend, and why:
//
//   - Plug httpretry into genai.ClientConfig.HTTPClient and leave
//     genai.HTTPOptions.RetryOptions nil, which keeps the SDK's own retries off
//     (nil is the Go SDK's default). Our transport honours Retry-After and
//     RetryInfo, the policy's Deadline, budgets and throttles; the SDK's loop
//     ignores server hints.
//   - Never turn both on: the SDK's loop runs around our transport, so every
//     SDK attempt becomes a full retried call of ours. With 3 attempts each a
//     failing request reaches the server 3 × 3 = 9 times (the tests count
//     them), and the waits add up.
//   - Mark generateContent calls as safe to retry with httpretry.Idempotent:
//     they are POSTs, which httpretry does not retry by default, but they change
//     no server state. Do not mark calls that create resources (tuning jobs,
//     file uploads, caches).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"google.golang.org/genai"
)

// model is the model the demo asks; the fake accepts any.
const model = "gemini-2.5-flash"

// demoAPIKey is sent to the fake only. A real key comes from the environment
// (GEMINI_API_KEY) and, like this one, never reaches the logs.
const demoAPIKey = "demo-key-do-not-log"

// demoPolicy is Google's algorithm with short waits so that the demo takes
// about 1.3 s: the backoff is 10 ms, 20 ms, ... capped at 100 ms, while a
// server's hint is honoured up to 5 s (MaxRetryAfter). In production start
// from retry.Google() (or the zero Policy), whose MaxRetryAfter is 60 s.
func demoPolicy() retry.Policy {
	return retry.Policy{
		Attempts:      5,
		InitialDelay:  10 * time.Millisecond,
		MaxDelay:      100 * time.Millisecond,
		Jitter:        10 * time.Millisecond,
		MaxRetryAfter: 5 * time.Second,
		Deadline:      30 * time.Second,
	}
}

// newClient returns a genai client for the Gemini API at baseURL whose
// requests go through hc. retryOpts nil keeps the SDK's own retries off,
// which is what we recommend when hc retries.
func newClient(ctx context.Context, baseURL string, hc *http.Client, retryOpts *genai.HTTPRetryOptions) (*genai.Client, error) {
	return genai.NewClient(ctx, &genai.ClientConfig{
		APIKey:     demoAPIKey,
		Backend:    genai.BackendGeminiAPI,
		HTTPClient: hc,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:      baseURL,
			RetryOptions: retryOpts,
		},
	})
}

// generate asks the model for a greeting. The context is marked idempotent:
// generateContent changes no server state, so httpretry may retry the POST.
func generate(ctx context.Context, c *genai.Client) (string, error) {
	resp, err := c.Models.GenerateContent(httpretry.Idempotent(ctx), model, genai.Text("Say hello."), nil)
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

func main() {
	if err := run(os.Stdout, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, "genai example:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, logger *slog.Logger) error {
	fake := newFakeGemini(reply429, reply503, replyOK)
	srv := httptest.NewServer(fake)
	defer srv.Close()

	ctx := context.Background()
	hc, err := httpretry.NewClient(demoPolicy(), httpretry.WithLogger(logger))
	if err != nil {
		return err
	}
	c, err := newClient(ctx, srv.URL, hc, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	text, err := generate(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "model says: %s\n", text)
	fmt.Fprintf(out, "server hits: %d, took %v\n", len(fake.Hits()), time.Since(start).Round(10*time.Millisecond))
	return nil
}
