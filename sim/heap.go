package sim

// event is one entry of the event queue. who and arg are interpreted by the
// experiment that scheduled it.
type event struct {
	at   int64  // virtual time, ns
	seq  uint64 // tie-break: equal times run in scheduling order
	who  int32
	arg  int32
	kind uint8
}

// queue is a 4-ary min-heap of events by (at, seq): half the depth of a
// binary heap, and the four children of a node share a cache line or two. It stores events by
// value in one slice, so a warmed-up queue schedules without allocating.
type queue struct {
	h   []event
	seq uint64
}

func (q *queue) reset() {
	q.h = q.h[:0]
	q.seq = 0
}

func (q *queue) len() int { return len(q.h) }

func less(a, b *event) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (q *queue) push(at int64, kind uint8, who, arg int32) {
	q.seq++
	q.h = append(q.h, event{at: at, seq: q.seq, who: who, arg: arg, kind: kind})
	h := q.h
	i := len(h) - 1
	e := h[i]
	for i > 0 {
		p := (i - 1) / 4
		if !less(&e, &h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

// pop removes and returns the earliest event. The queue must not be empty.
func (q *queue) pop() event {
	h := q.h
	top := h[0]
	n := len(h) - 1
	e := h[n]
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
			if less(&h[k], &h[m]) {
				m = k
			}
		}
		if !less(&h[m], &e) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = e
	return top
}
