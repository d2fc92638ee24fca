package demo

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
	"github.com/backoffkit/retry/internal/textwrap"
)

// demoUsage is the text of retry demo --help before the flags; it fits 80
// columns (the strategy names are wrapped in).
func demoUsage() string {
	var b strings.Builder
	b.WriteString(`Usage: retry demo [flags]

Runs loopback HTTP servers on 127.0.0.1, one per strategy, and drives each
with the same requests through httpretry, side by side. --scenario picks the
failure:

  synchronized  (default) requests arrive at a steady rate (open loop) at a
                server of finite capacity that stalls for a second, then
                fails every held request at once: a thundering herd.
                Without jitter the retries come back in waves and overload
                the recovering server; jittered retries spread; a retry
                budget (google+budget) sends fewer and gives up on more.
  quota         the server has a quota and answers a 429 with
                google.rpc.RetryInfo above it: honouring the hint and a
                retry budget decide how many attempts are wasted.
  random        independent faults (503s, 429s with Retry-After or
                RetryInfo, resets, slow answers) hit closed-loop clients.

`)
	para := func(s string) {
		for _, l := range textwrap.Lines(s, 78, "") {
			b.WriteString(l + "\n")
		}
		b.WriteString("\n")
	}
	para(fmt.Sprintf("A strategy is no-retry, a jitter shape (%s) or a profile (%s), optionally followed by "+
		"+budget (Finagle's retry budget: retries up to 20 %% of the requests of the last 10 s, at least 10 per second, "+
		"the 10 s divided by --time-scale like the waits) and/or +nohints (ignore Retry-After and RetryInfo), "+
		"e.g. full+budget. --strategies defaults to: %s (synchronized); %s (quota); %s (random).",
		cli.ShapeList(), strings.Join(retry.ProfileNames(), ", "), strings.Join(demoDefaultStrategies["synchronized"], ","),
		strings.Join(demoDefaultStrategies["quota"], ","), strings.Join(demoDefaultStrategies["random"], ",")))
	b.WriteString(`Delays are scaled down (policy durations divided by --time-scale) so the demo
finishes in seconds; server hints are not scaled.

It prints what it runs first, then a chart of the attempts reaching each
server over time (synchronized, quota), a table per strategy, a legend and a
conclusion computed from the numbers. Everything fits 80 columns. On a
terminal too short for all of it (80x24), the last screen holds the chart,
the table and the conclusion's first sentences, and a line saying how to see
the rest. The seed fixes every random draw, but the servers run in real
time: the counts vary a little from run to run.

Exit status: 0, 2 on bad usage; interrupted, it ends by SIGINT or SIGTERM
(a shell shows 130/143) after the summary.

Flags:
`)
	return b.String()
}

// demoConfig is what the flags of retry demo say.
type demoConfig struct {
	scenario   string
	clients    int
	duration   time.Duration
	failRate   float64
	seed       uint64
	scale      float64
	strategies []string
	json       bool
}

// strategy is one column of the demo: a name and its (scaled) policy.
type strategy struct {
	name   string
	policy retry.Policy
}

// strategyStats are the results of one strategy.
type strategyStats struct {
	Name              string         `json:"name"`
	Requests          int            `json:"requests"`
	Successes         int            `json:"successes"`
	GiveUps           int            `json:"give_ups"`
	Attempts          int            `json:"attempts"`
	Served            int            `json:"served"`
	RetriesPerRequest float64        `json:"retries_per_request"`
	SuccessRate       float64        `json:"success_rate"`
	P50MS             float64        `json:"p50_ms"`
	P99MS             float64        `json:"p99_ms"`
	HintedWaits       int            `json:"hinted_waits"`
	ServerFaults      map[string]int `json:"server_responses,omitempty"`

	// synchronized and quota scenarios
	Shed      int `json:"shed,omitempty"`       // 503: the server's queue was full
	Stalled   int `json:"stalled,omitempty"`    // 503: held by the stall, then failed
	OverQuota int `json:"over_quota,omitempty"` // 429: over quota
	Cut       int `json:"cut,omitempty"`        // give-ups still retrying when the demo stopped
	// BudgetRefused counts the retries a +budget strategy's budget refused.
	BudgetRefused int   `json:"budget_refused,omitempty"`
	Arrivals      []int `json:"arrivals,omitempty"`   // attempts reaching the server per bucket
	Peak          int   `json:"peak,omitempty"`       // the busiest bucket from the stall on
	PeakAtMS      int64 `json:"peak_at_ms,omitempty"` // when it began

	latencies []time.Duration
}

// Summary is the --json output.
type Summary struct {
	Scenario      string          `json:"scenario"`
	Seed          uint64          `json:"seed"`
	Clients       int             `json:"clients_per_strategy,omitempty"`
	RatePerSecond float64         `json:"requests_per_second,omitempty"`
	Capacity      float64         `json:"capacity_per_second,omitempty"`
	Quota         string          `json:"quota,omitempty"`
	BucketMS      int64           `json:"bucket_ms,omitempty"`
	ChartFromMS   int64           `json:"chart_from_ms,omitempty"`
	DurationMS    int64           `json:"duration_ms"`
	ElapsedMS     int64           `json:"elapsed_ms"`
	FailureRate   float64         `json:"failure_rate,omitempty"`
	TimeScale     float64         `json:"time_scale"`
	Delays        string          `json:"delays"`
	Budget        string          `json:"budget,omitempty"` // what +budget means, when a strategy has one
	Interrupted   bool            `json:"interrupted,omitempty"`
	Strategies    []strategyStats `json:"strategies"`
	Total         strategyStats   `json:"total"`
	Conclusion    string          `json:"conclusion"`
}

// Run is "retry demo".
func Run(args []string, stdout, stderr io.Writer) int {
	const prog = "retry demo"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := demoConfig{scenario: "synchronized", clients: 16, failRate: 0.3, seed: 1}
	var durationSet bool
	fs.Func("scenario", "`NAME` of the failure: synchronized (default), quota or random", func(s string) error {
		if _, ok := demoDefaultStrategies[s]; !ok {
			return errors.New("want synchronized, quota or random")
		}
		cfg.scenario = s
		return nil
	})
	fs.Func("clients", "concurrent clients `N` per strategy, random scenario (default 16)",
		cli.IntIn(1, 512, "want a whole number in 1-512", func(n int) { cfg.clients = n }))
	fs.Func("duration", "how long new requests arrive (default 5s; random: 8s); `DURATION` like 5s", func(s string) error {
		d, err := cli.ParseDuration(s)
		if err != nil {
			return err
		}
		if d <= 0 || d > 10*time.Minute {
			return errors.New("want a duration above 0 and at most 10m")
		}
		cfg.duration = d
		durationSet = true
		return nil
	})
	fs.Func("failure-rate", "fraction `F` of requests that fail, 0-1, random scenario (default 0.3)",
		cli.FloatIn(0, 1, "want a number from 0 to 1", func(f float64) { cfg.failRate = f }))
	fs.Func("seed", "seed `N` of the server's faults, the clients and the jitter (default 1)", func(s string) error {
		n, err := cli.ParseSeed(s)
		if err != nil {
			return err
		}
		cfg.seed = n
		return nil
	})
	fs.Func("time-scale", "divide the policies' durations by `K` (default 10 synchronized, 20 others)",
		cli.FloatIn(1, 1000, "want a number from 1 to 1000", func(f float64) { cfg.scale = f }))
	fs.Func("strategies", "comma-separated `LIST` (default: the scenario's, see above)", func(s string) error {
		var list []string
		for _, name := range strings.Split(s, ",") {
			name = strings.TrimSpace(name)
			if _, err := demoPolicy(name, 1); err != nil {
				return err
			}
			if !slices.Contains(list, name) {
				list = append(list, name)
			}
		}
		cfg.strategies = list
		return nil
	})
	fs.BoolVar(&cfg.json, "json", false, "write the summary as JSON on stdout (progress stays on stderr)")

	help, err := cli.ParseFlags(fs, args)
	if help {
		fmt.Fprint(stdout, demoUsage())
		cli.PrintFlags(stdout, fs)
		return cli.ExitOK
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	if fs.NArg() > 0 {
		return cli.Fail(stderr, prog, cli.Usagef("unexpected argument %q", fs.Arg(0)))
	}
	if cfg.strategies == nil {
		cfg.strategies = demoDefaultStrategies[cfg.scenario]
	}
	if !durationSet {
		cfg.duration = 5 * time.Second
		if cfg.scenario == "random" {
			cfg.duration = 8 * time.Second
		}
	}
	sc := scenario{scale: 20}
	switch cfg.scenario {
	case "synchronized":
		sc = scenarioSync(cfg.duration)
	case "quota":
		sc = scenarioQuota(cfg.duration)
	}
	if cfg.scale == 0 {
		cfg.scale = sc.scale
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := proc.WatchSignals(cancel)
	defer sig.Stop()

	var sum Summary
	if cfg.scenario == "random" {
		if !cfg.json {
			randomHeader(stdout, cfg)
		}
		sum, err = demo(ctx, cfg, stderr)
	} else {
		if !cfg.json {
			herdHeader(stdout, cfg, sc)
		}
		sum, err = runHerd(ctx, cfg, sc, stderr)
	}
	if err != nil {
		return cli.Fail(stderr, prog, err)
	}
	if code := sig.ExitCode(); code != 0 {
		sum.Interrupted = true
		defer func() { fmt.Fprintf(stderr, "%s: interrupted; the summary covers the time run\n", prog) }()
	}
	switch {
	case cfg.json:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(sum)
	case cfg.scenario == "random":
		randomReport(sum).write(stdout, proc.TerminalRows(stdout))
	default:
		herdReport(sc, sum).write(stdout, proc.TerminalRows(stdout))
	}
	return sig.ExitCode()
}

// demoDefaultStrategies are the strategies of each scenario by default.
var demoDefaultStrategies = map[string][]string{
	"synchronized": {"no-retry", "none", "google", "full", "decorrelated", "google+budget"},
	"quota":        {"no-retry", "google+nohints", "google", "google+budget"},
	"random":       {"no-retry", "google", "full", "jitter-at-cap", "realtime"},
}

// demoPolicy returns the policy of a strategy, durations divided by scale.
// A strategy is a base (no-retry, a shape or a profile) and optional
// modifiers: +budget adds a retry budget ([retry.RatioBudget], its
// defaults, one per strategy), +nohints ignores server hints.
func demoPolicy(name string, scale float64) (retry.Policy, error) {
	base, mods, _ := strings.Cut(name, "+")
	var budget, nohints bool
	if mods != "" {
		for _, m := range strings.Split(mods, "+") {
			switch m {
			case "budget":
				budget = true
			case "nohints":
				nohints = true
			default:
				return retry.Policy{}, fmt.Errorf("unknown modifier %q in strategy %q (want +budget or +nohints)", m, name)
			}
		}
	}
	p, err := demoBasePolicy(base, scale)
	if err != nil {
		return p, err
	}
	if budget {
		p.Budget = retry.NewRatioBudget(demoBudgetConfig(scale))
	}
	if nohints {
		p.MaxRetryAfter = retry.Zero
	}
	return p, nil
}

// demoBudgetConfig is the retry budget of a +budget strategy: Finagle's
// defaults ([retry.RatioBudget]), its window divided by scale like every
// other duration of the policy (10 s becomes 1 s at the synchronized
// scenario's 1/10), so that it acts within the few seconds of the demo.
// Its ratio (20 % of the requests) and its floor (10 retries per second)
// are rates and are kept, as the servers' rates are: at the synchronized
// scenario's 50 requests per second the two agree, 10 retries per second.
// The window is never shorter than the 20 ms a RatioBudget accepts.
func demoBudgetConfig(scale float64) retry.RatioBudgetConfig {
	w := time.Duration(float64(retry.DefaultBudgetWindow) / scale)
	return retry.RatioBudgetConfig{Window: max(w, demoMinBudgetWindow)}
}

// demoMinBudgetWindow is the shortest window a RatioBudget accepts.
const demoMinBudgetWindow = 20 * time.Millisecond

// budgetText explains the budget of the +budget strategies among names, the
// way the header explains the waits; "" if none has one.
func budgetText(names []string, scale float64) string {
	var with []string
	for _, n := range names {
		if strings.Contains(n, "+budget") {
			with = append(with, n)
		}
	}
	if len(with) == 0 {
		return ""
	}
	c := demoBudgetConfig(scale)
	scaled := fmt.Sprintf("its %v scaled 1/%g", retry.DefaultBudgetWindow, scale)
	if float64(retry.DefaultBudgetWindow)/scale < float64(demoMinBudgetWindow) {
		scaled += ", raised to the shortest window a budget takes"
	}
	return fmt.Sprintf("%s: a retry budget (Finagle's defaults): in any %v (%s) retries may add "+
		"%.0f %% to the requests, or %.0f per second if that is more; a retry it refuses gives up at once.",
		strings.Join(with, ", "), c.Window, scaled, 100*retry.DefaultBudgetRatio, retry.DefaultBudgetMinPerSecond)
}

func demoBasePolicy(name string, scale float64) (retry.Policy, error) {
	var p retry.Policy
	switch {
	case name == "no-retry":
		p = retry.Policy{Attempts: 1}
	case slices.Contains(retry.ProfileNames(), name):
		var err error
		if p, err = retry.Profile(name); err != nil {
			return p, err
		}
	default:
		s, err := retry.ParseShape(name)
		if err != nil {
			return p, fmt.Errorf("unknown strategy %q (want no-retry, a shape: %s, or a profile: %s)",
				name, cli.ShapeList(), strings.Join(retry.ProfileNames(), ", "))
		}
		p = retry.Google()
		p.Shape = s
	}
	p = p.Resolved()
	sc := func(d time.Duration) time.Duration {
		if d <= 0 {
			return d
		}
		return max(time.Duration(float64(d)/scale), time.Microsecond)
	}
	p.InitialDelay = sc(p.InitialDelay)
	p.MaxDelay = sc(p.MaxDelay)
	p.Jitter = sc(p.Jitter)
	p.Deadline = sc(p.Deadline)
	p.AttemptTimeout = sc(p.AttemptTimeout)
	// MaxRetryAfter is left at its resolved value (the unscaled MaxDelay):
	// server hints are real seconds and are not scaled.
	for _, f := range []*time.Duration{&p.InitialDelay, &p.MaxDelay, &p.Jitter, &p.MaxRetryAfter} {
		if *f == 0 {
			*f = retry.Zero
		}
	}
	return p, nil
}

// countingTransport counts the attempts that httpretry sends.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// CloseIdleConnections closes the base transport's idle connections: a
// wrapper must not hide it, or http.Client.CloseIdleConnections (through
// httpretry) closes nothing.
func (c *countingTransport) CloseIdleConnections() {
	if ci, ok := c.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// demo runs every strategy side by side and returns the summary.
func demo(ctx context.Context, cfg demoConfig, progress io.Writer) (Summary, error) {
	lanes, servers, closeAll, err := startLanes(cfg, func(i int) (*flakyServer, string, http.RoundTripper, error) {
		srv, err := startFlakyServer(cfg.seed, uint64(i)+1, cfg.failRate)
		if err != nil {
			return nil, "", nil, err
		}
		return srv, srv.URL, &http.Transport{MaxIdleConnsPerHost: cfg.clients, DisableCompression: true}, nil
	})
	defer closeAll()
	if err != nil {
		return Summary{}, err
	}

	start := time.Now()
	stopSending := make(chan struct{})
	// In-flight requests may finish after the duration, but not forever.
	drain := 10 * time.Second
	hardCtx, hardCancel := context.WithCancel(ctx)
	defer hardCancel()

	var wg sync.WaitGroup
	for i, l := range lanes {
		for c := 0; c < cfg.clients; c++ {
			rng := rand.New(rand.NewPCG(cfg.seed, uint64(i*10000+c)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				l.clientLoop(hardCtx, rng, stopSending)
			}()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	line := func(sending bool) string { return progressLine(lanes, time.Since(start), cfg.duration, sending) }
	watch(ctx, progress, line, cfg.duration, drain, func() { close(stopSending) }, hardCancel, done)
	return summarize(cfg, lanes, servers, time.Since(start)), nil
}

// clientLoop sends requests one after another, with a short seeded pause
// between them, until stop is closed.
func (l *lane) clientLoop(ctx context.Context, rng *rand.Rand, stop <-chan struct{}) {
	for {
		pause := time.NewTimer(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		select {
		case <-stop:
			pause.Stop()
			return
		case <-pause.C:
		}
		t0 := time.Now()
		ok := l.call(ctx)
		l.record(ok, time.Since(t0), false)
	}
}

// progressLine is the live status: time, requests, success rate, attempts.
func progressLine(lanes []*lane, elapsed, total time.Duration, sending bool) string {
	var req, ok int
	var att int64
	for _, l := range lanes {
		r, s := l.snapshot()
		req += r
		ok += s
		att += l.counter.n.Load()
	}
	// At most about 72 columns: a longer line wraps on an 80-column
	// terminal, and \r then rewrites only its last part (the lines stack).
	phase := fmt.Sprintf("%4.1fs/%v", elapsed.Seconds(), total)
	if !sending {
		phase = fmt.Sprintf("%4.1fs, finishing", elapsed.Seconds())
	}
	rate := 0.0
	if req > 0 {
		rate = 100 * float64(ok) / float64(req)
	}
	return fmt.Sprintf("retry demo: %s: %d requests, %.1f%% ok, %d attempts", phase, req, rate, att)
}

// summarize computes the per-strategy statistics and the total; servers[i]
// is lanes[i]'s.
func summarize(cfg demoConfig, lanes []*lane, servers []*flakyServer, elapsed time.Duration) Summary {
	sum := Summary{
		Scenario: "random", Seed: cfg.seed, Clients: cfg.clients, DurationMS: cfg.duration.Milliseconds(), ElapsedMS: elapsed.Milliseconds(),
		FailureRate: cfg.failRate, TimeScale: cfg.scale, Delays: delaysText(cfg.scale),
		Budget: budgetText(cfg.strategies, cfg.scale),
	}
	total := strategyStats{Name: "total", ServerFaults: map[string]int{}}
	for i, l := range lanes {
		st := l.stats()
		st.ServerFaults = map[string]int{}
		for k, n := range servers[i].counts() {
			st.ServerFaults[faultNames[k]] = n
			st.Served += n
		}
		st.finish()
		total.add(st)
		sum.Strategies = append(sum.Strategies, st)
	}
	total.finish()
	sum.Total = total
	sum.Conclusion = conclusion(sum.Strategies)
	return sum
}

// finish computes the derived fields from the counts and latencies.
func (s *strategyStats) finish() {
	if s.Requests > 0 {
		s.RetriesPerRequest = round2(float64(s.Attempts-s.Requests) / float64(s.Requests))
		s.SuccessRate = round2(100 * float64(s.Successes) / float64(s.Requests))
	}
	slices.Sort(s.latencies)
	s.P50MS = cli.MS(percentile(s.latencies, 0.50))
	s.P99MS = cli.MS(percentile(s.latencies, 0.99))
}

// percentile returns the nearest-rank q-quantile of sorted, 0 if empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func delaysText(scale float64) string {
	g, _ := demoPolicy("google", scale)
	return fmt.Sprintf("policy durations scaled 1/%g (google: initial %v, jitter %v, cap %v); server hints not scaled (Retry-After 1s, RetryInfo 0.2s)",
		scale, g.InitialDelay, g.Jitter, g.MaxDelay)
}

// conclusion says in one sentence what the numbers show.
func conclusion(st []strategyStats) string {
	var base *strategyStats
	var retrying []strategyStats
	for i := range st {
		if st[i].Requests == 0 {
			continue
		}
		if st[i].Name == "no-retry" {
			base = &st[i]
		} else if st[i].Attempts > st[i].Requests || st[i].RetriesPerRequest > 0 {
			retrying = append(retrying, st[i])
		}
	}
	if len(retrying) == 0 {
		if base != nil {
			return fmt.Sprintf("Without retries %.1f%% of requests succeeded; add a retrying strategy to compare.", base.SuccessRate)
		}
		return "No strategy completed a request or made a retry; run the demo longer."
	}
	best := retrying[0]
	fastest := retrying[0]
	slowest := retrying[0]
	for _, s := range retrying[1:] {
		if s.SuccessRate > best.SuccessRate || (s.SuccessRate == best.SuccessRate && s.RetriesPerRequest < best.RetriesPerRequest) {
			best = s
		}
		if s.P99MS < fastest.P99MS {
			fastest = s
		}
		if s.P99MS > slowest.P99MS {
			slowest = s
		}
	}
	var b strings.Builder
	if base != nil {
		verb := "lifted"
		if best.SuccessRate <= base.SuccessRate {
			verb = "did not lift"
		}
		fmt.Fprintf(&b, "Retrying %s the success rate from %.1f%% (no retries) to %.1f%% (%s) at %.2f retries per request (the server served %.2f requests per call, %.2f without retries)",
			verb, base.SuccessRate, best.SuccessRate, best.Name, best.RetriesPerRequest, perCall(best), perCall(*base))
	} else {
		fmt.Fprintf(&b, "%s had the highest success rate (%.1f%%) at %.2f retries per request",
			best.Name, best.SuccessRate, best.RetriesPerRequest)
	}
	if len(retrying) > 1 && fastest.Name != slowest.Name {
		fmt.Fprintf(&b, "; among the retrying strategies %s had the lowest p99 latency (%s", fastest.Name, fmtMS(fastest.P99MS))
		if fastest.GiveUps > 0 {
			fmt.Fprintf(&b, ", but gave up on %d of its %d requests", fastest.GiveUps, fastest.Requests)
		}
		fmt.Fprintf(&b, ") and %s the highest (%s)", slowest.Name, fmtMS(slowest.P99MS))
	}
	b.WriteString(".")
	return b.String()
}

// perCall is the server's load per request of s.
func perCall(s strategyStats) float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(s.Served) / float64(s.Requests)
}

// fmtMS formats a latency given in milliseconds: 0.4ms, 35ms, 1.25s.
func fmtMS(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.1fms", v)
	case v < 1000:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.2fs", v/1000)
}

// randomHeader is printed before the run of the random scenario.
func randomHeader(w io.Writer, cfg demoConfig) {
	text := fmt.Sprintf("retry demo, scenario random: %d strategies x %d clients for %v against a flaky loopback server (seed %d, %.0f%% of requests fail). ",
		len(cfg.strategies), cfg.clients, cfg.duration, cfg.seed, 100*cfg.failRate)
	text += fmt.Sprintf("Faults: 503; 429 with Retry-After: 1; 429 with RetryInfo 0.2s; connection reset; slow (%v, then 200). ", slowDelay)
	text += seedText
	for _, l := range textwrap.Lines(text, 79, "") {
		fmt.Fprintln(w, l)
	}
	delays := "Delays: " + delaysText(cfg.scale)
	if b := budgetText(cfg.strategies, cfg.scale); b != "" {
		delays += ". " + b
	}
	for _, l := range textwrap.Lines(delays, 79, "") {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
}

// randomReport is the report of the random scenario.
func randomReport(sum Summary) demoReport {
	var table strings.Builder
	nameWidth := len("strategy")
	for _, s := range sum.Strategies {
		nameWidth = max(nameWidth, len(s.Name))
	}
	fmt.Fprintf(&table, "%-*s %8s %6s %8s %8s %6s %7s %7s %6s\n", nameWidth, "strategy", "requests", "ok", "give-ups", "attempts", "served", "p50", "p99", "hinted")
	row := func(s strategyStats) {
		fmt.Fprintf(&table, "%-*s %8d %5.1f%% %8d %8d %6d %7s %7s %6d\n",
			nameWidth, s.Name, s.Requests, s.SuccessRate, s.GiveUps, s.Attempts, s.Served, fmtMS(s.P50MS), fmtMS(s.P99MS), s.HintedWaits)
	}
	for _, s := range sum.Strategies {
		row(s)
	}
	row(sum.Total)
	legend := "attempts: requests + retries made by httpretry; give-ups: requests that ended without a 2xx; " +
		"served: requests the server saw (its load), more than attempts when net/http itself replays a GET " +
		"whose reused keep-alive connection was reset, before httpretry sees any error; " +
		"hinted: waits set by a Retry-After or RetryInfo."
	return demoReport{table: splitLines(table.String()), legend: textwrap.Lines(legend, 79, ""), conclusion: sum.Conclusion}
}

// demoReport is what the demo prints once it has run: the chart (of a
// herd scenario), the table, the legend of its columns and the conclusion.
type demoReport struct {
	chart, table, legend []string
	conclusion           string
}

// write prints the report for a terminal of rows lines (0: not a
// terminal, or a size unknown). All of it when it fits (the terminal's last
// line holds the shell's prompt), or when nothing says it does not: the
// full view. Else the part that makes the point, so that the last screen
// shows it rather than the end of a longer text: the chart, the table and
// as many of the conclusion's first sentences as fit, then a line that
// says what was left out and how to see it.
func (r demoReport) write(w io.Writer, rows int) {
	var head []string
	if len(r.chart) > 0 {
		head = append(append(head, r.chart...), "")
	}
	head = append(head, r.table...)
	full := append(append(append(append(slices.Clone(head), ""), r.legend...), ""), textwrap.Lines(r.conclusion, 79, "")...)
	if rows <= 0 || len(full) < rows {
		fmt.Fprintln(w, strings.Join(full, "\n"))
		return
	}
	room := rows - 1 - len(head) - 2 // the prompt, a blank line, the pointer
	text := ""
	for i, s := range sentences(r.conclusion) {
		next := strings.TrimSpace(text + " " + s)
		if i > 0 && len(textwrap.Lines(next, 79, "")) > room {
			break
		}
		text = next
	}
	compact := append(append(head, ""), textwrap.Lines(text, 79, "")...)
	more := "legend and whole conclusion"
	if text == strings.TrimSpace(r.conclusion) {
		more = "legend"
	}
	compact = append(compact, fmt.Sprintf("(%s: a terminal of %d lines, or retry demo | less)", more, len(full)+1))
	fmt.Fprintln(w, strings.Join(compact, "\n"))
}

// sentences splits a conclusion into its sentences (each ends with ". ";
// a number's point has no space after it).
func sentences(s string) []string {
	var out []string
	for {
		i := strings.Index(s, ". ")
		if i < 0 {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
			return out
		}
		out = append(out, strings.TrimSpace(s[:i+1]))
		s = s[i+2:]
	}
}

// splitLines splits text into its lines, without the last newline.
func splitLines(text string) []string { return strings.Split(strings.TrimSuffix(text, "\n"), "\n") }
