package simcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/proc"
	"github.com/backoffkit/retry/sim"
)

// simExperiment is one experiment of "retry sim": its name, a one-line
// summary for the usage text and its entry point, which parses its own
// flags (use newSimFlagSet and simParse), checks --plot with checkPlotDir
// before running, reports progress with newSimProgress and ends its output
// with a legend and a conclusion.
type simExperiment struct {
	name, summary string
	run           func(env simEnv, args []string, stdout, stderr io.Writer) int
}

// simEnv is what an experiment's entry point takes besides its arguments:
// when and how often to show progress (tests shorten it).
type simEnv struct {
	progressAfter, progressEvery time.Duration
}

// defaultSimEnv shows progress for runs over 2 s, once a second.
var defaultSimEnv = simEnv{progressAfter: 2 * time.Second, progressEvery: time.Second}

// simExperiments lists the experiments in the order of the usage text.
// Another file adds one with registerSimExperiment from its init.
var simExperiments = []simExperiment{
	{"contention", `N clients race to update one record (AWS "Exponential Backoff and Jitter")`, simContention},
	{"overload", "a retry storm: clients with open-loop arrivals, a server outage, recovery", simOverload},
}

// registerSimExperiment adds an experiment to "retry sim".
func registerSimExperiment(e simExperiment) { simExperiments = append(simExperiments, e) }

// simUsage is the manual of "retry sim", within 80 columns.
func simUsage() string {
	var b strings.Builder
	b.WriteString("Usage: retry sim EXPERIMENT [flags]\n\nExperiments:\n")
	width := 0
	for _, e := range simExperiments {
		width = max(width, len(e.name))
	}
	indent := strings.Repeat(" ", 2+width+2)
	for _, e := range simExperiments {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, e.name, cli.Wrap(e.summary, 80-len(indent), indent))
	}
	b.WriteString("\n" + cli.Wrap("Each runs on a virtual clock from a seed: the same flags always print the same numbers. "+
		"Run \"retry sim EXPERIMENT --help\" for an experiment's flags.", 80, "") + "\n")
	return b.String()
}

// printSimFlags prints an experiment's flags as every manual of retry
// writes them (--runs N, not the flag package's -runs), each description
// wrapped within 80 columns, with its default when it has one.
func printSimFlags(w io.Writer, fs *flag.FlagSet) {
	const indent = "      "
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if _, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && f.Value.(interface{ IsBoolFlag() bool }).IsBoolFlag() {
			arg = ""
		}
		switch arg { // the flag package's names for an unnamed argument
		case "value", "string":
			arg = "VALUE"
		case "int", "uint":
			arg = "N"
		case "float":
			arg = "NUMBER"
		case "duration":
			arg = "DURATION"
		}
		head := "  " + cli.DashName(f.Name)
		if arg != "" {
			head += " " + arg
		}
		if def := f.DefValue; def != "" && def != "false" && def != "0" && !strings.Contains(usage, "(default") {
			// A comma-separated list is shown with spaces, so that it can wrap.
			usage += " (default " + strings.ReplaceAll(def, ",", ", ") + ")"
		}
		fmt.Fprintf(w, "%s\n%s%s\n", head, indent, cli.Wrap(usage, 80-len(indent), indent))
	})
}

// Run is "retry sim": it parses flags, runs the experiment of package sim
// and prints a table, JSON lines (--json) and SVG plots (--plot DIR).
func Run(args []string, stdout, stderr io.Writer) int {
	return runSimEnv(defaultSimEnv, args, stdout, stderr)
}

func runSimEnv(env simEnv, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, simUsage())
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, simUsage())
		return cli.ExitOK
	}
	var names []string
	for _, e := range simExperiments {
		if e.name == args[0] {
			return e.run(env, args[1:], stdout, stderr)
		}
		names = append(names, e.name)
	}
	fmt.Fprintf(stderr, "retry sim: unknown experiment %q: want %s (see 'retry sim --help')\n", args[0], strings.Join(names, " or "))
	return cli.ExitUsage
}

// checkPlotDir makes sure that plots can be written into dir before a long
// run: it creates dir if needed and a temporary file in it. The error names
// the flag.
func checkPlotDir(dir string) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("--plot %s: exists and is not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--plot %s: %v", dir, errors.Unwrap(err))
	}
	f, err := os.CreateTemp(dir, ".retry-sim-*")
	if err != nil {
		return fmt.Errorf("--plot %s: cannot write there: %v", dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// simProgress reports a long run's progress on stderr: nothing during the
// first after (runs that end sooner stay quiet), then a line every every
// (rewritten in place on a terminal) and a last one when it stops.
type simProgress struct {
	w            io.Writer
	prog, unit   string
	after, every time.Duration
	tty          bool

	mu          sync.Mutex
	start       time.Time
	done, total int
	shown       bool
	lastLen     int
	stopc, exit chan struct{}
}

// newSimProgress starts the reporter; call update from the run's Progress
// callback and stop when the run is over.
func newSimProgress(env simEnv, w io.Writer, prog, unit string, total int) *simProgress {
	after, every := env.progressAfter, env.progressEvery
	p := &simProgress{w: w, prog: prog, unit: unit, after: after, every: every, tty: proc.IsTerminal(w),
		total: total, start: time.Now(), stopc: make(chan struct{}), exit: make(chan struct{})}
	go func() {
		defer close(p.exit)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				return
			case <-t.C:
				p.show(false)
			}
		}
	}()
	return p
}

func (p *simProgress) update(done, total int) {
	p.mu.Lock()
	p.done, p.total = done, total
	p.mu.Unlock()
}

func (p *simProgress) show(final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start)
	if el < p.after && !(final && p.shown) {
		return
	}
	line := fmt.Sprintf("%s: %d/%d %s simulated, %.1fs", p.prog, p.done, p.total, p.unit, el.Seconds())
	switch {
	case p.tty && final:
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.lastLen))
	case p.tty:
		fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(p.lastLen-len(line), 0)))
		p.lastLen = len(line)
	default:
		fmt.Fprintln(p.w, line)
	}
	p.shown = true
}

// stop ends the reporter and waits for its goroutine.
func (p *simProgress) stop() {
	close(p.stopc)
	<-p.exit
	p.show(true)
}

// simFlags are the flags both experiments share.
type simFlags struct {
	clients []int
	seed    uint64
	json    bool
	plot    string
}

func newSimFlagSet(name string, sf *simFlags, clientsDefault string) *flag.FlagSet {
	fs := flag.NewFlagSet("retry sim "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sf.clients, _ = parseClients(clientsDefault)
	fs.Func("clients", "number of clients `N`, or a range FROM:TO:STEP (default "+clientsDefault+")", func(s string) error {
		c, err := parseClients(s)
		sf.clients = c
		return err
	})
	fs.Uint64Var(&sf.seed, "seed", 1, "`SEED` of every random stream")
	fs.BoolVar(&sf.json, "json", false, "print one JSON object per (strategy, clients) row instead of a table")
	fs.StringVar(&sf.plot, "plot", "", "write SVG plots into `DIR` (created if needed; checked before the run)")
	return fs
}

// parseClients parses "100" or "10:190:10".
func parseClients(s string) ([]int, error) {
	parts := strings.Split(s, ":")
	var n [3]int
	if len(parts) != 1 && len(parts) != 3 {
		return nil, errors.New("want N or FROM:TO:STEP, e.g. 100 or 10:190:10")
	}
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number (want N or FROM:TO:STEP)", p)
		}
		if v < 1 {
			return nil, fmt.Errorf("%d: want at least 1", v)
		}
		n[i] = v
	}
	if len(parts) == 1 {
		return []int{n[0]}, nil
	}
	if n[1] < n[0] {
		return nil, fmt.Errorf("the end %d is below the start %d", n[1], n[0])
	}
	if (n[1]-n[0])/n[2] >= 10000 {
		return nil, errors.New("more than 10,000 sizes")
	}
	return sim.Sizes(n[0], n[1], n[2]), nil
}

// simParse parses args; it returns (done, code): done when help was printed
// or the flags were bad.
func simParse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (bool, int) {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "Usage: %s [flags]\n\nFlags:\n", fs.Name())
		printSimFlags(stdout, fs)
		return true, cli.ExitOK
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		return true, simUsageError(stderr, fs.Name(), cli.FlagMessage(err.Error(), fs, args))
	}
	return false, 0
}

// simFieldFlags maps the names package sim's errors give the fields of an
// experiment's configuration to the flags that set them.
var simFieldFlags = map[string]string{
	"runs": "--runs", "clients": "--clients", "hosts": "--hosts", "capacity": "--capacity",
	"load": "--load", "queue": "--queue", "duration": "--duration", "processes": "--processes",
	"jobs": "--jobs", "quota": "--quota", "window": "--quota", "service": "--service",
	"horizon": "--horizon", "timeout": "--timeout",
}

// simFieldRE matches package sim's "field = value: want ..." errors.
var simFieldRE = regexp.MustCompile(`^([a-z]+) = ([^:]*): (.*)$`)

// simErrorRewrites reword package sim's other errors about a configuration
// so that they name the flags as typed.
var simErrorRewrites = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`^backoff base (\S+) and cap (\S+): want 0 < base <= cap$`), "--base $1 and --cap $2: want 0 < --base <= --cap"},
	{regexp.MustCompile(`^jitter (\S+) must not be negative$`), "invalid value $1 for flag --jitter: must not be negative"},
	{regexp.MustCompile(`^outage (\S+) from (\S+): must not be negative$`), "--outage $1 and --outage-start $2: must not be negative"},
	{regexp.MustCompile(`^the outage \((\S+) from (\S+)\) must end within the duration \((\S+)\)$`), "the outage (--outage $1 from --outage-start $2) must end within --duration ($3)"},
	{regexp.MustCompile(`^a dropping outage needs a client timeout above 0$`), "--drop needs a --timeout above 0"},
	{regexp.MustCompile(`^(\d+) processes × (\d+) clients: (.*)$`), "--processes $1 × --clients $2: $3"},
	{regexp.MustCompile(`^network delay Normal\((\S+), (\S+)\): (.*)$`), "--net-mean $1 and --net-sd $2: $3"},
	{regexp.MustCompile(`^(\S+) requests is too many to simulate$`), "$1 requests (--capacity × --load × --duration) is too many to simulate"},
}

// simFlagError words an error of package sim about a configuration for a
// user of "retry sim": it names the flag as typed (--capacity), never the
// field of a configuration struct (capacity = 0).
func simFlagError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "sim: ")
	if m := simFieldRE.FindStringSubmatch(msg); m != nil {
		if f, ok := simFieldFlags[m[1]]; ok {
			want := m[3]
			switch m[1] {
			case "hosts":
				want = strings.Replace(want, "to clients", "to --clients", 1)
			case "load":
				want = strings.Replace(want, "of capacity", "of --capacity", 1)
			}
			return fmt.Sprintf("invalid value %s for flag %s: %s", m[2], f, want)
		}
	}
	for _, r := range simErrorRewrites {
		if r.re.MatchString(msg) {
			return r.re.ReplaceAllString(msg, r.with)
		}
	}
	return msg
}

func simUsageError(stderr io.Writer, prog, msg string) int {
	fmt.Fprintf(stderr, "%s: %s (see '%s --help')\n", prog, cli.OneLine(msg), prog)
	return cli.ExitUsage
}

func simFail(stderr io.Writer, prog string, err error) int {
	fmt.Fprintf(stderr, "%s: %s\n", prog, cli.OneLine(err.Error()))
	return cli.ExitGaveUp
}

// wrote returns a function that says on stderr which files a plot writer
// wrote (before its error, if any) and returns the error.
func wrote(stderr io.Writer, prog string) func(paths []string, err error) error {
	return func(paths []string, err error) error {
		for _, p := range paths {
			fmt.Fprintf(stderr, "%s: wrote %s\n", prog, p)
		}
		return err
	}
}

// reportWidth is the width the reports' prose is folded to: a terminal's
// 80 columns. The tables are left as they are (see foldReport).
const reportWidth = 80

// foldReport writes a report of package sim (a table, a blank line, then a
// legend, notes and a conclusion, each on one line or continued on lines
// that begin with spaces) to w with its prose folded to reportWidth: each
// legend entry, note or conclusion becomes a paragraph whose later lines
// are indented under its text. The table before the first blank line is
// written unchanged: a row is a record that scripts read with awk, and the
// widest (overload's 11 columns, fleet's 12) cannot fit 80 columns without
// splitting it; --json is the machine-readable form.
func foldReport(w io.Writer, write func(io.Writer) error) error {
	var buf strings.Builder
	err := write(&buf)
	text := buf.String()
	table, prose, found := strings.Cut(text, "\n\n")
	if !found {
		_, werr := io.WriteString(w, text)
		return errors.Join(err, werr)
	}
	var out strings.Builder
	out.WriteString(table + "\n\n")
	var paras []string
	for _, l := range strings.Split(strings.TrimSuffix(prose, "\n"), "\n") {
		if len(paras) > 0 && l != "" && (l[0] == ' ' || l[0] == '\t') {
			paras[len(paras)-1] += " " + strings.TrimSpace(l)
			continue
		}
		paras = append(paras, l)
	}
	for _, p := range paras {
		out.WriteString(foldLine(p, reportWidth) + "\n")
	}
	_, werr := io.WriteString(w, out.String())
	return errors.Join(err, werr)
}

// proseHeadRE matches the head of a report's line, under which its
// continuation lines are indented: a legend's column name and the spaces
// after it ("calls_mean    "), or a label ("Conclusion: ", "note: ").
var proseHeadRE = regexp.MustCompile(`^(\S+ {2,}|[A-Za-z]+: )`)

// foldLine folds one line of prose to width columns, its later lines
// indented under the text after its head (see proseHeadRE).
func foldLine(l string, width int) string {
	if utf8.RuneCountInString(l) <= width {
		return l
	}
	head := proseHeadRE.FindString(l)
	if len(head) > width/2 {
		head = ""
	}
	indent := strings.Repeat(" ", len(head))
	return head + cli.Wrap(strings.TrimPrefix(l, head), width-len(head), indent)
}

func simContention(env simEnv, args []string, stdout, stderr io.Writer) int {
	var sf simFlags
	fs := newSimFlagSet("contention", &sf, "10:190:10")
	runs := fs.Int("runs", sim.DefaultContentionRuns, "runs averaged per point `N`")
	strategies := fs.String("strategies", strings.Join(sim.ContentionNames, ","), "comma-separated `LIST` of strategies")
	base := fs.Duration("base", sim.DefaultBase, "backoff base")
	maxDelay := fs.Duration("cap", sim.DefaultCap, "backoff cap")
	jitter := fs.Duration("jitter", sim.DefaultJitter, "additive jitter of google and jitter-at-cap")
	netMean := fs.Duration("net-mean", sim.DefaultNetMean, "mean network delay of one message")
	netSD := fs.Duration("net-sd", sim.DefaultNetSD, "standard deviation of the network delay")
	if done, code := simParse(fs, args, stdout, stderr); done {
		return code
	}
	prog := fs.Name()
	if *runs < 1 {
		return simUsageError(stderr, prog, fmt.Sprintf("invalid value %d for flag --runs: want at least 1", *runs))
	}
	if *netMean <= 0 || *netSD < 0 {
		return simUsageError(stderr, prog, fmt.Sprintf("network delay --net-mean %v --net-sd %v: want a mean above 0 and a deviation of at least 0", *netMean, *netSD))
	}
	cfg := sim.ContentionConfig{Clients: sf.clients, Runs: *runs, Seed: sf.seed, NetMean: *netMean, NetSD: *netSD}
	if *netSD == 0 {
		cfg.NetSD = 1 // ContentionConfig reads 0 as the default; 1 ns is no variance to speak of
	}
	for _, n := range cli.Names(*strategies) {
		s, err := sim.ContentionStrategy(n, *base, *maxDelay, *jitter)
		if err != nil {
			return simUsageError(stderr, prog, simFlagError(err))
		}
		cfg.Strategies = append(cfg.Strategies, s)
	}
	if len(cfg.Strategies) == 0 {
		return simUsageError(stderr, prog, "--strategies is empty")
	}
	if err := checkPlotDir(sf.plot); err != nil {
		return simUsageError(stderr, prog, err.Error())
	}
	pr := newSimProgress(env, stderr, prog, "points", len(cfg.Strategies)*len(cfg.Clients))
	cfg.Progress = pr.update
	res, err := sim.RunContention(cfg)
	pr.stop()
	if err != nil {
		return simUsageError(stderr, prog, simFlagError(err))
	}
	if sf.json {
		err = sim.WriteJSON(stdout, res)
	} else {
		err = foldReport(stdout, func(w io.Writer) error { return sim.WriteContentionReport(w, res) })
	}
	if err != nil {
		return simFail(stderr, prog, err)
	}
	if sf.plot != "" {
		if err := wrote(stderr, prog)(sim.WriteContentionPlots(sf.plot, cfg, res)); err != nil {
			return simFail(stderr, prog, err)
		}
	}
	return cli.ExitOK
}

func simOverload(env simEnv, args []string, stdout, stderr io.Writer) int {
	def := sim.DefaultOverload()
	var sf simFlags
	fs := newSimFlagSet("overload", &sf, strconv.Itoa(def.Clients))
	hosts := fs.Int("hosts", def.Hosts, "client processes `N`; each has its own budget and throttle, shared by its clients")
	capacity := fs.Float64("capacity", def.Capacity, "requests per second the server serves")
	load := fs.Float64("load", def.Load, "offered load of new requests, as a fraction of --capacity")
	queue := fs.Int("queue", def.Queue, "most requests waiting at the server; beyond, it sheds with a 503")
	duration := fs.Duration("duration", def.Duration, "how long new requests arrive")
	outageStart := fs.Duration("outage-start", def.OutageStart, "when the outage begins")
	outage := fs.Duration("outage", def.Outage, "how long the outage lasts (0: none)")
	drop := fs.Bool("drop", false, "the server drops attempts during the outage instead of answering 503")
	timeout := fs.Duration("timeout", def.Timeout, "client attempt timeout with --drop, for policies without AttemptTimeout")
	strategies := fs.String("strategies", strings.Join(sim.DefaultOverloadNames, ","), "comma-separated `LIST` of strategies, or all: "+strings.Join(sim.OverloadNames(), ", "))
	if done, code := simParse(fs, args, stdout, stderr); done {
		return code
	}
	prog := fs.Name()
	cfg := def
	cfg.Hosts, cfg.Capacity, cfg.Load, cfg.Queue = *hosts, *capacity, *load, *queue
	cfg.Duration, cfg.OutageStart, cfg.Outage, cfg.Drop, cfg.Timeout = *duration, *outageStart, *outage, *drop, *timeout
	cfg.Seed = sf.seed
	list := cli.Names(*strategies)
	if len(list) == 1 && list[0] == "all" {
		list = sim.OverloadNames()
	}
	for _, n := range list {
		s, err := sim.OverloadStrategyByName(n)
		if err != nil {
			return simUsageError(stderr, prog, simFlagError(err))
		}
		cfg.Strategies = append(cfg.Strategies, s)
	}
	if len(cfg.Strategies) == 0 {
		return simUsageError(stderr, prog, "--strategies is empty")
	}
	for _, n := range sf.clients {
		c := cfg
		c.Clients = n
		if err := c.Validate(); err != nil {
			return simUsageError(stderr, prog, simFlagError(err))
		}
	}
	if err := checkPlotDir(sf.plot); err != nil {
		return simUsageError(stderr, prog, err.Error())
	}
	if !sf.json {
		fmt.Fprintln(stdout, cli.Wrap(fmt.Sprintf("capacity %.0f/s, offered %.0f/s, queue %d, outage %v from %v (%s), %v of arrivals, seed %d",
			cfg.Capacity, cfg.Load*cfg.Capacity, cfg.Queue, cfg.Outage, cfg.OutageStart, map[bool]string{false: "fast 503", true: "dropped"}[cfg.Drop], cfg.Duration, cfg.Seed), reportWidth, ""))
	}
	var all []sim.OverloadResult
	var configs []sim.OverloadConfig
	pr := newSimProgress(env, stderr, prog, "strategies", len(cfg.Strategies)*len(sf.clients))
	for i, n := range sf.clients {
		c := cfg
		c.Clients = n
		c.Progress = func(done, total int) { pr.update(i*total+done, len(sf.clients)*total) }
		res, err := sim.RunOverload(c)
		if err != nil {
			pr.stop()
			return simUsageError(stderr, prog, simFlagError(err))
		}
		all = append(all, res...)
		configs = append(configs, c)
	}
	pr.stop()
	if sf.plot != "" {
		for i, c := range configs {
			suffix := ""
			if len(sf.clients) > 1 {
				suffix = strconv.Itoa(c.Clients)
			}
			k := len(cfg.Strategies)
			if err := wrote(stderr, prog)(sim.WriteOverloadPlots(sf.plot, suffix, c, all[i*k:(i+1)*k])); err != nil {
				return simFail(stderr, prog, err)
			}
		}
	}
	var err error
	if sf.json {
		err = sim.WriteJSON(stdout, all)
	} else {
		err = foldReport(stdout, func(w io.Writer) error { return sim.WriteOverloadReport(w, cfg, all) })
	}
	if err != nil {
		return simFail(stderr, prog, err)
	}
	return cli.ExitOK
}
