package redisretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/internal/testkit"
	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// The steady state the fleet limiters are measured in: 8 goroutines of one
// process share a quota of 2000 attempts per second; one call in ten fails
// once and is retried (so the budget grants permits too).
const (
	benchRate    = 2000
	benchClients = 8
)

// quietRedis drops go-redis's own log lines (a failed dial to the local
// quota's absent server), which would cut the benchmark's result lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// benchCase is a limiter in a policy, with a function that returns the Redis
// round trips it made so far and the decisions it made without Redis (a
// call that Redis did not answer within the Timeout, on a busy machine).
type benchCase struct {
	name  string
	p     retry.Policy
	stats func() (roundTrips, local int64)
	paces bool // the policy has the quota
}

// benchLimiters returns the limiters compared, on a redis-server of its own.
// quota is the fleet quota's limit.
func benchLimiters(b *testing.B, quota Limit) []benchCase {
	srv := startRedis(b)
	c := srv.client(b)
	key := testKey(b)
	q, _ := NewQuota(c, QuotaConfig{Settings: Settings{Key: key + ":q", Logger: discard}, Limit: quota})
	bu, _ := NewBudget(c, BudgetConfig{Settings: Settings{Key: key + ":b", Logger: discard}})
	cd, _ := NewCooldown(c, CooldownConfig{Settings: Settings{Key: key + ":c", Logger: discard}})
	q2, _ := NewQuota(c, QuotaConfig{Settings: Settings{Key: key + ":q2", Logger: discard}, Limit: quota})
	// The quota's local equivalent: the same Quota deciding without Redis
	// (none listens on port 1), a local GCRA pacer at the whole rate.
	redis.SetLogger(quietRedis{})
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	lq, _ := NewQuota(down, QuotaConfig{Settings: Settings{Key: key + ":lq", Logger: discard}, Limit: quota, FleetSize: 1})
	bu2, _ := NewBudget(c, BudgetConfig{Settings: Settings{Key: key + ":b2", Logger: discard}})
	cd2, _ := NewCooldown(c, CooldownConfig{Settings: Settings{Key: key + ":c2", Logger: discard}})
	b.Cleanup(func() {
		for _, x := range []interface{ Close() error }{q, bu, cd, q2, bu2, cd2, lq, down} {
			x.Close()
		}
	})
	zero := func() (int64, int64) { return 0, 0 }
	sum := func(ls ...interface{ Stats() Stats }) func() (int64, int64) {
		return func() (rt, local int64) {
			for _, l := range ls {
				s := l.Stats()
				rt, local = rt+s.RoundTrips, local+s.Local
			}
			return rt, local
		}
	}
	return []benchCase{
		{"none", retry.Policy{}, zero, false},
		{"ratiobudget", retry.Policy{Budget: retry.NewRatioBudget(retry.RatioBudgetConfig{})}, zero, false},
		{"tokenbucket", retry.Policy{Budget: retry.NewTokenBucket(10, 0.1)}, zero, false},
		{"local-quota", retry.Policy{Pacer: lq}, zero, true},
		{"fleet-budget", retry.Policy{Budget: bu}, sum(bu), false},
		{"fleet-quota", retry.Policy{Pacer: q}, sum(q), true},
		{"fleet-cooldown", retry.Policy{Pacer: cd}, sum(cd), false},
		{"fleet-all", retry.Policy{Pacer: retry.Pacers(cd2, q2), Budget: bu2}, sum(cd2, q2, bu2), true},
	}
}

// timed wraps a policy's limiters to add up the time its caller spends in
// them (deciding, and waiting for Redis when a lease ran dry; not the pacing
// wait the loop sleeps afterwards).
type timed struct{ ns atomic.Int64 }

type timedP struct {
	retry.Pacer
	t *timed
}

func (p timedP) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	begin := time.Now()
	defer func() { p.t.ns.Add(int64(time.Since(begin))) }()
	return p.Pacer.Reserve(ctx, earliest, deadline)
}

type timedL struct {
	retry.Limiter
	t *timed
}

func (l timedL) Admit(r bool) bool {
	begin := time.Now()
	defer func() { l.t.ns.Add(int64(time.Since(begin))) }()
	return l.Limiter.Admit(r)
}

func (l timedL) Cancel(r bool) {
	if c, ok := l.Limiter.(interface{ Cancel(bool) }); ok {
		c.Cancel(r)
	}
}

func (t *timed) wrap(p retry.Policy) retry.Policy {
	if p.Pacer != nil {
		p.Pacer = timedP{p.Pacer, t}
	}
	if p.Budget != nil {
		p.Budget = timedL{p.Budget, t}
	}
	return p
}

// runSteady makes n calls of retry.Run under p from benchClients goroutines,
// each call succeeding at once except one in ten that fails once. With
// demand > 0 the calls are started at that many per second (an open loop);
// with 0 each goroutine calls again as soon as its call returns, and the
// quota paces them. It returns the time each call spent in the limiters.
func runSteady(p retry.Policy, n int, demand float64) []time.Duration {
	p.InitialDelay, p.Jitter = time.Millisecond, retry.Zero
	errFlaky := errors.New("flaky")
	var next atomic.Int64
	spent := make([]time.Duration, n)
	begin := time.Now()
	var wg sync.WaitGroup
	for range benchClients {
		wg.Go(func() {
			for {
				k := next.Add(1) - 1
				if k >= int64(n) {
					return
				}
				if demand > 0 {
					time.Sleep(time.Until(begin.Add(time.Duration(float64(k) / demand * float64(time.Second)))))
				}
				var t timed
				fails := k%10 == 0
				retry.Run(context.Background(), t.wrap(p), func(context.Context) error {
					if fails {
						fails = false
						return errFlaky
					}
					return nil
				})
				spent[k] = time.Duration(t.ns.Load())
			}
		})
	}
	wg.Wait()
	return spent
}

// BenchmarkSteady measures the fleet limiters at a steady state beside the
// local ones: benchClients goroutines of one process calling retry.Run at
// the fleet quota's rate (demand=100%) or at half of it (demand=50%). At 100 %
// the policies with the quota call as fast as it lets them (it paces them);
// the others, and every policy at 50 %, are started at that rate by the
// benchmark. One call in ten fails once and is retried. Run it with
// -benchtime=4000x (2 s per row at 2000 per second).
//
// ns/op is the pacing (the time per call of the run), not the cost. The
// cost is cpu-µs/op, the CPU time of the whole process per call (the
// benchmark's own goroutines and timers, the limiters' background refills and
// flushes, the Redis client; not the redis-server): subtract the lib=none row
// of the same demand for what the limiter adds. limiter-p50-µs and
// limiter-p99-µs are the time a call spent in the limiters (deciding, waiting
// for Redis when a lease ran dry; not the pacing wait). roundtrips/op counts
// Redis calls per call.
func BenchmarkSteady(b *testing.B) {
	cases := benchLimiters(b, PerSecond(benchRate))
	for _, share := range []float64{1, 0.5} {
		for _, l := range cases {
			rate := share * benchRate
			if share == 1 && l.paces {
				rate = 0 // the quota paces them
			}
			b.Run(fmt.Sprintf("demand=%d%%/lib=%s", int(share*100), l.name), func(b *testing.B) {
				runSteady(l.p, 200, rate) // warm up: leases at their steady size
				rts, local := l.stats()
				cpu := testkit.CPUTime(b)
				b.ResetTimer()
				spent := runSteady(l.p, b.N, rate)
				b.StopTimer()
				cpu = testkit.CPUTime(b) - cpu
				rts2, local2 := l.stats()
				slices.Sort(spent)
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
				b.ReportMetric(float64(rts2-rts)/float64(b.N), "roundtrips/op")
				b.ReportMetric(float64(local2-local)/float64(b.N), "local/op")
				b.ReportMetric(float64(spent[len(spent)/2])/1e3, "limiter-p50-µs")
				b.ReportMetric(float64(spent[len(spent)*99/100])/1e3, "limiter-p99-µs")
			})
		}
	}
}

// BenchmarkGET measures a loopback GET through httpretry with each limiter,
// one at a time, and reports the median and 99th percentile latency. The
// fleet quota allows 100 000 per second, more than one client sends: it
// adds its cost, not a pacing wait.
func BenchmarkGET(b *testing.B) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"candidates":[{"content":{"parts":[{"text":"ok"}]}}]}`)
	}))
	defer hs.Close()
	for _, l := range benchLimiters(b, PerSecond(100_000)) {
		b.Run("lib="+l.name, func(b *testing.B) {
			base := &http.Transport{MaxIdleConnsPerHost: 4}
			defer base.CloseIdleConnections()
			c := &http.Client{Transport: httpretry.NewTransport(base, l.p)}
			get := func() {
				resp, err := c.Get(hs.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			for range 200 {
				get() // open the connection, size the leases
			}
			lat := make([]time.Duration, 0, b.N)
			rts, local := l.stats()
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				get()
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			rts2, local2 := l.stats()
			b.ReportMetric(float64(rts2-rts)/float64(b.N), "roundtrips/op")
			b.ReportMetric(float64(local2-local)/float64(b.N), "local/op")
		})
	}
}

// BenchmarkRefill measures one refill of the quota's lease on its own, as
// the Quota makes it: the script's call (EVALSHA on loopback, on a goroutine
// of its own, bounded by the timeout) and adding the block when the reply
// comes, one after the other.
// cpu-µs/op is the process's CPU time per refill: a lease of 20 attempts
// pays it once. Nothing takes slots here, so each refill then forgets the
// lease's blocks as taking them would: otherwise they pile up and adding one
// costs more with every refill (the figure grew with -benchtime).
func BenchmarkRefill(b *testing.B) {
	srv := startRedis(b)
	c := srv.client(b)
	// A Timeout of 1 s: the refill's cost is measured, not the bound (a
	// loaded machine made a call miss 20 ms now and then).
	q, _ := NewQuota(c, QuotaConfig{Settings: Settings{Key: testKey(b), Logger: discard, Timeout: time.Second}, Limit: PerSecond(1_000_000)})
	defer q.Close()
	call := backend.Call{Script: backend.GCRA, Quota: q.keys,
		GCRA: backend.GCRAArgs{Inc: 20, MaxWait: -1, Member: q.member, MemberTTL: int64(memberTTL / time.Millisecond)}}
	landed := make(chan struct{}, 1)
	refill := func() {
		q.mu.Lock()
		q.inflight += 20
		q.refills++
		q.mu.Unlock()
		send := q.g.now()
		q.g.send(call, func(r backend.Reply, err error) {
			q.refilled(20, 1, sent{at: send}, r.GCRA, err, &lateCall{})
			landed <- struct{}{}
		})
		<-landed
		q.mu.Lock()
		q.blocks = q.blocks[:0] // spent, as a steady lease's are
		q.mu.Unlock()
	}
	refill() // load the script, open the connection
	cpu := testkit.CPUTime(b)
	b.ResetTimer()
	for range b.N {
		refill()
	}
	b.StopTimer()
	b.ReportMetric(float64((testkit.CPUTime(b)-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	if s := q.Stats(); s.Errors != 0 || s.Refills != int64(b.N)+1 {
		b.Fatalf("%+v", s)
	}
}
