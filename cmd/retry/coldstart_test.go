package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/redistest"
)

// quotaServer answers 200 while it saw at most quota+grace requests in the
// last second (sliding), 429 beyond, as a server enforcing a quota does;
// with fail set it answers 503 (retryable) instead of 200. A grace of 1 is
// the request whose start the fleet's quota put at the edge of a second and
// that arrives before the first one's second is over: the quota spaces the
// starts on Redis's clock, the server counts arrivals, and a process
// started together with 11 others on a busy machine takes a few ms more
// or less to send its request.
type quotaServer struct {
	quota, grace int
	fail         bool

	mu    sync.Mutex
	times []time.Time
	n429  int
}

func (s *quotaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	now := time.Now()
	s.times = append(s.times, now)
	n := 0
	for _, t := range s.times {
		if now.Sub(t) < time.Second {
			n++
		}
	}
	over := n > s.quota+s.grace
	if over {
		s.n429++
	}
	s.mu.Unlock()
	switch {
	case over:
		http.Error(w, "quota exceeded", http.StatusTooManyRequests)
	case s.fail:
		http.Error(w, "busy", http.StatusServiceUnavailable)
	default:
		w.Write([]byte("ok\n"))
	}
}

// rate returns the requests per second the server saw, from the first to
// the last (n-1 gaps), and how many it saw.
func (s *quotaServer) rate() (float64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.times)
	if n < 2 {
		return 0, n
	}
	return float64(n-1) / s.times[n-1].Sub(s.times[0]).Seconds(), n
}

// runTogether runs n retry processes with argv at once and returns their
// results.
func runTogether(t *testing.T, n int, argv []string) []result {
	t.Helper()
	rs := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { rs[i] = runRetry(t, "", nil, argv...) })
	}
	wg.Wait()
	return rs
}

// TestFleetColdStartTogether (issue 21): 12 retry http processes started
// together against a healthy local Redis, --quota 10/1s, each making one
// request to a server that answers 429 beyond 10 (+1) requests a second:
// none says Redis is unavailable and the server answers no 429, in 3 rounds
// of 3 (9 starts of 12). Before, in 5 of 5 rounds 1 to 9 of them decided
// alone (a first Redis call past its 20ms) and 429s followed.
func TestFleetColdStartTogether(t *testing.T) {
	srv := startRedis(t)
	for round := range 3 {
		for try := range 3 {
			qs := &quotaServer{quota: 10, grace: 1}
			ts := httptest.NewServer(qs)
			rs := runTogether(t, 12, []string{"http", "--redis", srv.url(), "--fleet", fleetName(t), "--quota", "10/1s", "--attempts", "1", ts.URL})
			ts.Close()
			unavailable := 0
			for _, r := range rs {
				if r.code != 0 {
					t.Errorf("round %d.%d: exit %d; stderr:\n%s", round+1, try+1, r.code, r.stderr)
				}
				if strings.Contains(r.stderr, "unavailable") {
					unavailable++
					t.Logf("round %d.%d: %s", round+1, try+1, strings.TrimSpace(r.stderr))
				}
			}
			if unavailable != 0 || qs.n429 != 0 {
				t.Errorf("round %d.%d: %d of 12 said Redis was unavailable, %d answered 429; want 0 and 0", round+1, try+1, unavailable, qs.n429)
			}
		}
	}
	// The check can fail: the same 12 processes without the fleet.
	qs := &quotaServer{quota: 10, grace: 1}
	ts := httptest.NewServer(qs)
	defer ts.Close()
	runTogether(t, 12, []string{"http", "-sS", "--attempts", "1", ts.URL})
	if qs.n429 == 0 {
		t.Errorf("without the fleet, 12 processes started together got no 429: the check cannot fail")
	}
}

// TestFleetSizeRedisDown (issue 21 R1): with Redis down, 12 processes with
// --fleet-size 12 each pace at a twelfth of --quota 10/1s: together the
// server sees about the quota. Without it each assumes a fleet of 10 (see
// redisretry.DefaultColdFleetSize), and 12 of them send 12/s.
func TestFleetSizeRedisDown(t *testing.T) {
	down := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	qs := &quotaServer{quota: 1000, fail: true}
	ts := httptest.NewServer(qs)
	defer ts.Close()
	rs := runTogether(t, 12, []string{"http", "--redis", down, "--fleet", fleetName(t), "--quota", "10/1s", "--fleet-size", "12",
		"--attempts", "5", "--initial-delay", "1ms", "--max-delay", "1ms", "--jitter", "0", ts.URL})
	for _, r := range rs {
		if r.code != exitGaveUp || len(lines(r.stderr, "unavailable")) != 1 {
			t.Errorf("exit %d, want 1 (gave up on 503s) and one unavailable line; stderr:\n%s", r.code, r.stderr)
		}
	}
	rate, n := qs.rate()
	t.Logf("Redis down, 12 processes, --fleet-size 12, --quota 10/1s: %d requests at %.2f/s", n, rate)
	if n != 60 || rate > 10*1.1 {
		t.Errorf("the server saw %d requests at %.2f/s; want 60 at most 11/s", n, rate)
	}
}

func TestFleetSizeBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := dir + "/retry.json"
	if err := os.WriteFile(cfg, []byte(`{"redis": "redis://127.0.0.1:1/0", "fleet": "f", "quota": "5/1s", "fleet_size": 2.5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const r = "redis://127.0.0.1:1/0"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis", r, "--fleet", "f", "--quota", "5/1s", "--fleet-size", "0"}, `invalid value "0" for flag --fleet-size: 0 processes: want 1 to 1000000`},
		{[]string{"--redis", r, "--fleet", "f", "--quota", "5/1s", "--fleet-size", "-3"}, "want 1 to 1000000"},
		{[]string{"--redis", r, "--fleet", "f", "--quota", "5/1s", "--fleet-size", "many"}, "--fleet-size: want a whole number of processes"},
		{[]string{"--redis", r, "--fleet", "f", "--quota", "5/1s", "--fleet-size", "99999999999999999999"}, "--fleet-size: want a whole number"},
		{[]string{"--redis", r, "--fleet", "f", "--fleet-size", "3"}, "--fleet-size needs --quota RATE"},
		{[]string{"--config", cfg}, "fleet_size: want a whole number of processes"},
	} {
		res := runRetry(t, "", nil, args(tc.args, []string{"--", "true"})...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s", tc.args, res.code, tc.want, res.stderr)
		}
	}
}
