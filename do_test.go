package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry/internal/testkit"
)

var errFlaky = errors.New("flaky")

// newRecorder returns an Observer's recorder for assertions.
func newRecorder() *testkit.Recorder[Event, EventKind] {
	return testkit.NewRecorder(func(e Event) EventKind { return e.Kind })
}

func TestAttemptsCapIsExact(t *testing.T) {
	for _, attempts := range []int{1, 2, 5, 9} {
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			_, err := Do(t.Context(), Policy{Attempts: attempts, Rand: NewRand(1)}, func(context.Context) (int, error) {
				calls++
				return calls, errFlaky
			})
			if calls != attempts {
				t.Fatalf("fn called %d times, want %d", calls, attempts)
			}
			var re *Error
			if !errors.As(err, &re) || re.Attempts != attempts || re.Reason != ReasonAttempts {
				t.Fatalf("err = %#v, want *Error with %d attempts and reason attempts", err, attempts)
			}
			if !errors.Is(err, errFlaky) {
				t.Fatalf("errors.Is(err, errFlaky) = false for %v", err)
			}
		})
	}
}

func TestDefaultWaitsInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Time
		start := time.Now()
		err := Run(t.Context(), Policy{Attempts: 8, Rand: NewRand(3)}, func(context.Context) error {
			at = append(at, time.Now())
			return errFlaky
		})
		if !errors.Is(err, errFlaky) {
			t.Fatal(err)
		}
		if len(at) != 8 || !at[0].Equal(start) {
			t.Fatalf("attempt times %v", at)
		}
		for n := 0; n < len(at)-1; n++ {
			w := at[n+1].Sub(at[n])
			lo := min(time.Duration(1<<n)*time.Second, 60*time.Second)
			hi := min(lo+time.Second, 60*time.Second)
			if w < lo || w > hi {
				t.Errorf("wait %d = %v, want in [%v, %v]", n, w, lo, hi)
			}
		}
	})
}

func TestNeverWaitsPastTheDeadline(t *testing.T) {
	for _, useCtx := range []bool{true, false} {
		name := map[bool]string{true: "context deadline", false: "policy deadline"}[useCtx]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := Policy{Attempts: 10, Jitter: Zero} // waits 1, 2, 4, 8 s
				var ctx context.Context
				ctx, p.Deadline = testkit.Deadline(t, t.Context(), useCtx, 10*time.Second)
				start := time.Now()
				var last time.Time
				calls := 0
				err := Run(ctx, p, func(context.Context) error {
					calls++
					last = time.Now()
					return errFlaky
				})
				// Attempts at 0, 1, 3, 7 s; the next wait (8 s) would end at 15 s > 10 s:
				// give up at 7 s without sleeping.
				if calls != 4 {
					t.Fatalf("calls = %d, want 4", calls)
				}
				if got := time.Since(start); got != 7*time.Second || !time.Now().Equal(last) {
					t.Fatalf("returned after %v, want 7s (the last attempt's time, no sleep)", got)
				}
				var re *Error
				if !errors.As(err, &re) || re.Reason != ReasonDeadline || !errors.Is(err, errFlaky) {
					t.Fatalf("err = %v, want reason deadline with the last error", err)
				}
			})
		})
	}
}

func TestPolicyDeadlineCancelsRunningAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err := Run(t.Context(), Policy{Deadline: 5 * time.Second}, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonDeadline || re.Attempts != 1 {
			t.Fatalf("err = %v, want 1 attempt, reason deadline", err)
		}
		if !errors.Is(err, errPolicyDeadline) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want both the cause and the last error reachable", err)
		}
		if got := time.Since(start); got != 5*time.Second {
			t.Fatalf("returned after %v, want 5s", got)
		}
	})
}

// TestAttemptCauseTellsTimeoutFromDeadline: the cause of an attempt's
// context tells which limit ended it, as Policy.AttemptTimeout documents
// (cmd/retry names the flag from it).
func TestAttemptCauseTellsTimeoutFromDeadline(t *testing.T) {
	for _, tc := range []struct {
		name        string
		p           Policy
		wantTimeout bool
	}{
		{"attempt timeout first", Policy{Attempts: 1, Deadline: 5 * time.Second, AttemptTimeout: time.Second}, true},
		{"deadline first", Policy{Attempts: 1, Deadline: time.Second, AttemptTimeout: 5 * time.Second}, false},
		{"deadline only", Policy{Attempts: 1, Deadline: time.Second}, false},
		{"attempt timeout only", Policy{Attempts: 1, AttemptTimeout: time.Second}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var cause error
				Run(t.Context(), tc.p, func(ctx context.Context) error {
					<-ctx.Done()
					cause = context.Cause(ctx)
					return ctx.Err()
				})
				if !errors.Is(cause, context.DeadlineExceeded) {
					t.Fatalf("cause = %v, want one matching context.DeadlineExceeded", cause)
				}
				if got := cause == context.DeadlineExceeded; got != tc.wantTimeout {
					t.Fatalf("cause = %v: is context.DeadlineExceeded itself = %v, want %v", cause, got, tc.wantTimeout)
				}
			})
		})
	}
}

func TestCancelDuringWaitReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cause := errors.New("user hit stop")
		ctx, cancel := context.WithCancelCause(t.Context())
		go func() {
			time.Sleep(500 * time.Millisecond)
			cancel(cause)
		}()
		start := time.Now()
		calls := 0
		err := Run(ctx, Policy{}, func(context.Context) error { calls++; return errFlaky })
		if got := time.Since(start); got != 500*time.Millisecond {
			t.Fatalf("returned after %v, want 500ms", got)
		}
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonContext || calls != 1 {
			t.Fatalf("err = %v (calls %d), want reason context after 1 call", err, calls)
		}
		if !errors.Is(err, cause) || !errors.Is(err, errFlaky) {
			t.Fatalf("err = %v, want both the cause and the last error", err)
		}
		if re.Cause != cause || re.Last != errFlaky {
			t.Fatalf("Cause = %v, Last = %v", re.Cause, re.Last)
		}
	})
}

func TestCallerContextErrorStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Run(ctx, Policy{}, func(ctx context.Context) error {
		calls++
		cancel()
		return ctx.Err()
	})
	var re *Error
	if calls != 1 || !errors.As(err, &re) || re.Reason != ReasonContext || !errors.Is(err, context.Canceled) {
		t.Fatalf("calls = %d, err = %v", calls, err)
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		p := Policy{Attempts: 3, AttemptTimeout: 2 * time.Second, Jitter: Zero}
		start := time.Now()
		err := Run(t.Context(), p, func(ctx context.Context) error {
			calls++
			<-ctx.Done() // a hung attempt
			return ctx.Err()
		})
		if calls != 3 {
			t.Fatalf("calls = %d, want 3 (each timed-out attempt retried)", calls)
		}
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonAttempts || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		// 3 attempts of 2 s plus waits of 1 s and 2 s.
		if got := time.Since(start); got != 9*time.Second {
			t.Fatalf("took %v, want 9s", got)
		}
	})
}

func TestPermanentAndClassifier(t *testing.T) {
	inner := errors.New("bad request")
	tests := []struct {
		name string
		p    Policy
		err  error
		want error // returned as is
	}{
		{"Permanent", Policy{}, Permanent(inner), inner},
		{"wrapped Permanent", Policy{}, errors.Join(errors.New("ctx"), Permanent(inner)), nil},
		{"classifier says no", Policy{Retryable: func(err error) bool { return !errors.Is(err, inner) }}, inner, inner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			tt.p.Observer = rec.Observe
			calls := 0
			err := Run(context.Background(), tt.p, func(context.Context) error { calls++; return tt.err })
			if calls != 1 {
				t.Fatalf("calls = %d, want 1", calls)
			}
			want := tt.want
			if want == nil {
				want = tt.err
			}
			if err != want {
				t.Fatalf("err = %#v, want %#v returned as is", err, want)
			}
			if !errors.Is(err, inner) {
				t.Fatalf("errors.Is(err, inner) = false")
			}
			g := rec.Of(EventGiveUp)
			if len(g) != 1 || g[0].Reason != ReasonPermanent {
				t.Fatalf("give-up events = %+v", g)
			}
		})
	}
	if Permanent(nil) != nil || !IsPermanent(Permanent(inner)) || IsPermanent(inner) {
		t.Fatal("Permanent/IsPermanent")
	}
}

func TestDoReturnsLastValue(t *testing.T) {
	n := 0
	v, err := Do(context.Background(), Policy{Attempts: 3, InitialDelay: Zero, MaxDelay: Zero, Jitter: Zero},
		func(context.Context) (int, error) {
			n++
			if n < 3 {
				return n, errFlaky
			}
			return 42, nil
		})
	if err != nil || v != 42 || n != 3 {
		t.Fatalf("Do = %d, %v after %d calls", v, err, n)
	}
}

func TestServerHint(t *testing.T) {
	tests := []struct {
		name     string
		p        Policy
		hint     time.Duration
		min, max time.Duration
	}{
		{"hint is a floor, jitter on top", Policy{}, 25 * time.Second, 25 * time.Second, 26 * time.Second},
		{"hint below the shape's wait", Policy{}, time.Millisecond, time.Second, 2 * time.Second},
		{"huge hint capped at MaxDelay", Policy{}, 1e9 * time.Second, 60 * time.Second, 60 * time.Second},
		{"cap set by MaxRetryAfter", Policy{MaxRetryAfter: 10 * time.Second}, time.Hour, 10 * time.Second, 10 * time.Second},
		{"hints ignored", Policy{MaxRetryAfter: Zero}, time.Hour, time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder()
				p := tt.p
				p.Attempts, p.Observer, p.Rand = 2, rec.Observe, NewRand(9)
				var at []time.Time
				Run(t.Context(), p, func(context.Context) error {
					at = append(at, time.Now())
					return After(errFlaky, tt.hint)
				})
				if len(at) != 2 {
					t.Fatalf("%d attempts", len(at))
				}
				w := at[1].Sub(at[0])
				if w < tt.min || w > tt.max {
					t.Fatalf("wait = %v, want in [%v, %v]", w, tt.min, tt.max)
				}
				if r := rec.Of(EventRetry); len(r) != 1 || r[0].Wait != w {
					t.Fatalf("retry events %+v, want one with Wait %v", r, w)
				}
			})
		})
	}
}

func TestHintPastDeadlineStopsNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		err := Run(t.Context(), Policy{Deadline: 30 * time.Second, MaxRetryAfter: time.Hour}, func(context.Context) error {
			calls++
			return After(errFlaky, 45*time.Second)
		})
		var re *Error
		if calls != 1 || time.Since(start) != 0 || !errors.As(err, &re) || re.Reason != ReasonDeadline {
			t.Fatalf("calls %d after %v, err %v", calls, time.Since(start), err)
		}
		if d, ok := RetryAfter(err); !ok || d != 45*time.Second {
			t.Fatalf("RetryAfter(err) = %v, %v", d, ok)
		}
	})
}

func TestInvalidPolicyDoesNotCall(t *testing.T) {
	called := false
	err := Run(context.Background(), Policy{Attempts: -3}, func(context.Context) error { called = true; return nil })
	var ve *ValidationError
	if called || !errors.As(err, &ve) || ve.Field != "Attempts" {
		t.Fatalf("called = %v, err = %v", called, err)
	}
}

func TestObserverEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		n := 0
		err := Run(t.Context(), Policy{Observer: rec.Observe, Rand: NewRand(5)}, func(context.Context) error {
			n++
			if n < 3 {
				return errFlaky
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		r := rec.Of(EventRetry)
		if len(r) != 2 || r[0].Attempt != 1 || r[1].Attempt != 2 || r[0].MaxAttempts != 5 || r[0].Err != errFlaky {
			t.Fatalf("retry events %+v", r)
		}
		if r[1].Elapsed != r[0].Wait { // the clock starts at the first failure
			t.Fatalf("elapsed %v, want %v", r[1].Elapsed, r[0].Wait)
		}
		s := rec.Of(EventSuccess)
		if len(s) != 1 || s[0].Attempt != 3 {
			t.Fatalf("success events %+v", s)
		}
	})
}

func TestSlogObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		Run(t.Context(), Policy{Attempts: 2, Jitter: Zero, Observer: SlogObserver(l, slog.LevelInfo)},
			func(context.Context) error { return errFlaky })
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("log lines: %q", buf.String())
		}
		for _, want := range []string{`"msg":"retry"`, `"attempt":1`, `"wait":1000000000`, `"error":"flaky"`, `"elapsed":0`} {
			if !strings.Contains(lines[0], want) {
				t.Errorf("retry record %s lacks %s", lines[0], want)
			}
		}
		if !strings.Contains(lines[1], `"reason":"attempts"`) || !strings.Contains(lines[1], `"msg":"retry: giving up"`) {
			t.Errorf("give-up record %s", lines[1])
		}
	})
}

func TestDefaultObserverIsSilentUnlessDebug(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		old := slog.Default()
		defer slog.SetDefault(old)
		slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
		p := Policy{Attempts: 2}
		Run(t.Context(), p, func(context.Context) error { return errFlaky })
		if buf.Len() != 0 {
			t.Fatalf("logged at Info level: %s", buf.String())
		}
		slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
		Run(t.Context(), p, func(context.Context) error { return errFlaky })
		if !strings.Contains(buf.String(), "msg=retry") || !strings.Contains(buf.String(), "reason=attempts") {
			t.Fatalf("debug log = %q", buf.String())
		}
	})
}

// fakeLimiter refuses what it is told to and counts calls.
type fakeLimiter struct {
	refuseFirst, refuseRetry bool
	admits, oks, fails       atomic.Int32
}

func (f *fakeLimiter) Admit(retry bool) bool {
	f.admits.Add(1)
	if retry {
		return !f.refuseRetry
	}
	return !f.refuseFirst
}

func (f *fakeLimiter) Record(ok bool) {
	if ok {
		f.oks.Add(1)
	} else {
		f.fails.Add(1)
	}
}

func TestLimiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeLimiter{refuseRetry: true}
		calls := 0
		err := Run(t.Context(), Policy{Budget: b}, func(context.Context) error { calls++; return errFlaky })
		var re *Error
		if calls != 1 || !errors.As(err, &re) || re.Reason != ReasonBudget || !errors.Is(err, ErrBudgetExhausted) || !errors.Is(err, errFlaky) {
			t.Fatalf("budget: calls %d, err %v", calls, err)
		}
		if b.fails.Load() != 1 || b.admits.Load() != 2 {
			t.Fatalf("budget saw %d admits, %d failures", b.admits.Load(), b.fails.Load())
		}

		th := &fakeLimiter{refuseFirst: true}
		calls = 0
		err = Run(t.Context(), Policy{Throttle: th}, func(context.Context) error { calls++; return nil })
		if calls != 0 || !errors.As(err, &re) || re.Reason != ReasonThrottled || re.Attempts != 0 || !errors.Is(err, ErrThrottled) {
			t.Fatalf("throttle: calls %d, err %v", calls, err)
		}

		ok := &fakeLimiter{}
		n := 0
		err = Run(t.Context(), Policy{Throttle: ok, Budget: ok}, func(context.Context) error {
			n++
			if n == 1 {
				return errFlaky
			}
			return nil
		})
		if err != nil || ok.oks.Load() != 2 || ok.fails.Load() != 2 {
			t.Fatalf("records: %v ok=%d fail=%d", err, ok.oks.Load(), ok.fails.Load())
		}
	})
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Attempts: 5, Elapsed: 15 * time.Second, Reason: ReasonAttempts, Last: io.ErrUnexpectedEOF}
	if got := e.Error(); got != "retry: gave up after 5 attempts in 15s (attempts): unexpected EOF" {
		t.Fatalf("Error() = %q", got)
	}
	if !errors.Is(e, io.ErrUnexpectedEOF) || errors.Is(e, ErrBudgetExhausted) {
		t.Fatal("errors.Is on *Error")
	}
}

// TestStopRecords: how the limiters record an attempt that stops the loop.
// A permanent error (or one the classifier refuses) is not an overload
// signal; an Unretryable one is, although it is not retried either.
func TestStopRecords(t *testing.T) {
	inner := errors.New("503 answered to a POST without a key")
	tests := []struct {
		name      string
		err       error
		retryable func(error) bool
		wantOK    bool
	}{
		{"Permanent", Permanent(inner), nil, true},
		{"classifier says no", inner, func(error) bool { return false }, true},
		{"Unretryable", Unretryable(inner), nil, false},
		{"wrapped Unretryable", fmt.Errorf("call: %w", Unretryable(inner)), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &fakeLimiter{}
			calls := 0
			err := Run(t.Context(), Policy{Budget: l, Throttle: l, Retryable: tt.retryable}, func(context.Context) error {
				calls++
				return tt.err
			})
			if calls != 1 || !errors.Is(err, inner) {
				t.Fatalf("calls = %d, err = %v; want 1 call and the error", calls, err)
			}
			oks, fails := l.oks.Load(), l.fails.Load()
			if tt.wantOK && (oks != 2 || fails != 0) || !tt.wantOK && (oks != 0 || fails != 2) {
				t.Fatalf("budget and throttle recorded %d ok, %d failed; want both %v", oks, fails, tt.wantOK)
			}
		})
	}
	if Unretryable(nil) != nil || !IsPermanent(Unretryable(inner)) {
		t.Fatal("Unretryable(nil) or IsPermanent(Unretryable(err))")
	}
	if err := Run(context.Background(), Policy{}, func(context.Context) error { return Unretryable(inner) }); err != inner {
		t.Fatalf("Run returned %v, want the error as is", err)
	}
}

// TestDoNeverRetriesInATightLoop: with a cap at MaxInt64 the wait is huge,
// never negative, so a call with a deadline gives up at once.
func TestDoNeverRetriesInATightLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		calls := 0
		err := Run(ctx, Policy{Attempts: 5, MaxDelay: math.MaxInt64, ExpBase: 1e300}, func(context.Context) error {
			calls++
			return errFlaky
		})
		var re *Error
		if !errors.As(err, &re) || re.Reason != ReasonDeadline || calls != 2 {
			t.Fatalf("calls %d, err %v: want 2 calls (the 1 s wait, then a huge one past the deadline)", calls, err)
		}
	})
}

func TestDoneContextNeverCallsFn(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	why := errors.New("shutting down")
	cancel(why)
	for _, p := range []Policy{{}, {Deadline: time.Minute}, {AttemptTimeout: time.Second}, {Budget: &fakeLimiter{}}, {Pacer: &fakePacer{}}} {
		rec := newRecorder()
		p.Observer = rec.Observe
		calls := 0
		v, err := Do(ctx, p, func(context.Context) (int, error) { calls++; return 1, nil })
		var re *Error
		if calls != 0 || v != 0 || !errors.As(err, &re) || re.Reason != ReasonContext || re.Attempts != 0 ||
			!errors.Is(err, why) {
			t.Fatalf("%+v: calls %d, v %d, err %v: want no call and the context's cause", p, calls, v, err)
		}
		if g := rec.Of(EventGiveUp); len(g) != 1 || g[0].Reason != ReasonContext {
			t.Fatalf("events %+v, want one give-up", rec.Events())
		}
	}
}

// TestElapsedIncludesEveryAttempt: Error.Elapsed and the events' Elapsed
// count the attempts that ran, the first included, with or without a
// Deadline.
func TestElapsedIncludesEveryAttempt(t *testing.T) {
	for _, p := range []Policy{
		{Attempts: 1},
		{Attempts: 1, Deadline: time.Hour},
		{Attempts: 2, Jitter: Zero},
		{Attempts: 2, Jitter: Zero, Budget: &fakeLimiter{}},
	} {
		synctest.Test(t, func(t *testing.T) {
			rec := newRecorder()
			p.Observer = rec.Observe
			err := Run(t.Context(), p, func(context.Context) error {
				time.Sleep(500 * time.Millisecond) // virtual
				return errFlaky
			})
			want := 500 * time.Millisecond // one attempt
			if p.Attempts == 2 {
				want = 2*500*time.Millisecond + time.Second // two attempts and the 1 s wait
			}
			var re *Error
			if !errors.As(err, &re) || re.Elapsed != want {
				t.Fatalf("%+v: err %v, want Elapsed %v", p, err, want)
			}
			if g := rec.Of(EventGiveUp); len(g) != 1 || g[0].Elapsed != want {
				t.Fatalf("give-up events %+v, want Elapsed %v", g, want)
			}
			if r := rec.Of(EventRetry); p.Attempts == 2 && (len(r) != 1 || r[0].Elapsed != 500*time.Millisecond) {
				t.Fatalf("retry events %+v, want Elapsed 500ms", r)
			}
		})
	}
	// The success event too.
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		Run(t.Context(), Policy{Observer: rec.Observe}, func(context.Context) error {
			time.Sleep(300 * time.Millisecond)
			return nil
		})
		if s := rec.Of(EventSuccess); len(s) != 1 || s[0].Elapsed != 300*time.Millisecond {
			t.Fatalf("success events %+v, want Elapsed 300ms", s)
		}
	})
}

func TestAllocationsOnSuccess(t *testing.T) {
	ok := func(context.Context) error { return nil }
	usesDone := func(ctx context.Context) error { _ = ctx.Done(); return nil }
	short, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cancellable, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		p    Policy
		fn   func(context.Context) error
		max  float64
	}{
		{"default policy", context.Background(), Policy{}, ok, 0},
		{"limiters", context.Background(), Policy{Budget: &fakeLimiter{}, Throttle: &fakeLimiter{}}, ok, 0},
		{"pacer", context.Background(), Policy{Pacer: &fakePacer{}}, ok, 0},
		{"deadline after the context's", short, Policy{Deadline: time.Hour}, ok, 0},
		{"deadline", context.Background(), Policy{Deadline: time.Hour}, ok, 1},
		{"attempt timeout", context.Background(), Policy{AttemptTimeout: time.Hour}, ok, 1},
		{"deadline and attempt timeout: one context", context.Background(), Policy{Deadline: time.Hour, AttemptTimeout: time.Minute}, ok, 1},
		{"deadline, limiters and pacer", context.Background(), Policy{Deadline: time.Hour, Budget: &fakeLimiter{}, Pacer: &fakePacer{}}, ok, 1},
		// The standard library's context and its channel (5), and the
		// attempt's own context that derived it.
		{"deadline, fn asks for Done", context.Background(), Policy{Deadline: time.Hour}, usesDone, 6},
		{"deadline, a context that can be cancelled", cancellable, Policy{Deadline: time.Hour}, ok, 4},
		{"deadline, a context that can be cancelled, fn asks for Done", cancellable, Policy{Deadline: time.Hour}, usesDone, 5},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(200, func() { Run(tt.ctx, tt.p, tt.fn) }); got > tt.max {
			t.Errorf("%s: %v allocations per successful call, want at most %v", tt.name, got, tt.max)
		}
	}
}
