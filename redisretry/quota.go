package redisretry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoffkit/retry"
	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// DefaultQuotaLease is the most requests' worth of the schedule a Quota
// takes ahead of need per Redis round trip, used when QuotaConfig.Lease is
// 0 (up to four times it while the process asks for less than the quota:
// see QuotaConfig.Lease).
const DefaultQuotaLease = 20

// DefaultColdFleetSize is the fleet's size a Quota assumes while it has never
// reached Redis and QuotaConfig.FleetSize is 0: its local share is then a
// tenth of the quota. A process that cannot count the fleet is not alone:
// pacing at the whole quota, N such processes would send N times it.
const DefaultColdFleetSize = 10

// memberTTL is how long a process counts as a member of the fleet after its
// last call to the quota script, unless its Close removed it first.
const memberTTL = 30 * time.Second

// beatEvery is how often a Quota whose refills follow each other makes one
// of them a heartbeat (gcra.lua's members bookkeeping, four commands of its
// eight): the others count the fleet as the last heartbeat of any process
// did. A process joining the fleet is counted by its first call; one that
// closed is removed by its Close (which keeps the new count with the
// schedule, for the lazy calls); one that ended without it (or while Redis
// was down) is forgotten by the first heartbeat after memberTTL.
const beatEvery = time.Second

// QuotaConfig configures a [Quota]. Key and Limit are required; every other
// field's zero value is the documented default.
type QuotaConfig struct {
	// Settings are the fields every limiter has: Key (required; the
	// quota's Redis keys are "{Key}:quota" and "{Key}:quota:members"),
	// Timeout, ProbeInterval, OnFailure (FailLocal: pace at this
	// process's share of the quota), Logger, Observer (state changes,
	// refills and waits) and Now.
	Settings

	// Limit is the quota, e.g. PerMinute(600) or ParseLimit("600/1m").
	// Every process of the fleet must give the same one: the schedule is
	// one. A Quota that finds the schedule last reserved under another
	// limit (600/1m and 10/1s are one) logs it once, naming both.
	Limit Limit

	// Lease is the most requests' worth of the schedule taken ahead of
	// need per Redis round trip (with [WithCost], units are that many times
	// the cost). A Quota takes slots ahead of need only as many as this
	// process will use before they expire (its own rate of requests over
	// the Slack), or while it alone reserves on the schedule; a quiet
	// process takes one slot per request, one round trip each (see
	// docs/fleet.md). 0 means 20, growing as this process's demand falls
	// below the quota: 20 times the quota over the demand, up to 80 at a
	// quarter of the quota or less (a round trip then serves up to 80
	// requests: a quarter of the Redis work per request). A Lease set here
	// is the most at any demand. At a rate above a million per second
	// a block holds at least a microsecond's worth of the schedule.
	Lease int64

	// Slack is how late a leased slot may still be used: a slot this
	// process did not use within Slack of its time is lost. The fleet can
	// exceed the quota by at most Slack's share of the Period in any
	// window (2 % by default) while a busy process catches up. It covers
	// the uncertainty of where the server's clock falls on the local one
	// too (about the fastest round trip seen): that much less is left for
	// catching up, and a block is cut by what exceeds Slack. What is left
	// is also how far ahead of need a process holds slots. It must be less
	// than the Period. 0 means Period/50; use a negative value for none.
	Slack time.Duration

	// FleetSize is the number of processes that share the quota, for the
	// decisions made without Redis: each process then paces at
	// Rate/FleetSize. 0 means the number of processes that used the quota
	// in the last 30 s and did not Close it since, as counted in Redis,
	// and DefaultColdFleetSize (10)
	// while this process has never reached Redis. Set it when processes
	// may start while Redis is down, or when the fleet is larger than that
	// (see docs/fleet.md).
	FleetSize int
}

// Validate reports the first invalid field of c, naming it and its value.
func (c QuotaConfig) Validate() error {
	if err := c.Settings.validate("QuotaConfig"); err != nil {
		return err
	}
	if err := c.Limit.validate("QuotaConfig"); err != nil {
		return err
	}
	switch {
	case c.Lease < 0:
		return fmt.Errorf("redisretry: invalid QuotaConfig.Lease = %d: must not be negative (0 means %d)", c.Lease, DefaultQuotaLease)
	case c.FleetSize < 0:
		return fmt.Errorf("redisretry: invalid QuotaConfig.FleetSize = %d: must not be negative (0 means counted in Redis)", c.FleetSize)
	case c.Slack >= c.Limit.Period:
		return fmt.Errorf("redisretry: invalid QuotaConfig.Slack = %v: must be less than the Period (%v); it is how much the fleet may exceed the quota (0 means Period/50)", c.Slack, c.Limit.Period)
	}
	return nil
}

// Quota keeps a fleet of processes under one quota, such as a project's
// requests (or tokens) per minute for a model. It paces: where the quota has
// a free slot later, the attempt waits for it instead of failing, unless the
// wait would end after the deadline. Most callers should set it as
// [retry.Policy.Pacer] (with [retry.Pacers] after a [Cooldown]) or call
// [Quota.Wait] before each request.
//
// The quota is the generic cell rate algorithm of go-redis/redis_rate, run as
// one Lua script per round trip on a schedule shared in Redis. Every attempt
// takes a slot, the first and every retry, whatever its outcome: a request
// that came back 429 used the quota all the same. The loop asks for a slot
// right before each attempt, after any backoff wait, so a slot is counted
// when its attempt is sent.
//
// How the lease works. A Quota reserves blocks of the schedule and hands
// their slots out locally, at the pace; a slot not used within
// QuotaConfig.Slack of its time is lost. Callers that find no slot queue,
// first come first served, for the next block, sized for all of them and
// taken only if its first slot starts before the latest of their deadlines
// once its reply is back: in a congested schedule every caller waits in one
// fleet-wide queue, in the order it asked. A block holds slots ahead of need
// (up to QuotaConfig.Lease; by default 20, growing to 80 as this process's
// demand falls below the quota) only as many as this process will use before
// they expire: what its own measured rate of requests fills within the
// Slack, at most its share of the Slack's worth of the quota (over the
// processes counted in Redis), never starting past the longest deadline of
// its recent calls; more only while it is the only process counted and its
// blocks follow each other on the schedule. So a quiet process takes one
// slot per request (a round trip each), a busy one amortises its round
// trips, and no process holds slots the others wait behind. A block is
// placed on the local clock by bounds on the server's clock learnt from
// every round trip, never by one reply's arrival, so that a slot is never
// used before its place on the server nor more than Slack after it,
// whatever the replies' delays.
//
// When Redis fails, is slower than the Timeout or answers errors, the Quota
// uses the slots it holds, then decides by QuotaConfig.OnFailure: by default
// a local pacer at this process's share of the quota (QuotaConfig.FleetSize),
// starting as far ahead as the schedule ran when Redis last answered. It
// logs one line, and goes back to Redis when a probe succeeds or a late reply
// comes: a reply after the Timeout is a reply, and its block (as any block
// whose callers stopped waiting for it) pays first for what was let start
// meanwhile. The rest of what it let start is reserved on the schedule at
// once where the others drew the schedule on (a process whose replies come
// late while Redis answers the others: its starts push their next blocks
// within the same second), else once Redis answers and no call past the
// Timeout still runs (at most a connection's setup later), placed back to
// when it started (where nobody reserved then, it takes no place the
// schedule has free now). After
// a fallback of a ProbeInterval or more its starts stay within its share for
// one more ProbeInterval, while the other processes come back at their own
// probes. After a flush or a restart that lost the schedule, the starts it
// had granted that are still ahead are reserved again. The bounds these give
// (over the quota after a flush, during a partition, at a cold start) are in
// docs/fleet.md.
//
// A Quota is safe for concurrent use; its lease is behind one mutex, its
// state and counters are atomic.
type Quota struct {
	g        guard
	env      env
	keys     backend.QuotaKeys
	limit    Limit
	lease    int64 // most requests' worth ahead of need per round trip
	leaseMax int64 // the most as the demand falls below the quota (leaseLocked)
	slack    time.Duration
	fleet    int
	member   string
	perMicro int64         // units in a microsecond of the schedule: the least a block holds
	tau      time.Duration // the memory of the rate of requests
	steady   *steadyClock  // the Quota's clock (q.g's): every time below is on it
	limitArg string        // the limit as gcra.lua keeps it with the schedule (storedLimit)
	mismatch atomic.Bool   // another limit on the schedule was logged

	mu       sync.Mutex
	blocks   []block        // leased stretches of the schedule, by their start
	queue    []*reservation // callers waiting for the next block, in order
	inflight int64          // units asked for by the refills in flight
	refills  int            // refills in flight
	idle     []func()       // called when no refill is in flight (Close)
	closing  bool           // Close was called: no refill starts
	clock    serverClock    // the server's clock, on the local one
	rtt      time.Duration  // the round trip's time, smoothed
	rttMin   time.Duration  // the fastest round trip
	widest   time.Duration  // the widest clock bounds a block was placed by: how late its first slot may be
	members  int64          // the fleet's size as last counted in Redis (0: never)
	lead     time.Duration  // how far past its arrival the schedule ran at the last reply
	ahead    time.Duration  // how far past the server's now the schedule ran when the last reply's call ran
	lastTo   int64          // where this process's latest block ended on the schedule (µs)
	grow     int64          // units ahead of need while this process alone reserves
	d        demand         // this process's requests
	last     take           // the last slot taken from the lease (giveBack)
	granted  []grant        // starts given that may still be ahead (flush)
	beatAt   time.Time      // when the last refill that was a heartbeat was sent

	// Without Redis.
	local         time.Time   // the local share pacer's next free start
	debt          int64       // units started without Redis, not reserved on the schedule yet
	debtFrom      time.Time   // when the first of them started
	owed          []grant     // of the debt, the units not being reserved, by their starts
	owedStop      func() bool // stops the timer that reserves those ahead of the schedule's end
	owedAt        time.Time   // when it fires
	sending       int64       // of the debt, units being reserved now
	awaiting      int         // refills past their bound still running: their blocks pay the debt first
	awaitingUnits int64       // the units those refills asked for
	trailing      int         // probes in flight, and debt calls and probes past their bound still running (busyLocked)
	lives         []*debtCall // live debt calls in flight, in the order sent (see reconcileLocked)
	unreached     bool        // a call ended without a reply after its bound, and no reply came since
	fellAt        time.Time   // the first decision without Redis since it last answered
	shareUntil    time.Time   // until then the starts stay within this process's share too
}

// demand is what a process measures of its own requests.
type demand struct {
	sum    float64       // units asked for, decayed over tau
	at     time.Time     // when sum was last updated
	since  time.Time     // the first request
	dl     time.Duration // the longest deadline of the recent calls
	dlAt   time.Time     // when dl was seen
	noDLAt time.Time     // when a call without a deadline last came
	most   int64         // the largest cost asked for recently
	mostAt time.Time     // when most was seen
}

// take is a slot taken from the lease: the block (by its start on the
// schedule), the units after it, and its start.
type take struct {
	from, next, n int64
	start         time.Time
}

// grant is a start handed out, of n units.
type grant struct {
	t time.Time
	n int64
}

// reservation is one Reserve being decided: n units for an attempt that can
// start at e, before deadline (zero for none). Its decision is made by
// callbacks (a timer, a refill's reply) and handed to done, once, outside
// Quota.mu.
type reservation struct {
	n        int64
	e        time.Time
	deadline time.Time
	done     func(time.Time, error)
	noted    bool // counted in the process's demand
	shared   bool // it waited for the share's pacer (after a fallback)

	// Under Quota.mu:
	waitState                // the timer it waits on: until earliest, or for a refill
	wait       time.Duration // how long it waits for a refill: the bound, or less (the deadline)
	byDeadline bool          // the deadline ends that wait, before the bound
	start      time.Time     // set by the refill that served it
	err        error         // a slot past the deadline, or the refill's Redis error
}

// waitState is how a caller's wait for a limiter's decision ends, under the
// limiter's mutex: over once decided or cancelled (nothing else may decide
// it then), and the timer it waits on, if any.
type waitState struct {
	over bool
	stop func() bool
}

// end marks the wait over and stops its timer, if it was not over: it
// reports whether it was not.
func (w *waitState) end() bool {
	if w.over {
		return false
	}
	w.over = true
	if w.stop != nil {
		w.stop()
	}
	return true
}

// NewQuota returns a Quota on client (a *redis.Client, ClusterClient, Ring or
// any redis.Scripter) configured by c. It does not wait for the network: it
// starts connecting in the background (one call to the quota's script,
// bounded by the client's DialTimeout, which also counts the fleet), so that
// the first decision finds a connection. It returns c's validation error, or
// an error if client is nil.
func NewQuota(client redis.Scripter, c QuotaConfig) (*Quota, error) {
	return newOnClient("NewQuota", client, c.Now, c, buildQuota)
}

// newQuota returns a Quota whose calls run on r (the tests' in-memory
// Redis).
func newQuota(r runner, c QuotaConfig) (*Quota, error) { return newQuotaOn(runnerEnv(r, c.Now), c) }

// newQuotaOn returns a Quota configured by c on e, or c's validation error.
func newQuotaOn(e env, c QuotaConfig) (*Quota, error) { return newOn(e, c, buildQuota) }

// buildQuota returns the Quota configured by c, a valid config, on e.
func buildQuota(e env, c QuotaConfig) *Quota {
	q := &Quota{
		env: e, keys: backend.NewQuotaKeys(c.Key), limit: c.Limit, lease: c.Lease,
		slack: c.Slack, fleet: c.FleetSize, member: newMemberID(),
	}
	q.limitArg = storedLimit(c.Limit)
	q.steady = &steadyClock{c: e.clock}
	e.clock = q.steady // everything the Quota holds is on its steady time
	q.g.common = newCommon("quota", c.Key, c.Timeout, c.ProbeInterval, c.OnFailure, c.Logger, c.Observer, e)
	q.g.share = q.shareInfo
	q.leaseMax = q.lease
	if q.lease == 0 {
		q.lease, q.leaseMax = DefaultQuotaLease, leaseGrowth*DefaultQuotaLease
	}
	switch {
	case q.slack == 0:
		q.slack = c.Limit.Period / 50
	case q.slack < 0:
		q.slack = 0
	}
	q.perMicro = unitsPerMicro(c.Limit)
	q.tau = max(10*q.slack, time.Second)
	e.attach(quotaCore{q})
	q.warm()
	return q
}

func newMemberID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// quotaCore is the Quota's asynchronous core, for the fleet harness.
type quotaCore struct{ q *Quota }

func (c quotaCore) Reserve(n int64, earliest, deadline time.Time, done func(time.Time, error)) {
	s := c.q.steady
	c.q.reserveAsync(max(n, 1), s.in(earliest), s.in(deadline), false, func(t time.Time, err error) { done(s.out(t), err) })
}

func (c quotaCore) Close(done func()) {
	if !c.q.closeAsync(func(error) { done() }) {
		done()
	}
}

type costKey struct{}

// WithCost returns a context that makes a [Quota] charge n units for each
// attempt made under it (as [Quota.Reserve] and [Quota.Wait]), e.g. an
// estimate of a request's tokens for a tokens-per-minute quota. n < 1 means 1.
// A cost above the quota's Rate is refused with an error: it could never
// fit in one Period.
func WithCost(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, costKey{}, n)
}

func costFrom(ctx context.Context) int64 {
	if n, ok := ctx.Value(costKey{}).(int64); ok && n > 1 {
		return n
	}
	return 1
}

// Reserve implements [retry.Pacer]: it takes a slot for an attempt that could
// start at earliest (of the cost set by [WithCost], else 1) and returns when
// the attempt may start. A slot whose start would not be before deadline (if
// not zero) is not taken: the error wraps [retry.ErrPastDeadline] and says how
// long the quota would have needed. A fail-closed Quota whose Redis is
// unavailable returns an error wrapping [ErrUnavailable]. Reserve waits for
// Redis at most QuotaConfig.Timeout (see there for a fresh process's first
// calls), never past deadline (then it returns at the deadline
// with an error wrapping [retry.ErrPastDeadline]) and not after ctx ends (then
// it returns ctx's cause).
//
// The loop, and [retry.Pacers] after a [Cooldown], call it right before the
// attempt, with earliest now. A caller that passes an earliest in the future
// has it waited for first, on the caller's goroutine, so that the slot is
// taken when the attempt is sent: a slot taken now for an attempt sent later
// would let every attempt held back start at once at that time.
func (q *Quota) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	t, err := q.reserve(ctx, costFrom(ctx), q.steady.in(earliest), q.steady.in(deadline))
	return q.steady.out(t), err
}

// Record implements [retry.Pacer]. It does nothing: the slot was used
// whatever the outcome.
func (q *Quota) Record(err error) {}

// Wait blocks until the quota lets one request start, or ctx ends. It is
// WaitN(ctx, 1) (or the cost set by [WithCost]).
func (q *Quota) Wait(ctx context.Context) error { return q.WaitN(ctx, costFrom(ctx)) }

// WaitN blocks until the quota lets a request of n units start (n < 1 means
// 1; n above the quota's Rate is an error: it could never fit). If the wait
// would end after ctx's deadline it returns at once, taking nothing, with an
// error wrapping [retry.ErrPastDeadline]. If ctx ends during the wait it
// returns context.Cause(ctx), and the slot is given back when no later slot
// of this process's lease was taken meanwhile (otherwise it is lost).
func (q *Quota) WaitN(ctx context.Context, n int64) error {
	dl, _ := ctx.Deadline()
	t, err := q.reserve(ctx, max(n, 1), q.g.now(), dl)
	if err != nil {
		return err
	}
	d := t.Sub(q.g.now())
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		q.giveBack(t, max(n, 1))
		return context.Cause(ctx)
	}
}

// Stats returns the Quota's counters.
func (q *Quota) Stats() Stats { return q.g.stats() }

// State returns whether the Quota decides with Redis now.
func (q *Quota) State() State { return State(q.g.state.Load()) }

// Close leaves the fleet: in one Redis call, bounded by the timeout, it
// gives the unused end of this process's lease back when no process
// reserved after it, and removes this process from the members the others'
// shares are counted over (else it would count for 30 s after its last
// call). The leave is the last of this process's calls to reach Redis: each
// call of the quota's script counts the process as a member again, so Close
// first waits for those in flight (refills, a probe, the reservation of
// what it let start without Redis), and for those past the timeout that
// Redis may still run until their late reply or until the client gives
// them up (a connection's setup after the timeout, on a client made by
// [NewClientWith]; a client that ignores contexts, at its own read
// timeout). No call starts once Close was called. Reserve then returns
// [ErrClosed]. While Redis is unavailable when those calls ended, Close
// sends nothing: the process stops counting 30 s after its last call.
func (q *Quota) Close() error {
	ch := make(chan error, 1)
	if !q.closeAsync(func(err error) { ch <- err }) {
		return nil
	}
	err := <-ch
	q.g.wg.Wait()
	return err
}

// closeAsync starts closing: once no call of gcra.lua may still run at
// Redis (busyLocked: a heartbeat run after the leave would count this
// process again), it leaves the fleet (giveBackLease) and calls done with
// that call's error. It returns false (and never calls done) if the Quota
// was already closing.
func (q *Quota) closeAsync(done func(error)) bool {
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return false
	}
	q.closing = true // no refill starts now
	if q.owedStop != nil {
		q.owedStop()
		q.owedStop = nil
	}
	if q.busyLocked() {
		// The blocks in flight land first, and the calls past their
		// bound end (see idleLocked).
		q.idle = append(q.idle, func() { q.giveBackLease(done) })
		q.mu.Unlock()
		return true
	}
	q.mu.Unlock()
	q.giveBackLease(done)
	return true
}

// giveBackLease sends gcra_return.lua, if Redis is available: the unused
// end of the lease's last block back, and this process out of the members.
func (q *Quota) giveBackLease(done func(error)) {
	q.mu.Lock()
	var unused, to int64
	now := q.g.now()
	for _, b := range q.blocks {
		if b.to > to {
			to, unused = b.to, b.unusedMicros(now)
		}
	}
	q.blocks = nil
	q.mu.Unlock()
	finish := func(err error) {
		q.g.markClosed()
		done(err)
	}
	if q.g.healthy() {
		// One call: the unused end of the lease back (if any), and this
		// process no longer a member, so that the others' shares count
		// it out at once (else for memberTTL more).
		c := backend.Call{Script: backend.GCRAReturn, Quota: q.keys, Return: backend.ReturnArgs{
			To: to, Unused: unused, Member: q.member, MemberTTL: int64(memberTTL / time.Millisecond)}}
		if q.g.send(c, func(_ backend.Reply, err error) { finish(err) }) {
			return
		}
	}
	finish(nil)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// pastDeadline is the error of a slot that would not start before the
// deadline. The wait is rounded for people: to 1ms, or 1µs below that.
func pastDeadline(limiter string, need time.Duration) error {
	unit := time.Millisecond
	if need < unit {
		unit = time.Microsecond
	}
	return fmt.Errorf("redisretry: the fleet %s would need a wait of %v, past the deadline: %w", limiter, need.Round(unit), retry.ErrPastDeadline)
}

type reserveResult struct {
	t   time.Time
	err error
}

// reserve is Reserve for n units: it decides at once when the lease holds
// the slot, else it waits for reserveAsync's decision or ctx.
func (q *Quota) reserve(ctx context.Context, n int64, earliest, deadline time.Time) (time.Time, error) {
	if ctx.Err() != nil {
		return time.Time{}, context.Cause(ctx)
	}
	noted := false
	if now := q.g.now(); !earliest.After(now) && n <= q.limit.Rate && q.g.healthy() {
		q.mu.Lock()
		if !now.Before(q.shareUntil) { // else it waits for its share first (decide)
			q.d.note(now, n, deadline, q.tau)
			noted = true
			t, err, ok := q.takeNowLocked(now, n, deadline)
			if ok {
				q.mu.Unlock()
				return q.taken(now, t, err)
			}
		}
		q.mu.Unlock()
	}
	ch := make(chan reserveResult, 1)
	r := q.reserveAsync(n, earliest, deadline, noted, func(t time.Time, err error) { ch <- reserveResult{t, err} })
	select {
	case res := <-ch:
		return res.t, res.err
	case <-ctx.Done():
	}
	if r != nil && q.cancel(r) {
		return time.Time{}, context.Cause(ctx)
	}
	res := <-ch // decided meanwhile
	if res.err == nil {
		q.giveBack(res.t, n)
		return time.Time{}, context.Cause(ctx)
	}
	return time.Time{}, res.err
}

// reserveAsync decides a Reserve of n units and calls done with the
// outcome, once, perhaps before it returns. It returns the reservation while
// one is being decided (nil if decided already), for cancel.
//
// An earliest in the future is waited for first, so that the slot is taken
// when the attempt is sent. Then a slot of the lease is taken, or the caller
// queues, first come first served, for the next block (a refill is started
// unless those in flight cover the queue), for at most the bound of a Redis
// call and never past deadline: a refill that lands later still fills the
// lease, for the next callers. noted says that the request was counted in
// this process's demand already.
func (q *Quota) reserveAsync(n int64, earliest, deadline time.Time, noted bool, done func(time.Time, error)) *reservation {
	if State(q.g.state.Load()) == StateClosed {
		done(time.Time{}, ErrClosed)
		return nil
	}
	if n > q.limit.Rate {
		// It could never fit: taking n/Rate periods of the schedule would
		// hold up every process of the fleet that long.
		q.g.refused.Add(1)
		done(time.Time{}, fmt.Errorf("redisretry: a request of cost %d exceeds the fleet quota of %v", n, q.limit))
		return nil
	}
	r := &reservation{n: n, deadline: deadline, done: done, noted: noted}
	now := q.g.now()
	if d := earliest.Sub(now); d > 0 {
		if !deadline.IsZero() && !earliest.Before(deadline) {
			q.g.refused.Add(1)
			done(time.Time{}, pastDeadline("quota", d))
			return nil
		}
		q.mu.Lock()
		r.stop = q.g.clock.AfterFunc(d, func() { q.decide(r) })
		q.mu.Unlock()
		return r
	}
	q.decide(r)
	return r
}

// decide decides r at now, unless it was cancelled.
func (q *Quota) decide(r *reservation) {
	now := q.g.now()
	q.mu.Lock()
	if r.over {
		q.mu.Unlock()
		return
	}
	if !r.noted {
		q.d.note(now, r.n, r.deadline, q.tau)
		r.noted = true
	}
	r.e = now
	if State(q.g.state.Load()) == StateClosed {
		r.over = true
		q.mu.Unlock()
		r.done(time.Time{}, ErrClosed)
		return
	}
	if !r.shared && now.Before(q.shareUntil) && q.g.healthy() {
		// Back from a long fallback: the request waits for this
		// process's share first, then takes its slot, at the time it
		// may start (a slot taken now and started later would not be
		// where the schedule counts it).
		r.shared = true
		s, next := q.shareStartLocked(now, r.n)
		if !r.deadline.IsZero() && !s.Before(r.deadline) {
			r.over = true
			q.mu.Unlock()
			q.g.refused.Add(1)
			r.done(time.Time{}, pastDeadline("quota (share after a fallback)", s.Sub(now)))
			return
		}
		q.local = next
		if d := s.Sub(now); d > 0 {
			r.stop = q.g.clock.AfterFunc(d, func() { q.decide(r) })
			q.mu.Unlock()
			return
		}
	}
	// The lease first, with Redis or without: its slots are this
	// process's, counted on the schedule.
	if t, err, ok := q.takeNowLocked(now, r.n, r.deadline); ok {
		r.over = true
		q.mu.Unlock()
		r.done(q.taken(now, t, err))
		return
	}
	if !q.g.healthy() {
		r.over = true
		q.mu.Unlock()
		q.probe()
		r.done(q.decideLocally(now, r.n, r.deadline, nil))
		return
	}
	q.queue = append(q.queue, r)
	if !q.startRefillLocked(now) {
		q.queue = q.queue[:len(q.queue)-1]
		r.over = true
		q.mu.Unlock()
		r.done(time.Time{}, ErrClosed)
		return
	}
	r.wait = q.g.bound()
	if !r.deadline.IsZero() && r.deadline.Sub(now) < r.wait {
		r.wait, r.byDeadline = r.deadline.Sub(now), true
	}
	r.stop = q.g.clock.AfterFunc(r.wait, func() { q.waited(r) })
	q.mu.Unlock()
}

// cancel withdraws r (its caller's context ended): it reports whether it
// did, before r was decided.
func (q *Quota) cancel(r *reservation) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !r.end() {
		return false
	}
	q.dequeueLocked(r)
	return true
}

// waited decides r when its wait for a refill ended with no block for it.
func (q *Quota) waited(r *reservation) {
	q.mu.Lock()
	if r.over {
		q.mu.Unlock()
		return
	}
	r.over = true
	q.dequeueLocked(r)
	q.mu.Unlock()
	if r.byDeadline {
		// The deadline came before Redis answered: no attempt can start
		// before it now (whatever the FailureMode would say).
		q.g.refused.Add(1)
		r.done(time.Time{}, fmt.Errorf("redisretry: the fleet quota got no answer from Redis before the deadline: %w", retry.ErrPastDeadline))
		return
	}
	r.done(q.decideLocally(q.g.now(), r.n, r.deadline, errSlow))
}

// complete hands r the outcome of the refill that served it.
func (q *Quota) complete(r *reservation) {
	switch {
	case r.err == nil:
		r.done(q.taken(r.e, r.start, nil))
	case errors.Is(r.err, retry.ErrPastDeadline):
		q.g.refused.Add(1)
		r.done(time.Time{}, r.err)
	case errors.Is(r.err, ErrClosed):
		r.done(time.Time{}, ErrClosed)
	default:
		r.done(q.decideLocally(q.g.now(), r.n, r.deadline, r.err)) // Redis failed
	}
}

func (q *Quota) dequeueLocked(r *reservation) {
	for i, x := range q.queue {
		if x == r {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			return
		}
	}
}

// serveLocked hands the lease's slots to the queued callers, first come
// first served, until one does not fit; it appends those served to served.
func (q *Quota) serveLocked(now time.Time, served []*reservation) []*reservation {
	for len(q.queue) > 0 {
		r := q.queue[0]
		t, ok, err := q.takeLocked(now, later(r.e, now), r.n, r.deadline)
		if !ok && err == nil {
			return served
		}
		r.start, r.err = t, err
		served = q.wakeLocked(served)
	}
	return served
}

// wakeLocked removes the first queued caller, decided now, and appends it
// to served.
func (q *Quota) wakeLocked(served []*reservation) []*reservation {
	r := q.queue[0]
	q.queue = q.queue[1:]
	r.over = true
	r.stop()
	return append(served, r)
}

// taken counts and reports a decision: a start t for an attempt that could
// start at e, or err.
func (q *Quota) taken(e, t time.Time, err error) (time.Time, error) {
	if err != nil {
		q.g.refused.Add(1)
		return time.Time{}, err
	}
	if t.After(e) {
		q.g.waits.Add(1)
		q.g.emit(Event{Kind: EventQuotaWait, Wait: t.Sub(e)})
	}
	return t, nil
}

// giveBack returns the slot of an attempt that started at t and will not be
// made, if it is the last one taken from its block (a later one would
// otherwise move).
func (q *Quota) giveBack(t time.Time, n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.last
	if l.n != n || !l.start.Equal(t) {
		return
	}
	for i := range q.blocks {
		if b := &q.blocks[i]; b.from == l.from && b.next == l.next {
			b.next -= n
			q.last = take{}
			return
		}
	}
}

// lazyLocked reports whether a refill sent at now may skip the heartbeat
// (backend.GCRAArgs.Lazy): one was sent less than beatEvery ago. If not, the
// refill is the heartbeat.
func (q *Quota) lazyLocked(now time.Time) bool {
	if !q.beatAt.IsZero() && now.Sub(q.beatAt) < beatEvery && !now.Before(q.beatAt) {
		return true
	}
	q.beatAt = now
	return false
}

func us(d time.Duration) int64 { return backend.Micros(d) }

func usWait(d time.Duration) int64 { return backend.MicrosWait(d) }

// storedLimit returns l as gcra.lua keeps it with the schedule: Rate,
// Period in nanoseconds and Burst, e.g. "40/1000000000/1".
func storedLimit(l Limit) string {
	return strconv.FormatInt(l.Rate, 10) + "/" + strconv.FormatInt(int64(l.Period), 10) + "/" + strconv.FormatInt(l.burst(), 10)
}

// parseStoredLimit reads what storedLimit wrote.
func parseStoredLimit(s string) (Limit, bool) {
	p := strings.Split(s, "/")
	if len(p) != 3 {
		return Limit{}, false
	}
	rate, err1 := strconv.ParseInt(p[0], 10, 64)
	period, err2 := strconv.ParseInt(p[1], 10, 64)
	burst, err3 := strconv.ParseInt(p[2], 10, 64)
	l := Limit{Rate: rate, Period: time.Duration(period), Burst: burst}
	if errors.Join(err1, err2, err3) != nil || l.validate("") != nil {
		return Limit{}, false
	}
	return l, true
}

// sameLimit reports whether a and b pace a schedule alike: the same rate
// (600/1m is 10/1s) and the same burst.
func sameLimit(a, b Limit) bool {
	hi1, lo1 := bits.Mul64(uint64(a.Rate), uint64(b.Period))
	hi2, lo2 := bits.Mul64(uint64(b.Rate), uint64(a.Period))
	return hi1 == hi2 && lo1 == lo2 && a.burst() == b.burst()
}

// otherLimit logs, once per Quota, that another process reserved on this
// quota's schedule (its Key, on this Redis) under another limit: other, as
// gcra.lua returned it. The schedule is then paced by both: a slot taken at
// a slower rate holds the others up longer (after one request at 1/1h, the
// next waits up to an hour whatever its own limit), and no process keeps its
// own.
func (q *Quota) otherLimit(other string) {
	if q.mismatch.Load() {
		return
	}
	l, ok := parseStoredLimit(other)
	if ok && sameLimit(l, q.limit) {
		return
	}
	if !q.mismatch.CompareAndSwap(false, true) {
		return
	}
	desc := fmt.Sprintf("%.100q", other) // not a limit: another program's
	if ok {
		desc = l.String()
	}
	q.g.log().Warn("redisretry: another process shares this quota with another limit: give every process of the fleet the same Limit (the CLI's --quota)",
		"limiter", q.g.limiter, "key", q.g.key, "this", q.limit.String(), "other", desc)
}
