package redisretry

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Limit is a quota: Rate units per Period, with a Burst. A unit is a request,
// or whatever cost the caller counts (tokens, for a tokens-per-minute quota;
// see [WithCost]).
type Limit struct {
	// Rate is the number of units allowed per Period. It must be > 0, and
	// at most one per nanosecond of the Period (1,000,000,000 per second).
	Rate int64
	// Period is the time over which Rate units are allowed. It must be at
	// least 1 ms and at most 100 years (876,000 h).
	Period time.Duration
	// Burst is the number of units that may start at once after a quiet
	// time. 0 means 1: pure pacing, requests spread evenly over the Period
	// (the smoothing Google advises for shared quotas).
	Burst int64
}

// PerSecond returns a Limit of n units per second, burst 1.
func PerSecond(n int64) Limit { return Limit{Rate: n, Period: time.Second} }

// PerMinute returns a Limit of n units per minute, burst 1.
func PerMinute(n int64) Limit { return Limit{Rate: n, Period: time.Minute} }

// durationSyntax is the form time.ParseDuration reads (without a sign): a
// string of it that does not parse overflows.
var durationSyntax = regexp.MustCompile(`^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// ParseLimit parses a rate such as "600/1m", "40/1s", "600 per 1m" or
// "100000/m" (a bare unit s, m or h means one of it), the form the CLI's
// --quota flag takes. The burst is 1. A count or a period out of a Limit's
// range is an error that says which and why (a count that overflows 64 bits,
// more than one per nanosecond of the period, a period over 100 years); no
// value is capped silently.
func ParseLimit(s string) (Limit, error) {
	bad := func(format string, a ...any) (Limit, error) {
		return Limit{}, fmt.Errorf("redisretry: invalid rate %q: "+format, append([]any{s}, a...)...)
	}
	in := strings.TrimSpace(s)
	n, per, ok := strings.Cut(in, "/")
	if !ok {
		n, per, ok = strings.Cut(in, " per ")
	}
	if !ok {
		return bad("want COUNT/PERIOD, e.g. 600/1m or 40/1s")
	}
	n = strings.TrimSpace(n)
	rate, err := strconv.ParseInt(n, 10, 64)
	overflow := errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(n, "-")
	if !overflow && (err != nil || rate <= 0) {
		return bad("the count must be a whole number > 0")
	}
	per = strings.TrimSpace(per)
	switch per {
	case "s", "m", "h":
		per = "1" + per
	}
	d, err := time.ParseDuration(per)
	switch {
	case err != nil && durationSyntax.MatchString(per):
		return bad("the period %s is too long: it overflows (at most 100 years, %v)", per, maxSchedule)
	case err != nil || d < time.Millisecond:
		return bad("the period must be a duration of at least 1ms, e.g. 1s or 1m")
	case d > maxSchedule:
		return bad("the period %s is too long: at most 100 years (%v)", per, maxSchedule)
	case overflow:
		return bad("the count %s is too large: it overflows a 64-bit integer (at most %d per %s: 1 per nanosecond)", n, d.Nanoseconds(), per)
	case rate > d.Nanoseconds():
		return bad("the count %d is too large: more than 1 per nanosecond (at most %d per %s)", rate, d.Nanoseconds(), per)
	}
	return Limit{Rate: rate, Period: d}, nil
}

// String returns the limit as ParseLimit reads it, e.g. "600/1m0s", with
// ", burst N" when Burst is above 1.
func (l Limit) String() string {
	s := fmt.Sprintf("%d/%v", l.Rate, l.Period)
	if l.Burst > 1 {
		s += fmt.Sprintf(", burst %d", l.Burst)
	}
	return s
}

// validate reports an invalid field, naming it with the config's name.
func (l Limit) validate(config string) error {
	switch {
	case l.Rate <= 0:
		return fmt.Errorf("redisretry: invalid %s.Limit.Rate = %d: must be > 0 (units per Period)", config, l.Rate)
	case l.Period < time.Millisecond:
		return fmt.Errorf("redisretry: invalid %s.Limit.Period = %v: must be at least 1ms (e.g. time.Minute for a per-minute quota)", config, l.Period)
	case l.Period > maxSchedule:
		return fmt.Errorf("redisretry: invalid %s.Limit.Period = %v: must be at most 100 years (%v)", config, l.Period, maxSchedule)
	case l.Rate > l.Period.Nanoseconds():
		return fmt.Errorf("redisretry: invalid %s.Limit.Rate = %d: more than 1 per nanosecond of the Period (%v): at most %d", config, l.Rate, l.Period, l.Period.Nanoseconds())
	case l.Burst < 0:
		return fmt.Errorf("redisretry: invalid %s.Limit.Burst = %d: must not be negative (0 means 1)", config, l.Burst)
	}
	return nil
}

func (l Limit) burst() int64 {
	if l.Burst <= 0 {
		return 1
	}
	return l.Burst
}

// Interval returns the share of the schedule that units units take: units ×
// Period / Rate, rounded up to the microsecond (the script's unit), so a
// fleet paced by it never goes above the rate. It saturates instead of
// overflowing.
func (l Limit) Interval(units int64) time.Duration {
	if units <= 0 || l.Rate <= 0 {
		return 0
	}
	q, r, ok := mulDiv(uint64(units), uint64(l.Period/time.Microsecond), uint64(l.Rate))
	if !ok {
		return maxSchedule
	}
	if r != 0 {
		q++
	}
	return min(time.Duration(q), maxSchedule/time.Microsecond) * time.Microsecond
}

// Tolerance returns how far before its place on the schedule a request of
// cost units (at least 1) may start: (Burst − cost) × Period / Rate, rounded
// down to the microsecond, and 0 when cost is not below Burst (pure pacing, or a request
// that costs more than the burst: it waits until the schedule is free).
func (l Limit) Tolerance(cost int64) time.Duration {
	b, cost := l.burst(), max(cost, 1)
	if cost >= b || l.Rate <= 0 {
		return 0
	}
	q, _, ok := mulDiv(uint64(b-cost), uint64(l.Period/time.Microsecond), uint64(l.Rate))
	if !ok {
		return maxSchedule
	}
	return min(time.Duration(q), maxSchedule/time.Microsecond) * time.Microsecond
}

// maxSchedule bounds any one reservation: far beyond any real wait, and small
// enough that schedule times in microseconds stay exact in the script's
// numbers (doubles, exact below 2^53).
const maxSchedule = 100 * 365 * 24 * time.Hour

// mulDiv returns a*b/c and the remainder, exactly; ok is false on overflow.
func mulDiv(a, b, c uint64) (q, r uint64, ok bool) {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return 0, 0, false
	}
	q, r = bits.Div64(hi, lo, c)
	return q, r, q <= math.MaxInt64
}

// satAdd and satMul add and multiply non-negative numbers, saturating at
// math.MaxInt64 instead of overflowing.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if hi, lo := bits.Mul64(uint64(a), uint64(b)); hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return a * b
}

// satSub returns a − b, saturating at math.MaxInt64 and math.MinInt64
// instead of overflowing.
func satSub(a, b int64) int64 {
	d := a - b
	switch {
	case b < 0 && d < a:
		return math.MaxInt64
	case b > 0 && d > a:
		return math.MinInt64
	}
	return d
}
