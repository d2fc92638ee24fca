package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/fleetmodel"
)

// FleetConfig describes the fleet experiment: Processes client processes of
// Clients clients each work through a backlog against a server that serves
// Quota requests per Window and answers 429 with a RetryInfo beyond, as a
// project's quota does for every process of a deployment. Like
// [OverloadConfig], its zero values are taken literally: start from
// [DefaultFleet] and change what you need.
type FleetConfig struct {
	// Processes is the number of client processes; each has its own retry
	// budget (for the strategies that keep one per process) and its own
	// view of the fleet's cooldown.
	Processes int
	// Clients is the number of clients per process. Each works through its
	// share of the backlog one call at a time (a closed loop: the next job
	// starts when the last one ends).
	Clients int
	// Jobs is each client's backlog: the calls it has to get done. A job
	// whose retries give up goes back to the end of its client's backlog
	// and the client starts its next job at once, as a worker pulling from
	// a queue does: the work is done only when every job succeeded.
	Jobs int
	// Quota is the number of requests the server serves per Window, in
	// fixed windows from time 0; it answers the others with 429.
	Quota int
	// Window is the quota's period.
	Window time.Duration
	// RetryInfo is the retryDelay of a 429: 0 means the time left until the
	// window ends (what a per-minute quota asks for), a positive value a
	// fixed delay, and a negative value none (the 429 carries no hint).
	RetryInfo time.Duration
	// Service is how long the server works on a request it serves; a 429
	// is answered at once.
	Service time.Duration
	// NetMean and NetSD describe the network delay of each message,
	// Normal(NetMean, NetSD) truncated at 0. NetMean must be above 0.
	NetMean, NetSD time.Duration
	// Horizon ends the simulation: a backlog not drained by then is
	// reported as not drained (drain_s -1).
	Horizon time.Duration
	// Bin is the resolution of the time series.
	Bin time.Duration
	// Seed seeds every random stream. When each client starts depends on
	// Seed only, so every strategy sees the same start.
	Seed uint64
	// Strategies to compare (nil: [DefaultFleetNames]).
	Strategies []FleetStrategy
	// Workers is how many strategies are simulated at once (0: GOMAXPROCS).
	Workers int
	// Progress, when set, is called after each strategy finishes, with the
	// number finished so far and the total. Calls do not overlap.
	Progress func(done, total int)
}

// DefaultFleet returns the default experiment: 10 processes of 10 clients,
// each client with a backlog of 30 calls (3,000 in all) against a quota of
// 600 requests per minute (the ideal drain takes 5 minutes), calls of
// 500 ms, and 429s whose RetryInfo asks for the rest of the minute.
func DefaultFleet() FleetConfig {
	return FleetConfig{
		Processes: 10,
		Clients:   10,
		Jobs:      30,
		Quota:     600,
		Window:    time.Minute,
		Service:   500 * time.Millisecond,
		NetMean:   DefaultNetMean,
		NetSD:     DefaultNetSD,
		Horizon:   30 * time.Minute,
		Bin:       5 * time.Second,
	}
}

// FleetStrategy is a way for the processes of a fleet to retry in
// [RunFleet]: a Policy, and which of the fleet's limiters (redisretry's, on
// the simulator's clock: see [FleetBudget]) it adds.
type FleetStrategy struct {
	// Name identifies the strategy in every output and seeds its streams.
	Name string
	// Policy supplies Attempts and the waits (Backoff, hints capped by
	// MaxRetryAfter). It must have no Deadline or AttemptTimeout (the
	// experiment has no deadlines), and its Budget, Throttle and Pacer are
	// not used: Budget, Cooldown and Quota say which limiters to add.
	Policy retry.Policy
	// Budget is the retry budget: none, one per process (a
	// [retry.RatioBudget] with its defaults, as a process alone has), or
	// one for the whole fleet (redisretry.Budget's defaults: retries <= 20 %
	// of the fleet's requests over 10 s).
	Budget FleetBudget
	// Cooldown shares the server's hints: a 429's RetryInfo seen by one
	// process pauses every process (redisretry.Cooldown: each reads the
	// fleet's cooldown at most once a second, and adds up to 1 s of jitter).
	Cooldown bool
	// Quota paces every attempt of the fleet, the first included, at the
	// server's quota (redisretry.Quota, burst 1).
	Quota bool
}

// FleetBudget says which retry budget a [FleetStrategy] keeps.
type FleetBudget uint8

// Retry budgets of a fleet strategy.
const (
	NoBudget      FleetBudget = iota // no budget
	ProcessBudget                    // a retry.RatioBudget per process
	SharedBudget                     // one budget for the fleet (redisretry.Budget)
)

// DefaultFleetNames are the strategies "retry sim fleet" compares by
// default; [FleetStrategyByName] knows them all.
var DefaultFleetNames = []string{"local", "local-budget", "fleet-budget", "fleet-cooldown", "fleet-quota", "fleet"}

// FleetStrategyByName returns a named fleet strategy. Each starts from the
// Gen AI SDK's default policy, [retry.Google] (5 attempts, waits of 1, 2, 4,
// 8 s plus up to 1 s of jitter, a server's hint honoured up to 60 s):
//
//   - "local": each process on its own, as without Redis.
//   - "local-budget": and a [retry.RatioBudget] per process.
//   - "fleet-budget": and one retry budget for the fleet.
//   - "fleet-cooldown": and the fleet's cooldown.
//   - "fleet-quota": and the fleet's quota pacer.
//   - "fleet": the budget, the cooldown and the quota of the fleet, what
//     "retry --redis URL --fleet NAME --quota RATE" sets up.
func FleetStrategyByName(name string) (FleetStrategy, error) {
	s := FleetStrategy{Name: name, Policy: retry.Google()}
	switch name {
	case "local":
	case "local-budget":
		s.Budget = ProcessBudget
	case "fleet-budget":
		s.Budget = SharedBudget
	case "fleet-cooldown":
		s.Cooldown = true
	case "fleet-quota":
		s.Quota = true
	case "fleet":
		s.Budget, s.Cooldown, s.Quota = SharedBudget, true, true
	default:
		return FleetStrategy{}, fmt.Errorf("sim: unknown fleet strategy %q (want one of %s)", name, strings.Join(DefaultFleetNames, ", "))
	}
	return s, nil
}

// FleetResult is the outcome of one strategy.
type FleetResult struct {
	Experiment string `json:"experiment"` // "fleet"
	Strategy   string `json:"strategy"`
	Processes  int    `json:"processes"`
	Clients    int    `json:"clients"` // per process
	Jobs       int64  `json:"jobs"`    // the whole backlog
	Succeeded  int64  `json:"succeeded"`
	// Attempts is the number of requests that reached the server, and
	// Rejected the number it answered with 429.
	Attempts int64 `json:"attempts"`
	Rejected int64 `json:"rejected"`
	// Share429 is Rejected ÷ Attempts.
	Share429 float64 `json:"share_429"`
	// Amplification is Attempts ÷ Succeeded: 1 when no attempt was wasted.
	Amplification float64 `json:"amplification"`
	// GaveUp counts the calls whose retries gave up (their jobs went back
	// to the backlog).
	GaveUp int64 `json:"gave_up"`
	// Goodput is successful calls per second until the backlog drained (or
	// the Horizon).
	Goodput float64 `json:"goodput"`
	// Fairness is Jain's index of the processes' successful calls in each
	// window of the quota, (Σx)² ÷ (n·Σx²), averaged over the windows that
	// ended before the first process finished its share: 1 when every
	// process got as much as the others, 1/Processes when one got all.
	Fairness float64 `json:"fairness"`
	// DrainS is when the last job succeeded, in seconds; -1 if the backlog
	// did not drain within the Horizon. IdealS is the backlog at the quota's
	// rate.
	DrainS float64 `json:"drain_s"`
	IdealS float64 `json:"ideal_s"`
	// MaxWindow is the most requests the server saw in one window.
	MaxWindow int64 `json:"max_window"`
	Events    int64 `json:"events"`
	// Load, Rejects and Backlog are the time series, one value per Bin:
	// requests per second reaching the server, 429s per second, and the
	// jobs not done yet at the end of the bin.
	Load    []float64 `json:"-"`
	Rejects []float64 `json:"-"`
	Backlog []float64 `json:"-"`
	// BinS is the bin width in seconds.
	BinS float64 `json:"-"`
}

// Validate reports the first invalid field of c, naming it.
func (c FleetConfig) Validate() error {
	switch {
	case c.Processes < 1 || c.Processes > 100_000:
		return fmt.Errorf("sim: processes = %d: want 1 to 100,000", c.Processes)
	case c.Clients < 1 || c.Clients > 100_000:
		return fmt.Errorf("sim: clients = %d: want 1 to 100,000 per process", c.Clients)
	case int64(c.Processes)*int64(c.Clients) > 1_000_000:
		return fmt.Errorf("sim: %d processes × %d clients: want at most 1,000,000 clients", c.Processes, c.Clients)
	case c.Jobs < 1 || int64(c.Jobs)*int64(c.Processes)*int64(c.Clients) > 100_000_000:
		return fmt.Errorf("sim: jobs = %d: want at least 1, and at most 100,000,000 in all", c.Jobs)
	case c.Quota < 1:
		return fmt.Errorf("sim: quota = %d: want at least 1 request per window", c.Quota)
	case c.Window < time.Millisecond || c.Window > 24*time.Hour:
		return fmt.Errorf("sim: window = %v: want 1ms to 24h", c.Window)
	case c.Service < 0 || c.Service > time.Hour:
		return fmt.Errorf("sim: service = %v: want 0 to 1h", c.Service)
	case c.NetMean <= 0 || c.NetSD < 0:
		// Without a network delay, a call given up at once would be
		// replaced by the next one at the same instant, forever.
		return fmt.Errorf("sim: network delay Normal(%v, %v): want a mean above 0 and a deviation >= 0", c.NetMean, c.NetSD)
	case c.Horizon <= 0 || c.Horizon > 7*24*time.Hour:
		return fmt.Errorf("sim: horizon = %v: want more than 0, at most 168h", c.Horizon)
	case c.Bin <= 0 || c.Horizon/c.Bin > 1_000_000:
		return fmt.Errorf("sim: bin = %v: want more than 0 and at most 1,000,000 bins", c.Bin)
	}
	seen := map[string]bool{}
	for _, s := range c.Strategies {
		if s.Name == "" || seen[s.Name] {
			return fmt.Errorf("sim: strategy name %q is empty or repeated", s.Name)
		}
		seen[s.Name] = true
		if s.Budget > SharedBudget {
			return fmt.Errorf("sim: strategy %q: unknown budget %d", s.Name, s.Budget)
		}
		if err := s.Policy.Validate(); err != nil {
			return fmt.Errorf("sim: strategy %q: %w", s.Name, err)
		}
		if s.Policy.Deadline > 0 || s.Policy.AttemptTimeout > 0 {
			return fmt.Errorf("sim: strategy %q: the fleet experiment has no deadlines (Deadline %v, AttemptTimeout %v)", s.Name, s.Policy.Deadline, s.Policy.AttemptTimeout)
		}
	}
	return nil
}

// RunFleet simulates the fleet experiment for every strategy and returns
// one result per strategy, in order.
//
// Each client takes the library's own steps on the virtual clock:
// Policy.Begin before a call, the fleet's pacers (cooldown, then quota, as
// retry.Pacers orders them) right before each attempt, Policy.Succeeded
// after a success, and Policy.Next after a 429, whose RetryInfo reaches the
// loop through retry.After as httpretry passes it on.
func RunFleet(c FleetConfig) ([]FleetResult, error) {
	cfg := c
	if cfg.Strategies == nil {
		for _, name := range DefaultFleetNames {
			s, err := FleetStrategyByName(name)
			if err != nil {
				return nil, err
			}
			cfg.Strategies = append(cfg.Strategies, s)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Strategies) == 0 {
		return nil, errors.New("sim: no strategies to simulate")
	}
	results := make([]FleetResult, len(cfg.Strategies))
	parallel(len(cfg.Strategies), cfg.Workers, cfg.Progress, func(i int) {
		results[i] = runFleetOne(&cfg, &cfg.Strategies[i])
	})
	return results, nil
}

// Event kinds of the fleet model; who is the client.
const (
	fStart   uint8 = iota // the client starts its next job
	fAttempt              // the client's next attempt: ask the pacers, then send
	fServer               // the attempt reaches the server
	fReply                // the answer reaches the client; arg: 1 served, 0 a 429
)

// fleetClient is one client's loop.
type fleetClient struct {
	left     int32 // jobs not done, the current one included
	attempts int32 // of the current call
	prev     time.Duration
	start    int64 // when the current call began, ns
	hint     int64 // the RetryInfo of the last 429, ns; -1 none
}

type fleetBin struct {
	arrived, rejected, done int64
}

type fleetSim struct {
	cfg     *FleetConfig
	s       *FleetStrategy
	q       queue
	now     int64
	src     *source
	hosts   []retry.Policy // per process: Policy with its budget
	pacers  []retry.Pacer  // per process; nil entries: no pacer
	clients []fleetClient
	windows map[int64]int64
	bins    []fleetBin
	procOK  []int64 // successful calls per process
	fair    jainWindows
	res     FleetResult
	left    int64 // jobs not done
	drained int64 // when the last job succeeded, ns; -1 not yet
	service int64
}

// jainWindows averages Jain's index of the processes' successes over the
// windows of the quota, until it is stopped (when a process has no work
// left, the others' shares say nothing about fairness).
type jainWindows struct {
	window  int64   // the current window's index
	count   []int64 // successes per process in it
	touched []int   // processes with a success in it
	s, s2   float64 // Σx and Σx² over the processes
	sum     float64 // Σ of the index over the windows done
	n       int     // windows done
	stopped bool
}

// add counts a success of process p at time t (ns) in windows of w ns.
func (j *jainWindows) add(t, w int64, p int) {
	if j.stopped {
		return
	}
	if i := t / w; i != j.window {
		j.close()
		j.window = i
	}
	x := float64(j.count[p])
	if j.count[p] == 0 {
		j.touched = append(j.touched, p)
	}
	j.count[p]++
	j.s++
	j.s2 += 2*x + 1
}

// close folds the current window into the average and starts afresh.
func (j *jainWindows) close() {
	if j.s > 0 {
		j.sum += j.s * j.s / (float64(len(j.count)) * j.s2)
		j.n++
	}
	for _, p := range j.touched {
		j.count[p] = 0
	}
	j.touched, j.s, j.s2 = j.touched[:0], 0, 0
}

// stop ends the measure at time t: the current window, cut short, is left
// out.
func (j *jainWindows) stop() { j.stopped = true }

// mean is the average index; 1 when no window ended.
func (j *jainWindows) mean() float64 {
	if j.n == 0 {
		return 1
	}
	return j.sum / float64(j.n)
}

func runFleetOne(cfg *FleetConfig, s *FleetStrategy) FleetResult {
	f := newFleetSim(cfg, s)
	f.run()
	return f.res
}

func newFleetSim(cfg *FleetConfig, s *FleetStrategy) *fleetSim {
	f := &fleetSim{cfg: cfg, s: s, src: newSource(), windows: map[int64]int64{}, drained: -1, service: int64(cfg.Service)}
	f.src.seed(seedFor(cfg.Seed, nameHash("fleet"), nameHash(s.Name)))
	clock := func() time.Time { return simEpoch.Add(time.Duration(f.now)) }
	p := s.Policy.Resolved()
	var window *fleetmodel.BudgetWindow
	if s.Budget == SharedBudget {
		window = newFleetWindow()
	}
	var tat, cooldown time.Time // the fleet's state in "Redis"
	inc := fleetmodel.Interval(int64(cfg.Quota), cfg.Window, 1)
	f.hosts = make([]retry.Policy, cfg.Processes)
	f.pacers = make([]retry.Pacer, cfg.Processes)
	for i := range f.hosts {
		hp := p
		hp.Rand = f.src.float64
		switch s.Budget {
		case ProcessBudget:
			hp.Budget = retry.NewRatioBudget(retry.RatioBudgetConfig{Now: clock})
		case SharedBudget:
			hp.Budget = &fleetBudget{w: window, now: clock}
		}
		var ps []retry.Pacer
		if s.Cooldown {
			ps = append(ps, &fleetCooldown{shared: &cooldown, now: clock, rand: f.src.float64})
		}
		if s.Quota {
			ps = append(ps, &fleetQuota{tat: &tat, inc: inc, now: clock})
		}
		if len(ps) > 0 {
			f.pacers[i] = retry.Pacers(ps...)
		}
		f.hosts[i] = hp
	}
	n := cfg.Processes * cfg.Clients
	f.clients = make([]fleetClient, n)
	f.left = int64(n) * int64(cfg.Jobs)
	f.res.Jobs = f.left
	f.bins = make([]fleetBin, int(cfg.Horizon/cfg.Bin)+1)
	f.procOK = make([]int64, cfg.Processes)
	f.fair.count = make([]int64, cfg.Processes)
	return f
}

func (f *fleetSim) proc(client int32) int { return int(client) / f.cfg.Clients }

func (f *fleetSim) delay() int64 { return f.src.normal(f.cfg.NetMean, f.cfg.NetSD) }

func (f *fleetSim) binOf(t int64) *fleetBin {
	i := t / int64(f.cfg.Bin)
	if i >= int64(len(f.bins)) {
		return nil
	}
	return &f.bins[i]
}

func (f *fleetSim) clock() time.Time { return simEpoch.Add(time.Duration(f.now)) }

func (f *fleetSim) run() {
	cfg := f.cfg
	// Every client starts within the first 100 ms, at times that depend on
	// the seed only.
	starts := newSource()
	starts.seed(seedFor(cfg.Seed, nameHash("fleet starts")))
	f.q.h = make([]event, 0, len(f.clients)+16)
	for c := range f.clients {
		f.clients[c].left = int32(cfg.Jobs)
		f.q.push(int64(starts.float64()*float64(100*time.Millisecond)), fStart, int32(c), 0)
	}
	horizon := int64(cfg.Horizon)
	for f.q.len() > 0 {
		e := f.q.pop()
		if e.at > horizon {
			break
		}
		f.now = e.at
		f.res.Events++
		switch e.kind {
		case fStart:
			f.startCall(e.who)
		case fAttempt:
			f.attempt(e.who)
		case fServer:
			f.atServer(e.who)
		case fReply:
			f.reply(e.who, e.arg == 1)
		}
	}
	f.finish()
}

// startCall begins the client's next job, if it has one.
func (f *fleetSim) startCall(who int32) {
	c := &f.clients[who]
	if c.left == 0 {
		return
	}
	c.attempts, c.prev, c.start, c.hint = 0, 0, f.now, -1
	f.hosts[f.proc(who)].Begin() // no throttle: never refuses; counts the request
	f.attempt(who)
}

// attempt asks the process's pacers when the client's next attempt may
// start, and sends it then. (Without a deadline a pacer never refuses.)
func (f *fleetSim) attempt(who int32) {
	at := f.now
	if p := f.pacers[f.proc(who)]; p != nil {
		t, err := p.Reserve(context.Background(), f.clock(), time.Time{})
		if err != nil {
			panic(fmt.Sprintf("sim: a pacer refused an attempt without a deadline: %v", err))
		}
		at = int64(t.Sub(simEpoch))
	}
	f.clients[who].attempts++
	f.q.push(at+f.delay(), fServer, who, 0)
}

// atServer counts the attempt in its window: within the quota it is served
// (answered after Service), beyond it answered at once with a 429.
func (f *fleetSim) atServer(who int32) {
	t := f.now
	f.res.Attempts++
	b := f.binOf(t)
	if b != nil {
		b.arrived++
	}
	w := t / int64(f.cfg.Window)
	f.windows[w]++
	if f.windows[w] <= int64(f.cfg.Quota) {
		f.q.push(t+f.service+f.delay(), fReply, who, 1)
		return
	}
	f.res.Rejected++
	if b != nil {
		b.rejected++
	}
	c := &f.clients[who]
	switch ri := f.cfg.RetryInfo; {
	case ri == 0:
		c.hint = (w+1)*int64(f.cfg.Window) - t
	case ri > 0:
		c.hint = int64(ri)
	default:
		c.hint = -1
	}
	f.q.push(t+f.delay(), fReply, who, 0)
}

// errQuota is a 429 as the loop sees it; with a RetryInfo it is wrapped by
// retry.After, as httpretry does.
var errQuota = errors.New("429 resource exhausted")

func (f *fleetSim) reply(who int32, ok bool) {
	c := &f.clients[who]
	p := f.proc(who)
	hp := &f.hosts[p]
	if ok {
		if pc := f.pacers[p]; pc != nil {
			pc.Record(nil)
		}
		hp.Succeeded()
		c.left--
		f.left--
		f.res.Succeeded++
		f.procOK[p]++
		f.fair.add(f.now, int64(f.cfg.Window), p)
		if f.procOK[p] == int64(f.cfg.Clients)*int64(f.cfg.Jobs) {
			f.fair.stop() // the first process is done: fairness is measured until now
		}
		if b := f.binOf(f.now); b != nil {
			b.done++
		}
		if f.left == 0 {
			f.drained = f.now
		}
		f.startCall(who)
		return
	}
	err := errQuota
	if c.hint >= 0 {
		err = retry.After(errQuota, time.Duration(c.hint))
	}
	if pc := f.pacers[p]; pc != nil {
		pc.Record(err)
	}
	step := hp.Next(int(c.attempts), c.prev, err, f.clock(), time.Time{})
	c.prev = step.Shaped
	if step.Reason != retry.ReasonNone {
		f.giveUp(who)
		return
	}
	f.q.push(f.now+int64(step.Wait), fAttempt, who, 0)
}

// giveUp puts the client's job back at the end of its backlog; the client
// starts the next one at once (at least one attempt was made: time moves
// on).
func (f *fleetSim) giveUp(who int32) {
	f.res.GaveUp++
	f.q.push(f.now, fStart, who, 0)
}

func (f *fleetSim) finish() {
	cfg := f.cfg
	r := &f.res
	r.Experiment = "fleet"
	r.Strategy = f.s.Name
	r.Processes, r.Clients = cfg.Processes, cfg.Clients
	if r.Attempts > 0 {
		r.Share429 = float64(r.Rejected) / float64(r.Attempts)
	}
	if r.Succeeded > 0 {
		r.Amplification = float64(r.Attempts) / float64(r.Succeeded)
	}
	rate := float64(cfg.Quota) / cfg.Window.Seconds()
	r.IdealS = float64(r.Jobs) / rate
	end := float64(cfg.Horizon) / float64(time.Second)
	r.DrainS = -1
	if f.drained >= 0 {
		r.DrainS = float64(f.drained) / float64(time.Second)
		end = r.DrainS
	}
	if end > 0 {
		r.Goodput = float64(r.Succeeded) / end
	}
	r.Fairness = f.fair.mean()
	for _, n := range f.windows {
		r.MaxWindow = max(r.MaxWindow, n)
	}
	// The series run until the backlog drained (one bin more) or the
	// Horizon.
	nb := len(f.bins) - 1
	if f.drained >= 0 {
		nb = min(nb, int(f.drained/int64(cfg.Bin))+2)
	}
	binS := cfg.Bin.Seconds()
	r.BinS = binS
	r.Load, r.Rejects, r.Backlog = make([]float64, nb), make([]float64, nb), make([]float64, nb)
	left := r.Jobs
	for i := range nb {
		b := f.bins[i]
		left -= b.done
		r.Load[i] = float64(b.arrived) / binS
		r.Rejects[i] = float64(b.rejected) / binS
		r.Backlog[i] = float64(left)
	}
}
