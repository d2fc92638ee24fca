package redisretry

import (
	"context"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/backoffkit/retry/internal/fleetmodel"
	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// The simulator ("retry sim fleet", package sim in the root module, which
// cannot import this module) models the scripts with its own copy,
// internal/fleetmodel. These tests hold that copy to the scripts, on a real
// server and the shared tables of model_test.go, and to this package's
// models on random inputs.

func TestScriptsMatchSimulatorModels(t *testing.T) {
	srv := startRedis(t)
	c := srv.client(t)
	be := scriptRunner{c}
	ctx := context.Background()

	for _, tc := range gcraCases {
		t.Run("gcra/"+tc.name, func(t *testing.T) {
			keys := backend.NewQuotaKeys(testKey(t))
			var tat, at int64
			if !tc.noKey {
				now := serverMicros(t, c)
				tat, at = now+int64(tc.tat/time.Microsecond), now+int64(tc.back/time.Microsecond)
				if err := c.HSet(ctx, keys.TAT, "tat", tat, "at", at).Err(); err != nil {
					t.Fatal(err)
				}
				c.Expire(ctx, keys.TAT, 2*time.Hour)
			}
			r, err := be.gcra(ctx, keys, backend.GCRAArgs{Inc: us(tc.inc), Tol: us(tc.tol), MaxWait: usWait(tc.maxWait), Member: "m", MemberTTL: 30000})
			if err != nil {
				t.Fatal(err)
			}
			var tatTime time.Time // the TAT as of now: the script moves it back with the server's clock
			if !tc.noKey {
				tatTime = time.UnixMicro(tat - max(at-r.Now, 0))
			}
			got := fleetmodel.GCRAResult{OK: r.OK, Wait: time.Duration(r.Wait) * time.Microsecond, From: time.UnixMicro(r.From), To: time.UnixMicro(r.To)}
			if m := fleetmodel.GCRA(tatTime, time.UnixMicro(r.Now), tc.inc, tc.tol, tc.maxWait); got != m {
				t.Fatalf("script %+v, simulator's model %+v", got, m)
			}
		})
	}

	const slot = 500 * time.Millisecond
	for _, tc := range budgetCases {
		t.Run("budget/"+tc.name, func(t *testing.T) {
			keys := backend.NewBudgetKeys(testKey(t))
			epoch := backend.FloorDiv(serverMicros(t, c)/1000, int64(slot/time.Millisecond))
			w := &fleetmodel.BudgetWindow{Slot: slot, Slots: budgetSlots, Ratio: tc.ratio, Floor: tc.floor,
				Requests: map[int64]int64{}, Retries: map[int64]int64{}}
			for _, kv := range []struct {
				key      string
				from, to map[int64]int64
			}{{keys.Requests, tc.requests, w.Requests}, {keys.Retries, tc.retries, w.Retries}} {
				for off, n := range kv.from {
					kv.to[epoch+off] = n
					c.HSet(ctx, kv.key, strconv.FormatInt(epoch+off, 10), n)
				}
			}
			call := tc.call
			call.GiveBackEpoch += epoch
			r, err := be.budget(ctx, keys, backend.BudgetArgs{SlotMS: int64(slot / time.Millisecond), Slots: budgetSlots, Ratio: tc.ratio,
				Floor: tc.floor, Add: call.Add, Want: call.Want, Back: call.GiveBack, BackEpoch: call.GiveBackEpoch})
			if err != nil {
				t.Fatal(err)
			}
			m := w.Apply(time.UnixMilli(r.Now), fleetmodel.BudgetCall(call))
			if (fleetmodel.BudgetReply{Granted: r.Granted, Epoch: r.Epoch, Requests: r.Requests, Retries: r.Retries}) != m {
				t.Fatalf("script %+v, simulator's model %+v", r, m)
			}
			for _, kv := range []struct {
				key string
				m   map[int64]int64
			}{{keys.Requests, w.Requests}, {keys.Retries, w.Retries}} {
				got := map[int64]int64{}
				for f, v := range c.HGetAll(ctx, kv.key).Val() {
					e, _ := strconv.ParseInt(f, 10, 64)
					got[e], _ = strconv.ParseInt(v, 10, 64)
				}
				if !maps.Equal(got, kv.m) {
					t.Fatalf("%s holds %v, the simulator's model %v", kv.key, got, kv.m)
				}
			}
		})
	}

	for _, tc := range cooldownCases {
		t.Run("cooldown/"+tc.name, func(t *testing.T) {
			key := backend.CooldownKey(testKey(t))
			var until time.Time
			if !tc.noKey {
				ms := serverMicros(t, c)/1000 + int64(tc.until/time.Millisecond)
				until = time.UnixMilli(ms)
				c.Set(ctx, key, ms, time.Hour)
			}
			r, err := be.cooldown(ctx, key, int64(tc.hint/time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			now := time.UnixMilli(r.Now)
			m := fleetmodel.CooldownUntil(until, now, tc.hint)
			var want int64
			if m.After(now) {
				want = m.Sub(now).Milliseconds()
			}
			if r.Remaining != want {
				t.Fatalf("script: %d ms left, simulator's model: %d ms", r.Remaining, want)
			}
		})
	}
}

// TestSimulatorModelsMatchModels compares the simulator's models with this
// package's on random states, times and arguments, edge values included.
func TestSimulatorModelsMatchModels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	dur := func() time.Duration {
		switch rng.IntN(6) {
		case 0:
			return 0
		case 1:
			return -time.Duration(rng.Int64N(int64(time.Hour)))
		case 2:
			return time.Duration(rng.Int64N(1000)) // below a microsecond
		}
		return time.Duration(rng.Int64N(int64(2 * time.Hour)))
	}
	at := func() time.Time {
		if rng.IntN(8) == 0 {
			return time.Time{}
		}
		return base.Add(dur())
	}
	for range 20000 {
		tat, now, inc, tol, maxWait := at(), base.Add(dur()), dur(), dur(), dur()
		if rng.IntN(3) == 0 {
			maxWait = -1
		}
		a, b := backend.GCRAAt(tat, now, inc, tol, maxWait), fleetmodel.GCRA(tat, now, inc, tol, maxWait)
		if fleetmodel.GCRAResult(a) != b {
			t.Fatalf("GCRA(%v, %v, %v, %v, %v): %+v, simulator's %+v", tat, now, inc, tol, maxWait, a, b)
		}
		until, hint := at(), dur()
		if x, y := backend.CooldownUntil(until, now, hint), fleetmodel.CooldownUntil(until, now, hint); !x.Equal(y) {
			t.Fatalf("CooldownUntil(%v, %v, %v): %v, simulator's %v", until, now, hint, x, y)
		}
		l := Limit{Rate: 1 + rng.Int64N(1_000_000), Period: time.Millisecond + max(dur(), 0)} // valid limits only
		if rng.IntN(50) == 0 {
			l.Rate = 1<<63 - 1
		}
		units := rng.Int64N(100) - 5
		if rng.IntN(50) == 0 {
			units = 1<<63 - 1
		}
		if x, y := l.Interval(units), fleetmodel.Interval(l.Rate, l.Period, units); x != y {
			t.Fatalf("%+v.Interval(%d) = %v, simulator's %v", l, units, x, y)
		}
	}

	// The budget window: one random sequence of calls on both models.
	for _, ratio := range []float64{0.2, 0.15, 1} {
		c := (BudgetConfig{Key: "k", Ratio: ratio}).resolve()
		a := &backend.BudgetWindow{Slot: c.slot(), Slots: budgetSlots, Ratio: c.Ratio, Floor: c.floor()}
		b := &fleetmodel.BudgetWindow{Slot: a.Slot, Slots: a.Slots, Ratio: a.Ratio, Floor: a.Floor}
		now := base
		for i := range 5000 {
			now = now.Add(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
			call := backend.BudgetCall{Add: rng.Int64N(20), Want: rng.Int64N(15)}
			if rng.IntN(5) == 0 {
				call.GiveBack = rng.Int64N(10)
				call.GiveBackEpoch = now.UnixMilli()/int64(a.Slot/time.Millisecond) - rng.Int64N(25)
			}
			x, y := a.Apply(now, call), b.Apply(now, fleetmodel.BudgetCall(call))
			if (fleetmodel.BudgetReply{Granted: x.Granted, Epoch: x.Epoch, Requests: x.Requests, Retries: x.Retries}) != y {
				t.Fatalf("call %d %+v at %v: %+v, simulator's %+v", i, call, now, x, y)
			}
		}
	}
}
