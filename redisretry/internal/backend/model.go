package backend

import (
	"math"
	"time"
)

// The Go models of the Lua scripts: pure functions of the state and of now,
// in the scripts' units and arithmetic (microseconds for GCRA, milliseconds
// for the budget and the cooldown). A test in redisretry runs one table of
// cases against each model and its script on a real server.

// GCRAMicros is gcra.lua's decision, line for line, in microseconds of the
// server's clock: the schedule's theoretical arrival time tat (0 for a key
// that does not exist, already moved back if the server's clock went back
// since it was written), now, the block's length inc, the first request's
// burst tolerance tol and the maximum wait (-1: none). The block is reserved
// (ok) only if its first request can start less than maxWait after now; from
// and to bound it (from == to when nothing was reserved).
func GCRAMicros(tat, now, inc, tol, maxWait int64) (ok bool, wait, from, to int64) {
	return GCRAMicrosAt(tat, now, 0, inc, tol, maxWait)
}

// GCRAMicrosAt is GCRAMicros for a block that starts no earlier than now +
// offset (gcra.lua's ARGV[6]): after now for callers that cannot use a slot
// before the reply reaches them; before now (where the schedule is free
// then) for a process reserving what it let start without Redis, at about
// the time it did, so that it takes no place the schedule still has free now
// if nobody reserved those times meanwhile.
func GCRAMicrosAt(tat, now, offset, inc, tol, maxWait int64) (ok bool, wait, from, to int64) {
	if floor := now + offset; tat < floor {
		tat = floor
	}
	start := max(tat-tol, now)
	wait = start - now
	if maxWait >= 0 && wait >= maxWait {
		return false, wait, tat, tat
	}
	return true, wait, tat, tat + inc
}

// GCRACall is gcra.lua's decision on the schedule's tat (µs, 0 for a key
// that does not exist, already moved back if the server's clock went back)
// for the call a at now: GCRAMicrosAt, unless nobody waits for the reply any
// more (now after a.Until), or a live call (a.Live) finds a schedule that
// does not run ahead of now (tat at or before it): then nothing is reserved,
// and ok is false.
func GCRACall(tat, now int64, a GCRAArgs) (ok bool, wait, from, to int64) {
	if (a.Until > 0 && now > a.Until) || (a.Live && tat <= now) {
		from = max(tat, now)
		return false, max(from-a.Tol, now) - now, from, from
	}
	return GCRAMicrosAt(tat, now, a.Offset, a.Inc, a.Tol, a.MaxWait)
}

// GCRATTL is how long (ms) gcra.lua keeps a schedule whose TAT is now to,
// at server time now, for a call of the given offset: until the TAT passes,
// and at least as long as a block may be placed back.
func GCRATTL(to, now, offset int64) int64 { return FloorDiv(max(to-now, -offset, 0), 1000) + 1 }

// GCRAResult is GCRAMicros's outcome in times.
type GCRAResult struct {
	OK       bool
	Wait     time.Duration
	From, To time.Time
}

// GCRAAt is GCRAMicros on times, taken to the microsecond as the script
// takes them: tat is the zero Time for a key that does not exist; maxWait < 0
// means no limit.
func GCRAAt(tat, now time.Time, inc, tol, maxWait time.Duration) GCRAResult {
	var t int64
	if !tat.IsZero() {
		t = tat.UnixMicro()
	}
	ok, wait, from, to := GCRAMicros(t, now.UnixMicro(), Micros(inc), Micros(tol), MicrosWait(maxWait))
	return GCRAResult{OK: ok, Wait: time.Duration(wait) * time.Microsecond, From: time.UnixMicro(from), To: time.UnixMicro(to)}
}

// Micros converts d to whole microseconds, 0 for a negative d.
func Micros(d time.Duration) int64 { return int64(max(d, 0) / time.Microsecond) }

// MicrosWait converts a maximum wait to whole microseconds, rounding down (a
// deadline is never overstepped); negative means no limit (-1).
func MicrosWait(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return int64(d / time.Microsecond)
}

// BudgetWindow is the model of budget.lua: the fleet's requests and retry
// permits counted in Slots slots of Slot each, keyed by epoch (server time /
// Slot). The zero maps are made on first use.
type BudgetWindow struct {
	Slot  time.Duration // the width of a slot (whole milliseconds)
	Slots int64         // the number of slots in the window
	Ratio float64       // retries allowed per request
	Floor float64       // retries allowed per window whatever the traffic

	// Requests and Retries count per epoch, as the script's hashes do.
	Requests, Retries map[int64]int64

	// Config is the configuration last written (BudgetConfig of the four
	// fields above, as they were then), as the script keeps it in its
	// config key; "" for none. The model keeps it for ever (the key's
	// expiry, a window and a slot after it was written, is not modelled).
	Config string
}

// BudgetCall is what one call of the budget script sends besides the window's
// parameters.
type BudgetCall struct {
	Add           int64 // requests to count in the current slot
	Want          int64 // retry permits wanted
	GiveBack      int64 // unused permits given back
	GiveBackEpoch int64 // the epoch the given-back permits were granted in
}

// Apply runs one call of the script at time now (taken to the millisecond).
// The reply's Now is now in milliseconds.
func (w *BudgetWindow) Apply(now time.Time, c BudgetCall) BudgetReply {
	if w.Requests == nil {
		w.Requests = map[int64]int64{}
	}
	if w.Retries == nil {
		w.Retries = map[int64]int64{}
	}
	width := max(int64(w.Slot/time.Millisecond), 1)
	ms := now.UnixMilli()
	epoch := FloorDiv(ms, width)
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
	r := BudgetReply{Epoch: epoch, Requests: sumSince(w.Requests, oldest), Retries: sumSince(w.Retries, oldest), Now: ms}
	if cfg := BudgetConfig(width, w.Slots, w.Ratio, w.Floor); w.Config != cfg {
		r.Other, w.Config = w.Config, cfg
	}
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

// FloorDiv is a / b rounded toward negative infinity (Lua's math.floor of a
// division).
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// CooldownUntil is the model of cooldown.lua: the end of the cooldown after
// a hint arrives at now, given the current end until (the zero Time for
// none): the later of until and now + hint, to the millisecond. A hint of 0
// or less changes nothing.
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
