package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/backoffkit/retry"
)

// maxSeconds is the largest bare number of seconds accepted (about 292 years,
// the range of time.Duration).
const maxSeconds = float64(math.MaxInt64) / float64(time.Second)

// secondsPerDay is the length of timeout(1)'s "d".
const secondsPerDay = 24 * 60 * 60

// ParseDuration parses a duration in Go syntax ("1.5s", "250ms", "1m30s"),
// a bare number of seconds ("2", "0.25") or a number of days ("1d", "0.5d",
// as timeout(1) takes them). Negative, NaN, infinite and out-of-range values
// are errors. "0" returns 0: callers that must tell an explicit zero from
// "unset" map it to [retry.Zero].
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration (want e.g. 1.5s, 250ms, 1d or a number of seconds)")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return SecondsToDuration(f)
	} else if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return 0, fmt.Errorf("duration %q is out of range", s)
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if f, err := strconv.ParseFloat(days, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			switch {
			case math.IsNaN(f):
				return 0, fmt.Errorf("duration %q is not a finite number of days", s)
			case err != nil || f >= maxSeconds/secondsPerDay:
				return 0, fmt.Errorf("duration %q is out of range", s)
			case f < 0:
				return 0, fmt.Errorf("duration %q must not be negative", s)
			}
			d := time.Duration(math.Round(f * secondsPerDay * float64(time.Second)))
			if d == 0 && f > 0 {
				return 0, tooSmall(strconv.Quote(s))
			}
			return d, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if strings.Contains(err.Error(), "out of range") {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		return 0, fmt.Errorf("invalid duration %q (want e.g. 1.5s, 250ms, 1d or a number of seconds)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	if d == 0 && strings.ContainsAny(s, "123456789") {
		return 0, tooSmall(strconv.Quote(s))
	}
	return d, nil
}

// SecondsToDuration converts a number of seconds to a Duration, rejecting
// negative, NaN, infinite and too large values.
func SecondsToDuration(f float64) (time.Duration, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("duration %v is not a finite number of seconds", f)
	case f < 0:
		return 0, fmt.Errorf("duration %vs must not be negative", f)
	case f >= maxSeconds:
		return 0, fmt.Errorf("duration %vs is out of range", f)
	}
	d := time.Duration(math.Round(f * float64(time.Second)))
	if d == 0 && f > 0 {
		return 0, tooSmall(strconv.FormatFloat(f, 'g', -1, 64) + "s")
	}
	return d, nil
}

// tooSmall is the error for a positive duration that would round to 0 (which
// would mean "none" or "the default"): it is refused rather than rounded up
// to 1ns, a value nobody means.
func tooSmall(s string) error {
	return fmt.Errorf("duration %s is below 1ns, the smallest duration (0 means none)", s)
}

// ParseIntList parses a comma-separated list of integers ("408, 429").
// Spaces around items are ignored; an empty string gives an empty non-nil
// list; an empty item ("1,,2") is an error. Duplicates are dropped, order kept.
func ParseIntList(s string) ([]int, error) {
	out := []int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("empty item in list %q", s)
		}
		n, err := strconv.Atoi(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", item)
		}
		if !ContainsInt(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// ParseStatusCodes parses a list of HTTP status codes ("408,429,503"); each
// must be a 4xx or 5xx. An empty string means no status code.
func ParseStatusCodes(s string) ([]int, error) {
	codes, err := ParseIntList(s)
	if err != nil {
		return nil, err
	}
	for _, c := range codes {
		if err := CheckStatusCode(c); err != nil {
			return nil, err
		}
	}
	return codes, nil
}

// CheckStatusCode checks a status code that is to trigger a retry: it must be
// a failure, 4xx or 5xx. A 1xx, 2xx or 3xx answer is never retried (a retry
// loop would repeat a request that worked).
func CheckStatusCode(c int) error {
	switch {
	case c < 100 || c > 599:
		return fmt.Errorf("status code %d is outside 100-599", c)
	case c < 400:
		return fmt.Errorf("status code %d is not a failure and cannot trigger a retry (only 4xx and 5xx can)", c)
	}
	return nil
}

// ParseExitCodes parses a list of process exit codes ("1,75"); each must be
// in 1-255 (0 is success and never retried).
func ParseExitCodes(s string) ([]int, error) {
	codes, err := ParseIntList(s)
	if err != nil {
		return nil, err
	}
	for _, c := range codes {
		if c < 1 || c > 255 {
			return nil, fmt.Errorf("exit code %d is outside 1-255", c)
		}
	}
	return codes, nil
}

// ParseSeed parses the value of a --seed flag: a whole number from 0 to
// 2^64-1.
func ParseSeed(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errors.New("not a non-negative whole number")
	}
	return n, nil
}

// IntIn returns a flag.Func function that gives set a whole number from lo
// to hi; any other value is the error want.
func IntIn(lo, hi int, want string, set func(int)) func(string) error {
	return func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return errors.New(want)
		}
		set(n)
		return nil
	}
}

// FloatIn returns a flag.Func function that gives set a number from lo to
// hi (not NaN); any other value is the error want.
func FloatIn(lo, hi float64, want string, set func(float64)) func(string) error {
	return func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f >= lo && f <= hi) {
			return errors.New(want)
		}
		set(f)
		return nil
	}
}

// ContainsInt reports whether list holds n.
func ContainsInt(list []int, n int) bool {
	for _, v := range list {
		if v == n {
			return true
		}
	}
	return false
}

// ShapeList returns the shape names, comma-separated.
func ShapeList() string {
	var names []string
	for _, s := range retry.Shapes() {
		names = append(names, s.String())
	}
	return strings.Join(names, ", ")
}
