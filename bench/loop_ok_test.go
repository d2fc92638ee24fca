package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPeersRetry checks that every library's configuration does what the
// benchmark claims: one attempt on success, exactly two in retry-once, and
// (where the library caps attempts) exactly attemptsMax before giving up
// with the last error. Without it a misconfigured peer could be timed doing
// something else, such as not retrying at all.
func TestPeersRetry(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		fail      int
		wantCalls func(p peer) int // 0: skip this peer
		wantOK    bool
	}{
		{"success", 0, func(peer) int { return 1 }, true},
		{"retry-once", 1, func(p peer) int {
			if p.name == "bare" {
				return 0
			}
			return 2
		}, true},
		{"always-fail", 1 << 30, func(p peer) int { return p.maxAttempts }, false},
	}
	for _, tt := range tests {
		for _, p := range peers {
			want := tt.wantCalls(p)
			if want == 0 {
				continue
			}
			t.Run(tt.name+"/"+p.name, func(t *testing.T) {
				f := &flaky{fail: tt.fail, err: p.err}
				if f.err == nil {
					f.err = errTransient
				}
				run := p.newRunner(time.Nanosecond)
				for i := range 3 { // the shared parts must be reusable
					f.calls = 0
					v, err := run(ctx, f.call)
					if f.calls != want {
						t.Fatalf("call %d: fn called %d times, want %d", i, f.calls, want)
					}
					if tt.wantOK {
						if err != nil || v != 42 {
							t.Fatalf("call %d: got (%d, %v), want (42, nil)", i, v, err)
						}
					} else if !errors.Is(err, errTransient) {
						t.Fatalf("call %d: err = %v, want one matching errTransient", i, err)
					}
				}
			})
		}
	}
}
