package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
)

// body is the small response body every server sends.
var body = []byte("{\"ok\":true,\"padding\":\"0123456789abcdef0123456789abcdef\"}\n")

// newBase returns the base transport every client is built on: keep-alive
// on, enough idle connections per host that no benchmark redials, no proxy
// lookup. Each client gets its own, so pools are not shared between
// libraries.
func newBase() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
}

// getter sends one GET of url, reads the whole body and closes it, and
// returns the status code.
type getter func(ctx context.Context, url string) (int, error)

// httpPeer is one HTTP client under comparison.
type httpPeer struct {
	name string
	// newGetter builds a client on base that retries up to attemptsMax
	// attempts in all, waiting initial, then twice as long each time, at
	// most maxDelay (bare does not retry).
	newGetter func(base *http.Transport, initial, maxDelay time.Duration) getter
}

// do sends req with c, drains and closes the body.
func do(c *http.Client, req *http.Request) (int, error) {
	return drain(c.Do(req))
}

// drain reads resp's body to the end and closes it, and returns its status.
func drain(resp *http.Response, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// clientGetter returns a getter that builds a plain *http.Request per call
// and sends it with c.
func clientGetter(c *http.Client) getter {
	return func(ctx context.Context, url string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		return do(c, req)
	}
}

var httpPeers = []httpPeer{
	{
		name: "bare",
		newGetter: func(base *http.Transport, _, _ time.Duration) getter {
			return clientGetter(&http.Client{Transport: base})
		},
	},
	{
		name: "ours",
		newGetter: func(base *http.Transport, initial, maxDelay time.Duration) getter {
			// The benchmark asks for Google's defaults (1 s, 60 s, 5
			// attempts, up to 1 s of jitter): that is retry.Policy{}.
			// Other waits (the test's) are taken without jitter.
			p := retry.Policy{}
			if initial != retry.DefaultInitialDelay || maxDelay != retry.DefaultMaxDelay {
				p = retry.Policy{Attempts: attemptsMax, InitialDelay: initial, MaxDelay: maxDelay, Jitter: retry.Zero}
			}
			return clientGetter(&http.Client{Transport: httpretry.NewTransport(base, p)})
		},
	},
	{
		name: "retryablehttp",
		newGetter: func(base *http.Transport, initial, maxDelay time.Duration) getter {
			c := retryablehttp.NewClient()
			c.HTTPClient = &http.Client{Transport: base}
			c.Logger = nil // its default logs every request to stderr
			c.RetryMax = attemptsMax - 1
			c.RetryWaitMin = initial
			c.RetryWaitMax = maxDelay
			return func(ctx context.Context, url string) (int, error) {
				req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return 0, err
				}
				return drain(c.Do(req))
			}
		},
	},
	{
		name: "failsafehttp",
		newGetter: func(base *http.Transport, initial, maxDelay time.Duration) getter {
			rp := failsafehttp.NewRetryPolicyBuilder().
				WithMaxAttempts(attemptsMax).
				WithBackoff(initial, maxDelay).
				ReturnLastFailure().
				Build()
			return clientGetter(&http.Client{Transport: failsafehttp.NewRoundTripper(base, rp)})
		},
	},
}

// countingServer starts a loopback server that answers the first fail
// requests with 503 and every other with 200 and body, and counts requests.
func countingServer(tb testing.TB, fail int64) (*httptest.Server, *atomic.Int64) {
	tb.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	tb.Cleanup(srv.Close)
	return srv, &hits
}

// BenchmarkTransport measures one GET per iteration against a loopback
// server answering 200 with a small body: build the request, send it, read
// the body to the end, close it. Every retrying client has Google's default
// waits (1 s initial, 60 s cap) and 5 attempts, which a 200 never uses.
func BenchmarkTransport(b *testing.B) {
	for _, p := range httpPeers {
		b.Run("scenario=get-200/lib="+p.name, func(b *testing.B) { benchGet(b, p) })
	}
}

// benchGet is the body of BenchmarkTransport (and of TestReport's HTTP
// row): a loopback server and a client of its own for p, one warm-up
// request outside the timing, then one checked GET per iteration.
func benchGet(b *testing.B, p httpPeer) {
	ctx := context.Background()
	srv, hits := countingServer(b, 0)
	base := newBase()
	defer base.CloseIdleConnections()
	get := p.newGetter(base, retry.DefaultInitialDelay, retry.DefaultMaxDelay)
	// Warm up: open the keep-alive connection outside the timing.
	if code, err := get(ctx, srv.URL); err != nil || code != http.StatusOK {
		b.Fatalf("warm-up: got (%d, %v), want 200", code, err)
	}
	hits.Store(0)
	var n int64
	b.ReportAllocs()
	for b.Loop() {
		code, err := get(ctx, srv.URL)
		if err != nil || code != http.StatusOK {
			b.Fatalf("got (%d, %v), want 200", code, err)
		}
		n++
	}
	if h := hits.Load(); h != n {
		b.Fatalf("server saw %d requests for %d calls", h, n)
	}
}
