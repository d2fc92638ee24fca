package httpretry

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxHint is the longest hint a parser returns; longer ones are clamped.
const maxHint = time.Duration(math.MaxInt64)

// ParseRetryAfter parses the value of a Retry-After header: delta-seconds
// (one or more digits) or an HTTP-date in any of the three formats
// [http.ParseTime] knows (RFC 1123, RFC 850, ANSI C asctime). A date is turned
// into the wait from now, 0 if it has passed. Huge values are clamped to the
// largest Duration (the policy's MaxRetryAfter caps them anyway). ok is false
// for an empty or malformed value, which must then be ignored.
//
// A date is written in the server's clock, which may be ahead of this
// machine's or behind it: pass as now the time of the same response's Date
// header when it parses (http.ParseTime), so that the wait is the one the
// server meant, else time.Now(). The [Transport] does so. now does not
// matter for delta-seconds.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(maxHint/time.Second) {
			return maxHint, true // all digits, too large for uint64 or Duration
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// googleError is the part of a Google JSON error body that carries details,
// in its two shapes: {"error": {"details": [...]}} and {"details": [...]}.
type googleError struct {
	Error *struct {
		Details []googleDetail `json:"details"`
	} `json:"error"`
	Details []googleDetail `json:"details"`
}

type googleDetail struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
}

// ParseRetryInfo returns google.rpc.RetryInfo.retryDelay from a Google JSON
// error body such as
//
//	{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
//	  "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "25s"}]}}
//
// The body may also be a JSON array of such objects (as streaming endpoints
// send) or carry "details" at the top level. retryDelay is a protobuf
// Duration in JSON form: decimal seconds with an "s" suffix ("25s", "1.5s").
// ok is false when there is no valid, non-negative RetryInfo.
func ParseRetryInfo(body []byte) (d time.Duration, ok bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return 0, false
	}
	var list []googleError
	if body[0] == '[' {
		if json.Unmarshal(body, &list) != nil {
			return 0, false
		}
	} else {
		var g googleError
		if json.Unmarshal(body, &g) != nil {
			return 0, false
		}
		list = append(list, g)
	}
	for _, g := range list {
		details := g.Details
		if g.Error != nil {
			details = append(g.Error.Details, details...)
		}
		for _, det := range details {
			if det.Type != "type.googleapis.com/google.rpc.RetryInfo" && !strings.HasSuffix(det.Type, "/google.rpc.RetryInfo") {
				continue
			}
			if d, ok := parseProtoDuration(det.RetryDelay); ok {
				return d, true
			}
		}
	}
	return 0, false
}

// parseProtoDuration parses the JSON form of google.protobuf.Duration, for
// example "25s", "1.5s", "0.000000001s"; negative durations are rejected.
func parseProtoDuration(s string) (time.Duration, bool) {
	num, ok := strings.CutSuffix(s, "s")
	if !ok || num == "" {
		return 0, false
	}
	whole, frac, _ := strings.Cut(num, ".")
	if !isDigits(whole) || (frac != "" && !isDigits(frac)) || len(frac) > 9 {
		return 0, false
	}
	secs, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || secs > uint64(maxHint/time.Second)-1 {
		return maxHint, true
	}
	d := time.Duration(secs) * time.Second
	if frac != "" {
		ns, _ := strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		d += time.Duration(ns)
	}
	return d, true
}
