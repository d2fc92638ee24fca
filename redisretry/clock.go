package redisretry

import (
	"sync"
	"time"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

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

// serverAt returns the earliest time (µs) the server's clock may read at
// local time t, 0 if nothing is known yet.
func (c *serverClock) serverAt(t time.Time) int64 {
	if !c.set {
		return 0
	}
	l := c.local(t)
	hi, _ := c.bounds(l)
	return l - hi
}

// width returns how uncertain the placing is at local time now: the
// distance between the bounds.
func (c *serverClock) width(now time.Time) time.Duration {
	if !c.set {
		return 0
	}
	hi, lo := c.bounds(c.local(now))
	return time.Duration(hi-lo) * time.Microsecond
}

// placed is a block of the schedule on the local clock: from tat to full,
// of which the slots up to end may be used.
type placed struct{ tat, end, full time.Time }

// place returns the block of the schedule from..to (server µs) on the local
// clock, by the latest local time at which the server's clock may read each:
// a slot is never used before its place on the server, and at most the width
// of the bounds after it (about the fastest round trip seen: tens of
// microseconds on one machine, more for a distant server). Placed by each
// reply's arrival instead, slots would be late by that reply's delay, which a
// busy machine makes tens of milliseconds: the end of one process's block
// would overlap the start of the next process's block.
//
// A slot used late can add a start to a window of the quota. The Quota lets a
// slot be used at most Slack late in all: it takes the width off the time a
// passed slot may still be used, and when the width is larger than slack it
// cuts the block's end by the difference (keeping at least keep, one slot:
// a block is never lost whole).
func (c *serverClock) place(from, to int64, keep, slack time.Duration, now time.Time) placed {
	b := placed{tat: c.latest(from, now), end: c.latest(to, now)}
	b.full = b.end
	if cut := c.width(now) - slack; cut > 0 {
		b.end = later(b.end.Add(-cut), b.tat.Add(min(keep, b.end.Sub(b.tat))))
	}
	return b
}

// steadyClock is a Quota's clock: the readings of its clock, never going
// back. time.Now's readings carry the monotonic clock, which a step of the
// wall clock (NTP, a VM resumed, date) does not move, and never go back when
// read in turn: with them the steady time is the reading itself. A clock
// whose readings have no monotonic part (a config's Now that returns wall
// times, the fleet harness's) goes back with the wall clock; the steady time
// then stands still for that moment instead (off grows by the step), so that
// nothing the Quota holds (its lease, its local pacer, its debt, the next
// probe) moves an hour ahead of the time it reads. A step forward is time
// passing: the slots held are passed, the pacer is free, never more.
//
// Times a caller passes are readings of the clock: in turns them into
// steady times, out turns a steady time back into a reading, by the steps
// seen so far.
type steadyClock struct {
	c backend.Clock

	mu   sync.Mutex
	last time.Time     // the latest reading
	off  time.Duration // steady − reading: the steps back seen so far
}

// Now returns the steady time now.
func (s *steadyClock) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readLocked().Add(s.off)
}

// readLocked reads the clock and notes a step back. It reads under the lock:
// time.Now's readings are then in order.
func (s *steadyClock) readLocked() time.Time {
	r := s.c.Now()
	if !s.last.IsZero() && r.Before(s.last) {
		s.off += s.last.Sub(r)
	}
	s.last = r
	return r
}

// AfterFunc is the clock's: a timer waits for a duration.
func (s *steadyClock) AfterFunc(d time.Duration, f func()) func() bool { return s.c.AfterFunc(d, f) }

// in returns the steady time of a reading t (zero stays zero), by the steps
// seen up to now: t was read after the last of them.
func (s *steadyClock) in(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(s.offset())
}

// out returns the reading of a steady time t (zero stays zero), by the steps
// seen up to now.
func (s *steadyClock) out(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-s.offset())
}

// offset returns what the steps seen up to now add to a reading.
func (s *steadyClock) offset() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readLocked()
	return s.off
}
