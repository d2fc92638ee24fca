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
// Lease against a Lease of 1.
func Example() {
	var results []*fleetsim.Result
	for _, lease := range []int64{0, 1} {
		r, err := fleetsim.Run(fleetsim.Config{
			Name:      fmt.Sprintf("Lease %d", lease),
			Processes: 200,
			Duration:  10 * time.Minute,
			Seed:      1,
			Quota:     &redisretry.QuotaConfig{Key: "myproject:gemini", Limit: redisretry.PerMinute(600), Lease: lease},
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
	// calls offered per s               4.87        4.98
	// attempts sent per s               4.02        4.98
	// utilisation                     82.5 %     100.0 %
	// wait p50                          6.8s         1ms
	// wait p99                         30.0s       328ms
	// refused at the deadline         16.4 %       0.0 %
	//   of which meetable             15.6 %       0.0 %
	// expired in an attempt               19           0
	// answered 429                         0           0
	// max per second (server)             11          11
	// seconds over quota+2%                0           0
	// max per period (server)            312         326
	// Jain's fairness                  0.993       0.994
	// slots reserved/attempt            2.42        1.00
	// schedule ahead, max              30.6s       777ms
	// Redis calls/attempt               1.21        1.00
	// fallbacks (log lines)            0 (0)       0 (0)
	// decided without Redis                0           0
}
