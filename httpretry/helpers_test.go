package httpretry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/backoffkit/retry"
)

// fast retries at once: no wait, no jitter, so loopback tests need no
// virtual time.
var fast = retry.Policy{InitialDelay: retry.Zero, MaxDelay: retry.Zero, Jitter: retry.Zero}

// rtFunc is an in-memory RoundTripper for tests in a synctest bubble.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// response builds a response to req with code, body and header pairs.
func response(req *http.Request, code int, body string, kv ...string) *http.Response {
	h := make(http.Header)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &http.Response{
		StatusCode: code, Status: http.StatusText(code), Header: h, Request: req,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

// events records what an Observer receives.
type events struct {
	mu   sync.Mutex
	list []retry.Event
}

func (e *events) observe(_ context.Context, ev retry.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

func (e *events) kinds() []retry.EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var k []retry.EventKind
	for _, ev := range e.list {
		k = append(k, ev.Kind)
	}
	return k
}

func (e *events) last() retry.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.list) == 0 {
		return retry.Event{}
	}
	return e.list[len(e.list)-1]
}

func (e *events) byKind(k retry.EventKind) []retry.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []retry.Event
	for _, ev := range e.list {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// script is a loopback server that answers the n-th request (from 0) with
// the n-th handler, repeating the last one, and counts requests and
// connections.
type script struct {
	*httptest.Server
	hits  atomic.Int32
	conns atomic.Int32
	mu    sync.Mutex
	seen  []*seenRequest
}

type seenRequest struct {
	Method, Path, RawQuery, Host string
	Header                       http.Header
	Body                         string
}

func newScript(t testing.TB, handlers ...http.HandlerFunc) *script {
	t.Helper()
	s := &script{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.hits.Add(1)) - 1
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, &seenRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Host, r.Header.Clone(), string(body)})
		s.mu.Unlock()
		handlers[min(n, len(handlers)-1)](w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *script) requests() []*seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*seenRequest(nil), s.seen...)
}

// status answers code with body.
func status(code int, body string, kv ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }
