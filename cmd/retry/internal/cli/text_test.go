package cli

import (
	"testing"
	"time"
)

func TestRoundDur(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, 0},
		{time.Nanosecond, time.Nanosecond},
		{1499 * time.Nanosecond, time.Microsecond},
		{250 * time.Microsecond, 250 * time.Microsecond},
		{999_600 * time.Nanosecond, time.Millisecond},
		{1234567 * time.Nanosecond, time.Millisecond},
		{9999 * time.Millisecond, 9999 * time.Millisecond},
		{12345 * time.Millisecond, 12350 * time.Millisecond},
		{-time.Nanosecond, -time.Nanosecond},
		{-1500 * time.Microsecond, -2 * time.Millisecond},
	} {
		if got := RoundDur(tc.in); got != tc.want {
			t.Errorf("RoundDur(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
