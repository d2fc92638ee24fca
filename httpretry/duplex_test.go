package httpretry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
)

// duplexServer is an h2c (HTTP/2 without TLS) loopback server whose handler
// reads the first line of the request body, sends the response headers, and
// then echoes every later line as it arrives: a full-duplex exchange in
// which the client only writes more once it has the headers.
func duplexServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		br := bufio.NewReader(r.Body)
		first, err := br.ReadString('\n')
		if err != nil {
			http.Error(w, "no first line", http.StatusBadRequest)
			return
		}
		w.Header().Set("X-First", strings.TrimSpace(first))
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rc.Flush()
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				io.WriteString(w, line)
				rc.Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func h2cTransport() *http.Transport {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return tr
}

// duplexUpload sends a body from a producer that writes one line, waits for
// the response headers, then writes three more lines, reading each echo
// before the next. It returns the echoed lines. ctx bounds the whole
// exchange: on today's code the transport reads the body before sending
// anything, which never ends; the bound turns that deadlock into a clean
// failure.
func duplexUpload(t *testing.T, ctx context.Context, rt http.RoundTripper, method, url string, reqCtx context.Context) []string {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		<-ctx.Done()
		pw.CloseWithError(ctx.Err()) // unblock whatever still reads or writes the pipe
	}()
	req, _ := http.NewRequestWithContext(reqCtx, method, url, pr) // no GetBody, unknown length
	type result struct {
		resp *http.Response
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		got <- result{resp, err}
	}()
	if _, err := io.WriteString(pw, "hello\n"); err != nil {
		t.Fatalf("writing the first line: %v (the transport never read it)", err)
	}
	var r result
	select {
	case r = <-got:
	case <-ctx.Done():
		t.Fatalf("%s: no response headers before the producer's next line: the transport holds the body back", method)
	}
	if r.err != nil {
		t.Fatalf("%s: %v", method, r.err)
	}
	defer r.resp.Body.Close()
	if r.resp.ProtoMajor != 2 || r.resp.Header.Get("X-First") != "hello" {
		t.Fatalf("%s: HTTP/%d, X-First %q", method, r.resp.ProtoMajor, r.resp.Header.Get("X-First"))
	}
	br := bufio.NewReader(r.resp.Body)
	var echoes []string
	for i := range 3 {
		fmt.Fprintf(pw, "line %d\n", i)
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: echo %d: %v", method, i, err)
		}
		echoes = append(echoes, strings.TrimSpace(line))
	}
	pw.Close()
	return echoes
}

// TestFullDuplexUpload: a request body without GetBody that can never be
// sent twice (a POST without a key, a request marked NotIdempotent, one with
// a single attempt, or one whose body may not be buffered) is streamed as it
// is produced, not read ahead: an HTTP/2 upload whose producer waits for the
// response headers completes.
func TestFullDuplexUpload(t *testing.T) {
	srv := duplexServer(t)
	base := h2cTransport()
	defer base.CloseIdleConnections()
	tests := []struct {
		name   string
		method string
		ctx    func(context.Context) context.Context
		p      retry.Policy
		opts   []Option
	}{
		{name: "POST without a key", method: http.MethodPost, p: fast},
		{name: "PUT marked NotIdempotent", method: http.MethodPut, ctx: NotIdempotent, p: fast},
		{name: "PUT with one attempt", method: http.MethodPut, p: retry.Policy{Attempts: 1}},
		{name: "PUT, MaxBufferedBody(0)", method: http.MethodPut, p: fast, opts: []Option{MaxBufferedBody(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := chaos.SnapshotGoroutines()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			reqCtx := context.Background()
			if tt.ctx != nil {
				reqCtx = tt.ctx(reqCtx)
			}
			echoes := duplexUpload(t, ctx, NewTransport(base, tt.p, tt.opts...), tt.method, srv.URL, reqCtx)
			if strings.Join(echoes, ",") != "line 0,line 1,line 2" {
				t.Fatalf("echoes %q", echoes)
			}
			cancel()
			base.CloseIdleConnections()
			if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
				t.Errorf("%d goroutines leaked, first:\n%s", len(leaked), leaked[0])
			}
		})
	}
}

// TestBufferingBoundedByContext: a body that must be buffered (a PUT,
// retryable, without GetBody) whose producer stalls: the transport reads it
// only until the caller's context ends, then returns the context's error
// without sending anything, and closes the body once.
func TestBufferingBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		cc := &pipeBody{PipeReader: pr}
		go io.WriteString(pw, "the first bytes, then nothing")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var sent atomic.Int32
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			return response(r, 200, ""), nil
		}), fast)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://example.com/", cc)
		start := time.Now()
		_, err := rt.RoundTrip(req)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Fatalf("err %v after %v, want the context's deadline after 5s", err, time.Since(start))
		}
		if sent.Load() != 0 || cc.closed.Load() != 1 {
			t.Fatalf("%d attempts sent, body closed %d times; want 0 and 1", sent.Load(), cc.closed.Load())
		}
	})
}

// pipeBody is a request body whose Close unblocks a Read, as
// http.Request.Body must, and is counted.
type pipeBody struct {
	*io.PipeReader
	closed atomic.Int32
}

func (p *pipeBody) Close() error { p.closed.Add(1); return p.PipeReader.Close() }

// TestUnbufferedBodyNeverSent: a body the transport does not buffer (a POST
// without a key) can still be sent again after an error that proves the
// request never left (connection refused), because the transport gave it
// back untouched; once the transport has read from it, it cannot.
func TestUnbufferedBodyNeverSent(t *testing.T) {
	t.Run("refused, then sent", func(t *testing.T) {
		srv := testkit.NewScript(t, testkit.Status(200, "ok"))
		cc := &closeCounter{Reader: strings.NewReader("payload")}
		req, _ := http.NewRequest(http.MethodPost, "https://example.com/v1/items", opaqueBody{cc})
		req.Body = cc
		rt := NewTransport(srv.Client().Transport, fast, WithEndpoints([]string{refusedURL(t), srv.URL}, time.Minute))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if got := srv.Requests(); len(got) != 1 || got[0].Body != "payload" {
			t.Fatalf("the server got %+v, want the whole payload once", got)
		}
		if n := cc.closed.Load(); n != 1 {
			t.Fatalf("the body was closed %d times, want 1", n)
		}
	})
	t.Run("read, then refused: not sent again", func(t *testing.T) {
		ev := newEvents()
		p := fast
		p.Observer = ev.Observe
		cc := &closeCounter{Reader: strings.NewReader("payload")}
		n := 0
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			r.Body.Read(make([]byte, 3)) // sent a few bytes
			r.Body.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}), p)
		req, _ := http.NewRequest(http.MethodPost, "https://example.com/", cc)
		req.GetBody = nil
		_, err := rt.RoundTrip(req)
		if n != 1 || !errors.Is(err, ErrBodyNotReplayable) || cc.closed.Load() != 1 {
			t.Fatalf("%d attempts, err %v, closed %d; want 1 attempt, ErrBodyNotReplayable, closed once", n, err, cc.closed.Load())
		}
	})
}

// TestMaxBufferedBodyZeroReadsNothing: with MaxBufferedBody(0) a body
// without GetBody is never buffered, so nothing of it is read before the
// request is handed to the base transport (a producer that only writes
// once the response has begun must not block the send).
func TestMaxBufferedBodyZeroReadsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close()
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			return response(r, 200, "ok"), nil // answers without reading the body
		}), fast, MaxBufferedBody(0))
		req, _ := http.NewRequest(http.MethodPut, "http://example.com/", pr)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); body != "ok" {
			t.Fatalf("body %q", body)
		}
	})
}
