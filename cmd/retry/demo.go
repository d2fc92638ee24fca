package main

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
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
)

const demoUsage = `Usage: retry demo [flags]

Starts a flaky HTTP server on 127.0.0.1 (503s, 429s with Retry-After, 429s
with a google.rpc.RetryInfo body, connection resets, slow responses; drawn
from a seeded source) and drives it with many concurrent clients through
httpretry, one server and one group of clients per strategy, side by side.
A strategy is no-retry, a jitter shape (google, full, equal, decorrelated,
grpc, jitter-at-cap, none) or a profile (` + "%s" + `).

Delays are scaled down (policy durations divided by --time-scale) so the demo
finishes in seconds; server hints are not scaled.

At the end it prints a table per strategy: requests, successes, give-ups,
attempts (the load the server saw), retries per request, p50/p99 latency.

Exit status: 0, 2 on bad usage, 130/143 when interrupted (after the summary).

Flags:
`

// demoConfig is what the flags of retry demo say.
type demoConfig struct {
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
	ServerFaults      map[string]int `json:"server_responses"`

	latencies []time.Duration
}

// demoSummary is the --json output.
type demoSummary struct {
	Seed        uint64          `json:"seed"`
	Clients     int             `json:"clients_per_strategy"`
	DurationMS  int64           `json:"duration_ms"`
	ElapsedMS   int64           `json:"elapsed_ms"`
	FailureRate float64         `json:"failure_rate"`
	TimeScale   float64         `json:"time_scale"`
	Delays      string          `json:"delays"`
	Interrupted bool            `json:"interrupted,omitempty"`
	Strategies  []strategyStats `json:"strategies"`
	Total       strategyStats   `json:"total"`
	Conclusion  string          `json:"conclusion"`
}

// runDemo is "retry demo".
func runDemo(args []string, stdout, stderr io.Writer) int {
	const prog = "retry demo"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := demoConfig{clients: 16, duration: 8 * time.Second, failRate: 0.3, seed: 1, scale: 20,
		strategies: []string{"no-retry", "google", "full", "jitter-at-cap", "realtime"}}
	fs.Func("clients", "concurrent clients `N` per strategy (default 16)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 512 {
			return errors.New("want a whole number in 1-512")
		}
		cfg.clients = n
		return nil
	})
	fs.Func("duration", "how long the clients send requests (default 8s); `DURATION` like 5s", func(s string) error {
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		if d <= 0 || d > 10*time.Minute {
			return errors.New("want a duration above 0 and at most 10m")
		}
		cfg.duration = d
		return nil
	})
	fs.Func("failure-rate", "fraction `F` of requests that fail, 0-1 (default 0.3)", func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return errors.New("want a number from 0 to 1")
		}
		cfg.failRate = f
		return nil
	})
	fs.Func("seed", "seed `N` of the server's faults, the clients and the jitter (default 1)", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return errors.New("not a non-negative whole number")
		}
		cfg.seed = n
		return nil
	})
	fs.Func("time-scale", "divide the policies' durations by `K` (default 20: 1s becomes 50ms)", func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f >= 1 && f <= 1000) {
			return errors.New("want a number from 1 to 1000")
		}
		cfg.scale = f
		return nil
	})
	fs.Func("strategies", "comma-separated `LIST` (default no-retry,google,full,jitter-at-cap,realtime)", func(s string) error {
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

	help, err := parseFlags(fs, args)
	if help {
		fmt.Fprintf(stdout, demoUsage, strings.Join(retry.ProfileNames(), ", "))
		printFlags(stdout, fs)
		return exitOK
	}
	if err != nil {
		return fail(stderr, prog, err)
	}
	if fs.NArg() > 0 {
		return fail(stderr, prog, usagef("unexpected argument %q", fs.Arg(0)))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := watchSignals(cancel)
	defer sig.stop()

	sum, err := demo(ctx, cfg, stderr)
	if err != nil {
		return fail(stderr, prog, err)
	}
	if code := sig.exitCode(); code != 0 {
		sum.Interrupted = true
		defer func() { fmt.Fprintf(stderr, "%s: interrupted; the summary covers the time run\n", prog) }()
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(sum)
	} else {
		printDemoTable(stdout, cfg, sum)
	}
	return sig.exitCode()
}

// demoPolicy returns the policy of a strategy, durations divided by scale.
func demoPolicy(name string, scale float64) (retry.Policy, error) {
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
				name, shapeList(), strings.Join(retry.ProfileNames(), ", "))
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

// lane is one strategy running: its server, its clients and its results.
type lane struct {
	strategy
	srv     *flakyServer
	counter *countingTransport
	client  *http.Client
	hinted  atomic.Int64

	mu        sync.Mutex
	requests  int
	successes int
	latencies []time.Duration
}

// demo runs every strategy side by side and returns the summary.
func demo(ctx context.Context, cfg demoConfig, progress io.Writer) (demoSummary, error) {
	var lanes []*lane
	defer func() {
		for _, l := range lanes {
			l.client.CloseIdleConnections()
			l.srv.Close()
		}
	}()
	for i, name := range cfg.strategies {
		p, err := demoPolicy(name, cfg.scale)
		if err != nil {
			return demoSummary{}, usagef("--strategies: %v", err)
		}
		srv, err := startFlakyServer(cfg.seed, uint64(i)+1, cfg.failRate)
		if err != nil {
			return demoSummary{}, fmt.Errorf("starting the loopback server: %v", err)
		}
		l := &lane{strategy: strategy{name, p}, srv: srv}
		l.counter = &countingTransport{base: &http.Transport{
			MaxIdleConnsPerHost: cfg.clients,
			DisableCompression:  true,
		}}
		p.Rand = retry.NewRand(cfg.seed*1000 + uint64(i))
		p.Observer = func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry && e.Hint > 0 {
				l.hinted.Add(1)
			}
		}
		l.client = &http.Client{Transport: httpretry.NewTransport(l.counter, p)}
		lanes = append(lanes, l)
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

	tty := isTerminal(progress)
	every := time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	sendTimer := time.NewTimer(cfg.duration)
	defer sendTimer.Stop()
	var drainTimer <-chan time.Time
	sending := true
	lastLen := 0
	show := func() {
		line := progressLine(lanes, time.Since(start), cfg.duration, sending)
		if tty {
			pad := max(lastLen-len(line), 0)
			fmt.Fprintf(progress, "\r%s%s", line, strings.Repeat(" ", pad))
			lastLen = len(line)
		} else {
			fmt.Fprintln(progress, line)
		}
	}
loop:
	for {
		select {
		case <-tick.C:
			show()
		case <-sendTimer.C:
			sending = false
			close(stopSending)
			drainTimer = time.After(drain)
		case <-ctx.Done():
			if sending {
				sending = false
				close(stopSending)
			}
			hardCancel()
			<-done
			break loop
		case <-drainTimer:
			hardCancel() // cancelled requests count as give-ups
			<-done
			break loop
		case <-done:
			break loop
		}
	}
	if tty {
		fmt.Fprintf(progress, "\r%s\r", strings.Repeat(" ", lastLen))
	}
	return summarize(cfg, lanes, time.Since(start)), nil
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
		lat := time.Since(t0)
		l.mu.Lock()
		l.requests++
		if ok {
			l.successes++
		}
		l.latencies = append(l.latencies, lat)
		l.mu.Unlock()
	}
}

// call makes one request through httpretry and reports whether it ended in
// a 2xx response with its body read.
func (l *lane) call(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.srv.URL, nil)
	if err != nil {
		return false
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil && resp.StatusCode/100 == 2
}

func (l *lane) snapshot() (requests, successes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.requests, l.successes
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
	phase := fmt.Sprintf("%4.1fs/%v", elapsed.Seconds(), total)
	if !sending {
		phase = fmt.Sprintf("%4.1fs, finishing requests in flight", elapsed.Seconds())
	}
	rate := 0.0
	if req > 0 {
		rate = 100 * float64(ok) / float64(req)
	}
	return fmt.Sprintf("retry demo: %s: %d requests, %.1f%% ok, %d attempts", phase, req, rate, att)
}

// summarize computes the per-strategy statistics and the total.
func summarize(cfg demoConfig, lanes []*lane, elapsed time.Duration) demoSummary {
	sum := demoSummary{
		Seed: cfg.seed, Clients: cfg.clients, DurationMS: cfg.duration.Milliseconds(), ElapsedMS: elapsed.Milliseconds(),
		FailureRate: cfg.failRate, TimeScale: cfg.scale, Delays: delaysText(cfg.scale),
	}
	total := strategyStats{Name: "total", ServerFaults: map[string]int{}}
	for _, l := range lanes {
		l.mu.Lock()
		st := strategyStats{
			Name:         l.name,
			Requests:     l.requests,
			Successes:    l.successes,
			GiveUps:      l.requests - l.successes,
			Attempts:     int(l.counter.n.Load()),
			HintedWaits:  int(l.hinted.Load()),
			ServerFaults: map[string]int{},
			latencies:    slices.Clone(l.latencies),
		}
		l.mu.Unlock()
		for k, n := range l.srv.counts() {
			st.ServerFaults[faultNames[k]] = n
			total.ServerFaults[faultNames[k]] += n
			st.Served += n
		}
		st.finish()
		total.Requests += st.Requests
		total.Successes += st.Successes
		total.GiveUps += st.GiveUps
		total.Attempts += st.Attempts
		total.Served += st.Served
		total.HintedWaits += st.HintedWaits
		total.latencies = append(total.latencies, st.latencies...)
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
	s.P50MS = ms(percentile(s.latencies, 0.50))
	s.P99MS = ms(percentile(s.latencies, 0.99))
}

// percentile returns the nearest-rank q-quantile of sorted, 0 if empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Millisecond)*10) / 10 }

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
		fmt.Fprintf(&b, "; among the retrying strategies %s had the lowest p99 latency (%s) and %s the highest (%s)",
			fastest.Name, fmtMS(fastest.P99MS), slowest.Name, fmtMS(slowest.P99MS))
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

// printDemoTable writes the summary as a table.
func printDemoTable(w io.Writer, cfg demoConfig, sum demoSummary) {
	fmt.Fprintf(w, "retry demo: %d strategies x %d clients for %v against a flaky loopback server (seed %d, %.0f%% of requests fail)\n",
		len(sum.Strategies), cfg.clients, cfg.duration, cfg.seed, 100*cfg.failRate)
	fmt.Fprintf(w, "faults: 503; 429 with Retry-After: 1; 429 with RetryInfo 0.2s; connection reset; slow (%v, then 200)\n", slowDelay)
	fmt.Fprintf(w, "delays: %s\n\n", sum.Delays)
	nameWidth := len("strategy")
	for _, s := range sum.Strategies {
		nameWidth = max(nameWidth, len(s.Name))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t", nameWidth, "strategy")
	fmt.Fprintln(tw, "requests\tsuccesses\tgive-ups\tattempts\tserved\tretries/req\tsuccess\tp50\tp99\thinted waits\t")
	row := func(s strategyStats) {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.1f%%\t%s\t%s\t%d\t\n",
			nameWidth, s.Name, s.Requests, s.Successes, s.GiveUps, s.Attempts, s.Served, s.RetriesPerRequest, s.SuccessRate,
			fmtMS(s.P50MS), fmtMS(s.P99MS), s.HintedWaits)
	}
	for _, s := range sum.Strategies {
		row(s)
	}
	row(sum.Total)
	tw.Flush()
	fmt.Fprintf(w, "\nattempts = requests + retries made by httpretry; give-ups = requests that ended without a 2xx;\n")
	fmt.Fprintf(w, "served = requests the server saw (its load): more than attempts when net/http itself replays a GET\n")
	fmt.Fprintf(w, "whose reused keep-alive connection was reset, before httpretry sees any error.\n")
	fmt.Fprintf(w, "%s\n", sum.Conclusion)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
