package redisretry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/backoffkit/retry"
	"github.com/redis/go-redis/v9"
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
	// to this process's demand, up to Lease. 0 means 20.
	Lease int64

	// Slack is how late a leased slot may still be used: a slot this
	// process did not use within Slack of its time is lost. The fleet can
	// exceed the quota by at most Slack's share of the Period in any
	// window (2 % by default) while a busy process catches up. 0 means
	// Period/50; use a negative value for none.
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
// A retry's slot is taken when the loop asks, before its backoff wait, at the
// first free place on the schedule; the retry starts at the later of the two.
// Taking a slot at the retry's own start would block the schedule for the
// whole backoff (see docs/fleet.md).
//
// When Redis fails, is slower than QuotaConfig.Timeout or answers errors,
// the Quota decides by QuotaConfig.OnFailure (by default a local pacer at
// this process's share of the quota), logs one line, and goes back to Redis
// when a probe succeeds. A Quota is safe for concurrent use; its lease is
// behind one mutex, its state and counters are atomic.
type Quota struct {
	g      guard
	be     backend
	keys   quotaKeys
	limit  Limit
	lease  int64 // most requests' worth per round trip
	slack  time.Duration
	fleet  int
	member string

	mu       sync.Mutex
	blocks   []block   // leased stretches of the schedule, in order
	want     int64     // units to ask for at the next refill
	used     int64     // units taken since the last refill
	members  int64     // the fleet's size as last counted in Redis
	inflight *flight   // the refill in flight; nil if none
	local    time.Time // the local fallback pacer's TAT
	lastTo   int64     // the server time (µs) of the last block's end, for Close

	lastStart, lastEnd time.Time // the start given by the last take, and its block's TAT after it
}

// block is a stretch of the fleet's schedule leased to this process, in
// local time: slots from tat (the next free place) to end.
type block struct{ tat, end time.Time }

// NewQuota returns a Quota on client (a *redis.Client, ClusterClient, Ring or
// any redis.Scripter) configured by c. It makes no network call. It returns
// c's validation error, or an error if client is nil.
func NewQuota(client redis.Scripter, c QuotaConfig) (*Quota, error) {
	if client == nil {
		return nil, errors.New("redisretry: NewQuota: nil client")
	}
	return newQuota(scriptBackend{client}, c)
}

func newQuota(be backend, c QuotaConfig) (*Quota, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	q := &Quota{
		be: be, keys: newQuotaKeys(c.Key), limit: c.Limit, lease: c.Lease,
		slack: c.Slack, fleet: c.FleetSize, member: newMemberID(),
	}
	q.g.common = newCommon("quota", c.Key, c.Timeout, c.ProbeInterval, c.OnFailure, c.Logger, c.Observer, c.Now)
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
	return q, nil
}

func newMemberID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type costKey struct{}

// WithCost returns a context that makes a [Quota] charge n units for each
// attempt made under it (as [Quota.Reserve] and [Quota.Wait]), e.g. an
// estimate of a request's tokens for a tokens-per-minute quota. n < 1 means 1.
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
// Redis at most QuotaConfig.Timeout.
func (q *Quota) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	return q.reserve(ctx, costFrom(ctx), earliest, deadline)
}

// Record implements [retry.Pacer]. It does nothing: the slot was used
// whatever the outcome.
func (q *Quota) Record(err error) {}

// Wait blocks until the quota lets one request start, or ctx ends. It is
// WaitN(ctx, 1) (or the cost set by [WithCost]).
func (q *Quota) Wait(ctx context.Context) error { return q.WaitN(ctx, costFrom(ctx)) }

// WaitN blocks until the quota lets a request of n units start. If the wait
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
	q.mu.Lock()
	var unused int64
	to := q.lastTo
	if n := len(q.blocks); n > 0 && to != 0 {
		b := q.blocks[n-1]
		unused = us(b.end.Sub(later(b.tat, q.g.now())))
	}
	q.blocks = nil
	q.mu.Unlock()
	var err error
	if unused > 0 && q.g.healthy() {
		_, err = roundTrip(&q.g, context.Background(), q.g.timeout, func(ctx context.Context) (bool, error) {
			return q.be.gcraReturn(ctx, q.keys, to, unused)
		})
	}
	q.g.close()
	return err
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// pastDeadline is the error of a slot that would not start before the
// deadline.
func pastDeadline(limiter string, need time.Duration) error {
	return fmt.Errorf("redisretry: the fleet %s would need a wait of %v, past the deadline: %w", limiter, need.Round(time.Microsecond), retry.ErrPastDeadline)
}

func (q *Quota) reserve(ctx context.Context, n int64, earliest, deadline time.Time) (time.Time, error) {
	if ctx.Err() != nil {
		return time.Time{}, context.Cause(ctx)
	}
	if State(q.g.state.Load()) == StateClosed {
		return time.Time{}, ErrClosed
	}
	limit := q.g.now().Add(q.g.timeout) // this call waits for Redis until then at most
	for {
		now := q.g.now()
		e := later(earliest, now)
		if !q.g.healthy() {
			q.g.probe(q.probeFn)
			return q.decideLocally(now, e, n, deadline, nil)
		}
		q.mu.Lock()
		if t, ok, err := q.takeLocked(now, e, n, deadline); ok || err != nil {
			if ok && q.inflight == nil && q.lowLocked(now) {
				q.startRefillLocked(n, -1)
			}
			q.mu.Unlock()
			return q.taken(e, t, err)
		}
		f := q.inflight
		mine := f == nil
		if mine {
			maxWait := int64(-1)
			if !deadline.IsZero() {
				maxWait = usWait(max(deadline.Sub(now), 0))
			}
			f = q.startRefillLocked(n, maxWait)
		}
		q.mu.Unlock()
		if f == nil {
			return q.decideLocally(now, e, n, deadline, ErrClosed)
		}
		// Wait for the refill, but never past this call's limit: a refill
		// that answers later still fills the lease, for the next callers.
		if err := f.wait(ctx, limit.Sub(now)); err != nil {
			if ctx.Err() != nil {
				return time.Time{}, context.Cause(ctx)
			}
			return q.decideLocally(q.g.now(), e, n, deadline, err)
		}
		if mine && f.err != nil {
			if errors.Is(f.err, retry.ErrPastDeadline) {
				q.g.refused.Add(1)
				return time.Time{}, f.err
			}
			return q.decideLocally(q.g.now(), e, n, deadline, f.err)
		}
	}
}

// flight is a Redis round trip in flight: done is closed when it ends, then
// err holds its error.
type flight struct {
	done    chan struct{}
	err     error
	granted int64 // budget permits granted
}

// errSlow is the error of a caller that stopped waiting for a round trip at
// its own time limit: Redis is not marked as failed for it.
var errSlow = errors.New("redisretry: Redis did not answer in time for this call")

// wait waits for the flight to end, at most d, or until ctx ends.
func (f *flight) wait(ctx context.Context, d time.Duration) error {
	select {
	case <-f.done:
		return nil
	default:
	}
	if d <= 0 {
		return errSlow
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.done:
		return nil
	case <-t.C:
		return errSlow
	case <-ctx.Done():
		return context.Cause(ctx)
	}
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
	floor := now.Add(-q.slack)
	// Forget the blocks that are spent.
	for len(q.blocks) > 0 && !later(q.blocks[0].tat, floor).Before(q.blocks[0].end) {
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
		b.tat = base.Add(inc)
		q.used += n
		q.lastStart, q.lastEnd = s, b.tat
		return s, true, nil
	}
	return time.Time{}, false, nil
}

// lowLocked reports whether the lease is running out: less than a quarter of
// the last refill's size is left.
func (q *Quota) lowLocked(now time.Time) bool {
	floor := now.Add(-q.slack)
	var left time.Duration
	for _, b := range q.blocks {
		left += b.end.Sub(later(b.tat, floor))
	}
	return left < q.limit.Interval(q.want)/4
}

// sizeLocked returns the units to ask for at a refill for a request of n
// units: twice the last size while the lease was used up, else what was used,
// between n and Lease requests' worth. A granted block makes it the new size.
func (q *Quota) sizeLocked(n int64) int64 {
	w := q.want
	if q.used*4 >= w*3 {
		w *= 2
	} else {
		w = q.used
	}
	return min(max(w, n), q.lease*n)
}

// startRefillLocked starts a round trip for a block of the schedule in the
// background, for a request of n units; maxWait (µs, -1 for none) bounds the
// wait of the block's first request. It returns nil if the Quota is closed.
func (q *Quota) startRefillLocked(n, maxWait int64) *flight {
	f := &flight{done: make(chan struct{})}
	units := q.sizeLocked(n)
	a := gcraArgs{
		inc: us(q.limit.Interval(units)), tol: us(q.limit.Tolerance(n)), maxWait: maxWait,
		member: q.member, memberTTL: int64(memberTTL / time.Millisecond),
	}
	if !q.g.goroutine(func() { q.refill(f, units, a) }) {
		return nil
	}
	q.inflight = f
	return f
}

// refill makes the round trip of f and adds the block to the lease. f.err
// wraps retry.ErrPastDeadline when the block's first request would have had
// to wait maxWait or more.
func (q *Quota) refill(f *flight, units int64, a gcraArgs) {
	r, err := roundTrip(&q.g, context.Background(), q.g.timeout, func(ctx context.Context) (gcraReply, error) {
		return q.be.gcra(ctx, q.keys, a)
	})
	recv := q.g.now()
	q.mu.Lock()
	q.inflight = nil
	switch {
	case err != nil:
		f.err = err
	case !r.ok:
		q.members = r.members
		f.err = pastDeadline("quota", time.Duration(r.wait)*time.Microsecond)
	default:
		q.members = r.members
		if r.to > r.from {
			q.want, q.used = units, 0
			// Server times become local ones by their offset from the
			// server's now, counted from the reply's arrival: the block is
			// never earlier here than on the server.
			q.blocks = append(q.blocks, block{
				tat: recv.Add(time.Duration(r.from-r.now) * time.Microsecond),
				end: recv.Add(time.Duration(r.to-r.now) * time.Microsecond),
			})
			q.lastTo = r.to
		}
	}
	q.mu.Unlock()
	close(f.done)
	if err == nil && r.ok {
		q.g.refills.Add(1)
		q.g.emit(Event{Kind: EventRefill, Units: units})
	}
}

// probeFn is the probe of a Quota in fallback: a heartbeat that reserves
// nothing.
func (q *Quota) probeFn(ctx context.Context) error {
	r, err := q.be.gcra(ctx, q.keys, gcraArgs{maxWait: -1, member: q.member, memberTTL: int64(memberTTL / time.Millisecond)})
	if err == nil {
		q.mu.Lock()
		q.members = r.members
		q.mu.Unlock()
	}
	return err
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

// decideLocally decides without Redis, by the failure mode. cause is the
// Redis error, if this call saw one.
func (q *Quota) decideLocally(now, e time.Time, n int64, deadline time.Time, cause error) (time.Time, error) {
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
	r := GCRA(q.local, now, l.Interval(n), l.Tolerance(n), -1)
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
