package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/backoffkit/retry"
)

// Strategy is a named way to wait between attempts: the simulator asks
// Policy.Backoff for every wait, and only for that (Attempts, Deadline,
// Budget and Throttle matter in [RunOverload] only).
type Strategy struct {
	// Name identifies the strategy in every output. It also seeds the
	// strategy's random streams, so a strategy's results do not depend on
	// which other strategies run alongside it.
	Name string
	// Policy computes the waits with its Shape, InitialDelay, MaxDelay,
	// ExpBase and Jitter.
	Policy retry.Policy
}

// Contention strategy names, in the order the tables and plots show them.
// "none" here means no backoff at all (not [retry.ShapeNone], which is
// "expo"); "jitter-at-cap" is [retry.ShapeJitterAtCap], named as the CLI
// names the shape.
var ContentionNames = []string{"none", "expo", "google", "full", "equal", "decorrelated", "jitter-at-cap"}

// ContentionStrategy returns the contention strategy with the given name
// (one of [ContentionNames]) for backoff base base, cap maxDelay and, for
// "google" and "jitter-at-cap", additive jitter up to jitter.
//
// Every strategy is a [retry.Policy]: "none" is a policy whose every wait is
// an explicit zero, "expo" is ShapeNone, "google" ShapeGoogle, "full"
// ShapeFull, "equal" ShapeEqual, "decorrelated" ShapeDecorrelated and
// "jitter-at-cap" ShapeJitterAtCap.
func ContentionStrategy(name string, base, maxDelay, jitter time.Duration) (Strategy, error) {
	if base <= 0 || maxDelay < base {
		return Strategy{}, fmt.Errorf("sim: backoff base %v and cap %v: want 0 < base <= cap", base, maxDelay)
	}
	if jitter < 0 {
		return Strategy{}, fmt.Errorf("sim: jitter %v must not be negative", jitter)
	}
	p := retry.Policy{InitialDelay: base, MaxDelay: maxDelay, ExpBase: 2, Jitter: explicit(jitter)}
	switch name {
	case "none":
		p = retry.Policy{InitialDelay: retry.Zero, MaxDelay: retry.Zero, Jitter: retry.Zero, Shape: retry.ShapeNone}
	case "expo":
		p.Shape = retry.ShapeNone
	case "google", "full", "equal", "decorrelated", "jitter-at-cap":
		p.Shape, _ = retry.ParseShape(name) // the strategy is named after its shape
	default:
		return Strategy{}, fmt.Errorf("sim: unknown contention strategy %q (want one of %s)", name, strings.Join(ContentionNames, ", "))
	}
	if err := p.Validate(); err != nil {
		return Strategy{}, err
	}
	return Strategy{Name: name, Policy: p}, nil
}

// explicit turns a duration that may be 0 into one the Policy reads as 0
// rather than as "use the default".
func explicit(d time.Duration) time.Duration {
	if d == 0 {
		return retry.Zero
	}
	return d
}
