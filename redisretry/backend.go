package redisretry

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// A limiter reaches time and Redis through two seams (see
// internal/backend): a Clock (Now, AfterFunc) and a Transport (a script call
// sent, its reply delivered to a callback). Its decisions are made by
// callbacks under its own lock; only the public methods block, each waiting
// for its decision on a channel or its context. In production the clock is
// the config's Now and time.AfterFunc, and the transport runs one script
// call per goroutine on a runner: the scripts on a server (scriptRunner),
// or their models in memory in the tests. A client that implements
// backend.Env (the fleet harness's) replaces both.

// runner runs one script call and waits for its reply.
type runner interface {
	run(ctx context.Context, c backend.Call) (backend.Reply, error)
}

// env is what a limiter is built on.
type env struct {
	clock   backend.Clock
	tr      backend.Transport
	rand    func() float64 // nil: the config's Rand or math/rand/v2
	sim     backend.Env    // the harness's env, if the client is one
	connect time.Duration  // how long a connection may take to set up; 0: unknown (calls bounded by the Timeout)
}

// validator is a limiter's config.
type validator interface{ Validate() error }

// newOnClient is what the constructors (NewQuota, NewBudget, NewCooldown)
// share: an error naming constructor if client is nil, else newOn on
// client's env, whose clock reads now if the scripts run on client.
func newOnClient[C validator, L any](constructor string, client redis.Scripter, now func() time.Time, c C, build func(env, C) L) (L, error) {
	if client == nil {
		var none L
		return none, fmt.Errorf("redisretry: %s: nil client", constructor)
	}
	return newOn(envFor(client, now), c, build)
}

// newOn returns the limiter build makes on e from c, once c is valid, or
// c's validation error.
func newOn[C validator, L any](e env, c C, build func(env, C) L) (L, error) {
	if err := c.Validate(); err != nil {
		var none L
		return none, err
	}
	return build(e, c), nil
}

// envFor returns the env of a limiter on client: the client's own if it
// implements backend.Env (whose connections take up to DefaultDialTimeout to
// set up), else the scripts run on client: a client made by NewClientWith
// takes its DialTimeout to set up a connection; of another client the
// limiter knows nothing (its DialTimeout may be go-redis's 5 s, not chosen
// for this), and bounds every call by the Timeout.
func envFor(client redis.Scripter, now func() time.Time) env {
	if e, ok := client.(backend.Env); ok {
		return env{clock: e, tr: e, rand: e.Float64, sim: e, connect: DefaultDialTimeout}
	}
	e := runnerEnv(scriptRunner{client}, now)
	e.connect = 0
	if c, ok := client.(*redis.Client); ok {
		if d, ok := ourClients.Load(weak.Make(c)); ok {
			e.connect = d.(time.Duration)
		}
	}
	return e
}

// ourClients holds the DialTimeout of the clients NewClientWith made, until
// they are collected.
var ourClients sync.Map // weak.Pointer[redis.Client] → time.Duration

// remember records c, made by NewClientWith with the dial bound d.
func remember(c *redis.Client, d time.Duration) {
	k := weak.Make(c)
	ourClients.Store(k, d)
	runtime.AddCleanup(c, func(k weak.Pointer[redis.Client]) { ourClients.Delete(k) }, k)
}

// runnerEnv returns the production env on r: the clock is now (nil means
// time.Now) with time.AfterFunc, and each call runs on a goroutine of its own;
// a connection takes up to DefaultDialTimeout to set up (envFor says what a
// client's does).
func runnerEnv(r runner, now func() time.Time) env {
	if now == nil {
		now = time.Now
	}
	return env{clock: sysClock{now}, tr: goTransport{r}, connect: DefaultDialTimeout}
}

// attach hands the harness a limiter's asynchronous core.
func (e env) attach(core any) {
	if e.sim != nil {
		e.sim.Attach(core)
	}
}

// sysClock is the production clock.
type sysClock struct{ now func() time.Time }

func (c sysClock) Now() time.Time { return c.now() }

func (sysClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// goTransport runs each call on a goroutine of its own, with a context that
// ends at the timeout (a client that honours it frees its connection then;
// the limiter does not wait for it anyway).
type goTransport struct{ r runner }

func (t goTransport) Send(c backend.Call, timeout time.Duration, done func(backend.Reply, error)) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		r, err := t.r.run(ctx, c)
		cancel()
		done(r, err)
	}()
}

// scriptRunner runs the Lua scripts with EVALSHA (EVAL on NOSCRIPT) and
// checks every reply.
type scriptRunner struct{ c redis.Scripter }

func (s scriptRunner) run(ctx context.Context, c backend.Call) (backend.Reply, error) {
	switch c.Script {
	case backend.GCRA:
		r, err := s.gcra(ctx, c.Quota, c.GCRA)
		return backend.Reply{GCRA: r}, err
	case backend.GCRAReturn:
		r, err := s.gcraReturn(ctx, c.Quota, c.Return)
		return backend.Reply{Return: r}, err
	case backend.Budget:
		r, err := s.budget(ctx, c.Budget, c.BudgetArgs)
		return backend.Reply{Budget: r}, err
	case backend.Cooldown:
		r, err := s.cooldown(ctx, c.Cooldown, c.HintMS)
		return backend.Reply{Cooldown: r}, err
	case backend.Rate:
		r, err := s.rate(ctx, c.RateKey, c.RateArgs)
		return backend.Reply{Rate: r}, err
	}
	return backend.Reply{}, fmt.Errorf("redisretry: unknown script %v", c.Script)
}

func (s scriptRunner) gcra(ctx context.Context, k backend.QuotaKeys, a backend.GCRAArgs) (backend.GCRAReply, error) {
	v, err := gcraScript.Run(ctx, s.c, []string{k.TAT, k.Members}, a.Inc, a.Tol, a.MaxWait, a.Member, a.MemberTTL, a.Offset, a.Until, a.Limit, lazyArg(a.Lazy), liveArg(a.Live)).Result()
	if err != nil {
		return backend.GCRAReply{}, err
	}
	n, other, ok := intsAndText(v, 6)
	if !ok {
		return backend.GCRAReply{}, unexpected("gcra.lua", v)
	}
	r := backend.GCRAReply{OK: n[0] == 1, Wait: n[1], From: n[2], To: n[3], Now: n[4], Members: n[5], Other: other}
	if (n[0] != 0 && n[0] != 1) || !r.Valid(a) {
		return backend.GCRAReply{}, unexpected("gcra.lua", v)
	}
	return r, nil
}

// lazyArg is gcra.lua's ARGV[9] for GCRAArgs.Lazy.
func lazyArg(lazy bool) string {
	if lazy {
		return "lazy"
	}
	return ""
}

// liveArg is gcra.lua's ARGV[10] for GCRAArgs.Live.
func liveArg(live bool) string {
	if live {
		return "live"
	}
	return ""
}

func (s scriptRunner) gcraReturn(ctx context.Context, k backend.QuotaKeys, a backend.ReturnArgs) (backend.ReturnReply, error) {
	v, err := gcraReturnScript.Run(ctx, s.c, []string{k.TAT, k.Members}, a.To, a.Unused, a.Member, a.MemberTTL).Result()
	if err != nil {
		return backend.ReturnReply{}, err
	}
	n, ok := ints(v, 2)
	if !ok || (n[0] != 0 && n[0] != 1) || (a.Member == "") != (n[1] == -1) || n[1] < -1 {
		return backend.ReturnReply{}, unexpected("gcra_return.lua", v)
	}
	return backend.ReturnReply{Returned: n[0] == 1, Members: n[1]}, nil
}

func (s scriptRunner) budget(ctx context.Context, k backend.BudgetKeys, a backend.BudgetArgs) (backend.BudgetReply, error) {
	v, err := budgetScript.Run(ctx, s.c, []string{k.Requests, k.Retries, k.Config},
		a.SlotMS, a.Slots, backend.FormatFloat(a.Ratio), backend.FormatFloat(a.Floor),
		a.Add, a.Want, a.Back, a.BackEpoch).Result()
	if err != nil {
		return backend.BudgetReply{}, err
	}
	n, other, ok := intsAndText(v, 5)
	if !ok || n[0] < 0 || n[0] > a.Want || n[2] < 0 || n[3] < 0 || n[4] <= 0 || n[1] != n[4]/a.SlotMS {
		return backend.BudgetReply{}, unexpected("budget.lua", v)
	}
	return backend.BudgetReply{Granted: n[0], Epoch: n[1], Requests: n[2], Retries: n[3], Now: n[4], Other: other}, nil
}

func (s scriptRunner) cooldown(ctx context.Context, key string, hintMS int64) (backend.CooldownReply, error) {
	v, err := cooldownScript.Run(ctx, s.c, []string{key}, hintMS).Result()
	if err != nil {
		return backend.CooldownReply{}, err
	}
	n, ok := ints(v, 2)
	if !ok || n[0] < 0 || n[1] <= 0 {
		return backend.CooldownReply{}, unexpected("cooldown.lua", v)
	}
	return backend.CooldownReply{Remaining: n[0], Now: n[1]}, nil
}

func (s scriptRunner) rate(ctx context.Context, key string, a backend.RateArgs) (backend.RateReply, error) {
	v, err := rateScript.Run(ctx, s.c, []string{key}, a.Epoch, a.Used, a.Sent, a.Beta, a.Recovery, a.Floor, a.Ceiling, a.TTL, a.Hold, a.Served, a.Rejected).Result()
	if err != nil {
		return backend.RateReply{}, err
	}
	n, ok := ints(v, 5)
	if !ok || (n[2] != 0 && n[2] != 1) {
		return backend.RateReply{}, unexpected("rate.lua", v)
	}
	r := backend.RateReply{Rate: n[0], Epoch: n[1], Cut: n[2] == 1, Now: n[3], Meas: n[4]}
	if !r.Valid(a) {
		return backend.RateReply{}, unexpected("rate.lua", v)
	}
	return r, nil
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

// intsAndText checks that v is an array of n integers and then a string
// (the limit or configuration the keys were last written with: the replies'
// Other), and returns them.
func intsAndText(v any, n int) ([]int64, string, bool) {
	a, ok := v.([]any)
	if !ok || len(a) != n+1 {
		return nil, "", false
	}
	text, ok := a[n].(string)
	if !ok {
		return nil, "", false
	}
	out, ok := ints(a[:n], n)
	return out, text, ok
}

// unexpected is the error for a reply of the wrong shape (style rule 4).
func unexpected(name string, v any) error {
	return fmt.Errorf("redisretry: %s: unexpected reply %v", name, v)
}
