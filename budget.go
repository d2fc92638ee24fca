package retry

import (
	"cmp"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// TokenBucket is gRPC's retry throttling, a retry budget shared by every
// call of a client. It implements [Limiter] for [Policy.Budget].
//
// The bucket starts full, with maxTokens tokens. Every attempt that fails
// with a retryable error takes one token away (never below 0); every other
// attempt (a success, or a failure that is not retried) adds tokenRatio
// tokens (never above maxTokens). A retry is allowed only while the bucket
// is more than half full (tokens > maxTokens/2); first attempts are never
// refused. gRPC's service config suggests maxTokens 10 and tokenRatio 0.1:
// once failures outnumber successes about ten to one the client stops
// retrying, and it resumes after enough successes refill the bucket.
//
// Tokens are kept as an integer number of thousandths (gRPC allows three
// decimal places in tokenRatio), so the arithmetic is exact. A TokenBucket
// is safe for concurrent use and allocates nothing after construction.
type TokenBucket struct {
	milli    atomic.Int64 // current tokens, in thousandths
	maxMilli int64
	ratio    int64 // tokens added per success, in thousandths
}

// NewTokenBucket returns a full bucket of maxTokens tokens that gains
// tokenRatio tokens per success. Both are rounded to three decimal places.
// It panics if maxTokens is not in (0, 1000] or tokenRatio is not in
// (0, maxTokens] (gRPC's limits), with a message naming the argument.
func NewTokenBucket(maxTokens, tokenRatio float64) *TokenBucket {
	if err := checkTokenBucket(maxTokens, tokenRatio); err != nil {
		panic(err.Error())
	}
	b := &TokenBucket{
		maxMilli: int64(math.Round(maxTokens * 1000)),
		ratio:    int64(math.Round(tokenRatio * 1000)),
	}
	b.milli.Store(b.maxMilli)
	return b
}

func checkTokenBucket(maxTokens, tokenRatio float64) error {
	if !(maxTokens >= 0.001 && maxTokens <= 1000) {
		return fmt.Errorf("retry: NewTokenBucket: maxTokens = %v, must be in (0, 1000] (gRPC's limit; 10 is typical)", maxTokens)
	}
	if !(tokenRatio >= 0.001 && tokenRatio <= maxTokens) {
		return fmt.Errorf("retry: NewTokenBucket: tokenRatio = %v, must be at least 0.001 and at most maxTokens (%v); 0.1 is typical", tokenRatio, maxTokens)
	}
	return nil
}

// Admit reports whether an attempt may go ahead: always for a first attempt
// (retry false), and for a retry only while Tokens() > maxTokens/2.
// Admitting a retry does not take a token; its failure will.
func (b *TokenBucket) Admit(retry bool) bool {
	return !retry || 2*b.milli.Load() > b.maxMilli
}

// Record takes one token away when ok is false (a retryable failure) and
// adds tokenRatio tokens otherwise, staying within [0, maxTokens].
func (b *TokenBucket) Record(ok bool) {
	for {
		old := b.milli.Load()
		var v int64
		if ok {
			v = min(old+b.ratio, b.maxMilli)
		} else {
			v = max(old-1000, 0)
		}
		if v == old || b.milli.CompareAndSwap(old, v) {
			return
		}
	}
}

// Tokens returns the number of tokens in the bucket now.
func (b *TokenBucket) Tokens() float64 {
	return float64(b.milli.Load()) / 1000
}

// Finagle's RetryBudget defaults, used by [RatioBudgetConfig] fields left at 0.
const (
	DefaultBudgetRatio        = 0.2
	DefaultBudgetWindow       = 10 * time.Second
	DefaultBudgetMinPerSecond = 10.0
)

// RatioBudgetConfig configures a [RatioBudget]. The zero value has the
// numbers of Finagle's default budget: retries up to 20 % of the requests of
// the last 10 s, and at least 10 retries per second.
type RatioBudgetConfig struct {
	// Ratio is the number of retries allowed per request (first attempt)
	// made in the window. 0 means 0.2 (Finagle's percentCanRetry, Envoy's
	// budget_percent of 20 %).
	Ratio float64

	// Window is how long a request or a retry is remembered. 0 means 10 s
	// (Finagle's ttl).
	Window time.Duration

	// MinPerSecond is a floor of retries per second of Window, allowed
	// whatever the traffic, so that a client making few requests can still
	// retry (Finagle's minRetriesPerSec, Envoy's min_retry_concurrency).
	// 0 means 10; a negative value means no floor.
	MinPerSecond float64

	// Now returns the current time. nil means time.Now. Inject a virtual
	// clock for simulations and tests.
	Now func() time.Time
}

func (c RatioBudgetConfig) resolve() RatioBudgetConfig {
	c.Ratio = cmp.Or(c.Ratio, DefaultBudgetRatio)
	c.Window = cmp.Or(c.Window, DefaultBudgetWindow)
	c.MinPerSecond = max(cmp.Or(c.MinPerSecond, DefaultBudgetMinPerSecond), 0) // a negative MinPerSecond: none
	return c
}

// Validate reports the first invalid field of c, naming it: a Ratio that is
// negative, NaN or infinite, a negative Window or one under 20 ms, or a
// MinPerSecond that is NaN or infinite.
func (c RatioBudgetConfig) Validate() error {
	if !(c.Ratio >= 0 && c.Ratio <= math.MaxFloat64) {
		return fmt.Errorf("retry: invalid RatioBudgetConfig.Ratio = %v: must be a finite number >= 0 (0 means 0.2)", c.Ratio)
	}
	if c.Window < 0 || (c.Window > 0 && c.Window < minWindow) {
		return fmt.Errorf("retry: invalid RatioBudgetConfig.Window = %v: must be at least %v (0 means 10s)", c.Window, minWindow)
	}
	if math.IsNaN(c.MinPerSecond) || math.IsInf(c.MinPerSecond, 0) {
		return fmt.Errorf("retry: invalid RatioBudgetConfig.MinPerSecond = %v: must be a finite number (0 means 10, negative means none)", c.MinPerSecond)
	}
	return nil
}

// RatioBudget is the retry budget of Finagle and Envoy, shared by every call
// of a client. It implements [Limiter] for [Policy.Budget].
//
// It counts requests (first attempts) and retries over a sliding window
// (10 s by default) and allows a retry only while
//
//	retries + 1 <= max(Ratio·requests, MinPerSecond·Window)
//
// with Ratio 0.2 and MinPerSecond 10 by default: a client making more than
// MinPerSecond/Ratio = 50 requests per second adds at most 20 % to its
// traffic by retrying, whatever the failure rate, and a quiet client can
// still make 100 retries per 10 s. First attempts are never refused.
//
// The floor is a max, as Envoy's min_retry_concurrency is, not a sum as
// Finagle's reserve is: with a sum a client at r requests per second would
// amplify its load by 1 + Ratio + MinPerSecond/r (1.33× at 80 requests per
// second) instead of at most 1 + Ratio.
//
// The window is a ring of 20 slots, each a packed atomic word, so the
// window slides in steps of Window/20. A RatioBudget is safe for concurrent
// use, takes no lock and allocates nothing after construction.
type RatioBudget struct {
	ratio    float64
	floor    float64 // MinPerSecond · Window in seconds
	clock    windowClock
	requests slidingCounter
	retries  slidingCounter
}

// NewRatioBudget returns a budget configured by c. It panics with the error
// of [RatioBudgetConfig.Validate] if c is invalid.
func NewRatioBudget(c RatioBudgetConfig) *RatioBudget {
	if err := c.Validate(); err != nil {
		panic(err.Error())
	}
	c = c.resolve()
	return &RatioBudget{
		ratio: c.Ratio,
		floor: c.MinPerSecond * c.Window.Seconds(),
		clock: newWindowClock(c.Now, c.Window),
	}
}

// Admit counts a request when retry is false (and always admits it). When
// retry is true it admits and counts the retry if the budget has room, and
// reports whether it did.
func (b *RatioBudget) Admit(retry bool) bool {
	e := b.clock.epoch()
	if !retry {
		b.requests.add(e, 1)
		return true
	}
	// Count the retry first, then check, so that concurrent retries cannot
	// all pass the check before any of them is counted.
	b.retries.add(e, 1)
	if float64(b.retries.sum(e)) <= b.limit(e) {
		return true
	}
	b.retries.add(e, -1)
	return false
}

// limit is the number of retries allowed in the window ending at epoch e.
func (b *RatioBudget) limit(e uint32) float64 {
	return max(b.ratio*float64(b.requests.sum(e)), b.floor)
}

// Record does nothing: a RatioBudget counts attempts, not their outcomes.
func (b *RatioBudget) Record(ok bool) {}

// Cancel takes back the count of an admitted request (retry false) or retry
// that was not made after all (see [Limiter]): the loop calls it when another
// limiter or the Pacer refused the attempt, or the call ended before it. The
// count is taken from the current slot of the window, so one admitted just
// before a slot boundary may stay counted until it slides out.
func (b *RatioBudget) Cancel(retry bool) {
	e := b.clock.epoch()
	if retry {
		b.retries.add(e, -1)
	} else {
		b.requests.add(e, -1)
	}
}

// Available returns how many more retries the budget would admit now if no
// request came in meanwhile (0 when it is exhausted).
func (b *RatioBudget) Available() int {
	e := b.clock.epoch()
	n := math.Floor(b.limit(e) - float64(b.retries.sum(e)))
	if n <= 0 {
		return 0
	}
	return int(min(n, math.MaxInt32))
}

// windowSlots is the number of slots of a sliding window: the window slides
// in steps of Window/windowSlots.
const windowSlots = 20

// minWindow is the shortest window accepted (1 ms per slot).
const minWindow = windowSlots * time.Millisecond

// windowClock turns the time into slot epochs: epoch 1 is the first slot
// width after the clock's creation. Epoch 0 marks an unused slot.
type windowClock struct {
	now    func() time.Time // nil: time.Since(origin), monotonic and cheaper
	origin time.Time
	width  time.Duration
}

func newWindowClock(now func() time.Time, window time.Duration) windowClock {
	c := windowClock{now: now, width: window / windowSlots}
	if now == nil {
		c.origin = time.Now()
	} else {
		c.origin = now()
	}
	return c
}

func (c *windowClock) epoch() uint32 {
	var d time.Duration
	if c.now == nil {
		// The monotonic clock only: about half the cost of time.Now.
		d = time.Since(c.origin)
	} else {
		d = c.now().Sub(c.origin)
	}
	if d < 0 {
		d = 0
	}
	// Epochs wrap after 2^32 slots (about 50 days with 1 ms slots); the
	// window's arithmetic is modular, but 0 marks an unused slot: skip it.
	if e := uint32(d/c.width) + 1; e != 0 {
		return e
	}
	return 1
}

// slidingCounter counts events over the last windowSlots epochs. Each slot
// packs its epoch (high 32 bits) and its count (low 32 bits) in one word, so
// a stale slot is reset and counted in a single compare-and-swap.
type slidingCounter struct {
	slots [windowSlots]atomic.Uint64
}

// add adds delta (+1 or -1) to epoch e's count. A decrement of a slot that
// has moved on to a later epoch is dropped.
func (c *slidingCounter) add(e uint32, delta int) {
	s := &c.slots[e%windowSlots]
	for {
		old := s.Load()
		se, n := uint32(old>>32), uint32(old)
		switch d := int32(se - e); {
		case d >= 0 && se != 0:
			// Same epoch (or, for a goroutine that read the clock just
			// before a slot boundary, a later one: count it there).
			if delta > 0 {
				if n == math.MaxUint32 {
					return
				}
				n++
			} else {
				if n == 0 || d != 0 {
					return
				}
				n--
			}
		case delta > 0:
			se, n = e, 1 // a stale slot: start it afresh
		default:
			return
		}
		if s.CompareAndSwap(old, uint64(se)<<32|uint64(n)) {
			return
		}
	}
}

// sum returns the count of the epochs in (e-windowSlots, e].
func (c *slidingCounter) sum(e uint32) uint64 {
	var t uint64
	for i := range c.slots {
		v := c.slots[i].Load()
		if se := uint32(v >> 32); se != 0 && uint32(e-se) < windowSlots {
			t += uint64(uint32(v))
		}
	}
	return t
}
