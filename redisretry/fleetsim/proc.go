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
	auto     backend.AutoCore
	q        *redisretry.Quota
	a        *redisretry.AutoQuota
	aws      *adaptive // Config.Adaptive
	b        *redisretry.Budget
	d        *redisretry.Cooldown

	admitted int64   // attempts sent after the warmup
	calls    int64   // calls begun after the warmup
	firsts   int64   // of them, those whose first attempt was sent
	late     []int   // replies already made late, per fault
	up       int64   // when its first connection is up (SlowConnect; 0: not asked yet)
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
	case backend.AutoCore: // before CooldownCore, whose methods it has too
		p.auto = c
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
	errTimeout   = errors.New("fleetsim: read tcp: i/o timeout (Redis did not answer)")
)

// Send carries a script call to the shared Store and its reply back, with
// the configured latency and the faults in force. timeout is when the
// client stops waiting (the limiter's bound plus a connection's setup): a
// reply that would come later is lost, the client reports an i/o timeout
// then.
func (p *proc) Send(c backend.Call, timeout time.Duration, done func(backend.Reply, error)) {
	s := p.s
	if p.dead {
		return
	}
	s.count(c)
	sent := s.now
	giveUp := sent + int64(timeout)
	if s.partitioned(p, sent) {
		// The client gives up at its deadline.
		s.q.push(giveUp, p, func() { done(backend.Reply{}, errPartition) })
		return
	}
	leave := max(sent, s.connected(p, sent))
	extra := s.lateBy(p, sent)
	s.q.push(leave+s.sample(s.cfg.Redis), nil, func() {
		run := func() {
			back := s.now + s.sample(s.cfg.Redis) + int64(extra)
			if s.down(s.now) {
				s.reply(p, back, giveUp, backend.Reply{}, errRefused, done)
				return
			}
			r := s.store.Apply(s.epoch.Add(time.Duration(s.now)), c)
			s.observe(c, r)
			s.reply(p, back, giveUp, r, nil, done)
		}
		if end, stalled := s.stalled(s.now); stalled {
			s.q.push(end, nil, run) // after the calls that came before it
			return
		}
		run()
	})
}

// reply delivers a reply at back, or the client's i/o timeout at giveUp if
// that comes first (a reply after it is lost).
func (s *sim) reply(p *proc, back, giveUp int64, r backend.Reply, err error, done func(backend.Reply, error)) {
	if back > giveUp {
		s.q.push(max(giveUp, s.now), p, func() { done(backend.Reply{}, errTimeout) })
		return
	}
	s.q.push(back, p, func() { done(r, err) })
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
