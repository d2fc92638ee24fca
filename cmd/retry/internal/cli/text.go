package cli

import (
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/backoffkit/retry/httpretry"
	"github.com/backoffkit/retry/internal/textwrap"
)

// OneLine keeps an error message on one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// Wrap breaks s into lines of at most width characters, the second and later
// lines indented by indent (which does not count towards width).
func Wrap(s string, width int, indent string) string {
	return strings.Join(textwrap.Lines(s, width, ""), "\n"+indent)
}

// Names splits a comma-separated list.
func Names(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// RoundDur rounds d for display: to 1 ms, or 10 ms above 10 s, and to 1 µs
// under a millisecond (a duration that is not zero never shows as 0s).
func RoundDur(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond || d <= -time.Millisecond:
		return d.Round(time.Millisecond)
	case d.Round(time.Microsecond) != 0:
		return d.Round(time.Microsecond) // under a millisecond: not "0s"
	}
	return d
}

// MS returns d in milliseconds, rounded to a tenth.
func MS(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Millisecond)*10) / 10 }

// RedactRawURL returns a URL as a server sent it (a Location, which may not
// parse) safe to print: as httpretry.Redact if it parses; else with its
// user info hidden and the values of secret parameters of its query and
// fragment hidden by a query's rules (a value ends at '&' or ';' only,
// whatever it holds: quotes, '<', '?').
func RedactRawURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return httpretry.Redact(u)
	}
	s = HideUserInfo(s)
	pairs := func(q string) string { return strings.TrimPrefix(httpretry.Redact(&url.URL{RawQuery: q}), "?") }
	rest, frag, hasFrag := strings.Cut(s, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	if hasQuery {
		rest += "?" + pairs(query)
	}
	if hasFrag {
		rest += "#" + pairs(frag)
	}
	return rest
}

// HideUserInfo returns s, a URL that may not parse, with everything up to
// its last '@' after the scheme (user info, whatever a password holds: '@',
// '/', spaces) replaced by REDACTED, and its secret parameters hidden.
func HideUserInfo(s string) string {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		scheme, _, ok := strings.Cut(s, "://")
		if !ok || len(scheme)+3 > i {
			scheme = ""
		} else {
			scheme += "://"
		}
		s = scheme + httpretry.Redacted + s[i:]
	}
	return httpretry.RedactText(s)
}
