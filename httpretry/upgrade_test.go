package httpretry

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/testkit"
)

// echoUpgradeServer answers a request asking for "Upgrade: echo" with 101
// Switching Protocols and then echoes every byte back on the connection, as
// a WebSocket server would after its handshake. The first `fail` requests
// get a 503 instead.
func echoUpgradeServer(t *testing.T, fail int) *httptest.Server {
	t.Helper()
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n++; n <= fail {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want Upgrade: echo", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw) // echo until the client closes
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestUpgradeKeepsReadWriteCloser: the body of a 101 Switching Protocols
// response is the upgraded connection, an io.ReadWriteCloser (WebSocket
// clients assert it). It must stay one when an attempt timeout or a policy
// deadline is set, and after a retry; bytes written must come back.
func TestUpgradeKeepsReadWriteCloser(t *testing.T) {
	tests := []struct {
		name string
		p    retry.Policy
		opts []Option
		fail int
	}{
		{name: "no timeout", p: fast},
		{name: "WithAttemptTimeout", p: fast, opts: []Option{WithAttemptTimeout(time.Minute)}},
		{name: "Policy.AttemptTimeout", p: retry.Policy{AttemptTimeout: time.Minute, InitialDelay: retry.Zero, Jitter: retry.Zero}},
		{name: "Policy.Deadline", p: retry.Policy{Deadline: time.Minute, InitialDelay: retry.Zero, Jitter: retry.Zero}},
		{name: "Deadline after a 503", p: retry.Policy{Deadline: time.Minute, InitialDelay: retry.Zero, Jitter: retry.Zero}, fail: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := chaos.SnapshotGoroutines()
			srv := echoUpgradeServer(t, tt.fail)
			base := &http.Transport{}
			rt := NewTransport(base, tt.p, tt.opts...)
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "echo")
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				resp.Body.Close()
				t.Fatalf("status %d, want 101", resp.StatusCode)
			}
			rwc, ok := resp.Body.(io.ReadWriteCloser)
			if !ok {
				resp.Body.Close()
				t.Fatalf("the 101 body is a %T, not an io.ReadWriteCloser", resp.Body)
			}
			if _, ok := resp.Body.(interface{ CloseWrite() error }); !ok {
				t.Errorf("the 101 body %T lost net/http's CloseWrite", resp.Body)
			}
			for _, msg := range []string{"ping\n", "pong pong\n"} {
				if _, err := io.WriteString(rwc, msg); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(rwc, got); err != nil || string(got) != msg {
					t.Fatalf("echo: got %q (%v), want %q", got, err, msg)
				}
			}
			if err := rwc.Close(); err != nil {
				t.Error(err)
			}
			base.CloseIdleConnections()
			srv.Close()
			if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
				t.Errorf("%d goroutines leaked, first:\n%s", len(leaked), leaked[0])
			}
		})
	}
}

// TestTimeoutThroughClient: http.Client wraps RoundTrip's error in a
// *url.Error, whose Timeout() asks the error it wraps. A request the
// transport does not retry (a POST without a key) whose attempt timed out
// must still say Timeout() == true, like plain net/http does.
func TestTimeoutThroughClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Accept and never answer: every attempt times out.
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				bufio.NewReader(c).ReadString('\n')
				<-done
				c.Close()
			}()
		}
	}()
	defer ln.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: NewTransport(base, fast, WithAttemptTimeout(50*time.Millisecond))}
	// The POST's retry is skipped (its error is the transport's own); the
	// GET gives up after its attempts with a *retry.Error.
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+"/", strings.NewReader("x"))
		req.GetBody = nil // and not replayable for the POST
		_, err := client.Do(req)
		var ue *url.Error
		if !errors.As(err, &ue) {
			t.Fatalf("%s: err %v, want a *url.Error", method, err)
		}
		if !ue.Timeout() {
			t.Errorf("%s: (*url.Error).Timeout() = false for %v (%T)", method, ue.Err, ue.Err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%s: no net.Error with Timeout() in %v", method, err)
		}
	}
}

// rwcBody is a response body that is also a writer (a custom
// RoundTripper's duplex stream), made of a net.Pipe end.
type rwcBody struct{ net.Conn }

// TestWrappersKeepWriter: when the transport must wrap a body (to end the
// attempt's context with it, or to put back the bytes it peeked at), the
// wrapper still writes to the original and closes its write side.
func TestWrappersKeepWriter(t *testing.T) {
	for _, tt := range []struct {
		name   string
		code   int
		policy retry.Policy
	}{
		{"attempt timeout on a 200", 200, retry.Policy{AttemptTimeout: time.Minute}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var peers []net.Conn
			rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
				client, server := net.Pipe()
				peers = append(peers, server)
				go func() {
					server.Write([]byte(`{"error":{}}`)) // the body's first bytes
					io.Copy(server, server)              // then echo
				}()
				resp := response(r, tt.code, "", "Content-Type", "application/json")
				resp.Body, resp.ContentLength = rwcBody{client}, -1
				return resp, nil
			}), tt.policy)
			defer func() {
				for _, p := range peers {
					p.Close()
				}
			}()
			req, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			rwc, ok := resp.Body.(io.ReadWriteCloser)
			if !ok {
				t.Fatalf("body %T is not an io.ReadWriteCloser", resp.Body)
			}
			if _, ok := resp.Body.(interface{ CloseWrite() error }); !ok {
				t.Fatalf("body %T has no CloseWrite", resp.Body)
			}
			first := make([]byte, len(`{"error":{}}`))
			if _, err := io.ReadFull(rwc, first); err != nil || string(first) != `{"error":{}}` {
				t.Fatalf("first bytes %q, %v", first, err)
			}
			go io.WriteString(rwc, "echo")
			got := make([]byte, 4)
			if _, err := io.ReadFull(rwc, got); err != nil || string(got) != "echo" {
				t.Fatalf("echo %q, %v", got, err)
			}
		})
	}
}

// valueCtx is a context of an uncomparable type (a struct value holding a
// slice): comparing two of them with == panics.
type valueCtx struct {
	context.Context
	tags []string
}

// TestUncomparableContext: the transport must never compare contexts with
// == or != (the caller's context may be of an uncomparable type), on the
// first attempt or on a retry.
func TestUncomparableContext(t *testing.T) {
	srv := testkit.NewScript(t, testkit.Status(503, "busy"), testkit.Status(200, "ok"), testkit.Status(503, "busy"), testkit.Status(200, "ok"))
	for _, p := range []retry.Policy{fast, {AttemptTimeout: time.Minute}} {
		ctx := valueCtx{Context: context.Background(), tags: []string{"a"}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := NewTransport(srv.Client().Transport, p).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); body != "ok" {
			t.Fatalf("body %q", body)
		}
	}
}

// duplexBody is an in-memory response body that can be written to: reads
// come from r, writes go to w.
type duplexBody struct {
	r          io.Reader
	w          strings.Builder
	closeWrite int
}

func (d *duplexBody) Read(p []byte) (int, error)  { return d.r.Read(p) }
func (d *duplexBody) Write(p []byte) (int, error) { return d.w.Write(p) }
func (d *duplexBody) Close() error                { return nil }
func (d *duplexBody) CloseWrite() error           { d.closeWrite++; return nil }

// TestPeekedBodyKeepsWriter: the body of a retryable answer that was peeked
// for RetryInfo and then handed over (the deadline leaves no time for the
// hinted wait) reads the same bytes and still writes to the original.
func TestPeekedBodyKeepsWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const errBody = `{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}`
		d := &duplexBody{r: strings.NewReader(errBody)}
		rt := NewTransport(rtFunc(func(r *http.Request) (*http.Response, error) {
			resp := response(r, 429, "", "Content-Type", "application/json")
			resp.Body = d
			return resp, nil
		}), retry.Policy{Deadline: 10 * time.Second})
		req, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		rwc, ok := resp.Body.(io.ReadWriteCloser)
		if !ok {
			t.Fatalf("body %T is not an io.ReadWriteCloser", resp.Body)
		}
		if b, err := io.ReadAll(rwc); err != nil || string(b) != errBody {
			t.Fatalf("body %q, %v", b, err)
		}
		io.WriteString(rwc, "bye")
		if cw, ok := resp.Body.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
			t.Fatalf("body %T: no working CloseWrite", resp.Body)
		}
		if d.w.String() != "bye" || d.closeWrite != 1 {
			t.Fatalf("the original got %q and %d CloseWrite calls", d.w.String(), d.closeWrite)
		}
		rwc.Close()
	})
}
