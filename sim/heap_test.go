package sim

import (
	"math/rand/v2"
	"testing"
)

// The queue pops events in (time, scheduling order) order, whatever the
// order of the pushes, interleaved with pops.
func TestQueueOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q queue
	var last event
	popped := 0
	for i := range 20000 {
		q.push(int64(r.IntN(500)), 0, int32(i), 0)
		if r.IntN(3) == 0 {
			e := q.pop()
			popped++
			_ = e
		}
	}
	first := true
	for q.len() > 0 {
		e := q.pop()
		popped++
		if !first && less(&e, &last) {
			t.Fatalf("popped %+v after %+v", e, last)
		}
		first, last = false, e
	}
	if popped != 20000 {
		t.Errorf("popped %d events, pushed 20000", popped)
	}
	// Equal times come out in scheduling order.
	q.reset()
	for i := range 10 {
		q.push(7, 0, int32(i), 0)
	}
	for i := range 10 {
		if e := q.pop(); e.who != int32(i) {
			t.Fatalf("tie %d: got who=%d", i, e.who)
		}
	}
}
