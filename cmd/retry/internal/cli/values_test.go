package cli

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"1.5s", 1500 * time.Millisecond, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"1m30s", 90 * time.Second, ""},
		{"2", 2 * time.Second, ""},
		{"0.25", 250 * time.Millisecond, ""},
		{" 3 ", 3 * time.Second, ""},
		{"0", 0, ""},
		{"0s", 0, ""},
		{"1e-3", time.Millisecond, ""},
		{"", 0, "empty duration"},
		{"fast", 0, `invalid duration "fast"`},
		{"1.5", 1500 * time.Millisecond, ""},
		{"-1", 0, "must not be negative"},
		{"-1s", 0, "must not be negative"},
		{"NaN", 0, "not a finite number"},
		{"Inf", 0, "not a finite number"},
		{"1e300", 0, "out of range"},
		{"9999999999999h", 0, "invalid duration"},
		{"1e999", 0, "out of range"},
		{"10 s", 0, "invalid duration"},
		// Days, as timeout(1) takes them.
		{"1d", 24 * time.Hour, ""},
		{"0.5d", 12 * time.Hour, ""},
		{"0d", 0, ""},
		{"1e-3d", 86400 * time.Millisecond, ""},
		{"106751d", 106751 * 24 * time.Hour, ""},
		{"106752d", 0, "out of range"},
		{"1e999d", 0, "out of range"},
		{"-1d", 0, "must not be negative"},
		{"NaNd", 0, "not a finite number"},
		{"Infd", 0, "out of range"},
		{"1e-20d", 0, "below 1ns"},
		{"d", 0, "invalid duration"},
		{"1D", 0, "invalid duration"},
		{"1d2h", 0, "invalid duration"},
	} {
		got, err := ParseDuration(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseDuration(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseCodes(t *testing.T) {
	for _, tc := range []struct {
		in     string
		status bool // ParseStatusCodes, else ParseExitCodes
		want   []int
		err    string
	}{
		{"408,429", true, []int{408, 429}, ""},
		{" 500 , 503,500", true, []int{500, 503}, ""},
		{"", true, []int{}, ""},
		{"99", true, nil, "status code 99 is outside 100-599"},
		{"600", true, nil, "outside 100-599"},
		{"429,,503", true, nil, "empty item"},
		{"4xx", true, nil, `"4xx" is not a whole number`},
		{"1,75", false, []int{1, 75}, ""},
		{"0", false, nil, "exit code 0 is outside 1-255"},
		{"256", false, nil, "outside 1-255"},
		{"-1", false, nil, "outside 1-255"},
		{"99999999999999999999", false, nil, "not a whole number"},
	} {
		parse := ParseExitCodes
		if tc.status {
			parse = ParseStatusCodes
		}
		got, err := parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parse(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) || got == nil {
			t.Errorf("parse(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSeed(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"42", 42, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"", 0, false},
	} {
		got, err := ParseSeed(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseSeed(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && err.Error() != "not a non-negative whole number" {
			t.Errorf("ParseSeed(%q): error %q", c.in, err)
		}
	}
}
