package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// capacityStep is a server's capacity, in requests per second, from at on.
type capacityStep struct {
	at        time.Duration
	perSecond int
}

// steppedServer is an API whose hidden capacity steps, as a shared pool's
// does (Standard PayGo): it answers 200 while it answered fewer than its
// capacity of the moment in the last second, and beyond it Google's 429
// (RESOURCE_EXHAUSTED) with a RetryInfo of the time until a slot frees. It
// counts the answers to the requests that arrive before end.
type steppedServer struct {
	start time.Time
	steps []capacityStep
	end   time.Duration

	mu       sync.Mutex
	answered []time.Duration // arrival times of the 200s of the last second, in order
	ok, n429 int             // of the requests that arrived before end
	perSec   [][2]int        // answers 200 and 429 by second of arrival, before end
}

func (s *steppedServer) capacityAt(at time.Duration) int {
	c := s.steps[0].perSecond
	for _, st := range s.steps {
		if st.at <= at {
			c = st.perSecond
		}
	}
	return c
}

// capacity returns how many requests the server can answer 200 before end:
// the integral of its capacity.
func (s *steppedServer) capacity() float64 {
	total := 0.0
	for i, st := range s.steps {
		next := s.end
		if i+1 < len(s.steps) {
			next = s.steps[i+1].at
		}
		total += float64(st.perSecond) * (next - st.at).Seconds()
	}
	return total
}

func (s *steppedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	at := time.Since(s.start)
	for len(s.answered) > 0 && at-s.answered[0] >= time.Second {
		s.answered = s.answered[1:]
	}
	served := len(s.answered) < s.capacityAt(at)
	var wait time.Duration
	if served {
		s.answered = append(s.answered, at)
	} else {
		wait = s.answered[0] + time.Second - at
	}
	if at < s.end {
		sec := int(at / time.Second)
		for len(s.perSec) <= sec {
			s.perSec = append(s.perSec, [2]int{})
		}
		if served {
			s.ok++
			s.perSec[sec][0]++
		} else {
			s.n429++
			s.perSec[sec][1]++
		}
	}
	s.mu.Unlock()
	if served {
		fmt.Fprintln(w, `{"candidates": []}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	fmt.Fprintf(w, `{"error": {"code": 429, "message": "Resource exhausted. Please try again later.", "status": "RESOURCE_EXHAUSTED",
  "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "%.3fs"}]}}`, wait.Seconds())
}

// shares returns the share of the attempts answered 429 and the goodput as
// a share of the capacity.
func (s *steppedServer) shares() (share429, goodput float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.n429) / float64(max(s.ok+s.n429, 1)), float64(s.ok) / s.capacity()
}

// TestFleetAutoQuotaFollowsTheCapacity (issue 24 item 5): six loops each run
// `retry http --redis … --fleet F --quota auto` processes one after another
// for 36 s against a loopback server whose capacity steps 20/s → 8/s → 20/s
// (12 s each, counted over a sliding second), sharing one real
// redis-server; then the same loops with per-process backoff only, the
// control. The fleet learns the rate from the 429s: at most 10 % of the
// attempts answered 429 (and at most 0.6 × the control's), at least 70 %
// of the capacity served. A process whose turn is more than MaxWait
// (250 ms) away gives up saturated (exit 1), and its loop starts the next.
func TestFleetAutoQuotaFollowsTheCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("72 s of real processes")
	}
	exe := bin
	if raceEnabled {
		// Hundreds of short processes: the loops offer what a plain
		// binary offers (a race-enabled one starts several times slower
		// and would not load the server). The race detector runs on the
		// same code in the other tests.
		exe = filepath.Join(t.TempDir(), "retry")
		if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	redis := startRedis(t)
	const loops, step = 6, 12 * time.Second
	run := func(name string, flags []string) *steppedServer {
		t.Helper()
		s := &steppedServer{start: time.Now(), end: 3 * step, steps: []capacityStep{{0, 20}, {step, 8}, {2 * step, 20}}}
		ts := httptest.NewServer(s)
		defer ts.Close()
		var wg sync.WaitGroup
		var mu sync.Mutex
		processes, saturated := 0, 0
		for range loops {
			wg.Go(func() {
				for time.Since(s.start) < s.end {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					cmd := exec.CommandContext(ctx, exe, args([]string{"http", "-sS", "-o", "/dev/null", "--deadline", "10s"}, flags, []string{ts.URL})...)
					out, err := cmd.CombinedOutput()
					late := ctx.Err() != nil
					cancel()
					if late {
						t.Errorf("%s: a retry process did not end within a minute:\n%s", name, out)
						return
					}
					if _, ok := err.(*exec.ExitError); err != nil && !ok {
						t.Errorf("%s: retry: %v", name, err)
						return
					}
					mu.Lock()
					processes++
					if strings.Contains(string(out), "saturated") {
						saturated++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		share429, goodput := s.shares()
		t.Logf("%s: per second, answered 200/429: %v", name, s.perSec)
		t.Logf("%s: %d processes (%d gave up saturated), %d attempts in %v: %.1f %% answered 429, %d answered 200 = %.1f %% of the capacity (%.0f)",
			name, processes, saturated, s.ok+s.n429, s.end, 100*share429, s.ok, 100*goodput, s.capacity())
		return s
	}
	fleet := fleetName(t)
	auto := run("--quota auto", []string{"--redis", redis.url(), "--fleet", fleet, "--quota", "auto", "--redis-timeout", "1s"})
	control := run("backoff only", nil)
	autoShare, autoGoodput := auto.shares()
	controlShare, _ := control.shares()
	// The issue asks at most 10 % answered 429 and 70 % of the capacity;
	// with backoff only about 20 % and 64 %. Beside two CPU burners
	// (scripts/stress.sh, see docs/fleet.md) the fleet measured 5.7 to
	// 7.8 % and 77 to 82 %. What fails is a fleet that does not learn (a
	// process's report lost at exit served 16 % of the capacity) or one
	// that learns too slowly or cuts too deep.
	if autoShare > 0.10 {
		t.Errorf("--quota auto: %.1f %% of the attempts answered 429, want at most 10 %%", 100*autoShare)
	}
	if autoGoodput < 0.70 {
		t.Errorf("--quota auto: goodput %.1f %% of the capacity, want at least 70 %%", 100*autoGoodput)
	}
	if autoShare > 0.6*controlShare {
		t.Errorf("--quota auto: %.1f %% of the attempts answered 429, want at most 0.6 × backoff only's %.1f %%", 100*autoShare, 100*controlShare)
	}
}
