package sim

import (
	"math/bits"
	"slices"

	"github.com/backoffkit/retry/internal/eventq"
)

// Sizes of the two levels of a calendar.
const (
	fineBits   = 12 // 4096 fine slots make one period
	coarseBits = 12 // 4096 coarse buckets of one period each
	nFine      = 1 << fineBits
	nCoarse    = 1 << coarseBits
)

// entry is one event of a calendar: its time, its place in the scheduling
// order and what the experiment needs to handle it.
type entry[P any] struct {
	at  int64  // virtual time, ns
	seq uint64 // tie-break: equal times run in increasing seq
	p   P
}

// before reports whether a runs before b.
func before[P, Q any](a *entry[P], b *entry[Q]) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func cmpEntry[P any](a, b entry[P]) int {
	switch {
	case a.at < b.at:
		return -1
	case a.at > b.at:
		return 1
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// calendar is an event queue that pops its entries by (at, seq), as a heap
// would, at a cost per event that does not grow with the number of events
// waiting: a two-level timing wheel. The caller numbers the entries (seq);
// entries must not share both at and seq.
//
// Time is cut into fine slots of 2^shift ns; nFine consecutive slots make a
// period. The fine buckets hold the entries of the current period, one
// bucket per slot, unsorted; the coarse buckets hold the entries of the next
// nCoarse-1 periods, one bucket per period; a heap holds the rest. An entry
// is appended to its bucket when pushed, moved at most twice (heap to coarse
// bucket to fine bucket) as the clock reaches its period, and its fine
// bucket is sorted once, when the clock reaches its slot, into the active
// list that pop takes from. A retry storm's events are mostly near (network
// delays, queueing, backoffs of seconds): they never touch the heap, and the
// only sorting is of small buckets that fit in the cache. An entry pushed
// into the current slot, or into the past, is inserted into the active list
// in order.
//
// The zero value is an empty calendar with slots of 2^20 ns (about 1 ms).
type calendar[P any] struct {
	shift uint // a fine slot is 2^shift ns
	n     int  // entries waiting

	active []entry[P] // the current slot's entries, sorted; active[pos:] wait
	pos    int
	slot   int64 // the current slot (time >> shift)
	period int64 // the current period (slot >> fineBits)

	fine    [][]entry[P] // by slot & (nFine-1), of the current period
	fineSet [nFine / 64]uint64
	coarse  []*chunk[P] // by period & (nCoarse-1), of the next periods
	coarSet [nCoarse / 64]uint64
	far     eventq.Heap[P] // the entries beyond
	free    *chunk[P]      // chunks of emptied coarse buckets, for reuse
}

// chunkLen is the number of entries of a chunk.
const chunkLen = 256

// chunk is a piece of a coarse bucket: a coarse bucket is a list of chunks,
// the first one filling, so that it grows without copying and gives its
// memory back to the calendar when it is emptied. An array that grew for a
// busy period would hold its size through the quiet periods after.
type chunk[P any] struct {
	next *chunk[P]
	n    int
	e    [chunkLen]entry[P]
}

// newCalendar returns an empty calendar whose fine slots are 2^shift ns
// (0: 2^20). The order of the entries does not depend on shift, only the
// speed: slots of a few events each at the busiest times are best.
func newCalendar[P any](shift uint) *calendar[P] {
	return &calendar[P]{shift: shift}
}

func (c *calendar[P]) len() int { return c.n }

// push adds an event at time at with tie-break seq and payload p.
func (c *calendar[P]) push(at int64, seq uint64, p P) {
	if c.fine == nil {
		if c.shift == 0 {
			c.shift = 20
		}
		c.fine = make([][]entry[P], nFine)
		c.coarse = make([]*chunk[P], nCoarse)
	}
	c.n++
	// The entry is written in place, field by field: building it first
	// and copying it costs more than the rest of a push.
	slot := at >> c.shift
	var e *entry[P]
	switch period := slot >> fineBits; {
	case slot <= c.slot:
		// The current slot (or, for an event in the past, before it: it
		// is earlier than anything waiting and is popped next).
		i, _ := slices.BinarySearchFunc(c.active[c.pos:], entry[P]{at: at, seq: seq}, cmpEntry)
		c.active = slices.Insert(c.active, c.pos+i, entry[P]{})
		e = &c.active[c.pos+i]
	case period == c.period:
		e = c.fineSlot(slot)
	case period-c.period < nCoarse:
		e = c.coarseSlot(period)
	default:
		c.pushFar(entry[P]{at: at, seq: seq, p: p})
		return
	}
	e.at, e.seq, e.p = at, seq, p
}

// fineSlot returns a new entry at the end of the fine bucket of slot, of
// the current period.
func (c *calendar[P]) fineSlot(slot int64) *entry[P] {
	i := slot & (nFine - 1)
	b := c.fine[i]
	if len(b) == cap(b) {
		b = slices.Grow(b, 1)
	}
	b = b[:len(b)+1]
	c.fine[i] = b
	c.fineSet[i/64] |= 1 << (i % 64)
	return &b[len(b)-1]
}

// coarseSlot returns a new entry in the coarse bucket of period p, a later
// one.
func (c *calendar[P]) coarseSlot(p int64) *entry[P] {
	i := p & (nCoarse - 1)
	b := c.coarse[i]
	if b == nil || b.n == chunkLen {
		nb := c.free
		if nb != nil {
			c.free = nb.next
		} else {
			nb = new(chunk[P])
		}
		nb.next, nb.n = b, 0
		c.coarse[i], b = nb, nb
	}
	b.n++
	c.coarSet[i/64] |= 1 << (i % 64)
	return &b.e[b.n-1]
}

// peek returns the earliest entry, which stays in the calendar. The pointer
// is valid until the next push or pop. The calendar must not be empty.
func (c *calendar[P]) peek() *entry[P] {
	for c.pos == len(c.active) {
		c.advance()
	}
	return &c.active[c.pos]
}

// pop removes the earliest entry and returns a pointer to it, valid until
// the next push or pop (an entry is big: copy only what is needed). The
// calendar must not be empty.
func (c *calendar[P]) pop() *entry[P] {
	e := c.peek()
	c.pos++
	c.n--
	return e
}

// advance makes the next slot with entries the current one. The active list
// is spent and some entry waits.
func (c *calendar[P]) advance() {
	c.active, c.pos = c.active[:0], 0
	for {
		i := int(c.slot & (nFine - 1))
		if j := nextSet(c.fineSet[:], i+1); j >= 0 {
			c.slot += int64(j - i)
			c.take(j)
			return
		}
		c.nextPeriod()
		if c.fineSet[0]&1 != 0 {
			c.take(0)
			return
		}
	}
}

// take makes fine bucket i, sorted, the active list.
func (c *calendar[P]) take(i int) {
	c.active, c.fine[i] = c.fine[i], c.active[:0]
	c.fineSet[i/64] &^= 1 << (i % 64)
	a := c.active
	if len(a) > 32 {
		slices.SortFunc(a, cmpEntry)
		return
	}
	// A slot holds a few entries: an insertion sort that moves them in
	// place.
	for i := 1; i < len(a); i++ {
		if !before(&a[i], &a[i-1]) {
			continue
		}
		e := a[i]
		j := i
		for ; j > 0 && before(&e, &a[j-1]); j-- {
			a[j] = a[j-1]
		}
		a[j] = e
	}
}

// nextPeriod moves the clock to the first slot of the next period with
// entries and files them into the fine buckets, which are empty.
func (c *calendar[P]) nextPeriod() {
	var next int64
	cur := int(c.period & (nCoarse - 1))
	if j := nextSet(c.coarSet[:], cur+1); j >= 0 {
		next = c.period + int64(j-cur)
	} else if j := nextSet(c.coarSet[:], 0); j >= 0 && j < cur {
		next = c.period + int64(nCoarse-cur+j)
	} else {
		next = (c.far.Peek().At >> c.shift) >> fineBits // only the heap has entries
	}
	c.period = next
	c.slot = next << fineBits
	i := next & (nCoarse - 1)
	if c.coarSet[i/64]&(1<<(i%64)) != 0 {
		c.coarSet[i/64] &^= 1 << (i % 64)
		b := c.coarse[i]
		for {
			for k := range b.n {
				e := &b.e[k]
				*c.fineSlot(e.at >> c.shift) = *e
			}
			if b.next == nil {
				break
			}
			b = b.next
		}
		b.next, c.free = c.free, c.coarse[i]
		c.coarse[i] = nil
	}
	// The entries of the heap that the coarse buckets now reach.
	for c.far.Len() > 0 {
		p := (c.far.Peek().At >> c.shift) >> fineBits
		if p-next >= nCoarse {
			break
		}
		e := c.popFar()
		if p == next {
			*c.fineSlot(e.at >> c.shift) = e
		} else {
			*c.coarseSlot(p) = e
		}
	}
}

func (c *calendar[P]) pushFar(e entry[P]) {
	c.far.Push(eventq.Entry[P]{At: e.at, Seq: e.seq, P: e.p})
}

func (c *calendar[P]) popFar() entry[P] {
	e := c.far.Pop()
	return entry[P]{at: e.At, seq: e.Seq, p: e.P}
}

// nextSet returns the index of the first set bit at or after i in set, or
// -1.
func nextSet(set []uint64, i int) int {
	w := i / 64
	if w >= len(set) {
		return -1
	}
	if m := set[w] >> (i % 64); m != 0 {
		return i + bits.TrailingZeros64(m)
	}
	for w++; w < len(set); w++ {
		if set[w] != 0 {
			return w*64 + bits.TrailingZeros64(set[w])
		}
	}
	return -1
}
