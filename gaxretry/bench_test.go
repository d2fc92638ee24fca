package gaxretry_test

import (
	"context"
	"testing"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/gaxretry"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
)

// BenchmarkRetry measures one Retry decision on the error gax.Invoke hands
// over (an *apierror.APIError from a gRPC status).
func BenchmarkRetry(b *testing.B) {
	benchRetry(b, apiErr(grpcErr(codes.Unavailable, 0)))
}

// BenchmarkRetryGeneratedHTTP measures one Retry decision on the error
// gax.Invoke hands over for a google.golang.org/api client's HTTP 503.
func BenchmarkRetryGeneratedHTTP(b *testing.B) {
	benchRetry(b, generatedErr(503))
}

// benchRetry measures one Retry decision on err, which must be retried, by
// a Retryer of a policy that never runs out of attempts.
func benchRetry(b *testing.B, err error) {
	p := retry.Policy{Attempts: 1 << 30, Observer: func(context.Context, retry.Event) {}}
	r := gaxretry.New(p)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.Retry(err); !ok {
			b.Fatal("not retried")
		}
	}
}

// BenchmarkInvokeSuccess measures gax.Invoke's success path with the option:
// the Retryer is never created.
func BenchmarkInvokeSuccess(b *testing.B) {
	opt := gaxretry.WithRetry(retry.Policy{})
	call := func(context.Context, gax.CallSettings) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := gax.Invoke(ctx, call, opt); err != nil {
			b.Fatal(err)
		}
	}
}
