package testkit

import (
	"context"
	"sync"
)

// Recorder keeps the events an observer receives, in order, safe for
// concurrent use. E is the event type (retry.Event, redisretry.Event) and
// K its kind (retry.EventKind, redisretry.EventKind).
//
// Make one with [NewRecorder]: the zero Recorder records, but Of, Count and
// Kinds need the kind function.
//
// Observe has the shape of a retry.Observer and Record that of a
// redisretry observer; either can be given where the code under test takes
// one.
type Recorder[E any, K comparable] struct {
	kind func(E) K

	mu     sync.Mutex
	events []E
}

// NewRecorder returns an empty recorder that learns an event's kind with
// kind.
func NewRecorder[E any, K comparable](kind func(E) K) *Recorder[E, K] {
	return &Recorder[E, K]{kind: kind}
}

// Observe records e; the context is not used.
func (r *Recorder[E, K]) Observe(_ context.Context, e E) { r.Record(e) }

// Record records e.
func (r *Recorder[E, K]) Record(e E) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of the events recorded so far, in order.
func (r *Recorder[E, K]) Events() []E {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]E(nil), r.events...)
}

// Of returns the events of kind k, in order.
func (r *Recorder[E, K]) Of(k K) []E {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []E
	for _, e := range r.events {
		if r.kind(e) == k {
			out = append(out, e)
		}
	}
	return out
}

// Count returns how many events of kind k were recorded.
func (r *Recorder[E, K]) Count(k K) int { return len(r.Of(k)) }

// Kinds returns the kind of each event, in order.
func (r *Recorder[E, K]) Kinds() []K {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []K
	for _, e := range r.events {
		out = append(out, r.kind(e))
	}
	return out
}

// Last returns the last event recorded, or the zero E if there is none.
func (r *Recorder[E, K]) Last() E {
	r.mu.Lock()
	defer r.mu.Unlock()
	var e E
	if len(r.events) > 0 {
		e = r.events[len(r.events)-1]
	}
	return e
}
