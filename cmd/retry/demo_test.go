package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestDemoTotalsAddUp runs the real demo briefly and checks that its summary
// is consistent: every request is a success or a give-up, attempts are
// requests plus retries, the total row is the sum of the rows, and the
// server's counts match the attempts it could have seen.
func TestDemoTotalsAddUp(t *testing.T) {
	r := runRetry(t, "", nil, "demo", "--duration", "2s", "--clients", "8", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var sum demoSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r.stdout)
	}
	if len(sum.Strategies) != 5 || sum.Strategies[0].Name != "no-retry" {
		t.Fatalf("strategies = %+v", sum.Strategies)
	}
	var tot strategyStats
	for _, s := range sum.Strategies {
		if s.Requests == 0 {
			t.Errorf("%s: no requests in 2s", s.Name)
		}
		if s.Requests != s.Successes+s.GiveUps {
			t.Errorf("%s: requests %d != successes %d + give-ups %d", s.Name, s.Requests, s.Successes, s.GiveUps)
		}
		if s.Attempts < s.Requests {
			t.Errorf("%s: attempts %d < requests %d", s.Name, s.Attempts, s.Requests)
		}
		served := 0
		for _, n := range s.ServerFaults {
			served += n
		}
		// served counts what the server saw: every attempt, plus the
		// replays net/http makes itself on a reused connection that was
		// reset (at most one per attempt).
		if served != s.Served || served < s.Attempts-8 || served > 2*s.Attempts {
			t.Errorf("%s: server served %d (reported %d) for %d attempts", s.Name, served, s.Served, s.Attempts)
		}
		if want := float64(s.Attempts-s.Requests) / float64(s.Requests); abs(s.RetriesPerRequest-want) > 0.006 {
			t.Errorf("%s: retries/request %v, want %.3f", s.Name, s.RetriesPerRequest, want)
		}
		if s.P50MS > s.P99MS {
			t.Errorf("%s: p50 %v > p99 %v", s.Name, s.P50MS, s.P99MS)
		}
		tot.Requests += s.Requests
		tot.Successes += s.Successes
		tot.GiveUps += s.GiveUps
		tot.Attempts += s.Attempts
		tot.Served += s.Served
	}
	if g := sum.Total; g.Requests != tot.Requests || g.Successes != tot.Successes || g.GiveUps != tot.GiveUps ||
		g.Attempts != tot.Attempts || g.Served != tot.Served {
		t.Errorf("total row %+v is not the sum of the rows %+v", g, tot)
	}
	if base := sum.Strategies[0]; base.Attempts != base.Requests || base.GiveUps == 0 {
		t.Errorf("no-retry: %d attempts for %d requests, %d give-ups; want one attempt each and some failures",
			base.Attempts, base.Requests, base.GiveUps)
	}
	if g := sum.Strategies[1]; g.Name != "google" || g.SuccessRate <= sum.Strategies[0].SuccessRate {
		t.Errorf("google success %v%% not above no-retry %v%%", g.SuccessRate, sum.Strategies[0].SuccessRate)
	}
	if !strings.HasPrefix(sum.Conclusion, "Retrying lifted the success rate from ") ||
		!strings.Contains(sum.Conclusion, "(no retries)") {
		t.Errorf("conclusion = %q", sum.Conclusion)
	}
	if len(lines(r.stderr, "retry demo:")) == 0 {
		t.Errorf("no progress lines on stderr (not a TTY: plain lines expected)")
	}
	if strings.Contains(r.stderr, "\r") {
		t.Errorf("carriage returns in the progress of a non-terminal")
	}
}

func TestDemoTable(t *testing.T) {
	r := runRetry(t, "", nil, "demo", "--duration", "300ms", "--clients", "2", "--strategies", "no-retry,full", "--seed", "7")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"seed 7", "delays: policy durations scaled 1/20 (google: initial 50ms, jitter 50ms, cap 3s)",
		"requests", "give-ups", "retries/req", "p99", "no-retry", "full", "total"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestConclusion(t *testing.T) {
	st := []strategyStats{
		{Name: "no-retry", Requests: 100, Successes: 70, Attempts: 100, Served: 104, SuccessRate: 70, P99MS: 300},
		{Name: "google", Requests: 80, Successes: 80, Attempts: 100, Served: 108, SuccessRate: 100, RetriesPerRequest: 0.25, P99MS: 1200},
		{Name: "full", Requests: 80, Successes: 79, Attempts: 96, SuccessRate: 98.75, RetriesPerRequest: 0.2, P99MS: 800},
	}
	want := "Retrying lifted the success rate from 70.0% (no retries) to 100.0% (google) at 0.25 retries per request (the server served 1.35 requests per call, 1.04 without retries); among the retrying strategies full had the lowest p99 latency (800ms) and google the highest (1.20s)."
	if got := conclusion(st); got != want {
		t.Errorf("conclusion =\n%s\nwant\n%s", got, want)
	}
	if got := conclusion(st[:1]); !strings.HasPrefix(got, "Without retries 70.0% of requests succeeded") {
		t.Errorf("conclusion without retrying strategies = %q", got)
	}
}

func TestDemoPolicyScaled(t *testing.T) {
	p, err := demoPolicy("realtime", 20)
	if err != nil {
		t.Fatal(err)
	}
	if p.InitialDelay != 25*time.Millisecond || p.MaxDelay != 100*time.Millisecond || p.Deadline != 500*time.Millisecond || p.Attempts != 3 {
		t.Errorf("realtime scaled 1/20 = %+v", p)
	}
	if p, _ := demoPolicy("no-retry", 20); p.Attempts != 1 {
		t.Errorf("no-retry attempts = %d", p.Attempts)
	}
	if _, err := demoPolicy("turbo", 20); err == nil || !strings.Contains(err.Error(), `unknown strategy "turbo"`) {
		t.Errorf("unknown strategy: %v", err)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(d, 0.5); p != 50*time.Millisecond {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(d, 0.99); p != 99*time.Millisecond {
		t.Errorf("p99 = %v", p)
	}
	if p := percentile(nil, 0.5); p != 0 {
		t.Errorf("p50 of nothing = %v", p)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
