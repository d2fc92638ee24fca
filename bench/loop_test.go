package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	avast "github.com/avast/retry-go/v4"
	"github.com/backoffkit/retry"
	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	gax "github.com/googleapis/gax-go/v2"
	sethvargo "github.com/sethvargo/go-retry"
)

// Every library is configured the same way, as far as its API allows:
// at most attemptsMax attempts in all, an initial wait (the scenario's) that
// grows by a factor of 2 and is capped at the same value, no jitter, no
// overall deadline, and every error retryable. docs/benchmarks.md spells out
// each configuration.
const attemptsMax = 5

// errTransient is the preallocated error of a failed attempt.
var errTransient = errors.New("transient")

// errTransientSethvargo is errTransient marked retryable, preallocated:
// sethvargo/go-retry retries only errors wrapped with RetryableError.
var errTransientSethvargo = sethvargo.RetryableError(errTransient)

// flaky is the function under retry. It fails its first fail calls with err,
// then returns (42, nil). It is allocated once per benchmark and reset before
// each call, so that the benchmarks measure the retry libraries, not the
// function's closure.
type flaky struct {
	fail  int   // how many calls fail before the first success
	err   error // the error returned by a failing call
	calls int   // calls made since the last reset
}

func (f *flaky) call(ctx context.Context) (int, error) {
	f.calls++
	if f.calls <= f.fail {
		return 0, f.err
	}
	return 42, nil
}

// runner makes one retried call of fn with one library.
type runner func(ctx context.Context, fn func(context.Context) (int, error)) (int, error)

// peer is one library under comparison.
type peer struct {
	name string
	// err is the error the flaky function returns for this library (nil
	// means errTransient).
	err error
	// maxAttempts is the attempt cap this configuration enforces, 0 if the
	// library has none (gax-go).
	maxAttempts int
	// newRunner builds whatever is shared by every call (policies,
	// executors, options) and returns the per-call code.
	newRunner func(wait time.Duration) runner
}

// peers lists the libraries in table order. "bare" calls fn once, for
// reference; it does not retry.
var peers = []peer{
	{
		name: "bare",
		newRunner: func(wait time.Duration) runner {
			return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
				return fn(ctx)
			}
		},
	},
	{
		name:        "ours",
		maxAttempts: attemptsMax,
		newRunner: func(wait time.Duration) runner {
			// A Policy is a plain value shared by every call.
			p := retry.Policy{Attempts: attemptsMax, InitialDelay: wait, MaxDelay: wait, Jitter: retry.Zero}
			return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
				return retry.Do(ctx, p, fn)
			}
		},
	},
	{
		name: "gax",
		newRunner: func(wait time.Duration) runner {
			// gax.Invoke has no attempt cap (generated clients bound calls
			// by deadline). gax.Backoff is always full jitter: a wait is
			// 1 ns + rand[0, cur), so exactly 1 ns when wait is 1 ns, and
			// uniform in (0, 2 ms] in retry-once-2ms. The option is
			// shared; gax makes a Retryer per call from it.
			opt := gax.WithRetry(func() gax.Retryer {
				return gax.OnErrorFunc(gax.Backoff{Initial: wait, Max: wait, Multiplier: 2}, func(error) bool { return true })
			})
			return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
				var v int
				err := gax.Invoke(ctx, func(ctx context.Context, _ gax.CallSettings) error {
					var err error
					v, err = fn(ctx)
					return err
				}, opt)
				return v, err
			}
		},
	},
	{
		name:        "sethvargo",
		err:         errTransientSethvargo,
		maxAttempts: attemptsMax,
		newRunner: func(wait time.Duration) runner {
			return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
				// A Backoff keeps state: one per call.
				b := sethvargo.WithMaxRetries(attemptsMax-1, sethvargo.WithCappedDuration(wait, sethvargo.NewExponential(wait)))
				return sethvargo.DoValue(ctx, b, fn)
			}
		},
	},
	{
		name:        "cenkalti",
		maxAttempts: attemptsMax,
		newRunner: func(wait time.Duration) runner {
			return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
				// An ExponentialBackOff keeps state and is not safe for
				// concurrent use: one per call.
				b := &cenkalti.ExponentialBackOff{InitialInterval: wait, RandomizationFactor: 0, Multiplier: 2, MaxInterval: wait}
				return cenkalti.Retry(ctx, func() (int, error) { return fn(ctx) },
					cenkalti.WithBackOff(b), cenkalti.WithMaxTries(attemptsMax), cenkalti.WithMaxElapsedTime(0))
			}
		},
	},
	{
		name:        "avast",
		maxAttempts: attemptsMax,
		newRunner: func(wait time.Duration) runner {
			return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
				return avast.DoWithData(func() (int, error) { return fn(ctx) },
					avast.Context(ctx), avast.Attempts(attemptsMax),
					avast.Delay(wait), avast.MaxDelay(wait), avast.DelayType(avast.BackOffDelay),
					avast.LastErrorOnly(true))
			}
		},
	},
	{
		name:        "failsafe",
		maxAttempts: attemptsMax,
		newRunner: func(wait time.Duration) runner {
			// A RetryPolicy and an Executor are safe to share; the context
			// is bound per call.
			rp := retrypolicy.NewBuilder[int]().
				WithMaxAttempts(attemptsMax).
				WithBackoff(wait, wait).
				ReturnLastFailure().
				Build()
			ex := failsafe.With[int](rp)
			return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
				return ex.WithContext(ctx).GetWithExecution(func(e failsafe.Execution[int]) (int, error) {
					return fn(e.Context())
				})
			}
		},
	},
}

// scenarios are the loop scenarios: how many calls fail first, and the wait
// before a retry. retry-once-2ms exists because our loop sleeps waits up to
// 1 ms with time.Sleep (no timer, no allocation) and uses a stoppable timer
// above that: it shows the cost of that path, its ns/op being mostly the
// 2 ms wait itself.
var scenarios = []struct {
	name string
	fail int
	wait time.Duration
}{
	{"success", 0, time.Nanosecond},
	{"retry-once", 1, time.Nanosecond},
	{"retry-once-2ms", 1, 2 * time.Millisecond},
}

// BenchmarkRetry measures one retried call per iteration, for every
// scenario and library. Sub-benchmark names are key=value pairs so that
// benchstat can tabulate them (benchstat -col /lib).
func BenchmarkRetry(b *testing.B) {
	for _, sc := range scenarios {
		for _, p := range peers {
			if p.name == "bare" && sc.fail > 0 {
				continue // bare does not retry
			}
			b.Run("scenario="+sc.name+"/lib="+p.name, func(b *testing.B) {
				f := &flaky{fail: sc.fail, err: p.err}
				if f.err == nil {
					f.err = errTransient
				}
				benchCall(b, p.newRunner(sc.wait), f)
			})
		}
	}
}

// benchCall is the body of every loop benchmark (and of the loop rows of
// TestReport): one call of f through run per iteration, checked, and f's
// attempts in the last call checked too.
func benchCall(b *testing.B, run runner, f *flaky) {
	ctx := context.Background()
	fn := f.call
	b.ReportAllocs()
	for b.Loop() {
		f.calls = 0
		if v, err := run(ctx, fn); err != nil || v != 42 {
			b.Fatalf("got (%d, %v), want (42, nil)", v, err)
		}
	}
	if want := f.fail + 1; f.calls != want {
		b.Fatalf("last call made %d attempts, want %d", f.calls, want)
	}
}

// setting is one policy of ours whose success path is measured on its own:
// the settings that cost something over Policy{} (issue 25's table).
type setting struct {
	name   string
	policy func() (retry.Policy, error)
}

// settings are measured by BenchmarkSettings and by TestReport. "default"
// is Policy{}; "deadline" and "attempt-timeout" give each attempt a
// deadline of its own, as do the three profiles (flex an AttemptTimeout of
// 10 min, realtime a Deadline of 10 s, model-armor a Deadline of 300 s).
var settings = []setting{
	{"default", func() (retry.Policy, error) { return retry.Policy{}, nil }},
	{"deadline", func() (retry.Policy, error) { return retry.Policy{Deadline: time.Minute}, nil }},
	{"attempt-timeout", func() (retry.Policy, error) { return retry.Policy{AttemptTimeout: time.Minute}, nil }},
	{"profile=flex", func() (retry.Policy, error) { return retry.Profile("flex") }},
	{"profile=realtime", func() (retry.Policy, error) { return retry.Profile("realtime") }},
	{"profile=model-armor", func() (retry.Policy, error) { return retry.Profile("model-armor") }},
}

// runner returns the per-call code of s: retry.Do with its policy, built
// once.
func (s setting) runner(tb testing.TB) runner {
	p, err := s.policy()
	if err != nil {
		tb.Fatalf("setting %s: %v", s.name, err)
	}
	return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
		return retry.Do(ctx, p, fn)
	}
}

// BenchmarkSettings measures ours on the success path (one attempt that
// succeeds) under each setting, beside lib=bare (a direct call): the rows
// of the root module's BenchmarkDo that issue 25 sets goals for.
func BenchmarkSettings(b *testing.B) {
	b.Run("scenario=success/setting=bare", func(b *testing.B) {
		benchCall(b, bareRunner(), &flaky{})
	})
	for _, s := range settings {
		b.Run("scenario=success/setting="+s.name, func(b *testing.B) {
			benchCall(b, s.runner(b), &flaky{})
		})
	}
}

// clockNow and clockSince keep the reads of benchClock alive.
var (
	clockNow   time.Time
	clockSince time.Duration
)

// benchClock measures one read of the wall and monotonic clock
// (time.Now), the read Do makes before the first attempt so that
// Error.Elapsed counts it; with since, followed by a time.Since (a second
// read, of the monotonic clock only).
func benchClock(b *testing.B, since bool) {
	b.ReportAllocs()
	if !since {
		for b.Loop() {
			clockNow = time.Now()
		}
		return
	}
	for b.Loop() {
		clockSince = time.Since(time.Now())
	}
}

// BenchmarkClock is the cost of a clock read on this machine, for
// comparison with scenario=success: read=now is one time.Now,
// read=now+since a time.Now then a time.Since.
func BenchmarkClock(b *testing.B) {
	b.Run("read=now", func(b *testing.B) { benchClock(b, false) })
	b.Run("read=now+since", func(b *testing.B) { benchClock(b, true) })
}

// bareRunner is the runner of lib=bare: fn called once, directly.
func bareRunner() runner {
	for _, p := range peers {
		if p.name == "bare" {
			return p.newRunner(time.Nanosecond)
		}
	}
	panic("no bare peer")
}
