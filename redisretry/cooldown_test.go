package redisretry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
)

func TestCooldownSharedByTheFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		cfg := CooldownConfig{Key: "gemini", Jitter: -1, Logger: discard}
		a, _ := newCooldown(mem, cfg)
		b, _ := newCooldown(mem, cfg)
		defer a.Close()
		defer b.Close()
		now := time.Now()
		if s, err := b.Reserve(t.Context(), now, time.Time{}); err != nil || !s.Equal(now) {
			t.Fatalf("no cooldown: %v %v", s, err)
		}
		// a gets a 429 asking for 25 s.
		a.Record(retry.After(errors.New("429"), 25*time.Second))
		// b sees it once its cache (1 s) is stale.
		time.Sleep(time.Second)
		now = time.Now()
		s, err := b.Reserve(t.Context(), now, time.Time{})
		if err != nil || s.Sub(now) != 24*time.Second {
			t.Fatalf("b waits %v (%v), want the 24 s left of a's hint", s.Sub(now), err)
		}
		// Under a deadline it cannot meet: give up at once, saying how long.
		_, err = b.Reserve(t.Context(), now, now.Add(10*time.Second))
		if !errors.Is(err, retry.ErrPastDeadline) || b.Stats().Refused != 1 {
			t.Fatalf("deadline: %v", err)
		}
		// A shorter hint does not shorten it; a longer one is capped at Max.
		a.Record(retry.After(errors.New("503"), time.Second))
		a.Record(retry.After(errors.New("429"), 24*time.Hour))
		time.Sleep(time.Second)
		now = time.Now()
		if s, _ := b.Reserve(t.Context(), now, time.Time{}); s.Sub(now) != 59*time.Second {
			t.Fatalf("after a 24 h hint b waits %v, want the 60 s cap less the second since", s.Sub(now))
		}
		// Errors without hints and successes publish nothing.
		calls := mem.calls.Load()
		a.Record(nil)
		a.Record(errors.New("500"))
		if mem.calls.Load() != calls {
			t.Fatal("a call without a hint reached Redis")
		}
	})
}

func TestCooldownWithRetryDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		d, _ := newCooldown(mem, CooldownConfig{Key: "m", Jitter: -1, Logger: discard})
		defer d.Close()
		q, _ := newQuota(mem, QuotaConfig{Key: "m", Limit: PerSecond(100), Logger: discard})
		defer q.Close()
		p := retry.Policy{Pacer: retry.Pacers(d, q), Jitter: retry.Zero, MaxRetryAfter: time.Second}
		// Another process of the fleet was told to wait 30 s.
		other, _ := newCooldown(mem, CooldownConfig{Key: "m", Logger: discard})
		defer other.Close()
		other.Publish(t.Context(), 30*time.Second)
		begin := time.Now()
		var at time.Duration
		err := retry.Run(t.Context(), p, func(context.Context) error { at = time.Since(begin); return nil })
		if err != nil || at != 30*time.Second {
			t.Fatalf("first attempt at %v (%v), want after the fleet's 30 s cooldown", at, err)
		}
	})
}

func TestCooldownJitterSpreadsTheRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		u := 0.0
		d, _ := newCooldown(mem, CooldownConfig{Key: "m", Jitter: 2 * time.Second, Rand: func() float64 { u += 0.25; return u }, Logger: discard})
		defer d.Close()
		d.Publish(t.Context(), 10*time.Second)
		now := time.Now()
		for _, want := range []time.Duration{10500 * time.Millisecond, 11 * time.Second, 11500 * time.Millisecond} {
			if s, _ := d.Reserve(t.Context(), now, time.Time{}); s.Sub(now) != want {
				t.Fatalf("start in %v, want %v", s.Sub(now), want)
			}
		}
	})
}

func TestCooldownReadIsCapped(t *testing.T) {
	// What Redis holds is capped by this process's Max, whoever wrote it: a
	// process with a larger Max, a server whose clock went back, or garbage
	// (2^62 ms would overflow a time.Duration).
	now := time.Now().UnixMilli()
	for _, remaining := range []int64{10 * 60 * 1000, 1 << 62} {
		d, _ := NewCooldown(lyingScripter{[]any{remaining, now}}, CooldownConfig{Key: "k", Jitter: -1, Logger: discard})
		begin := time.Now()
		s, err := d.Reserve(context.Background(), begin, begin.Add(2*time.Minute))
		if err != nil || s.Sub(begin) < 59*time.Second || s.Sub(begin) > 61*time.Second {
			t.Errorf("a cooldown of %d ms read from Redis: start in %v (%v), want the 60 s cap", remaining, s.Sub(begin), err)
		}
		d.Close()
	}
}

func TestCooldownContextDone(t *testing.T) {
	d, _ := NewCooldown(lyingScripter{[]any{int64(0), time.Now().UnixMilli()}}, CooldownConfig{Key: "k", Logger: discard})
	defer d.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("caller left"))
	if _, err := d.Reserve(ctx, time.Now(), time.Time{}); err == nil || err.Error() != "caller left" || d.Stats().RoundTrips != 0 {
		t.Fatalf("Reserve with a done context: %v after %d round trips", err, d.Stats().RoundTrips)
	}
}
