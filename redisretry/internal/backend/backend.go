// Package backend is the Redis side of redisretry's limiters as plain data
// and plain functions: the calls of the Lua scripts and their replies (the
// scripts' protocol), the Go models of the scripts, an in-memory server that
// runs the scripts on those models ([Store]), and the two seams through
// which a limiter reaches time and Redis ([Clock], [Transport]).
//
// redisretry runs the scripts on a real server in production, and on a Store
// in its tests; the fleet harness (redisretry/fleetsim) runs the real
// limiters on a Store behind a simulated network, in virtual time. A test in
// redisretry runs one table of cases against each model and its script on a
// real redis-server: the Store is what the scripts do.
//
// The package is internal: nothing outside the redisretry module can name
// its types, so nothing outside can implement [Env], the optional ability by
// which a client value hands a limiter its clock and transport.
package backend

import (
	"strconv"
	"time"

	"github.com/backoffkit/retry/internal/enum"
)

// Script names one of the Lua scripts.
type Script uint8

// The scripts (redisretry/lua/*.lua).
const (
	GCRA       Script = iota + 1 // gcra.lua: a block of the quota's schedule, and a heartbeat
	GCRAReturn                   // gcra_return.lua: a process leaves: the unused end of its block given back, its member removed
	Budget                       // budget.lua: requests counted, retry permits granted
	Cooldown                     // cooldown.lua: a hint published, the cooldown read
	Rate                         // rate.lua: the fleet's learnt rate, read or cut
)

var scriptNames = [...]string{"", "gcra.lua", "gcra_return.lua", "budget.lua", "cooldown.lua", "rate.lua"}

// String returns the script's file name, e.g. "gcra.lua".
func (s Script) String() string { return enum.Name(s, "Script", scriptNames[:]...) }

// QuotaKeys are a quota's Redis keys: the schedule and the members.
type QuotaKeys struct{ TAT, Members string }

// BudgetKeys are a budget's Redis keys: the requests and the retry permits
// counted per slot, and the configuration of the window last written.
type BudgetKeys struct{ Requests, Retries, Config string }

// Every key of one limiter shares the hash tag {key}, so that a script's
// keys live in one Cluster slot.

// NewQuotaKeys returns the keys of the quota named key.
func NewQuotaKeys(key string) QuotaKeys {
	return QuotaKeys{TAT: "{" + key + "}:quota", Members: "{" + key + "}:quota:members"}
}

// NewBudgetKeys returns the keys of the budget named key.
func NewBudgetKeys(key string) BudgetKeys {
	return BudgetKeys{Requests: "{" + key + "}:budget:requests", Retries: "{" + key + "}:budget:retries", Config: "{" + key + "}:budget:config"}
}

// CooldownKey returns the key of the cooldown named key.
func CooldownKey(key string) string { return "{" + key + "}:cooldown" }

// GCRAArgs are gcra.lua's ARGV.
type GCRAArgs struct {
	Inc, Tol, MaxWait int64 // microseconds; MaxWait -1 for none
	Member            string
	MemberTTL         int64 // milliseconds
	// Offset (µs) is where the block may start at the earliest, from the
	// server's now: after it (> 0) for callers that cannot use a slot
	// before the reply reaches them, or before it (< 0) where the schedule
	// is free then, to reserve requests a process already let start
	// without Redis.
	Offset int64
	// Until (µs of the server's time; 0 for none) is when the caller stops
	// waiting for the reply: a call that runs later (a Redis stopped with
	// SIGSTOP runs what it received when it resumes) reserves nothing.
	Until int64
	// Limit is the calling process's limit (e.g. "40/1s"; "" for none),
	// kept with the schedule by a call that reserves: a call under another
	// limit is told it (GCRAReply.Other).
	Limit string
	// Lazy skips the heartbeat (gcra.lua's ARGV[9]): the members are then
	// as the schedule last counted them, unless it holds no count (then
	// the call is a heartbeat all the same). The zero value, a heartbeat,
	// adds Member to the members and counts them.
	Lazy bool
	// Live reserves only on a schedule that runs ahead of the server's now
	// (gcra.lua's ARGV[10]): a process reserving, at once, what it let
	// start while its replies came late, where the others drew the
	// schedule on (its price: they wait as much). On a schedule nobody
	// drew ahead of now (Redis was stopped for every process, or the
	// fleet is idle) it reserves nothing (ok 0): the process places the
	// debt back to when it started (Offset < 0) once Redis answers.
	Live bool
}

// GCRAReply is gcra.lua's reply.
type GCRAReply struct {
	OK                  bool
	Wait, From, To, Now int64 // microseconds
	Members             int64

	// Other is the limit (GCRAArgs.Limit) the schedule was last reserved
	// under, when it differs from this call's; "" if not (or if none was
	// kept).
	Other string
}

// Valid reports whether r is a reply the script can give for a: a server
// that answers something else (another script under the same name, a proxy
// that mangles replies) must not place blocks at absurd times.
func (r GCRAReply) Valid(a GCRAArgs) bool {
	const limit = 1 << 53 // µs: the script's numbers are exact below it
	switch {
	case r.Now <= 0 || r.Now >= limit || r.From < r.Now+min(a.Offset, 0) || r.To < r.From || r.To >= limit || r.Members < 0:
		return false
	case r.Wait != max(r.From-a.Tol, r.Now)-r.Now:
		return false
	case r.OK && a.Inc > 0:
		return r.To-r.From == a.Inc
	}
	return r.To == r.From
}

// ReturnArgs are gcra_return.lua's ARGV: the end of the block as gcra.lua
// returned it and the microseconds of it given back (0: none), and the
// process that leaves the members with the members' TTL (gcra.lua's
// GCRAArgs.Member and MemberTTL; Member "" for none).
type ReturnArgs struct {
	To, Unused int64 // microseconds
	Member     string
	MemberTTL  int64 // milliseconds
}

// ReturnReply is gcra_return.lua's reply.
type ReturnReply struct {
	// Returned says that the schedule was moved back.
	Returned bool
	// Members is the number of members after ReturnArgs.Member left (those
	// older than MemberTTL forgotten); -1 when no Member was named.
	Members int64
}

// BudgetArgs are budget.lua's ARGV.
type BudgetArgs struct {
	SlotMS, Slots              int64
	Ratio, Floor               float64
	Add, Want, Back, BackEpoch int64
}

// Config returns the window's configuration as budget.lua stores it: its
// first four ARGV as sent, joined by "/" (e.g. "500/20/0.2/100").
func (a BudgetArgs) Config() string {
	return BudgetConfig(a.SlotMS, a.Slots, a.Ratio, a.Floor)
}

// BudgetConfig returns a window's configuration as budget.lua stores it
// (see BudgetArgs.Config).
func BudgetConfig(slotMS, slots int64, ratio, floor float64) string {
	return strconv.FormatInt(slotMS, 10) + "/" + strconv.FormatInt(slots, 10) + "/" + FormatFloat(ratio) + "/" + FormatFloat(floor)
}

// FormatFloat formats a ratio or a floor as budget.lua's ARGV carries it.
func FormatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// BudgetReply is budget.lua's reply.
type BudgetReply struct {
	Granted  int64 // permits granted (counted in the current slot)
	Epoch    int64 // the current slot's epoch
	Requests int64 // requests in the window after the call
	Retries  int64 // permits in the window after the call
	Now      int64 // the server's time, milliseconds

	// Other is the configuration (BudgetArgs.Config) that the config key
	// held, when it differs from this call's; "" if not (or if it held
	// none).
	Other string
}

// CooldownReply is cooldown.lua's reply, in milliseconds.
type CooldownReply struct{ Remaining, Now int64 }

// Call is one call of a script: one round trip. Script says which; the
// fields of that script hold its keys and arguments, the others are zero.
type Call struct {
	Script Script

	Quota  QuotaKeys  // GCRA, GCRAReturn
	GCRA   GCRAArgs   // GCRA
	Return ReturnArgs // GCRAReturn

	Budget     BudgetKeys // Budget
	BudgetArgs BudgetArgs // Budget

	Cooldown string // Cooldown: the key
	HintMS   int64  // Cooldown: 0 only reads

	RateKey  string   // Rate: the key (RateKey)
	RateArgs RateArgs // Rate
}

// Reply is the reply to a [Call]: the field of its script is set.
type Reply struct {
	GCRA     GCRAReply     // GCRA
	Return   ReturnReply   // GCRAReturn
	Budget   BudgetReply   // Budget
	Cooldown CooldownReply // Cooldown
	Rate     RateReply     // Rate
}

// Clock is a limiter's time: what it reads and what it waits with. The
// production clock is the config's Now (time.Now) and time.AfterFunc.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f once d has passed, never before AfterFunc
	// returns. stop cancels the call: it reports whether it did (false
	// once f has been called or is being called).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Transport carries a limiter's script calls to Redis and their replies
// back. The production transport runs the script (EVALSHA) on a goroutine of
// its own with a context that ends at the timeout.
type Transport interface {
	// Send sends c. done is called exactly once, never before Send
	// returns, with the reply or the error; timeout is the limiter's bound
	// of the call (the limiter enforces it with its Clock whatever the
	// transport does: a reply after it is thrown away).
	Send(c Call, timeout time.Duration, done func(Reply, error))
}

// Env is the optional ability of a client value (the redis.Scripter given to
// NewQuota, NewBudget or NewCooldown) to stand for Redis and time: a limiter
// built on a client that implements Env takes its clock, its transport and
// its random numbers from it, and hands it its asynchronous core. The fleet
// harness implements it; users never see it.
type Env interface {
	Clock
	Transport
	// Float64 returns a uniform random number in [0, 1): the source of a
	// limiter whose config leaves Rand nil.
	Float64() float64
	// Attach receives the asynchronous core of each limiter built on the
	// client: a [QuotaCore], a [BudgetCore] or a [CooldownCore].
	Attach(core any)
}

// QuotaCore is a Quota's decision without blocking: done is called once,
// perhaps before Reserve returns, on the goroutine that decided.
type QuotaCore interface {
	// Reserve is Quota.Reserve for a request of n units.
	Reserve(n int64, earliest, deadline time.Time, done func(start time.Time, err error))
	// Close is Quota.Close: it gives the unused end of the lease back
	// and removes this process from the members; done is called when
	// that call is over.
	Close(done func())
}

// BudgetCore is a Budget's decision without blocking.
type BudgetCore interface {
	// Admit is Budget.AdmitContext with no context.
	Admit(retry bool, deadline time.Time, done func(admitted bool))
	// Cancel and Record are Budget.Cancel and Budget.Record.
	Cancel(retry bool)
	Record(ok bool)
}

// CooldownCore is a Cooldown's decision without blocking.
type CooldownCore interface {
	// Reserve is Cooldown.Reserve.
	Reserve(earliest, deadline time.Time, done func(start time.Time, err error))
	// Record is Cooldown.Record: done is called once the hint (if any)
	// was published.
	Record(err error, done func())
}

// AutoCore is an AutoQuota's decision without blocking.
type AutoCore interface {
	// Reserve is AutoQuota.Reserve.
	Reserve(earliest, deadline time.Time, done func(start time.Time, err error))
	// Record is AutoQuota.Record: done is called once its report (if
	// any) was sent.
	Record(err error, done func())
	// Rate is AutoQuota.Rate: the learnt rate paced at, per second.
	Rate() float64
}
