package retry

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Zero is an explicit zero for the duration fields of a [Policy].
//
// A duration field left at 0 means "use the default" (so Policy{} is Google's
// default policy). To really ask for zero, set the field to Zero: for example
// Policy{Jitter: retry.Zero} retries with no jitter at all, and
// Policy{InitialDelay: retry.Zero, MaxDelay: retry.Zero} retries at once.
// The Python Gen AI SDK cannot express this (it treats 0 as unset); ours can.
// Any other negative duration is invalid.
const Zero time.Duration = math.MinInt64

// Google's documented defaults, as in the Gen AI SDK's HttpRetryOptions.
const (
	DefaultAttempts     = 5
	DefaultInitialDelay = 1 * time.Second
	DefaultMaxDelay     = 60 * time.Second
	DefaultExpBase      = 2.0
	DefaultJitter       = 1 * time.Second
)

// DefaultStatusCodes are the HTTP status codes retried when
// [Policy.StatusCodes] is nil: 408, 429, 500, 502, 503 and 504.
var DefaultStatusCodes = []int{408, 429, 500, 502, 503, 504}

// Policy says how to retry. It is a plain value: copy it, keep one per client
// and override fields per call with [Policy.Merge].
//
// Fields mirror the Gen AI SDK's HttpRetryOptions. A field at its zero value
// takes the default named in its comment; use [Zero] for an explicit zero
// duration. Defaults are resolved once per call, so a Policy can be shared by
// many goroutines as long as nobody writes to it.
type Policy struct {
	// Attempts is the total number of attempts, the first call included.
	// 0 means 5. 1 means no retries.
	Attempts int

	// InitialDelay is the wait before the first retry, before jitter.
	// 0 means 1 s.
	InitialDelay time.Duration

	// MaxDelay caps any single wait computed by the Shape. 0 means 60 s.
	MaxDelay time.Duration

	// ExpBase is the base of the exponential growth. 0 means 2.
	ExpBase float64

	// Jitter is the upper bound of the random extra (for ShapeGoogle and
	// ShapeJitterAtCap). 0 means 1 s; Zero means no jitter.
	Jitter time.Duration

	// Deadline is the total time allowed, measured from the start of the
	// call (a Pacer's wait before the first attempt included): no attempt
	// starts, and no wait is begun that would end, after it, and the attempt
	// running at the deadline is cancelled. 0 means only the
	// context's deadline applies. Each attempt then runs under a context of
	// its own unless the context's deadline comes first (see [Do] for what it
	// costs: one allocation when the context can never be cancelled, 4 when
	// it can).
	Deadline time.Duration

	// AttemptTimeout bounds each attempt separately from Deadline (for
	// example 10 to 30 minutes for Flex, seconds for real-time chat). An
	// attempt that times out is retried. 0 means no per-attempt timeout.
	// Each attempt then runs under a context of its own unless the context's
	// deadline comes first (see [Do] for what it costs); with a Deadline too,
	// it still gets one context, not two. An attempt's context
	// ended by AttemptTimeout has context.DeadlineExceeded itself as its
	// [context.Cause]; one ended by Deadline has a cause of its own that
	// matches context.DeadlineExceeded through errors.Is, so the two can be
	// told apart.
	AttemptTimeout time.Duration

	// MaxRetryAfter caps a server's hint (see [After]): a hint asks for a wait
	// of at least its value (plus jitter) but never more than MaxRetryAfter,
	// however large the hint. 0 means MaxDelay (and follows it through
	// [Policy.Merge]); Zero means hints are ignored.
	MaxRetryAfter time.Duration

	// Shape is the formula that turns a retry number into a wait.
	// 0 means ShapeGoogle, the documented formula.
	Shape Shape

	// StatusCodes lists the HTTP status codes that trigger a retry, for the
	// packages that speak HTTP (httpretry, gaxretry, the CLI). nil means
	// DefaultStatusCodes; an empty non-nil slice retries no status code.
	StatusCodes []int

	// Retryable classifies an error; returning false stops the loop and
	// returns the error as is. nil means every error is retryable except
	// those marked with [Permanent] and the context's own cancellation.
	Retryable func(error) bool

	// Observer receives one event per retry and one when the loop gives up
	// (and, when set, one on success). nil logs retries and give-ups to
	// slog.Default() at Debug level, which is silent unless enabled.
	Observer Observer

	// Budget, when set, limits retries across every call that shares it (see
	// [TokenBucket] and [RatioBudget]). First attempts are never refused
	// by a budget.
	Budget Limiter

	// Throttle, when set, may refuse any attempt, the first included, before
	// it is made (see [AdaptiveThrottle]). A refused first attempt fails fast
	// with [ErrThrottled].
	Throttle Limiter

	// Rand returns a uniform random number in [0, 1). It must be safe for
	// concurrent use if the Policy is shared. nil means math/rand/v2's
	// Float64. Use [NewRand] for a seeded source in tests.
	Rand func() float64

	// Pacer, when set, may make any attempt, the first included, wait for
	// its turn: a quota shared by many callers, a pause a server asked for
	// (see [Pacer]). Do and Run apply it under the deadline rule of every
	// wait. nil means attempts never wait for a pacer.
	Pacer Pacer

	// resolved is set by Resolved: the fields hold final values, so a 0
	// duration is a real zero and is not defaulted again.
	resolved bool
	// derivedMaxRetryAfter is, on a resolved policy whose MaxRetryAfter was
	// 0 and took MaxDelay's value, that value (-1 otherwise). While both
	// fields still hold it, Merge lets MaxRetryAfter follow a new MaxDelay.
	derivedMaxRetryAfter time.Duration
}

// Limiter decides whether an attempt may go ahead and learns from outcomes.
// Budgets and throttles implement it; one Limiter is usually shared by every
// call of a client. Implementations must be safe for concurrent use.
//
// A Limiter may also have a method Cancel(retry bool). The loop calls it when
// an attempt the Limiter admitted is not made after all (another limiter or
// the Pacer refused it, the context ended during the wait, or the deadline
// came first), so that it can give back what Admit counted. [RatioBudget]
// has it.
type Limiter interface {
	// Admit is called before each attempt; retry is false for a call's
	// first attempt. Returning false refuses the attempt.
	Admit(retry bool) bool
	// Record reports how an admitted attempt ended: ok is false when it
	// failed with a retryable error (the service was unavailable or
	// overloaded), true when it succeeded or failed permanently.
	Record(ok bool)
}

// Google returns Google's documented default policy: 5 attempts, 1 s initial
// delay, base 2, 60 s cap, up to 1 s of jitter, HTTP status codes 408, 429,
// 500, 502, 503 and 504. It equals the zero Policy with its defaults spelled out.
func Google() Policy {
	return Policy{
		Attempts:     DefaultAttempts,
		InitialDelay: DefaultInitialDelay,
		MaxDelay:     DefaultMaxDelay,
		ExpBase:      DefaultExpBase,
		Jitter:       DefaultJitter,
		StatusCodes:  slices.Clone(DefaultStatusCodes),
	}
}

// ModelArmor returns the Model Armor API's variant: retry 500, 502, 503 and
// 504, wait 1 s, 2 s, 4 s, ... plus up to 1 s of jitter, each wait capped at
// 32 s, and stop after 300 s in all (the page's suggestion for a CI/CD step).
// Attempts is 15 so that the 300 s deadline, not the count, ends the loop:
// the 14 waits add up to at least 319 s even when every attempt fails at once. The page allows retrying 429 too and a 64 s cap: append 429 to
// StatusCodes and set MaxDelay to 64 s for that.
func ModelArmor() Policy {
	return Policy{
		Attempts:     15,
		InitialDelay: time.Second,
		MaxDelay:     32 * time.Second,
		ExpBase:      2,
		Jitter:       time.Second,
		Deadline:     300 * time.Second,
		StatusCodes:  []int{500, 502, 503, 504},
	}
}

// resolve returns p with its defaults filled in and its Zero sentinels turned
// into zeros. It does not validate.
func (p Policy) resolve() Policy {
	p.resolveInPlace()
	return p
}

func (p *Policy) resolveInPlace() {
	if p.resolved {
		// Resolved already: a 0 is a real zero, but a field set to Zero
		// afterwards must still mean 0, not MinInt64.
		if p.InitialDelay|p.MaxDelay|p.Jitter|p.Deadline|p.AttemptTimeout|p.MaxRetryAfter < 0 {
			for _, d := range []*time.Duration{&p.InitialDelay, &p.MaxDelay, &p.Jitter, &p.Deadline, &p.AttemptTimeout, &p.MaxRetryAfter} {
				if *d == Zero {
					*d = 0
				}
			}
		}
		return
	}
	p.resolved = true
	if p.Attempts == 0 {
		p.Attempts = DefaultAttempts
	}
	p.InitialDelay = orDefault(p.InitialDelay, DefaultInitialDelay)
	p.MaxDelay = orDefault(p.MaxDelay, DefaultMaxDelay)
	if p.ExpBase == 0 {
		p.ExpBase = DefaultExpBase
	}
	p.Jitter = orDefault(p.Jitter, DefaultJitter)
	p.Deadline = orDefault(p.Deadline, 0)
	p.AttemptTimeout = orDefault(p.AttemptTimeout, 0)
	p.derivedMaxRetryAfter = -1
	if p.MaxRetryAfter == 0 {
		p.derivedMaxRetryAfter = p.MaxDelay
	}
	p.MaxRetryAfter = orDefault(p.MaxRetryAfter, p.MaxDelay)
	if p.Shape == 0 {
		p.Shape = ShapeGoogle
	}
}

func orDefault(v, def time.Duration) time.Duration {
	switch v {
	case 0:
		return def
	case Zero:
		return 0
	}
	return v
}

// Resolved returns p with every default filled in and every [Zero] turned
// into 0, as the loop sees it. StatusCodes nil becomes DefaultStatusCodes.
// The result remembers that it is resolved: its zero durations stay zero when
// it is passed to [Do], [Policy.Backoff] or [Policy.Merge], so resolving is
// idempotent.
func (p Policy) Resolved() Policy {
	p = p.resolve()
	if p.StatusCodes == nil {
		p.StatusCodes = slices.Clone(DefaultStatusCodes)
	}
	return p
}

// Codes returns the HTTP status codes that trigger a retry:
// StatusCodes, or DefaultStatusCodes when it is nil. Do not modify the result.
func (p Policy) Codes() []int {
	if p.StatusCodes == nil {
		return DefaultStatusCodes
	}
	return p.StatusCodes
}

// RetriesStatus reports whether the HTTP status code code triggers a retry.
func (p Policy) RetriesStatus(code int) bool {
	return slices.Contains(p.Codes(), code)
}

// Merge returns p with every field that is set in override (non-zero, or
// [Zero]) replaced by override's value, field by field. Use it for per-call
// overrides: the client's policy stays the base, the call changes only what it
// names. (The Gen AI SDKs replace the whole options struct instead.)
//
// The rule is the same whether p is as written or came from [Policy.Resolved]:
// a field the override leaves at 0 keeps p's value, and a MaxRetryAfter that
// neither sets (0 means MaxDelay) follows the merged MaxDelay. So
// p.Merge(Policy{MaxDelay: 5 * time.Second}) caps hints at 5 s for any p
// that did not set MaxRetryAfter itself. A Shape of ShapeGoogle in override
// switches p back to the documented formula (the zero Shape sets nothing).
func (p Policy) Merge(override Policy) Policy {
	p, override = p.unresolved(), override.unresolved()
	o := override
	mergeSet(&p.Attempts, o.Attempts)
	mergeSet(&p.InitialDelay, o.InitialDelay)
	mergeSet(&p.MaxDelay, o.MaxDelay)
	mergeSet(&p.ExpBase, o.ExpBase)
	mergeSet(&p.Jitter, o.Jitter)
	mergeSet(&p.Deadline, o.Deadline)
	mergeSet(&p.AttemptTimeout, o.AttemptTimeout)
	mergeSet(&p.MaxRetryAfter, o.MaxRetryAfter)
	mergeSet(&p.Shape, o.Shape)
	mergeIf(&p.StatusCodes, o.StatusCodes, o.StatusCodes != nil)
	mergeIf(&p.Retryable, o.Retryable, o.Retryable != nil)
	mergeIf(&p.Observer, o.Observer, o.Observer != nil)
	mergeSet(&p.Budget, o.Budget)
	mergeSet(&p.Throttle, o.Throttle)
	mergeIf(&p.Rand, o.Rand, o.Rand != nil)
	mergeSet(&p.Pacer, o.Pacer)
	return p
}

// unresolved turns a resolved policy back into the form where 0 means the
// default, spelling its real zeros as [Zero], and a MaxRetryAfter that came
// from MaxDelay as 0 again.
func (p Policy) unresolved() Policy {
	if !p.resolved {
		return p
	}
	for _, d := range []*time.Duration{&p.InitialDelay, &p.MaxDelay, &p.Jitter, &p.MaxRetryAfter} {
		if *d == 0 {
			*d = Zero
		}
	}
	if d := p.derivedMaxRetryAfter; d >= 0 && p.MaxRetryAfter == d && p.MaxDelay == d {
		p.MaxRetryAfter = 0
	}
	p.resolved, p.derivedMaxRetryAfter = false, 0
	return p
}

// Hinted returns the wait before the next attempt when the server hinted
// hint: the computed wait, raised to at least hint plus jitter (U(0, Jitter),
// drawn with u in [0, 1)), the raised part capped by MaxRetryAfter however
// large the hint (a hint of math.MaxInt64 waits exactly MaxRetryAfter). With
// MaxRetryAfter set to [Zero] hints are ignored. [Do] applies this rule to
// every hint; integrations that drive their own loop (gax) call it.
func (p Policy) Hinted(wait, hint time.Duration, u float64) time.Duration {
	p.resolveInPlace()
	return p.hinted(wait, hint, u)
}

func (p *Policy) hinted(wait, hint time.Duration, u float64) time.Duration {
	if p.MaxRetryAfter <= 0 {
		return wait
	}
	if !(u >= 0 && u < 1) {
		u = 0
	}
	// hint + jitter, saturated at MaxRetryAfter without computing a sum that
	// could overflow (a hint near MaxInt64 plus jitter wraps negative).
	j := time.Duration(u * float64(p.Jitter)) // in [0, Jitter): u < 1
	raised := p.MaxRetryAfter
	if h := max(hint, 0); h < p.MaxRetryAfter-j { // MaxRetryAfter > 0, j >= 0: no overflow
		raised = h + j
	}
	return max(wait, raised)
}

// mergeSet sets *dst to v when v is not T's zero value (a nil interface
// for the limiters and the Pacer).
func mergeSet[T comparable](dst *T, v T) {
	var zero T
	mergeIf(dst, v, v != zero)
}

// mergeIf sets *dst to v when set: for the fields (slices, funcs) that
// cannot be compared with their zero value.
func mergeIf[T any](dst *T, v T, set bool) {
	if set {
		*dst = v
	}
}

// ValidationError reports an invalid Policy field.
type ValidationError struct {
	Field  string // the Policy field, e.g. "MaxDelay"
	Value  any    // the offending value
	Reason string // what is wrong, e.g. "must not be negative"
}

// Error names the field, its value and what is wrong with it.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("retry: invalid Policy.%s = %v: %s", e.Field, e.Value, e.Reason)
}

// Validate reports the first invalid field of p as a [*ValidationError]
// naming it: Attempts below 1 (once defaulted), a negative duration other
// than [Zero], ExpBase below 1 or NaN/Inf, MaxDelay below InitialDelay, an
// unknown Shape, or a status code outside 100-599.
func (p Policy) Validate() error { return p.validate() }

func (p *Policy) validate() error {
	// Fast path for the common case: no negative field, a sane ExpBase, the
	// default codes. Only slow-path failures build an error.
	if int64(p.Attempts)|int64(p.InitialDelay|p.MaxDelay|p.Jitter|p.Deadline|p.AttemptTimeout|p.MaxRetryAfter) >= 0 &&
		(p.ExpBase == 0 || (p.ExpBase >= 1 && p.ExpBase <= math.MaxFloat64)) &&
		p.Shape < shapeCount && p.StatusCodes == nil &&
		p.maxDelay() >= p.initialDelay() {
		return nil
	}
	if p.Attempts < 0 {
		return &ValidationError{"Attempts", p.Attempts, "must be at least 1 (0 means the default, 5)"}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"InitialDelay", p.InitialDelay}, {"MaxDelay", p.MaxDelay}, {"Jitter", p.Jitter},
		{"Deadline", p.Deadline}, {"AttemptTimeout", p.AttemptTimeout}, {"MaxRetryAfter", p.MaxRetryAfter},
	} {
		if err := checkDur(d.field, d.v); err != nil {
			return err
		}
	}
	if e := p.ExpBase; math.IsNaN(e) || math.IsInf(e, 0) || (e != 0 && e < 1) {
		return &ValidationError{"ExpBase", e, "must be a finite number >= 1 (0 means the default, 2)"}
	}
	if lo, hi := p.initialDelay(), p.maxDelay(); hi < lo {
		return &ValidationError{"MaxDelay", hi, fmt.Sprintf("must not be below InitialDelay (%v)", lo)}
	}
	if p.Shape >= shapeCount {
		return &ValidationError{"Shape", p.Shape, "unknown shape"}
	}
	for _, c := range p.StatusCodes {
		if c < 100 || c > 599 {
			return &ValidationError{"StatusCodes", c, "must be an HTTP status code (100-599)"}
		}
	}
	return nil
}

func checkDur(field string, d time.Duration) error {
	if d < 0 && d != Zero {
		return &ValidationError{field, d, "must not be negative (use retry.Zero for an explicit 0)"}
	}
	return nil
}

// initialDelay and maxDelay are the values the loop will use, for validation.
func (p *Policy) initialDelay() time.Duration {
	if p.resolved {
		return max(p.InitialDelay, 0) // Zero set after Resolved is 0 too
	}
	return orDefault(p.InitialDelay, DefaultInitialDelay)
}

func (p *Policy) maxDelay() time.Duration {
	if p.resolved {
		return max(p.MaxDelay, 0)
	}
	return orDefault(p.MaxDelay, DefaultMaxDelay)
}
