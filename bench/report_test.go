package bench

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/redistest"
	"github.com/backoffkit/retry/internal/testkit"
	"github.com/backoffkit/retry/sim"
)

// TestReport prints issue 25's table in one run: each figure measured
// beside its anchor (a direct call, the bare net/http transport,
// go-redis/redis_rate, the simulator at a tenth of the size), the two run
// alternately (A B, then B A, round after round) so that the load of a
// shared machine weighs on both alike, and reported as the median of the
// paired ratios. It takes about two minutes (on 2 cores at a load average
// of 7), so it runs only when asked; CI's go test ./... only compiles it:
//
//	cd bench && GOWORK=off go test -run '^TestReport$' -report -v -timeout 15m
var report = flag.Bool("report", false, "TestReport: measure issue 25's figures beside their anchors and print the table (about 2 minutes)")

// Rounds of each part of the report: each round measures every figure of
// the part and its anchor once.
const (
	loopRounds  = 40 // Do on the success path beside a direct call
	httpRounds  = 20 // a GET through the transport beside bare net/http
	quotaRounds = 6  // the fleet quota beside redis_rate
	simRounds   = 5  // the simulator at 1M clients beside 100,000
)

// How long testing.Benchmark runs each benchmark in a round.
const (
	loopBenchtime  = "20ms"
	httpBenchtime  = "50ms"
	quotaBenchtime = "200ms"
)

// simChildEnv, when set to "CLIENTS,CAPACITY", makes TestReportSimChild run
// the simulator once: TestReport runs it in a process of its own to read
// its peak RSS.
const simChildEnv = "BENCH_REPORT_SIM"

// pair is one round's measure of a figure (ours) and of its anchor.
type pair struct{ ours, anchor float64 }

// row is one line of the table.
type row struct {
	figure       string
	ours, anchor string // the medians, with their unit
	ratio        string // median [min–max] of ours ÷ anchor
	allocs       string
	goal         string
	met          string
}

func TestReport(t *testing.T) {
	if !*report {
		t.Skip("the benchmark table runs only with -report: cd bench && GOWORK=off go test -run '^TestReport$' -report -v -timeout 15m")
	}
	// Without a redis-server the quota's rows say so, but under CI=true
	// that is a failure, found before anything runs.
	_, err := exec.LookPath("redis-server")
	haveRedis := err == nil
	if !haveRedis && os.Getenv("CI") == "true" {
		t.Fatalf("redis-server not found (CI=true: a missing server is a failure; apt-get install -y redis-server)")
	}
	begin := time.Now()
	load0 := loadAverage()
	var rows []row
	loop, clock := reportLoop(t)
	rows = append(rows, loop...)
	rows = append(rows, reportQuota(t, haveRedis)...)
	rows = append(rows, reportHTTP(t))
	rows = append(rows, reportSim(t)...)
	load1 := loadAverage()

	w := os.Stdout
	fmt.Fprintf(w, "\n%s, %s/%s, %s, %d CPUs (GOMAXPROCS %d), %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"),
		runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(w, "commit %s\n", commit())
	fmt.Fprintf(w, "load average (1, 5, 15 min): %s at the start, %s at the end; the run took %s\n",
		load0, load1, time.Since(begin).Round(time.Second))
	fmt.Fprintf(w, "clock read on this machine (median [min–max] of %d runs, each beside Do/success): time.Now() %s ns, time.Now() then time.Since %s ns\n",
		len(clock.now), medianRange(clock.now, "%.1f"), medianRange(clock.nowSince, "%.1f"))
	fmt.Fprintf(w, "ratio: ours ÷ anchor in each round (the two measured back to back, alternating which goes first), median [min–max] over the rounds; ours and anchor: medians over the rounds\n\n")
	fmt.Fprintln(w, "| figure | ours | anchor | ratio | allocs/op ours / anchor | goal | met? |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: | --- | --- |")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.figure, r.ours, r.anchor, r.ratio, r.allocs, r.goal, r.met)
	}
	fmt.Fprintln(w)
}

// clockReads are the clock's costs measured beside Do/success, ns.
type clockReads struct{ now, nowSince []float64 }

// reportLoop measures Do on the success path, Policy{} and each setting
// with a deadline, beside a direct call of the same function, and the
// clock read with Policy{}.
func reportLoop(t *testing.T) ([]row, clockReads) {
	progress("loop: %d rounds of %d settings and the clock", loopRounds, len(settings))
	bare := func(b *testing.B) { benchCall(b, bareRunner(), &flaky{}) }
	type measure struct {
		pairs          []pair
		allocs, anchor []float64
	}
	ms := make([]measure, len(settings))
	var clock clockReads
	var excess []float64 // Do/success − bare − time.Now, per round
	for round := range loopRounds {
		for i, s := range settings {
			ours := func(b *testing.B) { benchCall(b, s.runner(b), &flaky{}) }
			var a, o, now, nowSince testing.BenchmarkResult
			steps := []func(){
				func() { a = runBench(t, loopBenchtime, bare) },
				func() { o = runBench(t, loopBenchtime, ours) },
			}
			if s.name == "default" {
				steps = slices.Insert(steps, 1,
					func() { now = runBench(t, loopBenchtime, func(b *testing.B) { benchClock(b, false) }) },
					func() { nowSince = runBench(t, loopBenchtime, func(b *testing.B) { benchClock(b, true) }) })
			}
			alternate(round, steps)
			p := pair{nsPerOp(o), nsPerOp(a)}
			ms[i].pairs = append(ms[i].pairs, p)
			ms[i].allocs = append(ms[i].allocs, float64(o.AllocsPerOp()))
			ms[i].anchor = append(ms[i].anchor, float64(a.AllocsPerOp()))
			if s.name == "default" {
				clock.now = append(clock.now, nsPerOp(now))
				clock.nowSince = append(clock.nowSince, nsPerOp(nowSince))
				excess = append(excess, p.ours-p.anchor-nsPerOp(now))
			}
		}
	}
	var rows []row
	for i, s := range settings {
		m := ms[i]
		r := pairRow("Do/success", m.pairs, "%.1f ns")
		r.allocs = fmt.Sprintf("%s / %s", fmtMedian(m.allocs, "%.0f"), fmtMedian(m.anchor, "%.0f"))
		ours := medianOf(m.pairs, func(p pair) float64 { return p.ours })
		if s.name == "default" {
			r.figure = "`Do/success` (`Policy{}`) vs a direct call"
			r.goal = fmt.Sprintf("≤ bare + one clock read (`time.Now`, %.1f ns here) + 10 ns", median(clock.now))
			r.met = fmt.Sprintf("%s: ours − bare − clock read = %s ns [%s–%s]", yesNo(median(excess) <= 10),
				fmtf("%.1f", median(excess)), fmtf("%.1f", slices.Min(excess)), fmtf("%.1f", slices.Max(excess)))
		} else {
			r.figure = "`Do/success/" + s.name + "` vs a direct call"
			r.goal = "≤ 1 alloc and ≤ 200 ns"
			allocs := median(m.allocs)
			fastest := slices.MinFunc(m.pairs, func(a, b pair) int { return cmp.Compare(a.ours, b.ours) }).ours
			r.met = fmt.Sprintf("%s: allocs %s, time %s (fastest round %.1f ns)", yesNo(allocs <= 1 && ours <= 200),
				yesNo(allocs <= 1), yesNo(ours <= 200), fastest)
		}
		rows = append(rows, r)
	}
	return rows, clock
}

// reportHTTP measures a GET through our transport beside one through the
// bare net/http transport, each on a loopback server and a client of its
// own.
func reportHTTP(t *testing.T) row {
	progress("http: %d rounds", httpRounds)
	var bare, ours httpPeer
	for _, p := range httpPeers {
		switch p.name {
		case "bare":
			bare = p
		case "ours":
			ours = p
		}
	}
	var pairs []pair
	var allocsOurs, allocsBare []float64
	for round := range httpRounds {
		var a, o testing.BenchmarkResult
		alternate(round, []func(){
			func() { a = runBench(t, httpBenchtime, func(b *testing.B) { benchGet(b, bare) }) },
			func() { o = runBench(t, httpBenchtime, func(b *testing.B) { benchGet(b, ours) }) },
		})
		pairs = append(pairs, pair{nsPerOp(o) / 1e3, nsPerOp(a) / 1e3})
		allocsOurs = append(allocsOurs, float64(o.AllocsPerOp()))
		allocsBare = append(allocsBare, float64(a.AllocsPerOp()))
	}
	r := pairRow("", pairs, "%.1f µs")
	r.figure = "HTTP GET 200 through `httpretry.NewTransport` vs bare `net/http` (loopback)"
	ao, ab := median(allocsOurs), median(allocsBare)
	r.allocs = fmt.Sprintf("%s / %s", fmtf("%.0f", ao), fmtf("%.0f", ab))
	r.goal = "ratio ≤ 1.02, equal allocations"
	ratio := medianOf(pairs, pair.ratio)
	r.met = fmt.Sprintf("%s: ratio %s, allocations %s", yesNo(ratio <= 1.02 && ao == ab), yesNo(ratio <= 1.02), yesNo(ao == ab))
	return r
}

// reportQuota measures the fleet quota beside redis_rate on one
// redis-server, at a quota far above demand (1M/s) and at 1e9/s, each
// library on the same client and key from round to round. Without
// haveRedis its rows say they were skipped.
func reportQuota(t *testing.T, haveRedis bool) []row {
	figures := []string{
		"fleet `Quota`, 1M/s, 8 goroutines: Redis CPU per admitted request vs redis_rate",
		"fleet `Quota`, 1M/s: Redis commands per admitted request vs redis_rate",
		"fleet `Quota`, 1e9/s: Redis CPU per admitted request vs redis_rate",
		"fleet `Quota`, 1e9/s: Redis commands per admitted request vs redis_rate",
	}
	if !haveRedis {
		msg := "skipped: redis-server not found (Debian/Ubuntu: sudo apt-get install -y redis-server)"
		progress("quota: %s", msg)
		var rows []row
		for _, f := range figures {
			rows = append(rows, row{figure: f, ours: "–", anchor: "–", ratio: "–", allocs: "–", goal: "–", met: msg})
		}
		return rows
	}
	progress("quota: %d rounds at 1M/s and at 1e9/s", quotaRounds)
	srv := redistest.Start(t)
	stats := newClient(t, srv)
	var rows []row
	for _, rate := range []int64{1_000_000, 1_000_000_000} {
		type lib struct {
			admit admitter
			local func() int64
		}
		var libs [2]lib
		for i, p := range quotaPeers { // ours, redis_rate
			admit, local := p.make(t, srv, rate)
			if err := admitN(admit, 1000); err != nil { // connections, scripts, leases
				t.Fatal(err)
			}
			libs[i] = lib{admit, local}
		}
		var cpu, cmds []pair
		var allocs [2][]float64
		var localOurs []float64
		for round := range quotaRounds {
			var res [2]testing.BenchmarkResult
			alternate(round, []func(){
				func() {
					res[0] = runBench(t, quotaBenchtime, func(b *testing.B) { quotaRun(b, libs[0].admit, libs[0].local, stats) })
				},
				func() {
					res[1] = runBench(t, quotaBenchtime, func(b *testing.B) { quotaRun(b, libs[1].admit, libs[1].local, stats) })
				},
			})
			cpu = append(cpu, pair{res[0].Extra["redis-cpu-ns/op"] / 1e3, res[1].Extra["redis-cpu-ns/op"] / 1e3})
			cmds = append(cmds, pair{res[0].Extra["redis-cmds/op"], res[1].Extra["redis-cmds/op"]})
			localOurs = append(localOurs, res[0].Extra["local/op"])
			for i := range res {
				allocs[i] = append(allocs[i], float64(res[i].AllocsPerOp()))
			}
		}
		allocStr := fmt.Sprintf("%s / %s", fmtMedian(allocs[0], "%.0f"), fmtMedian(allocs[1], "%.0f"))
		cpuRow := pairRow("", cpu, "%.2f µs")
		cpuRow.allocs = allocStr
		cpuUs := medianOf(cpu, func(p pair) float64 { return p.ours })
		cmdRow := pairRow("", cmds, "%.2f")
		cmdRow.allocs = allocStr
		cmdsPer := medianOf(cmds, func(p pair) float64 { return p.ours })
		if l := slices.Max(localOurs); l > 0 {
			cpuRow.met = fmt.Sprintf(" (up to %.3f of ours' requests per request decided without Redis)", l)
		}
		if rate == 1_000_000 {
			cpuRow.figure, cmdRow.figure = figures[0], figures[1]
			cpuRow.goal = "≤ 1 µs of Redis CPU per admitted request"
			cmdRow.goal, cmdRow.met = "none set (item 3: fewer)", "–"
		} else {
			cpuRow.figure, cmdRow.figure = figures[2], figures[3]
			cpuRow.goal = "≤ 1 µs, as at 1M/s (the lease works at any rate)"
			cmdRow.goal = "< 1: a lease, not a round trip per request"
			cmdRow.met = yesNo(cmdsPer < 1)
		}
		cpuRow.met = yesNo(cpuUs <= 1) + cpuRow.met
		rows = append(rows, cpuRow, cmdRow)
	}
	return rows
}

// simRun is one run of the simulator in a process of its own.
type simRun struct {
	wall, cpu time.Duration
	maxRSS    int64 // bytes
}

// reportSim runs `retry sim overload --strategies none,genai` at 1M clients
// (capacity 100,000) beside the same at 100,000 clients (10,000): ten
// times the work, which should take at most 11 times the time. Each run is
// a process of its own (this test binary, running TestReportSimChild), so
// that its peak RSS is its own.
func reportSim(t *testing.T) []row {
	progress("sim: %d rounds of 100,000 and 1,000,000 clients", simRounds)
	var wall, cpu []pair
	var rssBig, rssSmall []float64
	for round := range simRounds {
		var big, small simRun
		alternate(round, []func(){
			func() { small = runSimChild(t, 100_000, 10_000) },
			func() { big = runSimChild(t, 1_000_000, 100_000) },
		})
		wall = append(wall, pair{big.wall.Seconds(), small.wall.Seconds()})
		cpu = append(cpu, pair{big.cpu.Seconds(), small.cpu.Seconds()})
		rssBig = append(rssBig, float64(big.maxRSS)/1e6)
		rssSmall = append(rssSmall, float64(small.maxRSS)/1e6)
	}
	rss := fmt.Sprintf("max RSS %s / %s MB", fmtMedian(rssBig, "%.0f"), fmtMedian(rssSmall, "%.0f"))
	w := pairRow("", wall, "%.2f s")
	w.figure = "`retry sim overload --strategies none,genai`, 1M clients / 100,000 capacity vs 100,000 / 10,000: wall time"
	w.allocs = rss
	w.goal = "≤ 15 s and ≤ 250 MB at 1M clients; 10× the work ≤ 11× the time"
	sec, ratio, mb := medianOf(wall, func(p pair) float64 { return p.ours }), medianOf(wall, pair.ratio), median(rssBig)
	w.met = fmt.Sprintf("%s: time %s, memory %s, ratio %s", yesNo(sec <= 15 && mb <= 250 && ratio <= 11),
		yesNo(sec <= 15), yesNo(mb <= 250), yesNo(ratio <= 11))
	c := pairRow("", cpu, "%.2f s")
	c.figure = "the same: CPU time (user + system)"
	c.allocs = rss
	c.goal = "10× the work ≤ 11× the time"
	c.met = yesNo(medianOf(cpu, pair.ratio) <= 11)
	return []row{w, c}
}

// runSimChild runs the simulator once in a child process and returns its
// wall time, CPU time and peak RSS.
func runSimChild(t *testing.T, clients int, capacity float64) simRun {
	cmd := exec.Command(os.Args[0], "-test.run=^TestReportSimChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%g", simChildEnv, clients, capacity))
	begin := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(begin)
	if err != nil || !strings.Contains(string(out), "sim-child: events=") {
		t.Fatalf("the simulator at %d clients: %v\n%s", clients, err, out)
	}
	cpu, maxRSS := testkit.ChildUsage(t, cmd.ProcessState)
	return simRun{wall: wall, cpu: cpu, maxRSS: maxRSS}
}

// TestReportSimChild is TestReport's simulator run, in a process of its
// own; it is skipped unless TestReport started it.
func TestReportSimChild(t *testing.T) {
	spec := os.Getenv(simChildEnv)
	if spec == "" {
		t.Skip("run by TestReport -report only")
	}
	cl, ca, _ := strings.Cut(spec, ",")
	clients, err1 := strconv.Atoi(cl)
	capacity, err2 := strconv.ParseFloat(ca, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s=%q: want CLIENTS,CAPACITY", simChildEnv, spec)
	}
	// What `retry sim overload --clients N --capacity C --strategies
	// none,genai` runs: the default experiment, seed 1, the strategies on
	// GOMAXPROCS workers.
	c := sim.DefaultOverload()
	c.Clients, c.Capacity, c.Seed = clients, capacity, 1
	for _, name := range []string{"none", "genai"} {
		s, err := sim.OverloadStrategyByName(name)
		if err != nil {
			t.Fatal(err)
		}
		c.Strategies = append(c.Strategies, s)
	}
	res, err := sim.RunOverload(c)
	if err != nil {
		t.Fatal(err)
	}
	var events int64
	for _, r := range res {
		events += r.Events
	}
	if len(res) != 2 || events == 0 {
		t.Fatalf("%d results, %d events: want 2 strategies' runs", len(res), events)
	}
	fmt.Printf("sim-child: events=%d\n", events)
}

// runBench runs f with testing.Benchmark for benchtime and fails the test
// if the benchmark failed (testing.Benchmark discards its message: run the
// benchmark with go test -bench to read it).
func runBench(t *testing.T, benchtime string, f func(*testing.B)) testing.BenchmarkResult {
	t.Helper()
	if err := flag.Set("test.benchtime", benchtime); err != nil {
		t.Fatal(err)
	}
	r := testing.Benchmark(f)
	if r.N == 0 {
		t.Fatalf("a benchmark failed: run cd bench && GOWORK=off go test -run x -bench 'Settings|Clock|Transport|FleetQuota' to see its message")
	}
	return r
}

// alternate runs steps in order in even rounds and in reverse in odd ones,
// so that neither side of a pair is always the first after a change.
func alternate(round int, steps []func()) {
	if round%2 == 1 {
		for i := len(steps) - 1; i >= 0; i-- {
			steps[i]()
		}
		return
	}
	for _, s := range steps {
		s()
	}
}

func nsPerOp(r testing.BenchmarkResult) float64 {
	return float64(r.T.Nanoseconds()) / float64(r.N)
}

func (p pair) ratio() float64 { return p.ours / p.anchor }

// pairRow fills a row's ours, anchor and ratio from the rounds' pairs.
func pairRow(figure string, pairs []pair, format string) row {
	ratios := make([]float64, len(pairs))
	for i, p := range pairs {
		ratios[i] = p.ratio()
	}
	return row{
		figure: figure,
		ours:   fmtf(format, medianOf(pairs, func(p pair) float64 { return p.ours })),
		anchor: fmtf(format, medianOf(pairs, func(p pair) float64 { return p.anchor })),
		ratio:  medianRange(ratios, ratioFormat(ratios)),
	}
}

// ratioFormat shows small ratios with enough digits to tell them apart.
func ratioFormat(rs []float64) string {
	if slices.Min(rs) < 0.1 {
		return "%.3f"
	}
	return "%.2f"
}

func medianOf(pairs []pair, f func(pair) float64) float64 {
	xs := make([]float64, len(pairs))
	for i, p := range pairs {
		xs[i] = f(p)
	}
	return median(xs)
}

// median is the middle value of xs, the mean of the two middle ones if
// their number is even, NaN if there are none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	n := len(s)
	return (s[n/2-1] + s[n/2]) / 2
}

func medianRange(xs []float64, format string) string {
	return fmt.Sprintf("%s [%s–%s]", fmtf(format, median(xs)), fmtf(format, slices.Min(xs)), fmtf(format, slices.Max(xs)))
}

func fmtMedian(xs []float64, format string) string { return fmtf(format, median(xs)) }

// fmtf formats x, with thousands separated by commas when it is at least
// 10,000.
func fmtf(format string, x float64) string {
	s := fmt.Sprintf(format, x)
	if math.Abs(x) < 10_000 {
		return s
	}
	num, unit, _ := strings.Cut(s, " ")
	intPart, frac, _ := strings.Cut(num, ".")
	var b strings.Builder
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	for i, d := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	out := b.String()
	if neg {
		out = "-" + out
	}
	if frac != "" {
		out += "." + frac
	}
	if unit != "" {
		out += " " + unit
	}
	return out
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// loadAverage is the load average as uptime prints it, or /proc/loadavg's
// first three fields.
func loadAverage() string {
	if out, err := exec.Command("uptime").Output(); err == nil {
		if _, la, ok := strings.Cut(string(out), "load average:"); ok {
			return strings.TrimSpace(la)
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			return strings.Join(f[:3], ", ")
		}
	}
	return "unknown"
}

// cpuModel is the first "model name" of /proc/cpuinfo, or GOARCH.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// progress tells the person waiting what the report is doing, on stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "report %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// commit is the repository's HEAD, marked when the worktree has changes,
// or "unknown" without git.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " with uncommitted changes"
	}
	return c
}
