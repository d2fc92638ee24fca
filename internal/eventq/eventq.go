// Package eventq is the event queue of the simulators (sim and
// redisretry/fleetsim): a min-heap of events by virtual time in which equal
// times run in the order they were scheduled.
package eventq

// Entry is one event of a Queue: its time, its place in the scheduling order
// and what the simulator needs to handle it.
type Entry[P any] struct {
	At  int64  // virtual time, ns
	Seq uint64 // tie-break: equal times run in increasing Seq (push order)
	P   P
}

// before reports whether a runs before b.
func before[P any](a, b *Entry[P]) bool {
	return a.At < b.At || (a.At == b.At && a.Seq < b.Seq)
}

// Queue is a 4-ary min-heap of entries by (At, Seq): half the depth of a
// binary heap, and the four children of a node share a cache line or two. It
// stores entries by value in one slice, so a warmed-up queue schedules
// without allocating. The zero value is an empty queue.
type Queue[P any] struct {
	h   []Entry[P]
	seq uint64
}

// Reset empties q and restarts its numbering, keeping its storage.
func (q *Queue[P]) Reset() {
	q.h = q.h[:0]
	q.seq = 0
}

// Len returns the number of entries in q.
func (q *Queue[P]) Len() int { return len(q.h) }

// Seq returns the Seq of the last entry pushed (0 before the first).
func (q *Queue[P]) Seq() uint64 { return q.seq }

// Peek returns the earliest entry. q must not be empty.
func (q *Queue[P]) Peek() Entry[P] { return q.h[0] }

// Push schedules p at virtual time at, after every entry pushed before it
// at the same time.
func (q *Queue[P]) Push(at int64, p P) {
	q.seq++
	q.h = append(q.h, Entry[P]{At: at, Seq: q.seq, P: p})
	h := q.h
	i := len(h) - 1
	e := h[i]
	for i > 0 {
		up := (i - 1) / 4
		if !before(&e, &h[up]) {
			break
		}
		h[i] = h[up]
		i = up
	}
	h[i] = e
}

// Pop removes and returns the earliest entry. q must not be empty.
func (q *Queue[P]) Pop() Entry[P] {
	h := q.h
	top := h[0]
	n := len(h) - 1
	e := h[n]
	h[n] = Entry[P]{} // drop what P refers to
	q.h = h[:n]
	h = q.h
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+4 && k < n; k++ {
			if before(&h[k], &h[m]) {
				m = k
			}
		}
		if !before(&h[m], &e) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = e
	return top
}
