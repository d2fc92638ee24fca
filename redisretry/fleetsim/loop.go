package fleetsim

import "github.com/backoffkit/retry/internal/eventq"

// event is one event of the run: f runs at its time on behalf of p (nil: of
// nobody; a killed process's events are dropped).
type event struct {
	f func()
	p *proc
}

// stop cancels e: it reports whether e had not run yet.
func (e *event) stop() bool {
	if e.f == nil {
		return false
	}
	e.f = nil
	return true
}

// queue is the run's event queue: by virtual time (ns from the start), equal
// times in the order they were scheduled.
type queue struct{ eventq.Queue[*event] }

// push schedules f at virtual time at on behalf of p; the event returned
// can be stopped.
func (q *queue) push(at int64, p *proc, f func()) *event {
	e := &event{f: f, p: p}
	q.Push(at, e)
	return e
}
