package fleetsim

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/enum"
	"github.com/backoffkit/retry/redisretry"
)

// Config describes one run: a fleet of processes, what each one asks for,
// the Redis they share, the API server whose quota they share, and the
// faults. Zero values are the documented defaults; Processes, Duration,
// Demand and either the Quota (at least its Key and Limit) or the
// Server's Capacity are required.
type Config struct {
	// Name labels the run in every report (e.g. "Lease 20").
	Name string

	// Processes is the number of processes, 1 to 100,000. Each has its own
	// limiters, built from the configs below exactly as users build them,
	// on a client of its own (its clock, its network to Redis).
	Processes int

	// Duration is how long the run lasts, in virtual time.
	Duration time.Duration

	// Warmup is left out of the rates, shares and waits (the leases' ramp,
	// the first calls). 0 means none.
	Warmup time.Duration

	// Seed seeds every random stream: a run is a function of its Config.
	Seed uint64

	// Quota, Budget and Cooldown are the configs each process's limiters
	// are built from (nil: that limiter is not used). The harness's own
	// clock and network replace time and Redis, so their Now fields are
	// not used; a nil Logger is replaced by one that counts the lines
	// (see Result.LogLines), a nil Cooldown Rand by a seeded one.
	Quota    *redisretry.QuotaConfig
	Budget   *redisretry.BudgetConfig
	Cooldown *redisretry.CooldownConfig

	// Auto, if not nil, paces each process with a redisretry.AutoQuota
	// built from it (a rate the fleet learns from its 429s) instead of a
	// Quota; Quota must then be nil and Server.Capacity set. Its Now is
	// not used; a nil Logger is replaced as the Quota's.
	Auto *redisretry.AutoQuotaConfig

	// Adaptive, if true, paces each process on its own as the AWS SDKs'
	// adaptive retry mode does (a token bucket whose rate CUBIC learns
	// from this process's 429s, capped at twice its measured send rate),
	// simulated here: the per-process counterpart of Auto. Quota and Auto
	// must then be nil and Server.Capacity set.
	Adaptive bool

	// Policy is every call's retry policy: Attempts and the waits (the
	// core's Backoff and hints, through retry.Policy.Next). Its Budget,
	// Throttle and Pacer must be nil and its Deadline 0 (the limiters
	// above and Demand.Deadline take their places). The zero Policy is
	// the core's defaults (retry.Google).
	Policy retry.Policy

	// Demand is what each process asks for.
	Demand Demand

	// Redis is the one-way latency between a process and Redis (each
	// way). The zero Dist means Min 100µs, Mean 300µs.
	Redis Dist

	// Server is the API server that enforces the quota.
	Server Server

	// Skew bounds each process's clock offset (uniform in ±Skew) from the
	// server's. 0 means none.
	Skew time.Duration

	// Faults happen during the run, in any order.
	Faults []Fault

	// Bin is the width of the time series' bins. 0 means 1 s.
	Bin time.Duration
}

// Demand is what each process asks for: calls arriving on their own (open
// loop, at Rate per second by Shape), or Callers that each call again when
// their last call ended (closed loop).
type Demand struct {
	// Shape is how open-loop calls arrive. The zero value is Poisson.
	Shape Shape
	// Rate is calls per second per process (Bursts: bursts per second;
	// Ramp: the rate it reaches at the end of the run).
	Rate float64
	// Size is the number of calls in a burst (Bursts). 0 means 10.
	Size int

	// Callers, if above 0, makes the demand a closed loop: that many
	// callers per process, each making its next call a think time after
	// its last one ended (Think, drawn by Shape: Poisson exponential,
	// Jittered uniform in 0.5 to 1.5 times it, else exactly it), or Pause
	// after one that was refused (gave up without being sent). Rate is
	// not used then.
	Callers int
	Think   time.Duration
	// Pause after a refused call. 0 means 1 s.
	Pause time.Duration

	// Together starts every process's first call at time 0 (a fleet
	// started at once). Otherwise each process starts at a random phase
	// within its first gap (closed loop: within the first think time, or
	// second if Think is 0).
	Together bool

	// Deadline is each call's deadline from its start (a context
	// deadline). 0 means none.
	Deadline time.Duration
}

// Shape is how open-loop calls arrive.
type Shape uint8

// Arrival shapes.
const (
	Poisson  Shape = iota // exponential gaps
	Constant              // one call every 1/Rate
	Jittered              // gaps uniform in 0.5 to 1.5 times 1/Rate
	Bursts                // Size calls at once every 1/Rate
	Ramp                  // Poisson at a rate rising from 0 to Rate over the run
)

var shapeNames = [...]string{"poisson", "constant", "jittered", "bursts", "ramp"}

// String returns the shape's name, e.g. "poisson".
func (s Shape) String() string { return enum.Name(s, "Shape", shapeNames[:]...) }

// Dist is a latency: Min plus an exponential tail of mean Mean−Min (Mean
// equal to Min: a constant).
type Dist struct {
	Min, Mean time.Duration
}

// Server is the API server whose quota the fleet shares: it answers a
// request at once when fewer than the quota's share of Window were answered
// in the last Window (sliding), else 429 with a RetryInfo of the time until
// one leaves the window, as a Google server does.
type Server struct {
	// Window is the sliding window the server counts in. 0 means 1 s.
	Window time.Duration
	// Grace is the share above the quota the server tolerates. 0 means
	// 2 % (the quota's default Slack); a negative value means none.
	Grace float64
	// Latency is the one-way latency between a process and the server.
	// The zero Dist means a constant 10ms.
	Latency Dist
	// Service is how long the server works on a request it answers 200.
	Service time.Duration
	// Capacity, if not empty, is what the server enforces instead of the
	// Quota's Limit: Capacity[i].PerSecond from Capacity[i].At on (the
	// first At must be 0), a hidden capacity that steps, as a shared pool
	// does. The run's reference rate (utilisation, seconds over) is the
	// first step's.
	Capacity []Step
}

// Step is a capacity of the server from At on, in requests per second.
type Step struct {
	At        time.Duration
	PerSecond float64
}

// Fault is something that goes wrong during a run.
type Fault struct {
	Kind FaultKind
	// At is when it starts, and For how long it lasts (Partition,
	// Restart, SlowReplies, Overload, Stall; 0 means until the end for
	// those).
	At, For time.Duration
	// Procs is how many processes it hits: the first Procs of them
	// (0 means all). Partition, SlowReplies, SlowConnect, Kill (0 means
	// 1), ClockStep (0 means 1).
	Procs int
	// Delay is the extra delay of a reply (SlowReplies), how long a
	// process's first connection takes to set up (SlowConnect), the step
	// of the clock (ClockStep, negative for back), or the RetryInfo of the
	// 429s (Overload).
	Delay time.Duration
	// Count is how many replies of each process come late (SlowReplies;
	// 0 means every reply within For).
	Count int
}

// FaultKind says what a [Fault] does.
type FaultKind uint8

// Faults.
const (
	// SlowReplies: the replies of Redis to Procs processes come Delay
	// late, the first Count of them sent within [At, At+For). At 0 with
	// Count 1: a cold start whose first call (dial, handshake, script
	// load) is slow.
	SlowReplies FaultKind = iota + 1
	// Partition: Procs processes cannot reach Redis during [At, At+For):
	// their calls get no reply (the client gives up at the limiter's
	// Timeout).
	Partition
	// Flush: Redis loses its data at At (FLUSHALL, an eviction).
	Flush
	// Restart: Redis loses its data at At and refuses connections until
	// At+For (a restart of a Redis that keeps no data).
	Restart
	// Kill: Procs processes vanish at At (SIGKILL: no Close, their leases
	// held until they expire on the schedule).
	Kill
	// ClockStep: the clock of Procs processes jumps by Delay at At (an
	// NTP step, a VM resumed). The harness's clocks have no separate
	// monotonic reading: every reading of the process's clock jumps, what
	// a limiter that keeps wall-clock times sees.
	ClockStep
	// Overload: the API server answers 429 to every request during
	// [At, At+For), with a RetryInfo of Delay (0: none).
	Overload
	// Stall: Redis stops during [At, At+For) (SIGSTOP): the calls that
	// reach it meanwhile run when it resumes, in the order they came, and
	// their replies go back then. A client that stopped waiting (the
	// limiter's bound of the call, plus its connection's setup) has given
	// up with an i/o timeout and closed its connection: the call runs all
	// the same, and its reply is lost.
	Stall
	// SlowConnect: the first connection of Procs processes takes Delay to
	// set up (the dial, a TLS handshake): every call they send before it
	// is up leaves when it is.
	SlowConnect
)

var faultNames = [...]string{"", "slow-replies", "partition", "flush", "restart", "kill", "clock-step", "overload", "stall", "slow-connect"}

// String returns the fault's name, e.g. "partition".
func (k FaultKind) String() string { return enum.Name(k, "FaultKind", faultNames[:]...) }

// Defaults.
const (
	defaultBin    = time.Second
	defaultPause  = time.Second
	defaultSize   = 10
	defaultWindow = time.Second
	defaultGrace  = 0.02
)

var (
	defaultRedis  = Dist{Min: 100 * time.Microsecond, Mean: 300 * time.Microsecond}
	defaultServer = Dist{Min: 10 * time.Millisecond, Mean: 10 * time.Millisecond}
)

// validLimiter checks the limiter config that field of a Config points to,
// if it is set: its error, if any, wrapped with the field's name.
func validLimiter[C any, P interface {
	*C
	Validate() error
}](field string, p P) error {
	if p == nil {
		return nil
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("fleetsim: invalid Config.%s: %w", field, err)
	}
	return nil
}

// Validate reports the first invalid field of c, naming it and its value.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("fleetsim: invalid Config.%s = %v: %s", field, v, want)
	}
	switch {
	case c.Processes < 1 || c.Processes > 100_000:
		return bad("Processes", c.Processes, "want 1 to 100,000")
	case c.Duration <= 0 || c.Duration > 7*24*time.Hour:
		return bad("Duration", c.Duration, "want more than 0, at most 168h")
	case c.Warmup < 0 || c.Warmup >= c.Duration:
		return bad("Warmup", c.Warmup, "want 0 or more, less than the Duration")
	case c.Bin < 0 || (c.Bin > 0 && c.Duration/c.Bin > 1_000_000):
		return bad("Bin", c.Bin, "want 0 (1s) or more, at most 1,000,000 bins")
	case c.Skew < 0 || c.Skew > time.Hour:
		return bad("Skew", c.Skew, "want 0 to 1h")
	case c.Quota == nil && len(c.Server.Capacity) == 0:
		return bad("Quota", "nil", "want the quota's config (its Key and Limit at least) or a Server.Capacity: the server enforces one")
	case c.Auto != nil && (c.Quota != nil || c.Adaptive):
		return bad("Auto", "with a Quota or Adaptive", "want one way to pace: Quota, Auto or Adaptive")
	case c.Adaptive && c.Quota != nil:
		return bad("Adaptive", true, "want one way to pace: Quota, Auto or Adaptive")
	}
	if err := cmp.Or(validLimiter("Quota", c.Quota), validLimiter("Auto", c.Auto)); err != nil {
		return err
	}
	for i, st := range c.Server.Capacity {
		switch {
		case math.IsNaN(st.PerSecond) || st.PerSecond <= 0 || st.PerSecond > 1e7:
			return bad(fmt.Sprintf("Server.Capacity[%d].PerSecond", i), st.PerSecond, "want above 0, at most 1e7")
		case i == 0 && st.At != 0:
			return bad("Server.Capacity[0].At", st.At, "want 0")
		case i > 0 && st.At <= c.Server.Capacity[i-1].At:
			return bad(fmt.Sprintf("Server.Capacity[%d].At", i), st.At, "want after the step before")
		}
	}
	if err := cmp.Or(validLimiter("Budget", c.Budget), validLimiter("Cooldown", c.Cooldown)); err != nil {
		return err
	}
	p := c.Policy
	switch {
	case p.Budget != nil || p.Throttle != nil || p.Pacer != nil:
		return bad("Policy", "with a Budget, Throttle or Pacer", "want none: the fleet's limiters come from Config.Quota, Budget and Cooldown")
	case p.Deadline != 0:
		return bad("Policy.Deadline", p.Deadline, "want 0: set Demand.Deadline")
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("fleetsim: invalid Config.Policy: %w", err)
	}
	d := c.Demand
	switch {
	case d.Callers < 0 || int64(d.Callers)*int64(c.Processes) > 1_000_000:
		return bad("Demand.Callers", d.Callers, "want 0 (open loop) or more, at most 1,000,000 in all")
	case d.Callers == 0 && (d.Rate <= 0 || d.Rate > 1e6):
		return bad("Demand.Rate", d.Rate, "want calls per second per process above 0, at most 1e6 (or Callers for a closed loop)")
	case d.Shape > Ramp:
		return bad("Demand.Shape", d.Shape, "want Poisson, Constant, Jittered, Bursts or Ramp")
	case d.Size < 0 || d.Size > 100_000:
		return bad("Demand.Size", d.Size, "want 0 (10) to 100,000")
	case d.Think < 0 || d.Pause < 0:
		return bad("Demand.Think", fmt.Sprint(d.Think, ", Pause ", d.Pause), "want 0 or more")
	case d.Deadline < 0:
		return bad("Demand.Deadline", d.Deadline, "want 0 (none) or more")
	}
	for _, x := range []struct {
		name string
		d    Dist
	}{{"Redis", c.Redis}, {"Server.Latency", c.Server.Latency}} {
		if x.d.Min < 0 || x.d.Mean < x.d.Min || x.d.Mean > time.Minute {
			return bad(x.name, fmt.Sprintf("{Min %v, Mean %v}", x.d.Min, x.d.Mean), "want 0 <= Min <= Mean <= 1m")
		}
	}
	s := c.Server
	switch {
	case s.Window < 0 || s.Window > 24*time.Hour:
		return bad("Server.Window", s.Window, "want 0 (1s) to 24h")
	case s.Grace > 10:
		return bad("Server.Grace", s.Grace, "want at most 10 (1,000 %)")
	case s.Service < 0 || s.Service > time.Hour:
		return bad("Server.Service", s.Service, "want 0 to 1h")
	}
	for i, f := range c.Faults {
		field := fmt.Sprintf("Faults[%d]", i)
		switch {
		case f.Kind < SlowReplies || f.Kind > SlowConnect:
			return bad(field+".Kind", f.Kind, "want SlowReplies, Partition, Flush, Restart, Kill, ClockStep, Overload, Stall or SlowConnect")
		case f.At < 0 || f.For < 0:
			return bad(field+".At", fmt.Sprint(f.At, ", For ", f.For), "want 0 or more")
		case f.Procs < 0 || f.Procs > c.Processes:
			return bad(field+".Procs", f.Procs, fmt.Sprintf("want 0 to Processes (%d)", c.Processes))
		case f.Count < 0:
			return bad(field+".Count", f.Count, "want 0 or more")
		case f.Kind == SlowReplies && (f.Delay <= 0 || f.Delay > time.Hour):
			return bad(field+".Delay", f.Delay, "want the replies' extra delay, above 0, at most 1h")
		case f.Kind == SlowConnect && (f.Delay <= 0 || f.Delay > time.Hour):
			return bad(field+".Delay", f.Delay, "want the first connection's setup, above 0, at most 1h")
		case f.Kind == ClockStep && (f.Delay == 0 || f.Delay > 24*time.Hour || f.Delay < -24*time.Hour):
			return bad(field+".Delay", f.Delay, "want the clock's step, not 0, at most ±24h")
		case f.Kind == Overload && (f.Delay < 0 || f.Delay > time.Hour):
			return bad(field+".Delay", f.Delay, "want the 429s' RetryInfo, 0 (none) to 1h")
		}
	}
	return nil
}

// resolved returns c with its defaults filled in.
func (c Config) resolved() Config {
	if c.Bin == 0 {
		c.Bin = defaultBin
	}
	if c.Redis == (Dist{}) {
		c.Redis = defaultRedis
	}
	if c.Server.Latency == (Dist{}) {
		c.Server.Latency = defaultServer
	}
	if c.Server.Window == 0 {
		c.Server.Window = defaultWindow
	}
	switch {
	case c.Server.Grace == 0:
		c.Server.Grace = defaultGrace
	case c.Server.Grace < 0:
		c.Server.Grace = 0
	}
	if c.Demand.Size == 0 {
		c.Demand.Size = defaultSize
	}
	if c.Demand.Pause == 0 {
		c.Demand.Pause = defaultPause
	}
	c.Policy = c.Policy.Resolved()
	return c
}
