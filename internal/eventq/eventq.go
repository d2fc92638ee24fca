// Package eventq is the event queue of the simulators (sim and
// redisretry/fleetsim): a min-heap of events by virtual time in which equal
// times run in the order they were scheduled.
package eventq

// Entry is one event: its time, its place in the scheduling order and what
// the simulator needs to handle it.
type Entry[P any] struct {
	At  int64  // virtual time, ns
	Seq uint64 // tie-break: equal times run in increasing Seq
	P   P
}

// before reports whether a runs before b.
func before[P any](a, b *Entry[P]) bool {
	return a.At < b.At || (a.At == b.At && a.Seq < b.Seq)
}

// Heap is a 4-ary min-heap of entries by (At, Seq): half the depth of a
// binary heap, and the four children of a node share a cache line or two. It
// stores entries by value in one slice, so a warmed-up heap schedules
// without allocating. The caller numbers the entries: no two may share both
// At and Seq. The zero value is an empty heap.
type Heap[P any] struct{ h []Entry[P] }

// Reset empties h, keeping its storage.
func (h *Heap[P]) Reset() { h.h = h.h[:0] }

// Len returns the number of entries in h.
func (h *Heap[P]) Len() int { return len(h.h) }

// Peek returns the earliest entry. h must not be empty.
func (h *Heap[P]) Peek() Entry[P] { return h.h[0] }

// Push adds e.
func (h *Heap[P]) Push(e Entry[P]) {
	h.h = append(h.h, e)
	a := h.h
	i := len(a) - 1
	for i > 0 {
		up := (i - 1) / 4
		if !before(&e, &a[up]) {
			break
		}
		a[i] = a[up]
		i = up
	}
	a[i] = e
}

// Pop removes and returns the earliest entry. h must not be empty.
func (h *Heap[P]) Pop() Entry[P] {
	a := h.h
	top := a[0]
	n := len(a) - 1
	e := a[n]
	a[n] = Entry[P]{} // drop what P refers to
	a = a[:n]
	h.h = a
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
			if before(&a[k], &a[m]) {
				m = k
			}
		}
		if !before(&a[m], &e) {
			break
		}
		a[i] = a[m]
		i = m
	}
	a[i] = e
	return top
}

// Queue is a Heap that numbers its entries in push order, so that equal
// times run in the order they were scheduled. The zero value is an empty
// queue.
type Queue[P any] struct {
	Heap[P]
	seq uint64
}

// Reset empties q and restarts its numbering, keeping its storage.
func (q *Queue[P]) Reset() {
	q.Heap.Reset()
	q.seq = 0
}

// Seq returns the Seq of the last entry pushed (0 before the first).
func (q *Queue[P]) Seq() uint64 { return q.seq }

// Push schedules p at virtual time at, after every entry pushed before it
// at the same time.
func (q *Queue[P]) Push(at int64, p P) {
	q.seq++
	q.Heap.Push(Entry[P]{At: at, Seq: q.seq, P: p})
}
