package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backoffkit/retry/cmd/retry/internal/curl"
)

// Tests of retry http's request and output parity with curl 7.88 (the
// third review's items 6-14 and 26-28), against loopback servers.

// TestHostAndAuthorizationHeaders: -H 'Host: x' is the request's Host (and
// -v prints one Host line); an explicit -H Authorization replaces the one
// -u would generate, as in curl.
func TestHostAndAuthorizationHeaders(t *testing.T) {
	type seen struct{ host, auth string }
	got := make(chan seen, 1)
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.Header.Get("Authorization")}
	})
	r := runIn(t, "http", "-v", "-H", "Host: example.test", url)
	if s := received(got); r.code != 0 || s.host != "example.test" || strings.Count(r.stderr, "> Host: ") != 1 || !strings.Contains(r.stderr, "> Host: example.test\n") {
		t.Errorf("-H Host: exit %d, server saw Host %q; -v:\n%s", r.code, s.host, r.stderr)
	}
	r = runIn(t, "http", "-u", "me:pw", "-H", "Authorization: Bearer tok", url)
	if s := received(got); r.code != 0 || s.auth != "Bearer tok" {
		t.Errorf("-u with -H Authorization: exit %d, server saw %q; want the -H one", r.code, s.auth)
	}
	r = runIn(t, "http", "-H", "Authorization: Bearer tok", "-u", "me:pw", url)
	if s := received(got); r.code != 0 || s.auth != "Bearer tok" {
		t.Errorf("-H Authorization with -u after it: exit %d, server saw %q; want the -H one", r.code, s.auth)
	}
	// User info in the URL is basic authentication, with -L or not (the
	// transport alone would drop it), unless -u gives other credentials.
	withUser := strings.Replace(url, "://", "://us:pw@", 1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{withUser}, "Basic dXM6cHc="},
		{[]string{"-L", withUser}, "Basic dXM6cHc="},
		{[]string{"-u", "me:pw", withUser}, "Basic bWU6cHc="},
	} {
		r = runIn(t, append([]string{"http"}, tc.args...)...)
		if s := received(got); r.code != 0 || s.auth != tc.want {
			t.Errorf("%q: exit %d, server saw Authorization %q, want %q", tc.args, r.code, s.auth, tc.want)
		}
	}
}

// TestFailKeepsTheOutputFile: -f -o FILE on an HTTP error leaves an
// existing FILE as it was (curl opens the output only to write to it); a
// success replaces it, an empty success creates it empty.
func TestFailKeepsTheOutputFile(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			http.NotFound(w, r)
		case "/empty":
		default:
			io.WriteString(w, "new\n")
		}
	})
	dir := t.TempDir()
	file := filepath.Join(dir, "out")
	os.WriteFile(file, []byte("keep\n"), 0o644)
	r := runIn(t, "http", "-f", "-o", file, url+"/404")
	if b, _ := os.ReadFile(file); r.code != curl.ExitHTTPError || string(b) != "keep\n" {
		t.Errorf("-f -o on a 404: exit %d, file %q; want 22 and the file untouched", r.code, b)
	}
	r = runIn(t, "http", "-f", "-o", file, url+"/ok")
	if b, _ := os.ReadFile(file); r.code != 0 || string(b) != "new\n" {
		t.Errorf("-f -o on a 200: exit %d, file %q", r.code, b)
	}
	empty := filepath.Join(dir, "empty")
	r = runIn(t, "http", "-o", empty, url+"/empty")
	if b, err := os.ReadFile(empty); r.code != 0 || err != nil || len(b) != 0 {
		t.Errorf("-o on an empty 200: exit %d, file %q, %v; want it created empty", r.code, b, err)
	}
	missing := filepath.Join(dir, "missing")
	r = runIn(t, "http", "-f", "-o", missing, url+"/404")
	if _, err := os.Stat(missing); r.code != curl.ExitHTTPError || err == nil {
		t.Errorf("-f -o on a 404: exit %d, and the file was created", r.code)
	}
}

// TestCompressedEmptyBody: --compressed on an empty body that says
// Content-Encoding: gzip (a 204, a HEAD) is no error.
func TestCompressedEmptyBody(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		if r.URL.Path == "/204" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Length", "0")
	})
	for _, a := range [][]string{{url + "/204"}, {"-I", url}, {url + "/empty"}, {"-i", url + "/204"}} {
		r := runIn(t, append([]string{"http", "--compressed"}, a...)...)
		if r.code != 0 {
			t.Errorf("--compressed %q: exit %d, stderr %q", a, r.code, r.stderr)
		}
	}
}

// TestCompressedCorruptBody: --compressed on a body that is not in the
// Content-Encoding it claims, in one retry http cannot decode (br), or
// whose compressed stream ends before the body does, exits 61, as curl
// ("Unrecognized or bad HTTP Content or Transfer-Encoding"), not 56 or 0
// with the bytes as they came; codings listed twice are both decoded.
func TestCompressedCorruptBody(t *testing.T) {
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", strings.TrimPrefix(r.URL.Path, "/"))
		switch r.URL.Path {
		case "/gzip-checksum":
			w.Header().Set("Content-Encoding", "gzip")
			raw := gz([]byte("hello"))
			raw[len(raw)-5] ^= 0xff // the CRC-32
			w.Write(raw)
		case "/gzip-cut": // every byte of the body, but not of the stream
			w.Header().Set("Content-Encoding", "gzip")
			raw := gz([]byte("hello"))
			w.Write(raw[:len(raw)-6])
		case "/twice":
			w.Header().Set("Content-Encoding", "gzip, gzip")
			w.Write(gz(gz([]byte("hello"))))
		default:
			io.WriteString(w, "not compressed at all, whatever the header says")
		}
	})
	for _, path := range []string{"/gzip", "/deflate", "/gzip-checksum", "/gzip-cut", "/br"} {
		r := runIn(t, "http", "--compressed", "-o", "/dev/null", url+path)
		if r.code != curl.ExitBadEncoding || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("--compressed %s: exit %d, want %d and one line; stderr:\n%s", path, r.code, curl.ExitBadEncoding, r.stderr)
		}
	}
	if r := runIn(t, "http", "--compressed", url+"/twice"); r.code != 0 || r.stdout != "hello" {
		t.Errorf("--compressed, gzip twice: exit %d, stdout %q; want hello", r.code, r.stdout)
	}
}

// TestHeaderWriteErrors: headers that cannot be written (-i or -I to a
// full device, -D to one) exit 23, like a body that cannot.
func TestHeaderWriteErrors(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {})
	for _, a := range [][]string{{"-I", "-o", "/dev/full"}, {"-i", "-o", "/dev/full"}, {"-D", "/dev/full", "-o", "-"}} {
		r := runIn(t, append(append([]string{"http"}, a...), url)...)
		if r.code != curl.ExitWrite {
			t.Errorf("%q: exit %d, want 23; stderr %q", a, r.code, r.stderr)
		}
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer full.Close()
	code := run([]string{"http", "-I", url}, strings.NewReader(""), full, io.Discard)
	if code != curl.ExitWrite {
		t.Errorf("-I to a full stdout: exit %d, want 23", code)
	}
}

// TestUnreadableBodyFiles: -d @FILE, --data-binary @FILE, --json @FILE and
// -F name=@FILE that cannot be read exit 26 (curl's "Failed to open/read
// local data"), sending nothing.
func TestUnreadableBodyFiles(t *testing.T) {
	url, n := counting(t, func(w http.ResponseWriter, r *http.Request) {})
	for _, a := range [][]string{
		{"-d", "@/nonexistent/x"}, {"--data-binary", "@/nonexistent/x"}, {"--json", "@/nonexistent/x"},
		{"--data-urlencode", "a@/nonexistent/x"}, {"-F", "f=@/nonexistent/x"}, {"-F", "f=</nonexistent/x"},
	} {
		r := runIn(t, append(append([]string{"http"}, a...), url)...)
		if r.code != curl.ExitRead || !strings.Contains(r.stderr, "/nonexistent/x") {
			t.Errorf("%q: exit %d, stderr %q; want 26 naming the file", a, r.code, r.stderr)
		}
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o644)
	https := strings.Replace(url, "http://", "https://", 1)
	for _, ca := range []string{"/nonexistent/ca.pem", notPEM} { // curl's 77
		if r := runIn(t, "http", "--cacert", ca, https); r.code != curl.ExitCACertFile || !strings.Contains(r.stderr, ca) {
			t.Errorf("--cacert %s: exit %d, stderr %q; want %d naming the file", ca, r.code, r.stderr, curl.ExitCACertFile)
		}
	}
	if n.Load() != 0 {
		t.Errorf("%d requests sent", n.Load())
	}
	// Not read where no certificate is checked: http://, -k.
	for _, args := range [][]string{{"--cacert", "/nonexistent/ca.pem", url}, {"-k", "--cacert", "/nonexistent/ca.pem", url}} {
		if r := runIn(t, append([]string{"http"}, args...)...); r.code != 0 {
			t.Errorf("%q: exit %d, stderr %q; want 0 (as curl)", args, r.code, r.stderr)
		}
	}
}

// TestWriteOutAfterTooManyRedirects: -w reports the last response (302)
// after too many redirects, as curl does, not 000.
func TestWriteOutAfterTooManyRedirects(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	r := runIn(t, "http", "-sL", "--max-redirs", "2", "-w", "%{http_code} %{num_redirects} %{url_effective}", url+"/start")
	if r.code != curl.ExitTooManyRedirs || r.stdout != "302 2 "+url+"/loop" {
		t.Errorf("exit %d, stdout %q; want 47 and 302 2 %s/loop", r.code, r.stdout, url)
	}
}

// TestURLSchemes: schemes as curl reads them.
func TestURLSchemes(t *testing.T) {
	url, n := counting(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
	hostPort := strings.TrimPrefix(url, "http://")
	for _, tc := range []struct {
		url  string
		code int
		out  string
	}{
		{"http:/" + hostPort + "/one", 0, "/one"},
		{"HTTP://" + hostPort + "/two", 0, "/two"},
		{"http:///" + hostPort + "/three", 0, "/three"},
		{hostPort + "/four", 0, "/four"},
		{"mailto:x@y.invalid", curl.ExitUnsupported, ""},
		{"MailTo:x@y.invalid", curl.ExitUnsupported, ""},
		{"ftp://" + hostPort + "/", curl.ExitUnsupported, ""},
		{"h.invalid:/a", curl.ExitUnsupported, ""},
		{"http:" + hostPort + "/five", curl.ExitURLMalformat, ""},
		{"localhost:abc", curl.ExitURLMalformat, ""},
	} {
		r := runIn(t, "http", tc.url)
		if r.code != tc.code || r.stdout != tc.out {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q", tc.url, r.code, r.stdout, r.stderr, tc.code, tc.out)
		}
	}
	if n.Load() != 4 {
		t.Errorf("%d requests, want 4", n.Load())
	}
}

// TestDataURLEncode: --data-urlencode as curl 7.88: content, =content,
// name=content, @file, name@file; spaces become '+'; the name is sent as
// given; it joins -d's parts with '&', in the body or with -G the query.
func TestDataURLEncode(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("a=1\r\nb=2\r\n"), 0o644)
	type seen struct{ body, query string }
	got := make(chan seen, 1)
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{string(b), r.URL.RawQuery}
	})
	r := runIn(t, "http", "--data-urlencode", "a b", "--data-urlencode", "=c&d", "--data-urlencode", "n=é/~-._ x+",
		"--data-urlencode", "m@"+file, "--data-urlencode", "@"+file, "--data-urlencode", "x@y=z", url)
	want := "a+b&c%26d&n=%C3%A9%2F~-._+x%2B&m=a%3D1%0D%0Ab%3D2%0D%0A&a%3D1%0D%0Ab%3D2%0D%0A&x@y=z"
	if s := received(got); r.code != 0 || s.body != want {
		t.Errorf("exit %d, body %q, want %q", r.code, s.body, want)
	}
	r = runIn(t, "http", "-G", "--data-urlencode", "q=a b", "-d", "r=1", url)
	if s := received(got); r.code != 0 || s.query != "q=a+b&r=1" {
		t.Errorf("-G: exit %d, query %q", r.code, s.query)
	}
}

// TestWriteOutUnknownVariable: an unknown -w variable is a warning (even
// with -s, as curl) and prints as nothing; the transfer goes on.
func TestWriteOutUnknownVariable(t *testing.T) {
	url, n := counting(t, func(w http.ResponseWriter, r *http.Request) {})
	r := runIn(t, "http", "-s", "-w", "%{bogus} %{http_code}", url)
	if r.code != 0 || r.stdout != " 200" || n.Load() != 1 || !strings.Contains(r.stderr, "unknown --write-out variable: 'bogus'") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestFailShowsHeaders: -f -i and -I -f print the headers of an HTTP error
// (not its body), as curl 7.88 does, and exit 22.
func TestFailShowsHeaders(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Why", "gone")
		http.NotFound(w, r)
	})
	for _, a := range [][]string{{"-f", "-i"}, {"-I", "-f"}, {"-f", "-D", "-"}} {
		r := runIn(t, append(append([]string{"http", "-s"}, a...), url)...)
		if r.code != curl.ExitHTTPError || !strings.HasPrefix(r.stdout, "HTTP/1.1 404 Not Found\r\n") || !strings.Contains(r.stdout, "X-Why: gone\r\n") || strings.Contains(r.stdout, "page not found") {
			t.Errorf("%q: exit %d, stdout %q; want 22 and the headers only", a, r.code, r.stdout)
		}
	}
}

// received returns what the server sent on c for the request just made,
// the zero value if none came (run has returned: an answered request has
// been recorded).
func received[T any](c chan T) T {
	select {
	case v := <-c:
		return v
	default:
		var zero T
		return zero
	}
}
