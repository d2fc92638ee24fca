package command

import (
	"math"
	"syscall"
	"testing"
	"time"
)

// TestSignalAt: the grace of --kill-after counts inside --deadline, at most
// half of it; --kill-after 0 signals at the deadline itself.
func TestSignalAt(t *testing.T) {
	for _, tc := range []struct {
		d, killAfter time.Duration
		sig          syscall.Signal
		want         time.Duration
	}{
		{10 * time.Second, time.Second, syscall.SIGTERM, 9 * time.Second},
		{time.Second, 5 * time.Second, syscall.SIGTERM, 500 * time.Millisecond},
		{time.Second, 0, syscall.SIGTERM, time.Second},
		{time.Second, time.Second, syscall.SIGINT, 500 * time.Millisecond},
		{time.Second, time.Second, syscall.SIGKILL, time.Second}, // no grace to keep
		{time.Duration(math.MaxInt64), time.Second, syscall.SIGTERM, time.Duration(math.MaxInt64) - time.Second},
	} {
		if got := signalAt(tc.d, tc.killAfter, tc.sig); got != tc.want {
			t.Errorf("signalAt(%v, %v, %v) = %v, want %v", tc.d, tc.killAfter, tc.sig, got, tc.want)
		}
	}
}
