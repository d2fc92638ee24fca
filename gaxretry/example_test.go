package gaxretry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/gaxretry"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	storage "google.golang.org/api/storage/v1"
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

// A google.golang.org/api client (here storage/v1) under gax.Invoke, as the
// Cloud client libraries built on the REST clients call it: the HTTP status
// decides by the policy's StatusCodes. Under the "provisioned" profile a 504
// is retried and a 429 is not (gax alone would map them to
// DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED).
func ExampleWithRetry_googleAPIClient() {
	statuses := []int{http.StatusGatewayTimeout, http.StatusTooManyRequests}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(hits.Add(1))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(statuses[min(n, len(statuses))-1])
		fmt.Fprint(w, `{"error": {"code": 0, "message": "injected"}}`)
	}))
	defer srv.Close()

	ctx := context.Background()
	svc, err := storage.NewService(ctx, option.WithEndpoint(srv.URL+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		panic(err)
	}
	p, _ := retry.Profile("provisioned")
	p.InitialDelay, p.Jitter = time.Millisecond, retry.Zero // tiny waits for the example
	p.Observer = func(_ context.Context, e retry.Event) {
		var ge *googleapi.Error
		errors.As(e.Err, &ge)
		fmt.Printf("%s after attempt %d: HTTP %d\n", e.Kind, e.Attempt, ge.Code)
	}
	err = gax.Invoke(ctx, func(ctx context.Context, _ gax.CallSettings) error {
		_, err := svc.Buckets.Get("my-bucket").Context(ctx).Do()
		return err
	}, gaxretry.WithRetry(p))
	fmt.Println(hits.Load(), "hits;", err != nil)
	// Output:
	// retry after attempt 1: HTTP 504
	// give-up after attempt 2: HTTP 429
	// 2 hits; true
}
