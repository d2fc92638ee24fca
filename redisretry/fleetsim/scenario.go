package fleetsim

import (
	"time"

	"github.com/backoffkit/retry/redisretry"
)

// Pacing is a way for a fleet to pace against a shared capacity, in
// [StepScenario].
type Pacing uint8

// The ways StepScenario compares.
const (
	// PaceAuto: a redisretry.AutoQuota, one rate the fleet learns.
	PaceAuto Pacing = iota
	// PaceBackoff: no pacing, each call's retries back off.
	PaceBackoff
	// PaceAdaptive: each process paces on its own, AWS's adaptive mode.
	PaceAdaptive
	// PaceQuota: a redisretry.Quota fixed at the first step's capacity.
	PaceQuota
)

var pacingNames = [...]string{"auto", "backoff", "adaptive", "quota"}

// String returns the pacing's name, e.g. "auto".
func (p Pacing) String() string {
	if int(p) < len(pacingNames) {
		return pacingNames[p]
	}
	return "Pacing(?)"
}

// StepScenario returns the run of a shared capacity that steps, paced by p:
// 200 processes offering 150 calls a second in all (Poisson, 30 s
// deadlines, the core's default policy) to a server whose hidden capacity
// is 100, then 40, then 100 requests a second, a minute each, and which
// answers 429 beyond it (with a RetryInfo). The AutoQuota has the default
// config (no Ceiling: it starts at 10,000 a second); the Quota is fixed at
// 100 a second. The same seed gives the four ways the same demand.
func StepScenario(p Pacing, seed uint64) Config {
	c := Config{
		Name: p.String(), Processes: 200, Duration: 3 * time.Minute, Seed: seed,
		Demand: Demand{Rate: 0.75, Deadline: 30 * time.Second},
		Server: Server{Capacity: []Step{{0, 100}, {time.Minute, 40}, {2 * time.Minute, 100}}},
	}
	const key = "myproject:gemini:global"
	switch p {
	case PaceAuto:
		c.Auto = &redisretry.AutoQuotaConfig{Settings: redisretry.Settings{Key: key}}
	case PaceAdaptive:
		c.Adaptive = true
	case PaceQuota:
		c.Quota = &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: key}, Limit: redisretry.PerSecond(100)}
	}
	return c
}
