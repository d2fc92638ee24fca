package fleetsim

import (
	"math"
	"slices"
	"time"
)

// Result is what a run measured. Rates, shares and waits count from the
// Warmup on; the windows and the series cover the whole run.
type Result struct {
	Name      string  `json:"name"`
	Processes int     `json:"processes"`
	Seconds   float64 `json:"seconds"`       // the run's Duration
	Measured  float64 `json:"measured_s"`    // Duration − Warmup
	QuotaRate float64 `json:"quota_per_s"`   // the quota's Rate per second
	Quota     string  `json:"quota"`         // the quota's Limit, e.g. "600/1m0s"; "auto" (or "auto:" and its Ceiling), "adaptive" or "none"
	Lease     int64   `json:"lease"`         // QuotaConfig.Lease (0: the default)
	Events    int64   `json:"events"`        // events the run processed
	Seed      uint64  `json:"seed"`          // Config.Seed
	Offered   float64 `json:"offered_per_s"` // calls begun per second

	// Calls begun after the Warmup, and how they ended.
	Calls     int64 `json:"calls"`
	Admitted  int64 `json:"admitted_calls"` // their first attempt was sent
	Succeeded int64 `json:"succeeded"`
	// RefusedDeadline counts calls a pacer refused because its start
	// would not come before the deadline (or Redis did not answer before
	// it); RefusedMeetable those of them that one first-come-first-served
	// queue for the whole fleet, at the quota's rate with no slot wasted,
	// would have started before their deadline (the reference: every call
	// in the order they began).
	RefusedDeadline int64 `json:"refused_deadline"`
	RefusedMeetable int64 `json:"refused_meetable"`
	// RefusedClear counts those of RefusedMeetable that the reference
	// would have started at least one slot (the quota's interval for one
	// request) before their deadline. The reference decides with no
	// latency; a limiter decides a round trip later, when the schedule
	// holds the reservations made meanwhile: at saturation, where the
	// fleet's queue ends about at the deadline, a call that the reference
	// starts within one slot of its deadline is a tie that a round trip
	// decides either way.
	RefusedClear int64 `json:"refused_clear"`
	// RefusedSaturated counts calls an AutoQuota refused because their
	// slot was more than its MaxWait away (redisretry.ErrSaturated: the
	// fleet asked for more than the rate it learnt); RefusedOther calls a
	// pacer refused otherwise (fail-closed, a closed limiter); GaveUp
	// those that ran out of attempts, budget or time between attempts;
	// Expired those whose deadline came during an attempt.
	RefusedSaturated int64 `json:"refused_saturated"`
	RefusedOther     int64 `json:"refused_other"`
	GaveUp           int64 `json:"gave_up"`
	Expired          int64 `json:"expired"`

	// Attempts is every attempt sent after the Warmup (retries included);
	// Rejected those the server answered 429.
	Attempts int64 `json:"attempts"`
	Rejected int64 `json:"rejected_429"`

	// Utilisation is attempts sent per second ÷ min(calls offered per
	// second, the quota's rate).
	Utilisation float64 `json:"utilisation"`
	// RefusedShare is RefusedDeadline ÷ Calls, MeetableShare
	// RefusedMeetable ÷ Calls, ClearShare RefusedClear ÷ Calls.
	RefusedShare  float64 `json:"refused_share"`
	MeetableShare float64 `json:"meetable_share"`
	ClearShare    float64 `json:"clear_share"`
	// WaitP50 and WaitP99 are the waits of the admitted calls, from the
	// call's start to its first attempt (cooldown and quota), in seconds.
	WaitP50 float64 `json:"wait_p50_s"`
	WaitP99 float64 `json:"wait_p99_s"`
	// Jain is Jain's fairness index of the attempts sent per process
	// (1: equal shares; 1/Processes: one process had all). With open-loop
	// demand it cannot exceed the index of the calls each process offered
	// (Poisson demand of 81 calls per process: 0.988), whatever the
	// limiter.
	Jain float64 `json:"jain"`
	// JainShare is Jain's index of the share of its own calls each process
	// got started (first attempts sent ÷ calls begun, over the processes
	// that began calls): 1 when every process is served alike whatever its
	// demand drew.
	JainShare float64 `json:"jain_share"`

	// MaxSecond is the most requests that reached the server in any
	// sliding second, MaxPeriod in any sliding window of the quota's
	// Period; SecondsOver counts whole seconds (from the start) in which
	// more than the quota's rate + 2 % reached it. MaxSecondStarts and
	// SecondsOverStarts count the same by the attempts' starts (the
	// processes' side, without the network).
	MaxSecond         int64 `json:"max_per_second"`
	MaxPeriod         int64 `json:"max_per_period"`
	SecondsOver       int64 `json:"seconds_over"`
	MaxSecondStarts   int64 `json:"max_per_second_starts"`
	SecondsOverStarts int64 `json:"seconds_over_starts"`

	// RoundTrips is the Redis calls sent after the Warmup, by script:
	// gcra, gcra_return, budget, cooldown, rate. PerAttempt is their sum ÷
	// Attempts.
	RoundTrips RoundTrips `json:"round_trips"`
	PerAttempt float64    `json:"round_trips_per_attempt"`
	// SlotsPerAttempt is the schedule the quota reserved in Redis after
	// the Warmup, in slots of one request, ÷ Attempts: 1 when every slot
	// reserved was used.
	SlotsPerAttempt float64 `json:"slots_per_attempt"`
	// AheadMax is how far past the server's now the schedule ran, at most
	// (seconds, after the Warmup).
	AheadMax float64 `json:"ahead_max_s"`

	// BudgetCounted is the requests the budgets counted in Redis after
	// the Warmup (their flushes), to compare with Calls.
	BudgetCounted int64 `json:"budget_counted"`
	// CooldownWaitMax is the longest wait a cooldown asked for (seconds).
	CooldownWaitMax float64 `json:"cooldown_wait_max_s"`
	// Recovered is, per limiter, when one last went back to Redis
	// (seconds; -1: never), and InFallback how many were deciding without
	// Redis at the end.
	Recovered  PerLimiter[float64] `json:"recovered_s"`
	InFallback PerLimiter[int]     `json:"in_fallback"`

	// The limiters' counters, summed over the processes (see
	// redisretry.Stats), and the log lines they wrote: Unavailable of
	// them said Redis was unavailable.
	Fallbacks   int64 `json:"fallbacks"`
	Local       int64 `json:"local"`
	Errors      int64 `json:"errors"`
	LogLines    int64 `json:"log_lines"`
	Unavailable int64 `json:"unavailable_lines"`

	// Series, one value per Bin from time 0: requests per second that
	// reached the server, 429s per second, attempts started per second,
	// and the schedule's lead on the server's clock (seconds, the most in
	// the bin).
	BinS    float64   `json:"bin_s"`
	Load    []float64 `json:"load"`
	Rejects []float64 `json:"rejects"`
	Starts  []float64 `json:"starts"`
	Ahead   []float64 `json:"ahead_s"`

	// With a Server.Capacity: requests answered 200 per second (the
	// goodput), the server's capacity per second, and (Auto, Adaptive)
	// the rate the fleet paced at at the start of each bin: the mean of
	// the processes' learnt rates (Auto: one fleet-wide rate), or the sum
	// of their buckets' fill rates (Adaptive; 0 for a bucket not on yet).
	Goodput  []float64 `json:"goodput,omitempty"`
	Capacity []float64 `json:"capacity,omitempty"`
	Learnt   []float64 `json:"learnt,omitempty"`
	// Steps is, per step of the Server.Capacity, what the fleet got.
	Steps []StepResult `json:"steps,omitempty"`
}

// PerLimiter holds a value per kind of limiter.
type PerLimiter[T any] struct {
	Quota    T `json:"quota"`
	Budget   T `json:"budget"`
	Cooldown T `json:"cooldown"`
}

// RoundTrips counts Redis calls by script.
type RoundTrips struct {
	GCRA       int64 `json:"gcra"`
	GCRAReturn int64 `json:"gcra_return"`
	Budget     int64 `json:"budget"`
	Cooldown   int64 `json:"cooldown"`
	Rate       int64 `json:"rate"`
}

// Total is the sum.
func (r RoundTrips) Total() int64 { return r.GCRA + r.GCRAReturn + r.Budget + r.Cooldown + r.Rate }

// maxIn returns the most times of ts (sorted, ns) in any window of width w.
func maxIn(ts []int64, w int64) int64 {
	var best, j int
	for i := range ts {
		for ts[i]-ts[j] >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return int64(best)
}

// over counts the whole seconds whose count of ts (ns) is above limit.
func over(ts []int64, limit float64) int64 {
	var n int64
	sec := int64(-1)
	count := 0
	flush := func() {
		if float64(count) > limit {
			n++
		}
	}
	for _, t := range ts {
		if s := t / int64(time.Second); s != sec {
			if sec >= 0 {
				flush()
			}
			sec, count = s, 0
		}
		count++
	}
	if sec >= 0 {
		flush()
	}
	return n
}

// quantile returns the q-quantile of xs (sorted in place), nearest rank.
func quantile(xs []int64, q float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// jainF is Jain's fairness index of xs.
func jainF(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// jain is Jain's fairness index of xs.
func jain(xs []int64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}
