package redisretry

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoffkit/retry"
	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// Defaults of a [CooldownConfig].
const (
	// DefaultCooldownMax caps a hint, as retry.Policy.MaxRetryAfter does
	// by default (its MaxDelay, 60 s).
	DefaultCooldownMax = retry.DefaultMaxDelay
	// DefaultCooldownCache is how long a Cooldown trusts what it last read
	// from Redis.
	DefaultCooldownCache = time.Second
	// DefaultCooldownJitter spreads the fleet's restart after a cooldown.
	DefaultCooldownJitter = time.Second
)

// CooldownConfig configures a [Cooldown]. Key is required; every other
// field's zero value is the documented default.
type CooldownConfig struct {
	// Settings are the fields every limiter has: Key (required; it names
	// what the cooldown pauses, e.g. an endpoint and a model; one
	// Cooldown per key; the Redis key is "{Key}:cooldown"), Timeout,
	// ProbeInterval, OnFailure (FailLocal: honour what this process
	// knows), Logger, Observer (state changes, published hints and
	// waits) and Now.
	Settings

	// Max caps a hint: a server asking for more gets Max, and so does what
	// is read from Redis (another process may have a larger Max). Keep it
	// short: a cooldown parked too long (a daily limit taken for a
	// per-minute one) stalls every process. 0 means 60 s.
	Max time.Duration

	// Cache is how long what was read from Redis is trusted: a cooldown
	// published by another process is seen within Cache (plus a round
	// trip). 0 means 1 s.
	Cache time.Duration

	// Jitter is the upper bound of a random extra wait after a cooldown,
	// drawn per attempt, so that the fleet does not restart all at once;
	// for an attempt with a deadline, at most the time between the
	// cooldown's end and the deadline. 0 means 1 s; a negative value means
	// none.
	Jitter time.Duration

	// Rand returns a uniform random number in [0, 1), safe for concurrent
	// use. nil means math/rand/v2's Float64.
	Rand func() float64
}

// Validate reports the first invalid field of c, naming it and its value.
func (c CooldownConfig) Validate() error {
	if err := c.Settings.validate("CooldownConfig"); err != nil {
		return err
	}
	switch {
	case c.Max < 0:
		return fmt.Errorf("redisretry: invalid CooldownConfig.Max = %v: must not be negative (0 means %v)", c.Max, DefaultCooldownMax)
	case c.Max > 0 && c.Max < time.Millisecond:
		return fmt.Errorf("redisretry: invalid CooldownConfig.Max = %v: must be at least 1ms", c.Max)
	case c.Cache < 0:
		return fmt.Errorf("redisretry: invalid CooldownConfig.Cache = %v: must not be negative (0 means %v)", c.Cache, DefaultCooldownCache)
	}
	return nil
}

// Cooldown shares a server's "retry after" hints with a fleet: when any
// process gets a hint (a 429 or 503 with Retry-After or RetryInfo, see
// [retry.After]), it is published as an absolute time, keeping the later one,
// and every process waits for it before its next attempt on the same key. One
// "retry in 25 s" pauses the fleet for that model, not only the process that
// got it. Hints are capped by CooldownConfig.Max.
//
// Cooldown implements [retry.Pacer]: set it as [retry.Policy.Pacer], before
// a [Quota] with [retry.Pacers] (it takes nothing, so it goes first). The
// loop's deadline rule applies: an attempt that could only start after its
// deadline gives up at once with an error wrapping [retry.ErrPastDeadline].
//
// What Redis holds is cached for CooldownConfig.Cache, so an attempt costs a
// round trip at most once per Cache. A Cooldown is safe for concurrent use:
// its state is atomic.
type Cooldown struct {
	g      guard
	key    string
	max    time.Duration
	cache  time.Duration
	jitter time.Duration
	rand   func() float64

	// Times are nanoseconds since base, the clock's reading when the
	// Cooldown was made: by the monotonic clock when the clock's readings
	// have one (time.Now's do), so a step of the wall clock moves none of
	// them.
	base     time.Time
	until    atomic.Int64 // the local end of the cooldown; never if none
	fetched  atomic.Int64 // the last read from Redis; never if none
	fetching atomic.Bool
	mu       sync.Mutex // guards the waits for a read
}

// NewCooldown returns a Cooldown on client (a *redis.Client, ClusterClient,
// Ring or any redis.Scripter) configured by c. It makes no network call. It
// returns c's validation error, or an error if client is nil.
func NewCooldown(client redis.Scripter, c CooldownConfig) (*Cooldown, error) {
	return newOnClient("NewCooldown", client, c.Now, c, buildCooldown)
}

// newCooldown returns a Cooldown whose calls run on r (the tests' in-memory
// Redis).
func newCooldown(r runner, c CooldownConfig) (*Cooldown, error) {
	return newOn(runnerEnv(r, c.Now), c, buildCooldown)
}

// buildCooldown returns the Cooldown configured by c, a valid config, on e.
func buildCooldown(e env, c CooldownConfig) *Cooldown {
	d := &Cooldown{
		key:    backend.CooldownKey(c.Key),
		max:    min(cmp.Or(c.Max, DefaultCooldownMax), maxSchedule), // times stay far from overflowing
		cache:  cmp.Or(c.Cache, DefaultCooldownCache),
		jitter: max(cmp.Or(c.Jitter, DefaultCooldownJitter), 0), // a negative Jitter: none
		rand:   c.Rand,
	}
	d.g.common = newCommon("cooldown", c.Key, c.Timeout, c.ProbeInterval, c.OnFailure, c.Logger, c.Observer, e)
	d.base = d.g.now()
	d.until.Store(never)
	d.fetched.Store(never)
	if d.rand == nil {
		d.rand = e.rand
	}
	if d.rand == nil {
		d.rand = rand.Float64
	}
	e.attach(cooldownCore{d})
	return d
}

// cooldownCore is the Cooldown's asynchronous core, for the fleet harness.
type cooldownCore struct{ d *Cooldown }

func (c cooldownCore) Reserve(earliest, deadline time.Time, done func(time.Time, error)) {
	c.d.reserveAsync(earliest, deadline, done)
}

func (c cooldownCore) Record(err error, done func()) {
	if hint, ok := hintOf(err); ok {
		c.d.publishAsync(hint, done)
		return
	}
	done()
}

// Reserve implements [retry.Pacer]: it returns earliest, or the end of the
// fleet's cooldown for this key plus a jitter if that end is later. The end
// is never more than Max from now (a wall clock set back cannot stretch
// it). When the end (without jitter) would not be before deadline it returns
// an error wrapping [retry.ErrPastDeadline] that says how long the cooldown
// lasts; otherwise the jitter is drawn uniformly in [0, min(Jitter,
// deadline − end)), so the start is before deadline, and at most Max +
// Jitter from now. It takes nothing. It reads Redis only when the cached
// value is older than CooldownConfig.Cache, and waits for it at most the
// timeout, never past deadline (then it returns at the deadline with an
// error wrapping [retry.ErrPastDeadline]) and not after ctx ends (then it
// returns ctx's cause). A read that timed out turns the Cooldown to its
// FailureMode until a probe reaches Redis: the next calls do not wait for
// Redis.
func (d *Cooldown) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	if ctx.Err() != nil {
		return time.Time{}, context.Cause(ctx)
	}
	if !d.readDue() {
		return d.decide(earliest, deadline)
	}
	ch := make(chan reserveResult, 1)
	w := d.reserveAsync(earliest, deadline, func(t time.Time, err error) { ch <- reserveResult{t, err} })
	select {
	case res := <-ch:
		return res.t, res.err
	case <-ctx.Done():
	}
	if w != nil && d.cancel(w) {
		return time.Time{}, context.Cause(ctx)
	}
	res := <-ch
	return res.t, res.err
}

// never is the time of a cooldown that was never set or read.
const never = math.MinInt64

// since returns now as nanoseconds since d.base (see Cooldown.base).
func (d *Cooldown) since(now time.Time) int64 { return int64(now.Sub(d.base)) }

// readDue reports whether what was read from Redis is older than Cache (or
// was read "later" than now: a clock with no monotonic reading went back).
func (d *Cooldown) readDue() bool {
	if !d.g.healthy() {
		return false
	}
	f, now := d.fetched.Load(), d.since(d.g.now())
	return f == never || now-f >= int64(d.cache) || now < f
}

// coolWait is a Reserve waiting for a read of the fleet's cooldown.
type coolWait struct {
	earliest, deadline time.Time
	done               func(time.Time, error)
	waitState          // under Cooldown.mu; the deadline's timer, if it comes before the timeout
}

// reserveAsync decides a Reserve and calls done with the outcome, once,
// perhaps before it returns. It returns the wait while it waits for Redis
// (nil if decided already), for cancel. One read at a time, until it ends:
// callers that come while it is in flight (one that stopped waiting at its
// deadline included) decide with what is known, without waiting.
func (d *Cooldown) reserveAsync(earliest, deadline time.Time, done func(time.Time, error)) *coolWait {
	if !d.readDue() || !d.fetching.CompareAndSwap(false, true) {
		done(d.decide(earliest, deadline))
		return nil
	}
	w := &coolWait{earliest: earliest, deadline: deadline, done: done}
	var left time.Duration
	if !deadline.IsZero() {
		if left = deadline.Sub(d.g.now()); left <= 0 {
			d.fetching.Store(false)
			done(d.tooSlow())
			return nil
		}
	}
	d.mu.Lock()
	sent := d.g.send(d.readCall(), func(r backend.Reply, err error) {
		if err == nil {
			d.learn(r.Cooldown)
		}
		d.fetching.Store(false)
		if d.finish(w) {
			w.done(d.decide(w.earliest, w.deadline))
		}
	})
	if sent && !deadline.IsZero() && left < d.g.timeout {
		w.stop = d.g.clock.AfterFunc(left, func() {
			if d.finish(w) {
				w.done(d.tooSlow())
			}
		})
	}
	w.over = !sent
	d.mu.Unlock()
	if !sent {
		d.fetching.Store(false)
		done(d.decide(earliest, deadline)) // closed
		return nil
	}
	return w
}

// tooSlow is the outcome of a Reserve whose deadline came before Redis
// answered: no attempt can start before it now.
func (d *Cooldown) tooSlow() (time.Time, error) {
	d.g.refused.Add(1)
	return time.Time{}, fmt.Errorf("redisretry: the fleet cooldown could not be read from Redis before the deadline: %w", retry.ErrPastDeadline)
}

// finish marks w decided, unless it was already (or cancelled).
func (d *Cooldown) finish(w *coolWait) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return w.end()
}

// cancel withdraws w (its caller's context ended): it reports whether it
// did, before w was decided. The read goes on.
func (d *Cooldown) cancel(w *coolWait) bool { return d.finish(w) }

// decide decides a Reserve with what is known.
func (d *Cooldown) decide(earliest, deadline time.Time) (time.Time, error) {
	switch State(d.g.state.Load()) {
	case StateClosed:
		return time.Time{}, ErrClosed
	case StateFallback:
		d.g.probe(d.readCall, d.learnReply)
		switch d.g.withoutRedis() {
		case FailOpen:
			return earliest, nil
		case FailClosed:
			return time.Time{}, ErrUnavailable
		}
	}
	now := d.g.now()
	u := d.until.Load()
	if u == never {
		return earliest, nil
	}
	n := d.since(now)
	left := time.Duration(satSub(u, n))
	if left > d.max {
		// The end is never set more than Max ahead: the clock has no
		// monotonic reading and was set back. The cooldown ends Max from
		// now at the latest.
		d.until.CompareAndSwap(u, n+int64(d.max))
		left = d.max
	}
	end := now.Add(left)
	if left <= 0 || !end.After(earliest) {
		return earliest, nil // over, or over by earliest
	}
	if !deadline.IsZero() && !end.Before(deadline) {
		d.g.refused.Add(1)
		return time.Time{}, pastDeadline("cooldown", end.Sub(now))
	}
	t := end.Add(d.jitterBefore(end, deadline))
	d.g.waits.Add(1)
	d.g.emit(Event{Kind: EventCooldownWait, Wait: t.Sub(earliest)})
	return t, nil
}

// jitterBefore draws the jitter of a start at end: uniform in [0, Jitter),
// and in [0, deadline − end) when that is shorter, so that the start stays
// before the deadline (end is before it).
func (d *Cooldown) jitterBefore(end, deadline time.Time) time.Duration {
	j := d.jitter
	if !deadline.IsZero() {
		j = min(j, deadline.Sub(end))
	}
	if j <= 0 {
		return 0
	}
	x := time.Duration(d.rand() * float64(j))
	return min(max(x, 0), j-1) // in range whatever Rand returns
}

// Record implements [retry.Pacer]: an error carrying a server's hint
// ([retry.RetryAfter]) of more than 0 is capped by CooldownConfig.Max and
// published for the fleet (one Redis call, bounded by the timeout; while Redis
// is unavailable it is kept locally only).
func (d *Cooldown) Record(err error) {
	if hint, ok := hintOf(err); ok {
		d.Publish(context.Background(), hint)
	}
}

// hintOf returns the server's hint err carries, if it is more than 0.
func hintOf(err error) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	hint, ok := retry.RetryAfter(err)
	return hint, ok && hint > 0
}

// Publish pauses the fleet for d (capped by CooldownConfig.Max) from now, or
// until the current cooldown ends if that is later. Record calls it for
// hints; call it directly for a pause learned some other way.
func (d *Cooldown) Publish(ctx context.Context, hint time.Duration) {
	ch := make(chan struct{})
	d.publishAsync(hint, func() { close(ch) })
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// publishAsync is Publish that calls done once the hint was published (or
// the call to Redis failed), perhaps before it returns.
func (d *Cooldown) publishAsync(hint time.Duration, done func()) {
	hint = min(hint, d.max)
	if hint <= 0 || State(d.g.state.Load()) == StateClosed {
		done()
		return
	}
	d.raise(d.since(d.g.now()) + int64(hint))
	d.g.emit(Event{Kind: EventHint, Wait: hint})
	if !d.g.healthy() {
		done()
		return
	}
	ms := max(int64(hint/time.Millisecond), 1)
	if !d.g.send(backend.Call{Script: backend.Cooldown, Cooldown: d.key, HintMS: ms}, func(r backend.Reply, err error) {
		if err == nil {
			d.learn(r.Cooldown)
		}
		done()
	}) {
		done()
	}
}

// Until returns the end of the cooldown as this process knows it (the zero
// Time if none), without calling Redis. It has a monotonic reading when
// CooldownConfig.Now's readings have one (time.Now's do).
func (d *Cooldown) Until() time.Time {
	if u := d.until.Load(); u != never {
		return d.base.Add(time.Duration(u))
	}
	return time.Time{}
}

// Stats returns the Cooldown's counters.
func (d *Cooldown) Stats() Stats { return d.g.stats() }

// State returns whether the Cooldown decides with Redis now.
func (d *Cooldown) State() State { return State(d.g.state.Load()) }

// Close waits for the Redis calls in flight. Reserve then returns
// [ErrClosed].
func (d *Cooldown) Close() error {
	d.g.close()
	return nil
}

// readCall reads the fleet's cooldown (and is the probe in fallback).
func (d *Cooldown) readCall() backend.Call {
	return backend.Call{Script: backend.Cooldown, Cooldown: d.key}
}

func (d *Cooldown) learnReply(r backend.Reply) { d.learn(r.Cooldown) }

// learn takes a reply's remaining time, from the reply's arrival, capped by
// Max: a process with a larger Max (or a server whose clock went back, or
// that lies) cannot park this one longer.
func (d *Cooldown) learn(r backend.CooldownReply) {
	now := d.since(d.g.now())
	d.fetched.Store(now)
	if r.Remaining > 0 {
		left := min(r.Remaining, int64(d.max/time.Millisecond))
		d.raise(now + left*int64(time.Millisecond))
	}
}

// raise moves the local end of the cooldown to u (nanoseconds since base) if
// that is later.
func (d *Cooldown) raise(u int64) {
	for {
		old := d.until.Load()
		if u <= old || d.until.CompareAndSwap(old, u) {
			return
		}
	}
}
