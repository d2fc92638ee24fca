package main

import (
	"compress/gzip"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/clitest"
	"github.com/backoffkit/retry/cmd/retry/internal/curl"
	"github.com/backoffkit/retry/cmd/retry/internal/httpcmd"
	"github.com/backoffkit/retry/internal/redistest"
)

// Tests of retry http's curl parity, against loopback servers only. DNS
// failures use names under .invalid, which retry never looks up.

// counting serves h and counts its requests.
func counting(t *testing.T, h http.HandlerFunc) (url string, n *atomic.Int32) {
	t.Helper()
	n = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, n
}

func TestCurlExitCodes(t *testing.T) {
	refused := "http://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/"
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	hung, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	})
	loop, loops := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/again", http.StatusFound)
	})
	reset, resets := counting(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close() // no response at all
	})
	rst, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close() // RST
	})
	badPort, badPorts := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:99999/", http.StatusFound)
	})
	partial, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "only ten..")
	})
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure\n") }))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o644)

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		retries int // retry lines in the log
		stdout  string
	}{
		{"dns not retried", []string{"http://no-such-host.invalid/"}, curl.ExitResolve, 0, ""},
		{"dns with --retry-all-errors", []string{"--retry-all-errors", "--attempts", "2", "http://no-such-host.invalid/"}, curl.ExitResolve, 1, ""},
		{"connection refused", []string{"--attempts", "2", refused}, curl.ExitConnect, 1, ""},
		{"timeout", []string{"-m", "50ms", "--attempts", "2", hung}, curl.ExitTimeout, 1, ""},
		{"deadline", []string{"--deadline", "100ms", "--attempts", "2", hung}, curl.ExitTimeout, 0, ""},
		{"tls not retried", []string{"--attempts", "2", tlsSrv.URL}, curl.ExitTLS, 0, ""},
		{"tls -k", []string{"-k", tlsSrv.URL}, 0, 0, "secure\n"},
		{"tls --cacert", []string{"--cacert", ca, tlsSrv.URL}, 0, 0, "secure\n"},
		{"too many redirects", []string{"-L", "--max-redirs", "3", loop}, curl.ExitTooManyRedirs, 0, ""},
		{"empty reply", []string{"--attempts", "2", reset}, curl.ExitGotNothing, 1, ""},
		{"reset", []string{"--attempts", "2", rst}, curl.ExitRecv, 1, ""},
		{"invalid port", []string{"--attempts", "2", "http://127.0.0.1:99999/"}, curl.ExitURLMalformat, 0, ""},
		{"redirect to an invalid port", []string{"-L", "--attempts", "2", badPort}, curl.ExitURLMalformat, 0, ""},
		{"partial body", []string{partial}, curl.ExitPartial, 0, "only ten.."},
		{"write error", []string{"-o", "/nonexistent/dir/out", partial}, curl.ExitWrite, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRetry(t, "", nil, args([]string{"http"}, fast, tc.args)...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if got := len(lines(r.stderr, "retrying in")); got != tc.retries {
				t.Errorf("%d retries, want %d:\n%s", got, tc.retries, r.stderr)
			}
			if tc.code != 0 && strings.Count(r.stderr, "\n") != tc.retries+1 {
				t.Errorf("want the retry lines and one closing line:\n%s", r.stderr)
			}
			if r.stdout != tc.stdout {
				t.Errorf("stdout %q, want %q", r.stdout, tc.stdout)
			}
		})
	}
	if loops.Load() != 4 {
		t.Errorf("the redirect loop was followed %d times, want 4 (3 redirects allowed)", loops.Load())
	}
	if badPorts.Load() != 1 {
		t.Errorf("the redirect to an invalid port was retried: %d requests, want 1", badPorts.Load())
	}
	if resets.Load() != 2 {
		t.Errorf("the resetting server saw %d requests, want 2", resets.Load())
	}
}

// TestCurlRedirects: without -L the 3xx is the answer (exit 0), with -L it
// is followed; -i shows every hop's headers.
func TestCurlRedirects(t *testing.T) {
	url, n := counting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusMovedPermanently)
			return
		}
		io.WriteString(w, "new\n")
	})
	r := runRetry(t, "", nil, "http", url+"/old")
	if r.code != 0 || n.Load() != 1 || !strings.Contains(r.stdout, "Moved Permanently") {
		t.Errorf("no -L: exit %d after %d requests, stdout %q", r.code, n.Load(), r.stdout)
	}
	r = runRetry(t, "", nil, "http", "-iL", "-w", "%{http_code} %{num_redirects} %{url_effective}", url+"/old")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "HTTP/1.1 301 Moved Permanently\r\n") ||
		!strings.Contains(r.stdout, "\r\n\r\nHTTP/1.1 200 OK\r\n") || !strings.HasSuffix(r.stdout, "\r\n\r\nnew\n200 1 "+url+"/new") {
		t.Errorf("-iL: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestCurlRedirectEvents: with -L the log tells of the request, not of each
// hop: a hop answered with a redirect is a "redirect" event, and "success"
// comes once, for the final answer, never for a request that then fails.
func TestCurlRedirectEvents(t *testing.T) {
	var flaky atomic.Int32
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/old":
			http.Redirect(w, r, "/new", http.StatusFound)
		case "/new":
			io.WriteString(w, "new\n")
		case "/down":
			http.Redirect(w, r, "/503", http.StatusFound)
		case "/503":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/flaky":
			if flaky.Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			http.Redirect(w, r, "/new", http.StatusFound)
		}
	})
	events := func(r result) string {
		var kinds []string
		for _, l := range clitest.JSONLines(t, r.stderr) {
			k := l["event"].(string)
			if k == "redirect" {
				k += fmt.Sprintf(" %v %v", l["status"], l["url"])
			}
			kinds = append(kinds, k)
		}
		return strings.Join(kinds, ", ")
	}
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/old", "redirect 302 " + url + "/new, success", 0},
		{"/down", "redirect 302 " + url + "/503, retry, give-up", cli.ExitGaveUp},
		{"/loop", "redirect 302 " + url + "/loop, redirect 302 " + url + "/loop, error", curl.ExitTooManyRedirs},
	} {
		r := runRetry(t, "", nil, args([]string{"http", "-L", "-o", "/dev/null", "--max-redirs", "1", "--attempts", "2", "--log-format", "json"}, fast, []string{url + tc.path})...)
		if got := events(r); r.code != tc.code || got != tc.want {
			t.Errorf("-L %s: exit %d, events %q; want exit %d, events %q; stderr:\n%s", tc.path, r.code, got, tc.code, tc.want, r.stderr)
		}
	}
	// The text log says a retried hop succeeded with a redirect, and no more.
	r := runRetry(t, "", nil, args([]string{"http", "-L", "-o", "/dev/null", "--attempts", "2"}, fast, []string{url + "/flaky"})...)
	want := "retry http: attempt 2/2 succeeded: 302, a redirect to " + url + "/new\n"
	if r.code != 0 || len(lines(r.stderr, "retry http: ")) != 2 || !strings.HasSuffix(r.stderr, want) {
		t.Errorf("-L /flaky: exit %d; want 2 lines, the last %q; stderr:\n%s", r.code, want, r.stderr)
	}
}

// TestCurlRequest: what the server receives for curl's request flags.
func TestCurlRequest(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "body.txt")
	os.WriteFile(file, []byte("line1\r\nline2\n"), 0o644)
	type seen struct {
		method, path, query, body, ctype, accept, ua, auth, form string
		enc                                                      []string
	}
	got := make(chan seen, 1)
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, ctype: r.Header.Get("Content-Type"),
			accept: r.Header.Get("Accept"), ua: r.Header.Get("User-Agent"), auth: r.Header.Get("Authorization"), enc: r.Header.Values("Accept-Encoding")}
		if strings.HasPrefix(s.ctype, "multipart/form-data") {
			r.ParseMultipartForm(1 << 20)
			f, h, err := r.FormFile("upload")
			if err == nil {
				b, _ := io.ReadAll(f)
				s.form = fmt.Sprintf("name=%s upload=%s:%q %s", r.FormValue("name"), h.Filename, b, h.Header.Get("Content-Type"))
			}
		} else {
			b, _ := io.ReadAll(r.Body)
			s.body = string(b)
		}
		got <- s
	})
	hostPort := strings.TrimPrefix(url, "http://")
	for _, tc := range []struct {
		name string
		args []string
		want seen
	}{
		{"scheme-less URL, default headers", []string{hostPort + "/p"}, seen{method: "GET", path: "/p", accept: "*/*", ua: "backoffkit-retry/"}},
		{"repeated -d", []string{"-d", "a=1", "--data", "b=2", url}, seen{method: "POST", path: "/", body: "a=1&b=2", ctype: "application/x-www-form-urlencoded", accept: "*/*", ua: "backoffkit-retry/"}},
		{"-d @file strips newlines", []string{"-d", "@" + file, url}, seen{method: "POST", path: "/", body: "line1line2", ctype: "application/x-www-form-urlencoded", accept: "*/*", ua: "backoffkit-retry/"}},
		{"--data-binary keeps them", []string{"--data-binary", "@" + file, "-d", "x", url}, seen{method: "POST", path: "/", body: "line1\r\nline2\n&x", ctype: "application/x-www-form-urlencoded", accept: "*/*", ua: "backoffkit-retry/"}},
		{"--json", []string{"--json", `{"a":`, "--json", `1}`, url}, seen{method: "POST", path: "/", body: `{"a":1}`, ctype: "application/json", accept: "application/json", ua: "backoffkit-retry/"}},
		{"-G", []string{"-G", "-d", "q=1", "-d", "r=2", url + "/s?x=0"}, seen{method: "GET", path: "/s", query: "x=0&q=1&r=2", accept: "*/*", ua: "backoffkit-retry/"}},
		{"-u -A -XPUT", []string{"-u", "me:pw", "-A", "agent/1", "-XPUT", url}, seen{method: "PUT", path: "/", accept: "*/*", ua: "agent/1", auth: "Basic bWU6cHc="}},
		{"-H removes Accept", []string{"-H", "Accept:", "--request", "DELETE", url}, seen{method: "DELETE", path: "/", ua: "backoffkit-retry/"}},
		// The part's type by the filename= name first, then by the file's.
		{"-F", []string{"-F", "name=x", "-F", "upload=@" + file + ";filename=f.png", url}, seen{method: "POST", path: "/", ctype: "multipart/form-data", accept: "*/*", ua: "backoffkit-retry/", form: `name=x upload=f.png:"line1\r\nline2\n" image/png`}},
		{"-F type by the file", []string{"-F", "name=x", "-F", "upload=@" + file + ";filename=x.bin", url}, seen{method: "POST", path: "/", ctype: "multipart/form-data", accept: "*/*", ua: "backoffkit-retry/", form: `name=x upload=x.bin:"line1\r\nline2\n" text/plain`}},
		{"--compressed", []string{"--compressed", "--url", url}, seen{method: "GET", path: "/", accept: "*/*", ua: "backoffkit-retry/", enc: []string{"gzip, deflate"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRetry(t, "", nil, append([]string{"http"}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			s := <-got
			w := tc.want
			if s.method != w.method || s.path != w.path || s.query != w.query || s.body != w.body ||
				!strings.HasPrefix(s.ctype, w.ctype) || s.accept != w.accept || !strings.HasPrefix(s.ua, w.ua) ||
				s.auth != w.auth || s.form != w.form || strings.Join(s.enc, ",") != strings.Join(w.enc, ",") {
				t.Errorf("server saw %+v\nwant %+v", s, w)
			}
		})
	}
}

// TestCurlOutputs: -i, -I, -D, -o -, -w, --compressed and -v.
func TestCurlOutputs(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", "yes")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, "zipped\n")
			zw.Close()
			return
		}
		io.WriteString(w, "body\n")
	})
	dump := filepath.Join(t.TempDir(), "headers")
	for _, tc := range []struct {
		name string
		args []string
		want func(r result) bool
	}{
		{"-i", []string{"-i", url}, func(r result) bool {
			return strings.HasPrefix(r.stdout, "HTTP/1.1 200 OK\r\n") && strings.Contains(r.stdout, "X-Test: yes\r\n") && strings.HasSuffix(r.stdout, "\r\n\r\nbody\n")
		}},
		{"-I", []string{"-I", url}, func(r result) bool {
			return strings.HasPrefix(r.stdout, "HTTP/1.1 200 OK\r\n") && strings.HasSuffix(r.stdout, "\r\n\r\n")
		}},
		{"-D", []string{"-D", dump, "-o", "-", url}, func(r result) bool {
			b, _ := os.ReadFile(dump)
			return r.stdout == "body\n" && strings.Contains(string(b), "X-Test: yes")
		}},
		{"-w", []string{"-w", `%{http_code} %{num_retries} %{url_effective} %{method} %{size_download}\n`, "-s", url + "/w?key=s3cr3t"}, func(r result) bool {
			return r.stdout == "body\n200 0 "+url+"/w?key=REDACTED GET 5\n"
		}},
		{"-w any case", []string{"-w", `%{HTTP_CODE} %{Num_Retries}`, "-s", url}, func(r result) bool {
			return r.stdout == "body\n200 0" && r.stderr == ""
		}},
		{"-w time_total", []string{"-w", `%{time_total}`, url}, func(r result) bool {
			var f float64
			_, err := fmt.Sscanf(strings.TrimPrefix(r.stdout, "body\n"), "%f", &f)
			return err == nil && f > 0
		}},
		{"--compressed", []string{"--compressed", url}, func(r result) bool { return r.stdout == "zipped\n" }},
		{"no --compressed asks for none", []string{url}, func(r result) bool { return r.stdout == "body\n" }},
		{"-v", []string{"-v", "-H", "Authorization: Bearer s3cr3t", url + "/v"}, func(r result) bool {
			return strings.Contains(r.stderr, "> GET /v HTTP/1.1\n") && strings.Contains(r.stderr, "> Authorization: REDACTED\n") &&
				strings.Contains(r.stderr, "< HTTP/1.1 200 OK\n") && strings.Contains(r.stderr, "< X-Test: yes\n") && !strings.Contains(r.stderr, "s3cr3t")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRetry(t, "", nil, append([]string{"http"}, tc.args...)...)
			if r.code != 0 || !tc.want(r) {
				t.Errorf("exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestCurlNumRetries: %{num_retries} counts the retries made.
func TestCurlNumRetries(t *testing.T) {
	s := &scripted{statuses: []int{503, 502, 200}}
	url := serve(t, s)
	r := runRetry(t, "", nil, args([]string{"http", "-s", "-o", "/dev/null", "-w", "%{http_code} %{num_retries}"}, fast, []string{url})...)
	if r.code != 0 || r.stdout != "200 2" || r.stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 200 2 and a silent log", r.code, r.stdout, r.stderr)
	}
}

// TestCurlProxy: -x sends the request to the proxy, with the target as an
// absolute URL (the target's name is never resolved here).
func TestCurlProxy(t *testing.T) {
	got := make(chan string, 1)
	proxy, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.String()
		io.WriteString(w, "via proxy\n")
	})
	r := runRetry(t, "", nil, "http", "-x", strings.TrimPrefix(proxy, "http://"), "http://target.invalid/x")
	if r.code != 0 || r.stdout != "via proxy\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if u := <-got; u != "http://target.invalid/x" {
		t.Errorf("the proxy saw %q", u)
	}
}

// TestCurlCombinedFlags: -fsSL, -sS and -XPOST as curl reads them.
func TestCurlCombinedFlags(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, r.Method, http.StatusNotFound)
	})
	r := runRetry(t, "", nil, "http", "-fsSL", "-XPOST", url)
	if r.code != curl.ExitHTTPError || r.stdout != "" || r.stderr == "" || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("-fsSL -XPOST: exit %d, stdout %q, stderr %q; want 22, no body, one error line (-S)", r.code, r.stdout, r.stderr)
	}
	r = runRetry(t, "", nil, "http", "-fs", url)
	if r.code != curl.ExitHTTPError || r.stderr != "" {
		t.Errorf("-fs: exit %d, stderr %q; want 22 and nothing on stderr", r.code, r.stderr)
	}
	r = runRetry(t, "", nil, "http", "-sXPUT", url)
	if r.code != 0 || r.stdout != "PUT\n" {
		t.Errorf("-sXPUT: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestHTTPFlagsAsUsersTypeThem: errors and the manual write -H and
// --max-time, never --H or Go's -attempts, and the manual lists every flag.
func TestHTTPFlagsAsUsersTypeThem(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"http", "-H"}, "flag needs an argument: -H"},
		{[]string{"http", "--max-time", "soon", "http://127.0.0.1:1/"}, `invalid value "soon" for flag --max-time`},
		{[]string{"http", "-attempts", "0", "http://127.0.0.1:1/"}, "--attempts"},
		{[]string{"http", "--retry", "3", "http://127.0.0.1:1/"}, "--retry: is curl's retry flag; retry http uses --attempts N+1"},
		{[]string{"http", "--codes", "200", "http://127.0.0.1:1/"}, "status code 200 is not a failure"},
	} {
		r := runRetry(t, "", nil, tc.args...)
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "--H") || strings.Contains(r.stderr, " -attempts") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	r := runRetry(t, "", nil, "http", "--help")
	httpcmd.Flags().VisitAll(func(f *flag.Flag) {
		n := cli.DashName(f.Name)
		if !strings.Contains(r.stdout, " "+n+" ") && !strings.Contains(r.stdout, " "+n+",") && !strings.Contains(r.stdout, " "+n+"\n") {
			t.Errorf("retry http --help does not list %s", n)
		}
	})
	for _, code := range []int{cli.ExitGaveUp, curl.ExitResolve, curl.ExitConnect, curl.ExitHTTPError, curl.ExitTimeout, curl.ExitTLS, curl.ExitTooManyRedirs, curl.ExitRecv} {
		if !strings.Contains(r.stdout, fmt.Sprintf("\n    %-4d ", code)) {
			t.Errorf("retry http --help does not document exit status %d", code)
		}
	}
	for _, s := range []string{"-H, --header", "EXIT STATUS", "--attempts N+1", "%{num_retries}", "curlResolve"} {
		if want := !strings.HasPrefix(s, "curl"); strings.Contains(r.stdout, s) != want {
			t.Errorf("retry http --help: contains %q = %v", s, !want)
		}
	}
}

// TestHTTPJSONLogClosingLine: with --log-format json every stderr line of
// retry http is JSON, the closing one (an error that sent no give-up event)
// included.
func TestHTTPJSONLogClosingLine(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	r := runRetry(t, "", nil, "http", "--log-format", "json", "-f", url)
	got := clitest.JSONLines(t, r.stderr)
	// No "success" for a request that fails (-f and a 404).
	if r.code != curl.ExitHTTPError || len(got) != 1 || got[0]["event"] != "error" || got[0]["exit_code"] != 22.0 {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = runRetry(t, "", nil, "http", "--log-format", "json", "--attempts", "2", "--initial-delay", "1ms", "--jitter", "0", "http://x.invalid/")
	got = clitest.JSONLines(t, r.stderr)
	if r.code != curl.ExitResolve || len(got) != 1 || got[0]["event"] != "give-up" || got[0]["reason"] != "permanent" {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestCurlRedirectTargets: where -L cannot go. A Location that is not a URL
// exits 3 (curl's "malformed"), one to another protocol 1 (unsupported),
// one without a host 3, each with one closing line naming the target, and
// never the request's own URL as the redirect's. Without -L the 302 is the
// answer, whatever its Location says. -w's url_effective is the URL fetched
// last, num_redirects the redirects followed, when a later hop fails too.
func TestCurlRedirectTargets(t *testing.T) {
	dead := "http://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/x"
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		loc := map[string]string{"/bad": "http://[::1", "/ftp": "ftp://127.0.0.1/f", "/nohost": "http:///x", "/dead": dead,
			"/badport": "http://127.0.0.1:99999/"}[r.URL.Path]
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusFound)
	})
	for _, tc := range []struct {
		path, stderr, redirect, effective string
		code, redirects                   int
	}{
		// A redirect taken that leads nowhere counts in num_redirects, as
		// curl's; the URL fetched last is the one that redirected.
		{"/bad", `retry http: GET ` + url + `/bad: 302 with a Location that is not a URL ("http://[::1": missing ']' in host)`, "http://[::1", url + "/bad", curl.ExitURLMalformat, 1},
		{"/ftp", `retry http: GET ` + url + `/ftp: a redirect to ftp://127.0.0.1/f: protocol "ftp" not supported (-L follows http:// and https:// only)`, "ftp://127.0.0.1/f", url + "/ftp", curl.ExitUnsupported, 1},
		{"/nohost", `retry http: GET ` + url + `/nohost: a redirect to http:///x: URL rejected: no host`, "http:///x", url + "/nohost", curl.ExitURLMalformat, 1},
		{"/badport", `retry http: GET ` + url + `/badport: a redirect to http://127.0.0.1:99999/: URL rejected: port 99999 is outside 0-65535`, "http://127.0.0.1:99999/", url + "/badport", curl.ExitURLMalformat, 1},
		{"/dead", "connection refused", dead, dead, curl.ExitConnect, 1},
	} {
		r := runRetry(t, "", nil, "http", "-L", "--attempts", "1", "-w", "%{num_redirects} %{url_effective}", url+tc.path)
		last := strings.TrimSuffix(r.stderr, "\n")
		last = last[strings.LastIndex(last, "\n")+1:]
		want := fmt.Sprintf("%d %s", tc.redirects, tc.effective)
		if r.code != tc.code || !strings.Contains(last, tc.stderr) || r.stdout != want || strings.Contains(r.stderr, "other (") {
			t.Errorf("-L %s: exit %d, -w %q, stderr:\n%s\nwant exit %d, -w %q, a last line with %q", tc.path, r.code, r.stdout, r.stderr, tc.code, want, tc.stderr)
		}
		r = runRetry(t, "", nil, "http", "-L", "--attempts", "1", "--log-format", "json", url+tc.path)
		if ev := clitest.JSONLines(t, r.stderr); len(ev) == 0 || ev[0]["event"] != "redirect" || ev[0]["url"] != tc.redirect {
			t.Errorf("-L %s: the first event is not a redirect to %s:\n%s", tc.path, tc.redirect, r.stderr)
		}
		if r := runRetry(t, "", nil, "http", "-i", url+tc.path); r.code != 0 || !strings.HasPrefix(r.stdout, "HTTP/1.1 302 Found\r\n") || r.stderr != "" {
			t.Errorf("no -L, %s: exit %d, stdout %q, stderr %q; want the 302 and exit 0", tc.path, r.code, r.stdout, r.stderr)
		}
		// -i and -D write the redirect's headers, as curl, though the
		// request failed after it.
		dump := filepath.Join(t.TempDir(), "headers")
		r = runRetry(t, "", nil, "http", "-L", "-i", "-D", dump, "--attempts", "1", url+tc.path)
		d, _ := os.ReadFile(dump)
		if r.code != tc.code || !strings.HasPrefix(r.stdout, "HTTP/1.1 302 Found\r\n") || !strings.HasPrefix(string(d), "HTTP/1.1 302 Found\r\n") {
			t.Errorf("-L -i -D, %s: exit %d, stdout %q, -D %q; want the 302's headers in both", tc.path, r.code, r.stdout, d)
		}
	}
}

// TestBodyTimeoutNamesTheLimit: a body cut short by a time limit exits 28
// and names the limit as typed, not "context deadline exceeded". The
// server sends the headers and part of the body, then waits for the client
// to go away.
func TestBodyTimeoutNamesTheLimit(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "part")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	cfg := filepath.Join(t.TempDir(), "cfg.json")
	os.WriteFile(cfg, []byte(`{"deadline": 3}`), 0o644)
	// The answer's head comes at once, within the deadline of 3s (a loaded
	// machine took more than 1s): its body is what times out. An attempt
	// whose head did not come within its 400ms -m is retried: its line
	// comes first.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", cfg}, "timed out: the deadline (3s, from --config " + cfg + ": deadline) passed"},
		{[]string{"-m", "400ms"}, "timed out: the attempt's -m (400ms) passed"},
		{[]string{"--max-time", "400ms", "--deadline", "1m"}, "timed out: the attempt's --max-time (400ms) passed"},
		{[]string{"--deadline", "3s"}, "timed out: the --deadline (3s) passed"},
		{[]string{"--deadline", "3s", "-m", "1m"}, "timed out: the --deadline (3s) passed"},
	} {
		r := runRetry(t, "", nil, append([]string{"http"}, append(tc.args, url+"/slow")...)...)
		want := "retry http: reading the body of GET " + url + "/slow: " + tc.want + "\n"
		before, last, _ := strings.Cut(r.stderr, want)
		retried := len(lines(before, ": timeout (context deadline exceeded); retrying in ")) == strings.Count(before, "\n")
		if r.code != curl.ExitTimeout || r.stdout != "part" || last != "" || !strings.HasSuffix(r.stderr, want) || !retried {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant exit %d, %q last", tc.args, r.code, r.stdout, r.stderr, curl.ExitTimeout, want)
		}
	}
}

// TestCurlIncludeTransferEncoding: -i, -I, -D and -v show the
// Transfer-Encoding of a chunked answer, as curl does (net/http moves it
// out of the header: it was missing).
func TestCurlIncludeTransferEncoding(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", "yes")
		io.WriteString(w, "part1")
		w.(http.Flusher).Flush() // no Content-Length: chunked
		io.WriteString(w, "part2")
	})
	dump := filepath.Join(t.TempDir(), "head")
	for _, a := range [][]string{{"-i", url}, {"-I", "-X", "GET", url}, {"-D", dump, "-o", "/dev/null", url}, {"-v", "-o", "/dev/null", url}} {
		r := runRetry(t, "", nil, append([]string{"http"}, a...)...)
		out := r.stdout
		switch a[0] {
		case "-D":
			b, _ := os.ReadFile(dump)
			out = string(b)
		case "-v":
			out = strings.ReplaceAll(strings.ReplaceAll(r.stderr, "\n< ", "\n"), "\n", "\r\n")
		}
		if r.code != 0 || !strings.Contains(out, "\r\nTransfer-Encoding: chunked\r\n") {
			t.Errorf("retry http %q: exit %d, the head lacks Transfer-Encoding: chunked:\n%s", a, r.code, out)
		}
	}
	r := runRetry(t, "", nil, "http", "-s", "-o", "/dev/null", "-w", "%{num_headers} %header{transfer-encoding}", url)
	if r.stdout != "4 chunked" { // Content-Type, Date, Transfer-Encoding, X-Test
		t.Errorf("-w num_headers, transfer-encoding: %q, want \"4 chunked\"", r.stdout)
	}
}

// TestCurlWriteOutVariables: curl's common -w variables, as curl 7.88
// writes them (each checked against curl on a loopback server), secrets
// redacted. They printed nothing and a warning.
func TestCurlWriteOutVariables(t *testing.T) {
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new?key=s3cr3t", http.StatusFound)
			return
		}
		w.Header().Add("X-Dup", "a")
		w.Header().Add("X-Dup", "b")
		io.WriteString(w, "body\n")
	})
	port := url[strings.LastIndexByte(url, ':')+1:]
	for _, tc := range []struct {
		name string
		args []string
		want string // a regular expression for the whole stdout
	}{
		{"connection", []string{"-w", "%{remote_ip} %{remote_port} %{local_ip} %{scheme} %{http_version} %{num_connects} %{proxy_used}", url},
			`^body\n127\.0\.0\.1 ` + port + ` 127\.0\.0\.1 HTTP 1\.1 1 0$`},
		{"times", []string{"-o", "/dev/null", "-w", "%{time_namelookup} %{time_connect} %{time_appconnect} %{time_pretransfer} %{time_starttransfer} %{time_redirect} %{time_total}", url},
			`^\d+\.\d{6} \d+\.\d{6} 0\.000000 \d+\.\d{6} \d+\.\d{6} 0\.000000 \d+\.\d{6}$`},
		{"redirect not followed", []string{"-w", "%{redirect_url} %{http_code}", url + "/old"},
			`^<a href="/new\?key=s3cr3t">Found</a>\.\n\n` + regexp.QuoteMeta(url) + `/new\?key=REDACTED 302$`},
		{"redirect followed", []string{"-L", "-o", "/dev/null", "-w", "%{redirect_url}|%{num_redirects}|%{url}|%{url_effective}|%{urle.path}|%{urle.query}|%{url.port}", url + "/old"},
			`^\|1\|` + regexp.QuoteMeta(url) + `/old\|` + regexp.QuoteMeta(url) + `/new\?key=REDACTED\|/new\|key=REDACTED\|` + port + `$`},
		{"sizes", []string{"-o", "/dev/null", "-d", "abc", "-A", "x", "-H", "Accept:", "-w", "%{size_upload} %{size_request} %{size_download} %{size_header} %{num_headers}", url},
			// POST / HTTP/1.1, Host, User-Agent: x, Content-Length: 3,
			// Content-Type: application/x-www-form-urlencoded, blank, abc.
			`^3 ` + strconv.Itoa(len("POST / HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nUser-Agent: x\r\nContent-Length: 3\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\nabc")) + ` 5 \d+ 5$`},
		{"header", []string{"-o", "/dev/null", "-w", "%header{x-dup}|%header{nope}|%{header_json}", url},
			`^a, b\|\|\{"content-length":\["5"\],"content-type":\["text/plain; charset=utf-8"\],"date":\["[^"]+"\],"x-dup":\["a","b"\]\}$`},
		{"json", []string{"-o", "/dev/null", "-w", "%{json}", url + "/?key=s3cr3t"},
			`^\{"content_type":"text/plain; charset=utf-8","errormsg":null,"exitcode":0,"filename_effective":"/dev/null",.*"http_code":200,.*"redirect_url":null,"referer":null,.*"url":"` + regexp.QuoteMeta(url) + `/\?key=REDACTED",.*\}$`},
		{"stderr and onerror", []string{"-s", "-w", "out%{stderr}err%{stdout}%{onerror}only on error", url},
			`^body\nout$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRetry(t, "", nil, append([]string{"http"}, tc.args...)...)
			if r.code != 0 || !regexp.MustCompile(tc.want).MatchString(r.stdout) || strings.Contains(r.stderr, "unknown --write-out variable") {
				t.Errorf("exit %d, stdout %q, want %s; stderr %q", r.code, r.stdout, tc.want, r.stderr)
			}
			if tc.name == "stderr and onerror" && r.stderr != "err" {
				t.Errorf("stderr %q, want err", r.stderr)
			}
		})
	}
	// A failure: errormsg, exitcode and what follows %{onerror}.
	r := runRetry(t, "", nil, "http", "--attempts", "1", "-s", "-w", "%{exitcode} %{http_code} %{remote_ip}|%{onerror}%{errormsg}",
		"http://127.0.0.1:"+strconv.Itoa(redistest.FreePort(t))+"/?key=s3cr3t")
	if !regexp.MustCompile(`^7 000 \|attempt 1/1 failed: GET http://127\.0\.0\.1:\d+/\?key=REDACTED: refused .*\(no attempts left\)$`).MatchString(r.stdout) {
		t.Errorf("refused: stdout %q", r.stdout)
	}
	// curl's variables that retry http does not have are warned about.
	r = runRetry(t, "", nil, "http", "-s", "-o", "/dev/null", "-w", "%{certs}%{http_connect}", url)
	if r.stdout != "" || !strings.Contains(r.stderr, "unknown --write-out variable: 'certs'") {
		t.Errorf("missing variables: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}
