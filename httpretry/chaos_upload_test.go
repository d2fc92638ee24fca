package httpretry_test

import (
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/chaos"
)

const (
	uploadSize  = 100 << 20 // 100 MiB
	uploadLimit = 20 << 20  // the most the upload may allocate or grow the heap by
)

// resetFirstAttempt is a chaos Decide that reads the whole body, runs the
// effect and resets the connection on each request's first attempt, and
// serves the later ones: the worst case for a large upload, which must be
// sent in full twice.
func resetFirstAttempt(_ string, attempt int) chaos.Fault {
	if attempt == 1 {
		return chaos.ResetBeforeResponse
	}
	return chaos.None
}

// heapWatch samples the heap while a function runs and reports the bytes it
// allocated and the peak growth of the live heap.
func heapWatch(fn func()) (allocated, peakGrowth uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	peak.Store(before.HeapInuse)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-t.C:
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	})
	fn()
	close(done)
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	peak.Store(max(peak.Load(), after.HeapInuse))
	return after.TotalAlloc - before.TotalAlloc, peak.Load() - before.HeapInuse
}

// TestChaosUpload100MiBWithGetBody uploads 100 MiB from a streaming body
// with GetBody; the server reads it all, then resets the connection, so the
// transport must send it again through GetBody. Nothing may be buffered: the
// bytes allocated during the call and the peak heap growth must stay far
// below the body's size, and the server must receive both copies intact.
func TestChaosUpload100MiBWithGetBody(t *testing.T) {
	s, rt := uploadServer(t)

	req, _ := http.NewRequest(http.MethodPut, s.URL+"/upload", nil)
	req.Header.Set(chaos.HeaderID, "upload")
	chaos.Body{Seed: 100, Len: uploadSize}.Attach(req, true)
	var getBodies atomic.Int32
	getBody := req.GetBody
	req.GetBody = func() (io.ReadCloser, error) { getBodies.Add(1); return getBody() }

	var (
		resp *http.Response
		err  error
	)
	allocated, peak := heapWatch(func() {
		resp, err = rt.RoundTrip(req)
		if err == nil {
			_, err = chaos.ReadChecked(resp)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100 MiB upload, sent twice: %d bytes allocated, peak heap growth %d bytes, GetBody called %d times",
		allocated, peak, getBodies.Load())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if allocated > uploadLimit || peak > uploadLimit {
		t.Errorf("the upload allocated %d bytes, heap grew by %d: the body was buffered (limit %d)", allocated, peak, uploadLimit)
	}
	rec, _ := s.Record("upload")
	if len(rec.Attempts) != 2 || rec.BodyMismatch != 0 || s.Stats().BodyAborted != 0 {
		t.Errorf("server record %+v, stats %+v: want 2 attempts with intact bodies", rec, s.Stats())
	}
	if getBodies.Load() < 1 {
		t.Errorf("GetBody was never called, yet the body was sent twice")
	}
}

// TestChaosUpload100MiBWithoutGetBody sends a 100 MiB body that cannot be
// replayed (no GetBody, larger than MaxBufferedBody): it is streamed once,
// at most MaxBufferedBody of it kept, and when that attempt fails the retry
// is skipped with ErrBodyNotReplayable instead of sending a partial body.
func TestChaosUpload100MiBWithoutGetBody(t *testing.T) {
	s, rt := uploadServer(t)

	req, _ := http.NewRequest(http.MethodPut, s.URL+"/upload", nil)
	req.Header.Set(chaos.HeaderID, "once")
	chaos.Body{Seed: 101, Len: uploadSize}.Attach(req, false)

	var err error
	allocated, peak := heapWatch(func() {
		var resp *http.Response
		resp, err = rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
	})
	t.Logf("100 MiB upload without GetBody: %d bytes allocated, peak heap growth %d bytes; error: %v", allocated, peak, err)
	if !errors.Is(err, httpretry.ErrBodyNotReplayable) {
		t.Errorf("error %v, want ErrBodyNotReplayable", err)
	}
	if allocated > uploadLimit || peak > uploadLimit {
		t.Errorf("allocated %d bytes, heap grew by %d (limit %d)", allocated, peak, uploadLimit)
	}
	if h := s.Hits("once"); h != 1 {
		t.Errorf("the server saw %d attempts, want 1", h)
	}
	if st := s.Stats(); st.BodyMismatches != 0 || st.Effects != 1 {
		t.Errorf("stats %+v: want the one body intact", st)
	}
}

// BenchmarkChaosUpload100MiB measures one 100 MiB upload with GetBody that
// is reset after the server read it and sent again: B/op shows what the
// transport keeps in memory (far below the 200 MiB sent).
func BenchmarkChaosUpload100MiB(b *testing.B) {
	s, err := chaos.Start(chaos.Config{Decide: resetFirstAttempt})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	base := s.Transport(1)
	defer base.CloseIdleConnections()
	rt := httpretry.NewTransport(base, retry.Policy{InitialDelay: time.Millisecond, MaxDelay: time.Millisecond, Jitter: retry.Zero})
	body := chaos.Body{Seed: 102, Len: uploadSize}
	sum := body.Sum()
	b.SetBytes(2 * uploadSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPut, s.URL+"/upload", nil)
		req.Header.Set(chaos.HeaderID, "b"+strconv.Itoa(i))
		i++
		req.Header.Set(chaos.HeaderBodyLen, strconv.Itoa(uploadSize))
		req.Header.Set(chaos.HeaderBodySum, sum)
		req.Body, req.ContentLength = body.Open(), uploadSize
		req.GetBody = func() (io.ReadCloser, error) { return body.Open(), nil }
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := chaos.ReadChecked(resp); err != nil || resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode, err)
		}
	}
	if st := s.Stats(); st.BodyMismatches != 0 {
		b.Fatalf("%d bodies received corrupted", st.BodyMismatches)
	}
}

// uploadServer starts a chaos server that resets each request's first
// attempt, and a retrying transport to it with 1 ms waits; both are closed
// when the test ends.
func uploadServer(t *testing.T) (*chaos.Server, http.RoundTripper) {
	t.Helper()
	s, err := chaos.Start(chaos.Config{Decide: resetFirstAttempt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	base := s.Transport(1)
	t.Cleanup(base.CloseIdleConnections)
	return s, httpretry.NewTransport(base, retry.Policy{InitialDelay: time.Millisecond, MaxDelay: time.Millisecond, Jitter: retry.Zero})
}
