package httpretry

import (
	"net/url"
	"sync"
	"time"
)

// overloadsToCool is how many overload signals in a row put an endpoint in
// cool-down (see WithEndpoints).
const overloadsToCool = 2

// endpoints is the shared state of WithEndpoints: the list and, per
// endpoint, the count of overload signals in a row and the end of its
// cool-down.
type endpoints struct {
	list     []endpoint
	cooldown time.Duration
	now      func() time.Time

	mu    sync.Mutex
	fails []int
	until []time.Time
}

type endpoint struct {
	scheme, host string
	base         string // scheme://host
}

func newEndpoints(list []string, cooldown time.Duration, now func() time.Time) *endpoints {
	if now == nil {
		now = time.Now
	}
	e := &endpoints{cooldown: cooldown, now: now, fails: make([]int, len(list)), until: make([]time.Time, len(list))}
	for _, s := range list {
		u, _ := url.Parse(s) // checked by WithEndpoints
		e.list = append(e.list, endpoint{scheme: u.Scheme, host: u.Host, base: u.Scheme + "://" + u.Host})
	}
	return e
}

// start returns the endpoint a request starts at: the first that is not
// cooling down, or the first of the list when all are.
func (e *endpoints) start() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for i := range e.list {
		if !now.Before(e.until[i]) {
			return i
		}
	}
	return 0
}

// next returns the endpoint a retry after an overload signal at i goes to:
// the next in order, wrapping around, that is not cooling down; i itself
// when it is the only one not cooling down; i+1 when all are.
func (e *endpoints) next(i int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	n := len(e.list)
	for k := 1; k <= n; k++ {
		j := (i + k) % n
		if !now.Before(e.until[j]) {
			return j
		}
	}
	return (i + 1) % n
}

// record notes the outcome of an attempt at endpoint i: overload is true
// for status 429 or 503 or connection refused. Another response resets the
// count; another transport error leaves it alone.
func (e *endpoints) record(i int, overload, response bool) {
	if !overload && !response {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !overload {
		e.fails[i] = 0
		return
	}
	e.fails[i]++
	if e.fails[i] >= overloadsToCool {
		e.fails[i] = 0
		e.until[i] = e.now().Add(e.cooldown)
	}
}
