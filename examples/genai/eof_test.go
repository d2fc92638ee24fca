package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

// TestGenerateContentStreamWithoutFinalBlankLine: a server (a proxy, a
// Gemini-compatible server, a test double) whose stream ends right after
// its last data line, without the blank line that would end the event.
// The genai SDK's scanner takes that line as a chunk; so must the
// transport: one request, the chunks at once, no error. Before the fix the
// transport took the one-event stream for one that failed before its first
// event and asked again on every attempt: 5 generations, paid, and the
// backoff waits, for the answer it already had.
func TestGenerateContentStreamWithoutFinalBlankLine(t *testing.T) {
	events := chunkEvents([]string{"Hello", " world."})
	for _, tc := range []struct {
		name string
		body string
		want []string
	}{
		{"one event, LF", "data: " + events[1] + "\n", []string{" world."}},
		{"one event, CRLF", "data: " + events[1] + "\r\n", []string{" world."}},
		{"two events, the last without its blank line", "data: " + events[0] + "\r\n\r\ndata: " + events[1] + "\r\n", []string{"Hello", " world."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var hits atomic.Int32
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					hits.Add(1)
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, tc.body)
				})
				p := retry.Google()
				p.Rand = retry.NewRand(1)
				c, _ := pipeClient(t, h, p)
				start := time.Now()
				texts, err := stream(context.Background(), c)
				if err != nil || !slices.Equal(texts, tc.want) {
					t.Fatalf("stream = %q, %v; want %q", texts, err, tc.want)
				}
				if n, took := hits.Load(), time.Since(start); n != 1 || took != 0 {
					t.Fatalf("%d requests in %v (virtual); want 1, at once", n, took)
				}
			})
		})
	}
}
