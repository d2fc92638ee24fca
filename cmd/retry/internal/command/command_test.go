package command

import (
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/policy"
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

// TestScanLogFormatSkipsValues: the scan reads a flag's value as the flag
// package would, whatever it looks like.
func TestScanLogFormatSkipsValues(t *testing.T) {
	fs := newCommandFlags().fs
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--log-format"}, ""},
		{[]string{"--log-format", "xml"}, ""},
		{[]string{"--log-format", "json"}, "json"},
		{[]string{"--quiet", "--log-format", "json"}, "json"},
		{[]string{"--stdin-file", "--log-format", "json"}, ""},
		{[]string{"--seed", "1", "--log-format=json", "--", "--log-format", "text"}, "json"},
	} {
		if got := policy.ScanLogFormat(fs, tc.args, false); got != tc.want {
			t.Errorf("scanLogFormat(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
