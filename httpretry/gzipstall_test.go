package httpretry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/chaos"
)

// gzipStallMargin is what TestGzipStalledBodyBounded allows past
// maxBodyWait for the retry to reach the server: the scheduling of a busy
// machine (timers, goroutines, a new connection), not a part of the
// promise. Before the fix the retry came only when the server gave up (an
// hour here), or at the attempt timeout.
const gzipStallMargin = 4 * time.Second

// gzipStallServer answers its first request 503 with Content-Encoding gzip
// and Content-Type ct, flushes the headers and sends no byte of the body
// (not even the gzip header) until release is closed; later requests get
// 200 "ok". It notes when the 503's headers went out, when the retry came,
// and whether the 503's request ended (its connection closed, or its
// HTTP/2 stream reset) before the release.
type gzipStallServer struct {
	*httptest.Server
	ct      string
	n       atomic.Int32
	release chan struct{}
	flushed chan time.Time // the 503's headers are out
	retried chan time.Time // the second request came
	aborted chan struct{}  // closed when the 503's request ended before the release
	once    sync.Once
}

func newGzipStallServer(t *testing.T, ct string, h2 bool) *gzipStallServer {
	s := &gzipStallServer{ct: ct, release: make(chan struct{}), flushed: make(chan time.Time, 1),
		retried: make(chan time.Time, 1), aborted: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(s)
	if h2 {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(func() {
		s.free()
		s.Close()
	})
	return s
}

// free ends the stall.
func (s *gzipStallServer) free() { s.once.Do(func() { close(s.release) }) }

func (s *gzipStallServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.n.Add(1) > 1 {
		select {
		case s.retried <- time.Now():
		default:
		}
		io.WriteString(w, "ok")
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Set("Content-Type", s.ct)
	w.WriteHeader(http.StatusServiceUnavailable)
	http.NewResponseController(w).Flush()
	s.flushed <- time.Now()
	select {
	case <-s.release:
	case <-r.Context().Done():
		close(s.aborted)
	}
}

// TestGzipStalledBodyBounded: a retryable response that the base transport
// decompresses (Content-Encoding gzip, net/http's defaults) and whose body
// stalls before its gzip header: reading it for RetryInfo (the peek) or
// draining it before the retry takes at most maxBodyWait, as without gzip
// ("Responses" in the package documentation), over HTTP/1.1 and HTTP/2,
// with and without an attempt timeout. The retry reaches the server no
// sooner than maxBodyWait after the 503's headers left it, and no later
// than gzipStallMargin after that. With an attempt timeout the stalled
// body's connection (its stream, over HTTP/2) is closed then too; without
// one, net/http cannot end that read before the server or the caller's
// context does: it ends when the server gives up, and nothing is left
// behind then.
func TestGzipStalledBodyBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		ct   string // application/json: the RetryInfo peek; text/html: no peek, the drain
		h2   bool
	}{
		{"http1 peek", "application/json", false},
		{"http1 drain", "text/html", false},
		{"http2 peek", "application/json", true},
	} {
		for _, timeout := range []time.Duration{0, time.Hour} {
			t.Run(tc.name+" attempt timeout "+timeout.String(), func(t *testing.T) {
				before := chaos.SnapshotGoroutines()
				s := newGzipStallServer(t, tc.ct, tc.h2)
				base := s.Client().Transport.(*http.Transport).Clone()
				if base.DisableCompression {
					t.Fatal("the base does not decompress")
				}
				var opts []Option
				if timeout > 0 {
					opts = append(opts, WithAttemptTimeout(timeout))
				}
				rt := NewTransport(base, retry.Policy{Attempts: 2, InitialDelay: retry.Zero, MaxDelay: retry.Zero, Jitter: retry.Zero}, opts...)
				type result struct {
					body string
					err  error
				}
				done := make(chan result, 1)
				go func() {
					req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
					resp, err := rt.RoundTrip(req)
					if err != nil {
						done <- result{err: err}
						return
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					done <- result{string(b), err}
				}()
				flushed := <-s.flushed
				bound := time.NewTimer(time.Until(flushed.Add(maxBodyWait + gzipStallMargin)))
				defer bound.Stop()
				select {
				case at := <-s.retried:
					d := at.Sub(flushed)
					if d < maxBodyWait {
						t.Fatalf("the retry came %v after the 503's headers: sooner than the %v the body is given", d, maxBodyWait)
					}
					t.Logf("the retry came %v after the 503's headers", d)
				case <-bound.C:
					t.Fatalf("no retry %v after the 503's headers: the stalled gzip body held it (the bound is %v)", maxBodyWait+gzipStallMargin, maxBodyWait)
				}
				if r := <-done; r.err != nil || r.body != "ok" {
					t.Fatalf("got %q, %v; want the retry's ok", r.body, r.err)
				}
				if timeout > 0 {
					select {
					case <-s.aborted:
					case <-bound.C:
						t.Fatal("the stalled body's connection was not closed at the bound")
					}
				}
				s.free()
				s.Close()
				base.CloseIdleConnections()
				if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
					t.Fatalf("%d goroutines left once the server gave up:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				}
			})
		}
	}
}
