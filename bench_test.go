package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

var errBench = errors.New("transient")

//go:noinline
func bare(ctx context.Context) (int, error) { return 1, nil }

//go:noinline
func usesDone(ctx context.Context) (int, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	default:
		return 1, nil
	}
}

func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bare(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("success", func(b *testing.B) {
		b.ReportAllocs()
		p := Policy{}
		for b.Loop() {
			if _, err := Do(ctx, p, bare); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The success path under each setting that can cost something: a policy
	// Deadline or AttemptTimeout derives one context for the attempt (unless
	// the caller's deadline comes first); the limiters and a pacer add calls.
	short, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	cancellable, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		p    Policy
	}{
		{"success/deadline", ctx, Policy{Deadline: time.Minute}},
		{"success/deadline/cancellable-ctx", cancellable, Policy{Deadline: time.Minute}},
		{"success/attempt-timeout", ctx, Policy{AttemptTimeout: time.Minute}},
		{"success/deadline+attempt-timeout", ctx, Policy{Deadline: time.Minute, AttemptTimeout: 10 * time.Second}},
		{"success/deadline-after-ctx", short, Policy{Deadline: 2 * time.Hour}},
		{"success/pacer", ctx, Policy{Pacer: nopPacer{}}},
		{"success/pacers", ctx, Policy{Pacer: Pacers(nopPacer{}, nopPacer{})}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Do(c.ctx, c.p, bare); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// fn asks for its context's Done channel, as net/http and gRPC do: the
	// attempt's context derives the standard library's.
	b.Run("success/deadline/fn-uses-done", func(b *testing.B) {
		b.ReportAllocs()
		p := Policy{Deadline: time.Minute}
		for b.Loop() {
			if _, err := Do(ctx, p, usesDone); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Every profile: those with a Deadline or AttemptTimeout allocate.
	for _, name := range profileNames {
		p, err := Profile(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("success/profile="+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Do(ctx, p, bare); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// retry-once: two attempts; with a Deadline each attempt gets its own
	// derived context, so the cost of retry-once/deadline over retry-once is
	// twice that of success/deadline over success.
	for _, c := range []struct {
		name     string
		deadline time.Duration
	}{{"retry-once", 0}, {"retry-once/deadline", time.Minute}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			p := Policy{InitialDelay: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: Zero, Deadline: c.deadline}
			for b.Loop() {
				n := 0
				_, err := Do(ctx, p, func(context.Context) (int, error) {
					n++
					if n == 1 {
						return 0, errBench
					}
					return n, nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// nopPacer lets every attempt start at once.
type nopPacer struct{}

func (nopPacer) Reserve(_ context.Context, earliest, _ time.Time) (time.Time, error) {
	return earliest, nil
}
func (nopPacer) Record(error) {}

// BenchmarkClock is the cost of the clock read the loop makes before the first
// attempt (so that Error.Elapsed counts it), for comparison with Do/success.
func BenchmarkClock(b *testing.B) {
	b.ReportAllocs()
	var t time.Time
	for b.Loop() {
		t = time.Now()
	}
	_ = t
}

// BenchmarkClockMonotonic is the cost of the read an attempt context makes
// when the attempt returns (time.Until: the monotonic clock only), for
// comparison with Do/success/deadline.
func BenchmarkClockMonotonic(b *testing.B) {
	b.ReportAllocs()
	deadline := time.Now().Add(time.Hour)
	var d time.Duration
	for b.Loop() {
		d = time.Until(deadline)
	}
	_ = d
}
