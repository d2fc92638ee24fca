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

// queue is a binary min-heap of events by (at, seq). It stores events by
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
		p := (i - 1) / 2
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
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && less(&h[r], &h[c]) {
			c = r
		}
		if !less(&h[c], &e) {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = e
	return top
}
