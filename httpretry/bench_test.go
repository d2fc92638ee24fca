package httpretry

import (
	"bytes"
	"fmt"
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
	// The profiles' headers: flex adds two to a request that has none,
	// priority one and checks the host.
	b.Run("get-200-profile-standard", func(b *testing.B) { run(b, NewTransport(base, retry.Policy{}, WithProfile("standard"))) })
	b.Run("get-200-profile-flex", func(b *testing.B) { run(b, NewTransport(base, retry.Policy{}, WithProfile("flex"))) })
	b.Run("get-200-profile-priority", func(b *testing.B) { run(b, NewTransport(base, retry.Policy{}, WithProfile("priority"))) })

	// A server-sent-events answer whose first event (a Gemini chunk of
	// about 300 bytes) the transport reads before handing it over; the
	// caller reads the whole stream (3 events). stream-nopeek is the same
	// with peeking off.
	const ev = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hello from the model\"}], \"role\": \"model\"}, \"index\": 0}], \"usageMetadata\": {\"promptTokenCount\": 3, \"candidatesTokenCount\": 5, \"totalTokenCount\": 8}, \"modelVersion\": \"gemini-2.5-flash\"}\r\n\r\n"
	stream := strings.Repeat(ev, 3)
	var sr strings.Reader
	sseResp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, ContentLength: -1}
	sseBase := rtFunc(func(*http.Request) (*http.Response, error) {
		sr.Reset(stream)
		sseResp.Body = io.NopCloser(&sr)
		return sseResp, nil
	})
	buf := make([]byte, 1024)
	// A GET names a streamed call, or its answer is not peeked.
	sreq, _ := http.NewRequest(http.MethodGet, "https://example.com/v1beta/models/m:streamGenerateContent?alt=sse&key=secret", nil)
	runStream := func(b *testing.B, rt http.RoundTripper) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rt.RoundTrip(sreq)
			if err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := resp.Body.Read(buf); err != nil {
					break
				}
			}
		}
	}
	b.Run("stream-bare", func(b *testing.B) { runStream(b, sseBase) })
	b.Run("stream", func(b *testing.B) { runStream(b, NewTransport(sseBase, retry.Policy{})) })
	b.Run("stream-nopeek", func(b *testing.B) { runStream(b, NewTransport(sseBase, retry.Policy{}, WithStreamPeek(false))) })
}

// BenchmarkStream reads a 100-event server-sent-events stream (Gemini's
// alt=sse framing, each event flushed on its own) from a loopback server,
// through the bare http.Transport and through the retrying Transport, which
// peeks at the first event (a GET may be retried). Each op is one whole
// stream; ttfe-ns/op is the mean time from sending the request to having
// the first complete event. paired alternates the two in one loop and
// reports the medians and their ratios (the target: at most 1.05).
func BenchmarkStream(b *testing.B) {
	const events = 100
	var frames [][]byte
	for i := range events {
		frames = append(frames, fmt.Appendf(nil, "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"chunk %03d of the answer, some forty bytes\"}], \"role\": \"model\"}}]}\r\n\r\n", i))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, fr := range frames {
			w.Write(fr)
			f.Flush()
		}
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1beta/models/m:streamGenerateContent?alt=sse", nil)
	buf := make([]byte, 32<<10)
	// one reads a stream and returns the time to its first event and in all.
	one := func(b *testing.B, rt http.RoundTripper) (ttfe, total time.Duration) {
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			m, err := resp.Body.Read(buf[n:])
			n += m
			if bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
				ttfe = time.Since(start)
				break
			}
			if err != nil {
				b.Fatal("no first event:", err)
			}
		}
		rest, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		total = time.Since(start)
		if err != nil || int(rest)+n != events*len(frames[0]) {
			b.Fatalf("read %d bytes (%v)", int(rest)+n, err)
		}
		return ttfe, total
	}
	run := func(b *testing.B, rt http.RoundTripper) {
		b.ReportAllocs()
		var sum time.Duration
		for b.Loop() {
			ttfe, _ := one(b, rt)
			sum += ttfe
		}
		b.ReportMetric(float64(sum.Nanoseconds())/float64(b.N), "ttfe-ns/op")
	}
	ours := NewTransport(base, retry.Policy{})
	b.Run("bare", func(b *testing.B) { run(b, base) })
	b.Run("ours", func(b *testing.B) { run(b, ours) })
	b.Run("paired", func(b *testing.B) {
		var bt, bn, ot, on []time.Duration // bare/ours, ttfe/total
		for b.Loop() {
			if len(bt)%2 == 0 {
				t1, n1 := one(b, base)
				t2, n2 := one(b, ours)
				bt, bn, ot, on = append(bt, t1), append(bn, n1), append(ot, t2), append(on, n2)
			} else {
				t2, n2 := one(b, ours)
				t1, n1 := one(b, base)
				bt, bn, ot, on = append(bt, t1), append(bn, n1), append(ot, t2), append(on, n2)
			}
		}
		median := func(d []time.Duration) float64 {
			slices.Sort(d)
			return float64(d[len(d)/2])
		}
		mbt, mbn, mot, mon := median(bt), median(bn), median(ot), median(on)
		b.ReportMetric(mbt, "bare-ttfe-ns")
		b.ReportMetric(mot, "ours-ttfe-ns")
		b.ReportMetric(mot/mbt, "ttfe-ratio")
		b.ReportMetric(mbn, "bare-total-ns")
		b.ReportMetric(mon, "ours-total-ns")
		b.ReportMetric(mon/mbn, "total-ratio")
	})
}

// BenchmarkFirstEventTrickle feeds the first-event scanner one first event
// of 16 or 64 KiB one byte at a time, as a stream trickled byte by byte
// arrives: each byte is searched for a line end once, so the cost per byte
// stays the same whatever the size (a scanner that searched the current
// line again on each read would cost 4 times more per byte at 64 KiB than
// at 16).
func BenchmarkFirstEventTrickle(b *testing.B) {
	for _, size := range []int{16 << 10, 64 << 10} {
		x := strings.Repeat("x", size-12)
		for _, tc := range []struct {
			name   string
			format int
			ev     string
		}{
			{"sse", streamSSE, "data: \"" + x + "\"\n\n"},
			{"ndjson", streamLines, "\"" + x + "\"\n"},
			{"json", streamArray, "[\"" + x + "\"]"},
		} {
			b.Run(fmt.Sprintf("%s/%dKiB", tc.name, size>>10), func(b *testing.B) {
				buf := []byte(tc.ev)
				b.SetBytes(int64(len(buf)))
				b.ReportAllocs()
				for b.Loop() {
					f := firstEvent{format: tc.format}
					for i := 1; i <= len(buf) && !f.feed(buf[:i], false); i++ {
					}
					if !f.done || f.notEvent {
						b.Fatal("no first event")
					}
				}
			})
		}
	}
}
