package cli

import (
	"strconv"
	"strings"
	"testing"

	"github.com/backoffkit/retry"
)

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"1.5s", "250ms", "1m30s", "2", "0.25", "0", "-1", "-1s", "NaN", "Inf", "1e300",
		"9223372036s", "9223372037", "", " 3 ", "1h1h", "0x10", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("parseDuration(%q): empty error", s)
			}
			return
		}
		if d < 0 {
			t.Fatalf("parseDuration(%q) = %v: negative", s, d)
		}
		// What it returns, written in Go syntax, parses back to itself.
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("parseDuration(%q) = %v, but parseDuration(%q) = %v, %v", s, d, d.String(), back, err)
		}
	})
}

func FuzzParseStatusCodes(f *testing.F) {
	for _, s := range []string{"408,429,500,502,503,504", "", " 503 ", "429, 429", "1,,2", "99", "600", "abc",
		"-500", "+503", "5e2", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		codes, err := ParseStatusCodes(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("parseStatusCodes(%q): empty error", s)
			}
			return
		}
		seen := map[int]bool{}
		parts := make([]string, len(codes))
		for i, c := range codes {
			if c < 100 || c > 599 || seen[c] {
				t.Fatalf("parseStatusCodes(%q) = %v: out of range or repeated", s, codes)
			}
			seen[c] = true
			parts[i] = strconv.Itoa(c)
		}
		back, err := ParseStatusCodes(strings.Join(parts, ","))
		if err != nil || len(back) != len(codes) {
			t.Fatalf("round trip of %v: %v, %v", codes, back, err)
		}
		if p := (retry.Policy{StatusCodes: codes}); p.Validate() != nil {
			t.Fatalf("codes %v make an invalid policy: %v", codes, p.Validate())
		}
	})
}

func FuzzParseExitCodes(f *testing.F) {
	for _, s := range []string{"1,75", "0", "256", "", "1, 1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		codes, err := ParseExitCodes(s)
		if err != nil {
			return
		}
		for _, c := range codes {
			if c < 1 || c > 255 {
				t.Fatalf("parseExitCodes(%q) = %v: out of range", s, codes)
			}
		}
	})
}
