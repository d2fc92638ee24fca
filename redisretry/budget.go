package redisretry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoffkit/retry"
	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// DefaultBudgetLease is the most retry permits a Budget takes per Redis round
// trip, used when BudgetConfig.Lease is 0.
const DefaultBudgetLease = 10

// budgetSlots is the number of slots of the window, as in retry.RatioBudget.
const budgetSlots = 20

// BudgetConfig configures a [Budget]. Key is required; every other field's
// zero value is the documented default. Ratio, Window and MinPerSecond mean
// what they mean in [retry.RatioBudgetConfig], for the whole fleet.
type BudgetConfig struct {
	// Settings are the fields every limiter has: Key (required; every
	// process of the fleet must use the same Window, Ratio and
	// MinPerSecond with it: a Budget that finds another configuration in
	// Redis logs it once; the Redis keys are "{Key}:budget:requests",
	// "{Key}:budget:retries" and "{Key}:budget:config"), Timeout,
	// ProbeInterval, OnFailure (FailLocal: a retry.RatioBudget of this
	// configuration decides), Logger, Observer (state changes and
	// refills) and Now.
	Settings

	// Ratio is the number of retries the fleet may make per request made
	// in the window. 0 means 0.2.
	Ratio float64

	// Window is how long a request or a retry is remembered. 0 means 10 s.
	// It slides in steps of Window/20, whole milliseconds.
	Window time.Duration

	// MinPerSecond is a floor of retries per second of Window for the
	// whole fleet, allowed whatever the traffic: by default 100 retries
	// per 10 s for all the processes together, which is what decides (at
	// the default Ratio) for a fleet of fewer than 500 requests per 10 s.
	// 0 means 10; a negative value means no floor. In fallback each
	// process keeps this floor for itself.
	MinPerSecond float64

	// Lease is the most retry permits taken per Redis round trip. A
	// process uses them within one slot (Window/20) and gives back what it
	// did not use. The size adapts to this process's retries, up to Lease.
	// 0 means 10.
	Lease int64

	// FlushInterval is how often this process's requests are counted in
	// Redis, in one batch. 0 means a slot (Window/20).
	FlushInterval time.Duration
}

// Validate reports the first invalid field of c, naming it and its value.
func (c BudgetConfig) Validate() error {
	if err := c.Settings.validate("BudgetConfig"); err != nil {
		return err
	}
	if err := c.local().Validate(); err != nil {
		return fmt.Errorf("redisretry: invalid BudgetConfig: %w", err)
	}
	switch {
	case c.Lease < 0:
		return fmt.Errorf("redisretry: invalid BudgetConfig.Lease = %d: must not be negative (0 means %d)", c.Lease, DefaultBudgetLease)
	case c.FlushInterval < 0:
		return fmt.Errorf("redisretry: invalid BudgetConfig.FlushInterval = %v: must not be negative (0 means Window/20)", c.FlushInterval)
	}
	return nil
}

func (c BudgetConfig) local() retry.RatioBudgetConfig {
	return retry.RatioBudgetConfig{Ratio: c.Ratio, Window: c.Window, MinPerSecond: c.MinPerSecond, Now: c.Now}
}

func (c BudgetConfig) resolve() BudgetConfig {
	if c.Ratio == 0 {
		c.Ratio = retry.DefaultBudgetRatio
	}
	if c.Window == 0 {
		c.Window = retry.DefaultBudgetWindow
	}
	if c.MinPerSecond == 0 {
		c.MinPerSecond = retry.DefaultBudgetMinPerSecond
	}
	if c.Lease == 0 {
		c.Lease = DefaultBudgetLease
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = c.slot()
	}
	return c
}

// slot is the width of a slot, whole milliseconds (at least 1).
func (c BudgetConfig) slot() time.Duration {
	return max((c.Window / budgetSlots).Truncate(time.Millisecond), time.Millisecond)
}

func (c BudgetConfig) floor() float64 {
	return max(c.MinPerSecond, 0) * c.Window.Seconds()
}

// Budget is a retry budget for a whole fleet: retries are allowed while the
// fleet's retries stay within Ratio of the fleet's requests over a sliding
// window (with a floor), the rule of [retry.RatioBudget], counted in Redis.
// When Redis says the budget is exhausted, retries are refused locally for a
// slot (Window/20) before it is asked again.
// It implements [retry.Limiter] for [retry.Policy.Budget]; first attempts are
// never refused.
//
// Requests are counted locally and flushed in one batch per FlushInterval;
// retry permits are taken in blocks (leases), refilled in the background
// before they run out, and given back when unused. So a request costs a few
// atomic operations and a retry rarely waits for Redis, never longer than
// Timeout.
//
// A [retry.RatioBudget] of the same configuration counts this process's
// requests and retries all along; while Redis is unavailable it decides (by
// default: see [FailureMode]). A Budget is safe for concurrent use: counters
// are atomic, the lease is behind one mutex.
type Budget struct {
	g      guard
	keys   backend.BudgetKeys
	local  *retry.RatioBudget
	args   backend.BudgetArgs // the window's parameters
	lease  int64
	ttl    time.Duration // how long a lease's permits may be used: a slot
	every  time.Duration // FlushInterval
	pend   atomic.Int64  // requests not yet counted in Redis
	base   time.Time     // when the Budget was made: the clock's reading flushT counts from
	flushT atomic.Int64  // when the next flush is due, nanoseconds since base

	mu        sync.Mutex
	leases    []permits
	want      int64
	used      int64
	back      []permits // unused permits to give back, one epoch each
	closing   bool      // Close was called: no round trip starts
	lastEpoch int64     // the epoch of the lease the last permit came from
	dry       time.Time // the fleet's budget was exhausted: refuse locally until then
	inflight  *flight   // the round trip in flight; nil if none

	mismatch atomic.Bool // another configuration of the budget was logged
}

// permits is a lease of retry permits granted in a slot.
type permits struct {
	n       int64
	epoch   int64
	expires time.Time
}

// NewBudget returns a Budget on client (a *redis.Client, ClusterClient, Ring
// or any redis.Scripter) configured by c. It makes no network call. It
// returns c's validation error, or an error if client is nil.
func NewBudget(client redis.Scripter, c BudgetConfig) (*Budget, error) {
	return newOnClient("NewBudget", client, c.Now, c, buildBudget)
}

// newBudget returns a Budget whose calls run on r (the tests' in-memory
// Redis).
func newBudget(r runner, c BudgetConfig) (*Budget, error) {
	return newOn(runnerEnv(r, c.Now), c, buildBudget)
}

// buildBudget returns the Budget configured by c, a valid config, on e.
func buildBudget(e env, c BudgetConfig) *Budget {
	local := retry.NewRatioBudget(c.local()) // c is valid: no panic
	c = c.resolve()
	b := &Budget{
		keys: backend.NewBudgetKeys(c.Key), local: local, lease: c.Lease, ttl: c.slot(), every: c.FlushInterval,
		args: backend.BudgetArgs{SlotMS: int64(c.slot() / time.Millisecond), Slots: budgetSlots, Ratio: c.Ratio, Floor: c.floor()},
		want: 1,
	}
	b.g.common = newCommon("budget", c.Key, c.Timeout, c.ProbeInterval, c.OnFailure, c.Logger, c.Observer, e)
	b.base = b.g.now()
	b.flushT.Store(int64(b.every))
	e.attach(budgetCore{b})
	return b
}

// budgetCore is the Budget's asynchronous core, for the fleet harness.
type budgetCore struct{ b *Budget }

func (c budgetCore) Admit(retry bool, deadline time.Time, done func(bool)) {
	c.b.admitAsync(retry, deadline, done)
}
func (c budgetCore) Cancel(retry bool) { c.b.Cancel(retry) }
func (c budgetCore) Record(ok bool)    { c.b.Record(ok) }

// Admit implements [retry.Limiter]. A first attempt (retry false) is counted
// and admitted. A retry is admitted if this process holds a permit of the
// fleet's budget, or gets one from Redis within Timeout; while Redis is
// unavailable, as the FailureMode says. It is AdmitContext with no context
// and no deadline.
func (b *Budget) Admit(retry bool) bool {
	return b.AdmitContext(context.Background(), retry, time.Time{})
}

// AdmitContext is Admit for a caller that has a context and a deadline
// (zero for none): a retry waits for Redis at most Timeout, never past
// deadline and not after ctx ends; then (Redis too slow for this call) the
// FailureMode decides, without marking Redis failed unless the Timeout
// passed. [retry.Limiter] has no context: a caller that wraps a Budget for
// the loop can pass the loop's own (see [retry.Pacer]'s Reserve, which gets
// both).
func (b *Budget) AdmitContext(ctx context.Context, retry bool, deadline time.Time) bool {
	if !retry {
		b.admitFirst()
		return true
	}
	ch := make(chan bool, 1)
	a := b.admitAsync(true, deadline, func(ok bool) { ch <- ok })
	select {
	case ok := <-ch:
		return ok
	case <-ctx.Done():
	}
	if a != nil && b.cancel(a) {
		return b.decideLocally() // ctx ended while Redis was asked
	}
	return <-ch
}

// admitFirst counts a first attempt, and starts a flush when one is due. In
// fallback it probes Redis when a probe is due (one atomic load when none
// is), so a process that makes no retries goes back to Redis too; the probe
// counts no request: those made in fallback are counted locally only.
func (b *Budget) admitFirst() {
	b.local.Admit(false)
	if !b.g.healthy() {
		b.g.probe(b.flushCall, nil)
		return
	}
	b.pend.Add(1)
	t, now := b.flushT.Load(), b.since(b.g.now())
	// Due, or the clock went back past the last flush (a clock with no
	// monotonic reading was set back): flush now rather than wait for it.
	if (now >= t || now < t-int64(b.every)) && b.flushT.CompareAndSwap(t, now+int64(b.every)) {
		b.mu.Lock()
		if b.inflight == nil {
			b.startLocked(false)
		}
		b.mu.Unlock()
	}
}

// since returns the nanoseconds from the Budget's making to now, by the
// monotonic clock when both readings have one (time.Now's do): a step of the
// wall clock does not move it.
func (b *Budget) since(now time.Time) int64 { return int64(now.Sub(b.base)) }

// admission is a retry waiting for a round trip of the budget: at most
// until limit (the timeout, or the deadline if earlier).
type admission struct {
	limit time.Time
	done  func(bool)

	// Under Budget.mu:
	f         *flight     // the round trip it waits for
	mine      bool        // it started f
	over      bool        // not waiting (decided, or being decided)
	cancelled bool        // its caller's context ended: decide it locally
	stop      func() bool // the timer of its wait
}

// admitAsync decides an Admit and calls done with the outcome, once,
// perhaps before it returns. It returns the admission while it waits for
// Redis (nil if decided already), for cancel. A first attempt is counted and
// admitted; a retry takes a permit of the lease, or waits for a round trip
// (at most Timeout, never past deadline) and tries again.
func (b *Budget) admitAsync(retry bool, deadline time.Time, done func(bool)) *admission {
	if !retry {
		b.admitFirst()
		done(true)
		return nil
	}
	limit := b.g.now().Add(b.g.timeout)
	if !deadline.IsZero() && deadline.Before(limit) {
		limit = deadline
	}
	a := &admission{limit: limit, done: done}
	if b.tryAdmit(a) {
		return a
	}
	return nil
}

// tryAdmit decides a, or makes it wait for a round trip (then it reports
// true).
func (b *Budget) tryAdmit(a *admission) bool {
	if !b.g.healthy() {
		b.g.probe(b.flushCall, nil)
		a.done(b.decideLocally())
		return false
	}
	now := b.g.now()
	b.mu.Lock()
	if b.ahead(now, b.dry) && b.leftLocked(now) == 0 {
		// Redis said no a moment ago: do not ask again per retry.
		b.mu.Unlock()
		b.g.refused.Add(1)
		a.done(false)
		return false
	}
	if b.takeLocked(now) {
		if b.inflight == nil && b.leftLocked(now)*4 < b.want {
			b.startLocked(true)
		}
		b.mu.Unlock()
		b.local.Admit(true) // keep the local budget's count warm for a fallback
		a.done(true)
		return false
	}
	f := b.inflight
	mine := f == nil
	if mine {
		f = b.startLocked(true)
	}
	d := a.limit.Sub(now)
	if f == nil || d <= 0 || a.cancelled {
		// Closed, or Redis is too slow for this call.
		b.mu.Unlock()
		a.done(b.decideLocally())
		return false
	}
	a.f, a.mine, a.over = f, mine, false
	f.waiters = append(f.waiters, a)
	a.stop = b.g.clock.AfterFunc(d, func() { b.admitWaited(a) })
	b.mu.Unlock()
	return true
}

// admitWaited decides a when its wait for the round trip ended first:
// Redis is too slow for this call.
func (b *Budget) admitWaited(a *admission) {
	if b.withdraw(a) {
		a.done(b.decideLocally())
	}
}

// cancel withdraws a (its caller's context ended): it reports whether it
// did, before a was decided; if not, a is decided promptly.
func (b *Budget) cancel(a *admission) bool {
	b.mu.Lock()
	a.cancelled = true
	b.mu.Unlock()
	if !b.withdraw(a) {
		return false
	}
	a.stop()
	return true
}

// withdraw takes a off its round trip's waiters, unless it is not waiting.
func (b *Budget) withdraw(a *admission) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a.over {
		return false
	}
	a.over = true
	if i := slices.Index(a.f.waiters, a); i >= 0 {
		a.f.waiters = slices.Delete(a.f.waiters, i, i+1)
	}
	return true
}

// Record implements [retry.Limiter]: it tells the local budget (a
// RatioBudget counts attempts, not outcomes).
func (b *Budget) Record(ok bool) { b.local.Record(ok) }

// Cancel takes back an admission whose attempt was not made after all (see
// [retry.Limiter]: the loop calls it when a pacer refused the attempt, the
// deadline came first or the context ended): the permit of a retry goes back
// to this process's lease (or back to the fleet with the next round trip if
// its lease has expired), the count of a first attempt comes off the
// requests not yet flushed, and the local budget forgets either. A request
// already counted in Redis stays counted (the next flush subtracts it from
// this process's new requests).
func (b *Budget) Cancel(retry bool) {
	healthy := b.g.healthy()
	if healthy || b.g.mode == FailLocal || !retry {
		b.local.Cancel(retry)
	}
	if !healthy {
		return
	}
	if !retry {
		b.pend.Add(-1)
		return
	}
	now := b.g.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.leases {
		if l := &b.leases[i]; l.epoch == b.lastEpoch && b.ahead(now, l.expires) {
			l.n++
			b.used--
			return
		}
	}
	b.giveBackLocked(permits{n: 1, epoch: b.lastEpoch})
}

// giveBackLocked keeps unused permits to give back with the next round trip.
func (b *Budget) giveBackLocked(p permits) {
	for i := range b.back {
		if b.back[i].epoch == p.epoch {
			b.back[i].n += p.n
			return
		}
	}
	b.back = append(b.back, permits{n: p.n, epoch: p.epoch})
}

// pending takes the requests to count in Redis: those admitted since the last
// flush, less those cancelled (a negative remainder waits for the next one).
func (b *Budget) pending() int64 {
	n := b.pend.Swap(0)
	if n < 0 {
		b.pend.Add(n)
		return 0
	}
	return n
}

// Stats returns the Budget's counters.
func (b *Budget) Stats() Stats { return b.g.stats() }

// State returns whether the Budget decides with Redis now.
func (b *Budget) State() State { return State(b.g.state.Load()) }

// Close counts the requests not yet flushed and gives back the unused
// permits (a Redis call per slot they were granted in, at most two, each
// bounded by the timeout), after the round trip in flight. Admit then
// decides with the local budget. Close is idempotent.
func (b *Budget) Close() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return nil
	}
	b.closing = true // no round trip starts now
	f := b.inflight
	b.mu.Unlock()
	if f != nil {
		<-f.done // bounded by the timeout
	}
	now := b.g.now()
	b.mu.Lock()
	for _, l := range b.leases {
		if l.n > 0 && b.ahead(now, l.expires) {
			b.giveBackLocked(l)
		}
	}
	b.leases = nil
	back := b.back
	b.back = nil
	b.mu.Unlock()
	var errs []error
	add := b.pending()
	for i := 0; (i < len(back) || add > 0) && b.g.healthy(); i++ {
		a := b.args
		a.Add, add = add, 0
		if i < len(back) {
			a.Back, a.BackEpoch = back[i].n, back[i].epoch
		}
		_, err := b.g.call(context.Background(), backend.Call{Script: backend.Budget, Budget: b.keys, BudgetArgs: a})
		errs = append(errs, err)
	}
	b.g.close()
	return errors.Join(errs...)
}

// ahead reports whether t, a time set at most a slot ahead (a lease's
// expiry, the end of a refusal), is still ahead of now. One further ahead
// than that has passed: the clock has no monotonic reading and was set back.
func (b *Budget) ahead(now, t time.Time) bool { return now.Before(t) && t.Sub(now) <= b.ttl }

// takeLocked takes a permit from an unexpired lease; expired ones are kept
// for giving back.
func (b *Budget) takeLocked(now time.Time) bool {
	for len(b.leases) > 0 && (b.leases[0].n == 0 || !b.ahead(now, b.leases[0].expires)) {
		if b.leases[0].n > 0 {
			b.giveBackLocked(b.leases[0])
		}
		b.leases = b.leases[1:]
	}
	if len(b.leases) == 0 {
		return false
	}
	b.leases[0].n--
	b.used++
	b.lastEpoch = b.leases[0].epoch
	return true
}

func (b *Budget) leftLocked(now time.Time) int64 {
	var n int64
	for _, l := range b.leases {
		if b.ahead(now, l.expires) {
			n += l.n
		}
	}
	return n
}

// startLocked sends a round trip: it counts the pending requests, gives
// back unused permits (of one epoch) and, if permit is true, asks for a
// lease. It returns nil if the Budget is closed.
func (b *Budget) startLocked(permit bool) *flight {
	a := b.args
	if permit {
		w := b.want
		if b.used*4 >= w*3 {
			w *= 2
		} else {
			w = b.used
		}
		a.Want = min(max(w, 1), b.lease)
	}
	if b.closing {
		return nil
	}
	if len(b.back) > 0 {
		a.Back, a.BackEpoch = b.back[0].n, b.back[0].epoch
	}
	a.Add = b.pending()
	b.flushT.Store(b.since(b.g.now()) + int64(b.every))
	f := &flight{done: make(chan struct{})}
	if !b.g.send(backend.Call{Script: backend.Budget, Budget: b.keys, BudgetArgs: a}, func(r backend.Reply, err error) {
		b.landed(f, a, r.Budget, err)
	}) {
		b.pend.Add(a.Add) // not counted: count them later
		return nil
	}
	if len(b.back) > 0 {
		b.back = b.back[1:]
	}
	b.inflight = f
	return f
}

// landed takes the reply of the round trip f made with the arguments a: it
// adds the permits granted to the lease, and the retries that waited for it
// try again.
func (b *Budget) landed(f *flight, a backend.BudgetArgs, r backend.BudgetReply, err error) {
	// On an error the requests are not counted: the budget errs on the
	// strict side.
	if err == nil && r.Other != "" {
		b.otherConfig(r.Other)
	}
	b.mu.Lock()
	b.inflight = nil
	f.err = err
	if err == nil && a.Want > 0 && r.Granted == 0 {
		b.dry = b.g.now().Add(b.ttl)
	}
	if err == nil && r.Granted > 0 {
		f.granted = r.Granted
		b.want, b.used = a.Want, 0
		b.leases = append(b.leases, permits{n: r.Granted, epoch: r.Epoch, expires: b.g.now().Add(b.ttl)})
	}
	waiters := f.waiters
	f.waiters = nil
	for _, w := range waiters {
		w.over = true
		w.stop()
	}
	b.mu.Unlock()
	close(f.done)
	if f.granted > 0 {
		b.g.refills.Add(1)
		b.g.emit(Event{Kind: EventRefill, Units: r.Granted})
	}
	for _, w := range waiters {
		if w.mine && f.err == nil && f.granted == 0 {
			b.g.refused.Add(1)
			w.done(false) // the fleet's budget is exhausted
			continue
		}
		b.tryAdmit(w)
	}
}

// otherConfig logs, once per Budget, that another process uses this budget
// (its Key, on this Redis) with another configuration: other, as budget.lua
// returned it. Their windows' slots (Window) or limits (Ratio, MinPerSecond)
// then disagree: each decides by its own, and slots of another width are
// deleted as out of the window.
func (b *Budget) otherConfig(other string) {
	if !b.mismatch.CompareAndSwap(false, true) {
		return
	}
	b.g.log().Warn("redisretry: another process shares this budget with another configuration: give every process of the fleet the same Window, Ratio and MinPerSecond",
		"limiter", b.g.limiter, "key", b.g.key, "this", describeBudget(b.args.Config()), "other", describeBudget(other))
}

// describeBudget writes a configuration stored by budget.lua
// ("slotms/slots/ratio/floor") as the BudgetConfig fields it comes from.
func describeBudget(cfg string) string {
	p := strings.Split(cfg, "/")
	if len(p) == 4 {
		slotMS, err1 := strconv.ParseInt(p[0], 10, 64)
		slots, err2 := strconv.ParseInt(p[1], 10, 64)
		ratio, err3 := strconv.ParseFloat(p[2], 64)
		floor, err4 := strconv.ParseFloat(p[3], 64)
		if err := errors.Join(err1, err2, err3, err4); err == nil && slotMS > 0 && slots > 0 && slotMS <= math.MaxInt64/slots/int64(time.Millisecond) {
			window := time.Duration(slotMS*slots) * time.Millisecond
			return fmt.Sprintf("Window %v, Ratio %v, MinPerSecond %v", window, ratio, floor/window.Seconds())
		}
	}
	return fmt.Sprintf("%.100q", cfg) // not a configuration: another program's
}

// flushCall is the probe of a Budget in fallback: it counts the pending
// requests.
func (b *Budget) flushCall() backend.Call {
	a := b.args
	a.Add = b.pending()
	return backend.Call{Script: backend.Budget, Budget: b.keys, BudgetArgs: a}
}

func (b *Budget) decideLocally() bool {
	switch b.g.withoutRedis() {
	case FailLocal:
		if !b.local.Admit(true) {
			b.g.refused.Add(1)
			return false
		}
	case FailClosed:
		return false
	}
	return true
}

// flight is a Budget's Redis round trip in flight: done is closed when it
// ends, then err holds its error and granted the permits it got.
type flight struct {
	done    chan struct{}
	err     error
	granted int64
	waiters []*admission // under Budget.mu
}
