package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/clitest"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
	"github.com/backoffkit/retry/internal/chaos"
	"github.com/backoffkit/retry/internal/redistest"
)

// TestFleetBadInput: a bad or incomplete fleet setting, as a flag or in the
// config file, exits 2 with one line that names it as the user wrote it and
// never shows a Redis password.
func TestFleetBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	fleetOnly := write("fleet.json", `{"fleet": "ci"}`)
	badQuota := write("quota.json", `{"redis": "redis://127.0.0.1:1/0", "fleet": "ci", "quota": "fast"}`)
	redisNumber := write("redis.json", `{"redis": 6379, "fleet": "ci"}`)
	secretURL := write("secret.json", `{"redis": "redis://user:s3cret@127.0.0.1:notaport/0", "fleet": "ci"}`)
	badName := write("name.json", `{"redis": "redis://127.0.0.1:1/0", "fleet": "a{b}"}`)
	camel := write("camel.json", `{"redisTimeout": "-1s"}`)
	const r = "redis://127.0.0.1:1/0"

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"fleet without redis", []string{"--fleet", "ci", "--", "true"}, "--fleet needs --redis URL"},
		{"quota without redis", []string{"--quota", "40/1s", "--", "true"}, "--quota needs --redis URL and --fleet NAME"},
		{"quota without fleet", []string{"--redis", r, "--quota", "40/1s", "--", "true"}, "--redis needs --fleet NAME"},
		{"redis without fleet", []string{"--redis", r, "--", "true"}, "--redis needs --fleet NAME"},
		{"timeout without redis", []string{"--redis-timeout", "50ms", "--", "true"}, "--redis-timeout needs --redis URL"},
		{"empty redis", []string{"--redis", "", "--fleet", "ci", "--", "true"}, "--redis: empty URL"},
		{"redis scheme", []string{"--redis", "http://127.0.0.1:6379", "--fleet", "ci", "--", "true"}, "--redis: invalid Redis URL http://127.0.0.1:6379: want redis://HOST:PORT/DB (with USER:PASSWORD@ before HOST if the server needs a password), rediss://HOST:PORT/DB for TLS, or unix:///PATH"},
		{"redis not a URL", []string{"--redis", "notaurl", "--fleet", "ci", "--", "true"}, "--redis: invalid Redis URL notaurl: want redis://HOST:PORT/DB"},
		{"redis host:port", []string{"--redis", "127.0.0.1:6379", "--fleet", "ci", "--", "true"}, "--redis: invalid Redis URL 127.0.0.1:6379: want redis://HOST:PORT/DB"},
		{"redis without scheme, password", []string{"--redis", "user:s3cret@127.0.0.1:6379", "--fleet", "ci", "--", "true"}, "--redis: invalid Redis URL REDACTED@127.0.0.1:6379: want redis://HOST:PORT/DB"},
		{"redis other scheme, password", []string{"--redis", "tcp://u:s3cret@127.0.0.1:6379", "--fleet", "ci", "--", "true"}, "--redis: invalid Redis URL tcp://REDACTED@127.0.0.1:6379: want redis://"},
		{"redis password", []string{"--redis", "redis://user:s3cret@127.0.0.1:6379/notadb", "--fleet", "ci", "--", "true"}, "--redis: invalid Redis URL redis://REDACTED@127.0.0.1:6379/notadb: redis: invalid database number"},
		{"redis port", []string{"--redis", "redis://:s3cret@127.0.0.1:99999/0", "--fleet", "ci", "--", "true"}, "--redis: invalid Redis URL redis://REDACTED@127.0.0.1:99999/0: port 99999 is outside 0-65535"},
		{"password in the query", []string{"--redis", "redis://127.0.0.1:6379/0?password=s3cret", "--fleet", "ci", "--", "true"}, "--redis: invalid Redis URL redis://127.0.0.1:6379/0?password=REDACTED: redis: unexpected option: password"},
		{"empty fleet", []string{"--redis", r, "--fleet", "", "--", "true"}, `invalid value "" for flag --fleet: empty name`},
		{"fleet braces", []string{"--redis", r, "--fleet", "a{b}", "--", "true"}, "--fleet: must not contain { or }"},
		{"fleet newline", []string{"--redis", r, "--fleet", "a\nb", "--", "true"}, "--fleet: must not contain control characters"},
		{"quota no period", []string{"--redis", r, "--fleet", "ci", "--quota", "40", "--", "true"}, `invalid value "40" for flag --quota: want COUNT/PERIOD`},
		{"quota zero", []string{"--redis", r, "--fleet", "ci", "--quota", "0/1s", "--", "true"}, "--quota: the count must be a whole number > 0"},
		{"quota negative", []string{"--redis", r, "--fleet", "ci", "--quota", "-5/1s", "--", "true"}, "--quota: the count must be a whole number > 0"},
		{"quota overflow", []string{"--redis", r, "--fleet", "ci", "--quota", "99999999999999999999/1s", "--", "true"}, "--quota: the count 99999999999999999999 is too large"},
		{"quota short period", []string{"--redis", r, "--fleet", "ci", "--quota", "5/10us", "--", "true"}, "--quota: the period must be a duration of at least 1ms"},
		{"quota zero period", []string{"--redis", r, "--fleet", "ci", "--quota", "5/0s", "--", "true"}, "--quota: the period must be"},
		{"redis timeout", []string{"--redis", r, "--fleet", "ci", "--redis-timeout", "soon", "--", "true"}, `invalid value "soon" for flag --redis-timeout`},
		{"config fleet without redis", []string{"--config", fleetOnly, "--", "true"}, "--config " + fleetOnly + ": fleet needs --redis URL"},
		{"config quota", []string{"--config", badQuota, "--", "true"}, "--config " + badQuota + `: quota: "fast": want COUNT/PERIOD`},
		{"config redis type", []string{"--config", redisNumber, "--", "true"}, "--config " + redisNumber + ": redis: want a string"},
		{"config redis unparsable", []string{"--config", secretURL, "--", "true"}, "redis: invalid Redis URL: it does not parse"},
		{"redis unparsable hint", []string{"--redis", "redis://:s3cret@[::1", "--fleet", "ci", "--", "true"}, "it does not parse (want redis://host:port/db, with user:password@ before the host if the server needs a password)"},
		{"config fleet name", []string{"--config", badName, "--", "true"}, `fleet: "a{b}": must not contain { or }`},
		{"config timeout", []string{"--config", camel, "--", "true"}, "redisTimeout: duration \"-1s\" must not be negative"},
		{"http quota without fleet", []string{"http", "--redis", r, "--quota", "5/1s", "http://127.0.0.1:1/"}, "--redis needs --fleet NAME"},
		{"http bad quota", []string{"http", "--redis", r, "--fleet", "ci", "--quota", "5/x", "http://127.0.0.1:1/"}, "--quota: the period must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRetry(t, "", nil, tc.args...)
			if r.code != cli.ExitUsage {
				t.Errorf("exit code = %d, want 2; stderr %q", r.code, r.stderr)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "retry") {
				t.Errorf("want one line on stderr, got %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.want)
			}
			if strings.Contains(r.stderr, "s3cret") {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
		})
	}
}

// windowCounter is a loopback server that counts the requests of each
// fixed window of one second and answers 429 beyond quota + 5 % in a
// window, 503 (retryable) otherwise. The 5 % is the grace the fleet's check
// allows (as redisretry's TestFleetProcesses): the server counts requests
// when they arrive, and a request the quota let start at the end of one
// window can arrive in the next on a loaded machine.
type windowCounter struct {
	quota int
	start time.Time

	mu      sync.Mutex
	windows map[int64]int
	times   []time.Duration // of every request, from start
	total   int
	n429    int
}

func (s *windowCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	at := time.Since(s.start)
	s.times = append(s.times, at)
	i := int64(at / time.Second)
	s.windows[i]++
	s.total++
	over := s.windows[i] > s.quota+s.quota/20
	if over {
		s.n429++
	}
	s.mu.Unlock()
	if over {
		http.Error(w, "quota exceeded", http.StatusTooManyRequests)
		return
	}
	http.Error(w, "busy", http.StatusServiceUnavailable)
}

// busiest returns the most requests seen in one window, and the totals.
func (s *windowCounter) busiest() (most, total, n429 int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.windows {
		most = max(most, n)
	}
	return most, s.total, s.n429
}

// sliding returns the most requests seen in any second, wherever it
// starts (at least the busiest fixed window).
func (s *windowCounter) sliding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	most := 0
	for i, t := range s.times { // times are in order: the handler appends under the lock
		n := 0
		for _, u := range s.times[i:] {
			if u-t >= time.Second {
				break
			}
			n++
		}
		most = max(most, n)
	}
	return most
}

// TestFleetQuotaSharedByProcesses runs two retry http processes at once,
// each making 40 attempts against a server that answers 429 beyond 40
// requests a second: with one --quota 40/1s between them the server sees
// at most its quota (+5 %) in any second and answers no 429; the same
// processes without the fleet go far over it (the check can fail).
func TestFleetQuotaSharedByProcesses(t *testing.T) {
	srv := startRedis(t)
	const quota, attempts = 40, 40
	run := func(fleet []string) *windowCounter {
		t.Helper()
		wc := &windowCounter{quota: quota, windows: map[int64]int{}, start: time.Now()}
		ts := httptest.NewServer(wc)
		defer ts.Close()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				r := runRetry(t, "", nil, args([]string{"http", "-sS", "--attempts", "40", "--initial-delay", "1ms", "--max-delay", "1ms", "--jitter", "0"}, fleet, []string{ts.URL})...)
				if r.code != cli.ExitGaveUp || strings.Contains(r.stderr, "Redis") {
					t.Errorf("exit %d, want 1 (gave up on 503s); stderr:\n%s", r.code, r.stderr)
				}
			})
		}
		wg.Wait()
		return wc
	}
	// A 2 s Redis timeout: the sharing is under test here, not the bound
	// (a busy machine running -race may take more than 20 ms to connect,
	// and a process that falls back paces at the whole quota by itself).
	name := fleetName(t)
	shared := run([]string{"--redis", srv.url(), "--fleet", name, "--quota", "40/1s", "--redis-timeout", "2s"})
	most, total, n429 := shared.busiest()
	t.Logf("with --quota: %d requests, at most %d in a second, %d answered 429", total, most, n429)
	if total != 2*attempts {
		t.Errorf("the server saw %d requests, want %d", total, 2*attempts)
	}
	if most > quota+quota/20 || n429 != 0 {
		t.Errorf("with --quota %d/1s: at most %d requests in a second and %d answered 429; want <= %d and none", quota, most, n429, quota+quota/20)
	}
	if n := hashSum(t, srv.client(t, ""), "{"+name+"}:budget:requests"); n != 2 {
		t.Errorf("the fleet's budget counted %d requests, want 2 (one per process, flushed on exit)", n)
	}

	alone := run(nil)
	_, total, n429 = alone.busiest()
	most = alone.sliding()
	t.Logf("without: %d requests, at most %d in a second, %d answered 429", total, most, n429)
	if most <= quota+quota/20 {
		t.Errorf("without --quota the server saw at most %d requests in any second (%d answered 429): the check cannot fail", most, n429)
	}
}

// TestFleetRedisDown: with nothing listening at --redis, the command runs
// as it would alone (the limiters decide locally) and retry logs one line
// for the whole fleet, however many limiters and attempts.
func TestFleetRedisDown(t *testing.T) {
	url := "redis://user:s3cret@127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	count := filepath.Join(t.TempDir(), "count")
	r := runRetry(t, "", []string{"COUNT=" + count}, args([]string{"--redis", url, "--fleet", fleetName(t), "--quota", "100/1s", "--attempts", "3"},
		fast, []string{"--", "sh", "-c", `echo x >> "$COUNT"; exit 3`})...)
	if r.code != 3 || countLines(t, count) != 3 {
		t.Errorf("exit %d after %d attempts, want 3 and 3; stderr:\n%s", r.code, countLines(t, count), r.stderr)
	}
	if got := lines(r.stderr, "Redis"); len(got) != 1 || !strings.Contains(got[0], "unavailable") || !strings.Contains(got[0], "decided by this process alone") {
		t.Errorf("want one line saying Redis is unavailable:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "s3cret") || strings.Contains(r.stderr, "pool.go") {
		t.Errorf("stderr shows the password or go-redis's own log:\n%s", r.stderr)
	}

	r = runRetry(t, "", nil, "--redis", url, "--fleet", "down", "--log-format", "json", "--", "true")
	var fleet []map[string]any
	for _, rec := range clitest.JSONLines(t, r.stderr) {
		if rec["event"] == "fleet" {
			fleet = append(fleet, rec)
		}
	}
	if r.code != 0 || len(fleet) != 1 || !strings.Contains(fleet[0]["message"].(string), "unavailable") {
		t.Errorf("--log-format json: exit %d, fleet records %v; stderr:\n%s", r.code, fleet, r.stderr)
	}
}

// TestFleetPassword: a server that wants a password gets it from the URL;
// a wrong one is a fallback like an outage, and never printed.
func TestFleetPassword(t *testing.T) {
	srv := startRedis(t, "--requirepass", "s3cret")
	name := fleetName(t)
	good := "redis://:s3cret@" + srv.addr() + "/0"
	// One request an hour: the quota's schedule stays in Redis an hour
	// after the run (at 10/1s it expired 100 ms after the request, which a
	// loaded machine may take to get to the check).
	r := runRetry(t, "", nil, "--redis", good, "--fleet", name, "--quota", "1/1h", "--redis-timeout", "2s", "--", "true")
	// No line but, on a loaded machine, one about the wait for the quota's
	// first slot (Redis's answer counted in it).
	if rest := strings.Join(lines(r.stderr, "'s quota (1/1h0m0s)"), "\n"); r.code != 0 || strings.TrimSpace(r.stderr) != rest {
		t.Errorf("right password: exit %d, stderr %q", r.code, r.stderr)
	}
	c := srv.client(t, "s3cret")
	if ttl := c.PTTL(context.Background(), "{"+name+"}:quota").Val(); ttl <= 0 {
		t.Errorf("the quota's schedule is not in Redis (PTTL %v)", ttl)
	}
	r = runRetry(t, "", nil, "--redis", "redis://:wrong-pw@"+srv.addr()+"/0", "--fleet", name, "--", "true")
	if r.code != 0 || len(lines(r.stderr, "unavailable")) != 1 || strings.Contains(r.stderr, "wrong-pw") || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("wrong password: exit %d, stderr %q", r.code, r.stderr)
	}
	// A short password is hidden where the URL is, and nowhere else (it
	// came out as redis://REDACTED@REDACTED27.0.0.REDACTED:REDACTED/0).
	r = runRetry(t, "", nil, "--redis", "redis://:1@127.0.0.1:1/0", "--fleet", name, "--", "true")
	if want := "Redis at redis://REDACTED@127.0.0.1:1/0 unavailable (dial tcp 127.0.0.1:1: connect: connection refused)"; !strings.Contains(r.stderr, want) {
		t.Errorf("short password: stderr %q lacks %q", r.stderr, want)
	}
	r = runRetry(t, "", nil, "--redis", "redis://:wrong-pw@"+srv.addr()+"/0", "--fleet", name, "--", "true")
	// A password is hidden the same way in every message: REDACTED in place
	// of the user info, as in the URLs of retry http's messages.
	if want := "Redis at redis://REDACTED@" + srv.addr() + "/0 unavailable"; !strings.Contains(r.stderr, want) {
		t.Errorf("wrong password: stderr %q lacks %q", r.stderr, want)
	}
}

// TestFleetCooldownShared: a 429 with Retry-After seen by one process
// pauses another process of the fleet: within a deadline it gives up
// before running its command; without one it waits, says so, then runs.
func TestFleetCooldownShared(t *testing.T) {
	srv := startRedis(t)
	// publish has one process of fleet name see a 429 with Retry-After:
	// after seconds, and returns when.
	publish := func(name, after string) time.Time {
		t.Helper()
		// A 2 s Redis timeout: the sharing is under test, not the bound (a
		// busy machine running -race may take more than 20 ms for a
		// process's first call, and a hint that Redis did not take in time
		// stays local).
		s := &scripted{statuses: []int{429}, headers: map[int]http.Header{0: {"Retry-After": {after}}}}
		r := runRetry(t, "", nil, args([]string{"http", "-sS", "--attempts", "1", "--redis", srv.url(), "--fleet", name, "--redis-timeout", "2s"}, []string{serve(t, s)})...)
		if r.code != cli.ExitGaveUp || s.count() != 1 {
			t.Fatalf("first process: exit %d after %d requests; stderr:\n%s", r.code, s.count(), r.stderr)
		}
		published := time.Now()
		if ttl := srv.client(t, "").PTTL(context.Background(), "{"+name+"}:cooldown").Val(); ttl <= 0 {
			t.Fatalf("no cooldown in Redis after a 429 with Retry-After: %s (PTTL %v)", after, ttl)
		}
		return published
	}
	ran := filepath.Join(t.TempDir(), "ran")
	command := []string{"--", "sh", "-c", `echo x >> "$RAN"`}

	// A deadline of 10s inside a cooldown of 20 s. (A Redis call gets at
	// most a tenth of the deadline: with a 1 s deadline, 50 ms, which a
	// loaded machine may exceed, and the process then decides alone.)
	name := fleetName(t)
	publish(name, "20")
	r := runRetry(t, "", []string{"RAN=" + ran}, args([]string{"--redis", srv.url(), "--fleet", name, "--redis-timeout", "2s", "--deadline", "10s", "--kill-after", "0"}, command)...)
	if r.code != cli.ExitTimeout || countLines(t, ran) != 0 || !strings.Contains(r.stderr, "giving up before the first attempt (the fleet cooldown would need a wait of ") {
		t.Errorf("--deadline 10s inside a 20 s cooldown: exit %d, ran %d times; stderr:\n%s", r.code, countLines(t, ran), r.stderr)
	}

	// No deadline inside a cooldown of 3 s: it waits.
	name += "-wait"
	published := publish(name, "3")
	r = runRetry(t, "", []string{"RAN=" + ran}, args([]string{"--redis", srv.url(), "--fleet", name, "--redis-timeout", "2s"}, command)...)
	waited := time.Since(published)
	if r.code != 0 || countLines(t, ran) != 1 {
		t.Errorf("no deadline: exit %d, ran %d times; stderr:\n%s", r.code, countLines(t, ran), r.stderr)
	}
	if got := lines(r.stderr, "a server asked fleet "+name+" to pause"); len(got) != 1 || !strings.HasPrefix(got[0], "retry: waiting ") {
		t.Errorf("want one line about the wait:\n%s", r.stderr)
	}
	if waited < time.Second {
		t.Errorf("the third process ran %v after the hint of 3 s was published", waited)
	}
}

// TestFleetLeavesNoGoroutines runs both modes in-process with a fleet, on a
// live Redis and on a dead one: the limiters' Redis calls, probes and the
// client's connections are gone once run returns.
func TestFleetLeavesNoGoroutines(t *testing.T) {
	srv := startRedis(t)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer web.Close()
	proc.NotifySignals(make(chan os.Signal, 1))() // os/signal's goroutine stays for good
	before := chaos.SnapshotGoroutines()
	dead := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	for _, url := range []string{srv.url(), dead} {
		fleet := []string{"--redis", url, "--fleet", fleetName(t), "--quota", "1000/1s", "--quiet"}
		run(args(fleet, []string{"--attempts", "2", "--initial-delay", "1ms", "--jitter", "0", "--", "sh", "-c", "exit 3"}), nil, io.Discard, io.Discard)
		run(args([]string{"http"}, fleet, []string{"--attempts", "2", "--initial-delay", "1ms", "--jitter", "0", web.URL}), nil, io.Discard, io.Discard)
	}
	web.CloseClientConnections()
	if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
		t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}

// TestFleetRedisRefusedSaysRefused: a Redis that refuses the connection is
// reported as refusing it, not as "did not answer within 500ms" (go-redis
// retried the refused dial until the timeout hid the cause).
func TestFleetRedisRefusedSaysRefused(t *testing.T) {
	url := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	r := runRetry(t, "", nil, "--redis", url, "--fleet", fleetName(t), "--redis-timeout", "500ms", "--attempts", "1", "--", "true")
	got := lines(r.stderr, "Redis")
	if r.code != 0 || len(got) != 1 || !strings.Contains(got[0], "connection refused") || strings.Contains(got[0], "did not answer") {
		t.Errorf("exit %d; want one line saying Redis refused the connection:\n%s", r.code, r.stderr)
	}
}

// stalledRedis listens on 127.0.0.1 and accepts connections that it never
// answers (a Redis stopped by SIGSTOP, a full network buffer): every call
// waits for its timeout. It returns the URL, and a channel that receives a
// value per connection accepted.
func stalledRedis(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	accepted := make(chan struct{}, 100)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "redis://" + ln.Addr().String() + "/0", accepted
}

// TestFleetStalledRedisKeepsTheDeadline: a Redis that accepts and never
// answers, with a --redis-timeout far longer than --deadline, neither stops
// the command from running nor holds retry past the deadline: each Redis call
// gets at most a tenth of the deadline, each limiter (cooldown, quota,
// budget) then decides alone, and the log says so once. (retry waited the
// whole --redis-timeout before the first attempt, then gave up: exit 124,
// the command never ran.)
func TestFleetStalledRedisKeepsTheDeadline(t *testing.T) {
	url, _ := stalledRedis(t)
	dir := t.TempDir()
	marker, count := filepath.Join(dir, "ran"), filepath.Join(dir, "count")
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		check func() error
		bound time.Duration // a sanity bound only, above the deadline and below the --redis-timeout
	}{
		{"success", []string{"--redis-timeout", "5s", "--deadline", "1s", "--", "sh", "-c", `touch "$MARKER"`}, 0, func() error {
			_, err := os.Stat(marker)
			return err
		}, 3 * time.Second},
		{"three limiters, three attempts", args([]string{"--quota", "100/1s", "--redis-timeout", "5s", "--deadline", "4s", "--attempts", "3"}, fast,
			[]string{"--", "sh", "-c", `echo x >> "$COUNT"; exit 3`}), 3, func() error {
			if n := countLines(t, count); n != 3 {
				return fmt.Errorf("%d attempts, want 3", n)
			}
			return nil
		}, 4*time.Second + 2*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			begin := time.Now()
			r := runRetry(t, "", []string{"MARKER=" + marker, "COUNT=" + count},
				args([]string{"--redis", url, "--fleet", fleetName(t)}, tc.args)...)
			took := time.Since(begin)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if err := tc.check(); err != nil {
				t.Errorf("the command did not run as it should: %v; stderr:\n%s", err, r.stderr)
			}
			if got := lines(r.stderr, "Redis"); len(got) != 1 || !strings.Contains(got[0], "unavailable") {
				t.Errorf("want one line saying Redis is unavailable:\n%s", r.stderr)
			}
			if took > tc.bound {
				t.Errorf("retry took %v", took)
			}
		})
	}
}

// TestFleetStalledRedisInterrupted: SIGINT while retry waits for a stalled
// Redis (a --redis-timeout of 5s, no deadline) ends retry at once, exit 130,
// the command never started: neither the wait nor the exit's last Redis
// calls hold it for the timeout. (It took the timeout again to exit.)
func TestFleetStalledRedisInterrupted(t *testing.T) {
	url, accepted := stalledRedis(t)
	marker := filepath.Join(t.TempDir(), "ran")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--redis", url, "--fleet", fleetName(t), "--redis-timeout", "5s", "--", "sh", "-c", `touch "$MARKER"`)
	cmd.Env = append(os.Environ(), "MARKER="+marker)
	var stderr bytes.Buffer // read after Wait
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-accepted // retry is waiting for Redis before the first attempt
	signalled := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	took := time.Since(signalled)
	if shellStatus(err) != 130 {
		t.Errorf("%v, want exit 130; stderr:\n%s", err, stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran after the interrupt")
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say retry was interrupted:\n%s", stderr.String())
	}
	// A sanity bound only, far below the --redis-timeout.
	if took > 3*time.Second {
		t.Errorf("retry ended %v after SIGINT", took)
	}
}

// TestFleetQuotaWaitIsLogged: a wait for the fleet's quota longer than the
// retry line says gets a line of its own (the retry line said "retrying in
// 10ms" and the attempt came 500ms later, review 6).
func TestFleetQuotaWaitIsLogged(t *testing.T) {
	srv := startRedis(t)
	name := fleetName(t)
	r := runRetry(t, "", nil, "--redis", srv.url(), "--fleet", name, "--quota", "1/2s", "--redis-timeout", "2s",
		"--attempts", "2", "--initial-delay", "10ms", "--jitter", "0", "--", "false")
	// The second attempt waits for its slot, 2s after the first's less the
	// time the first took (a loaded machine took 350ms): a wait of 100ms or
	// more, which has its line. (The first may wait too, as long as the
	// quota's lease takes; if 100ms or more, it has its line.)
	waits := regexp.MustCompile(`(?m)^retry: waiting (\S+) for fleet `+regexp.QuoteMeta(name)+`'s quota \(1/2s\)$`).FindAllStringSubmatch(r.stderr, -1)
	for _, w := range waits {
		if d, err := time.ParseDuration(w[1]); err != nil || d < 100*time.Millisecond {
			t.Errorf("a line for a wait of %q (below 100ms: none is due)", w[1])
		}
	}
	second := strings.Index(r.stderr, "attempt 1/2 failed")
	if r.code != 1 || second < 0 || len(lines(r.stderr[second:], "for fleet "+name+"'s quota")) != 1 {
		t.Errorf("exit %d; want 1 and a line about the second attempt's wait for the quota; stderr:\n%s", r.code, r.stderr)
	}
}
