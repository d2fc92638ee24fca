package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/testkit"
	"google.golang.org/genai"
)

// Answers of the other methods the fake serves.
var (
	replyCount = reply{status: http.StatusOK, body: `{"totalTokens": 3}`}
	// batchEmbedContents, the Gemini API's EmbedContent.
	replyBatchEmbed = reply{status: http.StatusOK, body: `{"embeddings": [{"values": [0.25, 0.5]}]}`}
	// embedContent and predict on Vertex AI.
	replyVertexEmbed   = reply{status: http.StatusOK, body: `{"embedding": {"values": [0.25, 0.5]}, "usageMetadata": {"promptTokenCount": 1}}`}
	replyVertexPredict = reply{status: http.StatusOK, body: `{"predictions": [{"embeddings": {"values": [0.25, 0.5]}}]}`}
)

// errorReply is a Google JSON error with status code.
func errorReply(code int, status string) reply {
	return reply{status: code, body: fmt.Sprintf(`{"error": {"code": %d, "message": "fake %s", "status": %q}}`, code, status, status)}
}

// TestUnmarkedCallsRetried is the proof of issue 28 with the real genai
// client: the README's setup (an httpretry client in
// genai.ClientConfig.HTTPClient, the SDK's retries off), no mark on any
// context, Google's policy without jitter, in virtual time. Every call of
// the SDK is a POST. The ones that change no server state are retried
// after a 429 (waiting its RetryInfo), a 503 or a 500, on the Gemini API
// and on Vertex AI; a stream whose first event is a 429 is sent again; the
// start of a file upload (it creates the file) is not retried after a 500,
// only after a refusal.
func TestUnmarkedCallsRetried(t *testing.T) {
	quota := reply{status: http.StatusTooManyRequests, body: body25(t)} // RetryInfo 25s
	generate := func(ctx context.Context, c *genai.Client) error {
		resp, err := c.Models.GenerateContent(ctx, model, genai.Text("Say hello."), nil)
		if err == nil && resp.Text() != wantText {
			err = fmt.Errorf("text %q", resp.Text())
		}
		return err
	}
	streamAll := func(ctx context.Context, c *genai.Client) error {
		texts, err := stream(ctx, c)
		if err == nil && !slices.Equal(texts, chunks) {
			err = fmt.Errorf("chunks %q, want %q", texts, chunks)
		}
		return err
	}
	count := func(ctx context.Context, c *genai.Client) error {
		resp, err := c.Models.CountTokens(ctx, model, genai.Text("Say hello."), nil)
		if err == nil && resp.TotalTokens != 3 {
			err = fmt.Errorf("%d tokens", resp.TotalTokens)
		}
		return err
	}
	embed := func(model string) func(context.Context, *genai.Client) error {
		return func(ctx context.Context, c *genai.Client) error {
			resp, err := c.Models.EmbedContent(ctx, model, genai.Text("hello"), nil)
			if err == nil && (len(resp.Embeddings) != 1 || !slices.Equal(resp.Embeddings[0].Values, []float32{0.25, 0.5})) {
				err = fmt.Errorf("embeddings %+v", resp.Embeddings)
			}
			return err
		}
	}
	upload := func(ctx context.Context, c *genai.Client) error {
		_, err := c.Files.Upload(ctx, strings.NewReader("file data"), &genai.UploadFileConfig{MIMEType: "text/plain"})
		return err
	}
	const (
		genPath      = "/v1beta/models/" + model + ":generateContent"
		countPath    = "/v1beta/models/" + model + ":countTokens"
		batchPath    = "/v1beta/models/gemini-embedding-001:batchEmbedContents"
		vEmbedPath   = "/v1beta1/publishers/google/models/gemini-embedding-2:embedContent"
		vPredictPath = "/v1beta1/publishers/google/models/text-embedding-005:predict"
	)
	tests := []struct {
		name    string
		vertex  bool // a Vertex AI client (express mode), else the Gemini API
		opts    []httpretry.Option
		ctx     func(context.Context) context.Context
		call    func(context.Context, *genai.Client) error
		script  []reply
		path    string
		hits    []int         // the status of each hit (200 for a stream)
		elapsed time.Duration // virtual time: the waits
		errCode int           // the APIError's code, 0 for success
	}{
		{name: "generateContent after a 429: waits its RetryInfo", call: generate, script: []reply{quota, replyOK},
			path: genPath, hits: []int{429, 200}, elapsed: 25 * time.Second},
		{name: "generateContent after a 503", call: generate, script: []reply{errorReply(503, "UNAVAILABLE"), replyOK},
			path: genPath, hits: []int{503, 200}, elapsed: time.Second},
		{name: "generateContent after a 500 and a 500", call: generate,
			script: []reply{errorReply(500, "INTERNAL"), errorReply(500, "INTERNAL"), replyOK},
			path:   genPath, hits: []int{500, 500, 200}, elapsed: time.Second + 2*time.Second},
		{name: "countTokens after a 500", call: count, script: []reply{errorReply(500, "INTERNAL"), replyCount},
			path: countPath, hits: []int{500, 200}, elapsed: time.Second},
		{name: "countTokens after a 503", call: count, script: []reply{errorReply(503, "UNAVAILABLE"), replyCount},
			path: countPath, hits: []int{503, 200}, elapsed: time.Second},
		{name: "embedContent (batchEmbedContents) after a 500", call: embed("gemini-embedding-001"),
			script: []reply{errorReply(500, "INTERNAL"), replyBatchEmbed}, path: batchPath, hits: []int{500, 200}, elapsed: time.Second},
		{name: "embedContent on Vertex AI after a 502", vertex: true, call: embed("gemini-embedding-2"),
			script: []reply{errorReply(502, "UNAVAILABLE"), replyVertexEmbed}, path: vEmbedPath, hits: []int{502, 200}, elapsed: time.Second},
		{name: "embedContent on Vertex AI (predict) after a 504", vertex: true, call: embed("text-embedding-005"),
			script: []reply{errorReply(504, "DEADLINE_EXCEEDED"), replyVertexPredict}, path: vPredictPath, hits: []int{504, 200}, elapsed: time.Second},
		{name: "streamGenerateContent whose first event is a 429", call: streamAll, script: []reply{streamOf(body25(t)), streamOK},
			path: streamPath, hits: []int{200, 200}, elapsed: 25 * time.Second},
		{name: "a file upload answered 500: not retried", call: upload, script: []reply{errorReply(500, "INTERNAL"), errorReply(500, "INTERNAL")},
			path: uploadPath, hits: []int{500}, errCode: 500},
		{name: "a file upload refused with a 429, then 500", call: upload, script: []reply{quota, errorReply(500, "INTERNAL")},
			path: uploadPath, hits: []int{429, 500}, elapsed: 25 * time.Second, errCode: 500},
		{name: "Google's rule off: generateContent after a 500 is not retried", opts: []httpretry.Option{httpretry.WithGoogleReadOnly(false)},
			call: generate, script: []reply{errorReply(500, "INTERNAL"), replyOK}, path: genPath, hits: []int{500}, errCode: 500},
		{name: "NotIdempotent: countTokens after a 429 is not retried", ctx: httpretry.NotIdempotent,
			call: count, script: []reply{quota, replyCount}, path: countPath, hits: []int{429}, errCode: 429},
	}
	global := captureLogs(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFakeGemini(tt.script...)
				p := retry.Google()
				p.Jitter = retry.Zero
				hc, logs := pipeHTTPClient(t, fake, p, tt.opts...)
				cfg := &genai.ClientConfig{APIKey: demoAPIKey, Backend: genai.BackendGeminiAPI, HTTPClient: hc,
					HTTPOptions: genai.HTTPOptions{BaseURL: "http://gemini.test"}}
				if tt.vertex {
					cfg.Backend, cfg.HTTPOptions.BaseURL = genai.BackendVertexAI, "http://vertex.test"
				}
				c, err := genai.NewClient(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				if tt.ctx != nil {
					ctx = tt.ctx(ctx)
				}
				start := time.Now()
				err = tt.call(ctx, c)
				elapsed := time.Since(start)
				synctest.Wait() // the fake's goroutines are done counting

				// Files.Upload quotes the APIError's text (%s, not %w).
				var apiErr genai.APIError
				isCode := (errors.As(err, &apiErr) && apiErr.Code == tt.errCode) ||
					(err != nil && strings.Contains(err.Error(), fmt.Sprintf("Error %d,", tt.errCode)))
				switch {
				case tt.errCode == 0 && err != nil:
					t.Errorf("call: %v, want success", err)
				case tt.errCode != 0 && !isCode:
					t.Errorf("call: %v, want the %d", err, tt.errCode)
				}
				hits := fake.Hits()
				var got []int
				for _, h := range hits {
					got = append(got, h.status)
					if h.method != http.MethodPost || h.path != tt.path || h.apiKey != demoAPIKey {
						t.Errorf("hit %s %s (key %q), want a POST to %s with the key", h.method, h.path, h.apiKey, tt.path)
					}
				}
				if !slices.Equal(got, tt.hits) {
					t.Errorf("the fake answered %v, want %v", got, tt.hits)
				}
				if elapsed != tt.elapsed {
					t.Errorf("took %v of virtual time, want the waits, %v", elapsed, tt.elapsed)
				}
				checkNoKey(t, map[string]*testkit.Buffer{"transport log": logs, "default loggers": global})
			})
		})
	}
}
