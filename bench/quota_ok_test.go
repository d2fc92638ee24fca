package bench

import (
	"context"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/redistest"
)

// TestQuotaPeers checks that BenchmarkFleetQuota measures what it says:
// each library paces at its quota (none admits faster), and the commands
// Redis ran are counted from INFO as one redis_rate decision makes them
// (EVALSHA, TIME, GET, SET).
func TestQuotaPeers(t *testing.T) {
	srv := redistest.Start(t)
	stats := newClient(t, srv)
	for _, p := range quotaPeers {
		t.Run(p.name, func(t *testing.T) {
			admit, _ := p.make(t, srv, 50)
			if err := admit(context.Background()); err != nil {
				t.Fatal(err)
			}
			begin := time.Now()
			if err := admitN(admit, 25); err != nil {
				t.Fatal(err)
			}
			// 25 slots of 20 ms after the first: at least 24 × 20 ms,
			// less the Slack our quota allows (2 % of the period).
			if d := time.Since(begin); d < 24*20*time.Millisecond-20*time.Millisecond {
				t.Errorf("25 requests admitted in %v at 50/s", d)
			}
		})
	}
	admit, _ := newRedisRate(t, srv, 1_000_000)
	admit(context.Background()) // loads the script
	before := readRedisStats(t, stats)
	if err := admit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := readRedisStats(t, stats).commands - before.commands; n != 4 {
		t.Errorf("one redis_rate decision counted as %d commands, want 4 (EVALSHA, TIME, GET, SET)", n)
	}
}

// TestParseRedisStats checks what the benchmark reads of INFO: the calls of
// every command but INFO, the CPU time, and the scripts' time from the usec
// of EVAL and EVALSHA only (the commands they call have their own lines,
// inside that time).
func TestParseRedisStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=200,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=1,usec=50,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hset:calls=10,usec=30,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=700,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n" +
		"# CPU\r\nused_cpu_sys:0.250000\r\nused_cpu_user:1.500000\r\n"
	got := parseRedisStats(info)
	want := redisStats{commands: 21, cpu: 1750 * time.Millisecond, scripts: 250 * time.Microsecond}
	if got != want {
		t.Errorf("parseRedisStats = %+v, want %+v", got, want)
	}
}
