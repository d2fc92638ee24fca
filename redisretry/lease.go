package redisretry

import (
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/backoffkit/retry/redisretry/internal/backend"
)

// The Quota's lease: the blocks of the fleet's schedule it holds, how it
// sizes them, how it takes them (refills) and what it does without Redis.
// See the Quota's doc comment ("How the lease works") and docs/fleet.md.

// block is a stretch of the fleet's schedule leased to this process: n units
// placed on the local clock from start over span, evenly (unit k at
// start + span×k/n, exactly: a block may hold many units per microsecond),
// of which the first usable may be used. from and to are its place on the
// server's schedule (µs).
type block struct {
	start    time.Time
	span     time.Duration
	n        int64
	usable   int64 // units that may be used: n, less those cut by the clock's width (see serverClock.place)
	next     int64 // the first unit not taken
	from, to int64
}

// place returns the local place of unit k.
func (b *block) place(k int64) time.Time {
	if k <= 0 || b.n == 0 {
		return b.start
	}
	q, _, ok := mulDiv(uint64(b.span), uint64(k), uint64(b.n))
	if !ok {
		return b.start.Add(b.span)
	}
	return b.start.Add(time.Duration(q))
}

// unitAt returns the first unit placed at or after t (n if none).
func (b *block) unitAt(t time.Time) int64 {
	d := t.Sub(b.start)
	switch {
	case d <= 0:
		return 0
	case d >= b.span:
		return b.n
	}
	q, r, ok := mulDiv(uint64(d), uint64(b.n), uint64(b.span))
	if !ok {
		return b.n
	}
	if r != 0 {
		q++
	}
	return min(int64(q), b.n)
}

// unusedMicros returns the schedule (µs) at the block's end that is neither
// taken nor past at now.
func (b *block) unusedMicros(now time.Time) int64 {
	k := max(b.next, b.unitAt(now))
	if k >= b.n {
		return 0
	}
	q, _, ok := mulDiv(uint64(b.to-b.from), uint64(b.n-k), uint64(b.n))
	if !ok {
		return 0
	}
	return int64(q)
}

// unitsPerMicro returns the units a microsecond of l's schedule holds (the
// schedule is kept in µs), at least 1: the least a block holds, so that a
// quota of more than a million a second is not rounded to one unit per
// microsecond.
func unitsPerMicro(l Limit) int64 {
	p := int64(l.Period / time.Microsecond)
	if l.Rate <= p {
		return 1
	}
	return l.Rate/p + min(l.Rate%p, 1)
}

// note counts a request of n units asked for at now, with deadline (zero
// for none).
func (d *demand) note(now time.Time, n int64, deadline time.Time, tau time.Duration) {
	if d.since.IsZero() {
		d.since = now
	}
	d.sum = d.sumAt(now, tau) + float64(n)
	d.at = now
	if deadline.IsZero() {
		d.noDLAt = now
	} else if dl := deadline.Sub(now); dl >= d.dl || now.Sub(d.dlAt) > tau {
		d.dl, d.dlAt = dl, now
	}
	if n >= d.most || now.Sub(d.mostAt) > tau {
		d.most, d.mostAt = n, now
	}
}

// sumAt returns the units asked for, each weighted by e^(-age/tau), as of
// now.
func (d *demand) sumAt(now time.Time, tau time.Duration) float64 {
	if dt := now.Sub(d.at); dt > 0 && d.sum > 0 {
		return d.sum * math.Exp(-dt.Seconds()/tau.Seconds())
	}
	return d.sum
}

// rateAt returns the rate of requests (units per second) as of now, measured
// with a memory of tau: the weighted sum over its expectation for a steady
// rate since the first request (so that it is right from the start), at
// least h of it (one request is not a rate).
func (d *demand) rateAt(now time.Time, tau, h time.Duration) float64 {
	span := max(now.Sub(d.since), h, time.Microsecond).Seconds()
	return d.sumAt(now, tau) / (tau.Seconds() * -math.Expm1(-span/tau.Seconds()))
}

// maxWait returns how far ahead a block taken ahead of need may start (µs):
// no later than the longest deadline of the recent calls, which are those
// it is for; -1 (no limit) if a recent call had none.
func (d *demand) maxWait(now time.Time, tau time.Duration) int64 {
	if !d.noDLAt.IsZero() && now.Sub(d.noDLAt) <= tau {
		return -1
	}
	return usWait(d.dl)
}

// horizonLocked returns how long a slot of this process may still be used
// after its place: Slack, less the uncertainty of the blocks' places (see
// serverClock.place). It is also how far ahead of need the lease reaches.
func (q *Quota) horizonLocked(now time.Time) time.Duration {
	return max(q.slack-q.clock.width(now), 0)
}

// floorLocked returns the earliest place a slot may have to be used at now:
// the horizon ago, so that no slot is used more than Slack late.
func (q *Quota) floorLocked(now time.Time) time.Time {
	return now.Add(-q.horizonLocked(now))
}

// leftLocked returns the units of the lease still usable at now.
func (q *Quota) leftLocked(now time.Time) int64 {
	floor := q.floorLocked(now)
	var left int64
	for i := range q.blocks {
		b := &q.blocks[i]
		left += max(b.usable-max(b.next, b.unitAt(floor)), 0)
	}
	return left
}

// aheadLocked returns how many units this process holds ahead of need: what
// it will use before they expire, and no more than its share.
//
// That is the units its own rate of requests fills within the horizon (less
// a margin for the chance of fewer: m − √m/2 of a mean m; no margin for the
// only process counted, whose unused slots cost nobody), at most its share
// of the horizon (the quota's rate over the horizon, over the members
// counted in Redis): together the processes hold at most the horizon's
// worth of the schedule ahead of need. A process whose requests are further
// apart than the horizon holds none. While it is the only member and alone
// reserves on the schedule (its blocks follow each other), it holds more:
// its growth, doubling with each such block. Both at most Lease requests'
// worth (more with the default Lease as the demand falls below the quota:
// see leaseLocked) and the quota's Rate, in whole requests (of the
// most units a recent request took): a request takes its units from one
// block.
func (q *Quota) aheadLocked(now time.Time) int64 {
	h := q.horizonLocked(now)
	var t int64
	m := q.d.rateAt(now, q.tau, h) * h.Seconds()
	if m >= 1 {
		t = int64(m - math.Sqrt(m)/2)
		if q.members <= 1 && m >= 2 {
			t = int64(m) // alone: what it leaves unused costs nobody
		}
	}
	share := float64(q.limit.Rate) * h.Seconds() / q.limit.Period.Seconds() / float64(max(q.members, 1))
	t = int64(min(float64(t), share))
	t = max(t, q.grow)
	most := max(q.d.most, 1)
	t = max(min(t, satMul(q.leaseLocked(m, share*float64(max(q.members, 1))), most), q.limit.Rate), 0)
	return t / most * most // a part of a request at a block's end would be lost
}

// leaseGrowth is how many times DefaultQuotaLease a Quota with the default
// Lease may hold ahead of need when its demand is far below the quota (a
// quarter of it or less; see leaseLocked).
const leaseGrowth = 4

// leaseLocked returns the most requests' worth this process holds ahead of
// need, for a demand of m units within the horizon where the quota allows
// all units (its rate over the horizon): QuotaConfig.Lease; with the
// default Lease, once the fleet was counted in Redis, that many times
// all/m, up to leaseGrowth times (at a demand of a quarter of the quota or
// less). What it holds is still no more than it will use before the slots
// expire, nor more than its share of the horizon (aheadLocked): the larger
// block only spreads a round trip over more requests of a process that asks
// for less than the quota (one round trip per 80 requests instead of 20: a
// quarter of the Redis work per request).
func (q *Quota) leaseLocked(m, all float64) int64 {
	switch {
	case q.leaseMax <= q.lease || q.members == 0:
		return q.lease
	case m*leaseGrowth <= all:
		return q.leaseMax
	}
	return max(q.lease, int64(float64(q.lease)*all/m))
}

// aheadDueLocked reports whether a block ahead of need is due: the lease
// holds less than half of what this process keeps ahead, or less than two
// round trips' worth of its requests.
func (q *Quota) aheadDueLocked(now time.Time) bool {
	t := q.aheadLocked(now)
	if t == 0 {
		return false
	}
	left := q.leftLocked(now)
	return left < (t+1)/2 || float64(left) < q.d.rateAt(now, q.tau, q.horizonLocked(now))*2*q.rtt.Seconds()
}

// takeNowLocked decides at once when it can: no caller is queued and the
// lease holds the slot, or shows it past the deadline. ok is false when the
// caller must wait for a refill.
func (q *Quota) takeNowLocked(now time.Time, n int64, deadline time.Time) (time.Time, error, bool) {
	if len(q.queue) > 0 { // queue behind the callers already waiting
		return time.Time{}, nil, false
	}
	t, ok, err := q.takeLocked(now, now, n, deadline)
	if !ok && err == nil {
		return time.Time{}, nil, false
	}
	if ok && q.inflight == 0 && q.g.healthy() && q.aheadDueLocked(now) {
		q.startRefillLocked(now)
	}
	return t, err, true
}

// takeLocked takes a slot of n units from the lease for an attempt that can
// start at e (>= now). ok is false when no block holds it (a refill is
// needed); err is set when the slot would not start before deadline.
//
// The slot is the first free place of a block (a place that passed more than
// the horizon ago is lost); the attempt starts there (up to the burst
// tolerance before it), or at e if that is later.
func (q *Quota) takeLocked(now, e time.Time, n int64, deadline time.Time) (time.Time, bool, error) {
	tol := q.limit.Tolerance(n)
	floor := q.floorLocked(now)
	// Forget the blocks that are spent (used up, or past).
	q.blocks = slices.DeleteFunc(q.blocks, func(b block) bool { return max(b.next, b.unitAt(floor)) >= b.usable })
	for i := range q.blocks {
		b := &q.blocks[i]
		k := max(b.next, b.unitAt(floor))
		if k+n > b.usable {
			continue
		}
		s := later(e, b.place(k).Add(-tol))
		if !deadline.IsZero() && !s.Before(deadline) {
			return time.Time{}, false, pastDeadline("quota", s.Sub(now))
		}
		b.next = k + n
		q.last = take{from: b.from, next: b.next, n: n, start: s}
		q.grantLocked(now, s, n)
		return s, true, nil
	}
	return time.Time{}, false, nil
}

// grantLocked keeps a start handed out, while it is ahead (see resetLocked).
// Past 64 entries, a start joins the last one (the latest of the two
// starts): an entry leaves when all of its starts passed, so the starts
// counted ahead are never fewer than those granted.
func (q *Quota) grantLocked(now, t time.Time, n int64) {
	i := 0
	for i < len(q.granted) && !q.granted[i].t.After(now) {
		i++
	}
	if i > 0 { // keep the slice's capacity: no allocation per start
		q.granted = q.granted[:copy(q.granted, q.granted[i:])]
	}
	switch {
	case !t.After(now):
	case len(q.granted) >= 64:
		g := &q.granted[len(q.granted)-1]
		g.t, g.n = later(g.t, t), satAdd(g.n, n)
	default:
		q.granted = append(q.granted, grant{t, n})
	}
}

// startRefillLocked sends a round trip for a block of the schedule, unless
// the refills in flight cover the queued callers: so a queued caller waits
// for one round trip at most, not for the one in flight and then its own.
// With callers queued the block is sized for them (and what this process
// keeps ahead, when no refill is in flight) and taken only if its first slot
// starts before the latest deadline of the queued callers (any if one has
// none); with none queued, it is a block ahead of need (see aheadLocked),
// taken only if it starts before the longest deadline of the recent calls.
// It returns false if the Quota is closed.
func (q *Quota) startRefillLocked(now time.Time) bool {
	if q.closing {
		return false
	}
	q.reconcileLocked(now)
	// A block for callers must start before the latest of their deadlines
	// once placed here: a round trip after the server's now.
	var need, most int64 = 0, 1
	maxWait := int64(0)
	for _, w := range q.queue {
		need = satAdd(need, w.n)
		most = max(most, w.n)
		switch {
		case maxWait < 0:
		case w.deadline.IsZero():
			maxWait = -1
		default:
			maxWait = max(maxWait, usWait(max(w.deadline.Sub(now)-q.rtt, 0)))
		}
	}
	head := most
	var ahead int64
	switch {
	case len(q.queue) == 0:
		if ahead = q.aheadLocked(now); ahead == 0 {
			return true
		}
		// Never past the longest deadline that could use it.
		maxWait = q.d.maxWait(now, q.tau)
		head = max(q.d.most, 1)
		most = head
	case need <= q.inflight:
		return true // covered
	default:
		head = q.queue[0].n
		if q.inflight == 0 {
			ahead = q.aheadLocked(now)
		}
	}
	// Never more than a Period's worth: a block holds up the fleet. Never
	// less than a microsecond's: the schedule's unit.
	units := satAdd(max(need-q.inflight, 0), ahead)
	units = min(max(units, most, q.perMicro), max(q.limit.Rate, most, q.perMicro))
	// A slot is placed where the server's clock reads its time at the
	// latest, by the fastest reply seen: a reply slower than that comes
	// late by the difference, and on a free schedule its first slots
	// would be lost on arrival if the difference exceeds the horizon. The
	// block then starts that much after the server's now.
	s := sent{at: q.g.now(), lastTo: q.lastTo}
	a := backend.GCRAArgs{
		Inc: us(q.limit.Interval(units)), Tol: us(q.limit.Tolerance(head)), MaxWait: maxWait,
		Member: q.member, MemberTTL: int64(memberTTL / time.Millisecond), Limit: q.limitArg,
		Offset: us(q.rtt - q.rttMin - q.horizonLocked(now)),
		Until:  q.untilLocked(s.at), Lazy: q.lazyLocked(s.at),
	}
	c := backend.Call{Script: backend.GCRA, Quota: q.keys, GCRA: a}
	lc := &lateCall{}
	if !q.g.sendLate(c,
		func(r backend.Reply, err error) { q.refilled(units, head, s, r.GCRA, err, lc) },
		func(r backend.Reply, err error) { q.landedLate(units, head, s, r.GCRA, err, lc) }) {
		return false
	}
	q.refills++
	q.inflight += units
	return true
}

// untilLocked returns when (server µs) this process stops waiting for a call
// sent at send, at the earliest: the script reserves nothing after it (a
// Redis stopped with SIGSTOP runs what it received when it resumes; blocks
// nobody waits for any more would be wasted, and a debt reserved twice).
func (q *Quota) untilLocked(send time.Time) int64 {
	return q.clock.serverAt(send.Add(q.g.patience()))
}

// lateCall is a call that may outlive its bound: whether the Quota waits
// for its late outcome (a refill's is counted in awaiting, a probe's or a
// debt call's in trailing), and whether that came (before or after the
// bound's timeout was handled).
type lateCall struct{ waiting, ended bool }

// sent is when a call of the script was sent, and where this process's
// blocks ended on the schedule then: the reply's block cannot start before
// that unless the schedule was lost.
type sent struct {
	at     time.Time
	lastTo int64
}

// refilled takes the outcome of a refill of units sent at s (head: the
// first caller's units): it adds the block to the lease and serves the
// queue; while callers are left queued it starts the next refill. On an
// error or at the bound the queued callers decide without Redis.
func (q *Quota) refilled(units, head int64, s sent, r backend.GCRAReply, err error, lc *lateCall) {
	now := q.g.now() // the reply's arrival
	q.mu.Lock()
	q.inflight -= units
	q.refills--
	if te := (errTimeout{}); errors.As(err, &te) && te.running && !lc.ended {
		// The call still runs: Redis may reserve its block yet, for the
		// callers who now decide without it (see landedLate).
		lc.waiting = true
		q.awaiting++
		q.awaitingUnits += units
	}
	var served []*reservation
	granted := false
	switch {
	case err != nil:
		// Redis failed or is late (the limiter is in fallback now): every
		// queued caller decides without it.
		for len(q.queue) > 0 {
			q.queue[0].err = err
			served = q.wakeLocked(served)
		}
	case !r.OK:
		q.learnLocked(s.at, now, r, true)
		q.resetLocked(now, s, r)
		// Nothing was taken: the schedule's first free slot is too far
		// for every caller queued when the refill started. Those whose
		// deadline it passes give up; later ones get another refill.
		wait := time.Duration(r.Wait) * time.Microsecond
		kept := q.queue[:0]
		for _, w := range q.queue {
			if !w.deadline.IsZero() && !now.Add(wait).Before(w.deadline) {
				w.err = pastDeadline("quota", wait)
				w.over = true
				w.stop()
				served = append(served, w)
				continue
			}
			kept = append(kept, w)
		}
		clear(q.queue[len(kept):])
		q.queue = kept
	default:
		q.learnLocked(s.at, now, r, true)
		q.resetLocked(now, s, r)
		granted = q.landLocked(now, r, head)
		served = q.serveLocked(now, served)
	}
	if len(q.queue) > 0 && q.g.healthy() && !q.startRefillLocked(now) {
		for len(q.queue) > 0 {
			q.queue[0].err = ErrClosed
			served = q.wakeLocked(served)
		}
	}
	if err == nil {
		q.reconcileLocked(now)
	}
	idle := q.idleLocked()
	q.mu.Unlock()
	q.deliver(served, granted, units)
	for _, f := range idle {
		f()
	}
}

// landedLate takes the outcome of a refill's call that outlived its bound:
// a reply is a reply all the same. The callers it was for decided without
// Redis meanwhile; its block pays for what they started (the debt) first,
// and the rest goes to the lease. Until the last such call ended, the debt
// is not sent to Redis (reconcileLocked): each of their blocks was reserved
// for starts already made, and one handed out again would start a second
// request in the same place of the schedule.
func (q *Quota) landedLate(units, head int64, s sent, r backend.GCRAReply, err error, lc *lateCall) {
	now := q.g.now()
	q.mu.Lock()
	lc.ended = true
	if lc.waiting {
		lc.waiting = false
		q.awaiting--
		q.awaitingUnits -= units
	}
	if q.closing || err != nil {
		if err != nil {
			q.unreached = true
			q.reconcileLocked(now) // no block will come: the debt goes to Redis
		}
		idle := q.idleLocked()
		q.mu.Unlock()
		for _, f := range idle {
			f() // Close's leave, now that this call's heartbeat ran
		}
		return
	}
	q.learnLocked(s.at, now, r, true)
	q.resetLocked(now, s, r)
	var served []*reservation
	granted := false
	if r.OK {
		granted = q.landLocked(now, r, head)
		served = q.serveLocked(now, served)
	}
	q.reconcileLocked(now)
	q.mu.Unlock()
	q.deliver(served, granted, units)
}

// deliver completes the callers a refill's reply served and, if its block
// was granted, counts the refill of units and reports it. It runs after
// q.mu is unlocked: completing runs the callers' done.
func (q *Quota) deliver(served []*reservation, granted bool, units int64) {
	for _, w := range served {
		q.complete(w)
	}
	if granted {
		q.g.refills.Add(1)
		q.g.emit(Event{Kind: EventRefill, Units: units})
	}
}

// idleLocked returns the functions waiting for the calls that carry this
// process's member id to end (Close's leave), once none may still run at
// Redis (see busyLocked).
func (q *Quota) idleLocked() []func() {
	if q.busyLocked() {
		return nil
	}
	idle := q.idle
	q.idle = nil
	return idle
}

// busyLocked reports whether a call of gcra.lua may still run at Redis:
// a refill or a debt call in flight, a probe in flight, or one of them past
// its bound whose outcome (its late reply, or the transport's end of it) has
// not come. Each is a heartbeat that, run after Close's leave, would count
// this process as a member again for memberTTL.
func (q *Quota) busyLocked() bool {
	return q.refills > 0 || q.awaiting > 0 || q.trailing > 0
}

// settleLocked takes an outcome of lc, a probe or a debt call, counted in
// trailing while Redis may still run it: at its bound (late false), running
// says that it may (unless its late outcome came first); late is its late
// outcome (or the end of a call never sent).
func (q *Quota) settleLocked(lc *lateCall, running, late bool) {
	if late {
		lc.ended = true
	}
	q.lingerLocked(lc, running && !lc.ended)
}

// lingerLocked counts lc in Quota.trailing while linger says that Redis may
// still run it: a probe from its sending, a probe or a debt call past its
// bound until its late outcome.
func (q *Quota) lingerLocked(lc *lateCall, linger bool) {
	if lc.waiting == linger {
		return
	}
	lc.waiting = linger
	if linger {
		q.trailing++
	} else {
		q.trailing--
	}
}

// learnLocked learns from a reply of the script asked for at send and
// received at recv: the server's clock, the round trip's time (if rtt), the
// fleet's size and where the schedule ends.
func (q *Quota) learnLocked(send, recv time.Time, r backend.GCRAReply, rtt bool) {
	if r.Other != "" {
		q.otherLimit(r.Other)
	}
	q.unreached = false
	q.clock.learn(send, recv, r.Now)
	if d := recv.Sub(send); rtt && q.rtt == 0 {
		q.rtt, q.rttMin = d, d
	} else if rtt {
		q.rtt += (d - q.rtt) / 8
		q.rttMin = min(q.rttMin, d)
	}
	q.members = r.Members
	q.lead = max(q.clock.latest(r.To, recv).Sub(recv), 0)
	q.ahead = time.Duration(max(r.To-r.Now, 0)) * time.Microsecond
	if !q.fellAt.IsZero() {
		// Redis answers again after this process decided without it. If
		// that lasted a ProbeInterval, other processes may still do so
		// for up to one more (each probes on its own), at their share:
		// until then this one's requests wait for its share's pacer
		// before they take a slot (see Quota.decide).
		if recv.Sub(q.fellAt) >= q.g.probeInterval {
			q.shareUntil = recv.Add(q.g.probeInterval + q.g.bound())
		}
		q.fellAt = time.Time{}
	}
}

// resetLocked detects a schedule that lost this process's reservations (a
// flush, a restart of a Redis without data, an eviction): the reply r to a
// call sent as s says the block starts before the end of one this process
// had got when it sent the call. No process reserves before the end of the
// schedule, and a slot given back never moves it before a block reserved
// earlier. The starts it granted that are
// still ahead are then not on the schedule: they are reserved again (as a
// debt), and the slots it holds unused are dropped, so that the overshoot
// is what the processes had granted when the schedule was lost.
func (q *Quota) resetLocked(now time.Time, s sent, r backend.GCRAReply) {
	if s.lastTo == 0 || r.From >= s.lastTo {
		return
	}
	var ahead int64
	for _, g := range q.granted {
		if g.t.After(now) {
			ahead = satAdd(ahead, g.n)
		}
	}
	q.blocks = q.blocks[:0]
	q.granted = q.granted[:0]
	q.last = take{}
	q.lastTo, q.grow = 0, 0
	if ahead > 0 {
		q.oweLocked(ahead, now)
	}
}

// landLocked adds the block of the reply r to the lease. It reports whether
// it held any.
//
// The block pays the debt not being reserved yet first, for the starts near
// it (by its end and a tenth of the Period after, the latest first): a
// refill's callers that stopped waiting for it (its reply came after the
// bound, or another call failed meanwhile, or their own wait ended first)
// decided without Redis, and their starts are in the places Redis reserved
// for them. Handed out again, those places would start two requests each.
// Starts further ahead (this process's share put them there: its pacer
// runs ahead after a long fallback) are not in its places: they are
// reserved where they are (reconcileLocked), and the block goes to the
// lease. The rest of the debt is sent to Redis only once no refill past its
// bound still runs (reconcileLocked).
//
// A block that starts where this process's last block ended on the server's
// schedule extends it: no other process reserved between them, so the
// width of the clock's bounds is not lost between them, and this process,
// alone on the schedule, grows what it keeps ahead of need.
func (q *Quota) landLocked(now time.Time, r backend.GCRAReply, head int64) bool {
	if r.To <= r.From {
		return false
	}
	merged := q.lastTo != 0 && r.From == q.lastTo
	if merged && r.Members <= 1 {
		q.grow = min(max(2*q.grow, 2), satMul(q.lease, max(q.d.most, 1)))
	} else {
		q.grow = 0
	}
	q.lastTo = max(q.lastTo, r.To)
	n := q.unitsOf(r.To - r.From)
	p := q.clock.place(r.From, r.To, q.limit.Interval(head), q.slack, now)
	q.widest = max(q.widest, q.clock.width(now))
	b := block{start: p.tat, span: p.full.Sub(p.tat), n: n, from: r.From, to: r.To}
	b.usable = n
	if p.end.Before(p.full) {
		b.usable = max(b.unitAt(p.end), min(head, n))
		if b.place(b.usable).After(p.end) && b.usable > min(head, n) {
			b.usable--
		}
	}
	if pay := q.owedPayLocked(p.full.Add(q.limit.Period/payNear), n); pay > 0 {
		b.next = pay
		q.debt -= pay
		if q.debt == 0 {
			q.debtFrom = time.Time{}
		}
	}
	for i := range q.blocks {
		if pb := &q.blocks[i]; pb.to == b.from && b.next == 0 && pb.n+b.n > pb.n && p.full.After(pb.start) {
			// One block: b's units after pb's, placed from pb's start.
			pb.usable = pb.n + b.usable
			pb.n += b.n
			pb.span = p.full.Sub(pb.start)
			pb.to = b.to
			return true
		}
	}
	i := len(q.blocks)
	for i > 0 && q.blocks[i-1].start.After(b.start) {
		i--
	}
	q.blocks = slices.Insert(q.blocks, i, b)
	return true
}

// unitsOf returns the units a stretch of µs of the schedule holds.
func (q *Quota) unitsOf(micros int64) int64 {
	p := uint64(q.limit.Period / time.Microsecond)
	n, _, ok := mulDiv(uint64(micros), uint64(q.limit.Rate), p)
	if !ok || n > math.MaxInt64 {
		return math.MaxInt64
	}
	return max(int64(n), 1)
}

// warm starts connecting at once: one call of the script that reserves
// nothing (it loads the script, counts this process in the fleet and learns
// the server's clock and the schedule), bounded by the connection's setup.
func (q *Quota) warm() {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := sent{at: q.g.now()}
	c := backend.Call{Script: backend.GCRA, Quota: q.keys,
		GCRA: backend.GCRAArgs{MaxWait: -1, Member: q.member, MemberTTL: int64(memberTTL / time.Millisecond), Limit: q.limitArg}}
	lc := &lateCall{}
	if q.g.sendWarm(c,
		func(r backend.Reply, err error) { q.refilled(0, 1, s, r.GCRA, err, lc) },
		func(r backend.Reply, err error) { q.landedLate(0, 1, s, r.GCRA, err, lc) }) {
		q.refills++
	}
}

// probe tries Redis again when a probe is due: a heartbeat that reserves
// nothing. (The debt is reserved once Redis answered: a call sent while it
// stalls may run when it resumes, its reply lost, and what it reserved
// would be reserved again.) None starts once Close was called: Close's
// leave waits for a probe until Redis can no longer run it (trailing).
func (q *Quota) probe() {
	if State(q.g.state.Load()) != StateFallback || !q.g.probeDue() {
		return
	}
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		q.g.probing.Store(false)
		return
	}
	now := q.g.now()
	c := backend.Call{Script: backend.GCRA, Quota: q.keys,
		GCRA: backend.GCRAArgs{MaxWait: -1, Member: q.member, MemberTTL: int64(memberTTL / time.Millisecond), Limit: q.limitArg}}
	lc := &lateCall{}
	q.lingerLocked(lc, true)
	q.mu.Unlock()
	if !q.g.sendLate(c,
		func(r backend.Reply, err error) {
			q.paidAt(nil, now, r.GCRA, err, false)
			q.g.probing.Store(false)
			te := errTimeout{}
			q.settle(lc, errors.As(err, &te) && te.running, false)
		},
		func(r backend.Reply, err error) {
			if err == nil {
				q.paidAt(nil, now, r.GCRA, nil, true)
			}
			q.settle(lc, false, true)
		}) {
		q.g.probing.Store(false)
		q.settle(lc, false, true)
	}
}

// settle is settleLocked, and then Close's leave if lc was the last call
// it waited for.
func (q *Quota) settle(lc *lateCall, running, late bool) {
	q.mu.Lock()
	q.settleLocked(lc, running, late)
	idle := q.idleLocked()
	q.mu.Unlock()
	for _, f := range idle {
		f()
	}
}

// debtCall is a call sent at sent that reserves n units of the debt. Its
// units are being reserved (Quota.sending) until its outcome is known: its
// reply, or its failure; a call past its bound that Redis may still run is
// waited for (its late reply, or the transport's end of it, a connection's
// setup later), so that no unit is reserved twice.
type debtCall struct {
	n      int64
	sent   time.Time
	owed   []grant  // its starts, put back if it reserves nothing
	live   bool     // sent without Redis (see reconcileLocked)
	closed bool     // its outcome is known
	lc     lateCall // past its bound: Close's leave waits for its late outcome
}

// maxEarly bounds how far back a debt is placed: as far as the processes may
// have decided without Redis, within reason.
const maxEarly = time.Hour

// maxLive bounds the live debt calls in flight (see reconcileLocked): during
// a stall or a partition each of them waits a connection's setup for
// nothing.
const maxLive = 4

// reconcileLocked reserves the debt not being reserved yet: the starts
// that the schedule's end reached (as far ahead of now as it ran when the
// last reply's call ran); those this process's share put further ahead
// wait for it (a timer), so that the debt is reserved where they start.
//
// Once Redis answers and no refill past its bound still runs (its block,
// if Redis reserves it, pays the debt first: see landedLate), all of those,
// placed back as far as the first of the debt started, where the schedule
// is free then: if no process reserved those times meanwhile (Redis was
// down for every process), the debt takes no place the schedule still has
// free now.
//
// While this process decides without Redis, the part no refill's block
// will pay (the units of the refills in flight, or past their bound and
// still running: awaitingUnits) is reserved at once, live: a process
// whose replies come late (a process starved of CPU) while Redis answers
// the others lets starts through at its share in places the others drew
// already, and each second of them would hold the others' whole schedule
// plus its starts if the debt were reserved only when Redis answers it
// again (at the schedule's end then, up to a connection's setup later).
// Reserved at the schedule's end now, which runs ahead of now by about
// what the others hold, the debt pushes the others' next blocks by as much
// within the same second. Where the schedule does not run ahead of now
// (Redis stopped for every process, whose calls run when it resumes, or an
// idle fleet), the live call reserves nothing and the debt waits to be
// placed back. At most one live call per bound, and maxLive in flight;
// none once a call ended without a reply after its bound (a partition, a
// stall: its calls wait a connection's setup for nothing) until a reply
// comes, so that no part of the debt is still in flight, to be placed
// after the blocks the process takes once back, when Redis answers again.
func (q *Quota) reconcileLocked(now time.Time) {
	if q.debt <= q.sending || q.closing {
		return
	}
	live := !q.g.healthy()
	var skip int64
	switch {
	case live:
		skip = q.awaitingUnits + q.inflight
		if q.unreached || len(q.lives) >= maxLive || (len(q.lives) > 0 && now.Sub(q.lives[len(q.lives)-1].sent) < q.g.bound()) {
			return
		}
	case q.awaiting > 0:
		return
	}
	// The starts the schedule's end reached (it ran ahead of the server's
	// now by q.ahead at the last reply, late or not); those this process's
	// share put further ahead wait for it (a timer).
	due := now.Add(q.ahead)
	owed, d := q.owedTakeLocked(skip, due)
	q.owedTimerLocked(now, skip, due)
	if d == 0 {
		return
	}
	a := backend.GCRAArgs{MaxWait: -1, Member: q.member, MemberTTL: int64(memberTTL / time.Millisecond), Limit: q.limitArg, Until: q.untilLocked(now)}
	a.Inc = us(q.limit.Interval(d))
	switch ahead := q.debtFrom.Sub(now); {
	case live:
		a.Live = true // at the schedule's end
	case ahead >= 0:
		a.Offset = us(ahead)
	default:
		a.Offset = -us(min(-ahead, maxEarly))
	}
	dc := &debtCall{n: d, sent: now, owed: owed, live: live}
	c := backend.Call{Script: backend.GCRA, Quota: q.keys, GCRA: a}
	send := q.g.sendLate
	if live {
		send = q.g.sendAside
	}
	if !send(c,
		func(r backend.Reply, err error) { q.paid(dc, r.GCRA, err, false) },
		func(r backend.Reply, err error) { q.paid(dc, r.GCRA, err, true) }) {
		q.owedPutLocked(owed)
		return
	}
	q.sending += d
	q.refills++
	if live {
		q.lives = append(q.lives, dc)
	}
}

// owedTakeLocked takes from the debt not being reserved (Quota.owed, by
// start) the units that start by due, past the first skip units (left: the
// blocks of late refills pay them), and returns them.
func (q *Quota) owedTakeLocked(skip int64, due time.Time) ([]grant, int64) {
	var taken, kept []grant
	var n int64
	for _, g := range q.owed {
		if skip > 0 {
			k := min(skip, g.n)
			kept = append(kept, grant{g.t, k})
			skip -= k
			if g.n -= k; g.n == 0 {
				continue
			}
		}
		if g.t.After(due) {
			kept = append(kept, g)
			continue
		}
		taken = append(taken, g)
		n = satAdd(n, g.n)
	}
	q.owed = kept
	return taken, n
}

// owedTimerLocked sets the timer that reserves the debt not being reserved
// that starts after due (past the first skip units), when the schedule's
// end reaches its first start.
func (q *Quota) owedTimerLocked(now time.Time, skip int64, due time.Time) {
	var next time.Time
	for _, g := range q.owed {
		if skip >= g.n {
			skip -= g.n
			continue
		}
		if g.t.After(due) {
			next = g.t
			break
		}
		skip = 0
	}
	if next.IsZero() {
		return
	}
	at := next.Add(-q.ahead)
	if q.owedStop != nil {
		if !at.Before(q.owedAt) {
			return
		}
		q.owedStop()
	}
	q.owedAt = at
	q.owedStop = q.g.clock.AfterFunc(at.Sub(now), func() {
		q.mu.Lock()
		q.owedStop = nil
		q.reconcileLocked(q.g.now())
		q.mu.Unlock()
	})
}

// payNear is how far after a block's end (a share of the Period) the
// starts it pays for may be: see landLocked.
const payNear = 10

// owedPayLocked takes up to n units of the debt not being reserved that
// start by t, the latest first, and returns how many: a block reserved for
// them pays them.
func (q *Quota) owedPayLocked(t time.Time, n int64) int64 {
	var paid int64
	for i := len(q.owed) - 1; i >= 0 && paid < n; i-- {
		g := &q.owed[i]
		if g.t.After(t) {
			continue
		}
		k := min(n-paid, g.n)
		g.n -= k
		paid += k
	}
	q.owed = slices.DeleteFunc(q.owed, func(g grant) bool { return g.n == 0 })
	return paid
}

// owedPutLocked puts the starts of a call that reserved nothing back into
// the debt not being reserved, by start.
func (q *Quota) owedPutLocked(gs []grant) {
	q.owed = append(q.owed, gs...)
	slices.SortStableFunc(q.owed, func(a, b grant) int { return a.t.Compare(b.t) })
}

// paid takes an outcome of dc, a call that reserves a part of the debt
// (which Close waits for as for a refill, until its bound); late says it
// came after the bound.
func (q *Quota) paid(dc *debtCall, r backend.GCRAReply, err error, late bool) {
	q.paidAt(dc, dc.sent, r, err, late)
}

// paidAt is paid for a call sent at send: dc's, or a probe's (dc nil). Once
// Redis answers, what is left of the debt is reserved.
func (q *Quota) paidAt(dc *debtCall, send time.Time, r backend.GCRAReply, err error, late bool) {
	now := q.g.now()
	q.mu.Lock()
	te := errTimeout{}
	running := !late && errors.As(err, &te) && te.running
	var idle []func()
	if dc != nil {
		if !late {
			q.refills--
		}
		q.settleLocked(&dc.lc, running, late)
		idle = q.idleLocked()
	}
	if late && err != nil {
		q.unreached = true // no reply after the bound: see reconcileLocked
	}
	// At the bound, a call Redis may still run keeps its part being
	// reserved until its late outcome.
	if dc != nil && !running {
		q.closeDebtLocked(dc, err == nil && r.OK, r.To)
	}
	if err == nil {
		// A live call's late reply (sent while Redis was stopped, run when
		// it resumed) says nothing of the round trips to come: the blocks
		// for callers would start that much after the server's now.
		q.learnLocked(send, now, r, dc == nil || !dc.live || !late)
		q.reconcileLocked(now)
	}
	q.mu.Unlock()
	for _, f := range idle {
		f()
	}
}

// closeDebtLocked takes the outcome of dc, once: its part is reserved
// (ending at to on the schedule) if ok, else owed again.
func (q *Quota) closeDebtLocked(dc *debtCall, ok bool, to int64) {
	if dc.closed {
		return
	}
	dc.closed = true
	q.sending -= dc.n
	if dc.live {
		q.lives = slices.DeleteFunc(q.lives, func(c *debtCall) bool { return c == dc })
	}
	if !ok {
		q.owedPutLocked(dc.owed)
		return
	}
	q.debt = max(q.debt-dc.n, 0)
	q.lastTo = max(q.lastTo, to)
	if q.debt == 0 {
		q.debtFrom = time.Time{}
	}
}

// oweLocked adds n units started (or granted) at t without a place on the
// schedule to the debt.
func (q *Quota) oweLocked(n int64, t time.Time) {
	if q.debtFrom.IsZero() || t.Before(q.debtFrom) {
		q.debtFrom = t
	}
	q.debt = satAdd(q.debt, n)
	i := len(q.owed)
	for i > 0 && q.owed[i-1].t.After(t) {
		i--
	}
	// Starts close to the one before (a tenth of the Period), or past
	// maxOwed of them (a long partition at a high rate), join it: a start
	// a little earlier than it was, the memory bounded.
	if i > 0 && (t.Sub(q.owed[i-1].t) < q.limit.Period/payNear || len(q.owed) >= maxOwed) {
		q.owed[i-1].n = satAdd(q.owed[i-1].n, n)
		return
	}
	q.owed = slices.Insert(q.owed, i, grant{t, n})
}

// maxOwed bounds the starts of the debt kept apart (see oweLocked).
const maxOwed = 1024

// decideLocally decides without Redis, by the failure mode, for an attempt
// that could start now. cause is the Redis error, if this call saw one.
//
// FailLocal paces at this process's share of the quota (see
// shareSizeLocked), its first decision starting as far ahead as the schedule
// ran when Redis last answered (where a slot from Redis would start: the slots granted up
// to there are the fleet's): what it lets start is owed to the schedule,
// and for a ProbeInterval after it the starts from the lease stay within
// the share too.
func (q *Quota) decideLocally(now time.Time, n int64, deadline time.Time, cause error) (time.Time, error) {
	switch q.g.withoutRedis() {
	case FailOpen:
		return now, nil
	case FailClosed:
		if cause == nil || cause == errSlow {
			cause = q.g.cause()
		}
		if cause != nil {
			return time.Time{}, fmt.Errorf("%w: %w", ErrUnavailable, cause)
		}
		return time.Time{}, ErrUnavailable
	}
	q.mu.Lock()
	base := now
	if q.fellAt.IsZero() {
		// The first decision without Redis since it last answered: the
		// slots granted up to where the schedule ran are the fleet's.
		base = now.Add(q.lead)
	}
	if q.members == 0 && q.local.IsZero() {
		// The first decision of a process that never reached Redis:
		// processes started together (a deployment, a CI matrix) would
		// take their first local slots at once. A random phase within the
		// share's interval spreads them.
		inc, _ := q.shareIncLocked(n)
		base = base.Add(time.Duration(q.rand() * float64(inc)))
	}
	s, next := q.shareStartLocked(base, n)
	if !deadline.IsZero() && !s.Before(deadline) {
		q.mu.Unlock()
		q.g.refused.Add(1)
		return time.Time{}, pastDeadline("quota (local share)", s.Sub(now))
	}
	q.local = next
	q.oweLocked(n, s)
	if q.fellAt.IsZero() {
		q.fellAt = now
	}
	q.grantLocked(now, s, n)
	if !q.g.healthy() {
		q.reconcileLocked(now) // at once, live: see reconcileLocked
	}
	q.mu.Unlock()
	return q.taken(now, s, nil)
}

// shareStartLocked returns when a request of n units that may start at s
// starts under the local share pacer (a GCRA at this process's share of the
// quota, in nanoseconds), and the pacer's next free start after it.
func (q *Quota) shareStartLocked(s time.Time, n int64) (start, next time.Time) {
	inc, tol := q.shareIncLocked(n)
	start = later(s, q.local.Add(-tol))
	return start, later(q.local, start).Add(inc)
}

// shareIncLocked returns the interval a request of n units takes at this
// process's share of the quota (at least 1ns), and its burst tolerance.
func (q *Quota) shareIncLocked(n int64) (inc, tol time.Duration) {
	size := q.shareSizeLocked()
	at := func(units int64) time.Duration {
		d, _, ok := mulDiv(uint64(q.limit.Period), uint64(satMul(size, units)), uint64(q.limit.Rate))
		if !ok || d > uint64(maxSchedule) {
			return maxSchedule
		}
		return time.Duration(d)
	}
	inc = max(at(n), 1)
	if b := q.limit.burst(); n < b {
		tol = at(b - n)
	}
	return inc, tol
}

// rand returns a uniform random number in [0, 1): the harness's, or
// math/rand/v2's.
func (q *Quota) rand() float64 {
	if q.env.rand != nil {
		return q.env.rand()
	}
	return mrand.Float64()
}

// shareSizeLocked is the fleet's size this process's share divides the
// quota by: QuotaConfig.FleetSize, else the members last counted in Redis,
// else (Redis never answered) DefaultColdFleetSize.
func (q *Quota) shareSizeLocked() int64 {
	switch {
	case q.fleet > 0:
		return int64(q.fleet)
	case q.members > 0:
		return q.members
	}
	return DefaultColdFleetSize
}

// shareInfo returns the fleet's size of the local share and whether it is
// the default of a process that never counted the fleet, for the log line
// and the event of a fallback.
func (q *Quota) shareInfo() (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shareSizeLocked(), q.fleet == 0 && q.members == 0
}
