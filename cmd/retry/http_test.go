package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/clitest"
	"github.com/backoffkit/retry/cmd/retry/internal/curl"
)

// scripted is a loopback server that answers the i-th request with
// statuses[i] (the last one repeats) and records what it saw.
type scripted struct {
	mu       sync.Mutex
	statuses []int
	headers  map[int]http.Header // extra response headers by request index
	bodies   map[int]string      // response body by request index
	seen     []*http.Request
	reqBody  []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := len(s.seen)
	s.seen = append(s.seen, r)
	s.reqBody = append(s.reqBody, string(b))
	code := s.statuses[min(i, len(s.statuses)-1)]
	h, body := s.headers[i], s.bodies[i]
	s.mu.Unlock()
	for k, v := range h {
		w.Header()[k] = v
	}
	if body == "" {
		body = http.StatusText(code) + "\n"
	}
	w.WriteHeader(code)
	io.WriteString(w, body)
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func serve(t *testing.T, s *scripted) string {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestHTTPFlakyThenOK(t *testing.T) {
	s := &scripted{statuses: []int{503, 500, 200}, bodies: map[int]string{2: "hello\n"}}
	url := serve(t, s)
	r := runRetry(t, "", nil, args([]string{"http"}, fast, []string{url + "/v1/x"})...)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if r.stdout != "hello\n" {
		t.Errorf("stdout = %q, want the final body", r.stdout)
	}
	if s.count() != 3 {
		t.Errorf("server saw %d requests, want 3", s.count())
	}
	got := lines(r.stderr, "retrying in")
	if len(got) != 2 || !strings.Contains(got[0], "attempt 1/5 failed: GET "+url+"/v1/x: 503 Service Unavailable") {
		t.Errorf("retry lines:\n%s", r.stderr)
	}
}

// TestHTTPPermanent404NotRetried: a 404 is final. As in curl it exits 0
// without -f, 22 with -f (no body) or --fail-with-body (with the body).
func TestHTTPPermanent404NotRetried(t *testing.T) {
	for _, tc := range []struct {
		flag, body, stderr string
		code               int
	}{
		{"", "Not Found\n", "", 0},
		{"-f", "", "404 Not Found (not retried: 404 is not in --codes)", curl.ExitHTTPError},
		{"--fail-with-body", "Not Found\n", "404 Not Found (not retried: 404 is not in --codes)", curl.ExitHTTPError},
	} {
		s := &scripted{statuses: []int{404}}
		url := serve(t, s)
		a := []string{"http"}
		if tc.flag != "" {
			a = append(a, tc.flag)
		}
		r := runRetry(t, "", nil, args(a, fast, []string{url + "/missing"})...)
		if r.code != tc.code || s.count() != 1 || r.stdout != tc.body {
			t.Errorf("%q: exit %d after %d requests, stdout %q; want %d after 1, %q", tc.flag, r.code, s.count(), r.stdout, tc.code, tc.body)
		}
		if (tc.stderr == "" && r.stderr != "") || !strings.Contains(r.stderr, tc.stderr) || strings.Count(r.stderr, "\n") > 1 {
			t.Errorf("%q: stderr %q, want one line with %q", tc.flag, r.stderr, tc.stderr)
		}
	}
}

// TestHTTPGivesUpOnRetryableStatus: one give-up line, without the nested
// "retry: ... httpretry: ..." prefixes, and exit 1 (ours: gave up), with or
// without -f.
func TestHTTPGivesUpOnRetryableStatus(t *testing.T) {
	for _, f := range [][]string{nil, {"-f"}} {
		s := &scripted{statuses: []int{503}}
		url := serve(t, s)
		r := runRetry(t, "", nil, args([]string{"http", "--attempts", "3"}, f, fast, []string{url})...)
		if r.code != cli.ExitGaveUp || s.count() != 3 {
			t.Errorf("%v: exit %d after %d requests, want 1 after 3; stderr:\n%s", f, r.code, s.count(), r.stderr)
		}
		giveUp := lines(r.stderr, "giving up")
		if len(giveUp) != 1 || !strings.Contains(giveUp[0], "attempt 3/3 failed: GET "+url+": 503 Service Unavailable; giving up after ") ||
			!strings.HasSuffix(giveUp[0], "(no attempts left)") {
			t.Errorf("%v: want one give-up line:\n%s", f, r.stderr)
		}
		if strings.Count(r.stderr, "\n") != 3 || strings.Contains(r.stderr, "httpretry:") || strings.Contains(r.stderr, "retry: gave up") {
			t.Errorf("%v: want two retry lines and the give-up line, no nested prefixes:\n%s", f, r.stderr)
		}
	}
}

func TestHTTPPostIdempotency(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flags    []string
		attempts int
		stderr   string
	}{
		{"no key", nil, 1, "POST is not idempotent; pass --idempotent or --idempotency-key"},
		{"idempotent", []string{"--idempotent"}, 3, "attempt 3/5 succeeded"},
		{"key auto", []string{"--idempotency-key", "auto"}, 3, "attempt 3/5 succeeded"},
		{"key value", []string{"--idempotency-key", "order-42"}, 3, "attempt 3/5 succeeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{statuses: []int{503, 503, 201}}
			url := serve(t, s)
			r := runRetry(t, "", nil, args([]string{"http", "-d", `{"a":1}`, "-H", "Content-Type: application/json"}, tc.flags, fast, []string{url})...)
			if s.count() != tc.attempts {
				t.Errorf("server saw %d requests, want %d; stderr:\n%s", s.count(), tc.attempts, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, r.stderr)
			}
			if tc.attempts == 1 && r.code != cli.ExitGaveUp {
				t.Errorf("exit %d, want 1", r.code)
			}
			if tc.attempts > 1 && r.code != 0 {
				t.Errorf("exit %d, want 0", r.code)
			}
			for i, req := range s.seen {
				if req.Method != "POST" || s.reqBody[i] != `{"a":1}` || req.Header.Get("Content-Type") != "application/json" {
					t.Errorf("attempt %d: %s %q %q", i+1, req.Method, s.reqBody[i], req.Header.Get("Content-Type"))
				}
			}
			if len(tc.flags) == 2 { // an Idempotency-Key, the same on every attempt
				key := s.seen[0].Header.Get("Idempotency-Key")
				if key == "" || (tc.flags[1] != "auto" && key != tc.flags[1]) {
					t.Errorf("Idempotency-Key = %q", key)
				}
				for _, req := range s.seen[1:] {
					if req.Header.Get("Idempotency-Key") != key {
						t.Errorf("Idempotency-Key changed between attempts")
					}
				}
			}
		})
	}
}

func TestHTTPServerHints(t *testing.T) {
	info := `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.05s"}]}}`
	s := &scripted{
		statuses: []int{429, 429, 200},
		headers: map[int]http.Header{
			0: {"Retry-After": {"1"}},
			1: {"Content-Type": {"application/json"}},
		},
		bodies: map[int]string{1: info},
	}
	url := serve(t, s)
	r := runRetry(t, "", nil, args([]string{"http", "--max-retry-after", "100ms"}, fast, []string{url})...)
	if r.code != 0 || s.count() != 3 {
		t.Fatalf("exit %d after %d requests; stderr:\n%s", r.code, s.count(), r.stderr)
	}
	got := lines(r.stderr, "retrying in")
	if len(got) != 2 ||
		!strings.HasSuffix(got[0], "retrying in 100ms (server asked for 1s via Retry-After)") ||
		!strings.HasSuffix(got[1], "retrying in 50ms (server asked for 50ms via RetryInfo)") {
		t.Errorf("hinted retry lines:\n%s", r.stderr)
	}
}

func TestHTTPRedactsSecrets(t *testing.T) {
	const secret = "s3cr3t-value"
	var s *scripted
	for _, format := range []string{"text", "json"} {
		s = &scripted{statuses: []int{503, 200}}
		url := serve(t, s)
		r := runRetry(t, "", nil, args([]string{"http", "--log-format", format,
			"-H", "Authorization: Bearer " + secret, "-H", "x-goog-api-key: " + secret, "-H", "Cookie: sid=" + secret},
			fast, []string{url + "/v1/models?key=" + secret + "&alt=json"})...)
		if strings.Contains(r.stderr, secret) {
			t.Errorf("%s log leaks the secret:\n%s", format, r.stderr)
		}
		if !strings.Contains(r.stderr, "key=REDACTED") {
			t.Errorf("%s log does not show the redacted URL:\n%s", format, r.stderr)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := s.seen[0].Header.Get("Authorization"); got != "Bearer "+secret {
		t.Errorf("the header must still be sent: %q", got)
	}
}

func TestHTTPJSONLog(t *testing.T) {
	s := &scripted{statuses: []int{503, 200}}
	url := serve(t, s)
	r := runRetry(t, "", nil, args([]string{"http", "--log-format", "json"}, fast, []string{url})...)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var events []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		events = append(events, m)
	}
	if len(events) != 2 || events[0]["event"] != "retry" || events[0]["status"] != 503.0 ||
		events[0]["wait_ms"] != 10.0 || events[0]["method"] != "GET" || events[1]["event"] != "success" {
		t.Errorf("events = %v", events)
	}
}

func TestHTTPTransportErrorRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	r := runRetry(t, "", nil, args([]string{"http", "--attempts", "2"}, fast, []string{"http://" + addr + "/"})...)
	if r.code != curl.ExitConnect {
		t.Errorf("exit %d, want 7 (curl's: could not connect)", r.code)
	}
	if len(lines(r.stderr, "retrying in")) != 1 || !strings.Contains(r.stderr, "refused") ||
		strings.Count(r.stderr, "\n") != 2 || strings.Contains(r.stderr, "httpretry:") {
		t.Errorf("want one retry line and one give-up line:\n%s", r.stderr)
	}
}

func TestHTTPDataFileHeadersAndOutput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "body.json")
	out := filepath.Join(dir, "out.txt")
	os.WriteFile(in, []byte(`{"from":"file"}`), 0o644)
	s := &scripted{statuses: []int{200}, bodies: map[int]string{0: "saved\n"}}
	url := serve(t, s)
	r := runRetry(t, "", nil, "http", url, "-X", "put", "-d", "@"+in, "-H", "X-Test: yes", "-o", out)
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "saved\n" {
		t.Errorf("-o file = %q", b)
	}
	req := s.seen[0]
	if req.Method != "PUT" || s.reqBody[0] != `{"from":"file"}` || req.Header.Get("X-Test") != "yes" {
		t.Errorf("server saw %s %q X-Test=%q", req.Method, s.reqBody[0], req.Header.Get("X-Test"))
	}
}

func TestHTTPBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no url", []string{"http"}, cli.ExitUsage, "want exactly one URL"},
		{"two urls", []string{"http", "http://127.0.0.1:1/", "http://127.0.0.1:2/"}, cli.ExitUsage, "want exactly one URL, got 2"},
		{"scheme", []string{"http", "ftp://127.0.0.1/"}, curl.ExitUnsupported, `protocol "ftp" not supported`},
		{"no host", []string{"http", "http://:8080/x"}, curl.ExitURLMalformat, "URL rejected: no host"},
		{"bad url", []string{"http", "http://[::1"}, curl.ExitURLMalformat, "URL rejected: missing ']' in host"},
		{"header", []string{"http", "-H", "NoColon", "http://127.0.0.1:1/"}, cli.ExitUsage, "want 'Name: value'"},
		{"codes", []string{"http", "--codes", "429,600", "http://127.0.0.1:1/"}, cli.ExitUsage, "status code 600 is outside 100-599"},
		{"method", []string{"http", "-X", "GE T", "http://127.0.0.1:1/"}, cli.ExitUsage, "not a valid method"},
		{"unknown flag", []string{"http", "--nope", "http://127.0.0.1:1/"}, cli.ExitUsage, "flag provided but not defined: --nope"},
		{"duration", []string{"http", "--max-retry-after", "soon", "http://127.0.0.1:1/"}, cli.ExitUsage, "--max-retry-after"},
		{"secret in bad url", []string{"http", "ftp://u:s3cr3t@127.0.0.1/?key=s3cr3t"}, curl.ExitUnsupported, "not supported"},
		{"secret in a bad port", []string{"http", "http://u:s3cr3t@127.0.0.1:99999/?key=s3cr3t"}, curl.ExitURLMalformat, "port 99999 is outside 0-65535"},
		// url.Parse's error quotes the part at fault: not of a secret.
		{"bad escape", []string{"http", "http://127.0.0.1:1/#x%zz"}, curl.ExitURLMalformat, `URL rejected: invalid URL escape "%zz"`},
		{"bad escape in a secret", []string{"http", "http://127.0.0.1:1/#access_token=s3%zzcr3t"}, curl.ExitURLMalformat, "#access_token=REDACTED: it does not parse (in a password or a secret value, percent-encode"},
		{"password with /", []string{"http", "http://u:s3cr3t/x@127.0.0.1:1/"}, curl.ExitURLMalformat, "http://REDACTED@127.0.0.1:1/: it does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRetry(t, "", nil, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d", r.code, tc.code)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "retry http: ") || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q, want one line containing %q", r.stderr, tc.want)
			}
			if strings.Contains(r.stderr, "s3cr3t") {
				t.Errorf("secret leaked: %q", r.stderr)
			}
		})
	}
}

// TestHTTPInterrupted: SIGINT during a hung request stops it at once, with
// no further attempt, and exit status 130.
func TestHTTPInterrupted(t *testing.T) {
	arrived := make(chan struct{}, 10)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		arrived <- struct{}{}
		<-r.Context().Done() // hang until the client goes away
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args([]string{"http"}, fast, []string{srv.URL})...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the request never arrived")
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if signaledBy(err) != syscall.SIGINT {
		t.Fatalf("exit: %v, want a death by SIGINT (a shell's 130); stderr:\n%s", err, errb.String())
	}
	if got := n.Load(); got != 1 {
		t.Errorf("server saw %d requests, want 1", got)
	}
	if want := "attempt 1/5 failed: GET " + srv.URL + ": interrupted; giving up after "; !strings.Contains(errb.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errb.String())
	}
}

// TestHTTPInterruptedInTheBody: Ctrl-C while the body is read exits 130 and
// the closing line says so, with that code (it said 56, "context canceled").
func TestHTTPInterruptedInTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "part")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "http", "--log-format", "json", srv.URL+"/slow")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(out, make([]byte, 4)); err != nil { // the body is being read
		t.Fatalf("reading the partial body: %v; stderr:\n%s", err, errb.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	io.Copy(io.Discard, out)
	err = cmd.Wait()
	if shellStatus(err) != 130 {
		t.Fatalf("exit: %v, want 130; stderr:\n%s", err, errb.String())
	}
	ls := clitest.JSONLines(t, errb.String())
	want := "reading the body of GET " + srv.URL + "/slow: interrupted by SIGINT"
	if len(ls) != 1 || ls[0]["event"] != "error" || ls[0]["exit_code"] != float64(130) || ls[0]["error"] != want {
		t.Errorf("want one closing line, exit_code 130, %q; stderr:\n%s", want, errb.String())
	}
}
