package sim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/backoffkit/retry/internal/eventq"
)

// The calendar pops exactly what the heap (eventq.Queue) pops, in the same order, for
// every mix of pushes and pops: ties, events in the current slot, in the
// past, in later periods, beyond the coarse buckets, after long idle gaps,
// near the end of time, and for any slot width.
func TestCalendarMatchesQueue(t *testing.T) {
	type mix struct {
		name string
		gap  func(r *rand.Rand) int64 // how far after now an event is pushed
	}
	mixes := []mix{
		{"ties", func(r *rand.Rand) int64 { return int64(r.IntN(3)) }},
		{"near", func(r *rand.Rand) int64 { return r.Int64N(1 << 22) }},
		{"retry-storm", func(r *rand.Rand) int64 {
			switch r.IntN(4) {
			case 0:
				return int64(r.ExpFloat64() * 12.5e9) // arrivals
			case 1:
				return int64(1e9 + r.Float64()*8e9) // backoffs
			}
			return int64(1e7 + r.NormFloat64()*2e6) // network
		}},
		{"far", func(r *rand.Rand) int64 { return r.Int64N(1 << 50) }},
		{"past", func(r *rand.Rand) int64 { return r.Int64N(1<<30) - 1<<28 }},
		{"spread", func(r *rand.Rand) int64 { return int64(math.Exp(r.Float64() * 40)) }},
	}
	for _, m := range mixes {
		for _, shift := range []uint{0, 1, 10, 20, 33} {
			r := rand.New(rand.NewPCG(uint64(shift), 7))
			type payload struct {
				who, arg int32
				kind     uint8
			}
			var q eventq.Queue[payload]
			c := newCalendar[payload](shift)
			now := int64(0)
			push := func(i int) {
				at := now + m.gap(r)
				if at < 0 {
					at = 0
				}
				kind, who, arg := uint8(r.IntN(4)), int32(i), int32(r.IntN(1000))
				q.Push(at, payload{who, arg, kind})
				c.push(at, q.Seq(), payload{who, arg, kind})
			}
			pop := func() {
				if r.IntN(2) == 0 { // a peek changes nothing
					if p, want := c.peek(), q.Peek(); p.at != want.At || p.seq != want.Seq {
						t.Fatalf("%s, shift %d: peeked %+v, want %+v", m.name, shift, *p, want)
					}
				}
				w, e := q.Pop(), c.pop()
				want := entry[payload]{w.At, w.Seq, w.P}
				if *e != want {
					t.Fatalf("%s, shift %d: popped %+v, want %+v", m.name, shift, *e, want)
				}
				now = max(now, e.at)
			}
			for i := range 12_000 {
				push(i)
				for r.IntN(3) == 0 && q.Len() > 0 {
					pop()
				}
				if r.IntN(5000) == 0 { // drain: the next push finds an empty calendar
					for q.Len() > 0 {
						pop()
					}
				}
				if c.len() != q.Len() {
					t.Fatalf("%s, shift %d: len %d, want %d", m.name, shift, c.len(), q.Len())
				}
			}
			for q.Len() > 0 {
				pop()
			}
			if c.len() != 0 {
				t.Fatalf("%s, shift %d: %d events left", m.name, shift, c.len())
			}
		}
	}
}

// The end of time is a time like any other.
func TestCalendarFarFuture(t *testing.T) {
	var c calendar[int32]
	c.push(math.MaxInt64, 1, 1)
	c.push(5, 2, 2)
	c.push(math.MaxInt64, 3, 3)
	c.push(1<<62, 4, 4)
	var got []int32
	for c.len() > 0 {
		got = append(got, c.pop().p)
	}
	if len(got) != 4 || got[0] != 2 || got[1] != 4 || got[2] != 1 || got[3] != 3 {
		t.Fatalf("popped %v, want [2 4 1 3]", got)
	}
}
