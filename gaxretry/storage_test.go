package gaxretry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/gaxretry"
	"github.com/backoffkit/retry/internal/chaos"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	storage "google.golang.org/api/storage/v1"
)

// These tests drive a real google.golang.org/api client (storage/v1, its
// generated Buckets.Get call) through gax.Invoke with gaxretry, as
// cloud.google.com/go libraries built on the REST clients do. The errors the
// Retryer sees are exactly those the generated Do method returns and gax.Invoke
// rewraps: a *googleapi.Error wrapping an *apierror.APIError, inside another
// *apierror.APIError whose gRPC status is gax's mapping of the HTTP code.

// bucketServer is a loopback storage/v1 endpoint that answers the first
// len(fail) attempts at GET /storage/v1/b/{bucket} with those statuses (a
// Google JSON error body, and header), then 200 with a bucket.
type bucketServer struct {
	fail   []int
	body   func(code int) string // the error body; nil for a plain one
	header http.Header

	mu       sync.Mutex
	attempts int
}

func (s *bucketServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/storage/v1/b/bkt" {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusTeapot)
		return
	}
	s.mu.Lock()
	s.attempts++
	n := s.attempts
	s.mu.Unlock()
	if n > len(s.fail) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind": "storage#bucket", "name": "bkt"}`)
		return
	}
	code := s.fail[n-1]
	body := fmt.Sprintf(`{"error": {"code": %d, "message": "injected %d", "errors": [{"message": "injected", "reason": "backendError"}]}}`, code, code)
	if s.body != nil {
		body = s.body(code)
	}
	for k, v := range s.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	fmt.Fprint(w, body)
}

func (s *bucketServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// checkLeaks fails t if goroutines started during the test (the client's
// connections, the server's) are still running once its cleanups have run.
// Call it first: cleanups run last-registered first.
func checkLeaks(t *testing.T) {
	t.Helper()
	before := chaos.SnapshotGoroutines()
	t.Cleanup(func() {
		if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
			t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
	})
}

// newStorage returns a storage/v1 client for the loopback server, with no
// credentials, built the way applications build one.
func newStorage(t *testing.T, h http.Handler, opts ...option.ClientOption) *storage.Service {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	svc, err := storage.NewService(t.Context(), append([]option.ClientOption{
		option.WithEndpoint(srv.URL + "/storage/v1/"),
		option.WithoutAuthentication(),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// getBucket calls Buckets.Get through gax.Invoke with opts, as a Cloud
// client library wraps each REST call.
func getBucket(ctx context.Context, svc *storage.Service, opts ...gax.CallOption) (*storage.Bucket, error) {
	var b *storage.Bucket
	err := gax.Invoke(ctx, func(ctx context.Context, _ gax.CallSettings) error {
		var err error
		b, err = svc.Buckets.Get("bkt").Context(ctx).Do()
		return err
	}, opts...)
	return b, err
}

// fast makes a profile's waits tiny: these tests run on a real loopback
// server, so the waits are real.
func fast(p retry.Policy, rec *recorder) retry.Policy {
	p.InitialDelay, p.MaxDelay, p.Jitter, p.MaxRetryAfter = time.Millisecond, time.Millisecond, retry.Zero, time.Millisecond
	p.Observer = rec.Observe
	return p
}

// The HTTP status decides, by the policy's StatusCodes, not gax's mapping of
// the status to a gRPC code (500 -> INTERNAL, 504 -> DEADLINE_EXCEEDED,
// 429 -> RESOURCE_EXHAUSTED, ...).
func TestStorageClientStatusCodes(t *testing.T) {
	retried := func(codes ...int) map[int]bool {
		m := map[int]bool{}
		for _, c := range codes {
			m[c] = true
		}
		return m
	}
	profiles := map[string]map[int]bool{
		"standard":    retried(408, 429, 500, 502, 503, 504),
		"provisioned": retried(408, 500, 502, 503, 504), // a 429 means the purchased capacity is exceeded
		"model-armor": retried(500, 502, 503, 504),
	}
	checkLeaks(t)
	for name, want := range profiles {
		for _, code := range []int{400, 401, 403, 404, 408, 409, 412, 429, 500, 501, 502, 503, 504} {
			t.Run(fmt.Sprintf("%s/%d", name, code), func(t *testing.T) {
				p, err := retry.Profile(name)
				if err != nil {
					t.Fatal(err)
				}
				rec := newRecorder()
				s := &bucketServer{fail: []int{code}}
				svc := newStorage(t, s)
				b, err := getBucket(t.Context(), svc, gaxretry.WithRetry(fast(p, rec)))
				if want[code] {
					if err != nil || b.Name != "bkt" {
						t.Fatalf("Get = %v, %v; want the bucket after a retry", b, err)
					}
					if n := s.count(); n != 2 {
						t.Errorf("server saw %d attempts, want 2", n)
					}
					return
				}
				var ge *googleapi.Error
				if !errors.As(err, &ge) || ge.Code != code {
					t.Fatalf("Get error = %v, want the *googleapi.Error %d", err, code)
				}
				if n := s.count(); n != 1 {
					t.Errorf("server saw %d attempts, want 1 (no retry)", n)
				}
				if g := rec.Of(retry.EventGiveUp); len(g) != 1 || g[0].Reason != retry.ReasonPermanent {
					t.Errorf("give-up events = %+v, want one, permanent", g)
				}
			})
		}
	}
}

// WithCodes sets the gRPC codes; it does not change which HTTP statuses are
// retried.
func TestStorageClientWithCodesLeavesHTTPAlone(t *testing.T) {
	checkLeaks(t)
	rec := newRecorder()
	s := &bucketServer{fail: []int{500, 429}}
	svc := newStorage(t, s)
	p := fast(retry.Policy{}, rec)
	if _, err := getBucket(t.Context(), svc, gaxretry.WithRetry(p, gaxretry.WithCodes())); err != nil {
		t.Fatalf("Get: %v, want success on the third attempt", err)
	}
	if n := s.count(); n != 3 {
		t.Errorf("server saw %d attempts, want 3", n)
	}
}

// The server's hints reach the Retryer through the real client's error:
// RetryInfo in the JSON body and Retry-After; the larger one wins.
func TestStorageClientHints(t *testing.T) {
	body := func(code int) string {
		return fmt.Sprintf(`{"error": {"code": %d, "message": "slow down", "status": "UNAVAILABLE", "details": [
			{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}]}}`, code)
	}
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"RetryInfo", nil, 3 * time.Second},
		{"Retry-After larger", http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{"Retry-After smaller", http.Header{"Retry-After": {"1"}}, 3 * time.Second},
	}
	checkLeaks(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			s := &bucketServer{fail: []int{503}, body: body, header: tt.header}
			svc := newStorage(t, s)
			if _, err := getBucket(t.Context(), svc, gaxretry.WithRetry(fast(retry.Policy{}, rec))); err != nil {
				t.Fatal(err)
			}
			r := rec.Of(retry.EventRetry)
			if len(r) != 1 || r[0].Hint != tt.want || r[0].Wait != time.Millisecond {
				t.Errorf("retry events = %+v, want one with hint %v (wait capped at 1ms)", r, tt.want)
			}
		})
	}
}

// pipeStorage returns a storage/v1 client whose HTTP client is a real
// net/http Transport connected in memory to h (chaos.PipeListener), so that
// the test runs in a synctest bubble with net/http's own timeouts.
func pipeStorage(t *testing.T, h http.Handler, client *http.Client) *storage.Service {
	t.Helper()
	l := chaos.NewPipeListener()
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	tr := &http.Transport{DialContext: l.DialContext}
	client.Transport = tr
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	svc, err := storage.NewService(t.Context(),
		option.WithEndpoint("http://storage.test/storage/v1/"),
		option.WithHTTPClient(client))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// stall is a handler that, for the first n requests, blocks until the
// client gives up on them, then serves a bucket.
type stall struct {
	n        int
	mu       sync.Mutex
	attempts int
}

func (s *stall) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.attempts++
	n := s.attempts
	s.mu.Unlock()
	if n <= s.n {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"kind": "storage#bucket", "name": "bkt"}`)
}

func (s *stall) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// An attempt cut short by Transport.ResponseHeaderTimeout is a network
// timeout: it is retried, although net/http's error matches
// context.DeadlineExceeded.
func TestStorageClientResponseHeaderTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &stall{n: 2}
		client := &http.Client{}
		svc := pipeStorage(t, h, client)
		client.Transport.(*http.Transport).ResponseHeaderTimeout = 10 * time.Second
		rec := newRecorder()
		start := time.Now()
		b, err := getBucket(t.Context(), svc, gaxretry.WithRetry(noJitter(rec)))
		if err != nil || b.Name != "bkt" {
			t.Fatalf("Get = %v, %v; want the bucket on the third attempt", b, err)
		}
		// 10s timeout, 1s wait, 10s timeout, 2s wait, then the answer.
		if got := time.Since(start); got != 23*time.Second {
			t.Errorf("took %v, want 23s", got)
		}
		r := rec.Of(retry.EventRetry)
		if len(r) != 2 || !strings.Contains(r[0].Err.Error(), "timeout awaiting response headers") || !errors.Is(r[0].Err, context.DeadlineExceeded) {
			t.Errorf("retry events = %+v, want two for the response header timeout (matching context.DeadlineExceeded)", r)
		}
	})
}

// The same for http.Client.Timeout. This one runs on a real loopback
// server: net/http tells its own timeout from the context's by the clock
// having passed the deadline, which virtual time never does (it stops at the
// deadline), so in a synctest bubble the error would read as the context's.
func TestStorageClientClientTimeout(t *testing.T) {
	checkLeaks(t)
	h := &stall{n: 2}
	rec := newRecorder()
	svc := newStorage(t, h, option.WithHTTPClient(&http.Client{Timeout: 100 * time.Millisecond}))
	b, err := getBucket(t.Context(), svc, gaxretry.WithRetry(fast(retry.Policy{}, rec)))
	if err != nil || b.Name != "bkt" {
		t.Fatalf("Get = %v, %v; want the bucket after the stalled attempts", b, err)
	}
	// A busy machine may time out the answered attempt too: the first two
	// retries are the stalled ones, whatever follows.
	r := rec.Of(retry.EventRetry)
	if len(r) < 2 {
		t.Fatalf("retry events = %+v, want at least two", r)
	}
	for _, e := range r[:2] {
		if !strings.Contains(e.Err.Error(), "Client.Timeout exceeded") || !errors.Is(e.Err, context.DeadlineExceeded) {
			t.Errorf("retried %v, want net/http's Client.Timeout error", e.Err)
		}
	}
}

// The call's own context deadline ends the call: no retry, no retry event.
func TestStorageClientContextDeadlineNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &stall{n: 1}
		svc := pipeStorage(t, h, &http.Client{})
		rec := newRecorder()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, err := getBucket(ctx, svc, gaxretry.WithRetry(noJitter(rec))); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Get = %v, want the context's deadline", err)
		}
		if n := h.count(); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
		if r := rec.Of(retry.EventRetry); len(r) != 0 {
			t.Errorf("retry events = %+v, want none", r)
		}
		if g := rec.Of(retry.EventGiveUp); len(g) != 1 || g[0].Reason != retry.ReasonPermanent {
			t.Errorf("give-up events = %+v, want one", g)
		}
	})
}
