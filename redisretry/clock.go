package redisretry

import "time"

// driftDiv bounds how fast the offset between the server's clock and the
// local one may change: 1/2000 (500 ppm, the fastest an NTP daemon slews a
// clock). Bounds learnt earlier widen by that much per second since.
const driftDiv = 2000

// serverClock places times of the server's clock (microseconds, from the
// scripts' TIME) on the local clock, from the round trips made. A reply
// computed at server time n, asked for at local time send and received at
// local time recv, says that the server's n happened at a local time in
// [send, recv]. serverClock keeps the tightest such bounds on the offset
// (local − server), each widened by the drift since it was measured, and
// starts afresh when a reply contradicts them (a clock was set, or a
// failover reached a server with another clock).
//
// Placing a block of the schedule by one reply's arrival alone would place it
// late by that reply's return time, which varies from reply to reply (a
// busy machine, a distant server): the end of one process's block then
// overlaps the start of the next process's block (see place). The lower
// bound tells when a clock moved. The zero value knows nothing.
type serverClock struct {
	base       time.Time // the local reference of the µs below
	set        bool
	hi, lo     int64 // bounds on the offset, µs: local (since base) − server
	hiAt, loAt int64 // local µs since base when each was measured
}

func (c *serverClock) local(t time.Time) int64 { return int64(t.Sub(c.base) / time.Microsecond) }

// learn takes a reply computed at server time n (µs), asked for at send and
// received at recv.
func (c *serverClock) learn(send, recv time.Time, n int64) {
	if !c.set {
		c.base, c.set = send, true
		c.reset(c.local(send)-n, c.local(recv)-n, c.local(recv))
		return
	}
	s, r := c.local(send), c.local(recv)
	hi, lo := c.bounds(r)
	candHi, candLo := r-n, s-n
	if candHi < lo || candLo > hi {
		c.reset(candLo, candHi, r) // a clock moved: the old bounds are wrong
		return
	}
	if candHi < hi {
		c.hi, c.hiAt = candHi, r
	}
	if candLo > lo {
		c.lo, c.loAt = candLo, r
	}
}

func (c *serverClock) reset(lo, hi, at int64) {
	c.lo, c.hi, c.loAt, c.hiAt = lo, hi, at, at
}

// bounds returns the bounds at local µs now, widened by the drift.
func (c *serverClock) bounds(now int64) (hi, lo int64) {
	return c.hi + max(now-c.hiAt, 0)/driftDiv, c.lo - max(now-c.loAt, 0)/driftDiv
}

// earliest and latest return the first and the last local time at which the
// server's clock may read s (µs), as known at local time now.
func (c *serverClock) earliest(s int64, now time.Time) time.Time {
	_, lo := c.bounds(c.local(now))
	return c.base.Add(time.Duration(s+lo) * time.Microsecond)
}

func (c *serverClock) latest(s int64, now time.Time) time.Time {
	hi, _ := c.bounds(c.local(now))
	return c.base.Add(time.Duration(s+hi) * time.Microsecond)
}

// place returns the block of the schedule from..to (server µs) on the local
// clock: from the latest local time at which the server's clock may read
// from, to the earliest at which it may read to. So a block neither starts
// before nor ends after its place on the server, whatever the replies'
// delays, and the blocks of two processes never overlap (placed by each
// reply's arrival instead, they would overlap by the difference of two
// replies' delays, which a busy machine makes tens of milliseconds). A block
// loses the width of the bounds, about the fastest round trip seen (tens of
// microseconds on one machine), but keeps at least keep: a block of one slot
// is never lost whole (it may then overlap the next one by the width).
func (c *serverClock) place(from, to int64, keep time.Duration, now time.Time) block {
	b := block{tat: c.latest(from, now), end: c.earliest(to, now)}
	if min := b.tat.Add(min(keep, time.Duration(to-from)*time.Microsecond)); b.end.Before(min) {
		b.end = min
	}
	return b
}
