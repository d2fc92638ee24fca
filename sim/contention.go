package sim

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/backoffkit/retry/internal/eventq"
)

// Defaults of the contention experiment, those of the AWS Architecture Blog
// post "Exponential Backoff and Jitter" and its simulator.
const (
	DefaultContentionRuns = 100
	DefaultBase           = 5 * time.Millisecond    // backoff base
	DefaultCap            = 2000 * time.Millisecond // backoff cap
	DefaultJitter         = DefaultBase             // additive jitter of "google" and "jitter-at-cap"
	DefaultNetMean        = 10 * time.Millisecond   // mean network delay per message
	DefaultNetSD          = 2 * time.Millisecond    // its standard deviation
)

// DefaultContentionClients returns the default sizes: 10, 20, ..., 190.
func DefaultContentionClients() []int { return Sizes(10, 190, 10) }

// Sizes returns from, from+step, ... up to and including to.
func Sizes(from, to, step int) []int {
	var s []int
	for n := from; n <= to && step > 0; n += step {
		s = append(s, n)
	}
	return s
}

// ContentionConfig describes a contention experiment. The zero value runs the
// blog's experiment: every strategy of [ContentionNames], 10 to 190 clients
// in steps of 10, 100 runs per point, seed 0.
type ContentionConfig struct {
	// Clients lists the numbers of clients to simulate (nil: 10..190 by 10).
	Clients []int
	// Runs is the number of independent runs averaged per point (0: 100).
	Runs int
	// Seed seeds every random stream of the experiment.
	Seed uint64
	// Strategies to compare (nil: every name of ContentionNames with
	// DefaultBase, DefaultCap and DefaultJitter).
	Strategies []Strategy
	// NetMean and NetSD describe the network delay of one message,
	// Normal(NetMean, NetSD) truncated at 0 (0: 10 ms and 2 ms).
	NetMean, NetSD time.Duration
	// Workers is the number of goroutines that simulate points in parallel
	// (0: GOMAXPROCS). The results do not depend on it.
	Workers int
	// Progress, when set, is called after each (strategy, clients) point
	// finishes, with the number finished so far and the total. Calls do not
	// overlap.
	Progress func(done, total int)
}

// ContentionResult is the outcome of one (strategy, clients) point,
// averaged over its runs.
type ContentionResult struct {
	Experiment string  `json:"experiment"` // "contention"
	Strategy   string  `json:"strategy"`
	Clients    int     `json:"clients"`
	Runs       int     `json:"runs"`
	CallsMean  float64 `json:"calls_mean"`   // conditional writes per run (the work)
	CallsSD    float64 `json:"calls_sd"`     // their standard deviation over the runs
	TimeMsMean float64 `json:"time_ms_mean"` // time of the last event of a run, ms
	TimeMsSD   float64 `json:"time_ms_sd"`
	Events     int64   `json:"events"` // events simulated, all runs together
}

func (c *ContentionConfig) withDefaults() (ContentionConfig, error) {
	cfg := *c
	if cfg.Clients == nil {
		cfg.Clients = DefaultContentionClients()
	}
	if cfg.Runs == 0 {
		cfg.Runs = DefaultContentionRuns
	}
	if cfg.Strategies == nil {
		for _, name := range ContentionNames {
			s, err := ContentionStrategy(name, DefaultBase, DefaultCap, DefaultJitter)
			if err != nil {
				return cfg, err
			}
			cfg.Strategies = append(cfg.Strategies, s)
		}
	}
	if cfg.NetMean == 0 {
		cfg.NetMean = DefaultNetMean
	}
	if cfg.NetSD == 0 {
		cfg.NetSD = DefaultNetSD
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	switch {
	case len(cfg.Clients) == 0:
		return cfg, errors.New("sim: no client counts to simulate")
	case cfg.Runs < 0:
		return cfg, fmt.Errorf("sim: runs = %d: want at least 1", cfg.Runs)
	case len(cfg.Strategies) == 0:
		return cfg, errors.New("sim: no strategies to simulate")
	case cfg.NetMean < 0 || cfg.NetSD < 0:
		return cfg, fmt.Errorf("sim: network delay Normal(%v, %v): want a mean and deviation >= 0", cfg.NetMean, cfg.NetSD)
	}
	for _, n := range cfg.Clients {
		if n < 1 || n > 1<<20 {
			return cfg, fmt.Errorf("sim: clients = %d: want 1 to %d", n, 1<<20)
		}
	}
	seen := map[string]bool{}
	for _, s := range cfg.Strategies {
		if s.Name == "" || seen[s.Name] {
			return cfg, fmt.Errorf("sim: strategy name %q is empty or repeated", s.Name)
		}
		seen[s.Name] = true
		if err := s.Policy.Validate(); err != nil {
			return cfg, fmt.Errorf("sim: strategy %q: %w", s.Name, err)
		}
	}
	return cfg, nil
}

// RunContention runs the contention experiment of the AWS Architecture Blog
// post "Exponential Backoff and Jitter", with the accounting of its
// simulator so that the numbers compare:
//
// N clients start at time 0 against one record held by a server. Each client
// reads the record's version, then writes it conditionally: the write
// succeeds only if nobody wrote since that read. Each client needs one
// successful write, then stops. Every message (read, read reply, write,
// write reply) takes one network delay. After its k-th failed write (k from
// 1) a client waits one network delay plus Policy.Backoff(k, prev, u) before
// its next read arrives at the server, so the first backoff is base·2¹;
// prev is the client's previous backoff (used by decorrelated jitter).
//
// "Calls" counts the conditional writes only (reads are free); the
// completion time of a run is the time of its last event.
//
// Results come in the order of the strategies, then of the client counts.
// Points run in parallel on Workers goroutines; each (strategy, clients,
// run) has its own random stream derived from Seed, so the results are the
// same for any number of workers and any subset of strategies or sizes.
func RunContention(c ContentionConfig) ([]ContentionResult, error) {
	cfg, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	type point struct{ s, n int }
	points := make([]point, 0, len(cfg.Strategies)*len(cfg.Clients))
	for si := range cfg.Strategies {
		for ni := range cfg.Clients {
			points = append(points, point{si, ni})
		}
	}
	results := make([]ContentionResult, len(points))
	// Hand out the biggest points first so that the workers finish together.
	order := make([]int, len(points))
	for i := range order {
		order[i] = i
	}
	sortByDesc(order, func(i int) int { return cfg.Clients[points[i].n] })
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range min(cfg.Workers, len(points)) {
		wg.Go(func() {
			w := newContentionWorker()
			for i := range next {
				p := points[i]
				results[i] = w.point(&cfg, &cfg.Strategies[p.s], cfg.Clients[p.n])
				if cfg.Progress != nil {
					mu.Lock()
					done++
					cfg.Progress(done, len(points))
					mu.Unlock()
				}
			}
		})
	}
	for _, i := range order {
		next <- i
	}
	close(next)
	wg.Wait()
	return results, nil
}

func sortByDesc(idx []int, key func(int) int) {
	// Insertion sort: a few hundred points at most, stable.
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0 && key(idx[j]) > key(idx[j-1]); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
}

// event is what the contention model's queue holds of an event: who and arg
// as kind says.
type event struct {
	who  int32
	arg  int32
	kind uint8
}

// Event kinds of the contention model.
const (
	cRead       uint8 = iota // a read arrives at the server
	cReadReply               // its reply arrives at the client
	cWrite                   // a conditional write arrives at the server; arg = version read
	cWriteReply              // its reply arrives at the client; arg = 1 if it succeeded
)

// contentionWorker holds the reusable state of one goroutine.
type contentionWorker struct {
	q     eventq.Queue[event]
	src   *source
	fails []int32
	prev  []time.Duration
}

func newContentionWorker() *contentionWorker {
	return &contentionWorker{src: newSource()}
}

// runStats is what one run measured.
type runStats struct {
	calls     int64 // conditional writes
	successes int64 // successful writes
	done      int64 // clients that finished (received a successful reply)
	version   int64 // the record's final version
	end       int64 // time of the last event, ns
	events    int64
}

func (w *contentionWorker) point(cfg *ContentionConfig, s *Strategy, n int) ContentionResult {
	var calls, tm welford
	var events int64
	h := nameHash(s.Name)
	for run := range cfg.Runs {
		a, b := seedFor(cfg.Seed, h, uint64(n), uint64(run))
		st := w.run(s, n, cfg.NetMean, cfg.NetSD, a, b)
		calls.add(float64(st.calls))
		tm.add(float64(st.end) / float64(time.Millisecond))
		events += st.events
	}
	return ContentionResult{
		Experiment: "contention",
		Strategy:   s.Name,
		Clients:    n,
		Runs:       cfg.Runs,
		CallsMean:  calls.mean,
		CallsSD:    calls.sd(),
		TimeMsMean: tm.mean,
		TimeMsSD:   tm.sd(),
		Events:     events,
	}
}

// run simulates one run of n clients.
func (w *contentionWorker) run(s *Strategy, n int, netMean, netSD time.Duration, seedA, seedB uint64) runStats {
	src := w.src
	src.seed(seedA, seedB)
	q := &w.q
	q.Reset()
	w.fails = resize(w.fails, n)
	w.prev = resize(w.prev, n)
	p := s.Policy
	var st runStats
	delay := func() int64 { return src.normal(netMean, netSD) }
	for c := range n {
		q.Push(delay(), event{int32(c), 0, cRead})
	}
	var version int32
	for q.Len() > 0 {
		ev := q.Pop()
		e, at := ev.P, ev.At
		st.events++
		st.end = at
		switch e.kind {
		case cRead:
			q.Push(at+delay(), event{e.who, version, cReadReply})
		case cReadReply:
			q.Push(at+delay(), event{e.who, e.arg, cWrite})
		case cWrite:
			st.calls++
			ok := int32(0)
			if e.arg == version {
				version++
				st.successes++
				ok = 1
			}
			q.Push(at+delay(), event{e.who, ok, cWriteReply})
		case cWriteReply:
			if e.arg == 1 {
				st.done++
				continue
			}
			c := e.who
			w.fails[c]++
			wait := p.Backoff(int(w.fails[c]), w.prev[c], src.float64())
			w.prev[c] = wait
			q.Push(at+delay()+int64(wait), event{c, 0, cRead})
		}
	}
	st.version = int64(version)
	return st
}

// resize returns s with length n, zeroed, reusing its array when it can.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// welford accumulates a mean and variance in one pass.
type welford struct {
	n    int
	mean float64
	m2   float64
}

func (w *welford) add(x float64) {
	w.n++
	d := x - w.mean
	w.mean += d / float64(w.n)
	w.m2 += d * (x - w.mean)
}

func (w *welford) sd() float64 {
	if w.n < 2 {
		return 0
	}
	return math.Sqrt(w.m2 / float64(w.n-1))
}
