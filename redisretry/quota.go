package redisretry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/backoffkit/retry"
	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// DefaultQuotaLease is the most requests' worth of the schedule a Quota
// takes per Redis round trip, used when QuotaConfig.Lease is 0.
const DefaultQuotaLease = 20

// memberTTL is how long a process counts as a member of the fleet after its
// last call to the quota script.
const memberTTL = 30 * time.Second

// QuotaConfig configures a [Quota]. Key and Limit are required; every other
// field's zero value is the documented default.
type QuotaConfig struct {
	// Key names the fleet's quota: every process that uses the same Key
	// (and Redis) shares it, e.g. "myproject:gemini-2.5-pro:us-central1".
	// Redis keys are "{Key}:quota" and "{Key}:quota:members".
	Key string

	// Limit is the quota, e.g. PerMinute(600) or ParseLimit("600/1m").
	Limit Limit

	// Lease is the most requests' worth of the schedule taken per Redis
	// round trip (with [WithCost], units are that many times the cost).
	// This process hands the slots of a block out locally, at the pace,
	// and takes the next block before the current one runs out. Larger
	// leases mean fewer round trips, but a process holds a longer stretch
	// of the fleet's schedule that the others wait behind. The size adapts
	// to this process's demand, up to Lease (and never more than the
	// quota's Rate). 0 means 20.
	Lease int64

	// Slack is how late a leased slot may still be used: a slot this
	// process did not use within Slack of its time is lost. The fleet can
	// exceed the quota by at most Slack's share of the Period in any
	// window (2 % by default) while a busy process catches up. It covers
	// the uncertainty of where the server's clock falls on the local one
	// too (about the fastest round trip seen): that much less is left for
	// catching up, and a block is cut by what exceeds Slack. It must be
	// less than the Period. 0 means Period/50; use a negative value for
	// none.
	Slack time.Duration

	// FleetSize is the number of processes that share the quota, for the
	// local fallback: each then paces at Rate/FleetSize. 0 means the
	// number of processes that used the quota in the last 30 s, as counted
	// in Redis (1 until Redis has been reached once).
	FleetSize int

	// Timeout bounds each Redis call. 0 means 20 ms.
	Timeout time.Duration

	// ProbeInterval is how often a Quota that fell back tries Redis
	// again. 0 means 1 s.
	ProbeInterval time.Duration

	// OnFailure says what to do while Redis is unavailable. The zero value
	// is FailLocal.
	OnFailure FailureMode

	// Logger receives one line per change of state. nil means
	// slog.Default().
	Logger *slog.Logger

	// Observer receives state changes, refills and waits. nil means none.
	Observer Observer

	// Now returns the current time. nil means time.Now.
	Now func() time.Time
}

// Validate reports the first invalid field of c, naming it and its value.
func (c QuotaConfig) Validate() error {
	if err := checkCommon("QuotaConfig", c.Key, c.Timeout, c.ProbeInterval, c.OnFailure); err != nil {
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
// one Lua script per round trip on a schedule shared in Redis. To avoid a
// round trip per attempt, a Quota reserves a block of slots at a time (see
// QuotaConfig.Lease) and hands them out locally at the pace; a slot not used
// within QuotaConfig.Slack of its time is lost. Every attempt takes a slot,
// the first and every retry, whatever its outcome: a request that came back
// 429 used the quota all the same.
//
// The loop asks for a slot right before each attempt, after any backoff wait,
// so a slot is counted when its attempt is sent. Callers that find the lease
// empty queue, first come first served, for the next block (they wait for it
// at most QuotaConfig.Timeout). A block is placed on the local clock by
// bounds on the server's clock learnt from every round trip, never by one
// reply's arrival, so that a slot is never used before its place on the
// server nor more than QuotaConfig.Slack after it, whatever the replies'
// delays: the processes' blocks do not overlap (see docs/fleet.md).
//
// When Redis fails, is slower than QuotaConfig.Timeout or answers errors,
// the Quota decides by QuotaConfig.OnFailure (by default a local pacer at
// this process's share of the quota), logs one line, and goes back to Redis
// when a probe succeeds. A Quota is safe for concurrent use; its lease is
// behind one mutex, its state and counters are atomic.
type Quota struct {
	g      guard
	env    env
	keys   backend.QuotaKeys
	limit  Limit
	lease  int64 // most requests' worth per round trip
	slack  time.Duration
	fleet  int
	member string

	mu       sync.Mutex
	blocks   []block        // leased stretches of the schedule, in order
	queue    []*reservation // callers waiting for the next block, in order
	inflight int64          // units asked for by the refills in flight
	refills  int            // refills in flight
	idle     []func()       // called when no refill is in flight (Close)
	want     int64          // units to ask for at a refill
	used     int64          // units taken since the last resize
	usedD    time.Duration  // the schedule they took
	lost     time.Duration  // the schedule let pass unused since the last resize
	merged   bool           // a block extended the last one since the last resize
	landed   bool           // a block landed since the last resize
	most     int64          // the largest cost taken since the last resize
	members  int64          // the fleet's size as last counted in Redis
	clock    serverClock    // the server's clock, on the local one
	rtt      time.Duration  // the round trip's time, smoothed
	local    time.Time      // the local fallback pacer's TAT
	closing  bool           // Close was called: no refill starts

	lastStart, lastEnd time.Time // the start given by the last take, and its block's TAT after it
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

	// Under Quota.mu:
	over  bool          // decided or cancelled: nothing else may decide it
	stop  func() bool   // the timer it waits on (until earliest, or for a refill)
	wait  time.Duration // how long it waits for a refill: the timeout, or less (the deadline)
	start time.Time     // set by the refill that served it
	err   error         // a slot past the deadline, or the refill's Redis error
}

// block is a stretch of the fleet's schedule leased to this process, in
// local time: slots from tat (the next free place) to end.
// from and to are its place in the server's time (µs).
type block struct {
	tat, end time.Time
	from, to int64
}

// NewQuota returns a Quota on client (a *redis.Client, ClusterClient, Ring or
// any redis.Scripter) configured by c. It makes no network call. It returns
// c's validation error, or an error if client is nil.
func NewQuota(client redis.Scripter, c QuotaConfig) (*Quota, error) {
	if client == nil {
		return nil, errors.New("redisretry: NewQuota: nil client")
	}
	return newQuotaOn(envFor(client, c.Now), c)
}

// newQuota returns a Quota whose calls run on r (the tests' in-memory
// Redis).
func newQuota(r runner, c QuotaConfig) (*Quota, error) { return newQuotaOn(runnerEnv(r, c.Now), c) }

func newQuotaOn(e env, c QuotaConfig) (*Quota, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	q := &Quota{
		env: e, keys: backend.NewQuotaKeys(c.Key), limit: c.Limit, lease: c.Lease,
		slack: c.Slack, fleet: c.FleetSize, member: newMemberID(),
	}
	q.g.common = newCommon("quota", c.Key, c.Timeout, c.ProbeInterval, c.OnFailure, c.Logger, c.Observer, e)
	if q.lease == 0 {
		q.lease = DefaultQuotaLease
	}
	switch {
	case q.slack == 0:
		q.slack = c.Limit.Period / 50
	case q.slack < 0:
		q.slack = 0
	}
	q.want = min(4, q.lease) // the first lease; it doubles while used up
	e.attach(quotaCore{q})
	return q, nil
}

func newMemberID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// quotaCore is the Quota's asynchronous core, for the fleet harness.
type quotaCore struct{ q *Quota }

func (c quotaCore) Reserve(n int64, earliest, deadline time.Time, done func(time.Time, error)) {
	c.q.reserveAsync(max(n, 1), earliest, deadline, done)
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
// Redis at most QuotaConfig.Timeout, never past deadline (then it returns at
// the deadline with an error wrapping [retry.ErrPastDeadline]) and not after
// ctx ends (then it returns ctx's cause).
//
// The loop, and [retry.Pacers] after a [Cooldown], call it right before the
// attempt, with earliest now. A caller that passes an earliest in the future
// has it waited for first, on the caller's goroutine, so that the slot is
// taken when the attempt is sent: a slot taken now for an attempt sent later
// would let every attempt held back start at once at that time.
func (q *Quota) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	return q.reserve(ctx, costFrom(ctx), earliest, deadline)
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

// Close gives the unused end of this process's lease back to the fleet when
// no process reserved after it (one Redis call, bounded by the timeout), and
// waits for the Redis calls in flight. Reserve then returns [ErrClosed].
func (q *Quota) Close() error {
	ch := make(chan error, 1)
	if !q.closeAsync(func(err error) { ch <- err }) {
		return nil
	}
	err := <-ch
	q.g.wg.Wait()
	return err
}

// closeAsync starts closing: once the refills in flight landed, it gives
// the unused end of the lease back and calls done with that call's error. It
// returns false (and never calls done) if the Quota was already closing.
func (q *Quota) closeAsync(done func(error)) bool {
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return false
	}
	q.closing = true // no refill starts now
	if q.refills > 0 {
		q.idle = append(q.idle, func() { q.giveBackLease(done) }) // the blocks in flight land first
		q.mu.Unlock()
		return true
	}
	q.mu.Unlock()
	q.giveBackLease(done)
	return true
}

func (q *Quota) giveBackLease(done func(error)) {
	q.mu.Lock()
	var unused, to int64
	if n := len(q.blocks); n > 0 {
		b := q.blocks[n-1]
		to, unused = b.to, us(b.end.Sub(later(b.tat, q.g.now())))
	}
	q.blocks = nil
	q.mu.Unlock()
	finish := func(err error) {
		q.g.markClosed()
		done(err)
	}
	if unused > 0 && q.g.healthy() {
		c := backend.Call{Script: backend.GCRAReturn, Quota: q.keys, Return: backend.ReturnArgs{To: to, Unused: unused}}
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
	if now := q.g.now(); !earliest.After(now) && n <= q.limit.Rate && q.g.healthy() {
		q.mu.Lock()
		t, err, ok := q.takeNowLocked(now, n, deadline)
		q.mu.Unlock()
		if ok {
			return q.taken(now, t, err)
		}
	}
	ch := make(chan reserveResult, 1)
	r := q.reserveAsync(n, earliest, deadline, func(t time.Time, err error) { ch <- reserveResult{t, err} })
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
// unless those in flight cover the queue), for at most Timeout and never
// past deadline: a refill that lands later still fills the lease, for the
// next callers.
func (q *Quota) reserveAsync(n int64, earliest, deadline time.Time, done func(time.Time, error)) *reservation {
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
	r := &reservation{n: n, deadline: deadline, done: done}
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
	if !q.g.healthy() {
		if !q.finish(r) {
			return
		}
		if State(q.g.state.Load()) == StateClosed {
			r.done(time.Time{}, ErrClosed)
			return
		}
		q.g.probe(q.probeCall, q.probed)
		r.done(q.decideLocally(now, r.n, r.deadline, nil))
		return
	}
	q.mu.Lock()
	if r.over {
		q.mu.Unlock()
		return
	}
	r.e = now
	if t, err, ok := q.takeNowLocked(now, r.n, r.deadline); ok {
		r.over = true
		q.mu.Unlock()
		r.done(q.taken(now, t, err))
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
	r.wait = q.g.timeout
	if !r.deadline.IsZero() {
		r.wait = min(r.wait, r.deadline.Sub(now))
	}
	r.stop = q.g.clock.AfterFunc(r.wait, func() { q.waited(r) })
	q.mu.Unlock()
}

// finish marks r decided, unless it was already (or cancelled).
func (q *Quota) finish(r *reservation) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.over {
		return false
	}
	r.over = true
	return true
}

// cancel withdraws r (its caller's context ended): it reports whether it
// did, before r was decided.
func (q *Quota) cancel(r *reservation) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.over {
		return false
	}
	r.over = true
	if r.stop != nil {
		r.stop()
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
	if r.wait < q.g.timeout {
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

// takeNowLocked decides at once when it can: no caller is queued and the
// lease holds the slot, or shows it past the deadline. ok is false when the
// caller must wait for a refill.
func (q *Quota) takeNowLocked(now time.Time, n int64, deadline time.Time) (time.Time, error, bool) {
	if len(q.queue) > 0 { // queue behind the callers already waiting
		return time.Time{}, nil, false
	}
	t, ok, err := q.takeLocked(now, now, n, deadline)
	if !ok && err == nil {
		return time.Time{}, nil, false
	}
	if ok && q.inflight == 0 && q.lowLocked(now) {
		q.startRefillLocked(now)
	}
	return t, err, true
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

// takeLocked takes a slot of n units from the lease for an attempt that can
// start at e (>= now). ok is false when no block holds it (a refill is
// needed); err is set when the slot would not start before deadline.
//
// The slot is the first free place of a block (a place that passed more than
// Slack ago is lost); the attempt starts there (up to the burst tolerance
// before it), or at e if that is later.
func (q *Quota) takeLocked(now, e time.Time, n int64, deadline time.Time) (time.Time, bool, error) {
	inc, tol := q.limit.Interval(n), q.limit.Tolerance(n)
	floor := q.floorLocked(now)
	// Forget the blocks that are spent (used up, or past).
	for len(q.blocks) > 0 && !later(q.blocks[0].tat, floor).Before(q.blocks[0].end) {
		if b := q.blocks[0]; b.tat.Before(b.end) {
			q.lost += b.end.Sub(b.tat)
		}
		q.blocks = q.blocks[1:]
	}
	for i := range q.blocks {
		b := &q.blocks[i]
		base := later(b.tat, floor)
		if base.Add(inc).After(b.end) {
			continue
		}
		s := later(e, base.Add(-tol))
		if !deadline.IsZero() && !s.Before(deadline) {
			return time.Time{}, false, pastDeadline("quota", s.Sub(now))
		}
		q.lost += base.Sub(b.tat) // slots that passed unused (Slack ago)
		b.tat = base.Add(inc)
		q.usedD += inc
		q.used = satAdd(q.used, n)
		q.most = max(q.most, n)
		q.lastStart, q.lastEnd = s, b.tat
		return s, true, nil
	}
	return time.Time{}, false, nil
}

// floorLocked returns the earliest place a slot may have to be used at now:
// Slack ago, less the uncertainty of the blocks' places (see
// serverClock.place), so that no slot is used more than Slack late.
func (q *Quota) floorLocked(now time.Time) time.Time {
	return now.Add(-max(q.slack-q.clock.width(now), 0))
}

// lowLocked reports whether the lease is running out: less than a quarter of
// a refill's size is left, or less than four round trips' worth (so that the
// next block lands before this one ends: blocks of this process that follow
// each other on the schedule are one block, and no slot is lost between them).
func (q *Quota) lowLocked(now time.Time) bool {
	floor := q.floorLocked(now)
	var left time.Duration
	for _, b := range q.blocks {
		left += b.end.Sub(later(b.tat, floor))
	}
	return left < max(q.limit.Interval(q.want)/4, 4*q.rtt)
}

// resizeLocked sizes the refills after a block landed: twice the size while
// this process uses at least as much of its lease as it lets pass unused, or
// while its blocks follow each other on the schedule (no other process wanted
// the slots between them: what it leaves unused costs nobody anything); else
// what it took since the last resize. A process holding blocks one after the
// other takes the schedule at the rate time passes: one that uses little of
// them must hold little, or it would hold up the processes that need the
// slots. At least most (the largest cost the queue holds), at most Lease
// requests' worth (of the largest cost taken) and the quota's Rate.
func (q *Quota) resizeLocked(most int64) {
	w := q.want
	if q.lost <= q.usedD || q.merged {
		w = satMul(w, 2)
	} else {
		w = q.used
	}
	q.usedD, q.lost = 0, 0
	q.merged, q.landed = false, false
	most = max(most, q.most, 1)
	q.want = max(min(w, satMul(q.lease, most), q.limit.Rate), most)
	q.used, q.most = 0, 0
}

// startRefillLocked sends a round trip for a block of the schedule, unless
// the refills in flight cover the queued callers: so a queued caller waits
// for one round trip at most, not for the one in flight and then its own.
// The block is taken only if its first slot starts before the latest
// deadline of the queued callers (any if one has none). It returns false if
// the Quota is closed.
func (q *Quota) startRefillLocked(now time.Time) bool {
	var need, most int64 = 0, 1
	maxWait := int64(0)
	for _, w := range q.queue {
		need = satAdd(need, w.n)
		most = max(most, w.n)
		switch {
		case maxWait < 0:
		case w.deadline.IsZero():
			maxWait = -1
		default:
			maxWait = max(maxWait, usWait(max(w.deadline.Sub(now), 0)))
		}
	}
	head := most
	switch {
	case len(q.queue) == 0:
		maxWait = -1 // a refill ahead of need
	case need <= q.inflight:
		return true // covered
	default:
		head = q.queue[0].n
	}
	if q.landed {
		q.resizeLocked(most) // once per block landed: a top-up keeps the size
	}
	// Never more than a Period's worth: a block holds up the fleet.
	units := min(max(q.want, need-q.inflight, most), max(q.limit.Rate, most))
	a := backend.GCRAArgs{
		Inc: us(q.limit.Interval(units)), Tol: us(q.limit.Tolerance(head)), MaxWait: maxWait,
		Member: q.member, MemberTTL: int64(memberTTL / time.Millisecond),
	}
	keep := q.limit.Interval(head)
	if q.closing {
		return false
	}
	send := q.g.now()
	c := backend.Call{Script: backend.GCRA, Quota: q.keys, GCRA: a}
	if !q.g.send(c, func(r backend.Reply, err error) { q.refilled(units, keep, send, r.GCRA, err) }) {
		return false
	}
	q.refills++
	q.inflight += units
	return true
}

// refilled takes the reply of a refill of units sent at send: it adds the
// block to the lease and serves the queue; while callers are left queued it
// starts the next refill.
func (q *Quota) refilled(units int64, keep time.Duration, send time.Time, r backend.GCRAReply, err error) {
	now := q.g.now() // the reply's arrival
	q.mu.Lock()
	q.inflight -= units
	q.refills--
	var served []*reservation
	granted := false
	switch {
	case err != nil:
		// Redis failed (the limiter is in fallback now): every queued
		// caller decides without it.
		for len(q.queue) > 0 {
			q.queue[0].err = err
			served = q.wakeLocked(served)
		}
	case !r.OK:
		q.members = r.Members
		q.learnLocked(send, now, r.Now)
		// Nothing was taken: the schedule's first free slot is too far
		// for every caller queued when the refill started. Those whose
		// deadline it passes give up; later ones get another refill.
		wait := time.Duration(r.Wait) * time.Microsecond
		kept := q.queue[:0]
		for _, w := range q.queue {
			if !w.deadline.IsZero() && !now.Add(wait).Before(w.deadline) {
				w.err = pastDeadline("quota", wait)
				w.over = true
				w.stop()
				served = append(served, w)
				continue
			}
			kept = append(kept, w)
		}
		clear(q.queue[len(kept):])
		q.queue = kept
	default:
		q.members = r.Members
		q.learnLocked(send, now, r.Now)
		if r.To > r.From {
			granted = true
			b := q.clock.place(r.From, r.To, keep, q.slack, now)
			b.from, b.to = r.From, r.To
			q.landed = true
			q.addBlockLocked(b)
		}
		served = q.serveLocked(now, served)
	}
	if len(q.queue) > 0 && !q.startRefillLocked(now) {
		for len(q.queue) > 0 {
			q.queue[0].err = ErrClosed
			served = q.wakeLocked(served)
		}
	}
	var idle []func()
	if q.refills == 0 {
		idle, q.idle = q.idle, nil
	}
	q.mu.Unlock()
	for _, w := range served {
		q.complete(w)
	}
	if granted {
		q.g.refills.Add(1)
		q.g.emit(Event{Kind: EventRefill, Units: units})
	}
	for _, f := range idle {
		f()
	}
}

// learnLocked learns from a round trip asked for at send and answered at
// recv, computed at the server's now (µs).
func (q *Quota) learnLocked(send, recv time.Time, now int64) {
	q.clock.learn(send, recv, now)
	if d := recv.Sub(send); q.rtt == 0 {
		q.rtt = d
	} else {
		q.rtt += (d - q.rtt) / 8
	}
}

// addBlockLocked adds b to the lease, in order (refills in flight together
// may land in any order).
//
// A block that starts where one of this process's blocks ends on the
// server's schedule extends it: no other process's slots lie between them, so
// the width of the clock's bounds is not lost between them.
func (q *Quota) addBlockLocked(b block) {
	for i := range q.blocks {
		if p := &q.blocks[i]; p.to == b.from {
			p.end, p.to = b.end, b.to
			q.merged = true
			return
		}
	}
	i := len(q.blocks)
	for i > 0 && q.blocks[i-1].tat.After(b.tat) {
		i--
	}
	q.blocks = slices.Insert(q.blocks, i, b)
}

// probeCall is the probe of a Quota in fallback: a heartbeat that reserves
// nothing.
func (q *Quota) probeCall() backend.Call {
	return backend.Call{Script: backend.GCRA, Quota: q.keys,
		GCRA: backend.GCRAArgs{MaxWait: -1, Member: q.member, MemberTTL: int64(memberTTL / time.Millisecond)}}
}

func (q *Quota) probed(r backend.Reply) {
	q.mu.Lock()
	q.members = r.GCRA.Members
	q.mu.Unlock()
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

// decideLocally decides without Redis, by the failure mode, for an attempt
// that could start now. cause is the Redis error, if this call saw one.
func (q *Quota) decideLocally(now time.Time, n int64, deadline time.Time, cause error) (time.Time, error) {
	e := now
	q.g.local.Add(1)
	switch q.g.mode {
	case FailOpen:
		return e, nil
	case FailClosed:
		q.g.refused.Add(1)
		if cause != nil {
			return time.Time{}, fmt.Errorf("%w: %w", ErrUnavailable, cause)
		}
		return time.Time{}, ErrUnavailable
	}
	l := q.share()
	q.mu.Lock()
	r := backend.GCRAAt(q.local, now, l.Interval(n), l.Tolerance(n), -1)
	s := later(e, now.Add(r.Wait))
	if !deadline.IsZero() && !s.Before(deadline) {
		q.mu.Unlock()
		q.g.refused.Add(1)
		return time.Time{}, pastDeadline("quota (local share)", s.Sub(now))
	}
	q.local = r.To
	q.mu.Unlock()
	return q.taken(e, s, nil)
}

// share is this process's share of the quota: Rate per Period × fleet size.
func (q *Quota) share() Limit {
	size := int64(q.fleet)
	if size == 0 {
		q.mu.Lock()
		size = q.members
		q.mu.Unlock()
	}
	size = max(size, 1)
	l := q.limit
	if l.Period > maxSchedule/time.Duration(size) {
		l.Period = maxSchedule
	} else {
		l.Period *= time.Duration(size)
	}
	return l
}

// giveBack returns the slot of an attempt that started at t and will not be
// made, if it is the last one taken from its block (a later one would
// otherwise move).
func (q *Quota) giveBack(t time.Time, n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	inc := q.limit.Interval(n)
	for i := range q.blocks {
		b := &q.blocks[i]
		if b.tat == q.lastEnd && q.lastStart == t {
			b.tat = b.tat.Add(-inc)
			q.lastEnd = time.Time{}
			return
		}
	}
}

func us(d time.Duration) int64 { return backend.Micros(d) }

func usWait(d time.Duration) int64 { return backend.MicrosWait(d) }
