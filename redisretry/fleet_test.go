package redisretry

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/redis/go-redis/v9"
)

// quotaServer answers 200 while fewer than quota requests were accepted in
// the last window, 429 with Retry-After otherwise, and keeps every arrival.
// Its quota has the 5 % grace the fleet test allows: a pacer's exact spacing
// reaches the server with a few milliseconds of jitter.
type quotaServer struct {
	quota  int
	window time.Duration

	mu       sync.Mutex
	arrivals []time.Time
	sent     []time.Time // when each request was handed to the client's connection (X-Sent)
	delay    time.Duration
	accepted []time.Time
	rejected int
}

func (s *quotaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.mu.Lock()
	s.arrivals = append(s.arrivals, now)
	if ns, err := strconv.ParseInt(r.Header.Get("X-Sent"), 10, 64); err == nil {
		sent := time.Unix(0, ns)
		s.sent = append(s.sent, sent)
		s.delay = max(s.delay, now.Sub(sent))
	}
	n := 0
	for i := len(s.accepted) - 1; i >= 0 && now.Sub(s.accepted[i]) < s.window; i-- {
		n++
	}
	ok := n < s.quota
	if ok {
		s.accepted = append(s.accepted, now)
	} else {
		s.rejected++
	}
	s.mu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`, http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok")
}

// childReport is what a child process prints.
type childReport struct {
	OK, Failed int
	MaxBlock   time.Duration // the longest a Reserve or Admit call took
	RoundTrips int64         // the quota's
	BudgetRTs  int64         // the budget's
	Quota      Stats         // the quota's counters
	Budget     Stats         // the budget's counters
}

const (
	childTimeout = 200 * time.Millisecond
	fleetQuota   = 40
	fleetWindow  = time.Second
)

// TestFleetChild is the body of a child process of TestFleetProcesses; it
// does nothing unless started by it.
func TestFleetChild(t *testing.T) {
	if os.Getenv("REDISRETRY_CHILD") == "" {
		t.Skip("a child process of TestFleetProcesses")
	}
	mode, target, key := os.Getenv("REDISRETRY_MODE"), os.Getenv("REDISRETRY_TARGET"), os.Getenv("REDISRETRY_KEY")
	clients, _ := strconv.Atoi(os.Getenv("REDISRETRY_CLIENTS"))
	d, _ := time.ParseDuration(os.Getenv("REDISRETRY_DURATION"))
	rep := childReport{}
	p := retry.Policy{InitialDelay: 50 * time.Millisecond, MaxDelay: time.Second, Jitter: 50 * time.Millisecond, Attempts: 4}
	timer := &timing{}
	stats := func() (Stats, Stats) { return Stats{}, Stats{} }
	switch mode {
	case "fleet":
		c, err := NewClient(os.Getenv("REDISRETRY_REDIS"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// 200 ms, not 20: four processes under -race on a busy 2-core
		// machine must not time out a healthy server (a call decided
		// locally would pace beside the fleet's schedule). The bound itself
		// is tested by the outage tests.
		// No Slack: the server's 5 % grace is for this machine's own
		// lateness (a goroutine woken late by its timer, a request
		// delivered late), which two -race runs side by side on 2 cores
		// make up to tens of milliseconds; the default Slack would take
		// 2 % of it (slots used up to 20 ms late).
		q, err := NewQuota(c, QuotaConfig{Key: key, Limit: Limit{Rate: fleetQuota, Period: fleetWindow}, Slack: -1, Logger: discard, Timeout: childTimeout})
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewBudget(c, BudgetConfig{Key: key, Logger: discard, Timeout: childTimeout})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { q.Close(); b.Close() }()
		stats = func() (Stats, Stats) { return q.Stats(), b.Stats() }
		p.Pacer = timer.pacer(q)
		p.Budget = timer.limiter(b)
	case "local":
		p.Budget = retry.NewRatioBudget(retry.RatioBudgetConfig{})
	}
	client := &http.Client{Transport: httpretry.NewTransport(stamped{http.DefaultTransport}, p)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range clients {
		wg.Go(func() {
			for time.Now().Before(end) {
				ctx, cancel := context.WithDeadline(context.Background(), end.Add(2*time.Second))
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
				resp, err := client.Do(req)
				ok := err == nil && resp.StatusCode == 200
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				cancel()
				mu.Lock()
				if ok {
					rep.OK++
				} else {
					rep.Failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	client.CloseIdleConnections()
	rep.MaxBlock = timer.max()
	rep.Quota, rep.Budget = stats()
	rep.RoundTrips, rep.BudgetRTs = rep.Quota.RoundTrips, rep.Budget.RoundTrips
	json.NewEncoder(os.Stdout).Encode(rep)
}

// stamped sets X-Sent to the time each attempt is handed to the connection,
// after the pacers let it start: the server can tell its own lateness (a
// busy machine delivering requests late) from the quota's.
type stamped struct{ http.RoundTripper }

func (s stamped) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Sent", strconv.FormatInt(time.Now().UnixNano(), 10))
	return s.RoundTripper.RoundTrip(r)
}

// timing wraps a Pacer and a Limiter to keep the longest call.
type timing struct {
	mu    sync.Mutex
	worst time.Duration
}

func (t *timing) note(d time.Duration) {
	t.mu.Lock()
	t.worst = max(t.worst, d)
	t.mu.Unlock()
}

func (t *timing) max() time.Duration { t.mu.Lock(); defer t.mu.Unlock(); return t.worst }

type timedPacer struct {
	retry.Pacer
	t *timing
}

func (p timedPacer) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	begin := time.Now()
	defer func() { p.t.note(time.Since(begin)) }()
	return p.Pacer.Reserve(ctx, earliest, deadline)
}

type timedLimiter struct {
	retry.Limiter
	t *timing
}

func (l timedLimiter) Admit(r bool) bool {
	begin := time.Now()
	defer func() { l.t.note(time.Since(begin)) }()
	return l.Limiter.Admit(r)
}

func (t *timing) pacer(p retry.Pacer) retry.Pacer       { return timedPacer{p, t} }
func (t *timing) limiter(l retry.Limiter) retry.Limiter { return timedLimiter{l, t} }

// fleetRun starts procs child processes of clients goroutines each for d in
// the given mode against one quota server, and returns the server and the
// children's reports.
func fleetRun(t *testing.T, srv *redisServer, mode string, procs, clients int, d time.Duration) (*quotaServer, []childReport) {
	qs := &quotaServer{quota: fleetQuota * 105 / 100, window: fleetWindow}
	hs := httptest.NewServer(qs)
	defer hs.Close()
	key := testKey(t)
	var wg sync.WaitGroup
	reports := make([]childReport, procs)
	for i := range procs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFleetChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "REDISRETRY_CHILD=1", "REDISRETRY_MODE="+mode, "REDISRETRY_TARGET="+hs.URL,
				"REDISRETRY_KEY="+key, "REDISRETRY_CLIENTS="+strconv.Itoa(clients), "REDISRETRY_DURATION="+d.String(),
				"REDISRETRY_REDIS="+srv.url())
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("child %d: %v\n%s", i, err, out)
				return
			}
			for _, line := range splitLines(out) {
				if len(line) > 0 && line[0] == '{' {
					json.Unmarshal(line, &reports[i])
				}
			}
		})
	}
	wg.Wait()
	return qs, reports
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, b[:i])
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}

func TestFleetProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes for several seconds")
	}
	srv := startRedis(t)
	const procs, clients, d = 4, 8, 4 * time.Second
	for _, mode := range []string{"fleet", "local"} {
		qs, reps := fleetRun(t, srv, mode, procs, clients, d)
		maxWin := maxInWindow(qs.arrivals, fleetWindow)
		var ok, failed int
		var rts, brts int64
		var block time.Duration
		for _, r := range reps {
			ok += r.OK
			failed += r.Failed
			rts += r.RoundTrips
			brts += r.BudgetRTs
			block = max(block, r.MaxBlock)
			if mode == "fleet" {
				t.Logf("quota %+v budget %+v", r.Quota, r.Budget)
			}
		}
		perRT := 0.0
		if rts > 0 {
			perRT = float64(len(qs.arrivals)) / float64(rts)
		}
		t.Logf("%s: %d processes × %d clients, %v, quota %d/%v: %d requests reached the server, at most %d in one window (%d sent in one), %d answered 429; %d calls succeeded, %d failed; quota: %d Redis round trips (%.1f requests each), budget: %d; longest Reserve/Admit %v, longest delivery %v",
			mode, procs, clients, d, fleetQuota, fleetWindow, len(qs.arrivals), maxWin, maxInWindow(qs.sent, fleetWindow), qs.rejected, ok, failed, rts, perRT, brts, block, qs.delay.Round(time.Microsecond))
		switch mode {
		case "fleet":
			if limit := fleetQuota * 105 / 100; maxWin > limit {
				t.Errorf("fleet: %d requests in one window, quota %d (+5 %% = %d)", maxWin, fleetQuota, limit)
			}
			if qs.rejected != 0 || failed != 0 {
				t.Errorf("fleet: %d answered 429, %d calls failed: want none", qs.rejected, failed)
			}
			if block > 2*childTimeout+50*time.Millisecond {
				t.Errorf("fleet: a call was blocked %v by Redis (timeout %v)", block, childTimeout)
			}
			// A short run at 10 requests per second per process is mostly
			// the leases' ramp (4, 8, 16, 20); the steady state is measured
			// by TestQuotaFleetStaysUnderQuota and the benchmarks.
			if perRT < 6 {
				t.Errorf("fleet: %.1f requests per quota round trip, want the leases to amortise", perRT)
			}
		case "local":
			// Per-process budgets do not know the fleet: the quota is
			// exceeded and the server answers 429.
			if maxWin <= fleetQuota || qs.rejected == 0 {
				t.Errorf("local: at most %d per window and %d 429s: the comparison should overshoot", maxWin, qs.rejected)
			}
		}
	}
}

// runLoad runs clients goroutines calling retry.Run under p (a function that
// succeeds) until stop is closed, and returns the number of failed calls.
func runLoad(p retry.Policy, clients int, stop chan struct{}) func() int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for range clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := retry.Run(ctx, p, func(context.Context) error { return nil })
				cancel()
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		})
	}
	return func() int { wg.Wait(); return failed }
}

// waitState waits (polling, bounded) for a limiter to reach a state.
func waitState(t *testing.T, name string, get func() State, want State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for get() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %v, want %v", name, get(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// outage runs a quota, a budget and a cooldown on srv under load, breaks
// Redis with breakIt, checks the limiters fall back without a failed call or
// a call blocked past the timeout, repairs it with fix and checks they come
// back, logging one line per change.
func outage(t *testing.T, srv *redisServer, c redis.UniversalClient, breakIt, fix func()) {
	logs := &logCounter{}
	l := slog.New(logs)
	key := testKey(t)
	// 100 ms rather than 20: a busy test machine must not time out a
	// healthy server. The client's own read timeout is 3 s.
	const timeout = 100 * time.Millisecond
	q, _ := NewQuota(c, QuotaConfig{Key: key, Limit: PerSecond(2000), Logger: l, Timeout: timeout})
	b, _ := NewBudget(c, BudgetConfig{Key: key, Logger: l, Timeout: timeout})
	d, _ := NewCooldown(c, CooldownConfig{Key: key, Logger: l, Cache: 50 * time.Millisecond, Timeout: timeout})
	tm := &timing{}
	p := retry.Policy{Pacer: tm.pacer(retry.Pacers(d, q)), Budget: tm.limiter(b)}
	stop := make(chan struct{})
	wait := runLoad(p, 4, stop)
	waitFor := func(what string, f func() bool) {
		deadline := time.Now().Add(10 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("round trips", func() bool { return q.Stats().Refills > 3 && d.Stats().RoundTrips > 1 })
	breakIt()
	waitState(t, "quota", q.State, StateFallback)
	waitState(t, "cooldown", d.State, StateFallback)
	waitFor("budget", func() bool { b.Admit(true); return b.State() == StateFallback })
	fix()
	waitState(t, "quota", q.State, StateRedis)
	waitState(t, "cooldown", d.State, StateRedis)
	waitFor("budget back", func() bool { b.Admit(true); return b.State() == StateRedis })
	waitFor("refills after", func() bool { n := q.Stats().Refills; time.Sleep(20 * time.Millisecond); return q.Stats().Refills > n })
	close(stop)
	if n := wait(); n != 0 {
		t.Errorf("%d calls failed during the outage", n)
	}
	for _, x := range []interface{ Close() error }{q, b, d} {
		x.Close()
	}
	// One Reserve waits for Redis at most the timeout; the pacers are two
	// (cooldown, quota), so twice that, plus scheduling.
	if w := tm.max(); w > 2*timeout+50*time.Millisecond {
		t.Errorf("a call was blocked %v by Redis (timeout %v)", w, timeout)
	}
	// One line per change: per limiter, down and up alternate, starting
	// down and ending up (a loaded machine may add a pair).
	last := map[string]string{}
	for _, line := range logs.lines() {
		lim := line[strings.Index(line, "limiter=")+len("limiter="):]
		lim, _, _ = strings.Cut(lim, " ")
		up := strings.Contains(line, "available again")
		if (last[lim] == "up") == up && !(last[lim] == "" && !up) {
			t.Errorf("log lines %q: two lines for one change of %s", logs.lines(), lim)
		}
		last[lim] = map[bool]string{true: "up", false: "down"}[up]
	}
	if len(last) != 3 || last["quota"] != "up" || last["budget"] != "up" || last["cooldown"] != "up" {
		t.Errorf("log lines %q: want each limiter down then up", logs.lines())
	}
	t.Logf("outage: longest call %v; quota %+v; budget %+v; cooldown %+v", tm.max(), q.Stats(), b.Stats(), d.Stats())
}

func TestRedisKilledMidRun(t *testing.T) {
	srv := startRedis(t)
	outage(t, srv, srv.client(t), srv.kill, srv.start)
}

func TestRedisPaused(t *testing.T) {
	srv := startRedis(t)
	// The client's own read timeout is 3 s and it ignores context deadlines:
	// only the limiters' bound keeps calls short.
	outage(t, srv, srv.client(t), func() { srv.signal(19) }, func() { srv.signal(18) }) // SIGSTOP, SIGCONT
}

func TestRedisWrongPassword(t *testing.T) {
	srv := startRedis(t, "--requirepass", "right-secret")
	c := redis.NewClient(&redis.Options{Addr: srv.addr(), Password: "wrong-secret"})
	defer c.Close()
	logs := &logCounter{}
	q, _ := NewQuota(c, QuotaConfig{Key: testKey(t), Limit: PerSecond(1000), Logger: slog.New(logs)})
	defer q.Close()
	for range 50 {
		if _, err := q.Reserve(context.Background(), time.Now(), time.Time{}); err != nil {
			t.Fatalf("a wrong password must not fail the call: %v", err)
		}
	}
	if q.State() != StateFallback || len(logs.lines()) != 1 {
		t.Fatalf("state %v, log %q", q.State(), logs.lines())
	}
	// The right password: it works, and the secret never reached the log.
	good := redis.NewClient(&redis.Options{Addr: srv.addr(), Password: "right-secret"})
	defer good.Close()
	// A generous Timeout: the first call dials, authenticates and loads the
	// script, which a loaded machine under -race does not always do within
	// the default 20ms (1 failure in 60 runs beside two CPU burners).
	q2, _ := NewQuota(good, QuotaConfig{Key: testKey(t), Limit: PerSecond(1000), Logger: slog.New(logs), Timeout: 2 * time.Second})
	defer q2.Close()
	if _, err := q2.Reserve(context.Background(), time.Now(), time.Time{}); err != nil || q2.State() != StateRedis {
		t.Fatal(err, q2.State())
	}
	for _, l := range logs.lines() {
		if contains(l, "secret") {
			t.Fatalf("log line %q holds the password", l)
		}
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestRedisFlushed(t *testing.T) {
	srv := startRedis(t)
	c := srv.client(t)
	key := testKey(t)
	// A long timeout: the flush, not a busy machine, is under test.
	q, _ := NewQuota(c, QuotaConfig{Key: key, Limit: PerSecond(200), Logger: discard, Timeout: time.Second})
	b, _ := NewBudget(c, BudgetConfig{Key: key, Logger: discard, Timeout: time.Second})
	d, _ := NewCooldown(c, CooldownConfig{Key: key, Logger: discard, Jitter: -1, Timeout: time.Second, Cache: 50 * time.Millisecond})
	defer func() { q.Close(); b.Close(); d.Close() }()
	d.Publish(context.Background(), 3*time.Second)
	stop := make(chan struct{})
	wait := runLoad(retry.Policy{Pacer: q, Budget: b}, 4, stop)
	for q.Stats().Refills < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	// Our own server: flushing it is safe. The keys go with FLUSHALL, the
	// scripts with SCRIPT FLUSH (the next EVALSHA answers NOSCRIPT and the
	// script is sent again with EVAL).
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	n := q.Stats().Refills
	for q.Stats().Refills < n+3 {
		time.Sleep(5 * time.Millisecond)
	}
	// The budget and the cooldown run their scripts again too.
	bn, dn := b.Stats().RoundTrips, d.Stats().RoundTrips
	for b.Stats().RoundTrips < bn+2 || d.Stats().RoundTrips < dn+1 {
		b.Admit(true)
		d.Reserve(context.Background(), time.Now(), time.Time{})
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	if f := wait(); f != 0 || q.State() != StateRedis || q.Stats().Errors != 0 {
		t.Fatalf("%d failed calls, state %v, stats %+v after FLUSHALL and SCRIPT FLUSH", f, q.State(), q.Stats())
	}
	for _, s := range []Stats{b.Stats(), d.Stats()} {
		if s.Errors != 0 || s.State != StateRedis {
			t.Fatalf("after FLUSHALL and SCRIPT FLUSH: %+v", s)
		}
	}
	// The cooldown this process published is still honoured locally.
	if u := d.Until(); time.Until(u) < time.Second {
		t.Fatalf("cooldown forgotten: until %v", u)
	}
}

func TestRedisExtremeConfigs(t *testing.T) {
	// Configurations at the edges of their ranges reach the scripts as
	// numbers they can hold: no script error, no fallback.
	srv := startRedis(t)
	c := srv.client(t)
	key := testKey(t)
	ctx := context.Background()
	b, _ := NewBudget(c, BudgetConfig{Key: key + ":b", MinPerSecond: 1e308, Ratio: 1e308, Window: 1000 * time.Hour, Timeout: time.Second, Logger: discard})
	// The highest rate a Limit allows: 1 per nanosecond.
	q, _ := NewQuota(c, QuotaConfig{Key: key + ":q", Limit: Limit{Rate: int64(time.Millisecond), Period: time.Millisecond, Burst: math.MaxInt64}, Lease: math.MaxInt64, Timeout: time.Second, Logger: discard})
	slow, _ := NewQuota(c, QuotaConfig{Key: key + ":s", Limit: Limit{Rate: 1, Period: 100 * 365 * 24 * time.Hour}, Timeout: time.Second, Logger: discard})
	d, _ := NewCooldown(c, CooldownConfig{Key: key + ":d", Max: math.MaxInt64, Timeout: time.Second, Logger: discard})
	defer func() {
		for _, x := range []interface{ Close() error }{b, q, slow, d} {
			x.Close()
		}
	}()
	for range 3 {
		b.Admit(false)
		if !b.Admit(true) {
			t.Fatal("a budget with an enormous floor refused a retry")
		}
		if _, err := q.Reserve(ctx, time.Now(), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	// One request per century: the first goes now, the second would wait a
	// century (and gives up at once under a deadline).
	if _, err := slow.Reserve(ctx, time.Now(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Reserve(ctx, time.Now(), time.Now().Add(time.Hour)); !errors.Is(err, retry.ErrPastDeadline) {
		t.Fatalf("the second request of a century: %v", err)
	}
	d.Publish(ctx, 1000*time.Hour)
	if u := time.Until(d.Until()); u < 999*time.Hour {
		t.Fatalf("a 1000 h hint with no cap: until in %v", u)
	}
	for name, s := range map[string]Stats{"budget": b.Stats(), "quota": q.Stats(), "slow quota": slow.Stats(), "cooldown": d.Stats()} {
		if s.Errors != 0 || s.State != StateRedis {
			t.Errorf("%s: %+v", name, s)
		}
	}
}
