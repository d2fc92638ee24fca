package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/backoffkit/retry/cmd/retry/internal/curl"
)

// TestProxyLoopback pins the proxy rule 'retry help http' documents (review
// 3, suspicion): unlike curl, $HTTP_PROXY is never used for a loopback
// address or localhost, whatever $NO_PROXY says (net/http's rule), while
// -x sends even a loopback request to the proxy.
func TestProxyLoopback(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "direct")
	}))
	defer target.Close()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "proxied "+r.URL.Host)
	}))
	defer proxy.Close()
	env := []string{"HTTP_PROXY=" + proxy.URL, "http_proxy=" + proxy.URL, "NO_PROXY=", "no_proxy="}
	localhost := strings.Replace(target.URL, "127.0.0.1", "localhost", 1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{target.URL}, "direct"},
		{[]string{localhost}, "direct"},
		{[]string{"-x", proxy.URL, target.URL}, "proxied " + strings.TrimPrefix(target.URL, "http://")},
	} {
		r := runRetry(t, "", env, append([]string{"http", "--attempts", "1"}, tc.args...)...)
		if r.code != 0 || r.stdout != tc.want {
			t.Errorf("retry http %q with $HTTP_PROXY: exit %d, stdout %q, want %q; stderr %s", tc.args, r.code, r.stdout, tc.want, r.stderr)
		}
	}
	r := runRetry(t, "", nil, "help", "http")
	if !strings.Contains(r.stdout, "PROXIES") || !strings.Contains(r.stdout, "Unlike curl, retry never sends a request for localhost") {
		t.Errorf("retry help http does not document the proxy rule")
	}
}

// TestConnectTimeoutBoundsTheProxy: --connect-timeout bounds a proxy's
// CONNECT too (net/http does not): a proxy that reads the CONNECT and never
// answers is a timeout, 28, as in curl (it hung until the proxy gave up).
func TestConnectTimeoutBoundsTheProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { // read the CONNECT, answer nothing, until the client goes
				defer wg.Done()
				defer c.Close()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	r := runRetry(t, "", nil, "http", "--attempts", "1", "--connect-timeout", "300ms", "-x", ln.Addr().String(), "https://127.0.0.1:1/")
	if r.code != curl.ExitTimeout || !strings.Contains(r.stderr, "timeout") {
		t.Errorf("exit %d, want %d (timed out); stderr:\n%s", r.code, curl.ExitTimeout, r.stderr)
	}
}
