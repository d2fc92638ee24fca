package redisretry

import (
	"fmt"
	"math"
	"time"
)

// This file holds the Go models of the Lua scripts: pure functions of the
// state and of now, computed with the scripts' units and arithmetic, for the
// simulator and for the local fallback. A test runs one table of cases
// against each model and its script on a real server.

// GCRAResult is the outcome of one reservation on a quota's schedule (see
// [GCRA]).
type GCRAResult struct {
	// OK is true if the block was reserved.
	OK bool
	// Wait is the time from now until the block's first request may start;
	// when OK is false, how long it would have had to wait.
	Wait time.Duration
	// From and To bound the block on the schedule: To is the schedule's new
	// theoretical arrival time (TAT). From equals To when nothing was
	// reserved.
	From, To time.Time
}

// GCRA is the Go model of the fleet quota's script (lua/gcra.lua): the generic
// cell rate algorithm of go-redis/redis_rate, reserving inc of the schedule
// (see [Limit.Interval]) for a block whose first request may start tol
// before its place (see [Limit.Tolerance]).
//
// tat is the schedule's theoretical arrival time (the zero Time for a key
// that does not exist). (The script also stores the server's time with it:
// if the server's clock went back since, it moves the TAT back as much before
// this calculation.) The block's first request may start at max(now,
// max(tat, now) − tol); it is reserved only if that is less than maxWait
// after now (maxWait < 0: no limit). Then the new TAT is max(tat, now) + inc.
// With inc 0 nothing is reserved and the result says when a request could
// start. Times are taken to the microsecond, as the script takes them.
func GCRA(tat, now time.Time, inc, tol, maxWait time.Duration) GCRAResult {
	var t int64
	if !tat.IsZero() {
		t = tat.UnixMicro()
	}
	ok, wait, from, to := gcraMicros(t, now.UnixMicro(), us(inc), us(tol), usWait(maxWait))
	return GCRAResult{OK: ok, Wait: time.Duration(wait) * time.Microsecond, From: time.UnixMicro(from), To: time.UnixMicro(to)}
}

// gcraMicros is GCRA in the script's units, line for line.
func gcraMicros(tat, now, inc, tol, maxWait int64) (ok bool, wait, from, to int64) {
	if tat < now {
		tat = now
	}
	start := max(tat-tol, now)
	wait = start - now
	if maxWait >= 0 && wait >= maxWait {
		return false, wait, tat, tat
	}
	return true, wait, tat, tat + inc
}

func us(d time.Duration) int64 { return int64(max(d, 0) / time.Microsecond) }

// usWait converts a maximum wait to whole microseconds, rounding down (a
// deadline is never overstepped); negative means no limit.
func usWait(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return int64(d / time.Microsecond)
}

// BudgetWindow is the Go model of the fleet budget's script (lua/budget.lua):
// the fleet's requests and retry permits counted in Slots slots of Slot each,
// keyed by epoch (server time / Slot). The zero value counts nothing yet;
// [NewBudgetWindow] fills the parameters from a [BudgetConfig].
type BudgetWindow struct {
	Slot  time.Duration // the width of a slot (whole milliseconds)
	Slots int64         // the number of slots in the window
	Ratio float64       // retries allowed per request
	Floor float64       // retries allowed per window whatever the traffic

	requests, retries map[int64]int64
}

// NewBudgetWindow returns an empty window with the parameters of c (after
// defaults), or c's validation error.
func NewBudgetWindow(c BudgetConfig) (*BudgetWindow, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.resolve()
	return &BudgetWindow{Slot: c.slot(), Slots: budgetSlots, Ratio: c.Ratio, Floor: c.floor()}, nil
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
	if w.requests == nil {
		w.requests, w.retries = map[int64]int64{}, map[int64]int64{}
	}
	width := max(int64(w.Slot/time.Millisecond), 1)
	epoch := floorDiv(now.UnixMilli(), width)
	oldest := epoch - w.Slots + 1
	if c.GiveBack > 0 && c.GiveBackEpoch >= oldest && c.GiveBackEpoch <= epoch {
		if cur := w.retries[c.GiveBackEpoch]; cur <= c.GiveBack {
			delete(w.retries, c.GiveBackEpoch)
		} else {
			w.retries[c.GiveBackEpoch] = cur - c.GiveBack
		}
	}
	if c.Add > 0 {
		w.requests[epoch] += c.Add
	}
	sum := func(m map[int64]int64) int64 {
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
	r := BudgetReply{Epoch: epoch, Requests: sum(w.requests), Retries: sum(w.retries)}
	limit := int64(math.Floor(math.Max(w.Ratio*float64(r.Requests), w.Floor)))
	if c.Want > 0 && limit-r.Retries > 0 {
		r.Granted = min(c.Want, limit-r.Retries)
		w.retries[epoch] += r.Granted
		r.Retries += r.Granted
	}
	return r
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// CooldownUntil is the Go model of the fleet cooldown's script
// (lua/cooldown.lua): the end of the cooldown after a hint of hint arrives at
// now, given the current end until (the zero Time for none): the later of
// until and now + hint, to the millisecond. A hint of 0 or less changes
// nothing.
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

// unexpected is the error for a reply of the wrong shape (style rule 4).
func unexpected(name string, v any) error {
	return fmt.Errorf("redisretry: %s: unexpected reply %v", name, v)
}
