package fleetsim

// event is one entry of the run's event queue: f runs at virtual time at
// (ns from the start), on behalf of p (nil: of nobody; a killed process's
// events are dropped). Equal times run in the order they were scheduled.
type event struct {
	at  int64
	seq uint64
	f   func()
	p   *proc
}

// stop cancels e: it reports whether e had not run yet.
func (e *event) stop() bool {
	if e.f == nil {
		return false
	}
	e.f = nil
	return true
}

// queue is a binary min-heap of events by (at, seq).
type queue struct {
	h   []*event
	seq uint64
}

func before(a, b *event) bool { return a.at < b.at || (a.at == b.at && a.seq < b.seq) }

func (q *queue) push(at int64, p *proc, f func()) *event {
	q.seq++
	e := &event{at: at, seq: q.seq, f: f, p: p}
	q.h = append(q.h, e)
	h := q.h
	i := len(h) - 1
	for i > 0 {
		up := (i - 1) / 2
		if !before(e, h[up]) {
			break
		}
		h[i] = h[up]
		i = up
	}
	h[i] = e
	return e
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *queue) pop() *event {
	h := q.h
	top := h[0]
	n := len(h) - 1
	last := h[n]
	h[n] = nil
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
		if c+1 < n && before(h[c+1], h[c]) {
			c++
		}
		if !before(h[c], last) {
			break
		}
		h[i] = h[c]
		i = c
	}
	h[i] = last
	return top
}
