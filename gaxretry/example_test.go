package gaxretry_test

import (
	"context"
	"fmt"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/gaxretry"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func ExampleWithRetry() {
	p := retry.Policy{
		InitialDelay:  time.Millisecond, // tiny waits for the example
		Jitter:        retry.Zero,
		MaxRetryAfter: 5 * time.Millisecond, // caps the server's 25s hint
		Observer: func(_ context.Context, e retry.Event) {
			if e.Kind == retry.EventRetry {
				fmt.Printf("attempt %d: %v; hint %v, waiting %v\n", e.Attempt, status.Code(e.Err), e.Hint, e.Wait)
			}
		},
	}
	// A cloud.google.com/go client takes the option on any call, e.g.
	// client.SanitizeUserPrompt(ctx, req, gaxretry.WithRetry(p)).
	// Here gax.Invoke runs a call that is throttled once, then succeeds.
	attempts := 0
	call := func(context.Context, gax.CallSettings) error {
		attempts++
		if attempts == 1 {
			return grpcErr(codes.ResourceExhausted, 25*time.Second) // with RetryInfo
		}
		return nil
	}
	err := gax.Invoke(context.Background(), call, gaxretry.WithRetry(p))
	fmt.Println(err, "after", attempts, "attempts")
	// Output:
	// attempt 1: ResourceExhausted; hint 25s, waiting 5ms
	// <nil> after 2 attempts
}

func ExampleNew() {
	p := retry.Policy{Attempts: 3, Jitter: retry.Zero, Observer: func(context.Context, retry.Event) {}}
	// One Retryer per call: it counts the call's attempts.
	r := gaxretry.New(p)
	unavailable := status.Error(codes.Unavailable, "try later")
	for range 3 {
		fmt.Println(r.Retry(unavailable))
	}
	fmt.Println(gaxretry.New(p).Retry(status.Error(codes.InvalidArgument, "bad request")))
	// Output:
	// 1s true
	// 2s true
	// 0s false
	// 0s false
}

func ExampleWithCodes() {
	p := retry.Policy{Jitter: retry.Zero, Observer: func(context.Context, retry.Event) {}}
	r := gaxretry.New(p, gaxretry.WithCodes(codes.Aborted, codes.Unavailable))
	fmt.Println(r.Retry(status.Error(codes.Aborted, "conflict")))
	fmt.Println(r.Retry(status.Error(codes.ResourceExhausted, "quota"))) // not in the list
	// Output:
	// 1s true
	// 0s false
}
