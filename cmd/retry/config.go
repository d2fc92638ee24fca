package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/backoffkit/retry"
)

// This file holds the pure parsers of the command: durations, code lists and
// the JSON config. They take bytes or strings and return values or an error
// naming the problem; they never print, exit or panic.

// maxSeconds is the largest bare number of seconds accepted (about 292 years,
// the range of time.Duration).
const maxSeconds = float64(math.MaxInt64) / float64(time.Second)

// parseDuration parses a duration in Go syntax ("1.5s", "250ms", "1m30s") or
// a bare number of seconds ("2", "0.25"). Negative, NaN, infinite and
// out-of-range values are errors. "0" returns 0: callers that must tell an
// explicit zero from "unset" map it to [retry.Zero].
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration (want e.g. 1.5s, 250ms or a number of seconds)")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return secondsToDuration(f)
	} else if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return 0, fmt.Errorf("duration %q is out of range", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if strings.Contains(err.Error(), "out of range") {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		return 0, fmt.Errorf("invalid duration %q (want e.g. 1.5s, 250ms or a number of seconds)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	return d, nil
}

// secondsToDuration converts a number of seconds to a Duration, rejecting
// negative, NaN, infinite and too large values.
func secondsToDuration(f float64) (time.Duration, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("duration %v is not a finite number of seconds", f)
	case f < 0:
		return 0, fmt.Errorf("duration %vs must not be negative", f)
	case f >= maxSeconds:
		return 0, fmt.Errorf("duration %vs is out of range", f)
	}
	return time.Duration(math.Round(f * float64(time.Second))), nil
}

// explicit turns a parsed duration into a Policy field value: 0 becomes
// [retry.Zero] (an explicit zero), anything else is kept.
func explicit(d time.Duration) time.Duration {
	if d == 0 {
		return retry.Zero
	}
	return d
}

// parseIntList parses a comma-separated list of integers ("408, 429").
// Spaces around items are ignored; an empty string gives an empty non-nil
// list; an empty item ("1,,2") is an error. Duplicates are dropped, order kept.
func parseIntList(s string) ([]int, error) {
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
		if !containsInt(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// parseStatusCodes parses a list of HTTP status codes ("408,429,503"); each
// must be in 100-599. An empty string means no status code.
func parseStatusCodes(s string) ([]int, error) {
	codes, err := parseIntList(s)
	if err != nil {
		return nil, err
	}
	for _, c := range codes {
		if err := checkStatusCode(c); err != nil {
			return nil, err
		}
	}
	return codes, nil
}

func checkStatusCode(c int) error {
	if c < 100 || c > 599 {
		return fmt.Errorf("status code %d is outside 100-599", c)
	}
	return nil
}

// parseExitCodes parses a list of process exit codes ("1,75"); each must be
// in 1-255 (0 is success and never retried).
func parseExitCodes(s string) ([]int, error) {
	codes, err := parseIntList(s)
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

func containsInt(list []int, n int) bool {
	for _, v := range list {
		if v == n {
			return true
		}
	}
	return false
}

// fileConfig is the JSON config file. Field names are the Gen AI SDK's
// HttpRetryOptions (snake_case, durations in seconds), plus a few of ours.
type fileConfig struct {
	Attempts        *int            `json:"attempts"`
	InitialDelay    json.RawMessage `json:"initial_delay"`
	MaxDelay        json.RawMessage `json:"max_delay"`
	ExpBase         *float64        `json:"exp_base"`
	Jitter          json.RawMessage `json:"jitter"`
	HTTPStatusCodes *[]int          `json:"http_status_codes"`
	Deadline        json.RawMessage `json:"deadline"`
	AttemptTimeout  json.RawMessage `json:"attempt_timeout"`
	MaxRetryAfter   json.RawMessage `json:"max_retry_after"`
	JitterShape     *string         `json:"jitter_shape"`
	Profile         *string         `json:"profile"`
}

// parseJSONDuration parses a duration in a JSON config: a number of seconds
// (as in the SDK) or a string in Go syntax or of seconds ("1.5s", "250ms", "2").
func parseJSONDuration(b json.RawMessage) (time.Duration, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, err
		}
		return parseDuration(s)
	}
	var f float64
	if bytes.Equal(b, []byte("null")) || json.Unmarshal(b, &f) != nil {
		return 0, fmt.Errorf("%s is not a duration (want a number of seconds or a string like \"1.5s\")", b)
	}
	return secondsToDuration(f)
}

// config is what a config file says: a policy holding only the fields the
// file sets (explicit zero durations as [retry.Zero], ready for
// [retry.Policy.Merge]) and an optional profile name.
type config struct {
	Policy  retry.Policy
	Profile string
}

// parseConfig parses a JSON config. Unknown fields, trailing data, values of
// the wrong type and invalid values are errors naming the field.
func parseConfig(data []byte) (config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var fc fileConfig
	if err := dec.Decode(&fc); err != nil {
		return config{}, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return config{}, errors.New("unexpected data after the JSON object")
	}
	var c config
	p := &c.Policy
	if fc.Attempts != nil {
		if *fc.Attempts < 1 {
			return config{}, fmt.Errorf("attempts = %d: must be at least 1", *fc.Attempts)
		}
		p.Attempts = *fc.Attempts
	}
	if fc.ExpBase != nil {
		if *fc.ExpBase < 1 {
			return config{}, fmt.Errorf("exp_base = %v: must be at least 1", *fc.ExpBase)
		}
		p.ExpBase = *fc.ExpBase
	}
	durs := []struct {
		name string
		raw  json.RawMessage
		dst  *time.Duration
		zero time.Duration // what an explicit 0 becomes
	}{
		{"initial_delay", fc.InitialDelay, &p.InitialDelay, retry.Zero},
		{"max_delay", fc.MaxDelay, &p.MaxDelay, retry.Zero},
		{"jitter", fc.Jitter, &p.Jitter, retry.Zero},
		{"max_retry_after", fc.MaxRetryAfter, &p.MaxRetryAfter, retry.Zero},
		// A zero deadline or attempt timeout means "none", the default.
		{"deadline", fc.Deadline, &p.Deadline, 0},
		{"attempt_timeout", fc.AttemptTimeout, &p.AttemptTimeout, 0},
	}
	for _, d := range durs {
		if d.raw == nil {
			continue
		}
		v, err := parseJSONDuration(d.raw)
		if err != nil {
			return config{}, fmt.Errorf("%s: %v", d.name, err)
		}
		if v == 0 {
			v = d.zero
		}
		*d.dst = v
	}
	if fc.HTTPStatusCodes != nil {
		codes := []int{}
		for _, code := range *fc.HTTPStatusCodes {
			if err := checkStatusCode(code); err != nil {
				return config{}, fmt.Errorf("http_status_codes: %v", err)
			}
			if !containsInt(codes, code) {
				codes = append(codes, code)
			}
		}
		p.StatusCodes = codes
	}
	if fc.JitterShape != nil {
		s, err := retry.ParseShape(*fc.JitterShape)
		if err != nil {
			return config{}, fmt.Errorf("jitter_shape: unknown shape %q (want one of %s)", *fc.JitterShape, shapeList())
		}
		p.Shape = s
	}
	if fc.Profile != nil {
		if *fc.Profile == "" {
			return config{}, errors.New("profile: empty name")
		}
		c.Profile = *fc.Profile
	}
	return c, nil
}

// jsonError rewords encoding/json's errors to name the config field.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Errorf("%s: JSON %s is not a %s", te.Field, te.Value, te.Type)
		}
		return fmt.Errorf("config must be a JSON object, not %s", te.Value)
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.EOF):
		return errors.New("empty config (want a JSON object)")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("truncated JSON")
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s (known: attempts, initial_delay, max_delay, exp_base, jitter, http_status_codes, deadline, attempt_timeout, max_retry_after, jitter_shape, profile)", rest)
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

// shapeList returns the shape names, comma-separated.
func shapeList() string {
	var names []string
	for _, s := range retry.Shapes() {
		names = append(names, s.String())
	}
	return strings.Join(names, ", ")
}
