package httpretry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoffkit/retry"
)

// BenchmarkTransport compares requests on a loopback server through the bare
// http.Transport and through the retrying Transport:
//
//   - bare, get-200: a GET answered 200 (the target: at most +1 alloc/op and
//     a time ratio of at most 1.05 over bare);
//   - post-200: a POST with GetBody, marked idempotent, answered 200;
//   - retry-503-once: a GET answered 503 then 200 (two round trips, the
//     first response drained), with no wait between them.
func BenchmarkTransport(b *testing.B) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/flaky" && n.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy")
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	run := func(b *testing.B, rt http.RoundTripper, newReq func() *http.Request) {
		req := newReq()
		b.ReportAllocs()
		for b.Loop() {
			if req.GetBody != nil {
				req = newReq()
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	}
	get := func(path string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path+"?key=secret", nil)
			return req
		}
	}
	post := func() *http.Request {
		req, _ := http.NewRequestWithContext(Idempotent(b.Context()), http.MethodPost, srv.URL+"/v1/models:generateContent", strings.NewReader(`{"contents":[]}`))
		return req
	}
	b.Run("bare", func(b *testing.B) { run(b, base, get("/v1/models")) })
	b.Run("get-200", func(b *testing.B) { run(b, NewTransport(base, retry.Policy{}), get("/v1/models")) })
	b.Run("post-200/bare", func(b *testing.B) { run(b, base, post) })
	b.Run("post-200", func(b *testing.B) { run(b, NewTransport(base, retry.Policy{}), post) })
	// paired alternates bare and retrying GETs in one loop, so that the load
	// of a shared machine weighs on both alike, and reports the medians of
	// their times and the ratio of the medians (robust to the outliers of a
	// busy machine).
	b.Run("paired", func(b *testing.B) {
		rt := NewTransport(base, retry.Policy{})
		req := get("/v1/models")()
		var bare, wrapped []time.Duration
		one := func(rt http.RoundTripper) time.Duration {
			start := time.Now()
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return time.Since(start)
		}
		for b.Loop() {
			if len(bare)%2 == 0 {
				bare = append(bare, one(base))
				wrapped = append(wrapped, one(rt))
			} else {
				wrapped = append(wrapped, one(rt))
				bare = append(bare, one(base))
			}
		}
		median := func(d []time.Duration) float64 {
			slices.Sort(d)
			return float64(d[len(d)/2])
		}
		mb, mw := median(bare), median(wrapped)
		b.ReportMetric(mb, "bare-ns/op")
		b.ReportMetric(mw, "get-200-ns/op")
		b.ReportMetric(mw/mb, "ratio")
	})
	b.Run("retry-503-once", func(b *testing.B) {
		n.Store(0)
		run(b, NewTransport(base, fast), get("/flaky"))
	})
}

// BenchmarkOverhead measures what the Transport adds to one request, with an
// in-memory base RoundTripper, so that the loopback noise of
// BenchmarkTransport does not hide it.
func BenchmarkOverhead(b *testing.B) {
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
	base := rtFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	req, _ := http.NewRequest(http.MethodGet, "https://example.com/v1/models?key=secret", nil)
	run := func(b *testing.B, rt http.RoundTripper) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rt.RoundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, base) })
	b.Run("get-200", func(b *testing.B) { run(b, NewTransport(base, retry.Policy{})) })
	b.Run("get-200-deadline", func(b *testing.B) { run(b, NewTransport(base, retry.Policy{Deadline: time.Minute})) })
	b.Run("get-200-endpoints", func(b *testing.B) {
		run(b, NewTransport(base, retry.Policy{}, WithEndpoints([]string{"https://a.example.com", "https://b.example.com"}, time.Minute)))
	})
}
