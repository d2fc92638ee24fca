package redisretry

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// backend is the Redis side of the limiters: one method per script, each one
// round trip. scriptBackend runs the scripts on a server; the tests also run
// the limiters on the scripts' Go models (model.go).
type backend interface {
	gcra(ctx context.Context, k quotaKeys, a gcraArgs) (gcraReply, error)
	gcraReturn(ctx context.Context, k quotaKeys, to, unused int64) (bool, error)
	budget(ctx context.Context, k budgetKeys, a budgetArgs) (budgetReply, error)
	cooldown(ctx context.Context, key string, hintMS int64) (cooldownReply, error)
}

// Every key of one limiter shares the hash tag {Key}, so that a script's keys
// live in one Cluster slot.
type quotaKeys struct{ tat, members string }

type budgetKeys struct{ requests, retries string }

func newQuotaKeys(key string) quotaKeys {
	return quotaKeys{tat: "{" + key + "}:quota", members: "{" + key + "}:quota:members"}
}

func newBudgetKeys(key string) budgetKeys {
	return budgetKeys{requests: "{" + key + "}:budget:requests", retries: "{" + key + "}:budget:retries"}
}

func cooldownKey(key string) string { return "{" + key + "}:cooldown" }

type gcraArgs struct {
	inc, tol, maxWait int64 // microseconds; maxWait -1 for none
	member            string
	memberTTL         int64 // milliseconds
}

type gcraReply struct {
	ok                  bool
	wait, from, to, now int64 // microseconds
	members             int64
}

type budgetArgs struct {
	slotMS, slots              int64
	ratio, floor               float64
	add, want, back, backEpoch int64
}

type budgetReply struct {
	BudgetReply
	now int64 // milliseconds
}

type cooldownReply struct{ remaining, now int64 } // milliseconds

// scriptBackend runs the Lua scripts with EVALSHA (EVAL on NOSCRIPT).
type scriptBackend struct{ c redis.Scripter }

func (b scriptBackend) gcra(ctx context.Context, k quotaKeys, a gcraArgs) (gcraReply, error) {
	v, err := gcraScript.Run(ctx, b.c, []string{k.tat, k.members}, a.inc, a.tol, a.maxWait, a.member, a.memberTTL).Result()
	if err != nil {
		return gcraReply{}, err
	}
	n, ok := ints(v, 6)
	if !ok {
		return gcraReply{}, unexpected("gcra.lua", v)
	}
	r := gcraReply{ok: n[0] == 1, wait: n[1], from: n[2], to: n[3], now: n[4], members: n[5]}
	if (n[0] != 0 && n[0] != 1) || !r.valid(a) {
		return gcraReply{}, unexpected("gcra.lua", v)
	}
	return r, nil
}

// valid reports whether a reply is one the script can give for a: a server
// that answers something else (another script under the same name, a proxy
// that mangles replies) must not place blocks at absurd times.
func (r gcraReply) valid(a gcraArgs) bool {
	const limit = 1 << 53 // µs: the script's numbers are exact below it
	switch {
	case r.now <= 0 || r.now >= limit || r.from < r.now || r.to < r.from || r.to >= limit || r.members < 0:
		return false
	case r.wait != max(r.from-a.tol, r.now)-r.now:
		return false
	case r.ok && a.inc > 0:
		return r.to-r.from == a.inc
	}
	return r.to == r.from
}

func (b scriptBackend) gcraReturn(ctx context.Context, k quotaKeys, to, unused int64) (bool, error) {
	v, err := gcraReturnScript.Run(ctx, b.c, []string{k.tat}, to, unused).Result()
	if err != nil {
		return false, err
	}
	n, ok := v.(int64)
	if !ok || (n != 0 && n != 1) {
		return false, unexpected("gcra_return.lua", v)
	}
	return n == 1, nil
}

func (b scriptBackend) budget(ctx context.Context, k budgetKeys, a budgetArgs) (budgetReply, error) {
	v, err := budgetScript.Run(ctx, b.c, []string{k.requests, k.retries},
		a.slotMS, a.slots, strconv.FormatFloat(a.ratio, 'g', -1, 64), strconv.FormatFloat(a.floor, 'g', -1, 64),
		a.add, a.want, a.back, a.backEpoch).Result()
	if err != nil {
		return budgetReply{}, err
	}
	n, ok := ints(v, 5)
	if !ok || n[0] < 0 || n[0] > a.want || n[2] < 0 || n[3] < 0 || n[4] <= 0 || n[1] != n[4]/a.slotMS {
		return budgetReply{}, unexpected("budget.lua", v)
	}
	return budgetReply{BudgetReply{Granted: n[0], Epoch: n[1], Requests: n[2], Retries: n[3]}, n[4]}, nil
}

func (b scriptBackend) cooldown(ctx context.Context, key string, hintMS int64) (cooldownReply, error) {
	v, err := cooldownScript.Run(ctx, b.c, []string{key}, hintMS).Result()
	if err != nil {
		return cooldownReply{}, err
	}
	n, ok := ints(v, 2)
	if !ok || n[0] < 0 || n[1] <= 0 {
		return cooldownReply{}, unexpected("cooldown.lua", v)
	}
	return cooldownReply{remaining: n[0], now: n[1]}, nil
}

// ints checks that v is an array of n integers and returns them.
func ints(v any, n int) ([]int64, bool) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i, x := range a {
		if out[i], ok = x.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}
