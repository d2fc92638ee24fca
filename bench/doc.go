// Package bench compares the cost of backoffkit/retry's loop and HTTP
// transport with peer Go retry libraries: gax-go, sethvargo/go-retry,
// cenkalti/backoff v5, avast/retry-go, failsafe-go and go-retryablehttp; and
// the fleet quota of redisretry with go-redis/redis_rate v10, on a
// redis-server the benchmark starts (BenchmarkFleetQuota).
//
// It holds only tests and benchmarks; it lives in its own module so that the
// peers never become dependencies of the root module. Run it with
//
//	cd bench && go test -run x -bench . -benchmem -count 6
//
// and see docs/benchmarks.md for how each library is configured and for the
// measured results. TestReport measures the figures issue 25 sets goals
// for, each run alternately with its anchor, and prints one table of paired
// ratios; it runs only when asked:
//
//	cd bench && GOWORK=off go test -run '^TestReport$' -report -v -timeout 15m
package bench
