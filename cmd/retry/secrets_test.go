package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/curl"
	"github.com/backoffkit/retry/cmd/retry/internal/httpcmd"
)

// Tests of what retry http must never send or print: request-line
// injection, credentials and Referer on redirects to another origin,
// secrets in -v and in error messages. Loopback servers only.

// runIn runs retry in this process (run, not the binary): faster than
// runRetry, for what needs no process of its own (no signals, no exit
// from a terminal).
func runIn(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// rawServer accepts connections on a loopback port and records the request
// line of each request (as it came on the wire), answering each with an
// empty 200 and closing the connection.
type rawServer struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
	wg    sync.WaitGroup
}

func newRawServer(t *testing.T) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			line, _ := br.ReadString('\n')
			for { // the headers
				l, err := br.ReadString('\n')
				if err != nil || l == "\r\n" {
					break
				}
			}
			s.mu.Lock()
			s.lines = append(s.lines, strings.TrimRight(line, "\r\n"))
			s.mu.Unlock()
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

func (s *rawServer) requestLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// TestShortFlagValuesWithEquals: a one-letter flag's attached value may
// hold '=' (-d'a=1', -w'...=...', -HX-Q: a=b), as in curl; -d=foo sends
// "=foo" as curl does; Go-style -attempts=3 and --data=a=1 still work.
func TestShortFlagValuesWithEquals(t *testing.T) {
	fs := httpcmd.Flags()
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{[]string{"-da=1"}, []string{"-d", "a=1"}},
		{[]string{"-d=foo"}, []string{"-d", "=foo"}},
		{[]string{"-HX-Q: a=b"}, []string{"-H", "X-Q: a=b"}},
		{[]string{"-sda=1"}, []string{"-s", "-d", "a=1"}},
		{[]string{"-w%{http_code}=x"}, []string{"-w", "%{http_code}=x"}},
		{[]string{"-sd", "a=1"}, []string{"-s", "-d", "a=1"}},
		{[]string{"-d", "-x=1"}, []string{"-d", "-x=1"}},
		{[]string{"-attempts=3", "-o", "f"}, []string{"-attempts=3", "-o", "f"}},
		{[]string{"--data=a=1"}, []string{"--data=a=1"}},
		{[]string{"--", "-da=1"}, []string{"--", "-da=1"}},
	} {
		got, err := curl.ExpandShortFlags(fs, tc.in)
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("expandShortFlags(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}

	type seen struct{ body, header, query string }
	got := make(chan seen, 1)
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{string(b), r.Header.Get("X-Q"), r.URL.RawQuery}
	})
	for _, tc := range []struct {
		args []string
		want seen
		out  string
	}{
		{[]string{"-da=1", url}, seen{body: "a=1"}, ""},
		{[]string{"-d=foo", url}, seen{body: "=foo"}, ""},
		{[]string{"-sda=1", url}, seen{body: "a=1"}, ""},
		{[]string{"-HX-Q: a=b", url}, seen{header: "a=b"}, ""},
		{[]string{"-sGda=1", url}, seen{query: "a=1"}, ""},
		{[]string{"-w%{http_code}=x", url}, seen{}, "200=x"},
	} {
		r := runIn(t, append([]string{"http"}, tc.args...)...)
		if r.code != 0 {
			t.Errorf("%q: exit %d, stderr %q", tc.args, r.code, r.stderr)
			continue
		}
		if s := received(got); s != tc.want || r.stdout != tc.out {
			t.Errorf("%q: server saw %+v, stdout %q; want %+v, %q", tc.args, s, r.stdout, tc.want, tc.out)
		}
	}
}

// TestFlagErrorsNameTheFlagAsTyped: an unknown flag is named as the user
// typed it, never with a dash added (-fsSLZ, not --fsSLZ).
func TestFlagErrorsNameTheFlagAsTyped(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"http", "-fsSLZ", "http://127.0.0.1:1/"}, "-Z (in -fsSLZ)", "--fsSLZ"},
		{[]string{"http", "-nope", "http://127.0.0.1:1/"}, "defined: -nope", "--nope"},
		{[]string{"http", "--nope=1", "http://127.0.0.1:1/"}, "defined: --nope", "---nope"},
		{[]string{"-nope", "--", "true"}, "defined: -nope", "--nope"},
		{[]string{"--nope", "--", "true"}, "defined: --nope", "---nope"},
		{[]string{"-x", "--", "true"}, "defined: -x", "--x"},
		{[]string{"-attempts", "0", "--", "true"}, "--attempts", " -attempts"},
	} {
		r := runIn(t, tc.args...)
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, tc.not) {
			t.Errorf("%q: exit %d, stderr %q; want 2, %q and not %q", tc.args, r.code, r.stderr, tc.want, tc.not)
		}
	}
}

// TestURLRejectsSpacesAndControls: a space or a control character in the
// URL (or in -G data) never goes onto the wire: exit 3 as curl's "URL
// rejected: Malformed input", nothing sent. A redirect's Location with a
// space is sent percent-encoded, as curl does.
func TestURLRejectsSpacesAndControls(t *testing.T) {
	s := newRawServer(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"space in query", []string{s.url() + "/x?a=b c"}},
		{"space in path", []string{s.url() + "/a b"}},
		{"tab", []string{s.url() + "/x?a=b\tc"}},
		{"control", []string{s.url() + "/x?a=\x01"}},
		{"DEL", []string{s.url() + "/x?a=\x7f"}},
		{"space in fragment", []string{s.url() + "/x#a b"}},
		{"-G -d with a space", []string{"-G", "-d", "a b", s.url() + "/x"}},
		{"--url with a space", []string{"--url", s.url() + "/x y"}},
	} {
		r := runIn(t, append([]string{"http"}, tc.args...)...)
		if r.code != curl.ExitURLMalformat || !strings.Contains(r.stderr, "URL rejected: malformed input") {
			t.Errorf("%s: exit %d, stderr %q; want 3 and URL rejected", tc.name, r.code, r.stderr)
		}
	}
	if got := s.requestLines(); len(got) != 0 {
		t.Errorf("requests sent: %q", got)
	}

	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", s.url()+"/to?a=b c HTTP/1.1")
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(redir.Close)
	r := runIn(t, "http", "-L", redir.URL)
	got := s.requestLines()
	if r.code != 0 || len(got) != 1 || got[0] != "GET /to?a=b%20c%20HTTP/1.1 HTTP/1.1" {
		t.Errorf("redirect with spaces: exit %d, stderr %q, request lines %q", r.code, r.stderr, got)
	}
}

// headersSeen records the credential headers each request carried.
type headersSeen struct {
	mu   sync.Mutex
	reqs []http.Header
}

func (h *headersSeen) add(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reqs = append(h.reqs, r.Header.Clone())
}

func (h *headersSeen) last() http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reqs) == 0 {
		return nil
	}
	return h.reqs[len(h.reqs)-1]
}

// TestRedirectKeepsCredentialsAtTheOrigin: with -L, -u, -H Authorization,
// -H Cookie and API-key headers go only to the URL's origin (scheme, host
// and port), as curl does since CVE-2022-27776; --location-trusted sends
// them on. No Referer is ever added (curl sends none): it leaked key= and
// token= values to the target.
func TestRedirectKeepsCredentialsAtTheOrigin(t *testing.T) {
	var other headersSeen
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.add(r)
		io.WriteString(w, "target\n")
	}))
	t.Cleanup(target.Close)
	var same headersSeen
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		same.add(r)
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, target.URL+"/landed", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/landed", http.StatusFound)
		default:
			io.WriteString(w, "origin\n")
		}
	}))
	t.Cleanup(origin.Close)
	creds := []string{"-u", "me:pw", "-H", "Cookie: c=SECRETCOOKIE", "-H", "X-Goog-Api-Key: K1", "-H", "api-key: K2", "-H", "X-Other: kept"}
	secret := []string{"Authorization", "Cookie", "X-Goog-Api-Key", "Api-Key"}

	r := runIn(t, append(append([]string{"http", "-L"}, creds...), origin.URL+"/away?token=T0K")...)
	if r.code != 0 || r.stdout != "target\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	h := other.last()
	for _, name := range secret {
		if v := h.Get(name); v != "" {
			t.Errorf("another port got %s: %q", name, v)
		}
	}
	if h.Get("X-Other") != "kept" {
		t.Errorf("another port did not get the other custom headers: %v", h)
	}
	if ref := h.Get("Referer"); ref != "" {
		t.Errorf("Referer %q sent on a redirect", ref)
	}

	r = runIn(t, append(append([]string{"http", "-L"}, creds...), origin.URL+"/here")...)
	h = same.last()
	if r.code != 0 || h.Get("Authorization") != "Basic bWU6cHc=" || h.Get("Cookie") != "c=SECRETCOOKIE" || h.Get("Api-Key") != "K2" || h.Get("Referer") != "" {
		t.Errorf("same origin: exit %d, headers %v; want the credentials kept, no Referer", r.code, h)
	}

	r = runIn(t, append(append([]string{"http", "--location-trusted"}, creds...), origin.URL+"/away")...)
	h = other.last()
	if r.code != 0 || h.Get("Authorization") != "Basic bWU6cHc=" || h.Get("Cookie") != "c=SECRETCOOKIE" {
		t.Errorf("--location-trusted: exit %d, headers %v; want the credentials sent on", r.code, h)
	}

	r = runIn(t, "http", "-L", "-H", "Referer: https://me.example/", origin.URL+"/away")
	if h = other.last(); r.code != 0 || h.Get("Referer") != "https://me.example/" {
		t.Errorf("an explicit Referer: exit %d, headers %v; want it kept", r.code, h)
	}
}

// TestSecretsNeverPrinted: -v redacts a Location's and every header's
// secrets; errors never echo -H or -u values, user info or secret query
// parameters, whatever the flag package would quote.
func TestSecretsNeverPrinted(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/badloc" {
			w.Header().Set("Location", "http://u:SECRET5@[::1/?key=SECRET6")
			w.WriteHeader(http.StatusFound)
			return
		}
		if loc, ok := map[string]string{
			"/quoteloc": `http://127.0.0.1:1/x?token=ab"SECRET7&key=ab<SECRET8>`,
			"/slashloc": "http://u:SECRET9/x@[::1/?sig=ab'SECRET0",
		}[r.URL.Path]; ok {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusFound)
			return
		}
		if r.URL.Path == "/loc" {
			w.Header().Set("Location", "/echo?key=SECRET1&token=SECRET2")
			w.Header().Set("Link", "<https://u:SECRET3@h/?access_token=SECRET4>; rel=next")
			w.WriteHeader(http.StatusFound)
			return
		}
		io.WriteString(w, "ok\n")
	})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"-v Location", []string{"http", "-v", url + "/loc"}},
		{"-v -L", []string{"http", "-v", "-L", url + "/loc"}},
		{"a Location that does not parse", []string{"http", "-L", url + "/badloc"}},
		{"-v, a Location with quotes", []string{"http", "-v", "-L", "--attempts", "1", url + "/quoteloc"}},
		{"a bad Location, password with /", []string{"http", "-v", "-L", url + "/slashloc"}},
		{"a bad Location, JSON", []string{"http", "-L", "--log-format", "json", url + "/slashloc"}},
		{"-v json", []string{"http", "-v", "--log-format", "json", "-L", url + "/loc"}},
		{"-v credential-like headers", []string{"http", "-v", "-H", "api-key: SECRET1", "-H", "X-Amz-Security-Token: SECRET2", "-H", "Ocp-Apim-Subscription-Key: SECRET3", "-H", "X-Auth-Token: SECRET4", url}},
		{"-H without a colon", []string{"http", "-H", "Authorization Bearer SECRET1", url}},
		{"-H with a line break", []string{"http", "-H", "Authorization: Bearer SECRET1\nX: y", url}},
		{"-u without a colon", []string{"http", "-u", "SECRET1", url}},
		{"user info, unsupported scheme", []string{"http", "mailto://me:SECRET1@h/?key=SECRET2"}},
		{"user info, bad URL", []string{"http", "http://me:SECRET1@[::1/?key=SECRET2"}},
		{"password with /", []string{"http", "http://me:SECRET1/x@127.0.0.1:1/"}},
		{"password with ?", []string{"http", "--log-format", "json", "https://me:SECRET1?x@127.0.0.1:1/"}},
		{"password with #", []string{"http", "http://me:SECRET1#x@127.0.0.1:1/"}},
		{"proxy with a password", []string{"http", "-x", "http://me:SECRET1@[::1", url}},
		{"proxy without a scheme", []string{"http", "-x", "me:SECRET1@127.0.0.1:1:2", url}},
		{"proxy password with @", []string{"http", "-x", "http://me:p@SECRET1@127.0.0.1:1:2", url}},
		{"proxy password with a space", []string{"http", "-x", "http://me:SECRET1 x@127.0.0.1:1", url}},
		{"proxy password with /", []string{"http", "-x", "http://me:SECRET1/x@127.0.0.1:1", url}},
		{"proxy password, JSON", []string{"http", "--log-format", "json", "-x", "me:SECRET1@127.0.0.1:1:2", url}},
		{"-F", []string{"http", "-F", "pw=SECRET1;bogus=1", url}},
		{"command mode flag", []string{"--redis", "redis://:SECRET1@[::1", "--", "true"}},
		{"refused", []string{"http", "--attempts", "1", "http://me:SECRET1@127.0.0.1:1/?key=SECRET2"}},
	} {
		r := runIn(t, tc.args...)
		if strings.Contains(r.stdout+r.stderr, "SECRET") {
			t.Errorf("%s: a secret was printed (exit %d):\nstdout %q\nstderr %q", tc.name, r.code, r.stdout, r.stderr)
		}
	}
}
