package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backoffkit/retry"
)

// TestDemoTotalsAddUp runs the real demo briefly and checks that its summary
// is consistent: every request is a success or a give-up, attempts are
// requests plus retries, the total row is the sum of the rows, and the
// server's counts match the attempts it could have seen.
func TestDemoTotalsAddUp(t *testing.T) {
	r := runRetry(t, "", nil, "demo", "--scenario", "random", "--duration", "2s", "--clients", "8", "--json")
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
	r := runRetry(t, "", nil, "demo", "--scenario", "random", "--duration", "300ms", "--clients", "2", "--strategies", "no-retry,full,realtime", "--seed", "7")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	flat := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"seed 7", "Delays: policy durations scaled 1/20 (google: initial 50ms, jitter 50ms, cap 3s)",
		"requests", "give-ups", "served", "p99", "no-retry", "full", "total"} {
		if !strings.Contains(flat, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.HasPrefix(r.stdout, "retry demo, scenario random:") {
		t.Errorf("the header does not come first:\n%s", r.stdout)
	}
	checkWidth(t, r.stdout)
}

// checkWidth fails if a line of out is wider than 80 columns.
func checkWidth(t *testing.T, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("%d columns (over 80): %q", n, l)
		}
	}
}

// The default scenario: a stall that fails every held request at once. The
// output starts with the header, fits 80 columns, has a chart row per
// strategy and a computed conclusion; the numbers add up, and the lock-step
// strategy overloads the recovering server (its retries are shed).
func TestDemoSynchronized(t *testing.T) {
	r := runRetry(t, "", nil, "demo", "--duration", "2500ms")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	out := r.stdout
	if !strings.HasPrefix(out, "retry demo, synchronized: 5 strategies, 50 requests/s each, 2.5s, seed 1.\n") {
		t.Errorf("the header does not come first:\n%s", out)
	}
	checkWidth(t, out)
	chart := strings.Index(out, "Attempts reaching each server per 100ms")
	table := strings.Index(out, "strategy     requests")
	concl := strings.Index(out, "Without jitter (none) the clients that failed together retried together")
	if chart < 0 || table < chart || concl < table {
		t.Fatalf("want header, chart, table, conclusion in that order:\n%s", out)
	}
	for _, name := range []string{"no-retry", "none", "google", "full", "decorrelated"} {
		if !regexp.MustCompile(`(?m)^` + name + ` +[ ▁▂▃▄▅▆▇█]+$`).MatchString(out[chart:table]) {
			t.Errorf("no chart row for %s:\n%s", name, out[chart:table])
		}
	}
	if !strings.Contains(out[chart:table], "^^^^^^^^^^ stall") {
		t.Errorf("the stall is not marked under the chart:\n%s", out[chart:table])
	}

	r = runRetry(t, "", nil, "demo", "--duration", "2500ms", "--strategies", "no-retry,none,decorrelated", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var sum demoSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if sum.Scenario != "synchronized" || len(sum.Strategies) != 3 {
		t.Fatalf("summary %+v", sum)
	}
	for _, s := range sum.Strategies {
		arrived := 0
		for _, n := range s.Arrivals {
			arrived += n
		}
		if s.Requests != s.Successes+s.GiveUps || s.Attempts < s.Requests || arrived != s.Served || arrived < s.Attempts-s.GiveUps {
			t.Errorf("%s: %d requests, %d ok, %d give-ups, %d attempts, %d arrived at the server", s.Name, s.Requests, s.Successes, s.GiveUps, s.Attempts, arrived)
		}
		// The stall fails every request held at once: about a second of arrivals.
		if s.Stalled < 20 {
			t.Errorf("%s: %d requests failed by the stall, want about 50", s.Name, s.Stalled)
		}
	}
	if n := sum.Strategies[0]; n.Attempts != n.Requests || n.GiveUps < n.Stalled {
		t.Errorf("no-retry: %d attempts for %d requests, %d give-ups for %d stalled", n.Attempts, n.Requests, n.GiveUps, n.Stalled)
	}
	if n := sum.Strategies[1]; n.Shed == 0 || n.Attempts <= n.Requests {
		t.Errorf("none: %d shed, %d attempts for %d requests: want its lock-step retries to overflow the queue", n.Shed, n.Attempts, n.Requests)
	}
}

// The quota scenario: 429s with RetryInfo; honouring them is compared with
// ignoring them, and the budget with none, in words computed from the run.
func TestDemoQuota(t *testing.T) {
	r := runRetry(t, "", nil, "demo", "--scenario", "quota", "--duration", "2s", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var sum demoSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	by := map[string]strategyStats{}
	for _, s := range sum.Strategies {
		by[s.Name] = s
	}
	if g := by["google"]; g.HintedWaits == 0 || g.OverQuota == 0 {
		t.Errorf("google: %d hinted waits, %d 429s: want the quota's RetryInfo honoured", g.HintedWaits, g.OverQuota)
	}
	if g := by["google+nohints"]; g.HintedWaits != 0 {
		t.Errorf("google+nohints: %d hinted waits, want none", g.HintedWaits)
	}
	for _, want := range []string{"Honouring RetryInfo (google) took the attempts the quota refused from ",
		"The retry budget (google+budget) held the load to ", "No strategy gets more than the quota (50 per 1s) through."} {
		if !strings.Contains(sum.Conclusion, want) {
			t.Errorf("conclusion lacks %q:\n%s", want, sum.Conclusion)
		}
	}
}

func TestDemoChartFits80Columns(t *testing.T) {
	sc := scenarioSync(5 * time.Second)
	per := int(sc.perBucket())
	st := []strategyStats{
		{Name: "a-very-long-strategy-name+budget+nohints", Arrivals: []int{0, 1, per, 2 * per, 100 * per}},
		{Name: "none", Arrivals: make([]int, 200)},
	}
	var b strings.Builder
	printChart(&b, sc, st)
	checkWidth(t, b.String())
	if got := []rune(" ▁▄█")[0]; spark(0, 10) != got || spark(10, 10) != '▄' || spark(20, 10) != '█' || spark(1000, 10) != '█' || spark(1, 10) != '▁' {
		t.Errorf("spark levels: 0→%q 1→%q 10→%q 20→%q", spark(0, 10), spark(1, 10), spark(10, 10), spark(20, 10))
	}
}

func TestDemoPolicyModifiers(t *testing.T) {
	p, err := demoPolicy("full+budget+nohints", 20)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Budget.(*retry.RatioBudget); !ok || p.MaxRetryAfter != retry.Zero || p.Shape != retry.ShapeFull {
		t.Errorf("full+budget+nohints = %+v", p)
	}
	if p, _ := demoPolicy("google", 20); p.Budget != nil || p.MaxRetryAfter == retry.Zero {
		t.Errorf("google has a budget or ignores hints: %+v", p)
	}
	if _, err := demoPolicy("google+turbo", 20); err == nil || !strings.Contains(err.Error(), `unknown modifier "turbo"`) {
		t.Errorf("unknown modifier: %v", err)
	}
}

func TestConclusion(t *testing.T) {
	st := []strategyStats{
		{Name: "no-retry", Requests: 100, Successes: 70, Attempts: 100, Served: 104, SuccessRate: 70, P99MS: 300},
		{Name: "google", Requests: 80, Successes: 80, Attempts: 100, Served: 108, SuccessRate: 100, RetriesPerRequest: 0.25, P99MS: 1200},
		{Name: "full", Requests: 80, Successes: 79, GiveUps: 1, Attempts: 96, SuccessRate: 98.75, RetriesPerRequest: 0.2, P99MS: 800},
	}
	want := "Retrying lifted the success rate from 70.0% (no retries) to 100.0% (google) at 0.25 retries per request (the server served 1.35 requests per call, 1.04 without retries); among the retrying strategies full had the lowest p99 latency (800ms, but gave up on 1 of its 80 requests) and google the highest (1.20s)."
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
