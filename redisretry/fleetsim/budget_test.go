package fleetsim

import (
	"testing"
	"time"

	"github.com/backoffkit/retry/redisretry"
)

// TestBudgetFloorQuietFleet: 200 quiet processes (10 calls per second in
// all) meet 60 s of 429s without a RetryInfo. The fleet's budget allows
// max(20 % of the window's requests, the floor) retries per window of 10 s:
// here the floor, 100 per 10 s for the whole fleet (MinPerSecond 10), since
// 20 % of about 100 requests is 20. Without it every failed call retries up
// to its Attempts (a RatioBudget per process would allow each process 100
// per 10 s, far above its few calls: the same).
func TestBudgetFloorQuietFleet(t *testing.T) {
	t.Parallel()
	retries := map[bool]int64{}
	for _, fleet := range []bool{true, false} {
		c := Config{
			Processes: 200, Duration: 70 * time.Second, Warmup: 10 * time.Second, Seed: 1,
			Quota:  &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "floor"}, Limit: redisretry.PerSecond(100_000)},
			Demand: Demand{Rate: 0.05},
			Faults: []Fault{{Kind: Overload, At: 10 * time.Second, For: time.Minute}},
		}
		if fleet {
			c.Budget = &redisretry.BudgetConfig{Settings: redisretry.Settings{Key: "floor"}}
		}
		r := run(t, c)
		retries[fleet] = r.Attempts - r.Admitted
		t.Logf("fleet budget %v: %d calls, %d retries in the 60s of 429s (%.0f per 10s), %d calls gave up", fleet, r.Calls, retries[fleet], float64(retries[fleet])/6, r.GaveUp)
	}
	// Six windows of 10 s, and one more for the sliding window's edges.
	if retries[true] > 700 || retries[true] < 300 {
		t.Errorf("the fleet budget let %d retries through in 60s, want at most the floor's 100 per 10s (and about that many)", retries[true])
	}
	if retries[false] < 3*retries[true] {
		t.Errorf("without the fleet budget %d retries, with it %d: want the budget to bite", retries[false], retries[true])
	}
}
