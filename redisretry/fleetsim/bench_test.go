package fleetsim

import (
	"testing"
	"time"

	"github.com/backoffkit/retry/redisretry"
)

// tenThousand is the scale issue 21 asks the harness to run in 60 s on the
// 2-core machine: 10,000 processes, each with a quota, a budget and a
// cooldown on one Redis, Poisson demand at the quota (60,000/1m), 30 s
// deadlines, 10 virtual minutes.
func tenThousand() Config {
	return Config{
		Name: "10,000", Processes: 10_000, Duration: 10 * time.Minute, Warmup: time.Minute, Seed: 1,
		Quota:    &redisretry.QuotaConfig{Settings: redisretry.Settings{Key: "scale"}, Limit: redisretry.PerMinute(60_000)},
		Budget:   &redisretry.BudgetConfig{Settings: redisretry.Settings{Key: "scale"}},
		Cooldown: &redisretry.CooldownConfig{Settings: redisretry.Settings{Key: "scale"}},
		Demand:   Demand{Rate: 0.1, Deadline: 30 * time.Second},
	}
}

// BenchmarkTenThousandProcesses runs tenThousand: sec/op is the wall time of
// one run (the bound is 60 s), events/op the events it processed.
func BenchmarkTenThousandProcesses(b *testing.B) {
	var events int64
	for b.Loop() {
		r, err := Run(tenThousand())
		if err != nil {
			b.Fatal(err)
		}
		events = r.Events
	}
	b.ReportMetric(float64(events), "events/op")
}
