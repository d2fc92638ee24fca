// Package fleetmodel holds the Go models of redisretry's Lua scripts (the
// fleet quota's GCRA, the fleet budget's sliding window, the fleet cooldown),
// for the simulator: package sim lives in the root module, which has no
// requirements, and so cannot import redisretry (which needs go-redis).
//
// Each model is a pure function of the state and of now, in the script's
// units and arithmetic (microseconds for GCRA, milliseconds for the budget
// and the cooldown). A test in redisretry runs the scripts' shared tables of
// cases on a real server and on these models, and every output must be
// equal; it also compares these models with redisretry's own on random
// inputs.
package fleetmodel

import (
	"math"
	"math/bits"
	"time"
)

// GCRAResult is the outcome of one reservation on a quota's schedule.
type GCRAResult struct {
	OK   bool          // the block was reserved
	Wait time.Duration // from now until the block's first request may start (or would have)
	// From and To bound the block on the schedule: To is the new
	// theoretical arrival time (TAT); From equals To when nothing was
	// reserved.
	From, To time.Time
}

// GCRA models lua/gcra.lua: reserving inc of the schedule for a block whose
// first request may start tol before its place. tat is the schedule's
// theoretical arrival time (the zero Time for a key that does not exist), as
// of now: the script moves it back when the server's clock went back since
// it was written, which a simulator's clock never does.
// The first request may start at max(now, max(tat, now) − tol); the block is
// reserved only if that is less than maxWait after now (maxWait < 0: no
// limit), and then the TAT becomes max(tat, now) + inc. Times are taken to
// the microsecond, as the script takes them.
func GCRA(tat, now time.Time, inc, tol, maxWait time.Duration) GCRAResult {
	var t int64
	if !tat.IsZero() {
		t = tat.UnixMicro()
	}
	n := now.UnixMicro()
	if t < n {
		t = n
	}
	start := max(t-micros(tol), n)
	wait := start - n
	r := GCRAResult{Wait: time.Duration(wait) * time.Microsecond, From: time.UnixMicro(t), To: time.UnixMicro(t)}
	if maxWait >= 0 && wait >= int64(maxWait/time.Microsecond) {
		return r
	}
	r.OK = true
	r.To = time.UnixMicro(t + micros(inc))
	return r
}

func micros(d time.Duration) int64 { return int64(max(d, 0) / time.Microsecond) }

// Interval is the share of the schedule that units take under a quota of
// rate units per period: units × period / rate, rounded up to the
// microsecond (so that a fleet paced by it never goes above the rate).
func Interval(rate int64, period time.Duration, units int64) time.Duration {
	if units <= 0 || rate <= 0 || period <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(units), uint64(period/time.Microsecond))
	if hi >= uint64(rate) {
		return maxSchedule
	}
	q, r := bits.Div64(hi, lo, uint64(rate))
	if r != 0 {
		q++
	}
	if q > uint64(maxSchedule/time.Microsecond) {
		return maxSchedule
	}
	return time.Duration(q) * time.Microsecond
}

// maxSchedule bounds a reservation, as redisretry does.
const maxSchedule = 100 * 365 * 24 * time.Hour

// BudgetWindow models lua/budget.lua: the fleet's requests and retry
// permits counted in Slots slots of Slot each, keyed by epoch (time / Slot).
type BudgetWindow struct {
	Slot  time.Duration // the width of a slot (whole milliseconds)
	Slots int64         // the number of slots in the window
	Ratio float64       // retries allowed per request
	Floor float64       // retries allowed per window whatever the traffic

	// Requests and Retries count per epoch; nil maps are made on first use.
	Requests, Retries map[int64]int64
}

// BudgetCall is what one call of the budget script sends.
type BudgetCall struct {
	Add           int64 // requests to count in the current slot
	Want          int64 // retry permits wanted
	GiveBack      int64 // unused permits given back
	GiveBackEpoch int64 // the epoch the given-back permits were granted in
}

// BudgetReply is what one call of the budget script returns.
type BudgetReply struct {
	Granted  int64 // permits granted (counted in the current slot)
	Epoch    int64 // the current slot's epoch
	Requests int64 // requests in the window after the call
	Retries  int64 // permits in the window after the call
}

// Apply runs one call of the script at time now (taken to the millisecond).
func (w *BudgetWindow) Apply(now time.Time, c BudgetCall) BudgetReply {
	if w.Requests == nil {
		w.Requests = map[int64]int64{}
	}
	if w.Retries == nil {
		w.Retries = map[int64]int64{}
	}
	width := max(int64(w.Slot/time.Millisecond), 1)
	epoch := floorDiv(now.UnixMilli(), width)
	oldest := epoch - w.Slots + 1
	if c.GiveBack > 0 && c.GiveBackEpoch >= oldest && c.GiveBackEpoch <= epoch {
		if cur := w.Retries[c.GiveBackEpoch]; cur <= c.GiveBack {
			delete(w.Retries, c.GiveBackEpoch)
		} else {
			w.Retries[c.GiveBackEpoch] = cur - c.GiveBack
		}
	}
	if c.Add > 0 {
		w.Requests[epoch] += c.Add
	}
	r := BudgetReply{Epoch: epoch, Requests: sumSince(w.Requests, oldest), Retries: sumSince(w.Retries, oldest)}
	limit := int64(math.Floor(math.Max(w.Ratio*float64(r.Requests), w.Floor)))
	if c.Want > 0 && limit-r.Retries > 0 {
		r.Granted = min(c.Want, limit-r.Retries)
		w.Retries[epoch] += r.Granted
		r.Retries += r.Granted
	}
	return r
}

// sumSince adds up the counts of the epochs from oldest on and forgets the
// older ones, as the script's HDEL does.
func sumSince(m map[int64]int64, oldest int64) int64 {
	var t int64
	for e, n := range m {
		if e < oldest {
			delete(m, e)
		} else {
			t += n
		}
	}
	return t
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// CooldownUntil models lua/cooldown.lua: the end of the cooldown after a
// hint arrives at now, given the current end until (the zero Time for none):
// the later of until and now + hint, to the millisecond. A hint of 0 or less
// changes nothing.
func CooldownUntil(until, now time.Time, hint time.Duration) time.Time {
	h := int64(max(hint, 0) / time.Millisecond)
	n := now.UnixMilli()
	var cur int64
	if !until.IsZero() {
		cur = until.UnixMilli()
	}
	if h > 0 && n+h > cur {
		cur = n + h
	}
	if cur == 0 {
		return time.Time{}
	}
	return time.UnixMilli(cur)
}
