package fleetsim_test

import (
	"fmt"
	"os"
	"time"

	"github.com/backoffkit/retry/redisretry"
	"github.com/backoffkit/retry/redisretry/fleetsim"
)

// 200 quiet processes share a quota of 600 requests a minute, each making a
// call about every 40 s (half the quota) with a 30 s deadline: the default
// Lease against a Lease of 1. A process whose requests are further apart
// than the Slack holds no slot ahead of need: both take one slot per
// request.
func Example() {
	var results []*fleetsim.Result
	for _, lease := range []int64{0, 1} {
		r, err := fleetsim.Run(fleetsim.Config{
			Name:      fmt.Sprintf("Lease %d", lease),
			Processes: 200,
			Duration:  10 * time.Minute,
			Seed:      1,
			Quota:     &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "myproject:gemini"}, Limit: redisretry.PerMinute(600), Lease: lease},
			Demand:    fleetsim.Demand{Callers: 1, Shape: fleetsim.Jittered, Think: 40 * time.Second, Deadline: 30 * time.Second},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		results = append(results, r)
	}
	fleetsim.WriteTable(os.Stdout, results...)
	// Output:
	// Lease 0     Lease 1
	// quota                         600/1m0s    600/1m0s
	// processes                          200         200
	// calls offered per s               4.98        4.98
	// attempts sent per s               4.98        4.98
	// utilisation                    100.0 %     100.0 %
	// wait p50                           2ms         2ms
	// wait p99                         328ms       328ms
	// refused at the deadline          0.0 %       0.0 %
	//   of which meetable              0.0 %       0.0 %
	//     with a slot to spare         0.0 %       0.0 %
	// refused saturated                    0           0
	// expired in an attempt                0           0
	// answered 429                         0           0
	// max per second (server)             11          11
	// seconds over quota+2%                0           0
	// max per period (server)            326         326
	// Jain's fairness                  0.994       0.994
	//   of the shares started          1.000       1.000
	// slots reserved/attempt            1.00        1.00
	// schedule ahead, max              776ms       776ms
	// Redis calls/attempt               1.07        1.07
	// fallbacks (log lines)            0 (0)       0 (0)
	// decided without Redis                0           0
}

// A fleet of 200 processes offering 150 calls a second to a shared
// capacity that steps 100 → 40 → 100 a second: the rate the fleet learns
// from its 429s (AutoQuota) against a Quota fixed at 100 a second.
func ExampleStepScenario() {
	var rs []*fleetsim.Result
	for _, p := range []fleetsim.Pacing{fleetsim.PaceAuto, fleetsim.PaceQuota} {
		r, err := fleetsim.Run(fleetsim.StepScenario(p, 1))
		if err != nil {
			fmt.Println(err)
			return
		}
		rs = append(rs, r)
	}
	fleetsim.WriteSteps(os.Stdout, rs...)
	// Output:
	// pacing       step  cap/s     429  settled goodput/s    of cap  converged
	// auto           0s    100   1.7 %    0.9 %      96.7    96.7 %         5s
	// auto          60s     40   5.9 %    1.5 %      38.7    96.7 %         6s
	// auto         120s    100   1.1 %    1.0 %      96.3    96.3 %         7s
	// auto          all          2.2 %                              13875 att.
	// auto               13149 calls refused saturated
	// quota          0s    100   0.0 %    0.0 %     100.0   100.0 %         0s
	// quota         60s     40  59.7 %   59.6 %      40.4   101.0 %      never
	// quota        120s    100   0.0 %    0.0 %     100.0   100.0 %         0s
	// quota         all         19.9 %                              18000 att.
}
