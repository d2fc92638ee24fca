package eventq

import (
	"math/rand/v2"
	"testing"
)

// The queue pops events in (time, scheduling order) order, whatever the
// order of the pushes, interleaved with pops.
func TestQueueOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q Queue[int32]
	var last Entry[int32]
	popped := 0
	for i := range 20000 {
		q.Push(int64(r.IntN(500)), int32(i))
		if r.IntN(3) == 0 {
			e := q.Pop()
			popped++
			_ = e
		}
	}
	first := true
	for q.Len() > 0 {
		e := q.Pop()
		popped++
		if !first && before(&e, &last) {
			t.Fatalf("popped %+v after %+v", e, last)
		}
		first, last = false, e
	}
	if popped != 20000 {
		t.Errorf("popped %d events, pushed 20000", popped)
	}
	// Equal times come out in scheduling order.
	q.Reset()
	for i := range 10 {
		q.Push(7, int32(i))
	}
	for i := range 10 {
		if e := q.Pop(); e.P != int32(i) {
			t.Fatalf("tie %d: got P=%d", i, e.P)
		}
	}
}
