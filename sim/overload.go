package sim

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/backoffkit/retry"
)

// OverloadConfig describes a retry-storm experiment. Unlike
// [ContentionConfig], its zero values are taken literally (Outage 0 means no
// outage): start from [DefaultOverload] and change what you need.
type OverloadConfig struct {
	// Clients is the number of simulated clients. Each issues requests as
	// its own Poisson process (open loop: a new request does not wait for
	// the previous one), at Load·Capacity/Clients requests per second.
	Clients int
	// Hosts is the number of client processes. Client c runs in process
	// c mod Hosts, and the calls of one process share its budget and
	// throttle, as a [retry.Limiter] is meant to be shared.
	Hosts int
	// Capacity is what the server serves, in requests per second (a single
	// FIFO queue with a fixed service time of 1/Capacity).
	Capacity float64
	// Load is the offered load of new requests, as a fraction of Capacity.
	Load float64
	// Queue is the most requests that may wait at the server; an attempt
	// that finds the queue full is shed at once with a 503.
	Queue int
	// Duration is how long new requests arrive; requests still in flight
	// then run to their end.
	Duration time.Duration
	// OutageStart and Outage place the outage: during
	// [OutageStart, OutageStart+Outage) the server answers every attempt
	// with a 503 at once (or, with Drop, never answers).
	OutageStart, Outage time.Duration
	// Drop makes the server drop attempts during the outage instead of
	// answering 503: the client sees a timeout after the policy's
	// AttemptTimeout, or Timeout when the policy has none.
	Drop    bool
	Timeout time.Duration
	// NetMean and NetSD describe the network delay of each message.
	NetMean, NetSD time.Duration
	// Bin is the resolution of the time series and of recovery_s.
	Bin time.Duration
	// OnTime is how soon after its start a request must succeed to count
	// as on time in OverloadResult.OnTime, what the users of a service see
	// of its recovery (a success that took 20 s of retries came too late
	// for most of them). 0 means 1 s.
	OnTime time.Duration
	// Seed seeds every random stream. The request arrivals depend only on
	// Seed, so every strategy sees exactly the same requests.
	Seed uint64
	// Strategies to compare (nil: [DefaultOverloadNames]).
	Strategies []OverloadStrategy
	// Workers is how many strategies are simulated at once (0: GOMAXPROCS).
	Workers int
	// Progress, when set, is called after each strategy finishes, with the
	// number finished so far and the total. Calls do not overlap.
	Progress func(done, total int)
}

// DefaultOverload returns the default experiment: 100,000 clients in 100
// processes offering 8,000 requests/s to a server that serves 10,000/s with
// a 1,000-request queue (100 ms of work), for 60 s, with a 30 s outage
// (fast 503s) from 10 s to 40 s.
func DefaultOverload() OverloadConfig {
	return OverloadConfig{
		Clients:     100_000,
		Hosts:       100,
		Capacity:    10_000,
		Load:        0.8,
		Queue:       1000,
		Duration:    60 * time.Second,
		OutageStart: 10 * time.Second,
		Outage:      30 * time.Second,
		Timeout:     10 * time.Second,
		NetMean:     DefaultNetMean,
		NetSD:       DefaultNetSD,
		Bin:         100 * time.Millisecond,
		OnTime:      time.Second,
	}
}

// OverloadResult is the outcome of one strategy.
type OverloadResult struct {
	Experiment string `json:"experiment"` // "overload"
	Strategy   string `json:"strategy"`
	Clients    int    `json:"clients"`
	Hosts      int    `json:"hosts"`
	Runs       int    `json:"runs"` // always 1: one long run
	Requests   int64  `json:"requests"`
	Attempts   int64  `json:"attempts"`
	// Amplification is the load amplification the outage causes: attempts
	// made by the requests that started during the outage ÷ those requests.
	// Without an outage (or when no request started during it) it is
	// AmplificationTotal: 1 when nothing was retried.
	Amplification float64 `json:"amplification"`
	// AmplificationTotal is attempts ÷ requests over the whole run.
	AmplificationTotal float64 `json:"amplification_total"`
	// PeakLoad is the highest attempt rate that reached the server in one
	// bin, as a multiple of Capacity.
	PeakLoad float64 `json:"peak_load"`
	// Goodput is successful requests per second of Duration, counting the
	// successes that land within Duration only (a request still in flight
	// then may succeed later: it counts in Succeeded, not here).
	Goodput float64 `json:"goodput"`
	// FailedRatio is the share of requests that did not succeed (at any
	// time, within Duration or after).
	FailedRatio float64 `json:"failed_ratio"`
	// RecoveryS is the time from the end of the outage to the start of the
	// first bin from which every bin up to Duration is healthy (at least
	// 99 % of the attempts that reached the server, or were refused by the
	// client's throttle, succeeded). -1 if the service never recovered
	// within Duration.
	RecoveryS float64 `json:"recovery_s"`
	// P99Ms is the 99th percentile of the requests' end-to-end latency
	// (first attempt to final outcome, success or not), ms, to 1 ms.
	P99Ms float64 `json:"p99_ms"`
	// How the requests ended: each request counts in exactly one.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`    // the last allowed attempt failed, or a non-retryable error
	GaveUp    int64 `json:"gave_up"`   // stopped by the deadline, the budget or the throttle
	Throttled int64 `json:"throttled"` // of GaveUp: first attempt refused by the throttle
	Events    int64 `json:"events"`
	// Load and Good are the time series, one value per Bin: attempts per
	// second reaching the server and successful requests per second.
	Load []float64 `json:"-"`
	Good []float64 `json:"-"`
	// OnTime is, per Bin, the share of the requests that started in the
	// bin that succeeded within OverloadConfig.OnTime of their start; NaN
	// for a bin in which no request started.
	OnTime []float64 `json:"-"`
	// RejectP is, per Bin, the mean over the client processes of their
	// throttle's reject probability (see
	// [retry.AdaptiveThrottle.RejectProbability]) at the start of the bin;
	// nil when the strategy has no throttle that reports one.
	RejectP []float64 `json:"-"`
	// BinS is the bin width in seconds.
	BinS float64 `json:"-"`
}

// Validate reports the first invalid field of c, naming it.
func (c OverloadConfig) Validate() error { return c.check() }

func (c *OverloadConfig) check() error {
	switch {
	case c.Clients < 1:
		return fmt.Errorf("sim: clients = %d: want at least 1", c.Clients)
	case c.Hosts < 1 || c.Hosts > c.Clients:
		return fmt.Errorf("sim: hosts = %d: want 1 to clients (%d)", c.Hosts, c.Clients)
	case !(c.Capacity > 0) || math.IsInf(c.Capacity, 0) || c.Capacity > 1e9:
		return fmt.Errorf("sim: capacity = %v: want more than 0 requests/s (at most 1e9)", c.Capacity)
	case !(c.Load > 0) || c.Load > 100:
		return fmt.Errorf("sim: load = %v: want more than 0 (a fraction of capacity, at most 100)", c.Load)
	case c.Queue < 0:
		return fmt.Errorf("sim: queue = %d: must not be negative", c.Queue)
	case c.Duration <= 0 || c.Duration > 24*time.Hour:
		return fmt.Errorf("sim: duration = %v: want more than 0, at most 24h", c.Duration)
	case c.OutageStart < 0 || c.Outage < 0:
		return fmt.Errorf("sim: outage %v from %v: must not be negative", c.Outage, c.OutageStart)
	case c.OutageStart+c.Outage > c.Duration:
		return fmt.Errorf("sim: the outage (%v from %v) must end within the duration (%v)", c.Outage, c.OutageStart, c.Duration)
	case c.Drop && c.Timeout <= 0:
		return errors.New("sim: a dropping outage needs a client timeout above 0")
	case c.NetMean < 0 || c.NetSD < 0:
		return fmt.Errorf("sim: network delay Normal(%v, %v): want a mean and deviation >= 0", c.NetMean, c.NetSD)
	case c.Bin <= 0 || c.Duration/c.Bin > 10_000_000:
		return fmt.Errorf("sim: bin = %v: want more than 0 and at most 10,000,000 bins", c.Bin)
	case c.OnTime < 0:
		return fmt.Errorf("sim: on-time limit = %v: must not be negative", c.OnTime)
	}
	if c.Load*c.Capacity*c.Duration.Seconds() > 2e9 {
		return fmt.Errorf("sim: %.3g requests is too many to simulate", c.Load*c.Capacity*c.Duration.Seconds())
	}
	seen := map[string]bool{}
	for _, s := range c.Strategies {
		if s.Name == "" || seen[s.Name] {
			return fmt.Errorf("sim: strategy name %q is empty or repeated", s.Name)
		}
		seen[s.Name] = true
		if err := s.Policy.Validate(); err != nil {
			return fmt.Errorf("sim: strategy %q: %w", s.Name, err)
		}
	}
	return nil
}

// RunOverload simulates a retry storm for every strategy and returns one
// result per strategy, in order.
//
// The server serves Capacity requests per second from a FIFO queue of at
// most Queue requests, and sheds with a fast 503 what does not fit. During
// the outage it answers every attempt with a 503 at once (or drops it). The
// clients take the library's own steps on the virtual clock: Policy.Begin
// before the first attempt, Policy.Succeeded after a success and Policy.Next
// after a failure (the step retry.Do takes: classification, limiter calls,
// the wait from Policy.Backoff, give-up at Attempts, at the Deadline, or when
// the budget or the throttle refuses a retry). TestLoopMatchesDo checks the
// sequence against retry.Do. A 503 is retried when Policy.RetriesStatus(503)
// says so; a timeout always is.
func RunOverload(c OverloadConfig) ([]OverloadResult, error) {
	cfg := c
	if cfg.Strategies == nil {
		for _, name := range DefaultOverloadNames {
			s, err := OverloadStrategyByName(name)
			if err != nil {
				return nil, err
			}
			cfg.Strategies = append(cfg.Strategies, s)
		}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if len(cfg.Strategies) == 0 {
		return nil, errors.New("sim: no strategies to simulate")
	}
	if cfg.OnTime == 0 {
		cfg.OnTime = time.Second
	}
	results := make([]OverloadResult, len(cfg.Strategies))
	parallel(len(cfg.Strategies), cfg.Workers, cfg.Progress, func(i int) {
		results[i] = runOverloadOne(&cfg, &cfg.Strategies[i]).res
	})
	return results, nil
}

// The seq of an event of the overload model is its place in the scheduling
// order, shifted left by seqShift, over a tag: for a request's event, its
// kind and, for an oReply, the reply's status from bit kindBits.
const (
	seqShift = 8
	kindBits = 2
)

// Kinds of a request's events. The events carry the request's state
// (flight): a request has one event waiting at any time, so its state needs
// no table of its own, and the event that pops brings it along, with no
// lookup in a table as big as the requests in flight.
const (
	oServer uint64 = iota // the request's attempt reaches the server
	oReply                // the attempt ends at the client
)

// Request outcomes.
const (
	endSuccess uint8 = iota + 1
	endFailed
	endGaveUp
	endThrottled
)

// flight is the state of one call's retry loop, carried by its event.
type flight struct {
	start    int64 // time of the call, ns
	sent     int64 // time the current attempt left the client
	prev     time.Duration
	client   int32
	attempts int32
}

type bin struct {
	arrived int64 // attempts that reached the server
	ok      int64 // of those, served
	refused int64 // attempts the throttle refused
	success int64 // requests that succeeded
	started int64 // requests that started
	onTime  int64 // of those, requests that succeeded within OnTime
	rejectP float64
}

type overloadSim struct {
	cfg      *OverloadConfig
	s        *OverloadStrategy
	p        retry.Policy // s.Policy resolved, for its limits (Backoff gets s.Policy itself)
	retry503 bool
	// The events: the next request of every client (client numbers), and
	// the requests in flight. Both take their seq from one count, so
	// together they run in the order one queue would run them.
	arrive    *calendar[int32]
	flights   *calendar[flight]
	seq       uint64
	live      int64 // requests in flight
	now       int64
	arrivals  *source        // request arrivals: the same for every strategy
	src       *source        // everything else
	hosts     []retry.Policy // per client process: p with its own Budget, Throttle and the sim's Rand
	bins      []bin
	latency   []uint32 // histogram of end-to-end latency, 1 ms buckets
	res       OverloadResult
	outReqs   int64
	outAtt    int64
	endedAtt  int64 // attempts of the requests that ended
	good      int64 // requests that succeeded within Duration
	sampled   int   // bins whose RejectP has been sampled
	throttles []rejecter

	service     int64 // ns per request
	busyUntil   int64
	maxBacklog  int64 // ns of queued work beyond which the server sheds
	outageStart int64
	outageEnd   int64
	timeout     int64 // attempt timeout, ns; 0: none
	deadline    int64 // policy deadline, ns; 0: none
	meanGap     float64
}

var simEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func runOverloadOne(cfg *OverloadConfig, s *OverloadStrategy) *overloadSim {
	o := newOverloadSim(cfg, s)
	o.run()
	return o
}

func newOverloadSim(cfg *OverloadConfig, s *OverloadStrategy) *overloadSim {
	o := &overloadSim{cfg: cfg, s: s, p: s.Policy.Resolved(), arrivals: newSource(), src: newSource()}
	o.retry503 = o.p.RetriesStatus(503)
	o.arrivals.seed(seedFor(cfg.Seed, nameHash("overload arrivals")))
	o.src.seed(seedFor(cfg.Seed, nameHash("overload"), nameHash(s.Name)))
	o.service = int64(float64(time.Second) / cfg.Capacity)
	// Slots of 1 to 2 services: a few events each when the server is busy.
	shift := uint(min(max(bits.Len64(uint64(o.service)), 8), 40))
	o.arrive, o.flights = newCalendar[int32](shift), newCalendar[flight](shift)
	o.maxBacklog = int64(cfg.Queue) * o.service
	o.outageStart = int64(cfg.OutageStart)
	o.outageEnd = int64(cfg.OutageStart + cfg.Outage)
	o.timeout = int64(o.p.AttemptTimeout)
	if cfg.Drop && o.timeout == 0 {
		o.timeout = int64(cfg.Timeout)
	}
	o.deadline = int64(o.p.Deadline)
	o.meanGap = float64(time.Second) * float64(cfg.Clients) / (cfg.Load * cfg.Capacity)
	o.bins = make([]bin, int(cfg.Duration/cfg.Bin)+1)
	o.hosts = make([]retry.Policy, cfg.Hosts)
	clock := func() time.Time { return simEpoch.Add(time.Duration(o.now)) }
	for h := range o.hosts {
		hp := o.p
		hp.Rand = o.src.float64
		if s.NewLimiters != nil {
			hp.Budget, hp.Throttle = s.NewLimiters(clock, o.src.float64)
		}
		o.hosts[h] = hp
		if r, ok := hp.Throttle.(rejecter); ok {
			o.throttles = append(o.throttles, r)
		}
	}
	return o
}

// rejecter is a throttle that reports its reject probability, as
// [retry.AdaptiveThrottle] does.
type rejecter interface{ RejectProbability() float64 }

// sample records the mean reject probability of the throttles for every bin
// that starts at or before the current time.
func (o *overloadSim) sample() {
	if len(o.throttles) == 0 {
		return
	}
	for o.sampled < len(o.bins) && int64(o.sampled)*int64(o.cfg.Bin) <= o.now {
		var p float64
		for _, t := range o.throttles {
			p += t.RejectProbability()
		}
		o.bins[o.sampled].rejectP = p / float64(len(o.throttles))
		o.sampled++
	}
}

func (o *overloadSim) delay() int64 { return o.src.normal(o.cfg.NetMean, o.cfg.NetSD) }

func (o *overloadSim) binOf(t int64) *bin {
	i := t / int64(o.cfg.Bin)
	if i >= int64(len(o.bins)) {
		return nil // after Duration: not part of the series
	}
	return &o.bins[i]
}

// next returns the next sequence number, with tag in its low byte.
func (o *overloadSim) next(tag uint64) uint64 {
	o.seq++
	return o.seq<<seqShift | tag
}

func (o *overloadSim) run() {
	cfg := o.cfg
	end := int64(cfg.Duration)
	for c := range cfg.Clients {
		if t := o.arrivals.exp(o.meanGap); t < end {
			o.arrive.push(t, o.next(0), int32(c))
		}
	}
	for o.arrive.len() > 0 || o.flights.len() > 0 {
		if o.flights.len() == 0 || o.arrive.len() > 0 && before(o.arrive.peek(), o.flights.peek()) {
			e := o.arrive.pop()
			o.now = e.at
			client := e.p
			o.sample()
			o.res.Events++
			if t := o.now + o.arrivals.exp(o.meanGap); t < end {
				o.arrive.push(t, o.next(0), client)
			}
			o.newRequest(client)
			continue
		}
		e := o.flights.pop()
		o.now = e.at
		tag := e.seq & (1<<seqShift - 1)
		f := e.p
		o.sample()
		o.res.Events++
		if tag&(1<<kindBits-1) == oServer {
			o.atServer(&f)
		} else {
			o.reply(&f, int(tag>>kindBits))
		}
	}
	o.finish()
}

func (o *overloadSim) newRequest(client int32) {
	f := flight{start: o.now, client: client}
	o.live++
	o.res.Requests++
	if b := o.binOf(o.now); b != nil {
		b.started++
	}
	if !o.hosts[int(client)%o.cfg.Hosts].Begin() {
		if b := o.binOf(o.now); b != nil {
			b.refused++
		}
		o.end(&f, endThrottled)
		return
	}
	o.send(&f, o.now)
}

// send makes request f's next attempt leave the client at time at.
func (o *overloadSim) send(f *flight, at int64) {
	f.attempts++
	f.sent = at
	o.res.Attempts++
	o.flights.push(at+o.delay(), o.next(oServer), *f)
}

// Reply statuses, carried in the seq of an oReply event.
const (
	st503 = iota
	stOK
	stTimeout  // the attempt timed out at the client
	stDeadline // the policy's deadline cancelled the attempt
)

func (o *overloadSim) atServer(f *flight) {
	t := o.now
	b := o.binOf(t)
	if b != nil {
		b.arrived++
	}
	if t >= o.outageStart && t < o.outageEnd {
		if o.cfg.Drop {
			o.replyAt(f, math.MaxInt64, st503) // never answered: the client times out
			return
		}
		o.replyAt(f, t+o.delay(), st503)
		return
	}
	backlog := max(o.busyUntil-t, 0)
	if backlog >= o.maxBacklog+o.service {
		o.replyAt(f, t+o.delay(), st503) // queue full: shed with a 503
		return
	}
	if b != nil {
		b.ok++
	}
	o.busyUntil = t + backlog + o.service
	o.replyAt(f, o.busyUntil+o.delay(), stOK)
}

// replyAt schedules the end of request f's attempt: its reply at time at,
// unless the client stops waiting before, at its attempt timeout or at the
// policy's deadline.
func (o *overloadSim) replyAt(f *flight, at int64, status uint64) {
	if o.timeout > 0 && at > f.sent+o.timeout {
		at, status = f.sent+o.timeout, stTimeout
	}
	if o.deadline > 0 && at >= f.start+o.deadline {
		at, status = f.start+o.deadline, stDeadline
	}
	o.flights.push(at, o.next(status<<kindBits|oReply), *f)
}

// Errors of failed attempts, as the library's loop sees them.
var (
	errUnavailable = errors.New("503 service unavailable")
	errTimeout     = errors.New("attempt timed out")
	errNotRetried  = retry.Permanent(errUnavailable) // a 503 the policy does not retry
)

// reply ends request f's attempt with status and takes the library's step
// between attempts (Policy.Next): the same classification, limiter calls,
// wait and give-up rules as retry.Do, on the virtual clock.
func (o *overloadSim) reply(f *flight, status int) {
	hp := &o.hosts[int(f.client)%o.cfg.Hosts]
	var err error
	switch {
	case status == stOK:
		hp.Succeeded()
		o.end(f, endSuccess)
		return
	case status == stDeadline:
		o.end(f, endGaveUp) // as the library: no Record for a cancelled attempt
		return
	case status == st503 && !o.retry503:
		err = errNotRetried
	case status == st503:
		err = errUnavailable
	default:
		err = errTimeout
	}
	var deadline time.Time
	if o.deadline > 0 {
		deadline = simEpoch.Add(time.Duration(f.start + o.deadline))
	}
	step := hp.Next(int(f.attempts), f.prev, err, simEpoch.Add(time.Duration(o.now)), deadline)
	f.prev = step.Shaped
	switch step.Reason {
	case retry.ReasonNone:
		o.send(f, o.now+int64(step.Wait))
	case retry.ReasonPermanent, retry.ReasonAttempts:
		o.end(f, endFailed)
	case retry.ReasonThrottled:
		if b := o.binOf(o.now); b != nil {
			b.refused++
		}
		o.end(f, endGaveUp)
	default: // deadline, budget
		o.end(f, endGaveUp)
	}
}

// end closes request f with outcome how. A request ends once: its state
// lives in its one waiting event, and end schedules none.
func (o *overloadSim) end(f *flight, how uint8) {
	o.live--
	switch how {
	case endSuccess:
		if b := o.binOf(f.start); b != nil && o.now-f.start <= int64(o.cfg.OnTime) {
			b.onTime++
		}
		o.res.Succeeded++
		if o.now < int64(o.cfg.Duration) {
			o.good++
			o.binOf(o.now).success++
		}
	case endFailed:
		o.res.Failed++
	case endGaveUp:
		o.res.GaveUp++
	case endThrottled:
		o.res.GaveUp++
		o.res.Throttled++
	}
	o.endedAtt += int64(f.attempts)
	if f.start >= o.outageStart && f.start < o.outageEnd { // started during the outage
		o.outReqs++
		o.outAtt += int64(f.attempts)
	}
	ms := (o.now - f.start) / int64(time.Millisecond)
	if ms >= int64(len(o.latency)) {
		o.latency = append(o.latency, make([]uint32, ms+1-int64(len(o.latency))+1024)...)
	}
	o.latency[ms]++
}

func (o *overloadSim) finish() {
	cfg := o.cfg
	res := &o.res
	res.Experiment = "overload"
	res.Strategy = o.s.Name
	res.Clients = cfg.Clients
	res.Hosts = cfg.Hosts
	res.Runs = 1
	if res.Requests > 0 {
		res.AmplificationTotal = float64(res.Attempts) / float64(res.Requests)
		res.FailedRatio = float64(res.Requests-res.Succeeded) / float64(res.Requests)
	}
	res.Amplification = res.AmplificationTotal
	if o.outReqs > 0 {
		res.Amplification = float64(o.outAtt) / float64(o.outReqs)
	}
	res.Goodput = float64(o.good) / cfg.Duration.Seconds()
	// The series cover whole bins within Duration.
	nb := int(cfg.Duration / cfg.Bin)
	binS := cfg.Bin.Seconds()
	res.BinS = binS
	res.Load = make([]float64, nb)
	res.Good = make([]float64, nb)
	res.OnTime = make([]float64, nb)
	if len(o.throttles) > 0 {
		o.now = int64(cfg.Duration)
		o.sample() // bins without events, if any
		res.RejectP = make([]float64, nb)
	}
	for i := range nb {
		res.Load[i] = float64(o.bins[i].arrived) / binS
		res.Good[i] = float64(o.bins[i].success) / binS
		res.OnTime[i] = math.NaN()
		if b := o.bins[i]; b.started > 0 {
			res.OnTime[i] = float64(b.onTime) / float64(b.started)
		}
		res.PeakLoad = max(res.PeakLoad, res.Load[i]/cfg.Capacity)
		if res.RejectP != nil {
			res.RejectP[i] = o.bins[i].rejectP
		}
	}
	// Recovery: the first bin at or after the outage's end from which every
	// bin is healthy.
	endBin := int((o.outageEnd + int64(cfg.Bin) - 1) / int64(cfg.Bin))
	rec := nb
	for i := nb - 1; i >= endBin; i-- {
		b := o.bins[i]
		total := b.arrived + b.refused
		if total > 0 && float64(b.ok) < 0.99*float64(total) {
			break
		}
		rec = i
	}
	switch {
	case cfg.Outage == 0:
		res.RecoveryS = 0
	case rec >= nb:
		res.RecoveryS = -1
	default:
		res.RecoveryS = math.Max(0, float64(int64(rec)*int64(cfg.Bin)-o.outageEnd)/float64(time.Second))
	}
	// p99 of end-to-end latency.
	target := uint64(math.Ceil(0.99 * float64(res.Requests)))
	var seen uint64
	for ms, n := range o.latency {
		seen += uint64(n)
		if seen >= target && target > 0 {
			res.P99Ms = float64(ms)
			break
		}
	}
}
