package redisretry

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
)

// err429 is a 429 as httpretry reports it.
var err429 = retry.After(&httpretry.AttemptError{Method: "POST", URL: "https://example.com/v1", Status: 429, Class: httpretry.ClassStatus}, time.Second)

func TestAutoQuotaConfigValidate(t *testing.T) {
	ok := AutoQuotaConfig{Settings: Settings{Key: "k"}}
	for _, tc := range []struct {
		name string
		c    AutoQuotaConfig
		want string // in the error; "" for none
	}{
		{"defaults", ok, ""},
		{"a ceiling and a floor", AutoQuotaConfig{Settings: Settings{Key: "k"}, Ceiling: PerSecond(100), Floor: PerMinute(60)}, ""},
		{"no key", AutoQuotaConfig{}, "AutoQuotaConfig.Key"},
		{"zero ceiling rate", AutoQuotaConfig{Settings: Settings{Key: "k"}, Ceiling: Limit{Period: time.Second}}, "AutoQuotaConfig.Ceiling.Limit.Rate = 0"},
		{"negative floor", AutoQuotaConfig{Settings: Settings{Key: "k"}, Floor: Limit{Rate: -1, Period: time.Second}}, "AutoQuotaConfig.Floor.Limit.Rate = -1"},
		{"ceiling above a million a second", AutoQuotaConfig{Settings: Settings{Key: "k"}, Ceiling: PerSecond(2_000_000)}, "AutoQuotaConfig.Ceiling = 2000000/1s"},
		{"floor below one an hour", AutoQuotaConfig{Settings: Settings{Key: "k"}, Floor: Limit{Rate: 1, Period: 2 * time.Hour}}, "AutoQuotaConfig.Floor = 1/2h0m0s"},
		{"a burst", AutoQuotaConfig{Settings: Settings{Key: "k"}, Ceiling: Limit{Rate: 10, Period: time.Second, Burst: 5}}, "AutoQuotaConfig.Ceiling = 10/1s, burst 5"},
		{"ceiling below the floor", AutoQuotaConfig{Settings: Settings{Key: "k"}, Ceiling: PerSecond(5), Floor: PerSecond(10)}, "AutoQuotaConfig.Ceiling = 5/1s: must not be below the Floor (10/1s)"},
		{"ceiling below the default floor", AutoQuotaConfig{Settings: Settings{Key: "k"}, Ceiling: PerMinute(30)}, "AutoQuotaConfig.Ceiling = 30/1m0s: must not be below the Floor (1/1s)"},
		{"NaN beta", AutoQuotaConfig{Settings: Settings{Key: "k"}, Beta: math.NaN()}, "AutoQuotaConfig.Beta = NaN"},
		{"beta 1", AutoQuotaConfig{Settings: Settings{Key: "k"}, Beta: 1}, "AutoQuotaConfig.Beta = 1"},
		{"negative beta", AutoQuotaConfig{Settings: Settings{Key: "k"}, Beta: -0.5}, "AutoQuotaConfig.Beta = -0.5"},
		{"negative recovery", AutoQuotaConfig{Settings: Settings{Key: "k"}, Recovery: -time.Second}, "AutoQuotaConfig.Recovery = -1s"},
		{"tiny recovery", AutoQuotaConfig{Settings: Settings{Key: "k"}, Recovery: time.Millisecond}, "AutoQuotaConfig.Recovery = 1ms"},
		{"negative sync", AutoQuotaConfig{Settings: Settings{Key: "k"}, Sync: -1}, "AutoQuotaConfig.Sync = -1ns"},
		{"negative max wait", AutoQuotaConfig{Settings: Settings{Key: "k"}, MaxWait: -time.Second}, "AutoQuotaConfig.MaxWait = -1s"},
		{"slack over a second", AutoQuotaConfig{Settings: Settings{Key: "k"}, Slack: 2 * time.Second}, "AutoQuotaConfig.Slack = 2s"},
		{"negative lease", AutoQuotaConfig{Settings: Settings{Key: "k"}, Lease: -1}, "AutoQuotaConfig.Lease = -1"},
		{"negative fleet", AutoQuotaConfig{Settings: Settings{Key: "k"}, FleetSize: -2}, "AutoQuotaConfig.FleetSize = -2"},
		{"negative timeout", AutoQuotaConfig{Settings: Settings{Key: "k", Timeout: -time.Millisecond}}, "AutoQuotaConfig.Timeout = -1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want an error with %q", err, tc.want)
			}
			if tc.want != "" {
				if _, err := newAutoQuota(newMem(), tc.c); err == nil {
					t.Fatal("newAutoQuota accepted an invalid config")
				}
			}
		})
	}
}

func TestCongested(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("429"), false},
		{err429, true},
		{&httpretry.AttemptError{Status: 503, Class: httpretry.ClassStatus}, false},
		{&retry.Error{Reason: retry.ReasonAttempts, Last: err429}, true},
		{httpCode(429), true},
		{httpCode(500), false},
	} {
		if got := Congested(tc.err); got != tc.want {
			t.Errorf("Congested(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

type httpCode int

func (h httpCode) Error() string { return "status" }
func (h httpCode) HTTPCode() int { return int(h) }

// fleetOf returns n AutoQuotas on one in-memory Redis with c.
func fleetOf(t *testing.T, m *memBackend, n int, c AutoQuotaConfig) []*AutoQuota {
	t.Helper()
	var fleet []*AutoQuota
	for range n {
		a, err := newAutoQuota(m, c)
		if err != nil {
			t.Fatal(err)
		}
		fleet = append(fleet, a)
	}
	return fleet
}

// reserve reserves an attempt on a and waits (virtual time) for its slot.
func reserve(t *testing.T, a *AutoQuota) time.Time {
	t.Helper()
	s, err := a.Reserve(context.Background(), time.Now(), time.Time{})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	time.Sleep(time.Until(s))
	return s
}

// attempt reserves an attempt on a and reports how it ended.
func attempt(t *testing.T, a *AutoQuota, outcome error) time.Time {
	t.Helper()
	s := reserve(t, a)
	a.Record(outcome)
	return s
}

// epochOf returns the number of cuts of the learnt rate at key in m, once
// the goroutines of the bubble have run.
func epochOf(m *memBackend, key string) int64 {
	synctest.Wait()
	st, _ := m.store.RateOf(key, time.Now())
	return st.Epoch
}

// closeAll closes the fleet's AutoQuotas.
func closeAll(fleet []*AutoQuota) {
	for _, a := range fleet {
		a.Close()
	}
}

// The 429s of attempts paced at one rate cut it once for the whole fleet,
// however many processes saw them; an attempt paced at the cut rate that
// meets a 429 cuts it again.
func TestAutoQuotaCutsOncePerEpoch(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		m := newMem()
		ev := newEvents()
		c := AutoQuotaConfig{Settings: Settings{Key: "fleet", Observer: ev.Record, Logger: slog.New(&logCounter{})}, Ceiling: PerSecond(100)}
		fleet := fleetOf(t, m, 3, c)
		// Every process paces an attempt at the ceiling, then all three
		// meet a 429.
		for _, a := range fleet {
			reserve(t, a)
		}
		for _, a := range fleet {
			a.Record(err429)
		}
		if e := epochOf(m, "{fleet}:rate"); e != 1 {
			t.Fatalf("after three 429s of one epoch: epoch %d, want one cut", e)
		}
		time.Sleep(DefaultAutoSync) // the rate they know is stale: the next attempt reads it
		for _, a := range fleet {
			attempt(t, a, nil)
			if got := a.Rate(); got != 80 {
				t.Fatalf("rate %v, want 80 (100 × 0.8)", got)
			}
		}
		// An attempt paced at 80 meets a 429: a second cut.
		attempt(t, fleet[0], err429)
		if e := epochOf(m, "{fleet}:rate"); e != 2 {
			t.Fatalf("epoch %d, want 2", e)
		}
		// 80 grown for the ~100 ms since the cut (the calls of that time
		// said the rate was used), × 0.8.
		if got := fleet[0].Rate(); got < 64 || got > 67 {
			t.Fatalf("rate %v, want 64 to 67 (80, grown a little while used, × 0.8)", got)
		}
		if n := ev.Count(EventRate); n < 2 {
			t.Fatalf("%d rate events, want one per cut at least", n)
		}
		closeAll(fleet)
	})
}

// Attempts end in any order: a 429 of an attempt paced before a cut does not
// cut again, though an attempt paced after the cut ended first; a 429 of
// one paced after it does.
func TestAutoQuotaOutOfOrder(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		m := newMem()
		c := AutoQuotaConfig{Settings: Settings{Key: "order", Logger: slog.New(&logCounter{})}, Ceiling: PerSecond(100), MaxWait: time.Minute}
		fleet := fleetOf(t, m, 2, c)
		p, q := fleet[0], fleet[1]
		for _, step := range []struct {
			what string
			do   func()
			want int64 // the epoch after it
		}{
			{"A, paced at the ceiling (epoch 0); the other process's 429", func() {
				reserve(t, p)
				attempt(t, q, err429)
			}, 1},
			{"B, paced at the cut rate (epoch 1), ends first; then A's 429, paced before the cut: no cut", func() {
				time.Sleep(DefaultAutoSync)
				reserve(t, p)
				p.Record(nil)
				p.Record(err429)
			}, 1},
			{"C's 429, paced at the cut rate: a cut", func() { attempt(t, p, err429) }, 2},
			{"a Record with no attempt reserved: not reported", func() {
				time.Sleep(DefaultAutoSync)
				attempt(t, p, nil)
				p.Record(err429)
			}, 2},
		} {
			step.do()
			if e := epochOf(m, "{order}:rate"); e != step.want {
				t.Fatalf("%s: epoch %d, want %d", step.what, e, step.want)
			}
		}
		closeAll(fleet)
	})
}

// Every process paces on one schedule at the learnt rate.
func TestAutoQuotaPacesTheFleetAtTheLearntRate(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		m := newMem()
		fleet := fleetOf(t, m, 2, AutoQuotaConfig{Settings: Settings{Key: "pace", Logger: slog.New(&logCounter{})}, Ceiling: PerSecond(50), MaxWait: time.Minute})
		start := time.Now()
		var last time.Time
		const n = 100
		done := make(chan time.Time)
		for _, a := range fleet { // two processes, 50 attempts each, at once
			go func() {
				var last time.Time
				for range n / 2 {
					last = later(last, attempt(t, a, nil))
				}
				done <- last
			}()
		}
		last = later(<-done, <-done)
		// 100 attempts at 50 a second: the last starts 1.98 s after the
		// first, as with a Quota (TestQuotaAlternatingLosesNoSlot): no
		// part of the schedule is lost, though the processes alternate
		// slot by slot with no latency and read the rate every Sync.
		if span := last.Sub(start); span != 1980*time.Millisecond {
			t.Fatalf("100 attempts of two processes span %v, want 1.98s (50 a second, no slot lost)", span)
		}
		closeAll(fleet)
	})
}

// MaxWait: an attempt whose slot is further away is refused at once.
func TestAutoQuotaSaturated(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		a := fleetOf(t, newMem(), 1, AutoQuotaConfig{Settings: Settings{Key: "sat", Logger: slog.New(&logCounter{})}, Ceiling: PerSecond(10), MaxWait: 250 * time.Millisecond})[0]
		var refused int
		for range 10 {
			if _, err := a.Reserve(context.Background(), time.Now(), time.Time{}); err != nil {
				if !errors.Is(err, ErrSaturated) || errors.Is(err, retry.ErrPastDeadline) {
					t.Fatalf("err %v, want ErrSaturated (and not ErrPastDeadline)", err)
				}
				refused++
			}
		}
		// 10 a second: the slots at 0, 100 and 200 ms are within 250 ms.
		if refused != 7 {
			t.Fatalf("%d refused, want 7", refused)
		}
		a.Close()
	})
}

// Without Redis the process learns on its own: its 429s cut its rate
// (once per epoch), never below the floor; it grows back while used.
func TestAutoQuotaWithoutRedis(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		m := newMem()
		logs := &logCounter{}
		a := fleetOf(t, m, 1, AutoQuotaConfig{Settings: Settings{Key: "down", Logger: slog.New(logs)}, Ceiling: PerSecond(100), Floor: PerSecond(20), MaxWait: time.Minute})[0]
		attempt(t, a, nil)
		m.setFail(errors.New("connection refused"))
		time.Sleep(DefaultAutoSync)
		attempt(t, a, nil) // the read fails: the AutoQuota falls back
		if a.State() != StateFallback {
			t.Fatalf("state %v, want fallback", a.State())
		}
		for i := range 12 {
			attempt(t, a, err429)
			want := max(100*math.Pow(0.8, float64(i+1)), 20)
			if got := a.Rate(); math.Abs(got-want) > 0.01 {
				t.Fatalf("after %d cuts: rate %v, want %v", i+1, got, want)
			}
		}
		// Used (attempts wait for the schedule) for a while: it grows.
		before := a.Rate()
		for range 50 {
			attempt(t, a, nil)
		}
		if a.Rate() <= before {
			t.Fatalf("rate %v after 50 attempts held back, want above %v", a.Rate(), before)
		}
		var changed int
		for _, l := range logs.lines() {
			if strings.Contains(l, "learnt rate changed") {
				changed++
			}
		}
		if changed == 0 {
			t.Fatal("no log line for a change of more than 20 %")
		}
		m.setFail(nil)
		a.Close()
	})
}

// A fleet of short-lived processes (a command run in a loop: one attempt
// each, then Close) counts what it sends and that the rate holds it back:
// each process reports at Close. Without it the fleet's measure stays empty
// and the rate never grows while used (a cut then takes it to the measured
// send rate, the Floor: retry http --quota auto in loops got 16 % of the
// capacity).
func TestAutoQuotaShortLivedProcessesReport(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		m := newMem()
		c := AutoQuotaConfig{Settings: Settings{Key: "short", Logger: slog.New(&logCounter{})}, Ceiling: PerSecond(10)}
		start := time.Now()
		var wg sync.WaitGroup
		admitted := 0
		var mu sync.Mutex
		// Two processes every 100 ms, 20/s against a rate of 10/s, for 3 s:
		// each makes one attempt (or is refused, saturated) and exits.
		for time.Since(start) < 3*time.Second {
			for range 2 {
				wg.Go(func() {
					a, err := newAutoQuota(m, c)
					if err != nil {
						t.Error(err)
						return
					}
					defer a.Close()
					now := time.Now()
					s, err := a.Reserve(context.Background(), now, time.Time{})
					if errors.Is(err, ErrSaturated) {
						return
					}
					if err != nil {
						t.Errorf("Reserve: %v", err)
						return
					}
					time.Sleep(s.Sub(now))
					a.Record(nil)
					mu.Lock()
					admitted++
					mu.Unlock()
				})
			}
			time.Sleep(100 * time.Millisecond)
		}
		wg.Wait()
		st, ok := m.store.RateOf("{short}:rate", time.Now())
		if !ok {
			t.Fatal("no rate state")
		}
		t.Logf("%d admitted; state %+v", admitted, st)
		if admitted < 25 || admitted > 32 {
			t.Errorf("%d attempts admitted in 3 s at 10/s, want about 30", admitted)
		}
		if st.Meas < 8e6 || st.Meas > 12e6 {
			t.Errorf("the fleet measured %d µreq/s, want about 10/s (what the processes sent)", st.Meas)
		}
		if st.Grown < int64(DefaultAutoRecovery/time.Microsecond)+2e6 {
			t.Errorf("grown %d µs, want the 3 s the rate held the processes back counted (from %d)", st.Grown, DefaultAutoRecovery/time.Microsecond)
		}
	})
}

// A cut from the fleet's measured send rate (the rate was far above what
// the fleet sends: a cold start, a quiet fleet) holds the next cut for the
// 429's retry hint: the 429s of that time come from a server still full
// of what was sent before, not from the cut rate. A 429 after the hint
// cuts again, from the same process (its held report did not use up its
// one report of the epoch).
func TestAutoQuotaHoldsACutFromTheMeasure(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		m := newMem()
		a := fleetOf(t, m, 1, AutoQuotaConfig{Settings: Settings{Key: "hold", Logger: slog.New(&logCounter{})}, Ceiling: PerSecond(1000)})[0]
		// 10 a second for 2.5 s, far below the rate: the fleet measures it.
		for range 25 {
			attempt(t, a, nil)
			time.Sleep(100 * time.Millisecond)
		}
		attempt(t, a, err429) // its hint: 1 s
		synctest.Wait()
		st, _ := m.store.RateOf("{hold}:rate", time.Now())
		if st.Epoch != 1 || a.Rate() < 7 || a.Rate() > 9 {
			t.Fatalf("epoch %d, rate %v: want one cut from the measured 10/s (× 0.8)", st.Epoch, a.Rate())
		}
		for range 3 { // 429s within the hint: held
			time.Sleep(200 * time.Millisecond)
			attempt(t, a, err429)
			synctest.Wait()
		}
		if st, _ := m.store.RateOf("{hold}:rate", time.Now()); st.Epoch != 1 {
			t.Fatalf("epoch %d after 429s within the hint, want 1 (held)", st.Epoch)
		}
		time.Sleep(500 * time.Millisecond) // past the hint
		attempt(t, a, err429)
		synctest.Wait()
		if st, _ := m.store.RateOf("{hold}:rate", time.Now()); st.Epoch != 2 {
			t.Fatalf("epoch %d after a 429 past the hint, want 2", st.Epoch)
		}
		a.Close()
	})
}

// A fleet far above the capacity (hundreds of processes started at once:
// the last second's attempts answered 429 as often as served) is not held
// after a cut from its measured send rate when the cut rate stays above
// twice what was served: the next 429 cuts again at once. The processes
// report what ended, served or rejected, with their calls.
func TestAutoQuotaDoesNotHoldAFloodedFleet(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		m := newMem()
		fleet := fleetOf(t, m, 13, AutoQuotaConfig{Settings: Settings{Key: "flood", Logger: slog.New(&logCounter{})}, Ceiling: PerSecond(1000)})
		// In one second: 13 attempts paced at the ceiling, 3 served and
		// 10 answered 429. The first 429 cuts (from the rate: nothing
		// measured yet), the others were paced before it and do not.
		for _, a := range fleet {
			reserve(t, a)
		}
		for i, a := range fleet {
			if i < 3 {
				a.Record(nil)
			} else {
				a.Record(err429)
			}
			synctest.Wait()
		}
		if e := epochOf(m, "{flood}:rate"); e != 1 {
			t.Fatalf("epoch %d after a burst of 429s paced at the ceiling, want 1 (one cut)", e)
		}
		for _, a := range fleet[:3] { // their served attempts reach the state
			a.Close()
		}
		time.Sleep(1100 * time.Millisecond)
		// A 429 of the new epoch (its read first ends the window: 3
		// served, 10 rejected, flooded): a cut from the measure (13 in
		// 1.1 s, far below 800/s), to ~9.5/s, above twice the 2.7/s
		// served: not held. The next 429, within the hint, cuts again.
		b := fleet[3]
		attempt(t, b, err429)
		if e := epochOf(m, "{flood}:rate"); e != 2 {
			t.Fatalf("epoch %d, want 2 (a cut from the measure)", e)
		}
		if st, _ := m.store.RateOf("{flood}:rate", time.Now()); st.OK < 2e6 || st.OK > 3e6 || st.Hold != 0 {
			t.Fatalf("state %+v: want the window's served rate kept (3 in 1.1 s: flooded), no hold", st)
		}
		if r := b.Rate(); r < 9 || r > 10 {
			t.Fatalf("rate %v after the cut, want 0.8 × the 11.8/s measured", r)
		}
		time.Sleep(200 * time.Millisecond)
		attempt(t, fleet[4], err429)
		if e := epochOf(m, "{flood}:rate"); e != 3 {
			t.Fatalf("epoch %d after a 429 within the hint, want 3: a flooded fleet is not held", e)
		}
		for _, a := range fleet[3:] {
			a.Close()
		}
	})
}
