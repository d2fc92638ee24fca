package redisretry

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/internal/testkit"
	"github.com/backoffkit/retry/redisretry/internal/backend"
)

func TestBudgetFleetRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Three processes share a budget of 20 % without a floor. Process 0
		// makes every request; processes 1 and 2 only retry: a fleet budget
		// lets them use the fleet's allowance, and the fleet as a whole never
		// retries more than 20 % of its requests.
		leaks := noLeaks(t)
		mem := newMem()
		cfg := BudgetConfig{Settings: Settings{Key: "k", Logger: discard}, MinPerSecond: -1}
		var bs []*Budget
		for range 3 {
			b, err := newBudget(mem, cfg)
			if err != nil {
				t.Fatal(err)
			}
			bs = append(bs, b)
		}
		defer func() {
			for _, b := range bs {
				b.Close()
			}
			leaks() // flushes and refills are over
		}()
		admitted := 0
		for range 100 { // 10 s, one request per 10 ms
			for range 10 {
				bs[0].Admit(false)
				time.Sleep(10 * time.Millisecond)
			}
			for _, b := range bs[1:] {
				for range 3 {
					if b.Admit(true) {
						admitted++
					}
				}
			}
		}
		// 1000 requests in the last 10 s window: 200 retries at most (plus
		// those of requests not yet flushed, which only lower it).
		if admitted > 200 || admitted < 150 {
			t.Fatalf("%d retries admitted for 1000 fleet requests, want about 200 and never more", admitted)
		}
		// A per-process RatioBudget of processes 1 and 2 would have admitted
		// none of them: they made no requests.
		local := retry.NewRatioBudget(retry.RatioBudgetConfig{MinPerSecond: -1})
		if local.Admit(true) {
			t.Fatal("a local budget without requests admitted a retry")
		}
		var rts int64
		for _, b := range bs {
			rts += b.Stats().RoundTrips
		}
		t.Logf("%d retries admitted, %d round trips for 1000 requests and 600 retry attempts", admitted, rts)
		if rts > 200 {
			t.Fatalf("%d round trips: the budget should batch requests and lease permits", rts)
		}
	})
}

func TestBudgetFirstAttemptsNeverRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		mem.setFail(errTestDown)
		for _, mode := range []FailureMode{FailLocal, FailOpen, FailClosed} {
			b, _ := newBudget(mem, BudgetConfig{Settings: Settings{Key: "k", OnFailure: mode, Logger: discard}})
			for range 1000 {
				if !b.Admit(false) {
					t.Fatalf("%v: a first attempt was refused", mode)
				}
			}
			b.Close()
		}
	})
}

func TestBudgetFailureModes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			mode FailureMode
			want int // retries admitted of 50 with 100 requests made
		}{
			{FailLocal, 20}, // the local RatioBudget: 20 % of 100, no floor
			{FailOpen, 50},
			{FailClosed, 0},
		} {
			mem := newMem()
			mem.setFail(errTestDown)
			b, _ := newBudget(mem, BudgetConfig{Settings: Settings{Key: "k", OnFailure: tc.mode, Logger: discard}, MinPerSecond: -1})
			for range 100 {
				b.Admit(false)
			}
			got := 0
			for range 50 {
				if b.Admit(true) {
					got++
				}
			}
			if got != tc.want || b.State() != StateFallback {
				t.Errorf("%v: %d retries admitted in state %v, want %d in fallback", tc.mode, got, b.State(), tc.want)
			}
			b.Close()
		}
	})
}

func TestBudgetGivesBackUnusedPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		// A floor of 10 per window of 1 s: 10 permits for the fleet.
		cfg := BudgetConfig{Settings: Settings{Key: "k", Logger: discard}, Window: time.Second, MinPerSecond: 10, Lease: 8}
		a, _ := newBudget(mem, cfg)
		b, _ := newBudget(mem, cfg)
		defer b.Close()
		for range 4 { // a's lease grows to 8
			if !a.Admit(true) {
				t.Fatal("refused")
			}
			time.Sleep(60 * time.Millisecond) // the lease expires: a slot is 50 ms
		}
		a.Admit(true)
		// a holds a lease of unused permits; Close gives them back.
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		// 10 in the window, minus what a used (5).
		if n := retriesLeft(b); n != 5 {
			t.Fatalf("b got %d permits after a closed, want the 5 a did not use", n)
		}
	})
}

func TestBudgetCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A floor of 10 retries per window for the fleet (no requests). Process
		// a is admitted 10 retries that are never made (a pacer refused
		// them): Cancel gives the permits back, so process b can still use
		// the fleet's 10.
		mem := newMem()
		cfg := BudgetConfig{Settings: Settings{Key: "k", Logger: discard}, Window: 10 * time.Second, MinPerSecond: 1}
		a, _ := newBudget(mem, cfg)
		b, _ := newBudget(mem, cfg)
		defer b.Close()
		for i := range 10 {
			if !a.Admit(true) {
				t.Fatalf("retry %d refused", i)
			}
			a.Cancel(true)
		}
		a.Close() // gives its lease back
		if n := retriesLeft(b); n != 10 {
			t.Fatalf("b was admitted %d retries after a cancelled all of its own, want the fleet's 10", n)
		}
	})
}

func TestBudgetCancelThroughTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Each call's retry is admitted by the budget and then refused by
		// the pacer (past the deadline): the loop cancels it, so the
		// fleet's budget is not used up by retries never sent.
		mem := newMem()
		cfg := BudgetConfig{Settings: Settings{Key: "k", Logger: discard}, Window: 10 * time.Second, MinPerSecond: 1}
		bu, _ := newBudget(mem, cfg)
		p := retry.Policy{Budget: bu, Pacer: &refuseRetries{}, Jitter: retry.Zero, InitialDelay: time.Millisecond}
		for range 30 {
			retry.Run(t.Context(), p, func(context.Context) error { return errors.New("flaky") })
		}
		bu.Close()
		other, _ := newBudget(mem, cfg)
		defer other.Close()
		if n := retriesLeft(other); n != 10 {
			t.Fatalf("%d retries left for the fleet after 30 retries that were never sent, want all 10", n)
		}
	})
}

// retriesLeft admits retries on b until it refuses one, and returns how many
// it admitted.
func retriesLeft(b *Budget) int {
	n := 0
	for b.Admit(true) {
		n++
	}
	return n
}

func TestBudgetCancelFirstAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 100 requests admitted, 50 of them cancelled (never sent): the
		// fleet counts 50, so 20 % of them are 10 retries.
		mem := newMem()
		cfg := BudgetConfig{Settings: Settings{Key: "k", Logger: discard}, MinPerSecond: -1}
		a, _ := newBudget(mem, cfg)
		for range 100 {
			a.Admit(false)
		}
		for range 50 {
			a.Cancel(false)
		}
		a.Close() // flushes
		b, _ := newBudget(mem, cfg)
		defer b.Close()
		if n := retriesLeft(b); n != 10 {
			t.Fatalf("%d retries for 100 requests of which 50 were cancelled, want 10", n)
		}
	})
}

// refuseRetries is a Pacer for calls made one after the other that fail
// once: it lets every first attempt start and refuses every retry as past
// the deadline.
type refuseRetries struct{ n int }

func (p *refuseRetries) Reserve(ctx context.Context, earliest, deadline time.Time) (time.Time, error) {
	if p.n++; p.n%2 == 0 {
		return time.Time{}, retry.ErrPastDeadline
	}
	return earliest, nil
}
func (*refuseRetries) Record(error) {}

func TestBudgetRecoversWithoutRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Review finding 5: Redis fails during a retry, then is back; the
		// process makes only first attempts from then on (20 per second
		// for 10 s). The Budget must go back to Redis within two probe
		// intervals, and count its requests in the fleet's window again.
		leaks := noLeaks(t)
		mem := newMem()
		ev := newEvents()
		b, _ := newBudget(mem, BudgetConfig{Settings: Settings{Key: "k", Logger: discard, Observer: ev.Record}})
		mem.setFail(errTestDown)
		b.Admit(false)
		b.Admit(true) // the retry finds Redis down
		if b.State() != StateFallback {
			t.Fatalf("state %v after a failed retry, want fallback", b.State())
		}
		mem.setFail(nil)
		back := time.Duration(-1)
		begin := time.Now()
		for range 200 {
			time.Sleep(50 * time.Millisecond)
			b.Admit(false)
			synctest.Wait() // a probe or a flush sent lands
			if back < 0 && b.State() == StateRedis {
				back = time.Since(begin)
			}
		}
		b.Close() // flushes what is pending
		leaks()
		if back < 0 || back > 2*DefaultProbeInterval {
			t.Fatalf("back on Redis after %v of first attempts (-1: never), want within %v", back, 2*DefaultProbeInterval)
		}
		if n := ev.Count(EventRecovered); n != 1 {
			t.Errorf("%d EventRecovered, want 1", n)
		}
		requests, _ := mem.store.Budget(backend.NewBudgetKeys("k"))
		var counted int64
		for _, n := range requests {
			counted += n
		}
		// The window is 10 s: the requests of the last 10 s, less those
		// of the time before it went back.
		if counted < 100 {
			t.Fatalf("%d of the last 200 requests counted in Redis, want ≥ 100", counted)
		}
		t.Logf("back on Redis after %v; %d of 200 requests counted in the fleet's window", back, counted)
	})
}

func TestBudgetWallClockStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A clock with no monotonic reading set back 1 h: the Budget keeps
		// flushing its requests and asking Redis, instead of waiting an
		// hour for the next flush and refusing retries for an hour because
		// Redis said "exhausted" just before the step.
		clock := &wallClock{}
		mem := newMem()
		b, _ := newBudget(mem, BudgetConfig{Settings: Settings{Key: "k", Now: clock.now, Logger: discard}, MinPerSecond: -1})
		defer b.Close()
		if b.Admit(true) {
			t.Fatal("a retry admitted with no request in the window and no floor")
		}
		clock.step.Store(int64(-time.Hour))
		for range 100 {
			b.Admit(false)
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		requests, _ := mem.store.Budget(backend.NewBudgetKeys("k"))
		var counted int64
		for _, n := range requests {
			counted += n
		}
		// Flushed once per slot (500 ms): those of the last slot are
		// pending.
		if counted < 50 {
			t.Errorf("%d of 100 requests counted in Redis in the second after the step, want those of the first slot at least", counted)
		}
		if !b.Admit(true) {
			t.Errorf("a retry refused after 100 requests (20 %% of them allowed): stats %+v", b.Stats())
		}
	})
}

func TestRedisBudgetRecoversWithoutRetries(t *testing.T) {
	// Review finding 5 on a real redis-server: it is killed (or paused)
	// while the Budget makes retries, and started again (resumed); from
	// then on the process makes first attempts only. The Budget goes back
	// to Redis within two probe intervals and counts its requests there
	// again.
	for _, tc := range []struct {
		name string
		// client: for the kill, one dial and one try per call (as the
		// CLI's client): go-redis's own reconnect backoff, which dials a
		// pool whose dials failed PoolSize times once per second, is not
		// under test. For the pause, go-redis's defaults.
		client     func(t *testing.T, srv *redisServer) *redis.Client
		breakIt    func(srv *redisServer)
		fix        func(srv *redisServer)
		keepsState bool // the server keeps its data
	}{
		{"killed and started again", func(t *testing.T, srv *redisServer) *redis.Client {
			c := redis.NewClient(&redis.Options{Addr: srv.addr(), MaxRetries: -1, DialerRetries: 1, PoolSize: 1000})
			t.Cleanup(func() { c.Close() })
			return c
		}, (*redisServer).kill, (*redisServer).start, false},
		{"paused and resumed", func(t *testing.T, srv *redisServer) *redis.Client { return srv.client(t) },
			func(srv *redisServer) { srv.Pause() }, func(srv *redisServer) { srv.Resume() }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRedis(t)
			c := tc.client(t, srv)
			key := testKey(t)
			counted := func() int64 {
				h, err := c.HGetAll(context.Background(), "{"+key+"}:budget:requests").Result()
				if err != nil {
					t.Fatal(err)
				}
				var n int64
				for _, v := range h {
					k, _ := strconv.ParseInt(v, 10, 64)
					n += k
				}
				return n
			}
			logs := &logCounter{}
			// A 1 s Timeout: the outage, not a busy machine, is under test.
			b, _ := NewBudget(c, BudgetConfig{Settings: Settings{Key: key, Timeout: time.Second, Logger: slog.New(logs)}})
			defer b.Close()
			for range 10 {
				b.Admit(false)
			}
			if !b.Admit(true) || b.State() != StateRedis {
				t.Fatalf("healthy: state %v, stats %+v", b.State(), b.Stats())
			}
			tc.breakIt(srv)
			// Retries use up the permits leased before, then one asks
			// the broken server.
			for broken := time.Now(); b.State() != StateFallback; {
				if time.Since(broken) > 10*time.Second {
					t.Fatalf("retries 10s after the outage began: state %v, want fallback", b.State())
				}
				b.Admit(true)
			}
			tc.fix(srv)
			fixed := time.Now()
			for b.State() != StateRedis {
				if time.Since(fixed) > 10*time.Second {
					t.Fatalf("still in fallback 10s after Redis came back, making first attempts: %+v", b.Stats())
				}
				b.Admit(false)
				time.Sleep(5 * time.Millisecond)
			}
			back := time.Since(fixed)
			errs, before := b.Stats().Errors, counted()
			for range 100 {
				b.Admit(false)
			}
			b.Close() // counts the requests not yet flushed
			if back > 2*DefaultProbeInterval {
				t.Errorf("back on Redis %v after it came back, want within 2 probe intervals (%v)", back, 2*DefaultProbeInterval)
			}
			if s, n := b.Stats(), counted()-before; n != 100 || s.Errors != errs {
				t.Errorf("%d of the 100 requests made after it went back counted in Redis (stats %+v, %d errors before)", n, s, errs)
			}
			if tc.keepsState && before < 10 {
				t.Errorf("the 10 requests before the pause: %d counted", before)
			}
			if lines := logs.lines(); len(lines) != 2 {
				t.Errorf("log lines %q, want one down and one up", lines)
			}
			t.Logf("back on Redis %v after Redis came back", back)
		})
	}
}

func TestRedisBudgetRepairsForeignKeys(t *testing.T) {
	// Review R2: a key of another type, or fields that are not the
	// budget's, at the budget's keys (written by another program, or by
	// hand) were a permanent fallback: every call failed (WRONGTYPE, or a
	// sum that is no integer) until someone deleted the key. The script
	// deletes what is not its own, and the Budget stays on Redis.
	srv := startRedis(t)
	c := srv.client(t)
	ctx := context.Background()
	epoch := func() string {
		return strconv.FormatInt(serverMicros(t, c)/1000/500, 10) // the current slot of a 10 s window
	}
	for _, tc := range []struct {
		name  string
		spoil func(k backend.BudgetKeys) error
	}{
		{"requests is a string", func(k backend.BudgetKeys) error { return c.Set(ctx, k.Requests, "x", 0).Err() }},
		{"retries is a list", func(k backend.BudgetKeys) error { return c.RPush(ctx, k.Retries, "a", "b").Err() }},
		{"requests is a set", func(k backend.BudgetKeys) error { return c.SAdd(ctx, k.Requests, "a").Err() }},
		{"config is a hash", func(k backend.BudgetKeys) error { return c.HSet(ctx, k.Config, "a", "b").Err() }},
		{"a field that is no epoch", func(k backend.BudgetKeys) error { return c.HSet(ctx, k.Requests, "abc", 1).Err() }},
		{"a count that is no number", func(k backend.BudgetKeys) error { return c.HSet(ctx, k.Requests, epoch(), "x").Err() }},
		{"a count beyond 2^53", func(k backend.BudgetKeys) error { return c.HSet(ctx, k.Retries, epoch(), "1e300").Err() }},
		{"a negative count", func(k backend.BudgetKeys) error { return c.HSet(ctx, k.Retries, epoch(), "-5").Err() }},
		{"a fractional count", func(k backend.BudgetKeys) error { return c.HSet(ctx, k.Requests, epoch(), "1.5").Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey(t)
			keys := backend.NewBudgetKeys(key)
			if err := tc.spoil(keys); err != nil {
				t.Fatal(err)
			}
			logs := &logCounter{}
			b, _ := NewBudget(c, BudgetConfig{Settings: Settings{Key: key, Timeout: time.Second, Logger: slog.New(logs)}, MinPerSecond: -1})
			defer b.Close()
			for range 100 {
				b.Admit(false)
			}
			n := 0
			for range 30 {
				if b.Admit(true) {
					n++
				}
			}
			// 20 % of the 100 requests, counted by the first retry's round
			// trip.
			if s := b.Stats(); n != 20 || s.State != StateRedis || s.Errors != 0 {
				t.Fatalf("%d retries admitted of 30 after 100 requests, stats %+v, log %q; want 20 on Redis", n, s, logs.lines())
			}
			for _, k := range []string{keys.Requests, keys.Retries} {
				if typ := c.Type(ctx, k).Val(); typ != "hash" {
					t.Fatalf("%s is a %s after the call, want a hash", k, typ)
				}
				for f, v := range c.HGetAll(ctx, k).Val() {
					_, errF := strconv.ParseInt(f, 10, 64)
					_, errV := strconv.ParseUint(v, 10, 53)
					if errF != nil || errV != nil {
						t.Fatalf("%s still holds %q: %q", k, f, v)
					}
				}
			}
			if cfg := c.Get(ctx, keys.Config).Val(); cfg != "500/20/0.2/0" {
				t.Fatalf("%s holds %q, want this Budget's configuration", keys.Config, cfg)
			}
		})
	}
}

func TestBudgetOtherConfigLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Review R3 for the budget: two processes share a Key with other
		// windows (their slots then disagree: each deletes the other's as
		// out of its window). Each logs it once, naming both
		// configurations; a third with the same as the first says
		// nothing while the first is the last to call.
		mem := newMem()
		logs := &textLog{}
		l := slog.New(slog.NewTextHandler(logs, nil))
		a, _ := newBudget(mem, BudgetConfig{Settings: Settings{Key: "k", Logger: l}})
		b, _ := newBudget(mem, BudgetConfig{Settings: Settings{Key: "k", Logger: l}, Window: time.Minute, Ratio: 0.1, MinPerSecond: 1})
		defer a.Close()
		defer b.Close()
		for range 5 {
			a.Admit(true)
			time.Sleep(time.Second) // the leases expire: each retry asks Redis
			b.Admit(true)
			time.Sleep(time.Second)
		}
		lines := logs.lines()
		if len(lines) != 2 {
			t.Fatalf("log lines %q, want one per Budget", lines)
		}
		for _, want := range []string{"Window 10s, Ratio 0.2, MinPerSecond 10", "Window 1m0s, Ratio 0.1, MinPerSecond 1"} {
			for _, line := range lines {
				if !strings.Contains(line, want) {
					t.Errorf("log line %q does not name %q", line, want)
				}
			}
		}
		same, _ := newBudget(mem, BudgetConfig{Settings: Settings{Key: "k", Logger: l}})
		defer same.Close()
		a.Admit(true)
		same.Admit(true)
		if n := len(logs.lines()); n != 2 {
			t.Errorf("%d log lines after a process of the same configuration called, want still 2", n)
		}
	})
}

// textLog keeps the lines of a slog.TextHandler, every attribute included.
type textLog struct{ testkit.Buffer }

func (l *textLog) lines() []string {
	return strings.Split(strings.TrimSuffix(l.String(), "\n"), "\n")
}
