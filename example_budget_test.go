package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backoffkit/retry"
)

// One TokenBucket per client, shared by all its calls: once failures have
// drained it to half, the client stops retrying until successes refill it.
func ExampleTokenBucket() {
	budget := retry.NewTokenBucket(10, 0.1) // gRPC's suggested values
	p := retry.Policy{
		Budget:       budget,
		InitialDelay: time.Millisecond, MaxDelay: time.Millisecond, Jitter: retry.Zero,
	}
	down := func(context.Context) error { return errors.New("503 service unavailable") }

	for i := range 3 {
		err := retry.Run(context.Background(), p, down)
		var re *retry.Error
		errors.As(err, &re)
		fmt.Printf("call %d: %d attempts, %s, %.1f tokens left\n", i+1, re.Attempts, re.Reason, budget.Tokens())
	}
	// Output:
	// call 1: 5 attempts, attempts, 5.0 tokens left
	// call 2: 1 attempts, budget, 4.0 tokens left
	// call 3: 1 attempts, budget, 3.0 tokens left
}

// A RatioBudget lets retries add at most 20 % to a client's requests over
// 10 s, with a floor of retries per second (here none) for quiet clients.
func ExampleRatioBudget() {
	budget := retry.NewRatioBudget(retry.RatioBudgetConfig{
		Ratio:        0.2,
		Window:       10 * time.Second,
		MinPerSecond: -1, // no floor, to show the ratio alone
	})
	p := retry.Policy{Budget: budget, InitialDelay: retry.Zero, MaxDelay: retry.Zero, Jitter: retry.Zero}

	attempts := 0
	for range 100 {
		retry.Run(context.Background(), p, func(context.Context) error {
			attempts++
			return errors.New("503 service unavailable")
		})
	}
	fmt.Printf("100 failing calls made %d attempts (%.1f×)\n", attempts, float64(attempts)/100)
	// Output: 100 failing calls made 120 attempts (1.2×)
}

// The adaptive throttle rejects calls locally, before they reach a backend
// that is refusing most of them; a rejected call fails fast with ErrThrottled.
func ExampleAdaptiveThrottle() {
	th := retry.NewAdaptiveThrottle(retry.ThrottleConfig{Rand: retry.NewRand(1)})
	p := retry.Policy{Attempts: 1, Throttle: th}
	sent := 0
	throttled := 0
	for range 100 {
		err := retry.Run(context.Background(), p, func(context.Context) error {
			sent++
			return errors.New("503 service unavailable")
		})
		if errors.Is(err, retry.ErrThrottled) {
			throttled++
		}
	}
	fmt.Printf("sent %d, throttled %d, next rejected with p = %.2f\n", sent, throttled, th.RejectProbability())
	// Output: sent 5, throttled 95, next rejected with p = 0.99
}

// Profiles are the guidance's named policies; a profile is a Policy like any
// other, so per-call overrides merge onto it.
func ExampleProfile() {
	p, err := retry.Profile("provisioned")
	if err != nil {
		panic(err)
	}
	fmt.Println("provisioned retries 429:", p.RetriesStatus(429), "503:", p.RetriesStatus(503))

	flex, _ := retry.Profile("flex")
	flex = flex.Merge(retry.Policy{AttemptTimeout: 30 * time.Minute}) // the guidance's upper bound
	fmt.Println("flex:", flex.Attempts, "attempts of up to", flex.AttemptTimeout)

	_, err = retry.Profile("premium")
	fmt.Println(err)
	// Output:
	// provisioned retries 429: false 503: true
	// flex: 3 attempts of up to 30m0s
	// retry: unknown profile "premium" (want one of standard, flex, priority, provisioned, realtime, batch, model-armor)
}

func ExampleProfileNames() {
	for _, name := range retry.ProfileNames() {
		p, _ := retry.Profile(name)
		r := p.Resolved()
		fmt.Printf("%-12s attempts=%-2d deadline=%v\n", name, r.Attempts, r.Deadline)
	}
	// Output:
	// standard     attempts=5  deadline=0s
	// flex         attempts=3  deadline=0s
	// priority     attempts=5  deadline=0s
	// provisioned  attempts=5  deadline=0s
	// realtime     attempts=3  deadline=10s
	// batch        attempts=1  deadline=0s
	// model-armor  attempts=15 deadline=5m0s
}
