package bench

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestHTTPPeers checks that every HTTP client is configured as the benchmark
// claims: a 200 takes one request, and (for the retrying clients) a 503
// followed by a 200 takes exactly two and ends in the 200. The waits are
// shortened to 1 ms so that the loopback test stays quick.
func TestHTTPPeers(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		fail int64
	}{
		{"get-200", 0},
		{"503-then-200", 1},
	} {
		for _, p := range httpPeers {
			if p.name == "bare" && tt.fail > 0 {
				continue // bare does not retry
			}
			t.Run(tt.name+"/"+p.name, func(t *testing.T) {
				srv, hits := countingServer(t, tt.fail)
				base := newBase()
				defer base.CloseIdleConnections()
				get := p.newGetter(base, time.Millisecond, time.Millisecond)
				code, err := get(ctx, srv.URL)
				if err != nil || code != http.StatusOK {
					t.Fatalf("got (%d, %v), want 200", code, err)
				}
				if got, want := hits.Load(), tt.fail+1; got != want {
					t.Fatalf("server saw %d requests, want %d", got, want)
				}
			})
		}
	}
}
