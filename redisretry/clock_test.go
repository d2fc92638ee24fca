package redisretry

import (
	"testing"
	"time"
)

func TestServerClock(t *testing.T) {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// The server's clock reads 1000 s when the local one reads t0, on
	// every machine: the true offset.
	server := func(local time.Duration) int64 { return 1_000_000_000 + int64(local/time.Microsecond) }

	type sample struct{ send, script, recv time.Duration }
	for _, tc := range []struct {
		name    string
		samples []sample
		now     time.Duration // when the block is placed
		// where the server's time server(probe) is placed: earliest and
		// latest, relative to probe
		probe          time.Duration
		early, late    time.Duration
		from, to, keep time.Duration // a block to place (server time = server(x))
		slack          time.Duration
		tat, end       time.Duration
	}{
		{
			name:    "one slow reply: the bounds are the round trip",
			samples: []sample{{send: 0, script: ms(30), recv: ms(100)}},
			now:     ms(100), probe: ms(500), early: -ms(30), late: ms(70),
			from: ms(500), to: ms(1000), keep: ms(25), tat: ms(570), end: ms(970),
		},
		{
			name: "a fast reply later tightens them",
			samples: []sample{
				{send: 0, script: ms(30), recv: ms(100)},
				{send: ms(200), script: ms(201), recv: ms(202)},
			},
			now: ms(202), probe: ms(500), early: -ms(1), late: ms(1),
			from: ms(500), to: ms(1000), keep: ms(25), tat: ms(501), end: ms(999),
		},
		{
			name: "bounds from two replies: a fast way there, a fast way back",
			samples: []sample{
				{send: 0, script: 0, recv: ms(80)},
				{send: ms(100), script: ms(180), recv: ms(180)},
			},
			now: ms(180), probe: ms(500), early: -50 * time.Microsecond, late: 0, // lo aged 100 ms
			from: ms(500), to: ms(1000), keep: ms(25), tat: ms(500), end: ms(1000) - 50*time.Microsecond,
		},
		{
			name: "a Slack larger than the width: the end is not cut (the Quota uses passed slots less late)",
			samples: []sample{
				{send: 0, script: ms(30), recv: ms(100)},
				{send: ms(200), script: ms(201), recv: ms(202)},
			},
			now: ms(202), probe: ms(500), early: -ms(1), late: ms(1),
			from: ms(500), to: ms(1000), keep: ms(25), slack: ms(20), tat: ms(501), end: ms(1001),
		},
		{
			name:    "a Slack smaller than the width: the end is cut by the difference",
			samples: []sample{{send: 0, script: ms(30), recv: ms(100)}},
			now:     ms(100), probe: ms(500), early: -ms(30), late: ms(70),
			from: ms(500), to: ms(1000), keep: ms(25), slack: ms(20), tat: ms(570), end: ms(990),
		},
		{
			name:    "the bounds widen by 500 ppm per second without a new reply",
			samples: []sample{{send: 0, script: 0, recv: 0}},
			now:     ms(10_000), probe: ms(10_000), early: -ms(5), late: ms(5),
			from: ms(10_000), to: ms(11_000), keep: ms(25), tat: ms(10_005), end: ms(10_995),
		},
		{
			name: "a block shorter than the width keeps one slot",
			samples: []sample{
				{send: 0, script: ms(40), recv: ms(100)},
			},
			now: ms(100), probe: ms(200), early: -ms(40), late: ms(60),
			from: ms(200), to: ms(225), keep: ms(25), tat: ms(260), end: ms(285),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c serverClock
			for _, s := range tc.samples {
				c.learn(at(s.send), at(s.recv), server(s.script))
			}
			now := at(tc.now)
			if got := c.earliest(server(tc.probe), now).Sub(at(tc.probe)); got != tc.early {
				t.Errorf("earliest: %v, want %v", got, tc.early)
			}
			if got := c.latest(server(tc.probe), now).Sub(at(tc.probe)); got != tc.late {
				t.Errorf("latest: %v, want %v", got, tc.late)
			}
			b := c.place(server(tc.from), server(tc.to), tc.keep, tc.slack, now)
			if b.tat.Sub(t0) != tc.tat || b.end.Sub(t0) != tc.end {
				t.Errorf("block placed at %v..%v, want %v..%v", b.tat.Sub(t0), b.end.Sub(t0), tc.tat, tc.end)
			}
		})
	}
}

func TestServerClockMoves(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var c serverClock
	c.learn(t0, t0.Add(time.Millisecond), 5_000_000)
	// The server's clock is set back 10 s (or a failover reached a server
	// whose clock is 10 s behind): a reply contradicts the bounds, and they
	// start afresh from it instead of placing blocks 10 s off.
	c.learn(t0.Add(time.Second), t0.Add(time.Second+time.Millisecond), 5_000_000+1_000_000-10_000_000)
	got := c.latest(-4_000_000, t0.Add(time.Second+time.Millisecond)).Sub(t0)
	if want := time.Second + time.Millisecond; got != want {
		t.Fatalf("after the server's clock went back 10 s, its now is placed at %v, want %v", got, want)
	}
	// And forward.
	c.learn(t0.Add(2*time.Second), t0.Add(2*time.Second), 60_000_000)
	if got := c.earliest(60_000_000, t0.Add(2*time.Second)).Sub(t0); got != 2*time.Second {
		t.Fatalf("after the server's clock jumped forward, its now is placed at %v", got)
	}
}
