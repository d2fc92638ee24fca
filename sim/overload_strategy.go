package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/backoffkit/retry"
)

// OverloadStrategy is a way for clients to retry in [RunOverload]: a Policy
// and, optionally, the retry budget and client-side throttle of each client
// process.
type OverloadStrategy struct {
	// Name identifies the strategy in every output and seeds its streams.
	Name string
	// Policy supplies Attempts, the waits (Backoff), Deadline,
	// AttemptTimeout and which status codes are retried. Its Budget and
	// Throttle are not used: the simulator needs one of each per client
	// process, on its virtual clock, from NewLimiters.
	Policy retry.Policy
	// NewLimiters, when set, returns the budget and the throttle (either may
	// be nil) of one client process. now is the simulator's virtual clock
	// and rand a seeded random source; both must be used instead of the
	// real ones.
	NewLimiters func(now func() time.Time, rand func() float64) (budget, throttle retry.Limiter)
}

// DefaultOverloadNames are the strategies "retry sim overload" compares by
// default. [OverloadStrategyByName] also accepts "profile:NAME" for every
// name of [retry.ProfileNames] and "budget+throttle".
var DefaultOverloadNames = []string{"none", "genai", "token-bucket", "ratio-budget", "adaptive-throttle", "adaptive-throttle-sent-10s"}

// OverloadNames returns every name [OverloadStrategyByName] accepts.
func OverloadNames() []string {
	names := append([]string(nil), DefaultOverloadNames...)
	names = append(names, "adaptive-throttle-10s", "adaptive-throttle-sent", "budget+throttle")
	for _, p := range retry.ProfileNames() {
		names = append(names, "profile:"+p)
	}
	return names
}

// OverloadStrategyByName returns a named overload strategy:
//
//   - "none": no retries (Attempts 1).
//   - "genai": the Gen AI SDK's default, [retry.Google]: 5 attempts, waits
//     of 1, 2, 4, 8 s plus up to 1 s of jitter.
//   - "token-bucket": genai under gRPC's retry throttling,
//     [retry.NewTokenBucket](10, 0.1) per client process.
//   - "ratio-budget": genai under Finagle's retry budget,
//     [retry.NewRatioBudget] with its defaults per client process.
//   - "adaptive-throttle": genai under the SRE book's client-side throttle,
//     [retry.NewAdaptiveThrottle] with its defaults per client process.
//   - "adaptive-throttle-10s": the same throttle with a 10 s window
//     instead of 2 min.
//   - "adaptive-throttle-sent": the same throttle counting only the
//     requests it sends ([retry.ThrottleConfig] SentOnly).
//   - "adaptive-throttle-sent-10s": SentOnly and a 10 s window.
//   - "budget+throttle": genai with both the ratio budget and the throttle.
//   - "profile:NAME": [retry.Profile](NAME). A profile's budget or throttle
//     is rebuilt per client process on the virtual clock with the defaults
//     the profile documents.
func OverloadStrategyByName(name string) (OverloadStrategy, error) {
	ratio := func(now func() time.Time) retry.Limiter {
		return retry.NewRatioBudget(retry.RatioBudgetConfig{Now: now})
	}
	throttle := func(now func() time.Time, rand func() float64) retry.Limiter {
		return retry.NewAdaptiveThrottle(retry.ThrottleConfig{Now: now, Rand: rand})
	}
	withThrottle := func(c retry.ThrottleConfig) func(now func() time.Time, rand func() float64) (retry.Limiter, retry.Limiter) {
		return func(now func() time.Time, rand func() float64) (retry.Limiter, retry.Limiter) {
			c.Now, c.Rand = now, rand
			return nil, retry.NewAdaptiveThrottle(c)
		}
	}
	s := OverloadStrategy{Name: name, Policy: retry.Google()}
	switch name {
	case "none":
		s.Policy.Attempts = 1
	case "genai":
	case "token-bucket":
		s.NewLimiters = func(now func() time.Time, rand func() float64) (retry.Limiter, retry.Limiter) {
			return retry.NewTokenBucket(10, 0.1), nil
		}
	case "ratio-budget":
		s.NewLimiters = func(now func() time.Time, rand func() float64) (retry.Limiter, retry.Limiter) {
			return ratio(now), nil
		}
	case "adaptive-throttle":
		s.NewLimiters = func(now func() time.Time, rand func() float64) (retry.Limiter, retry.Limiter) {
			return nil, throttle(now, rand)
		}
	case "adaptive-throttle-sent":
		s.NewLimiters = withThrottle(retry.ThrottleConfig{SentOnly: true})
	case "adaptive-throttle-sent-10s":
		s.NewLimiters = withThrottle(retry.ThrottleConfig{SentOnly: true, Window: 10 * time.Second})
	case "adaptive-throttle-10s":
		s.NewLimiters = withThrottle(retry.ThrottleConfig{Window: 10 * time.Second})
	case "budget+throttle":
		s.NewLimiters = func(now func() time.Time, rand func() float64) (retry.Limiter, retry.Limiter) {
			return ratio(now), throttle(now, rand)
		}
	default:
		prof, ok := strings.CutPrefix(name, "profile:")
		if !ok {
			return OverloadStrategy{}, fmt.Errorf("sim: unknown overload strategy %q (want one of %s)", name, strings.Join(OverloadNames(), ", "))
		}
		p, err := retry.Profile(prof)
		if err != nil {
			return OverloadStrategy{}, fmt.Errorf("sim: strategy %q: %w", name, err)
		}
		var mkBudget func(now func() time.Time) retry.Limiter
		switch p.Budget.(type) {
		case nil:
		case *retry.RatioBudget:
			mkBudget = ratio // the profile's budget is RatioBudgetConfig{}: the defaults
		default:
			return OverloadStrategy{}, fmt.Errorf("sim: profile %q has a budget of type %T that the simulator cannot put on its clock", prof, p.Budget)
		}
		var mkThrottle func(now func() time.Time, rand func() float64) retry.Limiter
		switch p.Throttle.(type) {
		case nil:
		case *retry.AdaptiveThrottle:
			mkThrottle = throttle
		default:
			return OverloadStrategy{}, fmt.Errorf("sim: profile %q has a throttle of type %T that the simulator cannot put on its clock", prof, p.Throttle)
		}
		p.Budget, p.Throttle = nil, nil
		s.Policy = p
		if mkBudget != nil || mkThrottle != nil {
			s.NewLimiters = func(now func() time.Time, rand func() float64) (b, t retry.Limiter) {
				if mkBudget != nil {
					b = mkBudget(now)
				}
				if mkThrottle != nil {
					t = mkThrottle(now, rand)
				}
				return b, t
			}
		}
	}
	return s, nil
}
