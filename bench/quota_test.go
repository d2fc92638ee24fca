package bench

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/internal/redistest"
	"github.com/backoffkit/retry/internal/testkit"
	"github.com/backoffkit/retry/redisretry"
)

// The fleet quota beside its anchor, go-redis/redis_rate v10 (one GCRA
// decision per request, in Redis), on one redis-server the benchmark starts:
// quotaClients goroutines of one process ask for requests as fast as they
// are admitted, under a quota far above that demand, at it, and at 1e9/s.

// quotaClients is the number of goroutines asking for requests.
const quotaClients = 8

// quotaCases are the quotas compared. saturated is below what either
// library admits on this machine (redis_rate about 35,000/s with 8
// goroutines): both pace.
var quotaCases = []struct {
	name string
	rate int64 // per second
}{
	{"1M-per-s", 1_000_000},
	{"saturated-5000-per-s", 5000},
	{"1e9-per-s", 1_000_000_000},
}

// admitter admits one request: it returns once the quota lets it start
// (having waited for its slot), or with an error.
type admitter func(ctx context.Context) error

// quotaPeer is one library under comparison, on its own client and key.
type quotaPeer struct {
	name string
	make func(tb testing.TB, srv *redistest.Server, rate int64) (admitter, func() (local int64))
}

var quotaPeers = []quotaPeer{
	{"ours", newOurs},
	{"redis_rate", newRedisRate},
}

// newClient returns the client each library runs on: go-redis's defaults,
// context deadlines honoured (as redisretry.NewClient sets).
func newClient(tb testing.TB, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { c.Close() })
	return c
}

// newOurs is redisretry.Quota with its defaults (Lease 0: 20, growing to 80
// far below the quota; burst 1), but a Timeout of 1 s: the Redis path is
// measured, not a loaded machine's late replies (decisions made without
// Redis are reported as local/op).
func newOurs(tb testing.TB, srv *redistest.Server, rate int64) (admitter, func() int64) {
	q, err := redisretry.NewQuota(newClient(tb, srv), redisretry.QuotaConfig{
		Settings: redisretry.Settings{Key: fmt.Sprintf("bench:ours:%d", rate), Timeout: time.Second}, Limit: redisretry.PerSecond(rate),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { q.Close() })
	return q.Wait, func() int64 { return q.Stats().Local }
}

// newRedisRate is redis_rate's Limiter at the same limit (burst 1: pure
// pacing, like ours): a request that is not allowed sleeps RetryAfter and
// asks again, as its README's callers do.
func newRedisRate(tb testing.TB, srv *redistest.Server, rate int64) (admitter, func() int64) {
	l := redis_rate.NewLimiter(newClient(tb, srv))
	limit := redis_rate.Limit{Rate: int(rate), Period: time.Second, Burst: 1}
	key := fmt.Sprintf("bench:redis_rate:%d", rate)
	return func(ctx context.Context) error {
		for {
			res, err := l.Allow(ctx, key, limit)
			if err != nil {
				return err
			}
			if res.Allowed > 0 {
				return nil
			}
			// Real time, on purpose: sleeping RetryAfter is how
			// redis_rate's callers wait, the scenario compared.
			time.Sleep(res.RetryAfter)
		}
	}, func() int64 { return 0 }
}

// redisStats are the counters of a redis-server read from INFO.
type redisStats struct {
	commands int64         // commands run (inside scripts too), INFO itself excepted
	cpu      time.Duration // used_cpu_sys + used_cpu_user
	scripts  time.Duration // the time Redis spent running the scripts (EVAL, EVALSHA: their usec)
}

func readRedisStats(tb testing.TB, c *redis.Client) redisStats {
	info, err := c.Info(context.Background(), "commandstats", "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	return parseRedisStats(info)
}

// parseRedisStats reads the commands' calls ("cmdstat_NAME:calls=N,...")
// and the CPU time ("used_cpu_sys:S.ssssss") of an INFO reply, and the time
// spent in the scripts ("cmdstat_evalsha:calls=N,usec=U,..."): the commands
// the scripts call are counted on their own lines too, inside that time.
func parseRedisStats(info string) redisStats {
	var s redisStats
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		switch {
		case !ok:
		case strings.HasPrefix(k, "cmdstat_") && k != "cmdstat_info":
			calls, rest, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			s.commands += n
			switch k {
			case "cmdstat_eval", "cmdstat_evalsha", "cmdstat_eval_ro", "cmdstat_evalsha_ro":
				usec, _, _ := strings.Cut(strings.TrimPrefix(rest, "usec="), ",")
				u, _ := strconv.ParseInt(usec, 10, 64)
				s.scripts += time.Duration(u) * time.Microsecond
			}
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += time.Duration(f * float64(time.Second))
		}
	}
	return s
}

// admitN admits n requests from quotaClients goroutines and returns the
// first error.
func admitN(admit admitter, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, quotaClients)
	for range quotaClients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := admit(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// quotaTotals add up one library's runs: admitted requests, wall time,
// this process's CPU time, Redis's commands and CPU time.
type quotaTotals struct{ n, ns, cpu, commands, redisCPU, scripts float64 }

// per returns the totals per admitted request.
func (t quotaTotals) per() quotaTotals {
	return quotaTotals{1, t.ns / t.n, t.cpu / t.n, t.commands / t.n, t.redisCPU / t.n, t.scripts / t.n}
}

// BenchmarkFleetQuota compares redisretry's Quota with redis_rate on one
// redis-server, quotaClients goroutines admitting requests as fast as each
// quota lets them. Per admitted request (op): ns/op is the wall time (at
// saturation, the pacing: 1/rate), cpu-ns/op this process's CPU time (the
// client's cost), redis-cmds/op the commands Redis ran (INFO commandstats,
// those inside the scripts included) and redis-cpu-ns/op the server's CPU
// time (INFO cpu), redis-script-ns/op the time Redis spent running the
// scripts (INFO commandstats' usec of EVAL and EVALSHA: the commands, not
// the network; a busy machine inflates it less). local/op counts our
// decisions made without Redis (0 unless a reply took over 1 s).
// lib=ratio reports redis_rate's figures
// divided by ours, over every run of both at that quota so far in this
// process (-count runs included): how many times cheaper ours is. Run it
// with
//
//	cd bench && GOWORK=off go test -run x -bench FleetQuota -count 3
func BenchmarkFleetQuota(b *testing.B) {
	srv := redistest.Start(b)
	stats := newClient(b, srv)
	for _, qc := range quotaCases {
		b.Run("quota="+qc.name, func(b *testing.B) {
			totals := map[string]*quotaTotals{}
			for _, p := range quotaPeers {
				tot := &quotaTotals{}
				totals[p.name] = tot
				b.Run("lib="+p.name, func(b *testing.B) {
					admit, local := p.make(b, srv, qc.rate)
					if err := admitN(admit, 1000); err != nil { // connections, scripts, leases
						b.Fatal(err)
					}
					run := quotaRun(b, admit, local, stats)
					tot.n, tot.ns, tot.cpu = tot.n+run.n, tot.ns+run.ns, tot.cpu+run.cpu
					tot.commands, tot.redisCPU = tot.commands+run.commands, tot.redisCPU+run.redisCPU
					tot.scripts += run.scripts
				})
			}
			ours, theirs := totals["ours"], totals["redis_rate"]
			if ours.n == 0 || theirs.n == 0 {
				return // a -bench filter ran one library only
			}
			b.Run("lib=ratio", func(b *testing.B) {
				o, t := ours.per(), theirs.per()
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(t.ns/o.ns, "ns-ratio")
				b.ReportMetric(t.cpu/o.cpu, "cpu-ratio")
				b.ReportMetric(t.commands/o.commands, "redis-cmds-ratio")
				b.ReportMetric(t.redisCPU/o.redisCPU, "redis-cpu-ratio")
				b.ReportMetric(t.scripts/o.scripts, "redis-script-ratio")
			})
		})
	}
}

// quotaRun is the measured part of BenchmarkFleetQuota (and of TestReport's
// quota rows): b.N requests admitted by admit from quotaClients goroutines,
// with what they cost reported per admitted request and returned as totals.
// stats is a client of the same redis-server, for INFO; local counts the
// decisions the library made without Redis.
func quotaRun(b *testing.B, admit admitter, local func() int64, stats *redis.Client) quotaTotals {
	l0, r0, cpu0 := local(), readRedisStats(b, stats), testkit.CPUTime(b)
	b.ResetTimer()
	if err := admitN(admit, b.N); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	cpu, r1, l1 := testkit.CPUTime(b)-cpu0, readRedisStats(b, stats), local()
	run := quotaTotals{
		n:        float64(b.N),
		ns:       float64(b.Elapsed().Nanoseconds()),
		cpu:      float64(cpu.Nanoseconds()),
		commands: float64(r1.commands - r0.commands),
		redisCPU: float64((r1.cpu - r0.cpu).Nanoseconds()),
		scripts:  float64((r1.scripts - r0.scripts).Nanoseconds()),
	}
	per := run.per()
	b.ReportMetric(per.cpu, "cpu-ns/op")
	b.ReportMetric(per.commands, "redis-cmds/op")
	b.ReportMetric(per.redisCPU, "redis-cpu-ns/op")
	b.ReportMetric(per.scripts, "redis-script-ns/op")
	b.ReportMetric(float64(l1-l0)/run.n, "local/op")
	return run
}
