package redisretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoffkit/retry/internal/enum"
	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// Defaults of the fields every config has.
const (
	// DefaultTimeout bounds every Redis call (Envoy's rate-limit filter
	// uses 20 ms too).
	DefaultTimeout = 20 * time.Millisecond
	// DefaultProbeInterval is how often a limiter that fell back tries
	// Redis again.
	DefaultProbeInterval = time.Second
)

// FailureMode says what a limiter does while Redis is unavailable (down,
// slower than the timeout, or answering errors).
type FailureMode uint8

const (
	// FailLocal, the default, decides with the local equivalent: the
	// budget with a [retry.RatioBudget] of the same configuration, the
	// quota with a local pacer at this process's share of the quota, the
	// cooldown with what this process knows (its own hints and the last one
	// read from Redis).
	FailLocal FailureMode = iota
	// FailOpen lets every attempt go: no budget, no pacing, no cooldown
	// (Envoy's default, failure_mode_deny: false).
	FailOpen
	// FailClosed refuses: the budget refuses every retry (first attempts
	// are never refused by a budget), the quota and the cooldown refuse
	// every attempt with an error wrapping [ErrUnavailable].
	FailClosed
)

// String returns "local", "open" or "closed".
func (m FailureMode) String() string { return enum.Name(m, "FailureMode", "local", "open", "closed") }

// State is a limiter's health: whether it decides with Redis or on its own.
type State uint8

const (
	// StateRedis: Redis answers; the fleet's state decides.
	StateRedis State = iota
	// StateFallback: Redis failed; the limiter decides by its FailureMode
	// and probes Redis every ProbeInterval.
	StateFallback
	// StateClosed: Close was called.
	StateClosed
)

// String returns "redis", "fallback" or "closed".
func (s State) String() string { return enum.Name(s, "State", "redis", "fallback", "closed") }

// ErrUnavailable is wrapped by the error a fail-closed quota or cooldown
// returns while Redis is unavailable.
var ErrUnavailable = errors.New("redisretry: Redis unavailable (fail-closed)")

// ErrClosed is returned by a Quota or a Cooldown used after Close.
var ErrClosed = errors.New("redisretry: limiter closed")

// EventKind says what an [Event] reports.
type EventKind uint8

const (
	// EventFallback: a Redis call failed or timed out; the limiter now
	// decides by its FailureMode. Event.Err is the error.
	EventFallback EventKind = iota + 1
	// EventRecovered: Redis answered again; the fleet's state decides.
	EventRecovered
	// EventRefill: one Redis round trip refilled a lease (quota units,
	// budget permits); Event.Units is the amount granted.
	EventRefill
	// EventQuotaWait: an attempt was given a start Event.Wait later than it
	// could have started, to stay within the quota.
	EventQuotaWait
	// EventCooldownWait: an attempt was made to wait Event.Wait for a
	// cooldown.
	EventCooldownWait
	// EventHint: a server hint was published as a cooldown for the fleet;
	// Event.Wait is the capped hint.
	EventHint
	// EventRate: the learnt rate an [AutoQuota] paces at changed (a cut,
	// or a growth of 5 % or more since the last EventRate); Event.Rate is
	// the new rate.
	EventRate
)

// String returns the kind's name ("fallback", "recovered", ...).
func (k EventKind) String() string {
	return enum.Name(k, "EventKind", "", "fallback", "recovered", "refill", "quota-wait", "cooldown-wait", "hint", "rate")
}

// Event is what an [Observer] receives.
type Event struct {
	Kind    EventKind
	Limiter string        // "quota", "budget", "cooldown" or "rate" (an AutoQuota's learnt rate)
	Key     string        // the limiter's Key
	Err     error         // EventFallback: the Redis error
	Wait    time.Duration // EventQuotaWait, EventCooldownWait, EventHint
	Units   int64         // EventRefill: units or permits granted
	Rate    float64       // EventRate: the learnt rate, requests per second
	// EventFallback of a fail-local Quota: the fleet's size its local
	// share divides the quota by (QuotaConfig.FleetSize, else the
	// processes last counted in Redis), and Cold when Redis never answered
	// and the size is DefaultColdFleetSize, a default.
	FleetSize int
	Cold      bool
}

// Observer receives a limiter's events: state changes (one per change, never
// one per call), lease refills and waits. It runs on the goroutine that
// caused the event, sometimes a background one, and must be quick and safe
// for concurrent use. For metrics, count events, or read the limiter's
// Stats.
type Observer func(Event)

// Stats are a limiter's counters since it was made. Fields that do not
// apply to a limiter stay 0.
type Stats struct {
	State      State // now
	Fallbacks  int64 // changes to StateFallback
	RoundTrips int64 // Redis calls made (refills, flushes, probes, reads)
	Errors     int64 // Redis calls that failed or timed out
	Refills    int64 // lease refills (quota blocks, budget permit blocks)
	Waits      int64 // attempts made to wait (quota, cooldown)
	Refused    int64 // attempts refused (a wait past the deadline, the budget exhausted, fail-closed)
	Local      int64 // decisions made without Redis (FailureMode, or Redis too slow for one call)
}

// common holds the fields every config has, resolved, and what the limiter
// is built on: its clock, its transport to Redis and the bound of a
// connection's setup (the client's DialTimeout).
type common struct {
	limiter, key  string
	timeout       time.Duration
	probeInterval time.Duration
	mode          FailureMode
	logger        *slog.Logger // nil: slog.Default() at each use
	observer      Observer
	clock         backend.Clock
	tr            backend.Transport
	connect       time.Duration
	base          time.Time // the clock's reading when the limiter was made
}

func newCommon(limiter, key string, timeout, probe time.Duration, mode FailureMode, l *slog.Logger, o Observer, e env) common {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if probe == 0 {
		probe = DefaultProbeInterval
	}
	return common{limiter, key, timeout, probe, mode, l, o, e.clock, e.tr, max(e.connect, 0), e.clock.Now()}
}

func (c *common) now() time.Time { return c.clock.Now() }

// since returns now as nanoseconds since the limiter was made, by the
// monotonic clock when both readings have one (time.Now's do): a step of the
// wall clock does not move it.
func (c *common) since(now time.Time) int64 { return int64(now.Sub(c.base)) }

// guard runs a limiter's Redis calls, each bounded by the timeout whatever the
// client's own settings, and keeps the health state: one log line and one
// event per change.
//
// Connecting is not deciding: until Redis answered one of a limiter's calls,
// its calls are bounded by the time a connection may take to set up (the
// DialTimeout of a client made by NewClientWith, DefaultDialTimeout for the
// harness's; none known for another client), if longer than the timeout: a fresh process's first call of each limiter dials (the client
// opens one connection per call in flight), makes the TLS handshake and
// loads the script. A warm-up's answer (sendWarm) does not count: it opened
// one connection. After that each call is bounded by the timeout.
type guard struct {
	common
	state    atomic.Uint32 // a State
	failedAt atomic.Int64  // when a call last failed (common.since): a fallback limiter tries Redis a ProbeInterval later
	probing  atomic.Bool
	reached  atomic.Bool           // Redis answered one of the limiter's calls (a warm-up's aside)
	lastErr  atomic.Pointer[error] // the last failed call's error
	// share, if not nil, returns the fleet's size a local decision divides
	// the quota by and whether it is a default (the fleet never counted),
	// for the line and the event of a fallback.
	share func() (size int64, cold bool)

	mu     sync.Mutex     // guards closed and the start of calls
	closed bool           // Close was called: no call starts
	wg     sync.WaitGroup // Redis calls in flight

	fallbacks, roundTrips, errs, refills, waits, refused, local atomic.Int64
}

func (g *guard) healthy() bool { return State(g.state.Load()) == StateRedis }

// withoutRedis counts a decision made without Redis and returns the mode
// that decides it; a FailClosed refusal is counted too.
func (g *guard) withoutRedis() FailureMode {
	g.local.Add(1)
	if g.mode == FailClosed {
		g.refused.Add(1)
	}
	return g.mode
}

func (g *guard) stats() Stats {
	return Stats{
		State: State(g.state.Load()), Fallbacks: g.fallbacks.Load(), RoundTrips: g.roundTrips.Load(),
		Errors: g.errs.Load(), Refills: g.refills.Load(), Waits: g.waits.Load(),
		Refused: g.refused.Load(), Local: g.local.Load(),
	}
}

func (g *guard) emit(e Event) {
	if g.observer != nil {
		e.Limiter, e.Key = g.limiter, g.key
		g.observer(e)
	}
}

func (g *guard) log() *slog.Logger {
	if g.logger != nil {
		return g.logger
	}
	return slog.Default()
}

// failed records a failed Redis call: the first one since Redis last
// answered turns the limiter to StateFallback.
func (g *guard) failed(err error) { g.fail(err, false) }

// fail is failed; a call sent aside (see sendAside) that fails while the
// limiter is in fallback leaves the time of the last failure, from which the
// next probe is due.
func (g *guard) fail(err error, aside bool) {
	g.errs.Add(1)
	g.lastErr.Store(&err)
	if !aside || State(g.state.Load()) == StateRedis {
		g.failedAt.Store(g.since(g.now()))
	}
	if g.state.CompareAndSwap(uint32(StateRedis), uint32(StateFallback)) {
		g.fallbacks.Add(1)
		attrs := []any{"limiter", g.limiter, "key", g.key, "on_failure", g.mode.String(), "error", err.Error()}
		ev := Event{Kind: EventFallback, Err: err}
		if g.share != nil && g.mode == FailLocal {
			size, cold := g.share()
			ev.FleetSize, ev.Cold = int(size), cold
			attrs = append(attrs, "fleet_size", size)
			if cold {
				attrs = append(attrs, "fleet_size_from", "default: Redis never answered (set FleetSize)")
			}
		}
		g.log().Warn("redisretry: Redis unavailable, deciding without it", attrs...)
		g.emit(ev)
	}
}

// cause returns the error of the last failed call (nil if none failed).
func (g *guard) cause() error {
	if e := g.lastErr.Load(); e != nil {
		return *e
	}
	return nil
}

// succeeded records a Redis answer: a limiter in StateFallback goes back to
// StateRedis.
func (g *guard) succeeded(warm bool) {
	if !warm {
		g.reached.Store(true)
	}
	if g.state.CompareAndSwap(uint32(StateFallback), uint32(StateRedis)) {
		g.log().Info("redisretry: Redis available again", "limiter", g.limiter, "key", g.key)
		g.emit(Event{Kind: EventRecovered})
	}
}

// errTimeout is the error of a Redis call that did not answer in time.
// running says that the call still runs (the bound passed first): a reply
// may still come, and sendLate's late gets the call's outcome.
type errTimeout struct {
	d       time.Duration
	running bool
}

func (e errTimeout) Error() string {
	return fmt.Sprintf("redisretry: Redis did not answer within %v", e.d)
}
func (e errTimeout) Timeout() bool   { return true }
func (e errTimeout) Is(t error) bool { return t == context.DeadlineExceeded }

// errSlow is the error of a caller that stopped waiting for a round trip at
// its own time limit (its deadline came before the timeout): Redis is not
// marked as failed for it.
var errSlow = errors.New("redisretry: Redis did not answer in time for this call")

// bound is how long a call made now may take before Redis counts as failed:
// the timeout once Redis answered one of the limiter's calls, and before
// that the longer of the timeout and the connection's setup.
func (g *guard) bound() time.Duration {
	if g.reached.Load() {
		return g.timeout
	}
	return max(g.timeout, g.connect)
}

// patience is how long a call made now is waited for at most, past its
// bound: the bound plus a connection's setup (DefaultDialTimeout if unknown).
// A reply after the bound is still a reply (see send); after patience the
// transport gives up.
func (g *guard) patience() time.Duration {
	if g.connect > 0 {
		return g.bound() + g.connect
	}
	return g.bound() + DefaultDialTimeout
}

// isTimeout reports whether err says that a call ran out of time (a context
// deadline, or a network timeout such as go-redis's "i/o timeout").
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// send starts one Redis call, bounded by bound whatever the client does: done
// is called exactly once, never before send returns, with the reply, with the
// call's error, or with errTimeout when the bound passes first. Redis is
// marked failed right then (not when a client that ignores deadlines
// returns). Every outcome tells the health state. send returns false, and
// never calls done, when the limiter is closed; Close waits for the calls
// sent.
//
// The call itself is not abandoned at the bound: the transport gives it the
// bound plus a connection's setup (its context ends then), and a reply that
// comes after the bound is still a reply: it marks Redis available again,
// and late (if not nil) receives it. A stalled Redis is always reported as
// errTimeout: a timeout the client reports (go-redis's "i/o timeout", a
// context deadline) is the same event, and whichever of the two comes first
// is told the same way.
func (g *guard) send(c backend.Call, done func(backend.Reply, error)) bool {
	return g.sendLate(c, done, nil)
}

// sendLate is send, with late receiving the outcome of a call that outlived
// its bound: when done got the bound's errTimeout (running), late is called
// once, with the reply that came after it or with the call's final error
// (so a caller that holds something for a late reply knows when none will
// come); it is never called otherwise.
func (g *guard) sendLate(c backend.Call, done func(backend.Reply, error), late func(backend.Reply, error)) bool {
	return g.sendCall(c, done, late, false, false)
}

// sendWarm is sendLate for a call that opens the first connection ahead of
// the decisions: its answer does not end their longer bound.
func (g *guard) sendWarm(c backend.Call, done func(backend.Reply, error), late func(backend.Reply, error)) bool {
	return g.sendCall(c, done, late, true, false)
}

// sendAside is sendLate for a call sent while the limiter decides without
// Redis, other than its probe (a quota's live debt call): its failure does
// not put the next probe off by a ProbeInterval.
func (g *guard) sendAside(c backend.Call, done func(backend.Reply, error), late func(backend.Reply, error)) bool {
	return g.sendCall(c, done, late, false, true)
}

func (g *guard) sendCall(c backend.Call, done func(backend.Reply, error), late func(backend.Reply, error), warm, aside bool) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.wg.Add(1)
	g.mu.Unlock()
	g.roundTrips.Add(1)
	bound, patience := g.bound(), g.patience()
	p := &inflight{}
	p.stop = g.clock.AfterFunc(bound, func() {
		if p.over.CompareAndSwap(false, true) {
			err := errTimeout{d: bound, running: true}
			g.fail(err, aside)
			done(backend.Reply{}, err)
		}
	})
	g.tr.Send(c, patience, func(r backend.Reply, err error) {
		defer g.wg.Done()
		if !p.over.CompareAndSwap(false, true) {
			// Past the bound: Redis was marked failed then. A reply is a
			// reply all the same.
			if err == nil {
				g.succeeded(warm)
			}
			if late != nil {
				late(r, err)
			}
			return
		}
		p.stop()
		if err != nil {
			if isTimeout(err) {
				err = errTimeout{d: bound}
			}
			g.fail(err, aside)
			done(backend.Reply{}, err)
			return
		}
		g.succeeded(warm)
		done(r, nil)
	})
	return true
}

// inflight is a call sent: over once done was called.
type inflight struct {
	over atomic.Bool
	stop func() bool
}

type callResult struct {
	r   backend.Reply
	err error
}

// call is send for a caller that waits for the outcome (Close, Publish): at
// most the timeout, and not after ctx ends (then it returns ctx's cause).
func (g *guard) call(ctx context.Context, c backend.Call) (backend.Reply, error) {
	if ctx.Err() != nil {
		return backend.Reply{}, context.Cause(ctx)
	}
	ch := make(chan callResult, 1)
	if !g.send(c, func(r backend.Reply, err error) { ch <- callResult{r, err} }) {
		return backend.Reply{}, ErrClosed
	}
	select {
	case r := <-ch:
		return r.r, r.err
	case <-ctx.Done():
		return backend.Reply{}, context.Cause(ctx)
	}
}

// probeDue reports whether a limiter in fallback should try Redis now, for
// one caller at a time: a ProbeInterval after the last failed call, on the
// monotonic clock. A clock with no monotonic reading that reads before that
// failure was set back: a probe is due rather than one an hour later.
func (g *guard) probeDue() bool {
	if g.probing.Load() {
		return false
	}
	if f, now := g.failedAt.Load(), g.since(g.now()); now-f < int64(g.probeInterval) && now >= f {
		return false
	}
	return g.probing.CompareAndSwap(false, true)
}

// probe sends the call made by c (one Redis call) when a probe is due; its
// success turns the limiter back to StateRedis, and then after (if not nil)
// gets the reply.
func (g *guard) probe(c func() backend.Call, after func(backend.Reply)) {
	if State(g.state.Load()) != StateFallback || !g.probeDue() {
		return
	}
	if !g.send(c(), func(r backend.Reply, err error) {
		if err == nil && after != nil {
			after(r)
		}
		g.probing.Store(false)
	}) {
		g.probing.Store(false)
	}
}

// markClosed marks the limiter closed: no call starts from now on.
func (g *guard) markClosed() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.state.Store(uint32(StateClosed))
}

// close marks the limiter closed and waits for its Redis calls to end.
func (g *guard) close() {
	g.markClosed()
	g.wg.Wait()
}
