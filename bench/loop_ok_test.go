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

// TestSettings checks that each setting of BenchmarkSettings takes the path
// its name says: one attempt that succeeds, and an attempt context with a
// deadline of its own exactly for the settings that set one (Policy{} and a
// direct call give fn the caller's context, which has none).
func TestSettings(t *testing.T) {
	withDeadline := map[string]time.Duration{
		"default":             0,
		"deadline":            time.Minute,
		"attempt-timeout":     time.Minute,
		"profile=flex":        10 * time.Minute,
		"profile=realtime":    10 * time.Second,
		"profile=model-armor": 300 * time.Second,
	}
	if len(withDeadline) != len(settings) {
		t.Fatalf("%d settings, %d expectations: add the new setting here", len(settings), len(withDeadline))
	}
	for _, s := range settings {
		t.Run(s.name, func(t *testing.T) {
			want, ok := withDeadline[s.name]
			if !ok {
				t.Fatalf("no expectation for setting %q", s.name)
			}
			run := s.runner(t)
			calls := 0
			begin := time.Now()
			v, err := run(context.Background(), func(ctx context.Context) (int, error) {
				calls++
				dl, has := ctx.Deadline()
				switch {
				case want == 0 && has:
					t.Errorf("the attempt has a deadline (%v away), want none", time.Until(dl))
				case want > 0 && !has:
					t.Errorf("the attempt has no deadline, want one %v away", want)
				case want > 0 && (dl.Before(begin.Add(want-time.Second)) || dl.After(time.Now().Add(want))):
					t.Errorf("the attempt's deadline is %v away, want %v", time.Until(dl), want)
				}
				return 42, nil
			})
			if err != nil || v != 42 || calls != 1 {
				t.Fatalf("got (%d, %v) after %d calls, want (42, nil) after 1", v, err, calls)
			}
		})
	}
}
