package redisretry

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The shared tables: each case runs on the script (a real server) and on its
// Go model, at the server's time that the script reports; every output must
// be equal. The state is set relative to the server's clock just before.

type gcraCase struct {
	name     string
	tat      time.Duration // from now; absent when noKey
	noKey    bool
	inc, tol time.Duration
	maxWait  time.Duration // -1: none
	wantOK   bool
}

var gcraCases = []gcraCase{
	{name: "empty key", noKey: true, inc: 100 * time.Millisecond, maxWait: -1, wantOK: true},
	{name: "tat in the past", tat: -time.Second, inc: 100 * time.Millisecond, maxWait: -1, wantOK: true},
	{name: "wait for the schedule", tat: 500 * time.Millisecond, inc: 100 * time.Millisecond, maxWait: -1, wantOK: true},
	{name: "burst tolerance covers it", tat: 50 * time.Millisecond, inc: 100 * time.Millisecond, tol: 400 * time.Millisecond, maxWait: -1, wantOK: true},
	{name: "burst tolerance partly", tat: 900 * time.Millisecond, inc: 100 * time.Millisecond, tol: 400 * time.Millisecond, maxWait: -1, wantOK: true},
	{name: "wait fits", tat: 300 * time.Millisecond, inc: time.Second, maxWait: 10 * time.Second, wantOK: true},
	{name: "wait past the deadline", tat: 5 * time.Second, inc: time.Second, maxWait: time.Second, wantOK: false},
	{name: "zero max wait on a free schedule", noKey: true, inc: time.Second, maxWait: 0, wantOK: false},
	{name: "probe reserves nothing", tat: 2 * time.Second, inc: 0, maxWait: -1, wantOK: true},
	{name: "large block", tat: time.Second, inc: 90 * time.Minute, maxWait: -1, wantOK: true},
}

func serverMicros(t *testing.T, c *redis.Client) int64 {
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMicro()
}

func TestGCRAScriptMatchesModel(t *testing.T) {
	srv := startRedis(t)
	c := srv.client(t)
	be := scriptBackend{c}
	for _, tc := range gcraCases {
		t.Run(tc.name, func(t *testing.T) {
			keys := newQuotaKeys(testKey(t))
			var tat int64
			if !tc.noKey {
				tat = serverMicros(t, c) + int64(tc.tat/time.Microsecond)
				if err := c.Set(context.Background(), keys.tat, strconv.FormatInt(tat, 10), time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
			}
			a := gcraArgs{inc: us(tc.inc), tol: us(tc.tol), maxWait: usWait(tc.maxWait), member: "m1", memberTTL: 30000}
			r, err := be.gcra(context.Background(), keys, a)
			if err != nil {
				t.Fatal(err)
			}
			var tatTime time.Time
			if !tc.noKey {
				tatTime = time.UnixMicro(tat)
			}
			m := GCRA(tatTime, time.UnixMicro(r.now), tc.inc, tc.tol, tc.maxWait)
			got := GCRAResult{OK: r.ok, Wait: time.Duration(r.wait) * time.Microsecond, From: time.UnixMicro(r.from), To: time.UnixMicro(r.to)}
			if got != m {
				t.Fatalf("script %+v, model %+v", got, m)
			}
			if r.ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v (%+v)", r.ok, tc.wantOK, got)
			}
			if r.members != 1 {
				t.Fatalf("members = %d, want 1", r.members)
			}
			stored, err := c.Get(context.Background(), keys.tat).Int64()
			switch {
			case r.ok && tc.inc > 0:
				if err != nil || stored != r.to {
					t.Fatalf("stored TAT %d (%v), want %d", stored, err, r.to)
				}
				if ttl := c.PTTL(context.Background(), keys.tat).Val(); ttl <= 0 {
					t.Fatalf("TAT key without expiry (PTTL %v)", ttl)
				}
			case tc.noKey:
				if err != redis.Nil {
					t.Fatalf("a refused or empty reservation wrote the key: %d %v", stored, err)
				}
			}
		})
	}
}

type budgetCase struct {
	name              string
	requests, retries map[int64]int64 // epoch offset from now -> count
	ratio, floor      float64
	call              BudgetCall // GiveBackEpoch is an offset
}

var budgetCases = []budgetCase{
	{name: "empty: the floor", ratio: 0.2, floor: 100, call: BudgetCall{Want: 10}},
	{name: "empty: no floor", ratio: 0.2, floor: 0, call: BudgetCall{Want: 10}},
	{name: "ratio of the requests", ratio: 0.2, floor: 0, requests: map[int64]int64{0: 30, -3: 20}, call: BudgetCall{Add: 50, Want: 50}},
	{name: "retries already used", ratio: 0.2, floor: 5, requests: map[int64]int64{-1: 100}, retries: map[int64]int64{-1: 18}, call: BudgetCall{Want: 10}},
	{name: "exhausted", ratio: 0.2, floor: 0, requests: map[int64]int64{-1: 100}, retries: map[int64]int64{-2: 20}, call: BudgetCall{Want: 1}},
	{name: "old slots leave the window", ratio: 0.5, floor: 0, requests: map[int64]int64{-19: 10, -20: 1000, -40: 7}, retries: map[int64]int64{-20: 500}, call: BudgetCall{Want: 100}},
	{name: "give back into its slot", ratio: 0.2, floor: 0, requests: map[int64]int64{-2: 100}, retries: map[int64]int64{-2: 20}, call: BudgetCall{GiveBack: 5, GiveBackEpoch: -2, Want: 3}},
	{name: "give back more than counted", ratio: 0.2, floor: 0, requests: map[int64]int64{-2: 100}, retries: map[int64]int64{-2: 4}, call: BudgetCall{GiveBack: 9, GiveBackEpoch: -2}},
	{name: "give back to a slot out of the window", ratio: 0.2, floor: 0, retries: map[int64]int64{-25: 4, -1: 3}, call: BudgetCall{GiveBack: 2, GiveBackEpoch: -25}},
	{name: "fractional ratio and floor", ratio: 0.15, floor: 2.5, requests: map[int64]int64{0: 7}, call: BudgetCall{Want: 4}},
	{name: "flush only", ratio: 0.2, floor: 10, call: BudgetCall{Add: 12345}},
}

func TestBudgetScriptMatchesModel(t *testing.T) {
	srv := startRedis(t)
	c := srv.client(t)
	be := scriptBackend{c}
	const slot = 500 * time.Millisecond
	for _, tc := range budgetCases {
		t.Run(tc.name, func(t *testing.T) {
			keys := newBudgetKeys(testKey(t))
			epoch := floorDiv(serverMicros(t, c)/1000, int64(slot/time.Millisecond))
			w := &BudgetWindow{Slot: slot, Slots: budgetSlots, Ratio: tc.ratio, Floor: tc.floor,
				requests: map[int64]int64{}, retries: map[int64]int64{}}
			for _, kv := range []struct {
				key string
				m   map[int64]int64
				dst map[int64]int64
			}{{keys.requests, tc.requests, w.requests}, {keys.retries, tc.retries, w.retries}} {
				for off, n := range kv.m {
					kv.dst[epoch+off] = n
					c.HSet(context.Background(), kv.key, strconv.FormatInt(epoch+off, 10), n)
				}
			}
			call := tc.call
			call.GiveBackEpoch += epoch
			r, err := be.budget(context.Background(), keys, budgetArgs{
				slotMS: int64(slot / time.Millisecond), slots: budgetSlots, ratio: tc.ratio, floor: tc.floor,
				add: call.Add, want: call.Want, back: call.GiveBack, backEpoch: call.GiveBackEpoch,
			})
			if err != nil {
				t.Fatal(err)
			}
			m := w.Apply(time.UnixMilli(r.now), call)
			if r.BudgetReply != m {
				t.Fatalf("script %+v, model %+v", r.BudgetReply, m)
			}
			for _, kv := range []struct {
				key string
				m   map[int64]int64
			}{{keys.requests, w.requests}, {keys.retries, w.retries}} {
				got := map[int64]int64{}
				for f, v := range c.HGetAll(context.Background(), kv.key).Val() {
					e, _ := strconv.ParseInt(f, 10, 64)
					got[e], _ = strconv.ParseInt(v, 10, 64)
				}
				if !maps.Equal(got, kv.m) {
					t.Fatalf("%s holds %v, the model %v", kv.key, got, kv.m)
				}
			}
		})
	}
}

type cooldownCase struct {
	name  string
	until time.Duration // from now; absent when noKey
	noKey bool
	hint  time.Duration
}

var cooldownCases = []cooldownCase{
	{name: "read nothing", noKey: true},
	{name: "publish on nothing", noKey: true, hint: 25 * time.Second},
	{name: "a later one stays", until: 50 * time.Second, hint: 5 * time.Second},
	{name: "an earlier one is raised", until: 2 * time.Second, hint: 30 * time.Second},
	{name: "read a running one", until: 10 * time.Second},
	{name: "one that ended", until: -time.Second},
	{name: "one that ended, raised", until: -time.Second, hint: time.Second},
}

func TestCooldownScriptMatchesModel(t *testing.T) {
	srv := startRedis(t)
	c := srv.client(t)
	be := scriptBackend{c}
	for _, tc := range cooldownCases {
		t.Run(tc.name, func(t *testing.T) {
			key := cooldownKey(testKey(t))
			var until time.Time
			if !tc.noKey {
				ms := serverMicros(t, c)/1000 + int64(tc.until/time.Millisecond)
				until = time.UnixMilli(ms)
				c.Set(context.Background(), key, ms, time.Hour)
			}
			r, err := be.cooldown(context.Background(), key, int64(tc.hint/time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			now := time.UnixMilli(r.now)
			m := CooldownUntil(until, now, tc.hint)
			var want int64
			if m.After(now) {
				want = m.Sub(now).Milliseconds()
			}
			if r.remaining != want {
				t.Fatalf("script: %d ms left, model: %d ms (model until %v, now %v)", r.remaining, want, m, now)
			}
			if tc.hint > 0 {
				stored, err := c.Get(context.Background(), key).Int64()
				if err != nil || stored != m.UnixMilli() {
					t.Fatalf("stored %d (%v), model %d", stored, err, m.UnixMilli())
				}
			}
		})
	}
}

func TestScriptRepliesChecked(t *testing.T) {
	// A reply of the wrong shape is an error naming the script, never a
	// panic (redis_rate's unchecked values[0].(int64) panicked on Dragonfly).
	for _, v := range []any{nil, "x", []any{}, []any{int64(1)}, []any{"1", "2", "3", "4", "5", "6"}, []any{int64(2), int64(0), int64(0), int64(0), int64(0), int64(0)}} {
		if _, ok := ints(v, 6); ok {
			if n, _ := ints(v, 6); n[0] == 0 || n[0] == 1 {
				t.Fatalf("ints accepted %v", v)
			}
		}
	}
	if err := unexpected("gcra.lua", []any{"a"}); err.Error() != fmt.Sprintf("redisretry: gcra.lua: unexpected reply %v", []any{"a"}) {
		t.Fatal(err)
	}
}
