package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/clitest"
	"github.com/backoffkit/retry/internal/testkit"
)

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
// report has a chart row per strategy, the table and a computed conclusion,
// in that order, in 80 columns; the numbers add up; and the herd shows:
// without jitter the stalled requests all retry one base delay (100ms)
// after the stall, and overflow the queue more than decorrelated jitter,
// which spreads them. It runs on a virtual clock (the servers in process):
// on a busy machine real time blurs the waves it checks.
func TestDemoSynchronized(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := demoConfig{scenario: "synchronized", seed: 1, duration: 2500 * time.Millisecond, strategies: demoDefaultStrategies["synchronized"]}
		sc, sum := runInProcess(t, &cfg, io.Discard)
		var b strings.Builder
		printHerdTable(&b, sc, sum)
		out := b.String()
		checkWidth(t, out)
		chart := strings.Index(out, "Attempts reaching each server per 100ms (▄ = its capacity")
		table := regexp.MustCompile(`strategy +requests`).FindStringIndex(out)[0]
		concl := strings.Index(out, "Without jitter (none) the clients that failed together retried together")
		if chart < 0 || table < chart || concl < table {
			t.Fatalf("want chart, table, conclusion in that order:\n%s", out)
		}
		for _, name := range cfg.strategies {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` +[ ▁▂▃▄▅▆▇█]+$`).MatchString(out[chart:table]) {
				t.Errorf("no chart row for %s:\n%s", name, out[chart:table])
			}
		}
		if !strings.Contains(out[chart:table], "^^^^^^^^^^ stall") {
			t.Errorf("the stall is not marked under the chart:\n%s", out[chart:table])
		}
		by := map[string]strategyStats{}
		for _, s := range sum.Strategies {
			by[s.Name] = s
			arrived := 0
			for _, n := range s.Arrivals {
				arrived += n
			}
			if s.Requests != s.Successes+s.GiveUps || s.Attempts < s.Requests || arrived != s.Served || arrived != s.Attempts {
				t.Errorf("%s: %d requests, %d ok, %d give-ups, %d attempts, %d arrived at the server", s.Name, s.Requests, s.Successes, s.GiveUps, s.Attempts, arrived)
			}
			// 50 requests/s, a steady schedule: 125 in 2.5 s, the same for
			// all; the stall fails every one of the second's 50 at once.
			if s.Requests != 125 || s.Stalled != 50 || s.Cut != 0 {
				t.Errorf("%s: %d requests, %d failed by the stall, %d cut at the end; want 125, 50, 0", s.Name, s.Requests, s.Stalled, s.Cut)
			}
		}
		if n := by["no-retry"]; n.Attempts != n.Requests || n.GiveUps != n.Stalled+n.Shed {
			t.Errorf("no-retry: %d attempts for %d requests, %d give-ups for %d stalled and %d shed", n.Attempts, n.Requests, n.GiveUps, n.Stalled, n.Shed)
		}
		none, dec := by["none"], by["decorrelated"]
		t.Logf("none: peak %d at %dms, %d shed; decorrelated: peak %d at %dms, %d shed", none.Peak, none.PeakAtMS, none.Shed, dec.Peak, dec.PeakAtMS, dec.Shed)
		// The 50 stalled requests and the 5 new ones of that 100ms.
		if none.Peak != 55 || none.PeakAtMS != 2100 {
			t.Errorf("none peaked with %d attempts at %dms, want 55 at 2100ms: the stalled requests retrying together", none.Peak, none.PeakAtMS)
		}
		if none.Peak < 3*dec.Peak/2 || none.Shed < 3*dec.Shed/2 {
			t.Errorf("none: peak %d, %d shed; decorrelated: peak %d, %d shed; want the lock-step retries to come back together and overflow the queue more",
				none.Peak, none.Shed, dec.Peak, dec.Shed)
		}
		// The default run has a budgeted strategy, in the table and the
		// conclusion: its budget (10 retries per second here) refuses
		// most of the herd's retries, so fewer attempts reach the
		// recovering server, its peak and its shed attempts are lower
		// than google's, and it pays in give-ups.
		bud, g := by["google+budget"], by["google"]
		t.Logf("google+budget: %d refused, %d attempts, peak %d, %d shed, %d give-ups; google: %d attempts, peak %d, %d shed, %d give-ups",
			bud.BudgetRefused, bud.Attempts, bud.Peak, bud.Shed, bud.GiveUps, g.Attempts, g.Peak, g.Shed, g.GiveUps)
		if !regexp.MustCompile(`(?m)^google\+budget +125 `).MatchString(out[table:concl]) {
			t.Errorf("no google+budget row in the table:\n%s", out[table:])
		}
		if bud.BudgetRefused == 0 || bud.Attempts-bud.Requests > 15 || bud.Attempts >= g.Attempts || bud.Peak >= g.Peak || bud.Shed >= g.Shed || bud.GiveUps <= g.GiveUps {
			t.Errorf("google+budget: want retries refused, at most 10-15 retries, fewer attempts, a lower peak, fewer shed and more give-ups than google")
		}
		if want := fmt.Sprintf("The retry budget (google+budget) refused %d retries", bud.BudgetRefused); !strings.Contains(sum.Conclusion, want) {
			t.Errorf("conclusion lacks %q:\n%s", want, sum.Conclusion)
		}
		if strings.Contains(sum.Conclusion, "google+budget spread its retries best") {
			t.Errorf("the budget drops retries, it does not spread them:\n%s", sum.Conclusion)
		}
	})
}

// The header comes first, before the run (the user reads it while waiting):
// it is on stdout before the first progress line on stderr.
func TestDemoHeaderFirst(t *testing.T) {
	var errb testkit.Buffer
	out := &firstWrite{other: &errb}
	// 1.2 s of arrivals, held by the stall until 2 s: progress lines at 1 s
	// and 2 s, while the header must already be out.
	code := Run([]string{"--duration", "1200ms", "--strategies", "no-retry,none"}, out, &errb)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "retry demo: ") {
		t.Fatalf("no progress on stderr, nothing to compare the header with: %q", errb.String())
	}
	if out.otherBefore != 0 {
		t.Errorf("stdout started after %d bytes of progress on stderr: the header did not come first", out.otherBefore)
	}
	s := out.buf.String()
	if !strings.HasPrefix(strings.Join(strings.Fields(s), " "), "retry demo, synchronized: 2 strategies, 50 requests/s each, 1.2s, seed 1. The seed fixes every random draw; the servers run in real time") {
		t.Errorf("header:\n%s", s)
	}
	checkWidth(t, s)
}

// A run that ends before the stall has no herd: the conclusion says so
// instead of claiming one.
func TestHerdConclusionWithoutStall(t *testing.T) {
	sc := scenarioSync(500 * time.Millisecond)
	st := []strategyStats{{Name: "no-retry", Requests: 25, Successes: 25, Attempts: 25}, {Name: "none", Requests: 25, Successes: 25, Attempts: 25}}
	got := herdConclusion(sc, st)
	if !strings.HasPrefix(got, "No request arrived during the stall (1s to 2s), so nothing failed together") || strings.Contains(got, "retried together") {
		t.Errorf("conclusion = %q", got)
	}
}

// firstWrite records how much had been written to other when it was first
// written to.
type firstWrite struct {
	other       *testkit.Buffer
	buf         bytes.Buffer
	wrote       bool
	otherBefore int
}

func (w *firstWrite) Write(p []byte) (int, error) {
	if !w.wrote {
		w.wrote, w.otherBefore = true, w.other.Len()
	}
	return w.buf.Write(p)
}

// runInProcess runs cfg's scenario (synchronized or quota) with its servers
// in process, so that inside a synctest bubble it runs on the virtual clock;
// it sets cfg.scale as the command does, writes the progress to progress and
// returns the scenario and the run's summary. An error fails t.
func runInProcess(t *testing.T, cfg *demoConfig, progress io.Writer) (scenario, Summary) {
	t.Helper()
	sc := scenarioSync(cfg.duration)
	if cfg.scenario == "quota" {
		sc = scenarioQuota(cfg.duration)
	}
	sc.transport = func(h http.Handler) http.RoundTripper { return clitest.MemTransport{Handler: h} }
	cfg.scale = sc.scale
	sum, err := runHerd(context.Background(), *cfg, sc, progress)
	if err != nil {
		t.Fatal(err)
	}
	return sc, sum
}

// The quota scenario: 429s with RetryInfo; honouring them is compared with
// ignoring them, and the budget with none, in words computed from the run.
func TestDemoQuota(t *testing.T) {
	// On a virtual clock, the servers in process: the windows of the quota
	// are exact whatever the machine's load.
	synctest.Test(t, func(t *testing.T) {
		cfg := demoConfig{scenario: "quota", seed: 1, duration: 2 * time.Second, strategies: demoDefaultStrategies["quota"]}
		_, sum := runInProcess(t, &cfg, io.Discard)
		by := map[string]strategyStats{}
		for _, s := range sum.Strategies {
			by[s.Name] = s
			t.Logf("%-15s %d requests, %d ok, %d attempts, %d 429s, %d hinted waits, peak %d", s.Name, s.Requests, s.Successes, s.Attempts, s.OverQuota, s.HintedWaits, s.Peak)
		}
		// 60 requests/s against 50 per second: 10 of each second's 60 are
		// refused, and without retries they fail.
		if n := by["no-retry"]; n.Requests != 120 || n.OverQuota != 20 || n.GiveUps != 20 {
			t.Errorf("no-retry: %d requests, %d 429s, %d give-ups; want 120, 20, 20", n.Requests, n.OverQuota, n.GiveUps)
		}
		if g := by["google"]; g.HintedWaits == 0 || g.OverQuota == 0 {
			t.Errorf("google: %d hinted waits, %d 429s: want the quota's RetryInfo honoured", g.HintedWaits, g.OverQuota)
		}
		if g := by["google+nohints"]; g.HintedWaits != 0 {
			t.Errorf("google+nohints: %d hinted waits, want none", g.HintedWaits)
		}
		// Honouring the hint wastes fewer attempts on the quota than
		// retrying on the policy's own (short, scaled) waits.
		if g, n := by["google"], by["google+nohints"]; g.OverQuota >= n.OverQuota || g.GiveUps > n.GiveUps {
			t.Errorf("google: %d 429s, %d give-ups; google+nohints: %d 429s, %d give-ups; want fewer with hints", g.OverQuota, g.GiveUps, n.OverQuota, n.GiveUps)
		}
		// No window lets more than the quota through.
		for _, s := range sum.Strategies {
			if ok := s.Attempts - s.OverQuota; ok > 50*int(math.Ceil(float64(sum.ElapsedMS)/1000)) {
				t.Errorf("%s: %d attempts admitted in %dms, more than the quota", s.Name, ok, sum.ElapsedMS)
			}
		}
		// The budget's window is scaled like the waits (10 s / 20 =
		// 0.5 s): within the run it binds, at 20 % of the requests or 10
		// retries per second. (Unscaled, its floor of 100 retries per 10 s
		// covered every retry of a 2 s run and it did nothing.)
		if b, g := by["google+budget"], by["google"]; b.BudgetRefused == 0 || b.Attempts >= g.Attempts {
			t.Errorf("google+budget: %d retries refused, %d attempts (google %d): want the budget to bind", b.BudgetRefused, b.Attempts, g.Attempts)
		}
		for _, want := range []string{"Honouring RetryInfo (google) took the attempts the quota refused from 61 to 30 ",
			"The retry budget (google+budget) held the load to 1.10 attempts per request (1.25 without it) by refusing 14 retries; 14 requests gave up (20 without retries).",
			"No strategy gets more than the quota (50 per 1s) through."} {
			if !strings.Contains(sum.Conclusion, want) {
				t.Errorf("conclusion lacks %q:\n%s", want, sum.Conclusion)
			}
		}
	})
}

// When the budget binds (a longer run, the floor spent), the conclusion
// says how many retries it refused and compares the give-ups with no
// retries, from the numbers.
func TestQuotaConclusionBudget(t *testing.T) {
	sc := scenarioQuota(5 * time.Second)
	st := []strategyStats{
		{Name: "no-retry", Requests: 300, Successes: 251, GiveUps: 49, Attempts: 300, OverQuota: 49, SuccessRate: 83.7},
		{Name: "google", Requests: 300, Successes: 300, Attempts: 449, OverQuota: 149, HintedWaits: 149},
		{Name: "google+budget", Requests: 300, Successes: 251, GiveUps: 49, Attempts: 400, OverQuota: 149, BudgetRefused: 49},
	}
	got := quotaConclusion(sc, st)
	want := "The retry budget (google+budget) held the load to 1.33 attempts per request (1.50 without it) by refusing 49 retries; 49 requests gave up, as many as without retries: new requests alone fill the quota of every window, so a retry that gets through takes the place of a newer request."
	if !strings.Contains(got, want) {
		t.Errorf("conclusion =\n%s\nwant it to contain\n%s", got, want)
	}
	st[2].GiveUps, st[2].Successes = 10, 290
	if got := quotaConclusion(sc, st); !strings.Contains(got, "; 10 requests gave up (49 without retries).") {
		t.Errorf("conclusion = %s", got)
	}
}

// The quota holds when handlers reach it out of order (one read the clock
// just before the window ended, another just after): the window never goes
// back, so no window takes more than its quota.
func TestQuotaWindowOnlyMovesForward(t *testing.T) {
	sc := scenarioQuota(time.Second)
	sc.quota = 2
	s := &capServer{sc: sc}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var got []bool
	for _, at := range []time.Duration{ms(500), ms(600), ms(1010), ms(990), ms(1020), ms(1500)} {
		_, ok := s.takeQuota(at)
		got = append(got, ok)
	}
	// Window 0: 500, 600. Window 1: 1010 and the late 990; 1020 and 1500
	// are over its quota.
	if want := []bool{true, true, true, true, false, false}; !slices.Equal(got, want) {
		t.Errorf("admitted %v, want %v", got, want)
	}
	// Its hint counts from the latest reading (1.5 s), not its own.
	if wait, ok := s.takeQuota(ms(990)); ok || wait != ms(500) {
		t.Errorf("a late request in a full window: wait %v, ok %v; want refused, come back in 500ms", wait, ok)
	}
}

// The arrivals are steady: every 100ms of the chart gets its share (5 at
// 50/s), so a blank or a tall cell is the strategies' doing. The Poisson
// schedule it replaces left 0.9 s empty for seed 1, just before the stall.
func TestArrivalScheduleSteady(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		for _, rate := range []float64{50, 60} {
			at := arrivalSchedule(seed, rate, 5*time.Second)
			if len(at) != int(rate*5) {
				t.Errorf("seed %d, %v/s: %d requests in 5s, want %d", seed, rate, len(at), int(rate*5))
			}
			per := make([]int, 50)
			for i, d := range at {
				if i > 0 && d < at[i-1] {
					t.Fatalf("seed %d: arrivals out of order at %d", seed, i)
				}
				per[d/(100*time.Millisecond)]++
			}
			want := int(rate / 10)
			for b, n := range per {
				if n < want-1 || n > want+1 {
					t.Errorf("seed %d, %v/s: %d arrivals in [%v, +100ms), want %d±1", seed, rate, n, time.Duration(b)*100*time.Millisecond, want)
				}
			}
		}
	}
	if a, b := arrivalSchedule(1, 50, time.Second), arrivalSchedule(2, 50, time.Second); slices.Equal(a, b) || !slices.Equal(a, arrivalSchedule(1, 50, time.Second)) {
		t.Error("the schedule does not follow the seed")
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
	if !strings.Contains(b.String(), "(▄ = its capacity, █ = twice that)") {
		t.Errorf("chart legend:\n%s", b.String())
	}
	// Under a quota the scale is the quota's rate, not a capacity.
	b.Reset()
	printChart(&b, scenarioQuota(5*time.Second), st)
	checkWidth(t, b.String())
	if !strings.Contains(b.String(), "(▄ = the quota's rate, █ = twice that)") {
		t.Errorf("quota chart legend:\n%s", b.String())
	}
	if got := []rune(" ▁▄█")[0]; spark(0, 10) != got || spark(10, 10) != '▄' || spark(20, 10) != '█' || spark(1000, 10) != '█' || spark(1, 10) != '▁' || spark(1, 1000) != '▁' {
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

// retry demo --help fits 80 columns too (the profile list and the flags'
// defaults made lines of 110 and 194), and says the stall lasts a second.
func TestDemoHelpFits80Columns(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run([]string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	checkWidth(t, out.String())
	flat := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"model-armor", "no-retry,google+nohints,google,google+budget (quota)", "stalls for a second", "--time-scale K"} {
		if !strings.Contains(flat, want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

// The random scenario's progress line stays under 80 columns even with big
// numbers: a longer line wraps on a terminal, and \r rewrites only its end.
func TestDemoProgressLineFits(t *testing.T) {
	var lanes []*lane
	for range 5 {
		l := &lane{counter: &countingTransport{}, requests: 99999, successes: 99998}
		l.counter.n.Store(9999999)
		lanes = append(lanes, l)
	}
	for _, sending := range []bool{true, false} {
		line := progressLine(lanes, 599*time.Second, 10*time.Minute, sending)
		if n := utf8.RuneCountInString(line); n > 79 {
			t.Errorf("%d columns: %q", n, line)
		}
	}
}

// countingTransport passes CloseIdleConnections on to the transport it
// wraps: hiding it made http.Client.CloseIdleConnections a no-op for the
// demo's clients.
func TestCountingTransportClosesIdleConnections(t *testing.T) {
	base := &closeCounter{}
	var rt http.RoundTripper = &countingTransport{base: base}
	ci, ok := rt.(interface{ CloseIdleConnections() })
	if !ok {
		t.Fatal("countingTransport hides CloseIdleConnections")
	}
	ci.CloseIdleConnections()
	if base.n != 1 {
		t.Errorf("the base transport's CloseIdleConnections ran %d times, want 1", base.n)
	}
	(&countingTransport{base: clitest.MemTransport{}}).CloseIdleConnections() // a base without it: nothing to do
}

type closeCounter struct{ n int }

func (c *closeCounter) RoundTrip(*http.Request) (*http.Response, error) { return nil, io.EOF }
func (c *closeCounter) CloseIdleConnections()                           { c.n++ }

// --scenario quota reaches the quota scenario through the command line (the
// scenario's behaviour is checked on a virtual clock by TestDemoQuota).
func TestDemoQuotaFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run([]string{"--scenario", "quota", "--duration", "300ms", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum Summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if sum.Scenario != "quota" || sum.Quota != "50 per 1s" || len(sum.Strategies) != 4 || sum.Strategies[1].Name != "google+nohints" || sum.TimeScale != 20 {
		t.Errorf("summary %+v", sum)
	}
}

// The budget sentence of the synchronized scenario is computed from the
// results: fed fabricated numbers, it says what they say, whichever way
// they go, and never claims a budget helped where it did not.
func TestHerdConclusionBudget(t *testing.T) {
	sc := scenarioSync(5 * time.Second) // 10 attempts per 100ms is 1.0x
	base := []strategyStats{
		{Name: "no-retry", Requests: 250, Successes: 200, GiveUps: 50, Attempts: 250, Stalled: 50, SuccessRate: 80},
		{Name: "google", Requests: 250, Successes: 250, Attempts: 375, Shed: 76, Stalled: 50, Peak: 48, SuccessRate: 100},
		{Name: "google+budget", Requests: 250, Successes: 207, GiveUps: 43, Attempts: 260, Shed: 3, Stalled: 50, Peak: 15, BudgetRefused: 40, SuccessRate: 82.8},
	}
	tests := []struct {
		name   string
		change func(st []strategyStats)
		want   []string
		not    []string
	}{
		{"the budget holds the herd, at a price", func([]strategyStats) {},
			[]string{"The retry budget (google+budget) refused 40 retries: its retries added 4 % to the requests (google: 50 %), " +
				"so the recovering server's busiest 100ms held 1.5x its capacity against 4.8x, and 3 attempts were shed against 76. " +
				"The price: 43 requests gave up (google: 0, 50 without retries).",
				"this one recovered fast enough for google to get every request through."},
			[]string{"google+budget spread"}},
		{"the same peak", func(st []strategyStats) { st[2].Peak = 48 },
			[]string{"yet the recovering server's busiest 100ms held as much as without it (4.8x its capacity)"}, []string{"held 1.5x"}},
		{"a higher peak", func(st []strategyStats) { st[2].Peak = 60 },
			[]string{"held more than without it (6.0x its capacity against 4.8x)"}, nil},
		{"no extra give-up", func(st []strategyStats) { st[2].GiveUps, st[2].BudgetRefused = 0, 1 },
			[]string{"refused 1 retry:", "It cost no give-up: 0, as many as google, 50 without retries."}, []string{"The price"}},
		{"fewer give-ups", func(st []strategyStats) { st[1].GiveUps, st[1].SuccessRate = 12, 95.2 },
			[]string{"The price: 43 requests gave up (google: 12, 50 without retries)", "to get 95.2% through against 82.8%"}, nil},
		{"nothing refused", func(st []strategyStats) { st[2].BudgetRefused, st[2].Attempts = 0, 300 },
			[]string{"The retry budget (google+budget) refused no retry: its retries added 20 % to the requests"}, []string{"The price"}},
		{"no strategy to compare with", func(st []strategyStats) { st[1].Name = "full" },
			[]string{"The retry budget (google+budget) refused 40 retries: its retries added 4 % to the requests; " +
				"the busiest 100ms after the stall brought 1.5x the server's capacity, 3 attempts were shed and 43 requests gave up."}, []string{"(google:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := slices.Clone(base)
			tt.change(st)
			got := herdConclusion(sc, st)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("conclusion lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(got, w) {
					t.Errorf("conclusion has %q:\n%s", w, got)
				}
			}
		})
	}
}

// +budget is Finagle's budget with its window scaled like the waits: at
// 1/10, 20 % of the requests of the last second, at least 10 retries per
// second. The unscaled 10 s window allowed 100 retries at once, the whole
// herd of the default run, so the budget never acted within the demo.
func TestDemoBudgetScaled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := demoPolicy("google+budget", 10)
		if err != nil {
			t.Fatal(err)
		}
		b := p.Budget.(*retry.RatioBudget)
		for range 50 {
			b.Admit(false)
		}
		allowed := 0
		for range 50 {
			if b.Admit(true) {
				allowed++
			}
		}
		if allowed != 10 {
			t.Errorf("%d of 50 retries allowed after 50 requests, want 10 (20 %%)", allowed)
		}
		time.Sleep(1100 * time.Millisecond) // virtual: the 1 s window has rolled
		if !b.Admit(true) {
			t.Error("a retry refused after the scaled window rolled past the others")
		}
	})
	// A scale too large for a window of at least 20ms is clamped, not a panic.
	if _, err := demoPolicy("google+budget", 1000); err != nil {
		t.Fatal(err)
	}
	if got := demoBudgetConfig(1000).Window; got != 20*time.Millisecond {
		t.Errorf("window at 1/1000 = %v, want 20ms", got)
	}
	text := budgetText([]string{"none", "google+budget"}, 10)
	if want := "google+budget: a retry budget (Finagle's defaults): in any 1s (its 10s scaled 1/10) retries may add 20 % to the requests, or 10 per second if that is more; a retry it refuses gives up at once."; text != want {
		t.Errorf("budget text =\n%s\nwant\n%s", text, want)
	}
	if budgetText([]string{"none", "google"}, 10) != "" {
		t.Error("a budget explained where no strategy has one")
	}
}

// The header of the default run explains the budget as it explains the
// waits, in 80 columns.
func TestDemoHeaderBudget(t *testing.T) {
	cfg := demoConfig{scenario: "synchronized", seed: 1, scale: 10, strategies: demoDefaultStrategies["synchronized"]}
	var b strings.Builder
	herdHeader(&b, cfg, scenarioSync(5*time.Second))
	checkWidth(t, b.String())
	flat := strings.Join(strings.Fields(b.String()), " ")
	if !strings.Contains(flat, "6 strategies") || !strings.Contains(flat, "google+budget: a retry budget (Finagle's defaults): in any 1s (its 10s scaled 1/10)") {
		t.Errorf("header:\n%s", b.String())
	}
}

// After the last arrival the run waits for the requests still retrying:
// the progress said "3.0s of 2s" then. It must say the run is finishing,
// and never show a time past the run's length as a part of it.
func TestDemoProgressAfterDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := demoConfig{scenario: "synchronized", seed: 1, duration: 1200 * time.Millisecond, strategies: []string{"none"}}
		var progress bytes.Buffer
		runInProcess(t, &cfg, &progress)
		lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
		finishing := 0
		for _, l := range lines {
			var el, of float64
			if n, _ := fmt.Sscanf(l, "retry demo: %fs of %fs:", &el, &of); n == 2 && el > of {
				t.Errorf("progress past the run's length: %q", l)
			}
			if strings.Contains(l, ", finishing: ") {
				finishing++
			}
		}
		// The stall holds the requests until 2 s: the lines at 2 s and
		// after come after the last arrival at 1.2 s.
		if finishing == 0 {
			t.Errorf("no line says the run is finishing:\n%s", progress.String())
		}
	})
	for _, el := range []time.Duration{599 * time.Second, 603 * time.Second} {
		if l := herdProgressLine(el, 10*time.Minute, 480000, 480000, 3840000); utf8.RuneCountInString(l) > 79 {
			t.Errorf("%d columns: %q", utf8.RuneCountInString(l), l)
		}
	}
}

// TestDemoReportFitsTheTerminal: on an 80x24 terminal the last screen of
// the demo shows its chart, its table and the start of its conclusion (it
// showed the legend and the end of the conclusion: the chart and the table
// had scrolled away), and says how to see the rest; on a taller terminal,
// or anything that is not a terminal, the whole report. The scenario runs
// on a virtual clock (see TestDemoSynchronized).
func TestDemoReportFitsTheTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := demoConfig{scenario: "synchronized", seed: 1, duration: 5 * time.Second, strategies: demoDefaultStrategies["synchronized"]}
		sc, sum := runInProcess(t, &cfg, io.Discard)
		first := sentences(sum.Conclusion)[0]
		for _, rows := range []int{0, 24, 40, 200} {
			var b strings.Builder
			herdReport(sc, sum).write(&b, rows)
			out := b.String()
			checkWidth(t, out)
			n := strings.Count(out, "\n")
			full := strings.Contains(out, "attempts: requests + retries") && strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(sum.Conclusion), " "))
			compact := rows > 0 && rows < n+2 // the whole report would not fit
			for _, want := range []string{"Attempts reaching each server per 100ms", "strategy      requests", first} {
				if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
					t.Errorf("%d rows: the report lacks %q:\n%s", rows, want, out)
				}
			}
			switch {
			case rows == 24:
				if n > 23 || full || !strings.Contains(out, "(legend and whole conclusion: a terminal of ") {
					t.Errorf("24 rows: %d lines (want 23 at most, the compact view and its pointer):\n%s", n, out)
				}
			case !compact && !full:
				t.Errorf("%d rows: %d lines, not the whole report:\n%s", rows, n, out)
			case compact && n > rows-1:
				t.Errorf("%d rows: %d lines do not fit", rows, n)
			}
		}
	})
}

// result is what a run of the demo returned and wrote.
type result struct {
	code           int
	stdout, stderr string
}

// runArgs runs "retry demo" with args in this process, its output and
// progress in buffers (no terminal).
func runArgs(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestDemoTotalsAddUp runs the real demo briefly and checks that its summary
// is consistent: every request is a success or a give-up, attempts are
// requests plus retries, the total row is the sum of the rows, and the
// server's counts match the attempts it could have seen.
func TestDemoTotalsAddUp(t *testing.T) {
	// Mostly waiting on real time, with robust assertions: run beside
	// the other slow demo runs.
	t.Parallel()
	r := runArgs(t, "--scenario", "random", "--duration", "2s", "--clients", "8", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	var sum Summary
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
	if !strings.Contains(r.stderr, "retry demo:") {
		t.Errorf("no progress lines on stderr (not a TTY: plain lines expected)")
	}
	if strings.Contains(r.stderr, "\r") {
		t.Errorf("carriage returns in the progress of a non-terminal")
	}
}

func TestDemoTable(t *testing.T) {
	// Mostly waiting on real time, with robust assertions: run beside
	// the other slow demo runs.
	t.Parallel()
	r := runArgs(t, "--scenario", "random", "--duration", "300ms", "--clients", "2", "--strategies", "no-retry,full,realtime", "--seed", "7")
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
