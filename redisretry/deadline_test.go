package redisretry

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/internal/chaos"
)

// stalledLimiters are the three limiters on a Redis that never answers, with
// a Timeout far longer than the deadlines the tests give.
type stalledLimiters struct {
	q       *Quota
	b       *Budget
	d       *Cooldown
	logs    *logCounter
	release func()
}

const stalledTimeout = 5 * time.Second

func newStalled(t *testing.T) *stalledLimiters {
	mem := newMem()
	s := &stalledLimiters{release: mem.setHang(), logs: &logCounter{}}
	log := slog.New(s.logs)
	s.q, _ = newQuota(mem, QuotaConfig{Settings: Settings{Key: "k", Timeout: stalledTimeout, Logger: log}, Limit: PerSecond(10)})
	s.b, _ = newBudget(mem, BudgetConfig{Settings: Settings{Key: "k", Timeout: stalledTimeout, Logger: log}})
	s.d, _ = newCooldown(mem, CooldownConfig{Settings: Settings{Key: "k", Timeout: stalledTimeout, Logger: log}})
	return s
}

func (s *stalledLimiters) close() {
	s.release()
	for _, c := range []interface{ Close() error }{s.q, s.b, s.d} {
		c.Close()
	}
}

// calls are the calls of a retry loop that wait for Redis, with the
// context and the deadline the loop gives; admitted is the budget's answer.
func (s *stalledLimiters) calls() []struct {
	name string
	call func(ctx context.Context, deadline time.Time) error
} {
	return []struct {
		name string
		call func(ctx context.Context, deadline time.Time) error
	}{
		{"cooldown", func(ctx context.Context, dl time.Time) error {
			_, err := s.d.Reserve(ctx, time.Now(), dl)
			return err
		}},
		{"quota", func(ctx context.Context, dl time.Time) error {
			_, err := s.q.Reserve(ctx, time.Now(), dl)
			return err
		}},
		{"budget", func(ctx context.Context, dl time.Time) error {
			if !s.b.AdmitContext(ctx, true, dl) {
				return errors.New("retry refused")
			}
			return ctx.Err()
		}},
	}
}

// TestStalledRedisNeverHoldsPastTheDeadline: with a Redis that never answers
// and a Timeout (5 s) longer than the time left (1 s), each limiter's call
// returns at the deadline, not at the Timeout: the pacers with an error
// wrapping retry.ErrPastDeadline (the loop gives up at the deadline), the
// budget deciding locally. The calls go on in the background and mark Redis
// failed at their Timeout; from then on no call waits for Redis at all, and
// each limiter logged one line.
func TestStalledRedisNeverHoldsPastTheDeadline(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		s := newStalled(t)
		for _, c := range s.calls() {
			begin := time.Now()
			err := c.call(t.Context(), begin.Add(time.Second))
			if el := time.Since(begin); el != time.Second {
				t.Errorf("%s: returned after %v with 1s to the deadline and a Timeout of %v, want at the deadline", c.name, el, stalledTimeout)
			}
			if c.name != "budget" && !errors.Is(err, retry.ErrPastDeadline) {
				t.Errorf("%s: error %v, want one wrapping retry.ErrPastDeadline", c.name, err)
			}
			if c.name == "budget" && err != nil {
				t.Errorf("budget: %v, want a retry admitted locally (the floor)", err)
			}
		}
		// Redis had less than its Timeout: not failed yet. The cooldown's
		// read is still in flight, so another Reserve does not wait for a
		// second one (nor does it wait for the deadline).
		if st := s.d.State(); st != StateRedis {
			t.Errorf("cooldown in state %v before the Timeout passed", st)
		}
		begin := time.Now()
		if _, err := s.d.Reserve(t.Context(), begin, begin.Add(time.Second)); err != nil || time.Since(begin) != 0 {
			t.Errorf("cooldown: a Reserve while the read is in flight: %v after %v, want nil at once", err, time.Since(begin))
		}

		time.Sleep(stalledTimeout) // every call in flight timed out
		synctest.Wait()
		for _, st := range []State{s.q.State(), s.b.State(), s.d.State()} {
			if st != StateFallback {
				t.Fatalf("states %v %v %v after the Timeout, want all fallback", s.q.State(), s.b.State(), s.d.State())
			}
		}
		for _, c := range s.calls() {
			begin := time.Now()
			if err := c.call(t.Context(), begin.Add(time.Second)); err != nil || time.Since(begin) != 0 {
				t.Errorf("%s in fallback: %v after %v, want a local decision at once", c.name, err, time.Since(begin))
			}
		}
		if l := s.logs.lines(); len(l) != 3 {
			t.Errorf("log lines %q, want one per limiter", l)
		}
		s.close()
	})
}

// TestStalledRedisEndsWithTheContext: a caller whose context ends (Ctrl-C)
// while a limiter waits for a stalled Redis gets the context's cause at
// once, not a decision at the Timeout (nor, for the cooldown, an attempt
// let through as if nothing happened).
func TestStalledRedisEndsWithTheContext(t *testing.T) {
	leakFree(t, func(t *testing.T) {
		s := newStalled(t)
		for _, c := range s.calls() {
			ctx, cancel := context.WithCancelCause(t.Context())
			stop := context.Canceled
			time.AfterFunc(300*time.Millisecond, func() { cancel(stop) })
			begin := time.Now()
			err := c.call(ctx, time.Time{})
			if el := time.Since(begin); el != 300*time.Millisecond {
				t.Errorf("%s: returned %v after the start, want when the context ended (300ms)", c.name, el)
			}
			if !errors.Is(err, stop) {
				t.Errorf("%s: error %v, want the context's cause", c.name, err)
			}
		}
		s.close()
	})
}

// TestRoundTripDeadlineAlreadyPassed: a cooldown whose read is due, asked
// with a deadline already passed, starts no Redis call at all, refuses at
// once, and leaves the read to the next caller.
func TestRoundTripDeadlineAlreadyPassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		d, _ := newCooldown(mem, CooldownConfig{Settings: Settings{Key: "k", Logger: discard}})
		defer d.Close()
		_, err := d.Reserve(t.Context(), time.Now(), time.Now().Add(-time.Millisecond))
		if !errors.Is(err, retry.ErrPastDeadline) || mem.calls.Load() != 0 || d.Stats().RoundTrips != 0 {
			t.Fatalf("err %v, %d calls, %d round trips; want a deadline refusal and no call", err, mem.calls.Load(), d.Stats().RoundTrips)
		}
		if _, err := d.Reserve(t.Context(), time.Now(), time.Time{}); err != nil || mem.calls.Load() != 1 {
			t.Fatalf("the next Reserve: %v, %d calls; want the read made", err, mem.calls.Load())
		}
	})
}

// TestStalledServerBoundedByDeadline: the same with a real client on a TCP
// peer that accepts connections and never answers (a stalled Redis): a
// Cooldown with a 5 s Timeout returns at a deadline 200ms away, and a
// cancelled context ends a Quota's wait. No goroutine or socket is left
// after Close and the client's Close.
func TestStalledServerBoundedByDeadline(t *testing.T) {
	before := chaos.SnapshotGoroutines()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	client, err := NewClient("redis://" + ln.Addr().String() + "/0")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := NewCooldown(client, CooldownConfig{Settings: Settings{Key: testKey(t), Timeout: stalledTimeout, Logger: discard}})
	q, _ := NewQuota(client, QuotaConfig{Settings: Settings{Key: testKey(t), Timeout: stalledTimeout, Logger: discard}, Limit: PerSecond(10)})

	begin := time.Now()
	deadline := begin.Add(200 * time.Millisecond)
	_, err = d.Reserve(t.Context(), begin, deadline)
	if !errors.Is(err, retry.ErrPastDeadline) {
		t.Errorf("cooldown: error %v, want one wrapping retry.ErrPastDeadline", err)
	}
	// Returned at the deadline: not before it, and (a generous sanity
	// bound, far below the Timeout) not long after it.
	if now := time.Now(); now.Before(deadline) || now.Sub(begin) > stalledTimeout/2 {
		t.Errorf("cooldown returned %v after the start, want at the deadline (200ms)", now.Sub(begin))
	}

	var conns []net.Conn
	conns = append(conns, <-accepted) // the cooldown's, still waiting
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() {
		_, err := q.Reserve(ctx, time.Now(), time.Time{})
		stopped <- err
	}()
	// Cancel once the quota's call reached the server: the wait must end
	// with the context, not at the Timeout.
	conns = append(conns, <-accepted)
	cancel()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Errorf("quota: error %v after the context ended, want context.Canceled", err)
	}

	// Closing the client ends the calls still in flight (a read on a
	// closed connection fails at once), so Close does not wait for the
	// Timeout.
	client.Close()
	d.Close()
	q.Close()
	ln.Close()
	for c := range accepted {
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	if leaked := before.Leaked(5 * time.Second); len(leaked) > 0 {
		t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}
