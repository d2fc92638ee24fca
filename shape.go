package retry

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/backoffkit/retry/internal/enum"
)

// Shape selects the formula that turns a retry number into a wait. In the
// formulas below n is the retry number (0 before the first retry), base is
// InitialDelay, b is ExpBase, cap is MaxDelay, J is Jitter, U(a, b) is a
// uniform random value in [a, b), and exp(n) = min(cap, base·b^n).
//
// Every shape returns a wait in [0, cap], for any n and any valid policy (no
// overflow: a huge n, base or cap simply gives the cap). A server hint (see
// [After]) can ask for more, up to MaxRetryAfter.
//
// The zero Shape means "the default", which is ShapeGoogle: a Policy that
// sets no Shape uses the documented formula, and [Policy.Merge] with an
// override whose Shape is ShapeGoogle switches a base back to it.
type Shape uint8

const (
	// ShapeGoogle is the documented formula, and the default:
	//
	//	wait = min(base·b^n + U(0, J), cap)
	//
	// Once base·b^n reaches the cap the jitter is gone: every client waits
	// exactly cap, in lock-step. ShapeJitterAtCap keeps the jitter there.
	ShapeGoogle Shape = iota + 1

	// ShapeNone is exponential backoff without jitter: wait = exp(n).
	ShapeNone

	// ShapeFull is "full jitter" (AWS): wait = U(0, exp(n)).
	ShapeFull

	// ShapeEqual is "equal jitter" (AWS): wait = exp(n)/2 + U(0, exp(n)/2).
	ShapeEqual

	// ShapeDecorrelated is "decorrelated jitter" (AWS):
	//
	//	wait = min(cap, U(base, 3·prev))
	//
	// where prev is the previous wait of the same call (base before the
	// first retry). It ignores b and n.
	ShapeDecorrelated

	// ShapeGRPC is gRPC's connection backoff: exp(n) scaled by a random
	// factor in [0.8, 1.2) (±20 %), then capped at cap.
	ShapeGRPC

	// ShapeJitterAtCap is the documented formula with jitter that survives
	// the cap:
	//
	//	wait = min(base·b^n, cap − J') + U(0, J'),  J' = min(J, cap)
	//
	// While base·b^n ≤ cap − J' it equals ShapeGoogle; above that (within
	// J' of the cap, and at the cap) clients spread over [cap − J', cap)
	// instead of crowding at exactly cap.
	ShapeJitterAtCap

	shapeCount
)

var shapeNames = [...]string{
	0:                 "google", // the default
	ShapeGoogle:       "google",
	ShapeNone:         "none",
	ShapeFull:         "full",
	ShapeEqual:        "equal",
	ShapeDecorrelated: "decorrelated",
	ShapeGRPC:         "grpc",
	ShapeJitterAtCap:  "jitter-at-cap",
}

// String returns the shape's name as used by the CLI and the simulator.
func (s Shape) String() string { return enum.Name(s, "Shape", shapeNames[:]...) }

// MarshalText returns the shape's name (see [Shape.String]), so that a
// Shape in JSON or another text format reads "full", not a number. The zero
// Shape, the default, is "google".
func (s Shape) MarshalText() ([]byte, error) {
	if s >= shapeCount {
		return nil, fmt.Errorf("retry: cannot marshal unknown Shape(%d)", uint8(s))
	}
	return []byte(shapeNames[s]), nil
}

// UnmarshalText sets s to the shape named by text (see [ParseShape]).
func (s *Shape) UnmarshalText(text []byte) error {
	v, err := ParseShape(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseShape returns the Shape with the given name (see [Shape.String]).
func ParseShape(name string) (Shape, error) {
	if i := slices.Index(shapeNames[ShapeGoogle:], name); i >= 0 { // not 0: its name is ShapeGoogle's
		return ShapeGoogle + Shape(i), nil
	}
	return 0, fmt.Errorf("retry: unknown shape %q (want one of google, none, full, equal, decorrelated, grpc, jitter-at-cap)", name)
}

// Shapes returns every shape, in declaration order (ShapeGoogle first; not
// the zero Shape, which stands for it).
func Shapes() []Shape {
	s := make([]Shape, shapeCount-ShapeGoogle)
	for i := range s {
		s[i] = ShapeGoogle + Shape(i)
	}
	return s
}

// Backoff returns the wait before retry n (n from 0) under p's Shape, given
// the previous wait prev (used by ShapeDecorrelated; pass 0 before the first
// retry) and u, a uniform random number in [0, 1). Defaults of p are applied.
// It never panics and never returns a negative wait or one above MaxDelay.
//
// Backoff is the only place a wait is computed: [Do], httpretry, the
// simulator and the adapters all call it.
func (p Policy) Backoff(n int, prev time.Duration, u float64) time.Duration {
	r := p.resolve()
	return r.backoff(n, prev, u)
}

// backoff is Backoff on a resolved policy.
func (p *Policy) backoff(n int, prev time.Duration, u float64) time.Duration {
	if n < 0 {
		n = 0
	}
	if !(u >= 0 && u < 1) { // also catches NaN
		u = 0
	}
	capf := float64(p.MaxDelay)
	exp := 0.0 // InitialDelay 0 stays 0 for every n (0·Inf would be NaN)
	if p.InitialDelay > 0 {
		exp = float64(p.InitialDelay) * math.Pow(p.ExpBase, float64(n))
	}
	if !(exp <= capf) { // NaN or +Inf or above the cap
		exp = capf
	}
	var w float64
	switch p.Shape {
	case ShapeNone:
		w = exp
	case ShapeFull:
		w = u * exp
	case ShapeEqual:
		w = exp/2 + u*exp/2
	case ShapeDecorrelated:
		lo := float64(p.InitialDelay)
		hi := 3 * float64(prev)
		if hi < lo {
			hi = 3 * lo
		}
		w = lo + u*(hi-lo)
	case ShapeGRPC:
		w = exp * (0.8 + 0.4*u)
	case ShapeJitterAtCap:
		j := math.Min(float64(p.Jitter), capf)
		w = math.Min(exp, capf-j) + u*j
	default: // ShapeGoogle, and the zero Shape
		w = exp + u*float64(p.Jitter)
	}
	return clampWait(w, p.MaxDelay)
}

// clampWait converts the wait w, in nanoseconds, to a Duration in [0, max].
// It compares before it converts: float64(math.MaxInt64) is 2^63, which does
// not fit in an int64, so converting a wait at or above max would wrap to a
// negative Duration when max is near MaxInt64.
func clampWait(w float64, max time.Duration) time.Duration {
	switch {
	case !(w > 0) || max <= 0: // also NaN; max <= 0 only on an invalid policy
		return 0
	case w >= float64(max):
		return max
	}
	return time.Duration(w) // w < float64(max) <= 2^63: fits, and is at most max
}

// NewRand returns a seeded source of uniform random numbers in [0, 1), safe
// for concurrent use, for [Policy.Rand]. The same seed gives the same
// sequence (per goroutine order of calls).
func NewRand(seed uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}
