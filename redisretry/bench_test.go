package redisretry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
)

// benchLimiters returns the limiters compared, each in a policy, and a
// function that returns the Redis round trips made so far.
func benchLimiters(b *testing.B) []struct {
	name string
	p    retry.Policy
	rts  func() int64
} {
	srv := startRedis(b)
	c := srv.client(b)
	key := testKey(b)
	// A quota that never makes an attempt wait (a million per second, any
	// burst): what is measured is its cost, not its pacing.
	free := Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}
	q, _ := NewQuota(c, QuotaConfig{Key: key + ":q", Limit: free, Logger: discard})
	bu, _ := NewBudget(c, BudgetConfig{Key: key + ":b", Logger: discard})
	cd, _ := NewCooldown(c, CooldownConfig{Key: key + ":c", Logger: discard})
	q2, _ := NewQuota(c, QuotaConfig{Key: key + ":q2", Limit: free, Logger: discard})
	bu2, _ := NewBudget(c, BudgetConfig{Key: key + ":b2", Logger: discard})
	cd2, _ := NewCooldown(c, CooldownConfig{Key: key + ":c2", Logger: discard})
	b.Cleanup(func() {
		for _, x := range []interface{ Close() error }{q, bu, cd, q2, bu2, cd2} {
			x.Close()
		}
	})
	zero := func() int64 { return 0 }
	return []struct {
		name string
		p    retry.Policy
		rts  func() int64
	}{
		{"none", retry.Policy{}, zero},
		{"ratiobudget", retry.Policy{Budget: retry.NewRatioBudget(retry.RatioBudgetConfig{})}, zero},
		{"tokenbucket", retry.Policy{Budget: retry.NewTokenBucket(10, 0.1)}, zero},
		{"fleet-budget", retry.Policy{Budget: bu}, func() int64 { return bu.Stats().RoundTrips }},
		{"fleet-quota", retry.Policy{Pacer: q}, func() int64 { return q.Stats().RoundTrips }},
		{"fleet-cooldown", retry.Policy{Pacer: cd}, func() int64 { return cd.Stats().RoundTrips }},
		{"fleet-all", retry.Policy{Pacer: retry.Pacers(cd2, q2), Budget: bu2}, func() int64 {
			return cd2.Stats().RoundTrips + q2.Stats().RoundTrips + bu2.Stats().RoundTrips
		}},
	}
}

// BenchmarkAttempt measures one retry.Run of a function that succeeds (one
// admitted attempt), with each limiter, from one goroutine: the time per
// attempt includes its share of the Redis round trips the leases make (a
// caller that finds the lease empty waits for one).
func BenchmarkAttempt(b *testing.B) {
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	for _, l := range benchLimiters(b) {
		b.Run("lib="+l.name, func(b *testing.B) {
			before := l.rts()
			for range b.N {
				if err := retry.Run(ctx, l.p, fn); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(l.rts()-before)/float64(b.N), "roundtrips/op")
		})
	}
}

// BenchmarkGET measures a loopback GET through httpretry with each limiter,
// one at a time, and reports the median and 99th percentile latency.
func BenchmarkGET(b *testing.B) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"candidates":[{"content":{"parts":[{"text":"ok"}]}}]}`)
	}))
	defer hs.Close()
	for _, l := range benchLimiters(b) {
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
			get() // open the connection
			lat := make([]time.Duration, 0, b.N)
			before := l.rts()
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
			b.ReportMetric(float64(l.rts()-before)/float64(b.N), "roundtrips/op")
		})
	}
}
