package redisretry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// Defaults of an [AutoQuotaConfig].
const (
	// DefaultAutoBeta is the factor of a cut. TCP CUBIC and the AWS SDKs'
	// adaptive mode use 0.7; one rate for a whole fleet is cut by every
	// process's 429s, and 0.8 kept more of the capacity in the fleet
	// harness (docs/fleet.md).
	DefaultAutoBeta = 0.8
	// DefaultAutoRecovery is how long a cut rate, used all the while,
	// takes to climb back to where it was cut.
	DefaultAutoRecovery = 3 * time.Second
	// DefaultAutoSync is how old the learnt rate a process paces at may
	// be: a process reads it again (one Redis call) before an attempt once
	// it is older.
	DefaultAutoSync = 100 * time.Millisecond
	// DefaultAutoSlack is the AutoQuota's QuotaConfig.Slack: a fiftieth of
	// a second, as a quota of so many per second has.
	DefaultAutoSlack = 20 * time.Millisecond
	// DefaultAutoMaxWait is the longest an attempt waits for the learnt
	// rate's schedule.
	DefaultAutoMaxWait = 250 * time.Millisecond
	// DefaultAutoTTL is how long the fleet's learnt rate is kept in Redis
	// after its last use: a fleet that comes back later starts again at
	// the ceiling.
	DefaultAutoTTL = 24 * time.Hour
)

// The bounds of the learnt rate.
var (
	// DefaultAutoCeiling is the highest rate, and the first, when
	// AutoQuotaConfig.Ceiling is zero: 10,000 requests a second.
	DefaultAutoCeiling = PerSecond(10_000)
	// DefaultAutoFloor is the lowest rate when AutoQuotaConfig.Floor is
	// zero: one request a second for the whole fleet.
	DefaultAutoFloor = PerSecond(1)
	// MaxAutoRate and MinAutoRate bound any Ceiling and Floor: a million
	// requests a second (one per microsecond of the schedule) and one an
	// hour.
	MaxAutoRate = PerSecond(1_000_000)
	MinAutoRate = Limit{Rate: 1, Period: time.Hour}
)

// autoUnit is the limit of an AutoQuota's schedule: one unit is one
// microsecond of it, and a request at the learnt rate r costs 1e6/r units.
var autoUnit = Limit{Rate: 3_600_000_000, Period: time.Hour}

// AutoQuotaConfig configures an [AutoQuota]. Key is required; every other
// field's zero value is the documented default.
type AutoQuotaConfig struct {
	// Settings are the fields every limiter has: Key (required; it names
	// the fleet's shared capacity, e.g. "myproject:gemini-2.5-flash:global";
	// the Redis keys are "{Key}:rate", the learnt rate, and "{Key}:quota"
	// and "{Key}:quota:members", the schedule, as a Quota's: do not give a
	// Quota the same Key), Timeout, ProbeInterval, OnFailure (FailLocal:
	// the schedule decides at this process's share, and the rate is
	// learnt by this process alone: AIMD, cut by Beta on its own 429s,
	// grown linearly back over Recovery, from the fleet's last one),
	// Logger, Observer (the schedule's events, Limiter "quota"; the
	// learnt rate's, Limiter "rate": EventRate on every cut and every
	// growth of 5 % or more, with Event.Rate; fallbacks and recoveries)
	// and Now.
	Settings

	// Ceiling is the highest rate the fleet learns, and where it starts
	// (before its first 429 the fleet knows nothing better), e.g.
	// PerSecond(100) or ParseLimit("100/1s"). The zero Limit means
	// DefaultAutoCeiling, 10,000 a second. At most MaxAutoRate.
	Ceiling Limit

	// Floor is the lowest rate the fleet learns: however many 429s come,
	// the fleet still sends this much (each attempt's retries back off as
	// the Policy says). The zero Limit means DefaultAutoFloor, 1 a second.
	// At least MinAutoRate, at most the Ceiling.
	Floor Limit

	// Beta is the factor of a cut: a 429 of an attempt paced at the
	// current rate sets the rate to Beta times it (or times the fleet's
	// measured send rate, when the rate is not used: see AutoQuota). 0
	// means 0.8; it must be above 0 and below 1.
	Beta float64

	// Recovery is how long the rate, once cut and used all the while,
	// takes to climb back to where it was cut (CUBIC's concave curve,
	// scaled to the rate); it then grows on past it, doubling every
	// Recovery until a 429 comes. 0 means 3 s. It must be between 10 ms
	// and 1 h.
	Recovery time.Duration

	// Sync is how old the learnt rate a process paces at may be: an
	// attempt that finds it older waits for one Redis call that reads it
	// (and reports what the process sent). 0 means 100 ms; at most 1 m.
	Sync time.Duration

	// MaxWait is the longest an attempt waits for its slot: one that
	// would wait longer is refused at once with an error wrapping
	// [ErrSaturated] (the loop gives up with retry.ReasonThrottled). A
	// slot is placed at the rate when it is taken: a longer queue would
	// hold slots placed at a rate since cut, and the fleet would react to
	// a 429 only once they are used. 0 means 250 ms; at most 1 m.
	MaxWait time.Duration

	// Congested reports whether an attempt's error says the shared
	// capacity is full. nil means [Congested]: an HTTP 429.
	Congested func(error) bool

	// Slack, Lease and FleetSize are the schedule's, as in QuotaConfig.
	// Slack 0 means 20 ms (DefaultAutoSlack; negative: none, at most 1 s);
	// Lease 0 means 20 requests, growing to 80 as this process's demand
	// falls below the learnt rate (as in QuotaConfig); FleetSize 0 means
	// counted in Redis.
	Slack     time.Duration
	Lease     int64
	FleetSize int
}

// perSecondMicro returns l's rate in micro-requests per second, rounded
// down (at least 1).
func perSecondMicro(l Limit) int64 {
	q, _, ok := mulDiv(uint64(l.Rate), 1e15, uint64(l.Period))
	if !ok {
		return math.MaxInt64
	}
	return max(int64(q), 1)
}

// Validate reports the first invalid field of c, naming it and its value.
func (c AutoQuotaConfig) Validate() error {
	if err := c.Settings.validate("AutoQuotaConfig"); err != nil {
		return err
	}
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("redisretry: invalid AutoQuotaConfig.%s = %v: %s", field, v, want)
	}
	lo, hi := perSecondMicro(MinAutoRate), perSecondMicro(MaxAutoRate)
	for _, f := range []struct {
		name string
		l    Limit
	}{{"Ceiling", c.Ceiling}, {"Floor", c.Floor}} {
		if f.l == (Limit{}) {
			continue
		}
		if err := f.l.validate("AutoQuotaConfig." + f.name); err != nil {
			return err
		}
		if r := perSecondMicro(f.l); r < lo || r > hi || f.l.Burst > 1 {
			return bad(f.name, f.l, "must be from 1/1h to 1000000/1s, burst 1 (the learnt rate paces; it has no burst)")
		}
	}
	ceil, floor := c.bounds()
	switch {
	case ceil < floor:
		return bad("Ceiling", c.ceiling(), fmt.Sprintf("must not be below the Floor (%v)", c.floor()))
	case math.IsNaN(c.Beta) || c.Beta < 0 || c.Beta >= 1:
		return bad("Beta", c.Beta, "must be above 0 and below 1, the factor of a cut (0 means 0.8)")
	case c.Recovery != 0 && (c.Recovery < 10*time.Millisecond || c.Recovery > time.Hour):
		return bad("Recovery", c.Recovery, "must be from 10ms to 1h (0 means 3s)")
	case c.MaxWait < 0 || c.MaxWait > time.Minute:
		return bad("MaxWait", c.MaxWait, "must be from 0 (250ms) to 1m")
	case c.Sync < 0 || c.Sync > time.Minute:
		return bad("Sync", c.Sync, "must be from 0 (100ms) to 1m")
	case c.Slack > time.Second:
		return bad("Slack", c.Slack, "must be at most 1s (0 means 20ms, negative none)")
	case c.Lease < 0:
		return bad("Lease", c.Lease, fmt.Sprintf("must not be negative (0 means %d)", DefaultQuotaLease))
	case c.FleetSize < 0:
		return bad("FleetSize", c.FleetSize, "must not be negative (0 means counted in Redis)")
	}
	return nil
}

func (c AutoQuotaConfig) ceiling() Limit {
	if c.Ceiling == (Limit{}) {
		return DefaultAutoCeiling
	}
	return c.Ceiling
}

func (c AutoQuotaConfig) floor() Limit {
	if c.Floor == (Limit{}) {
		return DefaultAutoFloor
	}
	return c.Floor
}

// bounds returns the ceiling and the floor in µreq/s.
func (c AutoQuotaConfig) bounds() (ceil, floor int64) {
	return perSecondMicro(c.ceiling()), perSecondMicro(c.floor())
}

// ErrSaturated is wrapped by the error of an attempt an [AutoQuota] refused
// because its slot was more than AutoQuotaConfig.MaxWait away: the fleet
// asks for more than the rate it learnt.
var ErrSaturated = errors.New("redisretry: the fleet's learnt rate is saturated")

// Congested reports whether err says that a shared capacity is full: its
// chain holds an [httpretry.AttemptError] of status 429, or an error with a
// method HTTPCode() int or StatusCode() int that returns 429. It is
// AutoQuotaConfig.Congested's default. (For gRPC, set Congested to a
// function that checks for codes.ResourceExhausted.)
func Congested(err error) bool {
	if err == nil {
		return false
	}
	var ae *httpretry.AttemptError
	if errors.As(err, &ae) && ae.Status == 429 {
		return true
	}
	var h interface{ HTTPCode() int }
	if errors.As(err, &h) && h.HTTPCode() == 429 {
		return true
	}
	var s interface{ StatusCode() int }
	return errors.As(err, &s) && s.StatusCode() == 429
}

// AutoQuota keeps a fleet of processes under a capacity that has no number,
// such as Vertex AI's Standard PayGo, where the pool is shared and a 429
// means it is busy now: the fleet learns one rate from its 429s, kept in
// Redis, and every process paces on one GCRA schedule at it (a [Quota]'s
// schedule, lease and fallback; see "How the lease works" there). Set it as
// [retry.Policy.Pacer], after a [Cooldown] with [retry.Pacers]; a [Budget]
// composes with it as with a Quota.
//
// The rate starts at the Ceiling (before its first 429 the fleet knows
// nothing better: it sends what it asks for, up to that). A 429 of an attempt
// paced at the current rate cuts it to Beta (0.8) times itself (or times the
// fleet's send rate measured over the last second, when the rate is not
// used: the fleet sent less than half of it and was held back by it less
// than half of that second), and starts a new epoch: the 429s of attempts
// paced before the cut do not cut again, so the rate is cut at most once per
// reaction of the fleet (the time an attempt paced at the new rate takes to
// come back), not once per process that saw a 429. While the fleet uses the
// rate (some process waited for the schedule), it grows back by a
// scale-free CUBIC curve, rate(t) = wmax × (1 − (1−Beta)(1 − t/Recovery)³):
// back where it was cut after Recovery (3 s) of use, flat there; then,
// with no 429 since, past it, doubling every Recovery (the capacity is
// above where it was; the overshoot is what the rate grows in one
// reaction). A rate the fleet does not use does not grow. Each process reads the rate (one Redis call, which also reports what
// it sent and whether it was held back) before an attempt once what it knows
// is older than Sync (100 ms), and reports a 429 at once.
//
// Bounds: the learnt rate is never below the Floor (default 1 a second,
// at least one an hour) nor above the Ceiling (default 10,000 a second, at
// most a million): never zero, never infinite. A request takes 1e6/rate
// microseconds of the schedule, rounded up (at 10,000 a second, steps of
// 1 %).
//
// Without Redis (down, slower than the Timeout) the process learns on its
// own from the fleet's last rate: its 429s cut it by Beta (once per epoch of
// its own), and it grows linearly back over Recovery while used (AIMD); the
// schedule decides by OnFailure (by default at this process's share of the
// rate). It logs one line, and goes back to the fleet's rate when a probe
// (every ProbeInterval) is answered.
//
// An AutoQuota is safe for concurrent use.
type AutoQuota struct {
	g         guard
	q         *Quota
	key       string
	args      backend.RateArgs // the template of every call
	sync      time.Duration
	maxWait   time.Duration
	recovery  time.Duration
	beta      float64
	congested func(error) bool

	mu        sync.Mutex
	rate      int64         // µreq/s paced at now
	epoch     int64         // cuts known (the fleet's, or this process's without Redis)
	serverNow int64         // the server's time of the reply the rate came from (µs): replies are taken in its order
	syncedAt  time.Time     // when that reply came
	syncing   bool          // a read is in flight
	waiters   []func()      // attempts waiting for it
	used      bool          // held back since the last call (sent with it)
	held      time.Duration // how long, in all: the waits for slots, MaxWait for a refusal
	sent      int64         // attempts started since the last call
	served    int64         // attempts paced here that ended since the last call without a 429
	rejected  int64         // and with one
	reported  int64         // the last epoch whose 429 this process reported
	pending   []epochCount
	// Without Redis: this process's AIMD.
	localUsed bool
	localAt   time.Time
	wmax      int64 // the rate at the last cut (µreq/s), for the slope
	// What the observer and the log were last told.
	emitted, logged, emittedEpoch int64
}

// epochCount is how many attempts started under an epoch have not been
// recorded yet.
type epochCount struct{ epoch, n int64 }

// NewAutoQuota returns an AutoQuota on client (a *redis.Client,
// ClusterClient, Ring or any redis.Scripter) configured by c. Like NewQuota
// it does not wait for the network. It returns c's validation error, or an
// error if client is nil.
func NewAutoQuota(client redis.Scripter, c AutoQuotaConfig) (*AutoQuota, error) {
	if client == nil {
		return nil, errors.New("redisretry: NewAutoQuota: nil client")
	}
	return newAutoQuotaOn(envFor(client, c.Now), c)
}

func newAutoQuotaOn(e env, c AutoQuotaConfig) (*AutoQuota, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	slack := c.Slack
	if slack == 0 {
		slack = DefaultAutoSlack
	}
	inner := e
	inner.sim = nil // the harness gets the AutoQuota's core, not the schedule's
	q, err := newQuotaOn(inner, QuotaConfig{
		Settings: c.Settings, Limit: autoUnit, Lease: c.Lease, Slack: slack, FleetSize: c.FleetSize,
	})
	if err != nil {
		return nil, err
	}
	ceil, floor := c.bounds()
	a := &AutoQuota{
		q: q, key: backend.RateKey(c.Key), sync: c.Sync, recovery: c.Recovery, beta: c.Beta, congested: c.Congested,
		rate: ceil, reported: -1, emitted: ceil, logged: ceil,
	}
	if a.sync == 0 {
		a.sync = DefaultAutoSync
	}
	if a.maxWait = c.MaxWait; a.maxWait == 0 {
		a.maxWait = DefaultAutoMaxWait
	}
	if a.recovery == 0 {
		a.recovery = DefaultAutoRecovery
	}
	if a.beta == 0 {
		a.beta = DefaultAutoBeta
	}
	if a.congested == nil {
		a.congested = Congested
	}
	a.args = backend.RateArgs{
		Beta: int64(math.Round(a.beta * 1e6)), Recovery: us(a.recovery),
		Floor: floor, Ceiling: ceil, TTL: DefaultAutoTTL.Milliseconds(),
	}
	a.wmax = ceil
	a.g.common = newCommon("rate", c.Key, c.Timeout, c.ProbeInterval, c.OnFailure, c.Logger, c.Observer, e)
	e.attach(autoCore{a})
	return a, nil
}

// autoCore is the AutoQuota's asynchronous core, for the fleet harness.
type autoCore struct{ a *AutoQuota }

func (c autoCore) Reserve(earliest, deadline time.Time, done func(time.Time, error)) {
	c.a.reserveAsync(earliest, deadline, done)
}

func (c autoCore) Record(err error, done func()) { c.a.record(err); done() }

func (c autoCore) Rate() float64 { return c.a.Rate() }

// Rate returns the learnt rate this process paces at, in requests per
// second.
func (a *AutoQuota) Rate() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return float64(a.rate) / 1e6
}

// Reserve implements [retry.Pacer]: it takes a slot of the fleet's schedule
// for an attempt that could start at earliest, at the learnt rate, and
// returns when the attempt may start; see [Quota.Reserve] for the deadline,
// ctx and the errors. When the rate this process knows is older than Sync,
// it first reads it (one Redis call, at most the Timeout, never past
// deadline nor after ctx ends). [WithCost] is not used: the rate is of
// attempts.
func (a *AutoQuota) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	if ctx.Err() != nil {
		return time.Time{}, context.Cause(ctx)
	}
	ready := make(chan struct{})
	a.freshen(func() { close(ready) })
	select {
	case <-ready:
	default:
		if err := a.awaitRead(ctx, ready, deadline); err != nil {
			return time.Time{}, err
		}
	}
	cost, epoch := a.costNow()
	s := a.q.steady
	dl, capped := a.capped(earliest, deadline)
	t, err := a.q.reserve(ctx, cost, s.in(earliest), s.in(dl))
	t, err = s.out(t), a.saturated(err, capped)
	a.reserved(epoch, earliest, t, err)
	return t, err
}

// capped returns the deadline of the schedule's reservation: deadline, or
// MaxWait after earliest (or now) if that comes first (capped).
func (a *AutoQuota) capped(earliest, deadline time.Time) (time.Time, bool) {
	c := later(earliest, a.g.now()).Add(a.maxWait)
	if deadline.IsZero() || c.Before(deadline) {
		return c, true
	}
	return deadline, false
}

// saturated turns the schedule's error past a capped deadline into one
// wrapping ErrSaturated.
func (a *AutoQuota) saturated(err error, capped bool) error {
	if err == nil || !capped || !errors.Is(err, retry.ErrPastDeadline) {
		return err
	}
	return fmt.Errorf("%w: the next slot is more than MaxWait (%v) away", ErrSaturated, a.maxWait)
}

// awaitRead waits for the read of the rate: until ready is closed, ctx ends
// or the deadline (zero: none) comes.
func (a *AutoQuota) awaitRead(ctx context.Context, ready <-chan struct{}, deadline time.Time) error {
	var dl <-chan time.Time
	if !deadline.IsZero() {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		dl = timer.C
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-dl:
		return fmt.Errorf("redisretry: the fleet's learnt rate got no answer from Redis before the deadline: %w", retry.ErrPastDeadline)
	}
}

func (a *AutoQuota) reserveAsync(earliest, deadline time.Time, done func(time.Time, error)) {
	a.freshen(func() {
		cost, epoch := a.costNow()
		s := a.q.steady
		dl, capped := a.capped(earliest, deadline)
		a.q.reserveAsync(cost, s.in(earliest), s.in(dl), false, func(t time.Time, err error) {
			t, err = s.out(t), a.saturated(err, capped)
			a.reserved(epoch, earliest, t, err)
			done(t, err)
		})
	})
}

// costNow returns the units (µs of the schedule) a request takes at the
// rate paced at now, and its epoch.
func (a *AutoQuota) costNow() (int64, int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := (1_000_000_000_000 + a.rate - 1) / a.rate
	return min(max(c, 1), autoUnit.Rate), a.epoch
}

// reserved counts an attempt let start at t under epoch (or refused with
// err): what the next call reports.
func (a *AutoQuota) reserved(epoch int64, earliest, t time.Time, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if errors.Is(err, retry.ErrPastDeadline) || errors.Is(err, ErrSaturated) {
			a.used, a.localUsed = true, true
			a.held += a.maxWait // it would have waited longer
		}
		return
	}
	if t.After(earliest) {
		a.used, a.localUsed = true, true
		a.held += t.Sub(earliest)
	}
	a.sent++
	n := len(a.pending)
	switch {
	case n > 0 && a.pending[n-1].epoch == epoch:
		a.pending[n-1].n++
		return
	case n > 0 && a.pending[n-1].epoch > epoch:
		// The epochs started again (the rate's key was lost): the
		// attempts outstanding are of another count.
		a.pending = a.pending[:0]
	case n >= maxPending:
		a.pending = a.pending[:copy(a.pending, a.pending[1:])]
	}
	a.pending = append(a.pending, epochCount{epoch, 1})
}

// maxPending is how many epochs an AutoQuota keeps counts of attempts
// outstanding for: an attempt outstanding over more cuts than that is
// counted as of a later epoch.
const maxPending = 64

// freshen calls then once the rate is fresh enough to pace at: at once
// if it is (or Redis is unavailable: then this process's own rate grows),
// else when the read in flight (started if none) is answered or fails.
func (a *AutoQuota) freshen(then func()) {
	now := a.g.now()
	a.mu.Lock()
	switch {
	case State(a.g.state.Load()) == StateClosed:
	case !a.g.healthy():
		a.growLocally(now)
		a.mu.Unlock()
		a.g.probe(func() backend.Call {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.callLocked(-1)
		}, func(r backend.Reply) { a.replied(r.Rate, nil, false) })
		then()
		return
	case !a.syncedAt.IsZero() && now.Sub(a.syncedAt) < a.sync:
	default:
		a.waiters = append(a.waiters, then)
		if !a.syncing {
			a.syncing = true
			c := a.callLocked(-1)
			a.mu.Unlock()
			if !a.g.sendLate(c, func(r backend.Reply, err error) { a.replied(r.Rate, err, true) },
				a.lateReply) {
				a.replied(backend.RateReply{}, ErrClosed, true)
			}
			return
		}
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	then()
}

// callLocked returns a call of rate.lua reporting a 429 of epoch (-1:
// none), what this process sent since its last call and how those that
// ended did (served, or answered 429).
func (a *AutoQuota) callLocked(epoch int64) backend.Call {
	args := a.args
	args.Epoch = epoch
	if a.used {
		args.Used = max(us(a.held), 1)
	}
	args.Sent = a.sent
	args.Served, args.Rejected = a.served, a.rejected
	a.used, a.held, a.sent, a.served, a.rejected = false, 0, 0, 0, 0
	return backend.Call{Script: backend.Rate, RateKey: a.key, RateArgs: args}
}

// lateReply takes the outcome of a call that outlived its bound: the call's
// done had the timeout already, so only an answer counts (a reply is a reply).
func (a *AutoQuota) lateReply(r backend.Reply, err error) {
	if err == nil {
		a.replied(r.Rate, nil, false)
	}
}

// replied takes a reply of rate.lua (or the call's error); read says it
// was the read attempts wait for.
func (a *AutoQuota) replied(r backend.RateReply, err error, read bool) {
	now := a.g.now()
	a.mu.Lock()
	var waiters []func()
	if read {
		a.syncing = false
		waiters, a.waiters = a.waiters, nil
	}
	// Replies are taken in the order of the server's clock (a read and a
	// report may cross), unless it went back a minute.
	if err == nil && (r.Now >= a.serverNow || r.Now < a.serverNow-int64(time.Minute/time.Microsecond)) {
		a.rate, a.epoch, a.serverNow = r.Rate, r.Epoch, r.Now
		a.syncedAt = now
		a.wmax, a.localAt = a.rate, now // where this process starts without Redis
	}
	ev := a.changedLocked()
	a.mu.Unlock()
	a.tell(ev)
	for _, f := range waiters {
		f()
	}
}

// record takes an attempt's outcome: a 429 (by Congested) of an attempt
// paced at the current epoch is reported (once per epoch per process), or
// without Redis cuts this process's rate.
//
// Record is not told which attempt ended, so attempts are matched to the
// epochs they were paced under by count: a 429 takes one from the oldest
// epoch with attempts outstanding, any other outcome from the newest. A 429
// then counts for the current epoch only when every attempt outstanding was
// paced under it, or when an attempt of the current epoch met a 429 earlier
// that was counted for an older one: the rate is never cut unless an attempt
// paced at it met a 429, whatever the order the attempts end in. (A cut may
// come one 429 late: the first 429 of the current epoch while an older
// attempt is outstanding.) A reservation the loop does not use (its wait
// cut short) leaves a count behind: one of an older epoch absorbs one later
// 429, which then does not cut; one of the newest epoch is taken by the next
// outcome. Attempts outstanding over more than maxPending (64) cuts are
// counted as of a later epoch.
func (a *AutoQuota) record(err error) {
	congested := err != nil && a.congested(err)
	a.mu.Lock()
	e := int64(-1) // no attempt outstanding: not this process's to report
	if n := len(a.pending); n > 0 {
		i := n - 1
		if congested {
			i = 0
		}
		p := &a.pending[i]
		e = p.epoch
		if congested {
			a.rejected++
		} else {
			a.served++
		}
		if p.n--; p.n == 0 {
			a.pending = append(a.pending[:i], a.pending[i+1:]...)
		}
	}
	if !congested || e != a.epoch {
		a.mu.Unlock()
		return
	}
	if a.g.healthy() {
		if a.reported >= e {
			a.mu.Unlock()
			return
		}
		a.reported = e
		c := a.callLocked(e)
		if h, ok := retry.RetryAfter(err); ok {
			c.RateArgs.Hold = min(us(h), c.RateArgs.Recovery)
		}
		a.mu.Unlock()
		a.g.sendLate(c, func(r backend.Reply, err error) { a.reportReplied(e, r.Rate, err) },
			func(r backend.Reply, err error) {
				if err == nil {
					a.reportReplied(e, r.Rate, nil)
				}
			})
		return
	}
	// Without Redis: this process's own cut.
	a.wmax = a.rate
	a.rate = a.clamp(int64(float64(a.rate) * a.beta))
	a.epoch++
	a.localAt = a.g.now()
	ev := a.changedLocked()
	a.mu.Unlock()
	a.tell(ev)
}

// reportReplied takes the reply to this process's report of a 429 of
// epoch e: a report the fleet held (the last cut's hold, the server's
// retry hint, had not passed) leaves the epoch as it was, and a later 429
// of it may be reported again.
func (a *AutoQuota) reportReplied(e int64, r backend.RateReply, err error) {
	if err == nil && !r.Cut && r.Epoch == e {
		a.mu.Lock()
		if a.reported == e {
			a.reported = e - 1
		}
		a.mu.Unlock()
	}
	a.replied(r, err, false)
}

// Record implements [retry.Pacer]: a 429 of an attempt paced at the current
// rate is reported to the fleet (one Redis call, not waited for; once per
// epoch per process), or without Redis cuts this process's rate. Attempts
// are matched to the epochs they were paced under by count (Record is not
// told which attempt ended): a 429 takes the oldest epoch with an attempt
// outstanding, any other outcome the newest, so that the rate is never cut
// unless an attempt paced at it met a 429, whatever the order attempts end
// in; the cut may come one 429 late. A reservation whose wait was cut short
// makes one later 429 of an older epoch not count. A Record with no attempt
// reserved is not reported.
func (a *AutoQuota) Record(err error) { a.record(err) }

// growLocally grows this process's rate without Redis: linearly, back to
// where it was cut over Recovery, while used.
func (a *AutoQuota) growLocally(now time.Time) {
	dt := now.Sub(a.localAt)
	if a.localAt.IsZero() || dt < 0 {
		a.localAt = now
		return
	}
	if !a.localUsed {
		a.localAt = now
		return
	}
	slope := (1 - a.beta) * float64(a.wmax) / a.recovery.Seconds() // µreq/s per s
	if g := int64(slope * min(dt, time.Second).Seconds()); g > 0 {
		a.rate = a.clamp(a.rate + g)
		a.localAt, a.localUsed = now, false
	}
}

func (a *AutoQuota) clamp(r int64) int64 { return max(min(r, a.args.Ceiling), a.args.Floor) }

// rateChange is what changedLocked found to tell.
type rateChange struct {
	emit, log bool
	rate, was int64
	epoch     int64
}

// changedLocked returns what to tell of the rate paced at now: an event on
// a cut or a move of 5 % since the last one, a log line past 20 %.
func (a *AutoQuota) changedLocked() rateChange {
	c := rateChange{rate: a.rate, was: a.logged, epoch: a.epoch}
	moved := func(from int64, by float64) bool {
		return math.Abs(float64(a.rate-from)) > by*float64(from)
	}
	if moved(a.emitted, 0.05) || a.epoch != a.emittedEpoch {
		c.emit, a.emitted, a.emittedEpoch = true, a.rate, a.epoch
	}
	if moved(a.logged, 0.2) {
		c.log, a.logged = true, a.rate
	}
	return c
}

func (a *AutoQuota) tell(c rateChange) {
	if c.emit {
		a.g.emit(Event{Kind: EventRate, Rate: float64(c.rate) / 1e6})
	}
	if c.log {
		a.g.log().Info("redisretry: the fleet's learnt rate changed by more than 20 %",
			"key", a.g.key, "rate", perSecond(c.rate), "was", perSecond(c.was), "cuts", c.epoch, "state", a.State().String())
	}
}

// perSecond formats µreq/s as requests per second, e.g. "41.3/s".
func perSecond(r int64) string {
	return fmt.Sprintf("%.4g/s", float64(r)/1e6)
}

// Stats returns the AutoQuota's counters: its schedule's and its learnt
// rate's, summed (State: the schedule's, or StateFallback if either decides
// without Redis).
func (a *AutoQuota) Stats() Stats {
	s, r := a.q.Stats(), a.g.stats()
	s.State = a.State()
	s.Fallbacks += r.Fallbacks
	s.RoundTrips += r.RoundTrips
	s.Errors += r.Errors
	return s
}

// State returns StateRedis while both the schedule and the learnt rate
// decide with Redis, StateFallback while either decides without it, and
// StateClosed after Close.
func (a *AutoQuota) State() State {
	qs, rs := a.q.State(), State(a.g.state.Load())
	switch {
	case qs == StateClosed || rs == StateClosed:
		return StateClosed
	case qs == StateFallback || rs == StateFallback:
		return StateFallback
	}
	return StateRedis
}

// Close closes the schedule (see [Quota.Close]: it gives the unused lease
// back and leaves the fleet's members in one call), reports to the fleet what
// this process sent, how its attempts ended and whether the rate held it
// back since its last call (one Redis call, within the Timeout, when Redis
// is available and there is something to report), and waits for the
// learnt rate's calls in flight. Reserve then returns [ErrClosed]. Without
// that last report, a fleet of short-lived processes (one attempt each, as
// a command run in a loop) would never count what it sends: the rate would
// look unused, never grow, and a cut would take it to what was measured,
// the Floor.
func (a *AutoQuota) Close() error {
	a.mu.Lock()
	if a.g.healthy() && (a.sent > 0 || a.used || a.served > 0 || a.rejected > 0) {
		c := a.callLocked(-1)
		a.mu.Unlock()
		a.g.send(c, func(backend.Reply, error) {})
	} else {
		a.mu.Unlock()
	}
	err := a.q.Close()
	a.g.close()
	return err
}

// newAutoQuota returns an AutoQuota whose calls run on r (the tests'
// in-memory Redis).
func newAutoQuota(r runner, c AutoQuotaConfig) (*AutoQuota, error) {
	return newAutoQuotaOn(runnerEnv(r, c.Now), c)
}
