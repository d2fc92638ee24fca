package fleetsim

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/redisretry"
	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// epoch is time 0 of every run, on the server's clock.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sim is one run.
type sim struct {
	cfg   Config
	epoch time.Time
	now   int64 // ns since the start
	end   int64
	warm  int64
	q     queue
	store backend.Store
	procs []*proc
	net   *rand.Rand // the network's latencies
	srv   apiServer
	log   *logCounter
	rate  float64 // the quota's rate per second
	slot  int64   // µs of schedule per request
	ideal int64   // the reference queue's end (ns; see begin)

	// Measures (after the warmup unless said).
	calls, admitted, succeeded, attempts, rejected         int64
	refusedDeadline, refusedMeetable, refusedOther, gaveUp int64
	refusedSaturated                                       int64
	refusedClear                                           int64
	expired                                                int64
	waits                                                  []int64
	arrivals, starts                                       []int64 // whole run
	rts                                                    RoundTrips
	reserved, aheadMax                                     int64 // µs
	binLoad, binRejects, binStarts, binServed              []int64
	binCap, binLearnt                                      []float64
	binAhead                                               []int64 // µs
	events                                                 int64
	budgetCounted                                          int64
	coolWaitMax                                            time.Duration
	recovered                                              PerLimiter[float64]
}

// Run simulates c and returns what it measured. The same Config gives the
// same Result, byte for byte.
func Run(c Config) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s, err := newSim(c.resolved())
	if err != nil {
		return nil, err
	}
	s.run()
	return s.result(), nil
}

// stream returns the random stream number n of a run seeded with seed.
func stream(seed, n uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, n*0xbf58476d1ce4e5b9+1))
}

func newSim(c Config) (*sim, error) {
	s := &sim{
		cfg: c, epoch: epoch, end: int64(c.Duration), warm: int64(c.Warmup),
		net: stream(c.Seed, 0), log: &logCounter{},
	}
	if c.Quota != nil {
		l := c.Quota.Limit
		s.rate = float64(l.Rate) / l.Period.Seconds()
		s.slot = int64(l.Interval(1) / time.Microsecond)
	} else {
		s.rate = c.Server.Capacity[0].PerSecond
		s.slot = int64(math.Ceil(1e6 / s.rate))
	}
	s.srv = newAPIServer(c.Server, c.Quota)
	bins := int(c.Duration/c.Bin) + 1
	s.binLoad, s.binRejects, s.binStarts, s.binAhead = make([]int64, bins), make([]int64, bins), make([]int64, bins), make([]int64, bins)
	s.binServed, s.binCap, s.binLearnt = make([]int64, bins), make([]float64, bins), make([]float64, bins)
	logger := slog.New(s.log)
	s.recovered = PerLimiter[float64]{-1, -1, -1}
	s.procs = make([]*proc, c.Processes)
	skew := stream(c.Seed, 1)
	for i := range s.procs {
		p := &proc{s: s, id: i, rng: stream(c.Seed, uint64(i)+2), late: make([]int, len(c.Faults))}
		if c.Skew > 0 {
			p.offset = time.Duration((skew.Float64()*2 - 1) * float64(c.Skew))
		}
		p.policy = c.Policy
		p.policy.Rand = p.rng.Float64
		var err error
		switch {
		case c.Quota != nil:
			qc := *c.Quota
			s.wire(&qc.Settings, logger)
			if p.q, err = redisretry.NewQuota(p, qc); err != nil {
				return nil, err
			}
		case c.Auto != nil:
			ac := *c.Auto
			s.wire(&ac.Settings, logger)
			if p.a, err = redisretry.NewAutoQuota(p, ac); err != nil {
				return nil, err
			}
		case c.Adaptive:
			p.aws = &adaptive{}
		}
		if c.Budget != nil {
			bc := *c.Budget
			s.wire(&bc.Settings, logger)
			if p.b, err = redisretry.NewBudget(p, bc); err != nil {
				return nil, err
			}
		}
		if c.Cooldown != nil {
			cc := *c.Cooldown
			s.wire(&cc.Settings, logger)
			if p.d, err = redisretry.NewCooldown(p, cc); err != nil {
				return nil, err
			}
		}
		if (p.q != nil && p.quota == nil) || (p.a != nil && p.auto == nil) || (p.b != nil && p.budget == nil) || (p.d != nil && p.cooldown == nil) {
			return nil, errors.New("fleetsim: a limiter did not hand over its core")
		}
		s.procs[i] = p
	}
	return s, nil
}

func (s *sim) run() {
	c := s.cfg
	for _, f := range c.Faults {
		s.schedule(f)
	}
	for _, p := range s.procs {
		s.startDemand(p)
	}
	for b := range s.binCap {
		s.q.push(int64(b)*int64(c.Bin), nil, func() { s.sampleBin(b) })
	}
	for s.q.Len() > 0 {
		next := s.q.Pop()
		if next.At > s.end {
			break
		}
		e := next.P
		f := e.f
		if f == nil || (e.p != nil && e.p.dead) {
			continue
		}
		e.f = nil
		s.now = next.At
		s.events++
		f()
	}
	s.now = s.end
}

// sampleBin records, at the start of bin b, the server's capacity and the
// rate the processes pace at: the median of their AutoQuotas' learnt rates
// (one fleet-wide rate, which a process reads before an attempt once what it
// knows is older than the Sync), or the sum of their adaptive buckets' fill
// rates (per-process rates; a bucket not yet on counts 0).
func (s *sim) sampleBin(b int) {
	s.binCap[b] = s.srv.capacityAt(s.now)
	var sum float64
	var rates []float64
	for _, p := range s.procs {
		switch {
		case p.dead:
		case p.auto != nil:
			rates = append(rates, p.auto.Rate())
		case p.aws != nil:
			sum += p.aws.rate()
		}
	}
	if len(rates) > 0 {
		slices.Sort(rates)
		sum = rates[len(rates)/2]
	}
	s.binLearnt[b] = sum
}

// secs is now in seconds of the run.
func (s *sim) secs() float64 { return float64(s.now) / 1e9 }

// measured reports whether now is past the warmup.
func (s *sim) measured() bool { return s.now >= s.warm }

// sample draws a latency (ns) from d.
func (s *sim) sample(d Dist) int64 {
	v := int64(d.Min)
	if d.Mean > d.Min {
		v += int64(s.net.ExpFloat64() * float64(d.Mean-d.Min))
	}
	return v
}

// after runs f after d on behalf of p.
func (s *sim) after(p *proc, d time.Duration, f func()) { s.q.push(s.now+int64(max(d, 0)), p, f) }

// The faults.

func (s *sim) schedule(f Fault) {
	k := f.Procs
	if k == 0 {
		k = len(s.procs)
		if f.Kind == Kill || f.Kind == ClockStep {
			k = 1
		}
	}
	switch f.Kind {
	case Flush, Restart:
		s.q.push(int64(f.At), nil, func() { s.store.Flush() })
	case Kill:
		s.q.push(int64(f.At), nil, func() {
			for _, p := range s.procs[:k] {
				p.dead = true
			}
		})
	case ClockStep:
		s.q.push(int64(f.At), nil, func() {
			for _, p := range s.procs[:k] {
				p.offset += f.Delay
			}
		})
	}
}

// within reports whether t is in the fault's time and p among its
// processes.
func (s *sim) within(f Fault, p *proc, t int64) bool {
	k := f.Procs
	if k == 0 {
		k = len(s.procs)
	}
	if p != nil && p.id >= k {
		return false
	}
	return t >= int64(f.At) && (f.For == 0 || t < int64(f.At+f.For))
}

func (s *sim) partitioned(p *proc, t int64) bool {
	for _, f := range s.cfg.Faults {
		if f.Kind == Partition && s.within(f, p, t) {
			return true
		}
	}
	return false
}

// stalled reports whether Redis is stopped at t, and until when.
func (s *sim) stalled(t int64) (int64, bool) {
	var end int64
	for _, f := range s.cfg.Faults {
		if f.Kind == Stall && s.within(f, nil, t) {
			e := s.end + 1
			if f.For > 0 {
				e = int64(f.At + f.For)
			}
			end = max(end, e)
		}
	}
	return end, end > 0
}

// connected returns when p's first connection is up (SlowConnect), for a
// call it sends at t: 0 if it needs no wait.
func (s *sim) connected(p *proc, t int64) int64 {
	for _, f := range s.cfg.Faults {
		if f.Kind != SlowConnect || (f.Procs > 0 && p.id >= f.Procs) {
			continue
		}
		if p.up == 0 {
			p.up = max(t, int64(f.At)) + int64(f.Delay)
		}
		return p.up
	}
	return 0
}

func (s *sim) down(t int64) bool {
	for _, f := range s.cfg.Faults {
		if f.Kind == Restart && s.within(f, nil, t) {
			return true
		}
	}
	return false
}

// lateBy returns how late the reply to a call p sends at t comes.
func (s *sim) lateBy(p *proc, t int64) time.Duration {
	var d time.Duration
	for i, f := range s.cfg.Faults {
		if f.Kind == SlowReplies && s.within(f, p, t) && (f.Count == 0 || p.late[i] < f.Count) {
			p.late[i]++
			d += f.Delay
		}
	}
	return d
}

// Redis's side: what the calls cost and do to the schedule.

func (s *sim) count(c backend.Call) {
	if !s.measured() {
		return
	}
	switch c.Script {
	case backend.GCRA:
		s.rts.GCRA++
	case backend.GCRAReturn:
		s.rts.GCRAReturn++
	case backend.Budget:
		s.rts.Budget++
	case backend.Cooldown:
		s.rts.Cooldown++
	case backend.Rate:
		s.rts.Rate++
	}
}

// wire gives a limiter's settings the run's logger, unless they name one,
// and the run's observer around their own.
func (s *sim) wire(st *redisretry.Settings, logger *slog.Logger) {
	if st.Logger == nil {
		st.Logger = logger
	}
	st.Observer = s.observer(st.Observer)
}

// observer returns an Observer that records what the Result reports,
// then calls user's (if not nil).
func (s *sim) observer(user redisretry.Observer) redisretry.Observer {
	return func(e redisretry.Event) {
		switch e.Kind {
		case redisretry.EventRecovered:
			at := float64(s.now) / 1e9
			switch e.Limiter {
			case "quota":
				s.recovered.Quota = at
			case "budget":
				s.recovered.Budget = at
			case "cooldown":
				s.recovered.Cooldown = at
			}
		case redisretry.EventCooldownWait:
			s.coolWaitMax = max(s.coolWaitMax, e.Wait)
		}
		if user != nil {
			user(e)
		}
	}
}

func (s *sim) observe(c backend.Call, r backend.Reply) {
	if c.Script == backend.Budget && s.measured() {
		s.budgetCounted += c.BudgetArgs.Add
	}
	if c.Script != backend.GCRA {
		return
	}
	g := r.GCRA
	ahead := g.To - g.Now
	if b := s.bin(s.now); b >= 0 {
		s.binAhead[b] = max(s.binAhead[b], ahead)
	}
	if !s.measured() {
		return
	}
	s.aheadMax = max(s.aheadMax, ahead)
	if g.OK && g.To > g.From {
		s.reserved += g.To - g.From
	}
}

func (s *sim) bin(t int64) int {
	b := int(t / int64(s.cfg.Bin))
	if b >= len(s.binLoad) {
		return -1
	}
	return b
}

// The demand.

func (s *sim) startDemand(p *proc) {
	d := s.cfg.Demand
	if d.Callers > 0 {
		phase := d.Think
		if phase == 0 {
			phase = time.Second
		}
		for i := range d.Callers {
			var at int64
			if !d.Together {
				at = int64(p.rng.Float64() * float64(phase))
			}
			s.q.push(at, p, func() { s.begin(p, i) })
		}
		return
	}
	var first int64
	if !d.Together {
		first = s.gap(p, 0, true)
	}
	s.q.push(first, p, func() { s.arrive(p) })
}

// gap returns the time to the next open-loop arrival after t (ns); first
// is the phase of the first one.
func (s *sim) gap(p *proc, t int64, first bool) int64 {
	d := s.cfg.Demand
	mean := float64(time.Second) / d.Rate
	switch d.Shape {
	case Constant, Bursts:
		if first {
			return int64(p.rng.Float64() * mean)
		}
		return int64(mean)
	case Jittered:
		if first {
			return int64(p.rng.Float64() * mean)
		}
		return int64((0.5 + p.rng.Float64()) * mean)
	case Ramp:
		// Thinning: candidates at the final rate, each kept with the
		// probability of the rate at its time.
		g := int64(0)
		for {
			g += int64(p.rng.ExpFloat64() * mean)
			if t+g > s.end || p.rng.Float64()*float64(s.end) < float64(t+g) {
				return g
			}
		}
	}
	return int64(p.rng.ExpFloat64() * mean)
}

func (s *sim) arrive(p *proc) {
	n := 1
	if s.cfg.Demand.Shape == Bursts {
		n = s.cfg.Demand.Size
	}
	for range n {
		s.begin(p, -1)
	}
	s.q.push(s.now+max(s.gap(p, s.now, false), 1), p, func() { s.arrive(p) })
}

// A call: the retry loop of the core (retry.Run's steps, as a loop that
// drives Policy.Next does), with the fleet's pacers asked as retry.Pacers
// asks them (the cooldown, then after its wait the quota) and the budget
// asked after Next.

type call struct {
	p        *proc
	caller   int   // closed-loop caller, -1 open loop
	begun    int64 // ns
	deadline int64 // ns, 0 none
	attempt  int   // attempts made
	prev     time.Duration
	measured bool
	meetable bool // the reference queue would have started it in time
	clear    bool // ... at least one slot (the quota's interval) before its deadline
}

// outcome is how a call ended.
type outcome uint8

const (
	ok outcome = iota
	refusedDeadline
	refusedMeetable
	refusedClear
	refusedSaturated
	refusedOther
	gaveUp
	expired
)

func (s *sim) begin(p *proc, caller int) {
	c := &call{p: p, caller: caller, begun: s.now, measured: s.measured()}
	if d := s.cfg.Demand.Deadline; d > 0 {
		c.deadline = s.now + int64(d)
	}
	if c.measured {
		s.calls++
	}
	// The reference: one first-come-first-served queue at the quota's rate
	// for the whole fleet, with no slot wasted, would it start this call
	// before its deadline?
	start := max(s.ideal, s.now)
	if c.deadline == 0 || start < c.deadline {
		c.meetable = true
		c.clear = c.deadline == 0 || start+s.slot*1000 <= c.deadline
		s.ideal = start + s.slot*1000
	}
	if c.measured {
		p.calls++
	}
	if p.budget != nil {
		p.budget.Admit(false, time.Time{}, func(bool) {}) // counts the request; never refuses
	}
	s.pace(c)
}

// dl is c's deadline on its process's clock (zero for none).
func (s *sim) dl(c *call) time.Time {
	if c.deadline == 0 {
		return time.Time{}
	}
	return c.p.Now().Add(time.Duration(c.deadline - s.now))
}

// pace asks the pacers for the next attempt's start.
func (s *sim) pace(c *call) {
	p := c.p
	if p.cooldown == nil {
		s.askQuota(c)
		return
	}
	p.cooldown.Reserve(p.Now(), s.dl(c), func(t time.Time, err error) {
		if err != nil {
			s.refused(c, err)
			return
		}
		if d := t.Sub(p.Now()); d > 0 {
			if c.deadline != 0 && !t.Before(s.dl(c)) {
				s.refused(c, retry.ErrPastDeadline)
				return
			}
			s.after(p, d, func() { s.askQuota(c) })
			return
		}
		s.askQuota(c)
	})
}

func (s *sim) askQuota(c *call) {
	p := c.p
	if p.aws != nil {
		d := p.aws.acquire(s.secs())
		if c.deadline != 0 && s.now+int64(d) >= c.deadline {
			p.aws.giveBack()
			s.refused(c, retry.ErrPastDeadline)
			return
		}
		s.after(p, d, func() { s.send(c) })
		return
	}
	reserve := func(done func(time.Time, error)) { p.quota.Reserve(1, p.Now(), s.dl(c), done) }
	switch {
	case p.auto != nil:
		reserve = func(done func(time.Time, error)) { p.auto.Reserve(p.Now(), s.dl(c), done) }
	case p.quota == nil:
		s.send(c)
		return
	}
	reserve(func(t time.Time, err error) {
		if err != nil {
			s.refused(c, err)
			return
		}
		d := t.Sub(p.Now())
		if c.deadline != 0 && s.now+int64(max(d, 0)) >= c.deadline {
			s.refused(c, retry.ErrPastDeadline) // the loop's own check (pace)
			return
		}
		s.after(p, d, func() { s.send(c) })
	})
}

// refused ends c before an attempt: a pacer refused it.
func (s *sim) refused(c *call, err error) {
	if c.p.budget != nil {
		c.p.budget.Cancel(c.attempt > 0) // the loop gives back what was admitted
	}
	o := refusedOther
	if errors.Is(err, redisretry.ErrSaturated) {
		o = refusedSaturated
	}
	if errors.Is(err, retry.ErrPastDeadline) {
		o = refusedDeadline
		switch {
		case c.clear:
			o = refusedClear
		case c.meetable:
			o = refusedMeetable
		}
	}
	s.finish(c, o)
}

func (s *sim) send(c *call) {
	c.attempt++
	p := c.p
	if s.measured() {
		s.attempts++
		p.admitted++
	}
	if c.attempt == 1 && c.measured {
		s.admitted++
		p.firsts++
		s.waits = append(s.waits, s.now-c.begun)
	}
	s.starts = append(s.starts, s.now)
	if b := s.bin(s.now); b >= 0 {
		s.binStarts[b]++
	}
	s.q.push(s.now+s.sample(s.cfg.Server.Latency), nil, func() { s.atServer(c) })
}

func (s *sim) atServer(c *call) {
	t := s.now
	s.arrivals = append(s.arrivals, t)
	b := s.bin(t)
	if b >= 0 {
		s.binLoad[b]++
	}
	var served bool
	var hint time.Duration
	overloaded := false
	for _, f := range s.cfg.Faults {
		if f.Kind == Overload && s.within(f, nil, t) {
			overloaded, hint = true, f.Delay
		}
	}
	if !overloaded {
		served, hint = s.srv.decide(t)
	}
	back := s.sample(s.cfg.Server.Latency)
	if served {
		back += int64(s.cfg.Server.Service)
		if b >= 0 {
			s.binServed[b]++
		}
	} else {
		if s.measured() {
			s.rejected++
		}
		if b >= 0 {
			s.binRejects[b]++
		}
	}
	at := t + back
	if c.deadline != 0 && at > c.deadline {
		// The call's context ends first: the attempt is cut short.
		s.q.push(max(c.deadline, t), c.p, func() {
			if c.p.auto != nil {
				c.p.auto.Record(context.DeadlineExceeded, func() {}) // the loop's Pacer.Record
			}
			if c.p.budget != nil {
				c.p.budget.Record(false)
			}
			s.finish(c, expired)
		})
		return
	}
	s.q.push(at, c.p, func() { s.replied(c, served, hint) })
}

// errQuota is a 429 as the loop sees it from httpretry, wrapped by
// retry.After with the server's RetryInfo as httpretry passes it on.
var errQuota error = &httpretry.AttemptError{Method: "POST", URL: "https://api.example/v1:generateContent", Status: 429, Class: httpretry.ClassStatus}

func (s *sim) replied(c *call, served bool, hint time.Duration) {
	p := c.p
	if p.aws != nil {
		p.aws.update(s.secs(), !served)
	}
	if served {
		if p.auto != nil {
			p.auto.Record(nil, func() {})
		}
		if p.budget != nil {
			p.budget.Record(true)
		}
		s.finish(c, ok)
		return
	}
	err := errQuota
	if hint > 0 {
		err = retry.After(errQuota, hint)
	}
	next := func() {
		step := p.policy.Next(c.attempt, c.prev, err, p.Now(), s.dl(c))
		if p.budget != nil {
			p.budget.Record(false) // Next records the failure with the policy's budget
		}
		if step.Reason != retry.ReasonNone {
			s.finish(c, gaveUp)
			return
		}
		admitted := func() {
			c.prev = step.Shaped
			s.after(p, step.Wait, func() { s.pace(c) })
		}
		if p.budget == nil {
			admitted()
			return
		}
		p.budget.Admit(true, s.dl(c), func(ok bool) {
			if !ok {
				s.finish(c, gaveUp)
				return
			}
			admitted()
		})
	}
	if p.auto != nil {
		p.auto.Record(err, func() {}) // the loop's Pacer.Record: a 429 cuts the fleet's rate
	}
	if p.cooldown != nil {
		p.cooldown.Record(err, next) // the loop's Pacer.Record, which publishes the hint
		return
	}
	next()
}

func (s *sim) finish(c *call, o outcome) {
	if c.measured {
		switch o {
		case ok:
			s.succeeded++
		case refusedDeadline:
			s.refusedDeadline++
		case refusedMeetable:
			s.refusedDeadline++
			s.refusedMeetable++
		case refusedClear:
			s.refusedDeadline++
			s.refusedMeetable++
			s.refusedClear++
		case refusedSaturated:
			s.refusedSaturated++
		case refusedOther:
			s.refusedOther++
		case gaveUp:
			s.gaveUp++
		case expired:
			s.expired++
		}
	}
	if c.caller < 0 {
		return
	}
	d := s.cfg.Demand
	wait := d.Think
	switch {
	case c.attempt == 0:
		wait = d.Pause
	case d.Shape == Poisson:
		wait = time.Duration(c.p.rng.ExpFloat64() * float64(wait))
	case d.Shape == Jittered:
		wait = time.Duration((0.5 + c.p.rng.Float64()) * float64(wait))
	}
	p, i := c.p, c.caller
	s.after(p, wait, func() { s.begin(p, i) })
}

// result computes the Result.
func (s *sim) result() *Result {
	c := s.cfg
	r := &Result{
		Name: c.Name, Processes: c.Processes, Seconds: c.Duration.Seconds(), Measured: (c.Duration - c.Warmup).Seconds(),
		QuotaRate: s.rate, Quota: s.pacing(), Events: s.events, Seed: c.Seed,
		Calls: s.calls, Admitted: s.admitted, Succeeded: s.succeeded,
		RefusedDeadline: s.refusedDeadline, RefusedMeetable: s.refusedMeetable, RefusedClear: s.refusedClear, RefusedSaturated: s.refusedSaturated, RefusedOther: s.refusedOther,
		GaveUp: s.gaveUp, Expired: s.expired, Attempts: s.attempts, Rejected: s.rejected,
		RoundTrips: s.rts, BinS: c.Bin.Seconds(),
	}
	r.Offered = float64(s.calls) / r.Measured
	if m := min(r.Offered, s.rate); m > 0 {
		r.Utilisation = float64(s.attempts) / r.Measured / m
	}
	if s.calls > 0 {
		r.RefusedShare = float64(s.refusedDeadline) / float64(s.calls)
		r.MeetableShare = float64(s.refusedMeetable) / float64(s.calls)
		r.ClearShare = float64(s.refusedClear) / float64(s.calls)
	}
	r.WaitP50 = time.Duration(quantile(s.waits, 0.5)).Seconds()
	r.WaitP99 = time.Duration(quantile(s.waits, 0.99)).Seconds()
	per := make([]int64, len(s.procs))
	for i, p := range s.procs {
		per[i] = p.admitted
		for _, st := range []redisretry.Stats{statsOf(p.q), statsOf(p.a), statsOf(p.b), statsOf(p.d)} {
			r.Fallbacks += st.Fallbacks
			r.Local += st.Local
			r.Errors += st.Errors
		}
	}
	r.Jain = jain(per)
	var shares []float64
	for _, p := range s.procs {
		if p.calls > 0 {
			shares = append(shares, float64(p.firsts)/float64(p.calls))
		}
	}
	r.JainShare = jainF(shares)
	r.BudgetCounted, r.CooldownWaitMax, r.Recovered = s.budgetCounted, s.coolWaitMax.Seconds(), s.recovered
	for _, p := range s.procs {
		if (p.q != nil && p.q.State() == redisretry.StateFallback) || (p.a != nil && p.a.State() == redisretry.StateFallback) {
			r.InFallback.Quota++
		}
		if p.b != nil && p.b.State() == redisretry.StateFallback {
			r.InFallback.Budget++
		}
		if p.d != nil && p.d.State() == redisretry.StateFallback {
			r.InFallback.Cooldown++
		}
	}
	sec := int64(time.Second)
	limit := s.rate * 1.02
	period := time.Second
	if c.Quota != nil {
		period = c.Quota.Limit.Period
		r.Lease = c.Quota.Lease
	}
	if c.Auto != nil {
		r.Lease = c.Auto.Lease
	}
	r.MaxSecond, r.MaxPeriod = maxIn(s.arrivals, sec), maxIn(s.arrivals, int64(period))
	r.SecondsOver = over(s.arrivals, limit)
	r.MaxSecondStarts, r.SecondsOverStarts = maxIn(s.starts, sec), over(s.starts, limit)
	if s.attempts > 0 {
		r.PerAttempt = float64(s.rts.Total()) / float64(s.attempts)
		if c.Quota != nil {
			r.SlotsPerAttempt = float64(s.reserved) / float64(s.slot) / float64(s.attempts)
		}
	}
	r.AheadMax = float64(s.aheadMax) / 1e6
	r.LogLines, r.Unavailable = s.log.lines, s.log.unavailable
	bin := c.Bin.Seconds()
	for i := range s.binLoad {
		if int64(i)*int64(c.Bin) >= s.end {
			break
		}
		r.Load = append(r.Load, float64(s.binLoad[i])/bin)
		r.Rejects = append(r.Rejects, float64(s.binRejects[i])/bin)
		r.Starts = append(r.Starts, float64(s.binStarts[i])/bin)
		r.Ahead = append(r.Ahead, float64(s.binAhead[i])/1e6)
		r.Goodput = append(r.Goodput, float64(s.binServed[i])/bin)
		if len(c.Server.Capacity) > 0 {
			r.Capacity = append(r.Capacity, s.binCap[i])
		}
		if c.Auto != nil || c.Adaptive {
			r.Learnt = append(r.Learnt, s.binLearnt[i])
		}
	}
	r.Steps = s.steps()
	return r
}

// pacing names how the processes pace: the Quota's Limit, "auto" (an
// AutoQuota, "auto:" and its Ceiling if set), "adaptive" or "none".
func (s *sim) pacing() string {
	c := s.cfg
	switch {
	case c.Quota != nil:
		return c.Quota.Limit.String()
	case c.Auto != nil && c.Auto.Ceiling != (redisretry.Limit{}):
		return "auto:" + c.Auto.Ceiling.String()
	case c.Auto != nil:
		return "auto"
	case c.Adaptive:
		return "adaptive"
	}
	return "none"
}

// statsOf returns the Stats of a process's limiter, or none when the run
// has no such limiter (l is nil).
func statsOf[L any, P interface {
	*L
	Stats() redisretry.Stats
}](l P) redisretry.Stats {
	if l == nil {
		return redisretry.Stats{}
	}
	return l.Stats()
}

// apiServer answers within its capacity per sliding window, 429 beyond.
type apiServer struct {
	window   int64
	steps    []capStep // the capacity from each step's time on
	capacity int       // now
	answered []int64   // times of the requests answered in the window, oldest first
	head     int
}

// capStep is a capacity per window from at (ns) on, and per second.
type capStep struct {
	at        int64
	capacity  int
	perSecond float64
}

// newAPIServer returns the server of c: its Capacity's steps, else the
// quota's Limit.
func newAPIServer(c Server, q *redisretry.QuotaConfig) apiServer {
	a := apiServer{window: int64(c.Window)}
	per := func(ps float64) int {
		return max(int(math.Ceil(ps*c.Window.Seconds()*(1+c.Grace))), 1)
	}
	if len(c.Capacity) == 0 {
		ps := float64(q.Limit.Rate) / q.Limit.Period.Seconds()
		capacity := math.Ceil(float64(q.Limit.Rate) * float64(c.Window) / float64(q.Limit.Period) * (1 + c.Grace))
		a.steps = []capStep{{0, max(int(capacity), 1), ps}}
	}
	for _, st := range c.Capacity {
		a.steps = append(a.steps, capStep{int64(st.At), per(st.PerSecond), st.PerSecond})
	}
	a.capacity = a.steps[0].capacity
	return a
}

// capacityAt returns the capacity per second at t.
func (a *apiServer) capacityAt(t int64) float64 {
	ps := a.steps[0].perSecond
	for _, st := range a.steps {
		if st.at <= t {
			ps = st.perSecond
		}
	}
	return ps
}

// decide answers a request arriving at t: served, or a 429 whose RetryInfo
// is the time until the oldest answered request leaves the window.
func (a *apiServer) decide(t int64) (bool, time.Duration) {
	for len(a.steps) > 1 && a.steps[1].at <= t {
		a.steps = a.steps[1:]
		a.capacity = a.steps[0].capacity
	}
	for a.head < len(a.answered) && t-a.answered[a.head] >= a.window {
		a.head++
	}
	if a.head > 4096 && a.head > len(a.answered)/2 {
		a.answered = append(a.answered[:0], a.answered[a.head:]...)
		a.head = 0
	}
	if len(a.answered)-a.head < a.capacity {
		a.answered = append(a.answered, t)
		return true, 0
	}
	return false, time.Duration(a.answered[a.head] + a.window - t)
}

// logCounter is the slog handler of limiters whose config has no Logger: it
// counts the lines.
type logCounter struct{ lines, unavailable int64 }

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.lines++
	if r.Message == "redisretry: Redis unavailable, deciding without it" {
		l.unavailable++
	}
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }
