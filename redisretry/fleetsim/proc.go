package fleetsim

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/redisretry"
	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// proc is one simulated process: its clock, its network to Redis, its
// limiters and its retry policy. It is the client its limiters are built
// on: a redis.Scripter that runs no script itself, and a backend.Env, by
// which the limiters take the process's clock and network and hand over
// their asynchronous cores.
type proc struct {
	s      *sim
	id     int
	offset time.Duration // the clock's offset from the server's (skew, steps)
	dead   bool          // killed: its events are dropped
	rng    *rand.Rand
	policy retry.Policy

	quota    backend.QuotaCore
	budget   backend.BudgetCore
	cooldown backend.CooldownCore
	q        *redisretry.Quota
	b        *redisretry.Budget
	d        *redisretry.Cooldown

	admitted int64   // attempts sent after the warmup
	late     []int   // replies already made late, per fault
	seq      float64 // Jittered and Ramp: the next arrival's state
}

// Now is the process's clock: the run's virtual time on its own offset.
func (p *proc) Now() time.Time { return p.s.epoch.Add(time.Duration(p.s.now) + p.offset) }

// AfterFunc runs f after d of virtual time, unless the process was killed.
func (p *proc) AfterFunc(d time.Duration, f func()) func() bool {
	return p.s.q.push(p.s.now+int64(max(d, 0)), p, f).stop
}

// Float64 is the process's random stream.
func (p *proc) Float64() float64 { return p.rng.Float64() }

// Attach takes a limiter's asynchronous core.
func (p *proc) Attach(core any) {
	switch c := core.(type) {
	case backend.QuotaCore:
		p.quota = c
	case backend.BudgetCore:
		p.budget = c
	case backend.CooldownCore:
		p.cooldown = c
	}
}

// Errors the simulated network gives.
var (
	errRefused   = errors.New("fleetsim: dial tcp: connect: connection refused (Redis restarting)")
	errPartition = errors.New("fleetsim: i/o timeout (no route to Redis)")
)

// Send carries a script call to the shared Store and its reply back, with
// the configured latency and the faults in force.
func (p *proc) Send(c backend.Call, timeout time.Duration, done func(backend.Reply, error)) {
	s := p.s
	if p.dead {
		return
	}
	s.count(c)
	sent := s.now
	if s.partitioned(p, sent) {
		// The client gives up at its deadline, the limiter's timeout.
		s.q.push(sent+int64(timeout), p, func() { done(backend.Reply{}, errPartition) })
		return
	}
	extra := s.lateBy(p, sent)
	s.q.push(sent+s.sample(s.cfg.Redis), nil, func() {
		back := s.now + s.sample(s.cfg.Redis) + int64(extra)
		if s.down(s.now) {
			s.q.push(back, p, func() { done(backend.Reply{}, errRefused) })
			return
		}
		r := s.store.Apply(s.epoch.Add(time.Duration(s.now)), c)
		s.observe(c, r)
		s.q.push(back, p, func() { done(r, nil) })
	})
}

// The process is a redis.Scripter only so that NewQuota, NewBudget and
// NewCooldown take it: its limiters send their calls through Send.

func (p *proc) cmd(ctx context.Context) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetErr(errors.New("fleetsim: a simulated process runs no Redis command"))
	return c
}

func (p *proc) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return p.cmd(ctx)
}

func (p *proc) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return p.cmd(ctx)
}

func (p *proc) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return p.cmd(ctx)
}

func (p *proc) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return p.cmd(ctx)
}

func (p *proc) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	c := redis.NewBoolSliceCmd(ctx)
	c.SetErr(errors.New("fleetsim: a simulated process runs no Redis command"))
	return c
}

func (p *proc) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	c := redis.NewStringCmd(ctx)
	c.SetErr(errors.New("fleetsim: a simulated process runs no Redis command"))
	return c
}
