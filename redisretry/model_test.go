package redisretry

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// The shared tables: each case runs on the script (a real server) and on its
// Go model, at the server's time that the script reports; every output must
// be equal. The state is set relative to the server's clock just before.

type gcraCase struct {
	name     string
	tat      time.Duration // from now; absent when noKey
	back     time.Duration // the server's clock went back this much since tat was written
	noKey    bool
	inc, tol time.Duration
	maxWait  time.Duration // -1: none
	offset   time.Duration // where the block may start at the earliest, from now
	until    time.Duration // from now: when the caller stops waiting (0: never)
	stored   string        // the limit the schedule holds ("": none)
	limit    string        // the call's limit ("": none)
	live     bool          // reserve only on a schedule that runs ahead of now
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
	{name: "the clock went back 10 s", tat: 10500 * time.Millisecond, back: 10 * time.Second, inc: 100 * time.Millisecond, maxWait: -1, wantOK: true},
	{name: "the clock went back an hour", tat: time.Hour, back: time.Hour, inc: 100 * time.Millisecond, maxWait: time.Millisecond, wantOK: true},
	{name: "a debt placed back on a free past", tat: -5 * time.Second, inc: time.Second, offset: -3 * time.Second, maxWait: -1, wantOK: true},
	{name: "a debt placed back after the schedule's end", tat: -time.Second, inc: 2 * time.Second, offset: -3 * time.Second, maxWait: -1, wantOK: true},
	{name: "a debt placed back on a busy schedule", tat: 2 * time.Second, inc: time.Second, offset: -3 * time.Second, maxWait: -1, wantOK: true},
	{name: "a debt placed back, no key", noKey: true, inc: 500 * time.Millisecond, offset: -time.Minute, maxWait: -1, wantOK: true},
	{name: "a block after the reply's way back", noKey: true, inc: 100 * time.Millisecond, offset: 30 * time.Millisecond, maxWait: time.Second, wantOK: true},
	{name: "after the reply's way back: past the deadline", tat: -time.Second, inc: 100 * time.Millisecond, offset: 30 * time.Millisecond, maxWait: 20 * time.Millisecond, wantOK: false},
	{name: "nobody waits for it any more", tat: 300 * time.Millisecond, inc: 100 * time.Millisecond, until: -time.Millisecond, maxWait: -1, wantOK: false},
	{name: "still waited for", tat: 300 * time.Millisecond, inc: 100 * time.Millisecond, until: time.Hour, maxWait: -1, wantOK: true},
	{name: "the same limit", tat: 300 * time.Millisecond, inc: 100 * time.Millisecond, maxWait: -1, stored: "10/1s", limit: "10/1s", wantOK: true},
	{name: "another limit", tat: 300 * time.Millisecond, inc: 100 * time.Millisecond, maxWait: -1, stored: "20/1s", limit: "10/1s", wantOK: true},
	{name: "another limit, refused", tat: 5 * time.Second, inc: time.Second, maxWait: time.Second, stored: "20/1s", limit: "1/1s", wantOK: false},
	{name: "another limit, a probe", tat: time.Second, maxWait: -1, stored: "20/1s", limit: "10/1s", wantOK: true},
	{name: "a limit where none was kept", tat: 300 * time.Millisecond, inc: 100 * time.Millisecond, maxWait: -1, limit: "10/1s", wantOK: true},
	{name: "a limit, no key", noKey: true, inc: 100 * time.Millisecond, maxWait: -1, limit: "10/1s", wantOK: true},
	{name: "no limit sent", tat: 300 * time.Millisecond, inc: 100 * time.Millisecond, maxWait: -1, stored: "20/1s", wantOK: true},
	{name: "a live debt where others drew ahead", tat: 700 * time.Millisecond, inc: 200 * time.Millisecond, maxWait: -1, live: true, wantOK: true},
	{name: "a live debt on an idle schedule", tat: -time.Second, inc: 200 * time.Millisecond, maxWait: -1, live: true, wantOK: false},
	{name: "a live debt, no key", noKey: true, inc: 200 * time.Millisecond, maxWait: -1, live: true, wantOK: false},
	{name: "a live debt after the clock went back", tat: 10500 * time.Millisecond, back: 10 * time.Second, inc: 100 * time.Millisecond, maxWait: -1, live: true, wantOK: true},
	{name: "a live debt, the clock went back past it", tat: 10 * time.Second, back: 11 * time.Second, inc: 100 * time.Millisecond, maxWait: -1, live: true, wantOK: false},
	{name: "a live debt nobody waits for", tat: 700 * time.Millisecond, inc: 200 * time.Millisecond, until: -time.Millisecond, maxWait: -1, live: true, wantOK: false},
	{name: "a live debt, a limit", tat: 700 * time.Millisecond, inc: 200 * time.Millisecond, maxWait: -1, stored: "20/1s", limit: "10/1s", live: true, wantOK: true},
}

// modelAt runs the case's call a on the model at the script's now, from the
// schedule's tat (zero: no key): the reply the script must give.
func (tc gcraCase) modelAt(tat time.Time, now int64, a backend.GCRAArgs) backend.GCRAResult {
	var t int64
	if !tat.IsZero() {
		t = tat.UnixMicro()
	}
	ok, wait, from, to := backend.GCRACall(t, now, a)
	return backend.GCRAResult{OK: ok, Wait: time.Duration(wait) * time.Microsecond, From: time.UnixMicro(from), To: time.UnixMicro(to)}
}

func serverMicros(t *testing.T, c *redis.Client) int64 {
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMicro()
}

// scriptsOnRedis starts a redis-server for t and returns a client of it and
// the scripts' runner on that client.
func scriptsOnRedis(t *testing.T) (*redis.Client, scriptRunner) {
	t.Helper()
	c := startRedis(t).client(t)
	return c, scriptRunner{c}
}

func TestGCRAScriptMatchesModel(t *testing.T) {
	c, be := scriptsOnRedis(t)
	for _, tc := range gcraCases {
		t.Run(tc.name, func(t *testing.T) {
			keys := backend.NewQuotaKeys(testKey(t))
			var tat, at int64
			if !tc.noKey {
				now := serverMicros(t, c)
				tat, at = now+int64(tc.tat/time.Microsecond), now+int64(tc.back/time.Microsecond)
				fields := []any{"tat", tat, "at", at}
				if tc.stored != "" {
					fields = append(fields, "limit", tc.stored)
				}
				if err := c.HSet(context.Background(), keys.TAT, fields...).Err(); err != nil {
					t.Fatal(err)
				}
				c.Expire(context.Background(), keys.TAT, 2*time.Hour)
			}
			a := backend.GCRAArgs{Inc: us(tc.inc), Tol: us(tc.tol), MaxWait: usWait(tc.maxWait), Member: "m1", MemberTTL: 30000, Offset: us(tc.offset), Limit: tc.limit, Live: tc.live}
			if tc.offset < 0 {
				a.Offset = -us(-tc.offset)
			}
			if tc.until != 0 {
				a.Until = serverMicros(t, c) + int64(tc.until/time.Microsecond)
			}
			r, err := be.gcra(context.Background(), keys, a)
			if err != nil {
				t.Fatal(err)
			}
			var tatTime time.Time // the model takes the TAT as of now
			if !tc.noKey {
				tatTime = time.UnixMicro(tat - max(at-r.Now, 0))
			}
			m := tc.modelAt(tatTime, r.Now, a)
			got := backend.GCRAResult{OK: r.OK, Wait: time.Duration(r.Wait) * time.Microsecond, From: time.UnixMicro(r.From), To: time.UnixMicro(r.To)}
			if got != m {
				t.Fatalf("script %+v, model %+v", got, m)
			}
			// The in-memory server, from the same state at the same time.
			var st backend.Store
			if !tc.noKey {
				st.SetSchedule(keys.TAT, tat, at, tc.stored, time.UnixMicro(r.Now))
			}
			if sr := st.Apply(time.UnixMicro(r.Now), backend.Call{Script: backend.GCRA, Quota: keys, GCRA: a}).GCRA; sr != r {
				t.Fatalf("script %+v, in-memory store %+v", r, sr)
			}
			if stTAT, ok := st.TAT(keys, time.UnixMicro(r.Now)); r.OK && tc.inc > 0 && (!ok || stTAT != r.To) {
				t.Fatalf("the store holds TAT %d (%v), want %d", stTAT, ok, r.To)
			}
			if r.OK != tc.wantOK {
				t.Fatalf("ok = %v, want %v (%+v)", r.OK, tc.wantOK, got)
			}
			if r.Members != 1 {
				t.Fatalf("members = %d, want 1", r.Members)
			}
			// Another limit is told; the limit of a call that reserved is
			// kept, one that did not leaves the field.
			if want := map[bool]string{true: tc.stored, false: ""}[tc.limit != "" && tc.stored != "" && tc.stored != tc.limit && !tc.noKey]; r.Other != want {
				t.Fatalf("other = %q, want %q", r.Other, want)
			}
			wantLimit := tc.stored
			if r.OK && tc.inc > 0 && tc.limit != "" {
				wantLimit = tc.limit
			}
			if tc.noKey && !(r.OK && tc.inc > 0) {
				wantLimit = ""
			}
			if got := c.HGet(context.Background(), keys.TAT, "limit").Val(); got != wantLimit {
				t.Fatalf("the schedule keeps the limit %q, want %q", got, wantLimit)
			}
			stored, err := c.HGet(context.Background(), keys.TAT, "tat").Int64()
			switch {
			case r.OK && tc.inc > 0:
				if err != nil || stored != r.To {
					t.Fatalf("stored TAT %d (%v), want %d", stored, err, r.To)
				}
				if ttl := c.PTTL(context.Background(), keys.TAT).Val(); ttl <= 0 {
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

// A call of a members case: who calls, lazily or not, reserving inc µs
// (0: a probe), refused when maxWait is 0.
type memberCall struct {
	member  string
	lazy    bool
	inc     int64
	refused bool
}

// tenSeconds is 10 s of schedule (µs): a reservation of it keeps the
// schedule that long, far longer than a case's calls take on a busy machine.
const tenSeconds = 10_000_000

// The heartbeat's cases (gcra.lua's ARGV[9]): each runs its calls in order
// on the script and on the in-memory store, at the script's times; the
// replies must be equal, and members and the schedule's count n as said
// after the last call.
var memberCases = []struct {
	name        string
	calls       []memberCall
	wantMembers int64
	wantN       string // the schedule's field n after the calls ("": none, or no schedule)
}{
	{name: "a heartbeat counts and keeps the count", calls: []memberCall{{member: "a", inc: tenSeconds}}, wantMembers: 1, wantN: "1"},
	{name: "a lazy call without a schedule is a heartbeat", calls: []memberCall{{member: "a", lazy: true, inc: tenSeconds}}, wantMembers: 1, wantN: "1"},
	{name: "a lazy call takes the count kept", calls: []memberCall{{member: "a", inc: tenSeconds}, {member: "b", inc: tenSeconds}, {member: "a", lazy: true, inc: tenSeconds}}, wantMembers: 2, wantN: "2"},
	{name: "a lazy call does not count its caller", calls: []memberCall{{member: "a", inc: tenSeconds}, {member: "b", lazy: true, inc: tenSeconds}}, wantMembers: 1, wantN: "1"},
	{name: "a probe that counts another number keeps it", calls: []memberCall{{member: "a", inc: tenSeconds}, {member: "b"}, {member: "a", lazy: true}}, wantMembers: 2, wantN: "2"},
	{name: "a refused heartbeat keeps the count", calls: []memberCall{{member: "a", inc: tenSeconds}, {member: "b", inc: tenSeconds, refused: true}, {member: "a", lazy: true, inc: tenSeconds, refused: true}}, wantMembers: 2, wantN: "2"},
	{name: "a probe without a schedule writes none", calls: []memberCall{{member: "a"}, {member: "b"}}, wantMembers: 2, wantN: ""},
	{name: "a lazy probe without a schedule is a heartbeat", calls: []memberCall{{member: "a"}, {member: "b", lazy: true}}, wantMembers: 2, wantN: ""},
	{name: "a lazy reservation leaves the count", calls: []memberCall{{member: "a", inc: tenSeconds}, {member: "b"}, {member: "c", lazy: true, inc: tenSeconds}}, wantMembers: 2, wantN: "2"},
}

func TestGCRAMembersMatchStore(t *testing.T) {
	c, be := scriptsOnRedis(t)
	ctx := context.Background()
	for _, tc := range memberCases {
		t.Run(tc.name, func(t *testing.T) {
			keys := backend.NewQuotaKeys(testKey(t))
			var st backend.Store
			var r backend.GCRAReply
			for i, call := range tc.calls {
				a := backend.GCRAArgs{Inc: call.inc, MaxWait: -1, Member: call.member, MemberTTL: 30000, Limit: "10/1000000000/1", Lazy: call.lazy}
				if call.refused {
					a.MaxWait = 0
				}
				var err error
				if r, err = be.gcra(ctx, keys, a); err != nil {
					t.Fatal(err)
				}
				if r.OK == call.refused {
					t.Fatalf("call %d: ok = %v, want %v", i, r.OK, !call.refused)
				}
				if sr := st.Apply(time.UnixMicro(r.Now), backend.Call{Script: backend.GCRA, Quota: keys, GCRA: a}).GCRA; sr != r {
					t.Fatalf("call %d: script %+v, in-memory store %+v", i, r, sr)
				}
			}
			if r.Members != tc.wantMembers {
				t.Fatalf("members = %d, want %d", r.Members, tc.wantMembers)
			}
			if n := c.HGet(ctx, keys.TAT, "n").Val(); n != tc.wantN {
				t.Fatalf("the schedule keeps n = %q, want %q", n, tc.wantN)
			}
		})
	}
}

// A count that is not one (another program's, a hand's) is not taken: the
// lazy call is a heartbeat and writes the count again.
func TestGCRALazyRepairsCount(t *testing.T) {
	c, be := scriptsOnRedis(t)
	ctx := context.Background()
	for _, bad := range []string{"x", "-1", "1.5", "1e300", ""} {
		t.Run(strconv.Quote(bad), func(t *testing.T) {
			keys := backend.NewQuotaKeys(testKey(t))
			a := backend.GCRAArgs{Inc: tenSeconds, MaxWait: -1, Member: "a", MemberTTL: 30000}
			if _, err := be.gcra(ctx, keys, a); err != nil {
				t.Fatal(err)
			}
			c.HSet(ctx, keys.TAT, "n", bad)
			a.Member, a.Lazy = "b", true
			r, err := be.gcra(ctx, keys, a)
			if err != nil {
				t.Fatal(err)
			}
			if r.Members != 2 {
				t.Fatalf("members = %d, want 2 (a heartbeat)", r.Members)
			}
			if n := c.HGet(ctx, keys.TAT, "n").Val(); n != "2" {
				t.Fatalf("the schedule keeps n = %q, want \"2\"", n)
			}
		})
	}
}

type budgetCase struct {
	name              string
	requests, retries map[int64]int64 // epoch offset from now -> count
	config            string          // the configuration stored by the last call; "" for none
	ratio, floor      float64
	call              backend.BudgetCall // GiveBackEpoch is an offset
}

var budgetCases = []budgetCase{
	{name: "empty: the floor", ratio: 0.2, floor: 100, call: backend.BudgetCall{Want: 10}},
	{name: "empty: no floor", ratio: 0.2, floor: 0, call: backend.BudgetCall{Want: 10}},
	{name: "ratio of the requests", ratio: 0.2, floor: 0, requests: map[int64]int64{0: 30, -3: 20}, call: backend.BudgetCall{Add: 50, Want: 50}},
	{name: "retries already used", ratio: 0.2, floor: 5, requests: map[int64]int64{-1: 100}, retries: map[int64]int64{-1: 18}, call: backend.BudgetCall{Want: 10}},
	{name: "exhausted", ratio: 0.2, floor: 0, requests: map[int64]int64{-1: 100}, retries: map[int64]int64{-2: 20}, call: backend.BudgetCall{Want: 1}},
	{name: "old slots leave the window", ratio: 0.5, floor: 0, requests: map[int64]int64{-19: 10, -20: 1000, -40: 7}, retries: map[int64]int64{-20: 500}, call: backend.BudgetCall{Want: 100}},
	{name: "give back into its slot", ratio: 0.2, floor: 0, requests: map[int64]int64{-2: 100}, retries: map[int64]int64{-2: 20}, call: backend.BudgetCall{GiveBack: 5, GiveBackEpoch: -2, Want: 3}},
	{name: "give back more than counted", ratio: 0.2, floor: 0, requests: map[int64]int64{-2: 100}, retries: map[int64]int64{-2: 4}, call: backend.BudgetCall{GiveBack: 9, GiveBackEpoch: -2}},
	{name: "give back to a slot out of the window", ratio: 0.2, floor: 0, retries: map[int64]int64{-25: 4, -1: 3}, call: backend.BudgetCall{GiveBack: 2, GiveBackEpoch: -25}},
	{name: "fractional ratio and floor", ratio: 0.15, floor: 2.5, requests: map[int64]int64{0: 7}, call: backend.BudgetCall{Want: 4}},
	{name: "flush only", ratio: 0.2, floor: 10, call: backend.BudgetCall{Add: 12345}},
	{name: "the same configuration before", ratio: 0.2, floor: 10, config: "500/20/0.2/10", requests: map[int64]int64{-1: 50}, call: backend.BudgetCall{Want: 2}},
	{name: "another configuration before", ratio: 0.2, floor: 10, config: "3000/20/0.1/60", requests: map[int64]int64{-1: 50}, call: backend.BudgetCall{Add: 1, Want: 2}},
}

func TestBudgetScriptMatchesModel(t *testing.T) {
	c, be := scriptsOnRedis(t)
	const slot = 500 * time.Millisecond
	for _, tc := range budgetCases {
		t.Run(tc.name, func(t *testing.T) {
			keys := backend.NewBudgetKeys(testKey(t))
			epoch := backend.FloorDiv(serverMicros(t, c)/1000, int64(slot/time.Millisecond))
			w := &backend.BudgetWindow{Slot: slot, Slots: budgetSlots, Ratio: tc.ratio, Floor: tc.floor,
				Requests: map[int64]int64{}, Retries: map[int64]int64{}}
			for _, kv := range []struct {
				key string
				m   map[int64]int64
				dst map[int64]int64
			}{{keys.Requests, tc.requests, w.Requests}, {keys.Retries, tc.retries, w.Retries}} {
				for off, n := range kv.m {
					kv.dst[epoch+off] = n
					c.HSet(context.Background(), kv.key, strconv.FormatInt(epoch+off, 10), n)
				}
			}
			if tc.config != "" {
				w.Config = tc.config
				c.Set(context.Background(), keys.Config, tc.config, time.Hour)
			}
			call := tc.call
			call.GiveBackEpoch += epoch
			r, err := be.budget(context.Background(), keys, backend.BudgetArgs{
				SlotMS: int64(slot / time.Millisecond), Slots: budgetSlots, Ratio: tc.ratio, Floor: tc.floor,
				Add: call.Add, Want: call.Want, Back: call.GiveBack, BackEpoch: call.GiveBackEpoch,
			})
			if err != nil {
				t.Fatal(err)
			}
			var st backend.Store
			st.SetBudget(keys, w.Requests, w.Retries, w.Config)
			sr := st.Apply(time.UnixMilli(r.Now), backend.Call{Script: backend.Budget, Budget: keys, BudgetArgs: backend.BudgetArgs{
				SlotMS: int64(slot / time.Millisecond), Slots: budgetSlots, Ratio: tc.ratio, Floor: tc.floor,
				Add: call.Add, Want: call.Want, Back: call.GiveBack, BackEpoch: call.GiveBackEpoch,
			}}).Budget
			if sr != r {
				t.Fatalf("script %+v, in-memory store %+v", r, sr)
			}
			m := w.Apply(time.UnixMilli(r.Now), call)
			if r != m {
				t.Fatalf("script %+v, model %+v", r, m)
			}
			if want := map[bool]string{true: tc.config}[tc.config != "500/20/"+backend.FormatFloat(tc.ratio)+"/"+backend.FormatFloat(tc.floor)]; r.Other != want {
				t.Fatalf("the other configuration %q, want %q", r.Other, want)
			}
			for _, kv := range []struct {
				key string
				m   map[int64]int64
			}{{keys.Requests, w.Requests}, {keys.Retries, w.Retries}} {
				got := map[int64]int64{}
				for f, v := range c.HGetAll(context.Background(), kv.key).Val() {
					e, _ := strconv.ParseInt(f, 10, 64)
					got[e], _ = strconv.ParseInt(v, 10, 64)
				}
				if !maps.Equal(got, kv.m) {
					t.Fatalf("%s holds %v, the model %v", kv.key, got, kv.m)
				}
			}
			if cfg := c.Get(context.Background(), keys.Config).Val(); cfg != w.Config || c.PTTL(context.Background(), keys.Config).Val() <= 0 {
				t.Fatalf("%s holds %q (PTTL %v), the model %q", keys.Config, cfg, c.PTTL(context.Background(), keys.Config).Val(), w.Config)
			}
			if req, ret := st.Budget(keys); !maps.Equal(req, w.Requests) || !maps.Equal(ret, w.Retries) {
				t.Fatalf("the store holds %v %v, the model %v %v", req, ret, w.Requests, w.Retries)
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
	c, be := scriptsOnRedis(t)
	for _, tc := range cooldownCases {
		t.Run(tc.name, func(t *testing.T) {
			key := backend.CooldownKey(testKey(t))
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
			now := time.UnixMilli(r.Now)
			m := backend.CooldownUntil(until, now, tc.hint)
			var want int64
			if m.After(now) {
				want = m.Sub(now).Milliseconds()
			}
			if r.Remaining != want {
				t.Fatalf("script: %d ms left, model: %d ms (model until %v, now %v)", r.Remaining, want, m, now)
			}
			var st backend.Store
			if !tc.noKey {
				st.SetCooldown(key, until.UnixMilli())
			}
			if sr := st.Apply(now, backend.Call{Script: backend.Cooldown, Cooldown: key, HintMS: int64(tc.hint / time.Millisecond)}).Cooldown; sr != r {
				t.Fatalf("script %+v, in-memory store %+v", r, sr)
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

// lyingScripter answers every script with reply: a server (or a proxy) that
// answers garbage.
type lyingScripter struct{ reply any }

func (l lyingScripter) cmd(ctx context.Context) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetVal(l.reply)
	return c
}
func (l lyingScripter) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return l.cmd(ctx)
}
func (l lyingScripter) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return l.cmd(ctx)
}
func (l lyingScripter) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return l.cmd(ctx)
}
func (l lyingScripter) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return l.cmd(ctx)
}
func (l lyingScripter) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceCmd(ctx)
}
func (l lyingScripter) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	return redis.NewStringCmd(ctx)
}

func TestScriptRepliesChecked(t *testing.T) {
	// A reply the script cannot give (wrong types, a short array, values
	// out of range or inconsistent with the call) is an error naming the
	// script, never a panic (redis_rate's unchecked values[0].(int64)
	// panicked on Dragonfly) nor a block placed at an absurd time.
	ctx := context.Background()
	const now = int64(1_800_000_000_000_000) // µs
	const inc = int64(100_000)
	i := func(v ...int64) []any {
		out := make([]any, len(v))
		for k, x := range v {
			out[k] = x
		}
		return out
	}
	ga := backend.GCRAArgs{Inc: inc, MaxWait: -1, Member: "m", MemberTTL: 30000}
	g := func(v ...int64) []any { return append(i(v...), "") } // six integers and no other limit
	for _, tc := range []struct {
		name  string
		reply any
		ok    bool
	}{
		{"valid", g(1, 0, now, now+inc, now, 1), true},
		{"valid refusal", g(0, 0, now, now, now, 1), true},
		{"nil", nil, false},
		{"a string", "OK", false},
		{"empty", []any{}, false},
		{"short", i(1, 0, now), false},
		{"strings", []any{"1", "0", "1", "2", "3", "1"}, false},
		{"ok is 2", g(2, 0, now, now+inc, now, 1), false},
		{"negative wait", g(1, -5, now, now+inc, now, 1), false},
		{"wait inconsistent", g(1, 999, now, now+inc, now, 1), false},
		{"block before now", g(1, 0, now-1, now-1+inc, now, 1), false},
		{"block of another size", g(1, 0, now, now+5, now, 1), false},
		{"refused but a block", g(0, 0, now, now+inc, now, 1), false},
		{"beyond 2^53", g(1, 0, 1<<60, 1<<60+inc, 1<<60, 1), false},
		{"no time", g(1, 0, 0, inc, 0, 1), false},
		{"negative members", g(1, 0, now, now+inc, now, -1), false},
		{"another limit", append(i(1, 0, now, now+inc, now, 1), "40/1000000000/1"), true},
		{"six integers, no limit", i(1, 0, now, now+inc, now, 1), false},
		{"the limit not a string", i(1, 0, now, now+inc, now, 1, 7), false},
	} {
		_, err := scriptRunner{lyingScripter{tc.reply}}.gcra(ctx, backend.NewQuotaKeys("k"), ga)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "redisretry: gcra.lua: unexpected reply")) {
			t.Errorf("gcra %s: %v", tc.name, err)
		}
	}
	ba := backend.BudgetArgs{SlotMS: 500, Slots: 20, Ratio: 0.2, Want: 3}
	nowMS := now / 1000
	for _, tc := range []struct {
		name  string
		reply any
		ok    bool
	}{
		{"valid", append(i(2, nowMS/500, 10, 2, nowMS), ""), true},
		{"valid, another configuration", append(i(2, nowMS/500, 10, 2, nowMS), "1000/10/0.5/0"), true},
		{"more than asked for", append(i(4, nowMS/500, 10, 4, nowMS), ""), false},
		{"negative grant", append(i(-1, nowMS/500, 10, 2, nowMS), ""), false},
		{"negative requests", append(i(2, nowMS/500, -10, 2, nowMS), ""), false},
		{"epoch of another time", append(i(2, 7, 10, 2, nowMS), ""), false},
		{"no time", append(i(2, 0, 10, 2, 0), ""), false},
		{"short", i(2, 0), false},
		{"no configuration", i(2, nowMS/500, 10, 2, nowMS), false},
		{"a number for the configuration", i(2, nowMS/500, 10, 2, nowMS, 5), false},
	} {
		_, err := scriptRunner{lyingScripter{tc.reply}}.budget(ctx, backend.NewBudgetKeys("k"), ba)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "redisretry: budget.lua: unexpected reply")) {
			t.Errorf("budget %s: %v", tc.name, err)
		}
	}
	ra := backend.ReturnArgs{To: now, Unused: inc, Member: "m", MemberTTL: 30000}
	for _, tc := range []struct {
		name   string
		member string
		reply  any
		ok     bool
	}{
		{"valid", "m", i(1, 3), true},
		{"valid, nobody left", "m", i(0, 0), true},
		{"valid, no member named", "", i(1, -1), true},
		{"not counted though a member left", "m", i(1, -1), false},
		{"counted though none was named", "", i(1, 2), false},
		{"returned is 2", "m", i(2, 3), false},
		{"negative count", "m", i(1, -2), false},
		{"the old reply, an integer", "m", int64(1), false},
		{"short", "m", i(1), false},
		{"strings", "m", []any{"1", "3"}, false},
	} {
		a := ra
		a.Member = tc.member
		_, err := scriptRunner{lyingScripter{tc.reply}}.gcraReturn(ctx, backend.NewQuotaKeys("k"), a)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "redisretry: gcra_return.lua: unexpected reply")) {
			t.Errorf("gcra_return %s: %v", tc.name, err)
		}
	}
	for _, tc := range []struct {
		name  string
		reply any
		ok    bool
	}{
		{"valid", i(5, nowMS), true},
		{"negative", i(-5, nowMS), false},
		{"no time", i(5, 0), false},
		{"a float", []any{1.5, nowMS}, false},
	} {
		_, err := scriptRunner{lyingScripter{tc.reply}}.cooldown(ctx, backend.CooldownKey("k"), 0)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "redisretry: cooldown.lua: unexpected reply")) {
			t.Errorf("cooldown %s: %v", tc.name, err)
		}
	}
}

func TestLyingServerFallsBack(t *testing.T) {
	// Through the limiters: a server that answers garbage is a failed
	// Redis (one log line, local decisions), never a failed call.
	logs := &logCounter{}
	l := slog.New(logs)
	liar := lyingScripter{[]any{"garbage"}}
	q, _ := NewQuota(liar, QuotaConfig{Settings: Settings{Key: "k", Logger: l}, Limit: PerSecond(1000)})
	b, _ := NewBudget(liar, BudgetConfig{Settings: Settings{Key: "k", Logger: l}})
	d, _ := NewCooldown(liar, CooldownConfig{Settings: Settings{Key: "k", Logger: l}})
	for range 20 {
		if _, err := q.Reserve(context.Background(), time.Now(), time.Time{}); err != nil {
			t.Fatal(err)
		}
		b.Admit(false)
		b.Admit(true)
		if _, err := d.Reserve(context.Background(), time.Now(), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []interface{ Close() error }{q, b, d} {
		x.Close()
	}
	lines := logs.lines()
	if len(lines) != 3 {
		t.Fatalf("log lines %q, want one per limiter", lines)
	}
	for _, line := range lines {
		if !strings.Contains(line, "unexpected reply") {
			t.Errorf("log line %q does not say what went wrong", line)
		}
	}
}

// The leave's cases (gcra_return.lua, Quota.Close): from a schedule (or
// none) and members of the given ages, a process gives back the unused end
// of a block and leaves; the script and the in-memory store must reply
// alike and keep the same schedule, count and members.
var leaveCases = []struct {
	name     string
	noKey    bool             // no schedule
	n        string           // the schedule's field n ("": none, an old hash)
	members  map[string]int64 // id -> age of its last call, ms
	wrongSet bool             // the members' key is a string (another program's)
	unused   int64            // µs given back at the block's end (the block ends at the schedule's tat)
	notLast  bool             // another block follows the one given back
	member   string           // who leaves ("": none named)
	want     backend.ReturnReply
	wantN    string // the schedule's n after ("": none, or no schedule)
	wantTAT  bool   // the schedule exists after
}{
	{name: "a member leaves", n: "2", members: map[string]int64{"a": 100, "b": 0}, member: "b", want: backend.ReturnReply{Members: 1}, wantN: "1", wantTAT: true},
	{name: "the last member leaves", n: "1", members: map[string]int64{"a": 0}, member: "a", want: backend.ReturnReply{Members: 0}, wantN: "", wantTAT: true},
	{name: "a member that was never there", n: "1", members: map[string]int64{"a": 0}, member: "z", want: backend.ReturnReply{Members: 1}, wantN: "1", wantTAT: true},
	{name: "a member already expired", n: "2", members: map[string]int64{"a": 0, "b": 40_000}, member: "b", want: backend.ReturnReply{Members: 1}, wantN: "1", wantTAT: true},
	{name: "the expired forgotten as it leaves", n: "3", members: map[string]int64{"a": 0, "b": 40_000, "c": 10}, member: "c", want: backend.ReturnReply{Members: 1}, wantN: "1", wantTAT: true},
	{name: "the count after leaving, kept stale", n: "7", members: map[string]int64{"a": 0, "b": 5, "c": 25_000}, member: "b", want: backend.ReturnReply{Members: 2}, wantN: "2", wantTAT: true},
	{name: "an old hash without a count", members: map[string]int64{"a": 0, "b": 0}, member: "a", want: backend.ReturnReply{Members: 1}, wantN: "1", wantTAT: true},
	{name: "a count that is not one", n: "x", members: map[string]int64{"a": 0, "b": 0}, member: "a", want: backend.ReturnReply{Members: 1}, wantN: "1", wantTAT: true},
	{name: "no schedule: none written", noKey: true, members: map[string]int64{"a": 0, "b": 0}, member: "a", want: backend.ReturnReply{Members: 1}},
	{name: "no members at all", n: "1", member: "a", want: backend.ReturnReply{Members: 0}, wantTAT: true},
	{name: "members of another type", n: "2", wrongSet: true, member: "a", want: backend.ReturnReply{Members: 0}, wantTAT: true},
	{name: "give back and leave", n: "2", members: map[string]int64{"a": 0, "b": 0}, unused: 2_000_000, member: "a", want: backend.ReturnReply{Returned: true, Members: 1}, wantN: "1", wantTAT: true},
	{name: "give back all and leave", n: "2", members: map[string]int64{"a": 0, "b": 0}, unused: tenSeconds, member: "a", want: backend.ReturnReply{Returned: true, Members: 1}},
	{name: "another block follows: leave only", n: "2", members: map[string]int64{"a": 0, "b": 0}, unused: 2_000_000, notLast: true, member: "a", want: backend.ReturnReply{Members: 1}, wantN: "1", wantTAT: true},
	{name: "give back, no member named", n: "2", members: map[string]int64{"a": 0, "b": 0}, unused: 2_000_000, want: backend.ReturnReply{Returned: true, Members: -1}, wantN: "2", wantTAT: true},
	{name: "nothing to give back, no member", n: "2", members: map[string]int64{"a": 0, "b": 0}, want: backend.ReturnReply{Members: -1}, wantN: "2", wantTAT: true},
}

func TestLeaveScriptMatchesStore(t *testing.T) {
	c, be := scriptsOnRedis(t)
	ctx := context.Background()
	for _, tc := range leaveCases {
		t.Run(tc.name, func(t *testing.T) {
			keys := backend.NewQuotaKeys(testKey(t))
			var st backend.Store
			now := serverMicros(t, c)
			tat := now + tenSeconds // a block of the schedule 10 s long, from now
			if !tc.noKey {
				c.HSet(ctx, keys.TAT, "tat", tat, "at", now)
				if tc.n != "" {
					c.HSet(ctx, keys.TAT, "n", tc.n)
				}
				c.PExpire(ctx, keys.TAT, time.Hour)
				st.SetSchedule(keys.TAT, tat, now, "", time.UnixMicro(now))
				if k, err := strconv.ParseInt(tc.n, 10, 64); err == nil {
					st.SetCount(keys.TAT, k)
				}
			}
			last := map[string]int64{}
			for id, age := range tc.members {
				last[id] = now/1000 - age
				c.ZAdd(ctx, keys.Members, redis.Z{Score: float64(last[id]), Member: id})
			}
			st.SetMembers(keys.Members, last)
			if tc.wrongSet {
				c.Set(ctx, keys.Members, "x", time.Hour)
			}
			a := backend.ReturnArgs{To: tat, Unused: tc.unused, Member: tc.member, MemberTTL: 30_000}
			if tc.notLast {
				a.To = tat - 1
			}
			r, err := be.gcraReturn(ctx, keys, a)
			if err != nil {
				t.Fatal(err)
			}
			if r != tc.want {
				t.Fatalf("reply %+v, want %+v", r, tc.want)
			}
			after := serverMicros(t, c) // the call ran between now and after
			sr := st.Apply(time.UnixMicro(after), backend.Call{Script: backend.GCRAReturn, Quota: keys, Return: a}).Return
			if sr != r {
				t.Fatalf("script %+v, in-memory store %+v", r, sr)
			}
			n, err := c.HGet(ctx, keys.TAT, "n").Result()
			if err == redis.Nil {
				n = ""
			}
			if n != tc.wantN {
				t.Fatalf("the schedule keeps n = %q, want %q", n, tc.wantN)
			}
			if sn, ok := st.Count(keys.TAT, time.UnixMicro(after)); ok != (n != "") || (ok && strconv.FormatInt(sn, 10) != n) {
				t.Fatalf("the store keeps n = %d (%v), the script %q", sn, ok, n)
			}
			stored, err := c.HGet(ctx, keys.TAT, "tat").Int64()
			stTAT, ok := st.TAT(keys, time.UnixMicro(after))
			if (err == nil) != tc.wantTAT || ok != tc.wantTAT || (ok && stTAT != stored) {
				t.Fatalf("the schedule: tat %d (%v), the store %d (%v); want it kept: %v", stored, err, stTAT, ok, tc.wantTAT)
			}
			if tc.want.Returned && tc.wantTAT && stored != tat-tc.unused {
				t.Fatalf("tat %d after the give-back, want %d", stored, tat-tc.unused)
			}
			if !tc.want.Returned && tc.wantTAT && stored != tat {
				t.Fatalf("tat %d moved, want %d", stored, tat)
			}
			ids := c.ZRange(ctx, keys.Members, 0, -1).Val()
			slices.Sort(ids)
			if got := st.Members(keys.Members); !slices.Equal(ids, got) {
				t.Fatalf("the members %q, the store's %q", ids, got)
			}
			if tc.member != "" && slices.Contains(ids, tc.member) {
				t.Fatalf("%q is still a member: %q", tc.member, ids)
			}
		})
	}
}
