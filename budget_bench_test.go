package retry_test

import (
	"context"
	"testing"

	"github.com/backoffkit/retry"
)

// limiters builds one of each Limiter, fresh for each benchmark.
var limiters = []struct {
	name string
	new  func() retry.Limiter
}{
	{"token-bucket", func() retry.Limiter { return retry.NewTokenBucket(10, 0.1) }},
	{"ratio", func() retry.Limiter { return retry.NewRatioBudget(retry.RatioBudgetConfig{}) }},
	{"throttle", func() retry.Limiter { return retry.NewAdaptiveThrottle(retry.ThrottleConfig{}) }},
}

// BenchmarkBudget measures the shared limiters under contention: every
// goroutine of b.RunParallel uses the same one, as every call of a client
// does. Run with -cpu 1,2 (or more) to see contention.
func BenchmarkBudget(b *testing.B) {
	// allow-parallel: the question asked before each retry.
	b.Run("allow-parallel", func(b *testing.B) {
		for _, l := range limiters {
			b.Run(l.name, func(b *testing.B) {
				lim := l.new()
				for range 1000 { // a busy client: room for retries
					lim.Admit(false)
					lim.Record(true)
				}
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						lim.Admit(true)
					}
				})
			})
		}
	})
	// call-parallel: the bookkeeping of one call that fails once and
	// succeeds on its retry (Admit, Record, Admit, Record).
	b.Run("call-parallel", func(b *testing.B) {
		for _, l := range limiters {
			b.Run(l.name, func(b *testing.B) {
				lim := l.new()
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						lim.Admit(false)
						lim.Record(false)
						lim.Admit(true)
						lim.Record(true)
					}
				})
			})
		}
	})
}

//go:noinline
func benchOK(context.Context) (int, error) { return 1, nil }

// BenchmarkDoThrottled is BenchmarkDo/success with a shared throttle or
// budget on the Policy: the limiters' bookkeeping must add no allocation.
func BenchmarkDoThrottled(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		p    retry.Policy
	}{
		{"none", retry.Policy{}},
		{"throttle", retry.Policy{Throttle: retry.NewAdaptiveThrottle(retry.ThrottleConfig{})}},
		{"ratio-budget", retry.Policy{Budget: retry.NewRatioBudget(retry.RatioBudgetConfig{})}},
		{"throttle+token-bucket", retry.Policy{
			Throttle: retry.NewAdaptiveThrottle(retry.ThrottleConfig{}),
			Budget:   retry.NewTokenBucket(10, 0.1),
		}},
	} {
		b.Run(tc.name+"/success", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := retry.Do(ctx, tc.p, benchOK); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
