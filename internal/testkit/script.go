package testkit

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Script is a loopback HTTP server (httptest) that answers the n-th request
// (from 0) with the n-th handler, repeating the last one, and counts the
// requests and the connections it accepts. It is closed when the test ends.
type Script struct {
	*httptest.Server

	hits  atomic.Int32
	conns atomic.Int32
	mu    sync.Mutex
	seen  []*Request
}

// Request is what a [Script] saw of a request; Body is read whole before
// the handler runs (the handler sees an empty body).
type Request struct {
	Method, Path, RawQuery, Host string
	Header                       http.Header
	Body                         string
}

// NewScript starts a Script serving HTTP/1.1 with handlers (at least one).
func NewScript(t testing.TB, handlers ...http.HandlerFunc) *Script {
	t.Helper()
	if len(handlers) == 0 {
		t.Fatal("testkit.NewScript: no handler")
	}
	s := &Script{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.hits.Add(1)) - 1
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, &Request{r.Method, r.URL.Path, r.URL.RawQuery, r.Host, r.Header.Clone(), string(body)})
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

// Hits returns how many requests the server has received.
func (s *Script) Hits() int32 { return s.hits.Load() }

// Conns returns how many connections the server has accepted.
func (s *Script) Conns() int32 { return s.conns.Load() }

// Requests returns what the server saw of each request, in order.
func (s *Script) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.seen...)
}

// Status returns a handler that answers code with body, after setting the
// header pairs kv (name, value, name, value, ...).
func Status(code int, body string, kv ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// Start starts srv with HTTP/2 over TLS if h2, plain HTTP/1.1 otherwise,
// and closes it when the test ends.
func Start(t testing.TB, srv *httptest.Server, h2 bool) {
	t.Helper()
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
}
