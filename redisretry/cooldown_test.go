package redisretry

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

func TestCooldownSharedByTheFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		cfg := CooldownConfig{Settings: Settings{Key: "gemini", Logger: discard}, Jitter: -1}
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
		d, _ := newCooldown(mem, CooldownConfig{Settings: Settings{Key: "m", Logger: discard}, Jitter: -1})
		defer d.Close()
		q, _ := newQuota(mem, QuotaConfig{Settings: Settings{Key: "m", Logger: discard}, Limit: PerSecond(100)})
		defer q.Close()
		p := retry.Policy{Pacer: retry.Pacers(d, q), Jitter: retry.Zero, MaxRetryAfter: time.Second}
		// Another process of the fleet was told to wait 30 s.
		other, _ := newCooldown(mem, CooldownConfig{Settings: Settings{Key: "m", Logger: discard}})
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
		d, _ := newCooldown(mem, CooldownConfig{Settings: Settings{Key: "m", Logger: discard}, Jitter: 2 * time.Second, Rand: func() float64 { u += 0.25; return u }})
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
		d, _ := NewCooldown(lyingScripter{[]any{remaining, now}}, CooldownConfig{Settings: Settings{Key: "k", Logger: discard}, Jitter: -1})
		begin := time.Now()
		s, err := d.Reserve(context.Background(), begin, begin.Add(2*time.Minute))
		if err != nil || s.Sub(begin) < 59*time.Second || s.Sub(begin) > 61*time.Second {
			t.Errorf("a cooldown of %d ms read from Redis: start in %v (%v), want the 60 s cap", remaining, s.Sub(begin), err)
		}
		d.Close()
	}
}

func TestCooldownContextDone(t *testing.T) {
	d, _ := NewCooldown(lyingScripter{[]any{int64(0), time.Now().UnixMilli()}}, CooldownConfig{Settings: Settings{Key: "k", Logger: discard}})
	defer d.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("caller left"))
	if _, err := d.Reserve(ctx, time.Now(), time.Time{}); err == nil || err.Error() != "caller left" || d.Stats().RoundTrips != 0 {
		t.Fatalf("Reserve with a done context: %v after %d round trips", err, d.Stats().RoundTrips)
	}
}

// wallClock is a settable clock whose readings have no monotonic part, as
// a clock read from the wall (or a time that went through UnixNano) has:
// set it back and every reading goes back.
type wallClock struct{ step atomic.Int64 }

func (c *wallClock) now() time.Time { return time.Now().Round(0).Add(time.Duration(c.step.Load())) }

func TestCooldownWallClockStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Review finding 6: a 30 s cooldown, then the clock is set back
		// 1 h. No wait may be longer than Max (+ Jitter), and the cooldown
		// ends Max after the step at the latest, not an hour later.
		for _, tc := range []struct {
			name   string
			jitter time.Duration
		}{{"no jitter", -1}, {"jitter 1s", time.Second}} {
			clock := &wallClock{}
			mem := newMem()
			d, _ := newCooldown(mem, CooldownConfig{Settings: Settings{Key: "k", Now: clock.now, Logger: discard}, Jitter: tc.jitter, Rand: func() float64 { return 0.999 }})
			d.Publish(t.Context(), 30*time.Second)
			time.Sleep(2 * time.Second)
			clock.step.Store(int64(-time.Hour))
			limit := DefaultCooldownMax + max(tc.jitter, 0)
			now := clock.now()
			s, err := d.Reserve(t.Context(), now, time.Time{})
			if err != nil || s.Sub(now) > limit || s.Sub(now) < 28*time.Second {
				t.Errorf("%s: clock set back 1h during a 30s cooldown: wait %v (%v), want 28s to %v", tc.name, s.Sub(now), err, limit)
			}
			// Under a deadline 2 min away it is not refused.
			if _, err := d.Reserve(t.Context(), now, now.Add(2*time.Minute)); err != nil {
				t.Errorf("%s: with a deadline 2 min away: %v", tc.name, err)
			}
			// Max after the step at the latest, the cooldown is over.
			time.Sleep(DefaultCooldownMax)
			now = clock.now()
			if s, err := d.Reserve(t.Context(), now, time.Time{}); err != nil || !s.Equal(now) {
				t.Errorf("%s: Max after the step: wait %v (%v), want none", tc.name, s.Sub(now), err)
			}
			d.Close()
		}
	})
}

func TestCooldownJitterBeforeDeadline(t *testing.T) {
	// Review R6. The rule: the deadline is checked against the cooldown's
	// end without jitter; the jitter is then drawn in [0, min(Jitter,
	// deadline − end)), so the start is before the deadline.
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			cooldown time.Duration // from now
			deadline time.Duration // from now
			rand     float64
			want     time.Duration // start from now; -1: refused
		}{
			{"ends 0.5s before the deadline, large draw", 10 * time.Second, 10500 * time.Millisecond, 0.999, 10*time.Second + 499500*time.Microsecond},
			{"ends 0.5s before the deadline, draw 0.5", 10 * time.Second, 10500 * time.Millisecond, 0.5, 10*time.Second + 250*time.Millisecond},
			{"ends 0.5s before the deadline, draw 0", 10 * time.Second, 10500 * time.Millisecond, 0, 10 * time.Second},
			{"deadline far: the whole jitter", 10 * time.Second, time.Minute, 0.5, 10*time.Second + 500*time.Millisecond},
			{"no deadline", 10 * time.Second, 0, 0.75, 10*time.Second + 750*time.Millisecond},
			{"a Rand out of range stays below the deadline", 10 * time.Second, 10500 * time.Millisecond, 1.5, 10500*time.Millisecond - 1},
			{"a negative Rand means no jitter", 10 * time.Second, 10500 * time.Millisecond, -1, 10 * time.Second},
			{"ends at the deadline: refused", 10 * time.Second, 10 * time.Second, 0, -1},
			{"ends after the deadline: refused", 10 * time.Second, 5 * time.Second, 0, -1},
		} {
			mem := newMem()
			r := tc.rand
			d, _ := newCooldown(mem, CooldownConfig{Settings: Settings{Key: "k", Logger: discard}, Jitter: time.Second, Rand: func() float64 { return r }})
			d.Publish(t.Context(), tc.cooldown)
			now := time.Now()
			var deadline time.Time
			if tc.deadline > 0 {
				deadline = now.Add(tc.deadline)
			}
			s, err := d.Reserve(t.Context(), now, deadline)
			switch {
			case tc.want < 0:
				if !errors.Is(err, retry.ErrPastDeadline) {
					t.Errorf("%s: start in %v (%v), want refused past the deadline", tc.name, s.Sub(now), err)
				}
			case err != nil || s.Sub(now) != tc.want:
				t.Errorf("%s: start in %v (%v), want %v", tc.name, s.Sub(now), err, tc.want)
			case !deadline.IsZero() && !s.Before(deadline):
				t.Errorf("%s: start %v not before the deadline", tc.name, s.Sub(now))
			}
			d.Close()
		}
	})
}

func TestRedisCooldownRepairsForeignKeys(t *testing.T) {
	// Review R2: a key of another type, or a value that is no time, at the
	// cooldown's key was a permanent fallback (WRONGTYPE, or a remaining
	// time that is no integer). The script deletes it: no cooldown, and
	// the Cooldown stays on Redis. A time written by hand is honoured.
	srv := startRedis(t)
	c := srv.client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		spoil func(key string) error
		left  time.Duration // the cooldown then read (0 for none, and the key is gone)
	}{
		{"a hash", func(k string) error { return c.HSet(ctx, k, "a", "b").Err() }, 0},
		{"a list", func(k string) error { return c.LPush(ctx, k, "a").Err() }, 0},
		{"no number", func(k string) error { return c.Set(ctx, k, "abc", 0).Err() }, 0},
		{"beyond 2^53", func(k string) error { return c.Set(ctx, k, "1e300", 0).Err() }, 0},
		{"negative", func(k string) error { return c.Set(ctx, k, "-5", 0).Err() }, 0},
		{"fractional", func(k string) error { return c.Set(ctx, k, "12.5", 0).Err() }, 0},
		{"a time 30s ahead, by hand, no expiry", func(k string) error {
			return c.Set(ctx, k, serverMicros(t, c)/1000+30_000, 0).Err()
		}, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey(t)
			if err := tc.spoil(backend.CooldownKey(key)); err != nil {
				t.Fatal(err)
			}
			d, _ := NewCooldown(c, CooldownConfig{Settings: Settings{Key: key, Timeout: time.Second, Logger: discard}, Jitter: -1})
			defer d.Close()
			now := time.Now()
			s, err := d.Reserve(ctx, now, time.Time{})
			if st := d.Stats(); err != nil || st.State != StateRedis || st.Errors != 0 {
				t.Fatalf("Reserve: %v, stats %+v; want no error on Redis", err, st)
			}
			// What is left is counted from the reply's arrival: up to the
			// call's Timeout after now.
			if w := s.Sub(now); (tc.left == 0 && w != 0) || (tc.left > 0 && (w > tc.left+time.Second || w < tc.left-5*time.Second)) {
				t.Fatalf("wait %v, want %v", w, tc.left)
			}
			if n := c.Exists(ctx, backend.CooldownKey(key)).Val(); (n == 0) != (tc.left == 0) {
				t.Fatalf("the key exists: %d after the read", n)
			}
			// Publishing works as on a clean key.
			d.Publish(ctx, time.Minute)
			if u := time.Until(d.Until()); u < 50*time.Second {
				t.Fatalf("after a 1 min hint: until in %v", u)
			}
			if typ := c.Type(ctx, backend.CooldownKey(key)).Val(); typ != "string" || c.PTTL(ctx, backend.CooldownKey(key)).Val() <= 0 {
				t.Fatalf("after a 1 min hint the key is a %s with PTTL %v", typ, c.PTTL(ctx, backend.CooldownKey(key)).Val())
			}
		})
	}
}

func TestCooldownOverMeansNoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A cooldown that ended is no wait, even for a caller whose
		// earliest is before its end: no jitter after it either (a jitter
		// of up to 3 s after an end 1 s ago was a wait of up to 2 s).
		d, _ := newCooldown(newMem(), CooldownConfig{Settings: Settings{Key: "k", Logger: discard}, Jitter: 3 * time.Second, Rand: func() float64 { return 0.999 }})
		defer d.Close()
		d.Publish(t.Context(), time.Second)
		time.Sleep(2 * time.Second)
		earliest := time.Now().Add(-5 * time.Second)
		if s, err := d.Reserve(t.Context(), earliest, time.Time{}); err != nil || !s.Equal(earliest) {
			t.Fatalf("Reserve after the cooldown ended: start %v after earliest (%v), want earliest", s.Sub(earliest), err)
		}
	})
}
