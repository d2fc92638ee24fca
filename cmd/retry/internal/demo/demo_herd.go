package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/textwrap"
)

// The synchronized and quota scenarios: open-loop arrivals (requests start
// on a seeded schedule, whatever happened to the earlier ones, as in a
// fleet) against one loopback server per strategy with a finite capacity.

// scenario describes a run of the synchronized or the quota scenario. All
// times are real (not scaled) and relative to the start of the run.
type scenario struct {
	name     string
	rate     float64       // new requests per second, per strategy
	duration time.Duration // how long new requests arrive
	scale    float64       // default --time-scale

	// The server: workers serving one request each for work, at most
	// queue more waiting; beyond that an attempt is shed with a 503.
	workers int
	work    time.Duration
	queue   int

	// synchronized: from stallFrom to stallTo the server holds every
	// request, then fails them all with a 503 at once.
	stallFrom, stallTo time.Duration

	// quota: at most quota accepted requests per quotaWindow; beyond, a
	// 429 with google.rpc.RetryInfo saying when the window resets.
	quota       int
	quotaWindow time.Duration

	// The chart: buckets of bucket from chartFrom, columns of them.
	bucket    time.Duration
	chartFrom time.Duration
	columns   int

	// transport, when set, connects each lane's client to its server in
	// process instead of over loopback TCP: with no socket involved, a
	// test can run the scenario on testing/synctest's virtual clock, where
	// a busy machine cannot blur the timing it checks.
	transport func(server http.Handler) http.RoundTripper
}

// scenarioSync is the default: 50 requests/s to a server of 100/s that
// stalls for a second.
func scenarioSync(duration time.Duration) scenario {
	return scenario{
		name: "synchronized", rate: 50, duration: duration, scale: 10,
		workers: 4, work: 40 * time.Millisecond, queue: 4,
		stallFrom: time.Second, stallTo: 2 * time.Second,
		bucket: 100 * time.Millisecond, chartFrom: 500 * time.Millisecond, columns: 60,
	}
}

// scenarioQuota: 60 requests/s against a quota of 50 per second.
func scenarioQuota(duration time.Duration) scenario {
	return scenario{
		name: "quota", rate: 60, duration: duration, scale: 20,
		workers: 8, work: 5 * time.Millisecond, queue: 64,
		quota: 50, quotaWindow: time.Second,
		bucket: 100 * time.Millisecond, chartFrom: 0, columns: 60,
	}
}

// capacity is what the server serves per second.
func (sc scenario) capacity() float64 { return float64(sc.workers) / sc.work.Seconds() }

// perBucket is the most the server can accept in one chart bucket: its
// capacity, or the quota spread over its window.
func (sc scenario) perBucket() float64 {
	if sc.quota > 0 {
		return float64(sc.quota) * sc.bucket.Seconds() / sc.quotaWindow.Seconds()
	}
	return sc.capacity() * sc.bucket.Seconds()
}

// capServer is the loopback server of one strategy.
type capServer struct {
	sc      scenario
	start   time.Time
	slots   chan struct{}
	waiting atomic.Int64
	release chan struct{} // closed when the stall ends
	relTime *time.Timer

	qmu      sync.Mutex
	qWindow  int64         // index of the current quota window
	qNow     time.Duration // the latest time a handler read
	qUsed    int
	arrivals []atomic.Int64 // per bucket, over the whole run
	served   atomic.Int64   // answered 200
	shed     atomic.Int64   // 503: queue full
	stalled  atomic.Int64   // 503: failed at the end of the stall
	over     atomic.Int64   // 429: over quota

	ln  net.Listener
	srv *http.Server
	URL string
}

// startCapServer listens on 127.0.0.1 (loopback only) and serves, or,
// with sc.transport, only serves in process; the run begins when begin is
// called.
func startCapServer(sc scenario, buckets int) (*capServer, error) {
	s := &capServer{sc: sc, start: time.Now(), slots: make(chan struct{}, sc.workers), release: make(chan struct{}),
		arrivals: make([]atomic.Int64, buckets)}
	if sc.transport != nil {
		s.URL = "http://in-process.invalid/v1/models/demo:generateContent"
		return s, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.ln, s.URL = ln, "http://"+ln.Addr().String()+"/v1/models/demo:generateContent"
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// begin sets the time the run starts from and the end of the stall. Call
// it before the first request.
func (s *capServer) begin(start time.Time) {
	s.start = start
	if s.sc.stallTo > s.sc.stallFrom {
		s.relTime = time.AfterFunc(time.Until(start.Add(s.sc.stallTo)), func() { close(s.release) })
	}
}

func (s *capServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := time.Since(s.start)
	if i := int(t / s.sc.bucket); i >= 0 && i < len(s.arrivals) {
		s.arrivals[i].Add(1)
	}
	if s.relTime != nil && t >= s.sc.stallFrom && t < s.sc.stallTo {
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		}
		s.stalled.Add(1)
		http.Error(w, "service unavailable (restarting)", http.StatusServiceUnavailable)
		return
	}
	if s.sc.quota > 0 {
		if wait, ok := s.takeQuota(t); !ok {
			s.over.Add(1)
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, quota429, fmt.Sprintf("%.3fs", wait.Seconds()))
			return
		}
	}
	if s.waiting.Add(1) > int64(s.sc.workers+s.sc.queue) {
		s.waiting.Add(-1)
		s.shed.Add(1)
		http.Error(w, "service unavailable (overloaded)", http.StatusServiceUnavailable)
		return
	}
	defer s.waiting.Add(-1)
	select {
	case s.slots <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	tm := time.NewTimer(s.sc.work)
	select {
	case <-tm.C:
	case <-r.Context().Done():
		tm.Stop()
		<-s.slots
		return
	}
	<-s.slots
	s.served.Add(1)
	w.Write([]byte(`{"candidates":[{"content":{"parts":[{"text":"ok"}]}}]}` + "\n"))
}

// takeQuota takes one request from the quota of the window of time t, or
// says how long until that window ends. Windows only move forward: a
// handler that read the clock just before a window ended but takes the lock
// after one that began the next window counts in the newer window (going
// back would reset the count and let a window take twice its quota).
func (s *capServer) takeQuota(t time.Duration) (time.Duration, bool) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	s.qNow = max(s.qNow, t) // a late handler's clock reading is stale
	if win := int64(s.qNow / s.sc.quotaWindow); win > s.qWindow {
		s.qWindow, s.qUsed = win, 0
	}
	if s.qUsed >= s.sc.quota {
		return time.Duration(s.qWindow+1)*s.sc.quotaWindow - s.qNow, false
	}
	s.qUsed++
	return 0, true
}

// quota429 is a Gemini API 429 with google.rpc.RetryInfo; %s is the delay.
const quota429 = `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED",` +
	`"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"%s"}]}}` + "\n"

func (s *capServer) Close() error {
	if s.relTime != nil && s.relTime.Stop() {
		close(s.release)
	}
	if s.srv == nil {
		return nil
	}
	return s.srv.Close()
}

// arrivalSchedule returns the start times of the requests, from seed (the
// same for every strategy): rate per second over duration, one request at
// a random moment within each slot of 1/rate. The load is steady, so that
// every blank or tall cell of the chart is the strategies' doing: Poisson
// arrivals (the first version) left whole chart cells empty by chance,
// seed 1 at 0.9 s, just before the stall.
func arrivalSchedule(seed uint64, rate float64, duration time.Duration) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, 0x5ced))
	slot := 1 / rate
	var at []time.Duration
	for i := 0; ; i++ {
		d := time.Duration((float64(i) + rng.Float64()) * slot * float64(time.Second))
		if d >= duration {
			return at
		}
		at = append(at, d)
	}
}

// herdDrain is how long requests may still run after the last arrival;
// then they are cancelled and count as give-ups.
const herdDrain = 3 * time.Second

// runHerd runs the synchronized or quota scenario for every strategy side
// by side and returns the summary.
func runHerd(ctx context.Context, cfg demoConfig, sc scenario, progress io.Writer) (Summary, error) {
	// The server counts arrivals over the run and the drain after it.
	drain := herdDrain
	buckets := int((sc.duration+drain)/sc.bucket) + 1
	lanes, servers, closeAll, err := startLanes(cfg, func(int) (*capServer, string, http.RoundTripper, error) {
		srv, err := startCapServer(sc, buckets)
		if err != nil {
			return nil, "", nil, err
		}
		var base http.RoundTripper = &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
		if sc.transport != nil {
			base = sc.transport(srv)
		}
		return srv, srv.URL, base, nil
	})
	defer closeAll()
	if err != nil {
		return Summary{}, err
	}
	schedule := arrivalSchedule(cfg.seed, sc.rate, sc.duration)
	start := time.Now().Add(20 * time.Millisecond)
	for _, s := range servers {
		s.begin(start)
	}

	hardCtx, hardCancel := context.WithCancel(ctx)
	defer hardCancel()
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Go(func() {
			var reqs sync.WaitGroup
			defer reqs.Wait()
			tm := time.NewTimer(0)
			defer tm.Stop()
			<-tm.C
			for _, at := range schedule {
				tm.Reset(time.Until(start.Add(at)))
				select {
				case <-hardCtx.Done():
					return
				case <-tm.C:
				}
				reqs.Go(func() {
					t0 := time.Now()
					ok := l.call(hardCtx)
					l.record(ok, time.Since(t0), hardCtx.Err() != nil)
				})
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	line := func(bool) string {
		var req, ok int
		var att int64
		for _, l := range lanes {
			r, s := l.snapshot()
			req, ok = req+r, ok+s
			att += l.counter.n.Load()
		}
		return herdProgressLine(max(time.Since(start), 0), sc.duration, req, ok, int(att))
	}
	// The arrivals end by themselves at sc.duration: nothing to stop.
	watch(ctx, progress, line, time.Until(start.Add(sc.duration)), drain, func() {}, hardCancel, done)
	return summarizeHerd(cfg, sc, lanes, servers, time.Since(start)), nil
}

// herdProgressLine is the live status: the time, then the requests done,
// those that succeeded and the attempts so far. After the last arrival
// (duration) the run goes on while requests still retry: the line then says
// that the run is finishing, instead of a time past the run's length ("3.0s of
// 2s"). It stays under 80 columns: a longer line wraps, and \r then rewrites
// only its last part.
func herdProgressLine(elapsed, duration time.Duration, requests, ok, attempts int) string {
	if elapsed > duration {
		return fmt.Sprintf("retry demo: %4.1fs, finishing: %d done, %d ok, %d attempts", elapsed.Seconds(), requests, ok, attempts)
	}
	return fmt.Sprintf("retry demo: %4.1fs of %v: %d requests done, %d ok, %d attempts", elapsed.Seconds(), duration, requests, ok, attempts)
}

// summarizeHerd computes the statistics of every lane and the conclusion;
// servers[i] is lanes[i]'s.
func summarizeHerd(cfg demoConfig, sc scenario, lanes []*lane, servers []*capServer, elapsed time.Duration) Summary {
	sum := Summary{
		Scenario: sc.name, Seed: cfg.seed, Clients: 0, DurationMS: sc.duration.Milliseconds(), ElapsedMS: elapsed.Milliseconds(),
		TimeScale: cfg.scale, Delays: delaysText(cfg.scale), Budget: budgetText(cfg.strategies, cfg.scale), RatePerSecond: sc.rate, Capacity: sc.capacity(),
		BucketMS: sc.bucket.Milliseconds(), ChartFromMS: sc.chartFrom.Milliseconds(),
	}
	if sc.quota > 0 {
		sum.Quota = fmt.Sprintf("%d per %v", sc.quota, sc.quotaWindow)
	}
	total := strategyStats{Name: "total"}
	for i, l := range lanes {
		srv := servers[i]
		st := l.stats()
		st.Cut, st.BudgetRefused = l.cutCount(), int(l.refused.Load())
		st.Shed, st.Stalled, st.OverQuota = int(srv.shed.Load()), int(srv.stalled.Load()), int(srv.over.Load())
		for i := range srv.arrivals {
			n := int(srv.arrivals[i].Load())
			st.Served += n
			st.Arrivals = append(st.Arrivals, n)
		}
		st.Peak, st.PeakAtMS = peakOf(st.Arrivals, sc)
		st.finish()
		total.add(st)
		sum.Strategies = append(sum.Strategies, st)
	}
	total.finish()
	sum.Total = total
	sum.Conclusion = herdConclusion(sc, sum.Strategies)
	switch {
	case total.Cut == 1:
		sum.Conclusion += " (1 request, still running when the demo stopped, counts as a give-up.)"
	case total.Cut > 1:
		sum.Conclusion += fmt.Sprintf(" (%d requests, still running when the demo stopped, count as give-ups.)", total.Cut)
	}
	return sum
}

// peakOf returns the busiest bucket after the start of the chart (the
// stall's own arrivals are held, not served, so the chart starts before
// it) and when it began, ms.
func peakOf(arrivals []int, sc scenario) (int, int64) {
	peak, at := 0, int64(0)
	for i, n := range arrivals {
		t := time.Duration(i) * sc.bucket
		if t < sc.chartFrom || (t >= sc.stallFrom && t < sc.stallTo) {
			continue
		}
		if n > peak {
			peak, at = n, t.Milliseconds()
		}
	}
	return peak, at
}

// sparkLevels draws a count: ▄ is the server's capacity per bucket, █ twice
// that or more, a space nothing at all.
var sparkLevels = []rune(" ▁▂▃▄▅▆▇█")

func spark(n int, perBucket float64) rune {
	if n <= 0 {
		return sparkLevels[0]
	}
	lvl := int(math.Ceil(float64(n) / perBucket * 4))
	return sparkLevels[min(max(lvl, 1), 8)]
}

// printChart draws the attempts reaching each strategy's server per bucket,
// one row per strategy, with a time axis and the stall marked; it fits 80
// columns for names of up to 16 characters.
func printChart(w io.Writer, sc scenario, st []strategyStats) {
	nameW := 8
	for _, s := range st {
		nameW = max(nameW, utf8.RuneCountInString(s.Name))
	}
	nameW = min(nameW, 16)
	cols := sc.columns
	first := int(sc.chartFrom / sc.bucket)
	per := sc.perBucket()
	what := "its capacity"
	if sc.quota > 0 {
		what = "the quota's rate"
	}
	fmt.Fprintf(w, "Attempts reaching each server per %v (▄ = %s, █ = twice that):\n", sc.bucket, what)
	// Axis: a tick every second.
	axis := []rune(strings.Repeat(" ", cols))
	marks := []rune(strings.Repeat(" ", cols))
	for c := range cols {
		t := time.Duration(first+c) * sc.bucket
		if t%time.Second == 0 {
			axis[c] = '|'
			label := fmt.Sprintf("%ds", int(t/time.Second))
			for k, r := range label {
				if c+1+k < cols {
					marks[c+1+k] = r
				}
			}
			marks[c] = '|'
		}
		if sc.stallTo > sc.stallFrom && t >= sc.stallFrom && t < sc.stallTo {
			axis[c] = '^'
		} else {
			axis[c] = ' '
		}
	}
	pad := strings.Repeat(" ", nameW+2)
	fmt.Fprintf(w, "%s%s\n", pad, string(marks))
	for _, s := range st {
		row := make([]rune, cols)
		for c := range cols {
			n := 0
			if i := first + c; i < len(s.Arrivals) {
				n = s.Arrivals[i]
			}
			row[c] = spark(n, per)
		}
		name := s.Name
		if utf8.RuneCountInString(name) > nameW {
			name = string([]rune(name)[:nameW])
		}
		fmt.Fprintf(w, "%-*s  %s\n", nameW, name, strings.TrimRight(string(row), " "))
	}
	if sc.stallTo > sc.stallFrom {
		fmt.Fprintf(w, "%s%s stall\n", pad, strings.TrimRight(string(axis), " "))
	}
}

// printHerdTable writes the header-less part of the report, in full: the
// chart, the table, the legend and the conclusion.
func printHerdTable(w io.Writer, sc scenario, sum Summary) { herdReport(sc, sum).write(w, 0) }

// herdReport is the report of a herd scenario (synchronized, quota).
func herdReport(sc scenario, sum Summary) demoReport {
	var chart, table strings.Builder
	printChart(&chart, sc, sum.Strategies)
	nameW := len("strategy")
	for _, s := range sum.Strategies {
		nameW = max(nameW, len(s.Name))
	}
	third := "shed"
	if sc.quota > 0 {
		third = "429s"
	}
	fmt.Fprintf(&table, "%-*s %8s %6s %8s %8s %6s %6s %7s %7s\n", nameW, "strategy", "requests", "ok", "give-ups", "attempts", third, "peak", "p50", "p99")
	row := func(s strategyStats) {
		rej := s.Shed
		if sc.quota > 0 {
			rej = s.OverQuota
		}
		peak := fmt.Sprintf("%.1fx", float64(s.Peak)/sc.perBucket())
		if s.Name == "total" {
			peak = ""
		}
		fmt.Fprintf(&table, "%-*s %8d %5.1f%% %8d %8d %6d %6s %7s %7s\n", nameW, s.Name, s.Requests, s.SuccessRate, s.GiveUps,
			s.Attempts, rej, peak, fmtMS(s.P50MS), fmtMS(s.P99MS))
	}
	for _, s := range sum.Strategies {
		row(s)
	}
	row(sum.Total)
	legend := "attempts: requests + retries; give-ups: requests that ended without a 2xx; "
	if sc.quota > 0 {
		legend += "429s: attempts refused by the quota; "
	} else {
		legend += "shed: attempts the server refused, queue full; "
	}
	if sc.stallTo > sc.stallFrom {
		legend += fmt.Sprintf("peak: the busiest %v at the server after the stall began, in multiples of what it can take.", sc.bucket)
	} else {
		legend += fmt.Sprintf("peak: the busiest %v at the server, in multiples of the quota's rate.", sc.bucket)
	}
	return demoReport{chart: splitLines(chart.String()), table: splitLines(table.String()), legend: textwrap.Lines(legend, 79, ""), conclusion: sum.Conclusion}
}

// seedText says what the seed makes repeat, and what it cannot.
const seedText = "The seed fixes every random draw; the servers run in real time on this machine, so the counts vary a little from run to run."

// herdHeader is printed before the run.
func herdHeader(w io.Writer, cfg demoConfig, sc scenario) {
	strategies := fmt.Sprintf("%d strategies", len(cfg.strategies))
	if len(cfg.strategies) == 1 {
		strategies = "1 strategy"
	}
	text := fmt.Sprintf("retry demo, %s: %s, %g requests/s each, %v, seed %d. %s",
		sc.name, strategies, sc.rate, sc.duration, cfg.seed, seedText)
	for _, l := range textwrap.Lines(text, 79, "") {
		fmt.Fprintln(w, l)
	}
	switch {
	case sc.quota > 0:
		text = fmt.Sprintf("Each strategy has its own loopback server with a quota of %d requests per %v; "+
			"above it, a 429 whose google.rpc.RetryInfo says when the quota resets. "+
			"The clients send %.0f %% of the quota, so some requests must wait or fail. ",
			sc.quota, sc.quotaWindow, 100*sc.rate*sc.quotaWindow.Seconds()/float64(sc.quota))
	default:
		text = fmt.Sprintf("Each strategy has its own loopback server: %d workers x %v (%.0f requests/s), "+
			"%d more may queue, the rest get a 503. From %v to %v it stalls (a restart): it holds every request, "+
			"then fails them all with a 503 at once, so every client retries at the same moment. ",
			sc.workers, sc.work, sc.capacity(), sc.queue, sc.stallFrom, sc.stallTo)
	}
	g, _ := demoPolicy("google", cfg.scale)
	text += fmt.Sprintf("Policy waits are scaled 1/%g (google: %v, %v, %v... plus up to %v of jitter); server hints are not.",
		cfg.scale, g.InitialDelay, 2*g.InitialDelay, 4*g.InitialDelay, g.Jitter)
	if b := budgetText(cfg.strategies, cfg.scale); b != "" {
		text += " " + b
	}
	for _, l := range textwrap.Lines(text, 79, "") {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
}

// herdConclusion says, from the results, what the scenario showed.
func herdConclusion(sc scenario, st []strategyStats) string {
	by := map[string]strategyStats{}
	for _, s := range st {
		by[s.Name] = s
	}
	per := sc.perBucket()
	x := func(s strategyStats) string { return fmt.Sprintf("%.1fx", float64(s.Peak)/per) }
	var parts []string
	if sc.quota > 0 {
		return quotaConclusion(sc, st)
	}
	// The lock-step strategy against the best spread one.
	lock, hasLock := by["none"]
	var spread *strategyStats
	for i := range st {
		s := &st[i]
		// A budget does not spread retries, it drops them: it is
		// compared with its own strategy below.
		if s.Name == "none" || s.Name == "no-retry" || s.Attempts <= s.Requests || strings.Contains(s.Name, "+budget") {
			continue
		}
		if spread == nil || s.Peak < spread.Peak || (s.Peak == spread.Peak && s.GiveUps < spread.GiveUps) {
			spread = s
		}
	}
	stats := func(s strategyStats) string {
		return fmt.Sprintf("peak %s, %d shed, %s", x(s), s.Shed, giveUps(s.GiveUps))
	}
	stalled := 0
	for _, s := range st {
		stalled += s.Stalled
	}
	if stalled == 0 {
		return fmt.Sprintf("No request arrived during the stall (%v to %v), so nothing failed together: "+
			"run the demo for longer than %v (--duration) to see the herd.", sc.stallFrom, sc.stallTo, sc.stallFrom)
	}
	if hasLock {
		parts = append(parts, fmt.Sprintf("Without jitter (none) the clients that failed together retried together, in waves: "+
			"the busiest %v brought %s the server's capacity, %d attempts were shed and %s.",
			sc.bucket, x(lock), lock.Shed, giveUpText(lock.GiveUps)))
	}
	if spread != nil {
		parts = append(parts, fmt.Sprintf("%s spread its retries best (%s).", spread.Name, stats(*spread)))
	}
	if g, ok := by["google"]; ok && spread != nil && spread.Name != "google" {
		parts = append(parts, fmt.Sprintf("google's additive jitter (%s) is at most one base delay: its waits double, its jitter does not.", stats(g)))
	}
	if f, ok := by["full"]; ok && spread != nil && spread.Name != "full" && f.Peak > spread.Peak {
		parts = append(parts, fmt.Sprintf("full (%s) draws its waits from 0: its first retries all came back within one base delay of the failure.", stats(f)))
	}
	for _, s := range st {
		if strings.Contains(s.Name, "+budget") {
			parts = append(parts, budgetConclusion(sc, s, by))
		}
	}
	if n, ok := by["no-retry"]; ok {
		parts = append(parts, fmt.Sprintf("Without retries %d of %d requests failed (%.1f%% ok).", n.GiveUps, n.Requests, n.SuccessRate))
	}
	if len(parts) == 0 {
		return "No strategy retried."
	}
	return strings.Join(parts, " ")
}

// budgetConclusion says, from the results, what the retry budget of s did
// in the herd, against the same strategy without it (s's name without
// "+budget") when it ran: the retries it refused, the load it kept off the
// recovering server (the share retries added, the peak, the shed attempts)
// and what that cost in give-ups. Every comparison is worded from the
// numbers, whichever way they went.
func budgetConclusion(sc scenario, s strategyStats, by map[string]strategyStats) string {
	added := func(s strategyStats) float64 { return 100 * per(s.Attempts-s.Requests, s.Requests) }
	x := func(s strategyStats) string { return fmt.Sprintf("%.1fx", float64(s.Peak)/sc.perBucket()) }
	if s.BudgetRefused == 0 {
		return fmt.Sprintf("The retry budget (%s) refused no retry: its retries added %.0f %% to the requests, "+
			"within what it allows, so it behaved as it would without a budget.", s.Name, added(s))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The retry budget (%s) refused %d %s: its retries added %.0f %% to the requests",
		s.Name, s.BudgetRefused, map[bool]string{true: "retry", false: "retries"}[s.BudgetRefused == 1], added(s))
	h, ok := by[strings.Replace(s.Name, "+budget", "", 1)]
	if !ok || h.Requests == 0 {
		fmt.Fprintf(&b, "; the busiest %v after the stall brought %s the server's capacity, %d attempts were shed and %s.",
			sc.bucket, x(s), s.Shed, giveUpText(s.GiveUps))
		return b.String()
	}
	fmt.Fprintf(&b, " (%s: %.0f %%)", h.Name, added(h))
	switch {
	case s.Peak < h.Peak:
		fmt.Fprintf(&b, ", so the recovering server's busiest %v held %s its capacity against %s", sc.bucket, x(s), x(h))
	case s.Peak == h.Peak:
		fmt.Fprintf(&b, ", yet the recovering server's busiest %v held as much as without it (%s its capacity)", sc.bucket, x(s))
	default:
		fmt.Fprintf(&b, ", yet the recovering server's busiest %v held more than without it (%s its capacity against %s)", sc.bucket, x(s), x(h))
	}
	fmt.Fprintf(&b, ", and %d attempts were shed against %d.", s.Shed, h.Shed)
	noRetry := ""
	if n, ok := by["no-retry"]; ok {
		noRetry = fmt.Sprintf(", %d without retries", n.GiveUps)
	}
	switch {
	case s.GiveUps > h.GiveUps:
		fmt.Fprintf(&b, " The price: %s gave up (%s: %d%s).", requestsText(s.GiveUps), h.Name, h.GiveUps, noRetry)
		fmt.Fprintf(&b, " A budget bounds what retries add to the load however long an outage lasts, "+
			"which spares a server that cannot absorb them; ")
		if h.GiveUps == 0 {
			fmt.Fprintf(&b, "this one recovered fast enough for %s to get every request through.", h.Name)
		} else {
			fmt.Fprintf(&b, "this one recovered fast enough for %s to get %.1f%% through against %.1f%%.", h.Name, h.SuccessRate, s.SuccessRate)
		}
	case s.GiveUps == h.GiveUps:
		fmt.Fprintf(&b, " It cost no give-up: %d, as many as %s%s.", s.GiveUps, h.Name, noRetry)
	default:
		fmt.Fprintf(&b, " And fewer requests gave up: %d against %d for %s%s.", s.GiveUps, h.GiveUps, h.Name, noRetry)
	}
	return b.String()
}

// requestsText is "1 request" or "N requests".
func requestsText(n int) string {
	if n == 1 {
		return "1 request"
	}
	return fmt.Sprintf("%d requests", n)
}

func giveUps(n int) string {
	if n == 1 {
		return "1 give-up"
	}
	return fmt.Sprintf("%d give-ups", n)
}

func giveUpText(n int) string {
	switch n {
	case 0:
		return "no request gave up"
	case 1:
		return "1 request gave up"
	}
	return fmt.Sprintf("%d requests gave up", n)
}

// quotaConclusion compares, under a quota, honouring the server's hints
// against ignoring them and a budget against none, from the results.
func quotaConclusion(sc scenario, st []strategyStats) string {
	by := map[string]strategyStats{}
	for _, s := range st {
		by[s.Name] = s
	}
	var parts []string
	for _, s := range st {
		base, ok := strings.CutSuffix(s.Name, "+nohints")
		h, found := by[base]
		if !ok || !found {
			continue
		}
		if h.OverQuota < s.OverQuota {
			parts = append(parts, fmt.Sprintf("Honouring RetryInfo (%s) took the attempts the quota refused from %d to %d and the give-ups from %d to %d, at a p99 of %s against %s.",
				h.Name, s.OverQuota, h.OverQuota, s.GiveUps, h.GiveUps, fmtMS(h.P99MS), fmtMS(s.P99MS)))
		} else {
			parts = append(parts, fmt.Sprintf("Honouring RetryInfo (%s) did not spare the quota: %d attempts refused against %d without hints.",
				h.Name, h.OverQuota, s.OverQuota))
		}
		if h.Peak > s.Peak {
			parts = append(parts, fmt.Sprintf("But hints bring the refused requests back together when the quota resets: %s's busiest %v held %.1fx the quota's rate.",
				h.Name, sc.bucket, float64(h.Peak)/sc.perBucket()))
		}
	}
	for _, s := range st {
		if !strings.Contains(s.Name, "+budget") {
			continue
		}
		if s.BudgetRefused == 0 {
			parts = append(parts, fmt.Sprintf("The retry budget (%s) refused no retry: it allows %.0f %% of the requests and at least %.0f retries/s, more than this run needed.",
				s.Name, 100*retry.DefaultBudgetRatio, retry.DefaultBudgetMinPerSecond))
			continue
		}
		text := fmt.Sprintf("The retry budget (%s) held the load to %.2f attempts per request", s.Name, per(s.Attempts, s.Requests))
		if h, ok := by[strings.Replace(s.Name, "+budget", "", 1)]; ok && h.Requests > 0 {
			text += fmt.Sprintf(" (%.2f without it)", per(h.Attempts, h.Requests))
		}
		text += fmt.Sprintf(" by refusing %d %s; %s", s.BudgetRefused, map[bool]string{true: "retry", false: "retries"}[s.BudgetRefused == 1], giveUpText(s.GiveUps))
		if n, ok := by["no-retry"]; ok {
			if s.GiveUps >= n.GiveUps {
				text += ", as many as without retries"
				if sc.rate*sc.quotaWindow.Seconds() > float64(sc.quota) {
					text += ": new requests alone fill the quota of every window, so a retry that gets through takes the place of a newer request"
				}
			} else {
				text += fmt.Sprintf(" (%d without retries)", n.GiveUps)
			}
		}
		parts = append(parts, text+".")
	}
	if n, ok := by["no-retry"]; ok {
		parts = append(parts, fmt.Sprintf("Without retries %.1f%% of requests succeeded.", n.SuccessRate))
	}
	parts = append(parts, fmt.Sprintf("No strategy gets more than the quota (%d per %v) through.", sc.quota, sc.quotaWindow))
	return strings.Join(parts, " ")
}

func per(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
