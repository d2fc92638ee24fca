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
// Then it streams, with the SDK's GenerateContentStream
// (streamGenerateContent?alt=sse, answered 200 with text/event-stream): the
// first stream's only event is the same 429 with RetryInfo, the second
// connection is reset after the headers, before any event, the third
// stream is good. The transport holds each stream until its first event is
// complete, so it retries the first two and the range loop gets every chunk
// of the third exactly once, and no error. Last, a stream that fails after
// its first chunk: that one is never retried (a retry would repeat the
// chunk), so the loop gets the chunk, then the error, from one request.
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
//   - Mark nothing. The SDK's calls are POSTs, but httpretry knows the
//     methods of Gemini and Vertex AI that change no server state
//     (generateContent, streamGenerateContent, countTokens, computeTokens,
//     embedContent, batchEmbedContents, predict, rawPredict): it retries
//     them like a GET, after any retryable status (408, 429, 500, 502, 503,
//     504 by default) or a reset, and holds a stream until its first event. Calls that create something (file uploads, caches,
//     tuning and batch jobs) are retried only after a refusal (a 429, or a
//     503 with a Retry-After or RetryInfo), which says the server did not
//     act. Mark a call's context with httpretry.NotIdempotent to have it
//     sent again only when it never reached the server.
//   - For Vertex AI's Priority or Flex pay-as-you-go, take the policy from
//     retry.Profile(name), the headers from httpretry.ProfileHeader(name)
//     into genai.HTTPOptions.Headers, and build the transport with
//     httpretry.WithProfile(name) too: it refuses a regional endpoint
//     (both options exist on the global endpoint only; use Location
//     "global") and adds the headers to requests made outside the SDK. The
//     SDK's headers come first: the transport never adds a second value.
//     Without the headers, Vertex AI serves Standard pay-as-you-go,
//     whatever the policy. Leave HTTPOptions.Timeout unset for flex: the
//     SDK applies it to the whole call, retries included, while the
//     profile's AttemptTimeout (10 minutes) bounds each attempt.
package main

import (
	"context"
	"errors"
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

// newProfileClient returns a client for Vertex AI at baseURL (express mode:
// an API key) whose requests go through hc and carry, in
// genai.HTTPOptions.Headers, the request headers of the retry profile
// name: for "priority" and "flex" the headers that select Priority or
// Flex pay-as-you-go, none for the others.
func newProfileClient(ctx context.Context, baseURL string, hc *http.Client, profile string) (*genai.Client, error) {
	h, err := httpretry.ProfileHeader(profile)
	if err != nil {
		return nil, err
	}
	return genai.NewClient(ctx, &genai.ClientConfig{
		APIKey:      demoAPIKey,
		Backend:     genai.BackendVertexAI,
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: baseURL, Headers: h},
	})
}

// profileClient returns the http.Client of a retry profile: the profile's
// policy (with the demo's short waits) and its headers and endpoint rule
// (httpretry.WithProfile).
func profileClient(profile string, opts ...httpretry.Option) (*http.Client, error) {
	p, err := retry.Profile(profile)
	if err != nil {
		return nil, err
	}
	d := demoPolicy()
	p = p.Merge(retry.Policy{InitialDelay: d.InitialDelay, MaxDelay: d.MaxDelay, Jitter: d.Jitter, MaxRetryAfter: d.MaxRetryAfter})
	return httpretry.NewClient(p, append(opts, httpretry.WithProfile(profile))...)
}

// generateTraffic asks the model for a greeting and returns the answer's
// text and its usageMetadata.trafficType: which consumption option served
// it (Vertex AI only; the transport does not read the answer's body, the
// SDK does).
func generateTraffic(ctx context.Context, c *genai.Client) (string, genai.TrafficType, error) {
	resp, err := c.Models.GenerateContent(ctx, model, genai.Text("Say hello."), nil)
	if err != nil {
		return "", "", err
	}
	var traffic genai.TrafficType
	if resp.UsageMetadata != nil {
		traffic = resp.UsageMetadata.TrafficType
	}
	return resp.Text(), traffic, nil
}

// generate asks the model for a greeting. The context carries no mark:
// generateContent changes no server state, and httpretry knows it.
func generate(ctx context.Context, c *genai.Client) (string, error) {
	resp, err := c.Models.GenerateContent(ctx, model, genai.Text("Say hello."), nil)
	if err != nil {
		return "", err
	}
	return resp.Text(), nil
}

// stream asks the model for a greeting, streamed, and returns the text of
// each chunk in the order received, and the error that ended the stream, if
// any (after the chunks it ended).
//
// The context carries no mark: streamGenerateContent is a POST, but it
// changes no server state, so httpretry may send it again. It holds the
// answer until its first event, retries the request if that event is a
// retryable error (a 429 with RetryInfo, waiting at least the hint) or if
// the connection fails before it, and never retries once the first event
// has been handed to the SDK.
func stream(ctx context.Context, c *genai.Client) ([]string, error) {
	var texts []string
	for chunk, err := range c.Models.GenerateContentStream(ctx, model, genai.Text("Say hello."), nil) {
		if err != nil {
			return texts, err
		}
		texts = append(texts, chunk.Text())
	}
	return texts, nil
}

func main() {
	if err := run(os.Stdout, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, "genai example:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, logger *slog.Logger) error {
	hc, err := httpretry.NewClient(demoPolicy(), httpretry.WithLogger(logger))
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	ctx := context.Background()

	// generateContent: a 429 with RetryInfo, a 503 with Retry-After, a 200.
	err = withFake(ctx, hc, []reply{reply429, reply503, replyOK}, func(c *genai.Client) error {
		text, err := generate(ctx, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "model says: %s\n", text)
		return nil
	}, out, "server hits")
	if err != nil {
		return err
	}

	// streamGenerateContent: the 429 as the first event, a reset before the
	// first event, a good stream.
	err = withFake(ctx, hc, []reply{streamQuota, streamReset, streamOK}, func(c *genai.Client) error {
		texts, err := stream(ctx, c)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "stream chunks: %q\n", texts)
		return nil
	}, out, "stream server hits")
	if err != nil {
		return err
	}

	// A stream that fails after its first chunk: not retried.
	err = withFake(ctx, hc, []reply{streamCut}, func(c *genai.Client) error {
		texts, err := stream(ctx, c)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) {
			return fmt.Errorf("stream cut after its first chunk: got %q, %v; want the chunk and the API error", texts, err)
		}
		fmt.Fprintf(out, "cut stream chunks: %q, then error %d %s\n", texts, apiErr.Code, apiErr.Status)
		return nil
	}, out, "cut stream server hits")
	if err != nil {
		return err
	}

	// The priority and flex profiles on Vertex AI: a 503, then the answer,
	// both requests with the profile's headers (the fake refuses others).
	for _, profile := range []string{"priority", "flex"} {
		if err := profileDemo(ctx, out, logger, profile); err != nil {
			return fmt.Errorf("profile %s: %w", profile, err)
		}
	}
	return nil
}

// profileDemo calls generateContent on a fake Vertex AI with a client of
// the retry profile, and prints the headers the fake saw and the traffic
// type it answered.
func profileDemo(ctx context.Context, out io.Writer, logger *slog.Logger, profile string) error {
	hc, err := profileClient(profile, httpretry.WithLogger(logger))
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	fake := newFakeGemini(reply{status: http.StatusServiceUnavailable, body: error503}, replyOK)
	if fake.consumption, err = httpretry.ProfileHeader(profile); err != nil {
		return err
	}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c, err := newProfileClient(ctx, srv.URL, hc, profile)
	if err != nil {
		return err
	}
	_, traffic, err := generateTraffic(ctx, c)
	if err != nil {
		return err
	}
	hits := fake.Hits()
	fmt.Fprintf(out, "profile %s: %d requests, each with %s %q and %s %q; served as %s\n", profile, len(hits),
		headerRequestType, hits[0].requestType, headerSharedRequestType, hits[0].sharedType, traffic)
	return nil
}

// withFake starts a fake Gemini on loopback answering script, runs call
// with a client of it, and prints the number of requests the fake saw and
// the time taken.
func withFake(ctx context.Context, hc *http.Client, script []reply, call func(*genai.Client) error, out io.Writer, label string) error {
	fake := newFakeGemini(script...)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c, err := newClient(ctx, srv.URL, hc, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := call(c); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %d, took %v\n", label, len(fake.Hits()), time.Since(start).Round(10*time.Millisecond))
	return nil
}
