package retry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/backoffkit/retry"
)

// fast is the Google policy with its delays shrunk so the examples run quickly.
var fast = retry.Policy{InitialDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, Jitter: retry.Zero}

var errUnavailable = errors.New("503 service unavailable")

func ExampleDo() {
	calls := 0
	answer, err := retry.Do(context.Background(), fast, func(ctx context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "", errUnavailable // transient: retried
		}
		return "hello", nil
	})
	fmt.Println(answer, err, calls)
	// Output: hello <nil> 3
}

func ExampleRun() {
	p := fast
	p.Attempts = 3
	err := retry.Run(context.Background(), p, func(ctx context.Context) error {
		return errUnavailable
	})
	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println(re.Attempts, re.Reason, errors.Is(err, errUnavailable))
	}
	// Output: 3 attempts true
}

func ExamplePermanent() {
	errBadKey := errors.New("400 API key not valid")
	calls := 0
	err := retry.Run(context.Background(), fast, func(ctx context.Context) error {
		calls++
		return retry.Permanent(errBadKey) // never retried, returned as is
	})
	fmt.Println(err == errBadKey, calls)
	// Output: true 1
}

func ExampleAfter() {
	// A server said "retry in 5 ms" (Retry-After or RetryInfo): the next wait
	// is at least that, plus jitter, capped by MaxRetryAfter.
	var waits []time.Duration
	p := fast
	p.Attempts = 2
	p.Observer = func(_ context.Context, e retry.Event) {
		if e.Kind == retry.EventRetry {
			waits = append(waits, e.Wait)
		}
	}
	retry.Run(context.Background(), p, func(ctx context.Context) error {
		return retry.After(errUnavailable, 5*time.Millisecond)
	})
	fmt.Println(waits)
	// Output: [5ms]
}

func ExampleSlogObserver() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "elapsed" {
				return slog.Attr{} // keep the output stable for this example
			}
			return a
		},
	}))
	p := fast
	p.Attempts = 2
	p.Observer = retry.SlogObserver(logger, slog.LevelInfo)
	retry.Run(context.Background(), p, func(ctx context.Context) error { return errUnavailable })
	// Output:
	// level=INFO msg=retry attempt=1 max_attempts=2 wait=1ms error="503 service unavailable"
	// level=INFO msg="retry: giving up" attempt=2 max_attempts=2 reason=attempts error="503 service unavailable"
}

func ExamplePolicy_Backoff() {
	p := retry.Policy{} // Google's defaults
	for n := range 7 {
		fmt.Print(p.Backoff(n, 0, 0.5), " ") // u = 0.5: half a second of jitter
	}
	fmt.Println()
	// Output: 1.5s 2.5s 4.5s 8.5s 16.5s 32.5s 1m0s
}

func ExamplePolicy_Merge() {
	client := retry.Google()
	call := client.Merge(retry.Policy{Attempts: 2, Jitter: retry.Zero})
	r := call.Resolved()
	fmt.Println(r.Attempts, r.InitialDelay, r.MaxDelay, r.Jitter)
	// Output: 2 1s 1m0s 0s
}

func ExampleZero() {
	unset := retry.Policy{}.Resolved()
	none := retry.Policy{Jitter: retry.Zero}.Resolved()
	fmt.Println(unset.Jitter, none.Jitter)
	// Output: 1s 0s
}

func ExamplePolicy_Next() {
	// A loop that cannot call Do (here: a virtual clock) takes the same step
	// between attempts with Begin, Next and Succeeded.
	p := retry.Policy{Attempts: 4, Jitter: retry.Zero}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline := now.Add(10 * time.Second)
	if !p.Begin() {
		return // throttled
	}
	var prev time.Duration
	for attempt := 1; ; attempt++ {
		err := errUnavailable // every attempt fails
		step := p.Next(attempt, prev, err, now, deadline)
		if step.Reason != retry.ReasonNone {
			fmt.Println("give up:", step.Reason)
			return
		}
		fmt.Println("attempt", attempt, "failed; wait", step.Wait)
		now, prev = now.Add(step.Wait), step.Shaped
	}
	// Output:
	// attempt 1 failed; wait 1s
	// attempt 2 failed; wait 2s
	// attempt 3 failed; wait 4s
	// give up: attempts
}
