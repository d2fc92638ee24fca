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
	b.Run("retry-once", func(b *testing.B) {
		b.ReportAllocs()
		p := Policy{InitialDelay: time.Nanosecond, MaxDelay: time.Nanosecond, Jitter: Zero}
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
