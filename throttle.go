package retry

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// The SRE book's defaults, used by [ThrottleConfig] fields left at 0.
const (
	DefaultThrottleWindow = 2 * time.Minute
	DefaultThrottleK      = 2.0
)

// ThrottleConfig configures an [AdaptiveThrottle]. The zero value is the SRE
// book's throttle: a 2 minute window and K = 2.
type ThrottleConfig struct {
	// Window is how long requests and accepts are remembered. 0 means
	// 2 minutes.
	Window time.Duration

	// K is the multiplier of accepts: the client sends up to K requests per
	// request the backend accepts before it starts rejecting locally. Lower
	// is more aggressive (1.1 rejects early), higher lets more traffic
	// reach a failing backend. 0 means 2. It must be at least 1.
	K float64

	// Now returns the current time. nil means time.Now. Inject a virtual
	// clock for simulations and tests.
	Now func() time.Time

	// Rand returns a uniform random number in [0, 1), safe for concurrent
	// use. nil means math/rand/v2's Float64. Use [NewRand] in tests.
	Rand func() float64

	// SentOnly counts as requests only the attempts that were sent to the
	// backend, not those the throttle rejected locally. false (the SRE
	// book's rule) counts both.
	//
	// Under the SRE rule a throttle that has seen a total outage recovers
	// only once its Window has rolled past the outage: every request the
	// client attempts counts, but only the admitted ones can be accepts, so
	// after the outage p falls no lower than about 1 − 1/K (½ for K = 2)
	// and the client keeps rejecting about half of its requests locally
	// until the outage has left the window. A shorter Window alone does not
	// help: the window then holds little but rejections, which keep p near
	// 1. With SentOnly, p falls to 0 once the backend has accepted 1/K as
	// many requests as the window holds sent ones, and with a short Window
	// as well (10 s, say) the outage is forgotten within that window. The
	// price: under sustained partial overload a SentOnly client sends about
	// √(offered·K·accepted) requests instead of K·accepted, so it sheds
	// less. docs/profiles.md has the simulator's figures.
	SentOnly bool
}

// Validate reports the first invalid field of c, naming it: a negative
// Window or one under 20 ms, or a K that is below 1 (other than 0), NaN or
// infinite.
func (c ThrottleConfig) Validate() error {
	if c.Window < 0 || (c.Window > 0 && c.Window < minWindow) {
		return fmt.Errorf("retry: invalid ThrottleConfig.Window = %v: must be at least %v (0 means 2m0s)", c.Window, minWindow)
	}
	if k := c.K; math.IsNaN(k) || math.IsInf(k, 0) || (k != 0 && k < 1) {
		return fmt.Errorf("retry: invalid ThrottleConfig.K = %v: must be a finite number >= 1 (0 means 2)", k)
	}
	return nil
}

// AdaptiveThrottle is the client-side throttle of Google's SRE book
// ("Handling Overload"), shared by every call of a client. It implements
// [Limiter] for [Policy.Throttle].
//
// Over a sliding window (2 minutes by default) it counts requests and
// accepts (attempts the backend handled: successes and failures that are not
// retried). A request is counted when its outcome is known: when Record
// reports how an attempt ended, or when the throttle rejects it. Attempts
// still in flight are not counted yet, as in grpc-go's adaptive throttler;
// counting them at Admit (the SRE book's wording) would make a client that
// starts with a burst of concurrent calls reject half of them before any
// reply arrives. Before each attempt, the first included, it rejects locally
// with probability
//
//	p = max(0, (requests − K·accepts) / (requests + 1))
//
// with K = 2 by default. While the backend accepts at least one attempt in K
// nothing is rejected; when it fails everything, the client sends only a
// trickle of requests, which lets it notice the recovery. Locally rejected
// requests count as requests (the SRE book's rule), which is why after a
// total outage the client keeps rejecting about half of its requests until
// the window has rolled past the outage; [ThrottleConfig.SentOnly] changes
// that. A call whose
// attempt is rejected fails fast with [ErrThrottled], before fn is called.
//
// The window is a ring of 20 slots of packed atomic words (it slides in
// steps of Window/20). An AdaptiveThrottle is safe for concurrent use, takes
// no lock and allocates nothing after construction.
type AdaptiveThrottle struct {
	k        float64
	sentOnly bool
	rand     func() float64
	clock    windowClock
	requests slidingCounter
	accepts  slidingCounter
}

// NewAdaptiveThrottle returns a throttle configured by c. It panics with the
// error of [ThrottleConfig.Validate] if c is invalid.
func NewAdaptiveThrottle(c ThrottleConfig) *AdaptiveThrottle {
	if err := c.Validate(); err != nil {
		panic(err.Error())
	}
	c.Window = cmp.Or(c.Window, DefaultThrottleWindow)
	c.K = cmp.Or(c.K, DefaultThrottleK)
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return &AdaptiveThrottle{k: c.K, sentOnly: c.SentOnly, rand: c.Rand, clock: newWindowClock(c.Now, c.Window)}
}

// Admit rejects an attempt with the probability
// [AdaptiveThrottle.RejectProbability]; a rejected attempt is counted as a
// request at once, unless [ThrottleConfig.SentOnly] is set (an admitted
// one is counted when Record reports its outcome). First
// attempts and retries are treated alike. The random source is consulted
// only when the probability is above 0.
func (t *AdaptiveThrottle) Admit(retry bool) bool {
	e := t.clock.epoch()
	p := t.probability(e)
	if p <= 0 || t.rand() >= p {
		return true
	}
	if !t.sentOnly {
		t.requests.add(e, 1)
	}
	return false
}

// Record counts the request of an admitted attempt that ended, and an accept
// when ok is true. A retryable failure (ok false) is a request the backend
// did not accept.
func (t *AdaptiveThrottle) Record(ok bool) {
	e := t.clock.epoch()
	t.requests.add(e, 1)
	if ok {
		t.accepts.add(e, 1)
	}
}

// RejectProbability returns the probability that the next attempt is
// rejected: max(0, (requests − K·accepts) / (requests + 1)) over the window.
func (t *AdaptiveThrottle) RejectProbability() float64 {
	return t.probability(t.clock.epoch())
}

func (t *AdaptiveThrottle) probability(e uint32) float64 {
	req := float64(t.requests.sum(e))
	p := (req - t.k*float64(t.accepts.sum(e))) / (req + 1)
	return max(p, 0)
}
